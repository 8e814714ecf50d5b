"""Memory of evalkit's readers of outside files against the size of the file read (issue 43).

    python benchmarks/bench_reader_memory.py            # every reader, a file of about 32 MB each
    python benchmarks/bench_reader_memory.py --mb 8

Measured: the peak resident memory a reader adds while it reads one file (Linux VmHWM, reset
before each read by writing 5 to /proc/self/clear_refs), divided by the file's size. Readers:
a checkpoint read tensor by tensor (`open_checkpoint` + `read_bits`, each tensor dropped before
the next: what `diff` does, at one tensor per side) as .pth (zip), legacy .pth and
safetensors; a TensorBoard event file (`read_training_log`); a JSONL and an lm-eval samples
file (`reader(fmt)(path)`: every record held as Python objects, as the import keeps them).
Then the hostile files of tests/test_untrusted_files.py, which declare up to 128 GiB in a few KB:
each must be refused having added almost nothing. The named baseline: `json.loads` of the
same JSONL file's lines into a list (what any reader that keeps the records pays).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def read_checkpoint(path: Path):
    from evalkit.checkpoints import open_checkpoint, read_bits

    cp = open_checkpoint(str(path))
    for entry in cp.tensors.values():
        read_bits(entry)  # dropped at once: one tensor at a time
    return len(cp.tensors)


def make_inputs(folder: Path, mb: int) -> list[tuple[str, Path, object]]:
    """(label, file, reader) of the valid files, each about `mb` MB."""
    import numpy as np
    import torch
    from helpers import hostile
    from safetensors.torch import save_file

    from evalkit.importers import ImportOptions
    from evalkit.importers.run import reader
    from evalkit.trainlogs import read_training_log

    n = mb * (1 << 20) // 4 // 8
    sd = {f"model.layers.{i}.mlp.down_proj.weight": torch.randn(n // 64, 64) for i in range(8)}
    (folder / "zip").mkdir()
    torch.save(sd, folder / "zip" / "pytorch_model.bin")
    (folder / "legacy").mkdir()
    torch.save(sd, folder / "legacy" / "old.pth", _use_new_zipfile_serialization=False)
    (folder / "st").mkdir()
    save_file(sd, str(folder / "st" / "model.safetensors"))
    rng = np.random.default_rng(0)
    events = hostile.tb_events(folder / "tb", {s: float(rng.random()) for s in range(mb * 12_000)})
    lines = folder / "samples.jsonl"
    with open(lines, "w") as fh:
        i = 0
        while fh.tell() < mb << 20:
            fh.write(json.dumps({"problem_id": f"p{i // 8}", "completion": f"Step {i}: {'x' * 100} \\boxed{{{i % 997}}}",
                                 "answer": str(i // 8 % 997), "num_tokens": 40}) + "\n")
            i += 1
    opts = ImportOptions(gold_field="answer")
    return [("pth zip, tensor by tensor", folder / "zip" / "pytorch_model.bin", read_checkpoint),
            ("pth legacy, tensor by tensor", folder / "legacy" / "old.pth", read_checkpoint),
            ("safetensors, tensor by tensor", folder / "st" / "model.safetensors", read_checkpoint),
            ("TensorBoard event file", events, read_training_log),
            ("baseline: json.loads of the JSONL lines", lines,
             lambda p: [json.loads(line) for line in p.read_text().splitlines()]),
            ("JSONL import reader", lines, lambda p: reader("jsonl")(p, opts))]


def make_hostile(folder: Path) -> list[tuple[str, Path, object]]:
    from helpers import hostile

    from evalkit.trainlogs import read_training_log

    return [("pth, stride-0 view of 2^35 floats (128 GiB)", hostile.pth_view(folder / "h1" / "a.pth"), read_checkpoint),
            ("legacy pth, the same view", hostile.pth_view(folder / "h2" / "a.pth", legacy=True), read_checkpoint),
            ("pth, 200,000-deep list", hostile.pth_deep(folder / "h3" / "a.pth"), read_checkpoint),
            ("verl, world_size 10^9", hostile.verl_world(folder / "h4", 10**9), read_checkpoint),
            ("TensorBoard, length field + 2^40", _huge_length(folder / "h5"), read_training_log)]


def _huge_length(folder: Path) -> Path:
    from helpers import hostile

    path = hostile.tb_events(folder, {1: 0.5, 2: 0.25})
    hostile.tb_length_at(path, 1, 1 << 40)
    return path


def measure(rows) -> list[dict]:
    from helpers.memory import peak_growth

    out = []
    for label, path, fn in rows:
        size = sum(p.stat().st_size for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file())
        grew, got = peak_growth(lambda fn=fn, path=path: fn(path))
        out.append({"reader": label, "file_bytes": size, "peak_growth_bytes": grew, "multiple": grew / size,
                    "result": f"refused: {str(got)[:90]}" if isinstance(got, Exception) else "read"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=32)
    args = parser.parse_args()
    import evalkit.checkpoints  # noqa: F401  (imports done before any measurement)
    import evalkit.importers.run  # noqa: F401
    import evalkit.trainlogs  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(make_hostile(Path(tmp) / "hostile")) + measure(make_inputs(Path(tmp), args.mb))
    print(f"{'reader':48} {'file':>12} {'peak added':>12} {'x file':>8}  result")
    for r in rows:
        print(f"{r['reader']:48} {r['file_bytes']:>12,} {r['peak_growth_bytes']:>12,} {r['multiple']:>8.2f}  {r['result']}")


if __name__ == "__main__":
    main()
