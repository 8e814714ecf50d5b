"""Where the sampler's time goes: prefill and decode, per kind of work, against the matmul rate.

    python benchmarks/profile_sampler.py          # built-in model, 16 prompts x n=8, 64 tokens

Runs evalkit's `sample_chunk` once to warm up, then once under
`torch.profiler` and once plainly timed with the prefill separated (a
forward hook on the model marks the first call). Prints, per phase, the
wall time, the FLOPs of the weights' matmuls (2 x parameters in linear
layers x tokens through them) and their share of this machine's dense fp32
matmul rate (measured in the same run, as bench_sampling.py does), then the
profile's self CPU time grouped into: weight matmuls (the 49k-vocabulary
lm_head apart), attention, the token draw (softmax, cumsum, searchsorted),
cache and tensor bookkeeping (cat, index_select, copies), other ops, and
what is left of the wall time (Python between ops).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import torch
from bench_sampling import matmul_flops, matmul_params
from record import result

GROUPS = {
    "weight matmuls": ("aten::addmm", "aten::mm", "aten::linear", "aten::matmul", "aten::bmm"),
    "attention": ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_softmax_backward_data"),
    "token draw": ("aten::_log_softmax", "aten::log_softmax", "aten::exp", "aten::cumsum", "aten::searchsorted",
                   "aten::argmax", "aten::sort", "aten::masked_fill", "aten::gather"),
    "cache and bookkeeping": ("aten::cat", "aten::index_select", "aten::index", "aten::copy_", "aten::clone",
                              "aten::repeat_interleave", "aten::isin", "aten::nonzero", "aten::_to_copy",
                              "aten::contiguous", "aten::item", "aten::_local_scalar_dense", "aten::empty",
                              "aten::resize_", "aten::slice", "aten::select", "aten::view", "aten::reshape",
                              "aten::expand", "aten::transpose", "aten::unsqueeze", "aten::as_strided"),
}


def shape_rate(model, rows: int, reps: int = 5) -> float:
    """FLOP/s of one forward's weight matmuls at `rows` rows, run back to back (best of reps)."""
    import torch.nn.functional as F

    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = {w.shape[1]: torch.randn(rows, w.shape[1]) for w in weights}
    flops = sum(2 * rows * w.numel() for w in weights)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(reps):
            t = time.perf_counter()
            for w in weights:
                F.linear(inputs[w.shape[1]], w)
            best = min(best, time.perf_counter() - t)
    return flops / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import SamplingConfig, render_prompt, sample_chunk, stop_token_ids
    from evalkit.tasks import load_task

    model, tok = load_model(resolve_model(args.model))
    stop = stop_token_ids(model, tok)
    problems = load_task("arith", size=args.prompts, seed=0).problems
    prompts = [render_prompt(tok, p.prompt) for p in problems]
    ids = [p.id for p in problems]
    cfg = SamplingConfig(n=args.n, temperature=1.0, max_new_tokens=args.tokens, seed=0)
    params = matmul_params(model)
    lm_head = model.get_output_embeddings().weight.numel()

    def run():
        return sample_chunk(model, tok, prompts, ids, cfg, stop_ids=stop)

    run()  # warm-up
    marks: list[float] = []
    rows: list[int] = []

    def hook(_module, inputs, kwargs):
        marks.append(time.perf_counter())
        rows.append(int((kwargs.get("input_ids") if "input_ids" in kwargs else inputs[0]).numel()))

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    best = None
    for _ in range(2):  # best of two: one timing on a loaded machine says little
        marks.clear()
        rows.clear()
        start = time.perf_counter()
        run()
        end = time.perf_counter()
        if best is None or end - start < best[1] - best[0]:
            best = (start, end, list(marks), list(rows))
    start, end, marks, rows = best
    handle.remove()
    # forward calls: prefill (1 or 2 with a shared prefix), then one per decode step
    n_prefill = 2 if len(rows) > 1 and rows[0] < rows[1] else 1
    prefill_s = marks[n_prefill] - start if len(marks) > n_prefill else end - start
    decode_s = end - start - prefill_s
    prefill_tokens = sum(rows[:n_prefill])
    peak = matmul_flops()
    # prefill keeps only the last position's logits: lm_head runs once per prompt there
    prefill_flops = 2 * ((params - lm_head) * prefill_tokens + lm_head * args.prompts)
    decode_flops = 2 * params * sum(rows[n_prefill:])
    print(f"{args.prompts} prompts x n={args.n}, {args.tokens} new tokens; torch threads {torch.get_num_threads()}; "
          f"dense fp32 matmul {peak / 1e9:.1f} GFLOP/s")
    print(f"prefill  {prefill_s:6.2f} s  {prefill_tokens:6d} tokens  {prefill_flops / prefill_s / 1e9:6.1f} GFLOP/s "
          f"= {100 * prefill_flops / prefill_s / peak:5.1f}% of the matmul rate")
    print(f"decode   {decode_s:6.2f} s  {sum(rows[n_prefill:]):6d} rows     {decode_flops / decode_s / 1e9:6.1f} GFLOP/s "
          f"= {100 * decode_flops / decode_s / peak:5.1f}% ({len(rows) - n_prefill} steps, "
          f"{sum(rows[n_prefill:]) / max(1, len(rows) - n_prefill):.0f} rows per step on average)")
    print(f"total    {end - start:6.2f} s  (lm_head is {100 * lm_head / params:.0f}% of the matmul parameters)")
    per_step = round(sum(rows[n_prefill:]) / max(1, len(rows) - n_prefill))
    ceiling = shape_rate(model, per_step)
    print(f"the model's weight matmuls alone, {per_step} rows each (F.linear, no model around them): "
          f"{ceiling / 1e9:.1f} GFLOP/s = {100 * ceiling / peak:.1f}% of the dense rate: the decode ceiling")
    result("sampler decode, share of the dense matmul rate", measured=f"{decode_flops / decode_s / 1e9:.1f} GFLOP/s",
           baseline=f"dense matmul {peak / 1e9:.1f} GFLOP/s", ratio=decode_flops / decode_s / peak, target=None,
           note="profile")
    result("the model's matmuls alone at the decode batch, share of the dense rate",
           measured=f"{ceiling / 1e9:.1f} GFLOP/s ({per_step} rows)", baseline=f"dense matmul {peak / 1e9:.1f} GFLOP/s",
           ratio=ceiling / peak, target=None, note="profile: the decode ceiling")

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        run()
        wall = time.perf_counter() - t0
    by_group: dict[str, float] = defaultdict(float)
    head = 0.0
    vocab = lm_head // model.config.hidden_size
    for ev in prof.key_averages(group_by_input_shape=True):
        group = next((g for g, names in GROUPS.items() if ev.key in names), "other ops")
        seconds = ev.self_cpu_time_total / 1e6
        if group == "weight matmuls" and str(vocab) in str(ev.input_shapes):
            head += seconds
            group = "lm_head matmul"
        by_group[group] += seconds
    ops = sum(by_group.values())
    print(f"\nprofiled run {wall:.2f} s (profiler overhead included); self CPU time by kind:")
    for group, seconds in sorted(by_group.items(), key=lambda x: -x[1]):
        print(f"  {group:24s} {seconds:6.2f} s  {100 * seconds / wall:5.1f}%")
    print(f"  {'outside ops (Python)':24s} {max(0.0, wall - ops):6.2f} s  {100 * max(0.0, wall - ops) / wall:5.1f}%")
    top = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:12]
    print("\ntop ops by self CPU time:")
    for ev in top:
        print(f"  {ev.key:48s} {ev.self_cpu_time_total / 1e6:6.2f} s  calls {ev.count}")


if __name__ == "__main__":
    main()
