"""evalkit diff against the naive method: both models loaded whole, deltas in torch.

    python benchmarks/bench_diff.py              # default-model bf16 pair + 1.5B-shaped pair
    python benchmarks/bench_diff.py --no-large   # only the default model's pair

Baseline (named, measured in the same run): `naive` = AutoModelForCausalLM.from_pretrained of
both checkpoints in bf16, then per parameter `b.float() - a.float()` with the same counts and
norms (changed bits, > atol, ||d||, max |d|). Each method runs in its own subprocess; peak
memory is that process's VmHWM (resident set high-water mark: mapped file pages count), wall
time is the load-and-compare call (imports and kernel loading excluded, the kernels' build
and cache-load times reported separately; the numba and numpy paths are also timed on the
first pair). "plain read" reads
the same files once to warm the page cache, then once more timed (the page cache cannot be
dropped here): the throughput ceiling of any tool that must look at every byte.

Pairs: (1) the built-in smollm2-135m cast to bf16, and a copy where 20% of the entries got
noise of 1e-3 (RL-like sparsity); (2) random bf16 tensors with Qwen2.5-1.5B's shapes (28
layers, hidden 1536, vocab 151936, tied embeddings), two shards per side, 20% of entries moved
by one bf16 ulp. Targets: memory <= 0.15x naive, wall <= 0.1x naive, throughput >= 0.5x read.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from record import result

ROOT = Path(__file__).resolve().parents[1]
QWEN15 = dict(vocab=151936, hidden=1536, inter=8960, layers=28, heads=12, kv_heads=2)


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_diff(a: str, b: str, kernel: str = "auto") -> dict:
    from evalkit.diff import DiffOptions, _pick_kernel, diff_checkpoints

    size = sum(f.stat().st_size for p in (a, b) for f in Path(p).glob("*.safetensors"))
    start = time.perf_counter()
    kernel = _pick_kernel(kernel, size)  # what diff_checkpoints picks (it counts tensor bytes)
    if kernel == "numba":  # the other paths never import numba (~130 MB resident)
        from evalkit import diff_kernels as K

        K.warm_up()  # numba: load the cached machine code (or compile it): reported apart
    warm = time.perf_counter() - start  # for C: load the built library (or build it)
    start, cpu = time.perf_counter(), time.process_time()
    summary = diff_checkpoints([a, b], DiffOptions(kernel=kernel)).summary
    overall = summary["updates"]["other"]["overall"]
    return {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu, "warm": warm,
            "kernel": kernel,
            "changed": overall["changed_bits"],
            "changed_atol": overall["changed_atol"], "update_norm": overall["update_norm"]}


def child_naive(a: str, b: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    start, cpu = time.perf_counter(), time.process_time()
    ma = AutoModelForCausalLM.from_pretrained(a, dtype=torch.bfloat16)
    mb = AutoModelForCausalLM.from_pretrained(b, dtype=torch.bfloat16)
    pb = dict(mb.named_parameters())
    changed = changed_atol = 0
    sq, mx = 0.0, 0.0
    with torch.no_grad():
        for name, p in ma.named_parameters():
            q = pb[name]
            d = q.float() - p.float()
            changed += int((p.view(torch.int16) != q.view(torch.int16)).sum())
            changed_atol += int((d.abs() > 1e-5).sum())
            sq += float((d.double() ** 2).sum())
            mx = max(mx, float(d.abs().max()))
    return {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu,
            "changed": changed,
            "changed_atol": changed_atol, "update_norm": math.sqrt(sq)}


def kernel_compile_times(which: str) -> tuple[float, float]:
    """Seconds to build the C (`c`) or numba (`numba`) kernels on an empty cache and to load
    them from the cache, each in a fresh process (imports included)."""
    code = {"numba": "from evalkit import diff_kernels as K; K.warm_up()",
            "c": "from evalkit import diff_ckernel as K; assert K.available(), K.reason()"}[which]
    code = f"import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"
    with tempfile.TemporaryDirectory(prefix="kernel_cache_") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "EVALKIT_CACHE": cache}
        times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      cwd=ROOT, env=env, check=True).stdout) for _ in range(2)]
    return times[0], times[1]


def run_child(method: str, a: Path, b: Path) -> dict:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", method, str(a), str(b)],
                         capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"{method} child failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_wall"] = time.perf_counter() - start
    return result


def plain_read(files: list[Path]) -> tuple[int, float]:
    buf = bytearray(8 << 20)
    total, start = 0, time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    return total, time.perf_counter() - start


def write_st(path: Path, shapes: dict, make) -> None:
    """Write a bf16 safetensors file tensor by tensor: make(name, shape) -> uint16 bits."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = math.prod(shape) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(len(text).to_bytes(8, "little") + text)
        for name, shape in shapes.items():
            fh.write(make(name, shape).tobytes())


def qwen_shapes() -> dict:
    q = QWEN15
    kv, h, i = q["kv_heads"] * q["hidden"] // q["heads"], q["hidden"], q["inter"]
    shapes = {"model.embed_tokens.weight": (q["vocab"], h), "model.norm.weight": (h,)}
    for layer in range(q["layers"]):
        p = f"model.layers.{layer}."
        shapes.update({
            p + "self_attn.q_proj.weight": (h, h), p + "self_attn.q_proj.bias": (h,),
            p + "self_attn.k_proj.weight": (kv, h), p + "self_attn.k_proj.bias": (kv,),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.v_proj.bias": (kv,),
            p + "self_attn.o_proj.weight": (h, h), p + "mlp.gate_proj.weight": (i, h),
            p + "mlp.up_proj.weight": (i, h), p + "mlp.down_proj.weight": (h, i),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
        })
    return shapes


def qwen_config() -> dict:
    q = QWEN15
    return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": q["hidden"],
            "intermediate_size": q["inter"], "num_hidden_layers": q["layers"],
            "num_attention_heads": q["heads"], "num_key_value_heads": q["kv_heads"],
            "vocab_size": q["vocab"], "tie_word_embeddings": True, "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6, "hidden_act": "silu", "torch_dtype": "bfloat16"}


def make_large_pair(root: Path) -> tuple[Path, Path]:
    """Random bf16 Qwen2.5-1.5B-shaped base, and a copy with 20% of entries moved one ulp."""
    shapes = qwen_shapes()
    names = list(shapes)
    shards = [names[: len(names) // 2], names[len(names) // 2:]]  # embedding alone-ish first
    rng = np.random.default_rng(0)
    seeds = {n: int(rng.integers(2**31)) for n in names}

    def base_bits(name, shape):
        if len(shape) == 1:
            return np.full(shape, 0x3F80, np.uint16)  # norms at 1.0, biases too
        # random sign and mantissa, exponents 2^-9..2^-8 (|w| ~ 0.002..0.008): fast to draw
        bits = np.random.default_rng(seeds[name]).integers(0, 1 << 16, shape, dtype=np.uint16)
        bits &= 0x81FF
        bits |= 0x3B00
        return bits

    def moved_bits(name, shape):
        bits = base_bits(name, shape)
        draw = np.random.default_rng(seeds[name] + 1).integers(0, 1 << 16, shape, dtype=np.uint16)
        bits ^= (draw < 13107).astype(np.uint16)  # 20% of entries move one ulp up or down
        return bits

    dirs = (root / "large_base", root / "large_moved")
    for folder, make in zip(dirs, (base_bits, moved_bits), strict=True):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(qwen_config()))
        weight_map = {}
        for k, part in enumerate(shards):
            shard = f"model-{k + 1:05d}-of-00002.safetensors"
            write_st(folder / shard, {n: shapes[n] for n in part}, make)
            weight_map.update(dict.fromkeys(part, shard))
        total = sum(math.prod(shape) * 2 for shape in shapes.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return dirs


def make_small_pair(root: Path) -> tuple[Path, Path]:
    """The built-in model cast to bf16, and a copy with noise 1e-3 on 20% of the entries."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from evalkit.models import resolve_model

    src = Path(resolve_model("smollm2-135m").path)
    weights = load_file(src / "model.safetensors")
    gen = torch.Generator().manual_seed(0)
    dirs = (root / "small_base", root / "small_moved")
    for folder in dirs:
        folder.mkdir()
        config = json.loads((src / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
        for extra in ("generation_config.json",):
            if (src / extra).is_file():
                shutil.copy(src / extra, folder)
    base = {k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()}
    save_file(base, str(dirs[0] / "model.safetensors"), metadata={"format": "pt"})
    moved = {}
    for k, v in weights.items():
        mask = torch.rand(v.shape, generator=gen) < 0.2
        noise = 1e-3 * torch.randn(v.shape, generator=gen) * mask
        moved[k] = (v + noise).to(torch.bfloat16).contiguous()
    save_file(moved, str(dirs[1] / "model.safetensors"), metadata={"format": "pt"})
    return dirs


def mem_available_gb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def bench_pair(label: str, a: Path, b: Path, run_naive: bool, others: bool = False) -> None:
    files = sorted(a.glob("*.safetensors")) + sorted(b.glob("*.safetensors"))
    nbytes = sum(f.stat().st_size for f in files)
    plain_read(files)  # warm the page cache
    _, read_s = plain_read(files)
    ours = run_child("diff", a, b)  # kernel "auto": C when a compiler built it
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n== {label}: {len(files)} files, {nbytes / 1e9:.2f} GB (load average {load}, "
          f"{os.cpu_count()} cores: wall times are inflated when the load exceeds the cores)")
    print(f"plain read      {read_s:7.2f} s  {nbytes / read_s / 1e9:6.2f} GB/s")
    print(f"evalkit diff    {ours['wall']:7.2f} s  {nbytes / ours['wall'] / 1e9:6.2f} GB/s  "
          f"[{ours['kernel']} kernels] "
          f"peak {ours['peak_rss_mb']:7.0f} MB  cpu {ours['cpu']:.2f} s  "
          f"(process {ours['process_wall']:.2f} s)")
    print(f"throughput vs plain read: {read_s / ours['wall']:.3f}x  (target >= 0.5)  "
          f"[kernels loaded before timing in {ours['warm']:.2f} s]")
    result(f"diff throughput vs plain read, {label.split(' (')[0]}", measured=f"{ours['wall']:.2f} s",
           baseline=f"page-cached plain read {read_s:.2f} s", ratio=read_s / ours["wall"], target=">= 0.5")
    for other in ("numba", "numpy") if others else ():
        ref = run_child(f"diff-{other}", a, b)
        print(f"diff, {other:5} path {ref['wall']:6.2f} s  {nbytes / ref['wall'] / 1e9:6.2f} GB/s  "
              f"peak {ref['peak_rss_mb']:7.0f} MB  cpu {ref['cpu']:.2f} s  -> {ours['kernel']} "
              f"path {ref['wall'] / ours['wall']:.2f}x faster; same figures: "
              f"{(ref['changed'], ref['update_norm']) == (ours['changed'], ours['update_norm'])}")
    if not run_naive:
        print("naive: skipped (not enough free memory or --no-large-naive)")
        return
    naive = run_child("naive", a, b)
    print(f"naive (torch)   {naive['wall']:7.2f} s  peak {naive['peak_rss_mb']:7.0f} MB  "
          f"cpu {naive['cpu']:.2f} s  (process {naive['process_wall']:.2f} s)")
    print(f"peak memory ratio diff/naive: {ours['peak_rss_mb'] / naive['peak_rss_mb']:.3f}x  (target <= 0.15)")
    print(f"wall time ratio diff/naive:   {ours['wall'] / naive['wall']:.3f}x  (target <= 0.1)")
    print(f"cpu time ratio diff/naive:    {ours['cpu'] / naive['cpu']:.3f}x  (all threads)")
    short = label.split(" (")[0]
    result(f"diff peak memory vs naive, {short}", measured=f"{ours['peak_rss_mb']:.0f} MB",
           baseline=f"naive torch {naive['peak_rss_mb']:.0f} MB", ratio=ours["peak_rss_mb"] / naive["peak_rss_mb"],
           target="<= 0.15")
    result(f"diff wall time vs naive, {short}", measured=f"{ours['wall']:.2f} s",
           baseline=f"naive torch {naive['wall']:.2f} s", ratio=ours["wall"] / naive["wall"], target="<= 0.1")
    same = (ours["changed"], ours["changed_atol"]) == (naive["changed"], naive["changed_atol"])
    print(f"same counts as naive: {same} (changed {ours['changed']} vs {naive['changed']}, "
          f"> atol {ours['changed_atol']} vs {naive['changed_atol']}); update norm "
          f"{ours['update_norm']:.6g} vs {naive['update_norm']:.6g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-large", action="store_true", help="skip the 1.5B-shaped pair")
    parser.add_argument("--no-large-naive", action="store_true", help="diff only on the 1.5B pair")
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "A", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, a, b = args.child
        kernel = method.removeprefix("diff-") if method.startswith("diff-") else "auto"
        result = child_naive(a, b) if method == "naive" else child_diff(a, b, kernel)
        print(json.dumps({**result, "peak_rss_mb": peak_rss_mb()}))
        return
    for which in ("c", "numba"):
        cold, cached = kernel_compile_times(which)
        print(f"{which} kernels: built in {cold:.1f} s on an empty cache, loaded in {cached:.2f} s "
              "from the cache (fresh processes, imports included; not in the wall times below)")
    with tempfile.TemporaryDirectory(prefix="bench_diff_") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        small = make_small_pair(root)
        print(f"made the default-model bf16 pair in {time.perf_counter() - t:.1f} s")
        bench_pair("smollm2-135m bf16 pair", *small, run_naive=True, others=True)
        if args.no_large:
            return
        t = time.perf_counter()
        large = make_large_pair(root)
        print(f"\nmade the 1.5B-shaped pair in {time.perf_counter() - t:.1f} s")
        pair_gb = sum(f.stat().st_size for d in large for f in d.glob("*.safetensors")) / 2**30
        fits = mem_available_gb() > 2.5 * pair_gb + 2
        bench_pair("Qwen2.5-1.5B-shaped bf16 pair (random, 2 shards each)", *large,
                   run_naive=fits and not args.no_large_naive)


if __name__ == "__main__":
    main()
