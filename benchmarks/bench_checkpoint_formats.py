"""Reading each checkpoint format against reading the same weights from safetensors.

    python benchmarks/bench_checkpoint_formats.py            # the built-in model (fp32, 540 MB)
    python benchmarks/bench_checkpoint_formats.py --tiny     # a tiny model: a quick check only

The weights are the built-in smollm2-135m with a planted update, written once per format by
tests/helpers/formats.py (the writers the tests use: torch.distributed.checkpoint.save, two
real FSDP2 gloo ranks saved as verl saves them, a vLLM-named pytorch_model.pth, a PEFT LoRA
adapter). Each read is its own process: `evalkit.checkpoints.open_checkpoint` (headers,
pickles, metadata, validation) and then every tensor streamed chunk by chunk through the
reader `evalkit diff` uses (`ChunkReader`, 512K elements a chunk), after a warm-up read so
the page cache holds the files. Baseline (measured in the same run): the same tensors read
from the safetensors copy; for LoRA, from the merged model saved as safetensors.

Figures: wall time, best of 3 (target: at most 1.3x the safetensors read), and the read's
peak memory: VmHWM minus the resident memory after the imports (torch is imported in every
child, the safetensors one included, and evalkit.checkpoints' modules before the timing, so
only the read's own time and memory are compared; target: at most one tensor, the largest,
above the safetensors read).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from record import result  # noqa: E402

CHUNK = 1 << 19


def _vm(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def child(path: str, names_from: str, base: str | None) -> None:
    """One read, in this process: JSON with wall seconds, bytes read and the read's peak memory."""
    import numpy as np
    import torch  # noqa: F401  (every child pays the same imports)

    from evalkit.checkpoints import (  # noqa: F401  (imports untimed)
        ChunkReader,
        TensorCache,
        dcp,
        deepspeed,
        lora,
        open_checkpoint,
        pickles,
        validate,
        verl,
        vllm,
    )

    names = json.loads(Path(names_from).read_text())
    rss0 = _vm("VmRSS")
    start = time.perf_counter()
    like = open_checkpoint(base) if base else None
    cp = open_checkpoint(path, like=like)
    reader = ChunkReader(1, CHUNK * 8, TensorCache())
    total, check = 0, 0
    for name in names:
        entry = cp.tensors[name]
        for first in range(0, entry.numel, CHUNK):
            bits = reader.bits(0, entry, first, min(CHUNK, entry.numel - first))
            check ^= int(bits[0]) if bits.size else 0
            total += bits.nbytes
    reader.close()
    wall = time.perf_counter() - start
    print(json.dumps({"wall": wall, "bytes": total, "peak": _vm("VmHWM") - rss0, "check": check,
                      "np": np.__version__}))


def run_child(path: Path, names: Path, base: Path | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", str(path), str(names)] + ([str(base)] if base else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best(path: Path, names: Path, base: Path | None = None) -> dict:
    run_child(path, names, base)  # warm the page cache
    runs = [run_child(path, names, base) for _ in range(3)]
    return min(runs, key=lambda r: r["wall"]) | {"peak": max(r["peak"] for r in runs)}


def build(root: Path, tiny: bool) -> tuple[Path, dict, dict]:
    """The base, and {format: (folder to read, its safetensors twin)}."""
    from helpers import formats
    from helpers.tinymodel import make_tiny_model

    from evalkit.models import resolve_model

    base = make_tiny_model(root / "base") if tiny else Path(resolve_model("smollm2-135m").path)
    trained = formats.planted_copy(base, root / "trained")
    adapter, factors = formats.save_lora_by_hand(base, root / "adapter", r=8, alpha=16.0)
    merged = formats.merged_by_hand(base, factors, 16.0 / 8, root / "merged")
    started = time.perf_counter()
    folders = {
        "dcp": (formats.save_dcp(trained, root / "dcp"), trained),
        "verl (2 FSDP2 ranks)": (formats.save_verl_fsdp(trained, root / "verl", world=2), trained),
        "bin (.pth, vLLM names)": (formats.save_vllm_pth(trained, root / "pth", with_config=True), trained),
        "lora (BASE+ADAPTER)": (Path(f"{base}+{adapter}"), merged),
    }
    print(f"wrote the formats in {time.perf_counter() - started:.1f} s under {root}")
    return base, folders, {"largest": _largest(trained)}


def _largest(folder: Path) -> int:
    from evalkit.checkpoints import open_checkpoint

    return max(e.nbytes for e in open_checkpoint(str(folder)).tensors.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a quick check, not the figures)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child[2] if len(args.child) > 2 else None)
        return
    from evalkit.checkpoints import open_checkpoint

    with tempfile.TemporaryDirectory(prefix="bench_formats_") as tmp:
        root = Path(tmp)
        base, folders, sizes = build(root, args.tiny)
        for label, (folder, twin) in folders.items():
            names = root / "names.json"
            names.write_text(json.dumps(sorted(open_checkpoint(str(twin)).tensors)))
            ref = best(twin, names)
            got = best(folder, names, base)
            ratio = got["wall"] / ref["wall"]
            extra = got["peak"] - ref["peak"]
            print(f"{label:24} {got['wall']:6.3f} s vs safetensors {ref['wall']:6.3f} s: {ratio:5.2f}x  "
                  f"({got['bytes'] / 1e6:.0f} MB, {got['bytes'] / got['wall'] / 1e9:.2f} GB/s); peak "
                  f"{got['peak'] / 1e6:6.1f} MB vs {ref['peak'] / 1e6:6.1f} MB: {extra / 1e6:+.1f} MB "
                  f"(largest tensor {sizes['largest'] / 1e6:.1f} MB)")
            assert got["bytes"] == ref["bytes"], (label, got["bytes"], ref["bytes"])
            short = label.split(" (")[0]
            result(f"read {short} vs safetensors", measured=f"{got['wall']:.3f} s",
                   baseline=f"safetensors read {ref['wall']:.3f} s", ratio=ratio, target="<= 1.3")
            result(f"read {short}: peak memory above safetensors, in largest tensors",
                   measured=f"{got['peak'] / 1e6:.1f} MB", baseline=f"safetensors read {ref['peak'] / 1e6:.1f} MB",
                   ratio=extra / sizes["largest"], target="<= 1")


if __name__ == "__main__":
    main()
