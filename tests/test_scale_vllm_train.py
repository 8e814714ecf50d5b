"""`evalkit train grpo|es --backend vllm` against an engine of vllm.LLM's shape.

The fake engine has vLLM's documented surface: `LLM(**engine args)` building its worker
class with the `worker_extension_cls` mixed in, `generate(prompts, [SamplingParams])
-> [RequestOutput]`, `collective_rpc(method, args=)` -> one result per worker, and
`reset_prefix_cache()`. Its worker's model records every `load_weights` call (copies, as
vLLM's loader copies into its own parameters). Its completions are seeded: the right
answer for even seeds, a wrong one for odd, truncated (no stop token) for seeds % 5 == 0,
so groups have reward spread and the parse sees both finish reasons. The HF model runs on
CPU here, so the GPU check is bypassed in the engine-driven tests (it is tested alone).
For ES, `ESFakeLLM` answers greedy requests (temperature 0) by a rule of the weights it was
last given and the prompt, so each member's fitness depends on its (pushed) weights and a direct
computation with evalkit.train.es's functions can predict every push, fitness and update.
The real engine is tested only where vLLM and a GPU exist."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalkit.sampling import SAMPLER_VERSION

torch = pytest.importorskip("torch")

from helpers.fake_vllm import (  # noqa: E402
    CompletionOutput,
    Logprob,
    RequestOutput,
    check_llm_kwargs,
    fake_vllm_module,
    install_fake_vllm,
)
from typer.testing import CliRunner  # noqa: E402

from evalkit.cli_train import train_app  # noqa: E402
from evalkit.errors import UsageError  # noqa: E402
from evalkit.train import vllm as vllm_train  # noqa: E402
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

        check_llm_kwargs(kwargs)

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
            right, cut = self.decide(text, p)
            digits = self.tok(str(a + b if right else a + b + 1), add_special_tokens=False)["input_ids"]
            if cut:  # ran to max_tokens
                ids, finish = (digits * p.max_tokens)[: p.max_tokens], "length"
            else:
                ids, finish = digits + [self.tok.eos_token_id], "stop"
            lps = [{t: Logprob(-0.5, 1), t + 1: Logprob(-1.5, 2)} for t in ids]
            done = CompletionOutput(index=0, text=self.tok.decode(ids, skip_special_tokens=True), token_ids=ids,
                                    cumulative_logprob=-1.0, logprobs=lps, finish_reason=finish)
            self.outputs.append((p.seed, ids, finish))
            outs.append(RequestOutput(request_id=str(r), prompt=text, outputs=[done]))
        return outs

    def decide(self, text: str, p) -> tuple[bool, bool]:
        """(answer right, ran to max_tokens): right for even seeds, cut for seeds divisible by 5."""
        return p.seed % 2 == 0, p.seed % 5 == 0

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.events.append(method)
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def reset_prefix_cache(self):
        self.events.append("reset_prefix_cache")
        return True


@pytest.fixture
def fake_vllm(monkeypatch):
    """`import vllm` gives a fake of vLLM's CPU build (the HF policy runs on CPU here)."""
    FakeLLM.instances.clear()
    install_fake_vllm(monkeypatch, fake_vllm_module(FakeLLM, device="cpu"))
    _no_gpu_check(monkeypatch)
    return FakeLLM


def _no_gpu_check(monkeypatch):
    """--device cuda passes the options' device check on this CPU machine (evalkit.options)."""
    import evalkit.options

    monkeypatch.setattr(evalkit.options, "device_problem", lambda device: None)


def _opts(model, **kw):
    base = dict(model=str(model), task="arith", task_size=12, group_size=4, prompts_per_step=2, steps=2,
                lr=1e-2, max_new_tokens=4, temperature=0.9, top_p=0.95, grader_workers=1, save_every=1,
                device="cpu", backend="vllm", seed=3)
    return GRPOOptions(**{**base, **kw})


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_grpo_samples_with_the_engine_and_pushes_every_update(tiny_model, tmp_path, fake_vllm):
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt, sample_seed, stop_token_ids
    from evalkit.train.common import derive_seed, load_training_task, pick_problems

    opts = _opts(tiny_model)
    out = tmp_path / "run"
    summary = run_grpo(opts, out)
    assert summary["complete"]
    (llm,) = fake_vllm.instances
    assert llm.kwargs["model"] == str(tiny_model) and llm.kwargs["dtype"] == "float32"
    assert llm.kwargs["distributed_executor_backend"] == "external_launcher"
    assert llm.kwargs["worker_extension_cls"] == "evalkit.train.vllm.WeightSyncExtension"
    # sample, push, drop the stale prefix cache; twice
    assert llm.events == ["generate", "evalkit_load_weights", "reset_prefix_cache"] * 2

    model, tok = load_model(resolve_model(str(tiny_model)))
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
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt, stop_token_ids
    from evalkit.train.common import load_training_task
    from evalkit.train.grpo import Policy, _sample_groups

    opts = _opts(tiny_model, max_new_tokens=3)
    model, tok = load_model(resolve_model(str(tiny_model)))
    stop = stop_token_ids(model, tok)
    engine = vllm_train.VllmPolicySampler(str(tiny_model), opts, tok, stop, "cpu")
    problems = list(load_training_task("arith", 12, 0, "{}").problems[:3])
    with Grader(load_training_task("arith", 12, 0, "{}").spec, workers=1) as grader:
        groups, samples = _sample_groups(Policy(None, tok, grader, tuple(stop), opts, engine.sample), problems, 11)
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
    with pytest.raises(UsageError, match=f'sampler="vllm-1", not "{SAMPLER_VERSION}"'):  # the backend's sampler
        run_grpo(_opts(tiny_model, steps=2, backend="hf"), out)
    run_grpo(_opts(tiny_model, steps=2), out)
    assert fake_vllm.instances[-1].kwargs["model"] == str(out / "step-000001")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]


def test_cpu_device_is_refused_before_the_run_folder(tiny_model, tmp_path, monkeypatch):
    install_fake_vllm(monkeypatch, fake_vllm_module(FakeLLM))
    with pytest.raises(UsageError, match="make vllm"):
        run_grpo(_opts(tiny_model), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_missing_vllm_is_refused_before_the_run_folder(tiny_model, tmp_path, monkeypatch):
    install_fake_vllm(monkeypatch, None)
    _no_gpu_check(monkeypatch)
    with pytest.raises(UsageError, match=r"pip install 'evalkit\[vllm\]'"):
        run_grpo(_opts(tiny_model, device="cuda"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, message", [
    (["grpo", "--backend", "vllm", "--device", "cpu"], "make vllm"),
    (["grpo", "--backend", "tgi"], "choose hf or vllm"),
    (["es", "--backend", "vllm", "--device", "cpu"], "make vllm"),
    (["es", "--backend", "vllm", "--ray-workers", "2"], "drop --ray-workers"),
    (["es", "--backend", "tgi"], "choose hf or vllm"),
    (["es-grpo", "--backend", "vllm", "--device", "cpu"], "make vllm"),
])
def test_cli_refuses_with_exit_2(tmp_path, monkeypatch, args, message):
    install_fake_vllm(monkeypatch, fake_vllm_module(FakeLLM))
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


def _weights_key(tensors) -> tuple:
    from evalkit.train.es import checksums

    return tuple(checksums(list(tensors)))


def _es_right(key: tuple, text: str) -> bool:
    """The ES fake's rule: is the answer to this prompt right under these weights?"""
    from evalkit.train.common import derive_seed

    return derive_seed(*key, text) % 3 != 0


class ESFakeLLM(FakeLLM):
    """Greedy requests get the right answer iff `_es_right(last pushed weights, prompt)`; a wrong
    answer runs to max_tokens for some prompts. Sampled requests (GRPO) go to FakeLLM."""

    def decide(self, text: str, p) -> tuple[bool, bool]:
        from evalkit.train.common import derive_seed

        if p.temperature != 0:  # sampled (GRPO): FakeLLM's rule
            return super().decide(text, p)
        right = _es_right(_weights_key(self.worker.model_runner.model.loads[-1].values()), text)
        return right, not right and derive_seed("cut", text) % 2 == 0


@pytest.fixture
def es_fake(monkeypatch):
    FakeLLM.instances.clear()
    install_fake_vllm(monkeypatch, fake_vllm_module(ESFakeLLM, device="cpu"))
    return ESFakeLLM


def _es_opts(model, **kw):
    from evalkit.train.es import ESOptions

    base = dict(model=str(model), task="arith", task_size=12, population=3, sigma=0.05, alpha=0.05,
                iterations=2, prompts_per_iteration=4, max_new_tokens=4, grader_workers=1, save_every=1,
                device="cpu", backend="vllm", seed=5)
    return ESOptions(**{**base, **kw})


def _bits_equal(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_es_pushes_each_perturbed_member_and_updates_exactly_as_es_does(tiny_model, tmp_path, es_fake):
    """Every push is the HF model's perturbed weights bit for bit, once per member; the saved
    weights equal perturb_/restore_/es_update_ applied directly with the fitnesses the rule gives."""
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt, sample_seed, stop_token_ids
    from evalkit.train.common import derive_seed, load_training_task, pick_problems
    from evalkit.train.es import _params, es_update_, member_seeds, perturb_, restore_, run_es
    from metrics.grpo import population_zscores

    opts = _es_opts(tiny_model)
    out = tmp_path / "run"
    summary = run_es(opts, out)
    assert summary["complete"] and summary["restore_residual_total"] == 0
    (llm,) = es_fake.instances
    assert llm.kwargs["model"] == str(tiny_model) and llm.kwargs["worker_extension_cls"] == vllm_train.EXTENSION
    assert llm.events == ["evalkit_load_weights", "reset_prefix_cache", "generate"] * (2 * 3)
    pushes = llm.worker.model_runner.model.loads
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]

    model, tok = load_model(resolve_model(str(tiny_model)))
    stop = stop_token_ids(model, tok)
    params = _params(model)
    task = load_training_task("arith", 12, 0, "{}")
    start = {k: v.clone() for k, v in model.state_dict().items()}
    calls, outputs = iter(llm.calls), iter(llm.outputs)
    for step in (1, 2):
        problems = pick_problems(task.problems, 4, derive_seed(5, "es-prompts", step))
        ids = [tok(render_prompt(tok, pr.prompt), add_special_tokens=False)["input_ids"] for pr in problems]
        seeds = member_seeds(5, step, 3)
        fitness, member_outputs = [], []
        for n, s in enumerate(seeds):
            fixes = perturb_(params, s, opts.sigma, opts.noise)
            current = model.state_dict()
            pushed = pushes[(step - 1) * 3 + n]
            assert list(pushed) == list(current)
            assert all(_bits_equal(pushed[k], current[k]) for k in current), (step, n)
            prompts, sent = next(calls)
            assert prompts == [{"prompt_token_ids": x} for x in ids]
            for pr, p in zip(problems, sent, strict=True):  # greedy, one per prompt
                assert (p.n, p.temperature, p.max_tokens, p.seed) == (1, 0.0, 4, sample_seed(0, pr.id, 0))
                assert p.stop_token_ids == stop
            key = _weights_key(current.values())
            fitness.append(sum(_es_right(key, tok.decode(x)) for x in ids) / len(ids))
            member_outputs += [next(outputs) for _ in ids]
            restore_(params, s, opts.sigma, opts.noise, fixes)
        es_update_(params, seeds, population_zscores(fitness), opts.alpha, opts.noise)
        saved = _weights(out / f"step-{step:06d}")
        for name, tensor in saved.items():
            assert _bits_equal(tensor, model.state_dict()[name]), (step, name)
        r = records[step - 1]
        assert r["step"] == step and r["restore_residual"] == 0
        assert r["fitness/mean"] == pytest.approx(sum(fitness) / 3)
        assert r["fitness/max"] == max(fitness) and r["fitness/min"] == min(fitness)
        assert r["entropy_kind"] == "topk_lower_bound" and r["entropy"] == pytest.approx(FAKE_H)
        assert r["completions/clipped_ratio"] == sum(f == "length" for _, _, f in member_outputs) / 12
        assert r["completions/mean_length"] == sum(len(i) for _, i, _ in member_outputs) / 12
    assert not all(r["zero_spread"] for r in records)  # the update did something
    assert any(not torch.equal(start[k], v) for k, v in model.state_dict().items())
    assert any(f == "length" for _, _, f in llm.outputs)
    assert json.loads((out / "run.json").read_text())["options"]["backend"] == "vllm"


def test_es_resume_reloads_the_engine_from_the_checkpoint_and_refuses_the_other_backend(tiny_model, tmp_path,
                                                                                        es_fake):
    from evalkit.train.es import run_es

    out = tmp_path / "run"
    run_es(_es_opts(tiny_model, iterations=1, population=2), out)
    with pytest.raises(UsageError, match=f'sampler="vllm-1", not "{SAMPLER_VERSION}"'):  # the backend's sampler
        run_es(_es_opts(tiny_model, iterations=2, population=2, backend="hf"), out)
    summary = run_es(_es_opts(tiny_model, iterations=2, population=2), out)
    assert summary["complete"] and es_fake.instances[-1].kwargs["model"] == str(out / "step-000001")
    assert len(es_fake.instances[-1].worker.model_runner.model.loads) == 2  # step 2's members only


def test_es_grpo_uses_the_engine_in_both_stages(tiny_model, tmp_path, es_fake, monkeypatch):
    from evalkit.train import run_es_grpo

    events = []  # the ES stage's engine is released before the GRPO stage builds its own
    build, close = vllm_train.VllmPolicySampler.__init__, vllm_train.VllmPolicySampler.close
    monkeypatch.setattr(vllm_train.VllmPolicySampler, "__init__",
                        lambda self, *a, **k: events.append("build") or build(self, *a, **k))
    monkeypatch.setattr(vllm_train.VllmPolicySampler, "close",
                        lambda self: events.append("close") or close(self))
    out = tmp_path / "run"
    summary = run_es_grpo(_es_opts(tiny_model, iterations=1, population=2),
                          _opts(tiny_model, steps=1), out)
    assert summary["complete"]
    es_llm, grpo_llm = es_fake.instances
    assert es_llm.events == ["evalkit_load_weights", "reset_prefix_cache", "generate"] * 2
    assert grpo_llm.kwargs["model"] == str(out / "es" / "step-000001")
    for stage in ("es", "grpo"):
        assert json.loads((out / stage / "run.json").read_text())["options"]["backend"] == "vllm"
    assert events == ["build", "close", "build", "close"]


def test_es_cpu_and_missing_vllm_are_refused_before_the_run_folder(tiny_model, tmp_path, monkeypatch):
    from evalkit.train.es import run_es

    install_fake_vllm(monkeypatch, fake_vllm_module(ESFakeLLM))
    with pytest.raises(UsageError, match="make vllm"):
        run_es(_es_opts(tiny_model), tmp_path / "a")
    install_fake_vllm(monkeypatch, None)
    _no_gpu_check(monkeypatch)
    with pytest.raises(UsageError, match=r"pip install 'evalkit\[vllm\]'"):
        run_es(_es_opts(tiny_model, device="cuda"), tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_es_run_written_before_the_backend_option_resumes(tiny_model, tmp_path):
    """ES run.json of evalkit 0.1 had no `backend`: records.upgrade gives it hf, so the
    old run resumes (and is extended) instead of being refused as another run."""
    from evalkit.train.es import run_es

    opts = _es_opts(tiny_model, backend="hf", iterations=1, population=2, prompts_per_iteration=1)
    run_es(opts, tmp_path / "r")
    path = tmp_path / "r" / "run.json"
    settings = json.loads(path.read_text())
    assert settings["options"]["backend"] == "hf"
    del settings["options"]["backend"]
    settings.pop("schema_version", None)
    path.write_text(json.dumps(settings))
    summary = run_es(replace(opts, iterations=2), tmp_path / "r")
    assert summary["complete"] and summary["steps"] == 2


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


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None or not _has_gpu(),
                    reason="needs vLLM and a CUDA GPU; vLLM's wheels would replace the pinned CPU torch here")
def test_real_engine_es_run(tiny_model, tmp_path):
    from evalkit.train.es import run_es

    summary = run_es(replace(_es_opts(tiny_model), device="cuda"), tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert summary["complete"] and [r["step"] for r in records] == [1, 2]
    assert all(r["restore_residual"] == 0 and r["entropy_kind"] == "topk_lower_bound" for r in records)
