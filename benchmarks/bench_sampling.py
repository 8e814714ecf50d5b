"""Sampler throughput against plain `model.generate` and against the previous sampler, in one run.

    python benchmarks/bench_sampling.py                          # the default model, 16 prompts, n=8, 64 tokens
    python benchmarks/bench_sampling.py --compact 0,0.5,0.75,0.9,1 --skip-baseline   # COMPACT_BELOW's sweep

Baselines (named): `model.generate(num_return_sequences=n)` called once per
problem, plain sampling (top_k=0, top_p=1, temperature 1); one left-padded
batched `generate` call; and sampler hf-1 (benchmarks/sampler_hf1.py, the
sampler before issue 26: cache grown by concatenation, every finished row
pruned at once). evalkit's sampler runs the same prompts, n and length, with
and without entropy recording; it and hf-1 alternate three times (best of
each), since the load drifts over a run. Printed: generated tokens per second
of each, the ratios, the entropy overhead, and the share of this machine's
dense fp32 matmul rate (measured here) that each sampler's useful weight
matmuls reach: the prefill as executed (hooks) plus 2 x parameters per
token fed back (a sample's tokens but its last), so the finished rows that
evalkit's sampler keeps in the batch until it compacts (none at COMPACT_BELOW = 1) are counted as waste, not work.
The decode ceiling is the model's weight matmuls alone, back to back, at the
average number of useful rows per decode step (`shape_rate`).
"""

from __future__ import annotations

import argparse
import time

import torch
from record import result

from evalkit.sampling import SAMPLER_VERSION


def matmul_flops(size: int = 1536, reps: int = 6) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * size**3 / best


def generated_tokens(sequences, prompt_len: int, stop: list[int], pad: int) -> int:
    total = 0
    for row in sequences[:, prompt_len:].tolist():
        count = 0
        for tok in row:
            count += 1
            if tok in stop:
                break
        total += count
    return total


def baseline_per_problem(model, tok, prompts, n, steps, stop):
    tokens, start = 0, time.perf_counter()
    for p in prompts:
        enc = tok([p], return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(
                **enc, do_sample=True, top_k=0, top_p=1.0, temperature=1.0, num_return_sequences=n,
                max_new_tokens=steps, eos_token_id=stop, pad_token_id=tok.pad_token_id,
            )
        tokens += generated_tokens(out, enc["input_ids"].shape[1], stop, tok.pad_token_id)
    return tokens, time.perf_counter() - start


def baseline_batched(model, tok, prompts, n, steps, stop):
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(
            **enc, do_sample=True, top_k=0, top_p=1.0, temperature=1.0, num_return_sequences=n,
            max_new_tokens=steps, eos_token_id=stop, pad_token_id=tok.pad_token_id,
        )
    return generated_tokens(out, enc["input_ids"].shape[1], stop, tok.pad_token_id), time.perf_counter() - start


def evalkit_sampler(model, tok, prompts, n, steps, stop, entropy: bool, sampler=None):
    """(tokens, seconds, samples) of one chunk; `sampler`: sample_chunk's signature (default evalkit's)."""
    from evalkit.sampling import SamplingConfig, sample_chunk

    cfg = SamplingConfig(n=n, temperature=1.0, max_new_tokens=steps, seed=0, record_entropy=entropy)
    start = time.perf_counter()
    samples = (sampler or sample_chunk)(model, tok, prompts, [str(i) for i in range(len(prompts))], cfg,
                                        stop_ids=stop)
    return sum(s.num_tokens for s in samples), time.perf_counter() - start, samples


def shape_rate(model, rows: int, reps: int = 5) -> float:
    """FLOP/s of one forward's weight matmuls at `rows` rows, run back to back (best of reps): the
    decode's ceiling, the rate its matmuls could reach with nothing around them."""
    import torch.nn.functional as F

    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = {w.shape[1]: torch.randn(max(1, rows), w.shape[1]) for w in weights}
    flops = sum(2 * max(1, rows) * w.numel() for w in weights)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(reps):
            t = time.perf_counter()
            for w in weights:
                F.linear(inputs[w.shape[1]], w)
            best = min(best, time.perf_counter() - t)
    return flops / best


def useful_flops(model, prefill_flops: float, samples) -> float:
    """The weight-matmul FLOPs a sampler needs: the prefill's plus 2 x parameters per token fed back."""
    return prefill_flops + 2 * matmul_params(model) * sum(max(0, s.num_tokens - 1) for s in samples)


def prefill_matmul_flops(model, tok, prompts) -> float:
    """The weight matmuls of the sampler's prefill (shared prefix once, then the rests), by hooks."""
    from evalkit.sampling import _prefill

    with torch.inference_mode():
        return executed_matmul_flops(model, lambda: _prefill(model, tok, prompts, "cpu"))


def matmul_params(model) -> int:
    """Weights that enter a matmul per token: every Linear (lm_head included)."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def executed_matmul_flops(model, fn) -> float:
    """FLOPs of the weights' matmuls that `fn()` actually runs: a hook on every Linear adds
    2 x rows x in x out per call. Work the sampler avoids is not counted: the shared
    prompt prefix runs once, the prefill's lm_head sees only the last position
    (logits_to_keep=1), finished rows leave the batch."""
    total = 0

    def count(module, inputs, _output):
        nonlocal total
        total += 2 * (inputs[0].numel() // module.in_features) * module.weight.numel()

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        fn()
    finally:
        for h in hooks:
            h.remove()
    return float(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--skip-baseline", action="store_true", help="No generate baselines (e.g. on GPU).")
    parser.add_argument("--compact", default="", help="COMPACT_BELOW values to time evalkit's sampler at (a sweep), e.g. 0,0.5,1")
    args = parser.parse_args()

    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt, stop_token_ids
    from evalkit.tasks import load_task

    model, tok = load_model(resolve_model(args.model))
    stop = stop_token_ids(model, tok)
    problems = load_task("arith", size=args.prompts, seed=0).problems
    prompts = [render_prompt(tok, p.prompt) for p in problems]
    print(f"torch threads: {torch.get_num_threads()}; {args.prompts} prompts x n={args.n}, {args.tokens} new tokens")
    if args.compact:
        sweep(model, tok, prompts, args, stop)
        return
    timed, runs = compare(model, tok, prompts, args, stop)
    report(model, tok, prompts, timed, runs["evalkit, entropy"])


def compare(model, tok, prompts, args, stop) -> tuple[dict, dict]:
    """({name: (tokens, best seconds, first seconds, samples)} of every sampler and baseline, the
    samplers' runs by name)."""
    from sampler_hf1 import sample_chunk_hf1

    n, steps = args.n, args.tokens
    runs = {
        "evalkit, no entropy": lambda: evalkit_sampler(model, tok, prompts, n, steps, stop, False),
        "evalkit, entropy": lambda: evalkit_sampler(model, tok, prompts, n, steps, stop, True),
        "sampler hf-1, entropy": lambda: evalkit_sampler(model, tok, prompts, n, steps, stop, True, sample_chunk_hf1),
    }
    timed = {}
    if not args.skip_baseline:
        for name, fn in (("per-problem generate (baseline)", baseline_per_problem),
                         ("batched generate", baseline_batched)):
            tokens, seconds = fn(model, tok, prompts, n, steps, stop)
            timed[name] = (tokens, seconds, seconds, None)
    runs["evalkit, entropy"]()  # warm-up of the preallocating path
    # alternated three times, best of each (the load drifts over a run: alternating hits every side alike)
    for _ in range(3):
        for name, fn in runs.items():
            tokens, seconds, samples = fn()
            best = min(seconds, timed[name][1]) if name in timed else seconds
            timed[name] = (tokens, best, timed[name][2] if name in timed else seconds, samples)
    for name, (tokens, best, _, _) in timed.items():
        print(f"{name:34s} {tokens:6d} tokens {best:7.2f} s {tokens / best:8.1f} tok/s")
    return timed, runs


def report(model, tok, prompts, timed: dict, again) -> None:
    """The RESULT rows; `again` is kept for callers (evalkit.decode's step bypasses Linear hooks)."""
    rate = {name: tokens / best for name, (tokens, best, _, _) in timed.items()}
    base = rate.get("per-problem generate (baseline)")
    if base:  # against the baselines' single runs: evalkit's first run, not its best
        tokens, _, first, _ = timed["evalkit, entropy"]
        print(f"\nratio evalkit (entropy, first run) / per-problem baseline: {tokens / first / base:.2f}x  (target >= 3x)")
        print(f"ratio batched generate / per-problem baseline:   {rate['batched generate'] / base:.2f}x")
        result("sampler tokens/s vs per-problem generate", measured=f"{tokens / first:.1f} tok/s (first run)",
               baseline=f"per-problem generate {base:.1f} tok/s", ratio=tokens / first / base, target=">= 3")
    old = rate["sampler hf-1, entropy"]
    print(f"ratio evalkit ({SAMPLER_VERSION}) / sampler hf-1, entropy on, best of 3 each: {rate['evalkit, entropy'] / old:.2f}x  "
          "(target >= 1.5x)")
    result("sampler tokens/s vs sampler hf-1", measured=f"{rate['evalkit, entropy']:.1f} tok/s",
           baseline=f"sampler hf-1 {old:.1f} tok/s", ratio=rate["evalkit, entropy"] / old, target=">= 1.5",
           note="best of 3 alternated runs each, entropy on")
    with_h, without = timed["evalkit, entropy"][1], timed["evalkit, no entropy"][1]
    print(f"entropy recording overhead: {100 * (with_h / without - 1):+.1f}%  (target < 10%)")
    result("sampler time with entropy / without", measured=f"{with_h:.2f} s", baseline=f"no entropy {without:.2f} s",
           ratio=with_h / without, target="<= 1.1")
    dense_and_ceiling(model, tok, prompts, timed, again)


def dense_and_ceiling(model, tok, prompts, timed: dict, again) -> None:
    """Each sampler's useful matmul FLOP rate against the dense rate and the decode ceiling."""
    peak, prefill = matmul_flops(), prefill_matmul_flops(model, tok, prompts)
    shares = {}
    for name in ("evalkit, entropy", "sampler hf-1, entropy"):
        _, best, _, samples = timed[name]
        shares[name] = useful_flops(model, prefill, samples) / best / peak
    _, best, _, samples = timed["evalkit, entropy"]
    fed = sum(max(0, s.num_tokens - 1) for s in samples)
    steps = max(s.num_tokens for s in samples) - 1
    ceiling = shape_rate(model, round(fed / max(1, steps))) / peak
    print(f"dense fp32 matmul here: {peak / 1e9:.1f} GFLOP/s; useful weight-matmul rate: evalkit "
          f"{100 * shares['evalkit, entropy']:.1f}%, hf-1 {100 * shares['sampler hf-1, entropy']:.1f}% of it; "
          f"evalkit's useful matmuls {useful_flops(model, prefill, samples) / 1e9:.0f} GFLOP (no finished row is kept: "
          f"COMPACT_BELOW = 1); decode ceiling at {round(fed / max(1, steps))} rows per step "
          f"{100 * ceiling:.1f}%")
    share = shares["evalkit, entropy"]
    result("sampler share of the fp32 matmul rate", measured=f"{share * peak / 1e9:.1f} GFLOP/s",
           baseline=f"dense {1536}x{1536} matmul {peak / 1e9:.1f} GFLOP/s", ratio=share, target=">= 0.45",
           note=f"useful weight matmuls, prefill + decode; hf-1 in the same run {shares['sampler hf-1, entropy']:.3f}")
    result("sampler share of the decode ceiling", measured=f"{100 * share:.1f}% of the dense rate",
           baseline=f"the model's matmuls alone at the decode batch: {100 * ceiling:.1f}%", ratio=share / ceiling,
           target=">= 0.75", note="either this or the dense-rate share is the issue-26 target")


def sweep(model, tok, prompts, args, stop) -> None:
    """evalkit's tokens/s at each COMPACT_BELOW (the samples change with it), best of 3 alternated."""
    import evalkit.sampling as sampling

    values = [float(x) for x in args.compact.split(",")]
    best: dict[float, tuple] = {}
    default = sampling.COMPACT_BELOW
    try:
        for _ in range(3):
            for value in values:
                sampling.COMPACT_BELOW = value
                tokens, seconds, _ = evalkit_sampler(model, tok, prompts, args.n, args.tokens, stop, True)
                if value not in best or seconds < best[value][1]:
                    best[value] = (tokens, seconds)
    finally:
        sampling.COMPACT_BELOW = default
    for value, (tokens, seconds) in best.items():
        print(f"COMPACT_BELOW {value:4.2f}: {tokens:6d} tokens {seconds:6.2f} s {tokens / seconds:7.1f} tok/s")


if __name__ == "__main__":
    main()
