"""`evalkit train grpo --backend vllm` against an engine of vllm.LLM's shape.

The fake engine has vLLM's documented surface: `LLM(**engine args)` building its worker
class with the `worker_extension_cls` mixed in, `generate(prompts, [SamplingParams])
-> [RequestOutput]`, `collective_rpc(method, args=)` -> one result per worker, and
`reset_prefix_cache()`. Its worker's model records every `load_weights` call (copies, as
vLLM's loader copies into its own parameters). Its completions are seeded: the right
answer for even seeds, a wrong one for odd, truncated (no stop token) for seeds % 5 == 0,
so groups have reward spread and the parse sees both finish reasons. The HF model runs on
CPU here, so the GPU check is bypassed in the engine-driven tests (it is tested alone).
The real engine is tested only where vLLM and a GPU exist."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from test_scale_vllm import CompletionOutput, FakeSamplingParams, Logprob, RequestOutput  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from evalkit.cli_train import train_app  # noqa: E402
from evalkit.errors import UsageError  # noqa: E402
from evalkit.scale import vllm_train  # noqa: E402
from evalkit.train.grpo import GRPOOptions, run_grpo  # noqa: E402

# per-token entropy bound the fake reports: -(p1 log p1 + p2 log p2), p = e^-0.5, e^-1.5
FAKE_H = -(math.exp(-0.5) * -0.5 + math.exp(-1.5) * -1.5)


class RecordingModel:
    """The worker's model: `load_weights` copies what it is given, as vLLM's loader does."""

    def __init__(self):
        self.loads: list[dict] = []

    def load_weights(self, weights):
        self.loads.append({name: t.detach().clone() for name, t in weights})
        return {name for name, _ in weights}


class FakeLLM:
    """vllm.LLM's shape, with one in-process worker (distributed_executor_backend=external_launcher)."""

    instances: list = []

    def __init__(self, **kwargs):
        from transformers import AutoTokenizer

        module, name = kwargs["worker_extension_cls"].rsplit(".", 1)
        extension = getattr(importlib.import_module(module), name)
        worker_cls = type("Worker", (extension,), {})  # vLLM adds the extension to its worker's bases
        self.worker = worker_cls()
        self.worker.model_runner = SimpleNamespace(model=RecordingModel())
        self.kwargs, self.events, self.calls, self.outputs = kwargs, [], [], []
        self.tok = AutoTokenizer.from_pretrained(kwargs["model"])
        FakeLLM.instances.append(self)

    def generate(self, prompts, params, use_tqdm=True):
        self.events.append("generate")
        self.calls.append((list(prompts), list(params)))
        outs = []
        for r, (prompt, p) in enumerate(zip(prompts, params, strict=True)):
            text = self.tok.decode(prompt["prompt_token_ids"])
            a, b = map(int, re.search(r"What is (\d+) \+ (\d+)\?", text).groups())
            answer = str(a + b if p.seed % 2 == 0 else a + b + 1)
            digits = self.tok(answer, add_special_tokens=False)["input_ids"]
            if p.seed % 5 == 0:  # ran to max_tokens
                ids, finish = (digits * p.max_tokens)[: p.max_tokens], "length"
            else:
                ids, finish = digits + [self.tok.eos_token_id], "stop"
            lps = [{t: Logprob(-0.5, 1), t + 1: Logprob(-1.5, 2)} for t in ids]
            done = CompletionOutput(0, self.tok.decode(ids, skip_special_tokens=True), ids, -1.0, lps, finish)
            self.outputs.append((p.seed, ids, finish))
            outs.append(RequestOutput(str(r), text, [done]))
        return outs

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.events.append(method)
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def reset_prefix_cache(self):
        self.events.append("reset_prefix_cache")
        return True


@pytest.fixture
def fake_vllm(monkeypatch):
    """`import vllm` gives the fake; the GPU check is off (the HF policy runs on CPU here)."""
    FakeLLM.instances.clear()
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(LLM=FakeLLM, SamplingParams=FakeSamplingParams))
    monkeypatch.setattr(vllm_train, "require_gpu", lambda device: None)
    return FakeLLM


def _opts(model, **kw):
    base = dict(model=str(model), task="arith", task_size=12, group_size=4, prompts_per_step=2, steps=2,
                lr=1e-2, max_new_tokens=4, temperature=0.9, top_p=0.95, grader_workers=1, save_every=1,
                device="cpu", backend="vllm", seed=3)
    return GRPOOptions(**{**base, **kw})


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_grpo_samples_with_the_engine_and_pushes_every_update(tiny_model, tmp_path, fake_vllm):
    from evalkit.models import load_model
    from evalkit.sampling import render_prompt, sample_seed, stop_token_ids
    from evalkit.train.common import derive_seed, load_training_task, pick_problems

    opts = _opts(tiny_model)
    out = tmp_path / "run"
    summary = run_grpo(opts, out)
    assert summary["complete"]
    (llm,) = fake_vllm.instances
    assert llm.kwargs["model"] == str(tiny_model) and llm.kwargs["dtype"] == "float32"
    assert llm.kwargs["distributed_executor_backend"] == "external_launcher"
    assert llm.kwargs["worker_extension_cls"] == "evalkit.scale.vllm_train.WeightSyncExtension"
    # sample, push, drop the stale prefix cache; twice
    assert llm.events == ["generate", "evalkit_load_weights", "reset_prefix_cache"] * 2

    model, tok = load_model(SimpleNamespace(name="tiny", path=str(tiny_model)))
    stop = stop_token_ids(model, tok)
    task = load_training_task("arith", 12, 0, "{}")
    for step, (prompts, params) in enumerate(llm.calls, start=1):
        problems = pick_problems(task.problems, 2, derive_seed(3, "grpo-prompts", step, 0))
        seed = derive_seed(3, "grpo-sample", step, 0)
        assert [p.seed for p in params] == [sample_seed(seed, pr.id, j) for pr in problems for j in range(4)]
        ids = [tok(render_prompt(tok, pr.prompt), add_special_tokens=False)["input_ids"] for pr in problems]
        assert prompts == [{"prompt_token_ids": x} for x in ids for _ in range(4)]
        for p in params:
            assert (p.n, p.temperature, p.top_p, p.top_k, p.max_tokens) == (1, 0.9, 0.95, -1, 4)
            assert p.logprobs == vllm_train.ENTROPY_TOPK and p.stop_token_ids == stop
            assert p.skip_special_tokens is False

    start = _weights(Path(tiny_model))
    pushes = llm.worker.model_runner.model.loads
    for step, pushed in enumerate(pushes, start=1):
        saved = _weights(out / f"step-{step:06d}")
        assert set(saved) <= set(pushed)
        for name, tensor in saved.items():  # the engine got the updated policy, bit for bit
            assert pushed[name].dtype == tensor.dtype and torch.equal(pushed[name], tensor), (step, name)
    assert any(not torch.equal(pushes[0][n], start[n]) for n in start)  # step 1 did change the policy
    assert any(not torch.equal(pushes[1][n], pushes[0][n]) for n in start)

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for r in records:
        for key in ("reward", "reward_std", "frac_reward_zero_std", "entropy", "loss", "grad_norm",
                    "clip_ratio/region_mean", "completions/mean_length", "completions/clipped_ratio"):
            assert key in r, key
        assert r["entropy_kind"] == "topk_lower_bound" and r["entropy"] == pytest.approx(FAKE_H)
    first = llm.outputs[:8]
    assert records[0]["completions/clipped_ratio"] == sum(f == "length" for _, _, f in first) / 8
    assert records[0]["completions/mean_length"] == sum(len(ids) for _, ids, _ in first) / 8
    assert sorted(p.name for p in out.glob("step-*")) == ["step-000001", "step-000002"]
    assert (out / "step-000002" / "optimizer.pt").is_file()
    assert json.loads((out / "run.json").read_text())["options"]["backend"] == "vllm"


def test_groups_hold_exactly_the_engine_tokens_and_the_scorer_rewards(tiny_model, fake_vllm):
    from evalkit.grading import Grader
    from evalkit.models import load_model
    from evalkit.sampling import render_prompt, stop_token_ids
    from evalkit.train.common import load_training_task
    from evalkit.train.grpo import _sample_groups

    opts = _opts(tiny_model, max_new_tokens=3)
    model, tok = load_model(SimpleNamespace(name="tiny", path=str(tiny_model)))
    stop = stop_token_ids(model, tok)
    engine = vllm_train.VllmPolicySampler(str(tiny_model), opts, tok, stop, "cuda")
    problems = list(load_training_task("arith", 12, 0, "{}").problems[:3])
    with Grader(load_training_task("arith", 12, 0, "{}").spec, workers=1) as grader:
        groups, samples = _sample_groups(None, tok, grader, problems, opts, 11, stop, engine.sample)
    outputs = iter(engine.llm.outputs)
    finishes = set()
    for i, group in enumerate(groups):
        assert group.prompt_ids == tuple(tok(render_prompt(tok, problems[i].prompt), add_special_tokens=False)["input_ids"])
        for completion, reward in zip(group.completions, group.rewards, strict=True):
            seed, ids, finish = next(outputs)
            finishes.add(finish)
            assert completion == tuple(ids)  # stop token dropped by the parse, re-appended as eos
            if finish == "stop":
                assert reward == (1.0 if seed % 2 == 0 else 0.0)
    assert finishes == {"stop", "length"}
    assert [s.num_tokens for s in samples] == [len(ids) for _, ids, _ in engine.llm.outputs]


def test_resume_reloads_the_engine_from_the_checkpoint_and_refuses_the_other_backend(tiny_model, tmp_path,
                                                                                     fake_vllm):
    out = tmp_path / "run"
    run_grpo(_opts(tiny_model, steps=1), out)
    with pytest.raises(UsageError, match="options"):
        run_grpo(_opts(tiny_model, steps=2, backend="hf"), out)
    run_grpo(_opts(tiny_model, steps=2), out)
    assert fake_vllm.instances[-1].kwargs["model"] == str(out / "step-000001")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]


def test_cpu_device_is_refused_before_the_run_folder(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(LLM=FakeLLM, SamplingParams=FakeSamplingParams))
    with pytest.raises(UsageError, match="--device cuda"):
        run_grpo(_opts(tiny_model), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_missing_vllm_is_refused_before_the_run_folder(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(UsageError, match=r"pip install 'evalkit\[vllm\]'"):
        run_grpo(_opts(tiny_model, device="cuda"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, message", [
    (["grpo", "--backend", "vllm", "--device", "cpu"], "--device cuda"),
    (["grpo", "--backend", "tgi"], "choose hf or vllm"),
    (["es", "--backend", "vllm"], "not supported"),
    (["es-grpo", "--backend", "vllm", "--device", "cpu"], "--device cuda"),
])
def test_cli_refuses_with_exit_2(tmp_path, monkeypatch, args, message):
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(LLM=FakeLLM, SamplingParams=FakeSamplingParams))
    result = CliRunner().invoke(train_app, [*args, "--out", str(tmp_path / "x")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "x").exists()  # es-grpo: refused before the ES stage


def test_push_refuses_a_partial_load():
    class Short:
        def collective_rpc(self, method, args=()):
            return [len(args[0]) - 1]

    engine = object.__new__(vllm_train.VllmPolicySampler)
    engine.llm = Short()
    model = torch.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="sent 2 tensors"):
        engine.push(model)


def _has_gpu() -> bool:
    return torch.cuda.is_available()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None or not _has_gpu(),
                    reason="needs vLLM and a CUDA GPU; vLLM's wheels would replace the pinned CPU torch here")
def test_real_engine_grpo_run(tiny_model, tmp_path):
    opts = replace(_opts(tiny_model), device="cuda")
    summary = run_grpo(opts, tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert summary["complete"] and [r["step"] for r in records] == [1, 2]
    assert all(r["entropy_kind"] == "topk_lower_bound" for r in records)
