"""Where the sampler's time goes: prefill, decode, cache, draw and Python, against the matmul rate.

    python benchmarks/profile_sampler.py                  # evalkit's sampler (hf-4), 16 prompts x n=8, 64 tokens
    python benchmarks/profile_sampler.py --sampler hf-1   # the sampler before issue 26 (benchmarks/sampler_hf1.py)

hf-4 is profiled as one lane on one thread (each of its lanes runs so; the phase timers are per
thread), its share against the one-thread dense rate. Runs the sampler once to warm up, then twice timed (the faster kept), with a timer around each
phase (exclusive: a phase inside another counts only for itself):
- prefill: the sampler's `_prefill` (shared prefix, then the rests) and the forwards inside it;
- decode: the model's forwards after the prefill (hf-4: evalkit.decode's step), less the cache writes inside them;
- cache: writing keys/values (hf-1: `DynamicLayer.update`'s torch.cat; hf-3: `InPlaceLayer.update`'s
  in-place copy), the repeat for the n samples and the pruning or compaction of finished rows;
- draw: `_draw` (softmax, entropy, CDF, search);
- Python and bookkeeping: the rest of the wall time (the loop, token and entropy bookkeeping).
Each phase is printed as seconds and share of the wall time; prefill and decode also as their
useful weight-matmul FLOP rate, a share of this machine's dense fp32 matmul rate (measured in the
same run, as bench_sampling.py does); every other phase as the points of dense-rate share it
costs (the share the sampler would reach without that phase's time). Then the decode ceiling (the
model's matmuls alone at the average useful decode batch, `bench_sampling.shape_rate`) and, from
one run under `torch.profiler`, the wall time outside any op (Python between ops) and the top ops.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import torch
from bench_sampling import matmul_flops, matmul_params, prefill_matmul_flops, shape_rate
from record import result


class Phases:
    """Exclusive wall time per phase: a phase entered inside another is subtracted from it."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.stack: list[list] = []

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            self.stack.append([name, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                _, start, inner = self.stack.pop()
                spent = time.perf_counter() - start
                self.seconds[name] += spent - inner
                if self.stack:
                    self.stack[-1][2] += spent

        return timed

    def inside(self, name: str) -> bool:
        return any(frame[0] == name for frame in self.stack)


def instrument(phases: Phases, sampler: str, model):
    """Wrap the sampler's phases (undone by the returned function); returns (sample_chunk, undo)."""
    import sampler_hf1
    from transformers.cache_utils import Cache, DynamicLayer

    import evalkit.decode as decode
    import evalkit.kvcache as kvcache
    import evalkit.sampling as sampling

    module = sampler_hf1 if sampler == "hf-1" else sampling
    patches = [(module, "_prefill", "prefill"), (module, "_draw", "draw"),
               (DynamicLayer, "update", "cache"), (Cache, "batch_select_indices", "cache"),
               (Cache, "batch_repeat_interleave", "cache"), (kvcache.InPlaceLayer, "update", "cache"),
               (kvcache, "preallocate", "cache"), (decode.LlamaStep, "__call__", "decode")]
    saved = [(owner, attr, owner.__dict__[attr]) for owner, attr, _ in patches]
    for owner, attr, name in patches:
        setattr(owner, attr, phases.wrap(name, owner.__dict__[attr]))
    forward = model.forward
    decode = phases.wrap("decode", forward)
    model.forward = lambda *a, **k: forward(*a, **k) if phases.inside("prefill") else decode(*a, **k)

    def undo():
        for owner, attr, original in saved:
            setattr(owner, attr, original)
        del model.forward

    return (sampler_hf1.sample_chunk_hf1 if sampler == "hf-1" else sampling.sample_chunk), undo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--sampler", choices=("hf-1", "hf-4"), default="hf-4")
    args = ap.parse_args()
    if args.sampler == "hf-4":
        torch.set_num_threads(1)  # one lane, on one thread: the phases are timed per thread
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import SamplingConfig, render_prompt, stop_token_ids
    from evalkit.tasks import load_task

    model, tok = load_model(resolve_model(args.model))
    stop = stop_token_ids(model, tok)
    problems = load_task("arith", size=args.prompts, seed=0).problems
    prompts = [render_prompt(tok, p.prompt) for p in problems]
    cfg = SamplingConfig(n=args.n, temperature=1.0, max_new_tokens=args.tokens, seed=0)
    prefill_flops = prefill_matmul_flops(model, tok, prompts)
    best = None
    for attempt in range(3):  # a warm-up, then the faster of two timed runs
        phases = Phases()
        sample, undo = instrument(phases, args.sampler, model)
        try:
            start = time.perf_counter()
            samples = sample(model, tok, prompts, [p.id for p in problems], cfg, stop_ids=stop)
            wall = time.perf_counter() - start
        finally:
            undo()
        if attempt and (best is None or wall < best[0]):
            best = (wall, dict(phases.seconds), samples)
    wall, seconds, samples = best
    peak = matmul_flops()
    report(args, model, wall, seconds, samples, prefill_flops, peak)
    python_share(model, tok, prompts, problems, cfg, stop, args.sampler)


def report(args, model, wall, seconds, samples, prefill_flops, peak) -> None:
    fed = sum(max(0, s.num_tokens - 1) for s in samples)
    decode_flops = 2 * matmul_params(model) * fed
    useful = prefill_flops + decode_flops
    share = useful / wall / peak
    seconds = {**seconds, "Python and bookkeeping": max(0.0, wall - sum(seconds.values()))}
    print(f"sampler {args.sampler}: {args.prompts} prompts x n={args.n}, {args.tokens} new tokens; torch threads "
          f"{torch.get_num_threads()}; dense fp32 matmul {peak / 1e9:.1f} GFLOP/s; wall {wall:.2f} s, "
          f"{sum(s.num_tokens for s in samples)} tokens; useful weight matmuls {useful / 1e9:.0f} GFLOP = "
          f"{100 * share:.1f}% of the dense rate")
    flops = {"prefill": prefill_flops, "decode": decode_flops}
    for phase in ("prefill", "decode", "cache", "draw", "Python and bookkeeping"):
        spent = seconds.get(phase, 0.0)
        if phase in flops:
            rate = flops[phase] / spent / peak if spent else float("nan")
            tail = f"{flops[phase] / 1e9:6.0f} GFLOP at {100 * rate:5.1f}% of the dense rate"
        else:
            without = useful / max(1e-9, wall - spent) / peak
            tail = f"costs {100 * (without - share):5.1f} points of the dense-rate share"
        print(f"  {phase:24s} {spent:6.2f} s  {100 * spent / wall:5.1f}% of the time   {tail}")
        result(f"sampler {args.sampler} {phase}, share of the time", measured=f"{spent:.2f} s",
               baseline=f"wall {wall:.2f} s", ratio=spent / wall, target=None, note="profile")
    steps = max(s.num_tokens for s in samples) - 1
    rows = round(fed / max(1, steps))
    ceiling = shape_rate(model, rows) / peak
    decode_rate = decode_flops / seconds["decode"] / peak
    print(f"decode forwards at {100 * decode_rate:.1f}% of the dense rate ({fed} useful rows over {steps} steps, "
          f"{rows} per step); the model's weight matmuls alone at {rows} rows (F.linear, no model around them): "
          f"{100 * ceiling:.1f}%: the decode ceiling; the whole sampler reaches {100 * share / ceiling:.0f}% of it")
    result(f"sampler {args.sampler} share of the dense matmul rate", measured=f"{100 * share:.1f}%",
           baseline=f"dense matmul {peak / 1e9:.1f} GFLOP/s", ratio=share, target=None, note="profile")
    result("the model's matmuls alone at the decode batch, share of the dense rate",
           measured=f"{100 * ceiling:.1f}% ({rows} rows)", baseline=f"dense matmul {peak / 1e9:.1f} GFLOP/s",
           ratio=ceiling, target=None, note="profile: the decode ceiling")


def python_share(model, tok, prompts, problems, cfg, stop, sampler: str) -> None:
    """One run under torch.profiler: the wall time outside every op, and the top ops."""
    import sampler_hf1
    from torch.profiler import ProfilerActivity, profile

    from evalkit.sampling import sample_chunk

    sample = sampler_hf1.sample_chunk_hf1 if sampler == "hf-1" else sample_chunk
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        sample(model, tok, prompts, [p.id for p in problems], cfg, stop_ids=stop)
        wall = time.perf_counter() - start
    events = prof.key_averages()
    ops = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"\nunder torch.profiler ({wall:.2f} s, its overhead included): ops {ops:.2f} s, outside any op "
          f"(Python between ops) {max(0.0, wall - ops):.2f} s = {100 * max(0.0, wall - ops) / wall:.1f}%; top ops:")
    for ev in sorted(events, key=lambda e: -e.self_cpu_time_total)[:10]:
        print(f"  {ev.key:48s} {ev.self_cpu_time_total / 1e6:6.2f} s  {100 * ev.self_cpu_time_total / 1e6 / wall:5.1f}%"
              f"  calls {ev.count}")


if __name__ == "__main__":
    main()
