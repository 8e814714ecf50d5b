"""vLLM sampling backend for `evalkit passk --backend vllm` (GPU); vLLM is imported lazily.

    evalkit passk MODEL --backend vllm --device cuda --n 64 --k 1,8,64 --logprobs 20 --out runs/vllm

Requests: one request per (problem, sample), `n=1`, the rendered prompt given as
token ids (vLLM's TokensPrompt, tokenized with `add_special_tokens=False` as the
HF backend does: a string prompt would get a BOS the HF path never sees), with its own seed
`sample_seed(run seed, problem id, j)`: the hashed seeds the HF backend
records, so seeds never overlap across problems (the `seed + j` pitfall of
docs/references.md). vLLM's automatic prefix caching computes each shared prompt
once. SamplingParams, as documented by vLLM: `n=1, seed, temperature` (0 =
greedy), `top_p`, `top_k=-1` (off; recorded as 0 = off, as for HF),
`max_tokens`, `logprobs=k`, `stop_token_ids`, `skip_special_tokens=False`.

Parsing `RequestOutput.outputs[0]` (a CompletionOutput): `.text` is the
completion (vLLM drops the stop token's text), `.token_ids` includes the stop
token when it ended on one (`num_tokens` counts it, as for HF), `.logprobs` is
one dict per generated token mapping token id -> Logprob(logprob, rank,
decoded_token): the top k plus the sampled token, `.finish_reason` is `stop`
or `length`.

Entropy: vLLM returns only the top-k log-probabilities (of the distribution
vLLM reports: raw model logits by default in vLLM V1, i.e. before
temperature), so the per-token `-sum_{v in top-k} p_v log p_v` is a truncated
lower bound of the exact entropy (every omitted term is >= 0), not the exact
value the HF backend records (docs/references.md, "Token entropy"). Each sample
says `entropy_kind: "topk_lower_bound"`, and run.json/summary.json say so in
`sampling.entropy`; `evalkit entropy --model` recomputes it exactly.

The calls and fields used here are listed in evalkit.scale.vllm_surface; `make vllm-check`
(tools/vllm_check.py) checks them against the newest vLLM release in a virtual environment of
its own (build/venv-vllm; vLLM's CUDA torch never enters .venv), and the tests' fakes are built
from the same lists. run.json's `sampler` for this backend is SAMPLER.

Limits: samples differ from the HF backend's (other kernels and random
streams); vLLM handles multi-GPU itself (tensor parallel), so Ray workers
are not combined with it (evalkit.options.SCALE). Never run here against a real engine (no GPU):
request building and output parsing are tested on fakes of vLLM's checked shapes, and on vLLM's
own objects by `make vllm-check`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from evalkit.errors import UsageError
from evalkit.options import PasskOptions
from evalkit.sampling import Sample, SamplingConfig, sample_seed

__all__ = ["import_vllm", "build_requests", "token_prompts", "parse_completion", "topk_entropy", "VllmChunks",
           "SAMPLER"]

ENTROPY_KIND = "topk_lower_bound"
SAMPLER = "vllm-1"  # run.json's `sampler` for this backend (evalkit.sampling.sampler_version); vLLM's own release is
# not part of it: its samples differ from the HF backend's in any case (see Limits)


def import_vllm():
    """The `vllm` module, or a UsageError naming the extra to install."""
    try:
        import vllm
    except ImportError:
        raise UsageError(
            "--backend vllm needs vLLM on a CUDA machine: pip install 'evalkit[vllm]' "
            "(or use the default --backend hf)"
        ) from None
    return vllm


def build_requests(problem_ids: Sequence[str], cfg: SamplingConfig, *, logprobs: int, stop_ids: Sequence[int]) -> list[dict]:
    """SamplingParams keyword sets, one per (problem i, sample j), in (i, j) order."""
    return [
        {
            "n": 1,
            "seed": sample_seed(cfg.seed, pid, j),
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "top_k": -1,
            "max_tokens": cfg.max_new_tokens,
            "logprobs": logprobs,
            "stop_token_ids": list(stop_ids),
            "skip_special_tokens": False,
        }
        for pid in problem_ids
        for j in range(cfg.n)
    ]


def token_prompts(tokenizer, prompts: Sequence[str], n: int) -> list[dict]:
    """generate's prompts: vLLM TokensPrompts `{"prompt_token_ids": ids}`, each rendered prompt n times,
    tokenized with `add_special_tokens=False` as the HF backend and the loss see them (a string
    prompt would get vLLM's special tokens: a second BOS after a chat template that has one)."""
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return [{"prompt_token_ids": list(x)} for x in ids for _ in range(n)]


def topk_entropy(position_logprobs) -> float | None:
    """Mean over tokens of `-sum_{top-k} p log p` (nats): a lower bound of the exact entropy."""
    if not position_logprobs:
        return None
    per_token = [-sum(math.exp(lp.logprob) * lp.logprob for lp in top.values()) for top in position_logprobs]
    return sum(per_token) / len(per_token)


def parse_completion(completion, problem_index: int, sample_index: int, seed: int, stop_ids, tokenizer) -> tuple[str, Sample]:
    """(text, Sample) from one CompletionOutput; the stop token is counted but not kept. The text
    is decoded from the kept token ids as on the HF backend (`decode_completion`), not vLLM's own
    detokenization (which puts spaces between special tokens)."""
    from evalkit.sampling import decode_completion

    ids = tuple(completion.token_ids)
    stopped = completion.finish_reason == "stop"
    kept = ids[:-1] if stopped and ids and ids[-1] in stop_ids else ids
    finish = "stop" if stopped else "length"
    sample = Sample(problem_index, sample_index, kept, len(ids), finish, topk_entropy(completion.logprobs), seed)
    return decode_completion(tokenizer, kept), sample


def sampling_settings(cfg: SamplingConfig, logprobs: int) -> dict:
    return {
        **cfg.effective(),
        "backend": "vllm",
        "requests": "one per (problem, sample): n=1, seed=sample_seed(seed, problem_id, j)",
        "logprobs": logprobs,
        "entropy": f"{ENTROPY_KIND}: -sum of p log p over vLLM's top-{logprobs} logprobs per token, nats; "
                   "exact: evalkit entropy --model",
    }


class VllmChunks:
    """Chunk executor over one vLLM engine (interface of evalkit.chunks.LocalChunks); entropy
    from the top-`opts.logprobs` log-probs, labelled a bound."""

    def __init__(self, ref, opts: PasskOptions, device: str, *, vllm=None):
        """`vllm`: the module (tests pass an object of the same shape); imported when None.
        The device is checked by `evalkit.options.check_device` before this is built."""
        from evalkit.chunks import sampling_config

        vllm = vllm or import_vllm()
        self.vllm = vllm
        self.llm = vllm.LLM(model=ref.path, dtype=opts.dtype, seed=opts.seed)
        self.tokenizer = self.llm.get_tokenizer()
        self.stop = stop_ids(ref.path, self.tokenizer)
        self.cfg, self.logprobs = sampling_config(opts), opts.logprobs
        self.sampling = sampling_settings(self.cfg, opts.logprobs)
        self.extra = {"entropy_kind": ENTROPY_KIND}

    def map(self, jobs) -> Iterator[tuple[int, dict]]:
        from evalkit.sampling import render_prompt

        for index, part in jobs:
            requests = build_requests([p.id for p in part], self.cfg, logprobs=self.logprobs, stop_ids=self.stop)
            prompts = token_prompts(self.tokenizer, [render_prompt(self.tokenizer, p.prompt) for p in part], self.cfg.n)
            params = [self.vllm.SamplingParams(**r) for r in requests]
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
            drawn = {}
            for r, (request, out) in enumerate(zip(requests, outputs, strict=True)):
                i, j = divmod(r, self.cfg.n)
                drawn[(part[i].id, j)] = parse_completion(out.outputs[0], i, j, request["seed"], self.stop, self.tokenizer)
            yield index, drawn

    def close(self) -> None:
        pass


def stop_ids(path: str, tokenizer) -> list[int]:
    """The checkpoint's generation-config eos ids plus the tokenizer's (no model loaded here)."""
    from transformers import GenerationConfig

    from evalkit.sampling import eos_ids

    try:
        eos = GenerationConfig.from_pretrained(path).eos_token_id
    except OSError:
        eos = None
    return eos_ids(eos, tokenizer)
