"""Teacher-forced token scoring (evalkit traces / tokens / entropy --model) against the plain way.

    python benchmarks/bench_teacher.py            # the built-in model, 32 traces of 64 tokens

evalkit: `evalkit.forced.score_positions`, samples sorted by length and batched (8 sequences),
one forward pass per batch keeping only the completion positions' logits, per-token
log-probability and exact entropy from them. Baseline (named "per-sample forward"): one
unbatched forward of each prompt + completion with the full logits returned, the same
statistics computed from the completion rows: what a script that loops over samples does
(as `generate(..., output_scores=True)` returns scores one sample at a time). Both give the
same numbers (checked); the ratio is tokens per second, evalkit over baseline, one run.
"""

from __future__ import annotations

import argparse
import time

from record import result


def main() -> None:
    import torch

    from evalkit.forced import ForcedSample, score_positions
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt
    from evalkit.traces import _token_stats

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--traces", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    model, tok = load_model(resolve_model(args.model), device="cpu")
    gen = torch.Generator().manual_seed(0)
    samples = []
    for i in range(args.traces):
        prompt = tuple(tok(render_prompt(tok, f"What is {i} + {i + 3}?"), add_special_tokens=False)["input_ids"])
        length = args.tokens - (i % 8)  # a spread of lengths, as real traces have
        completion = tuple(torch.randint(100, len(tok) - 100, (length,), generator=gen).tolist())
        samples.append(ForcedSample(prompt, completion, False, 1.0))
    n_tokens = sum(len(s.completion_ids) for s in samples)

    start = time.perf_counter()
    ours = score_positions([model], samples, _token_stats, max_batch=8)
    t_ours = time.perf_counter() - start

    start = time.perf_counter()
    plain = []
    with torch.inference_mode():
        for s in samples:
            ids = torch.tensor([list(s.prompt_ids) + list(s.completion_ids)])
            logits = model(input_ids=ids).logits[0, len(s.prompt_ids) - 1 : -1].float()
            logp = torch.log_softmax(logits, -1)
            target = torch.tensor(s.completion_ids)
            plain.append(logp.gather(-1, target[:, None]).squeeze(-1).double().numpy())
    t_plain = time.perf_counter() - start

    worst = max(float(abs(a["policy"] - b).max()) for a, b in zip(ours, plain, strict=True))
    print(f"{args.traces} traces, {n_tokens} tokens, model {args.model}, torch threads {torch.get_num_threads()}")
    print(f"evalkit score_positions (batched)  {t_ours:7.2f} s  {n_tokens / t_ours:8.1f} tokens/s")
    print(f"per-sample forward (baseline)      {t_plain:7.2f} s  {n_tokens / t_plain:8.1f} tokens/s")
    result("teacher-forced scoring speed", measured=f"{n_tokens / t_ours:.1f} tok/s",
           baseline=f"per-sample forward {n_tokens / t_plain:.1f} tok/s", ratio=t_plain / t_ours, target=None,
           note=f"max |log p difference| {worst:.1e}")
    print(f"ratio evalkit / baseline (tokens/s): {t_plain / t_ours:.2f}x; max |log p difference| {worst:.2e}")


if __name__ == "__main__":
    main()
