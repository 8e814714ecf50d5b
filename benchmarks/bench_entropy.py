"""Teacher-forced entropy against a naive per-sample forward pass, in one run.

    python benchmarks/bench_entropy.py                 # built-in smollm2-135m, 2 prompts x n=8, 48 tokens
    python benchmarks/bench_entropy.py --n 4 --tokens 32

Completions are first drawn with evalkit's sampler (entropy recorded). Then:
- baseline `naive`: one forward pass per sample over prompt + completion
  with full logits for every position, entropy of the completion positions;
- evalkit `teacher_entropy`: length-sorted batches, `logits_to_keep` so only
  completion positions reach the vocabulary projection.
Printed: seconds and samples/s of each, the speed ratio against naive, and
the largest |teacher - recorded| and |naive - recorded| in nats (agreement
with the sampler on a real 49k-vocabulary tokenizer, from token ids).
"""

from __future__ import annotations

import argparse
import time

from record import result


def naive(model, forced) -> list[float]:
    import torch

    out = []
    with torch.inference_mode():
        for s in forced:
            ids = list(s.prompt_ids) + list(s.completion_ids[: s.num_tokens - 1])
            logits = model(input_ids=torch.tensor([ids])).logits[0]
            t = s.temperature if s.temperature > 0 else 1.0
            logp = torch.log_softmax(logits[len(s.prompt_ids) - 1 :].float() / t, dim=-1)
            out.append(float(-(logp.exp() * logp).sum(-1).double().mean()))
    return out


def main() -> None:
    import torch

    from evalkit.forced import ForcedSample, teacher_entropy
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import SamplingConfig, render_prompt, sample_chunk, stop_token_ids

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model, tok = load_model(resolve_model(args.model))
    users = ["What is 13 + 29? Think step by step.", "Name three prime numbers and explain why."]
    prompts = [render_prompt(tok, u) for u in users]
    cfg = SamplingConfig(n=args.n, temperature=1.0, max_new_tokens=args.tokens, seed=0)
    start = time.perf_counter()
    samples = sample_chunk(model, tok, prompts, ["a", "b"], cfg, stop_ids=stop_token_ids(model, tok))
    sample_s = time.perf_counter() - start
    ids = [tuple(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    forced = [ForcedSample(ids[s.problem_index], s.token_ids, s.finish_reason == "stop", 1.0) for s in samples]
    recorded = [s.mean_entropy for s in samples]

    start = time.perf_counter()
    base = naive(model, forced)
    naive_s = time.perf_counter() - start
    start = time.perf_counter()
    ours = teacher_entropy(model, forced)
    ours_s = time.perf_counter() - start

    k = len(forced)
    tokens = sum(f.num_tokens for f in forced)
    print(f"{args.model}: {k} samples, {tokens} generated tokens (sampling them took {sample_s:.2f}s)")
    print(f"naive per-sample forward : {naive_s:7.2f}s  {k / naive_s:6.1f} samples/s")
    print(f"evalkit teacher_entropy  : {ours_s:7.2f}s  {k / ours_s:6.1f} samples/s  "
          f"speed ratio vs naive {naive_s / ours_s:.2f}x")
    result("teacher-forced entropy speed", measured=f"{ours_s:.2f} s", baseline=f"per-sample forward {naive_s:.2f} s",
           ratio=naive_s / ours_s, target=None)
    print(f"max |teacher - recorded| = {max(abs(a - b) for a, b in zip(ours, recorded, strict=True)):.2e} nats; "
          f"max |naive - recorded| = {max(abs(a - b) for a, b in zip(base, recorded, strict=True)):.2e} nats")


if __name__ == "__main__":
    main()
