"""A study's checkpoints across machines: what a study folder keeps of its weights when it is
committed without them, and how the weights come back.

    sums = write_sums(folder, dirs)         # train/<m>/seed-<s>/weights.sha256, beside its checkpoints
    wrong = check_sums(folder)              # [] when every listed file is the one recorded

A study is committed without its checkpoints (hundreds of MB each; `.gitignore` keeps
`train/**/step-*/` out), so a study resumed on a fresh clone has its done training stages but
not their weights. Before a stage that loads weights runs, evalkit.study.run_study reruns each
training stage it reads whose checkpoints are missing (the trainers are seeded, so the same
trainer on the same inputs writes the same bytes), then checks the new files against
`weights.sha256`, which the study wrote when that stage first finished. A mismatch stops the
study: the stages already done read other weights, and mixing the two would make the study
read two trainings as one.

The sums file has sha256sum's format (`<hex>  <path>`, paths relative to the training stage's
folder), so `sha256sum -c weights.sha256` in that folder checks it too. Beside it,
`weights.machine.json` names the machine that wrote those bytes (CPU vendor, family, model,
stepping, core count; torch's version and threads; for sums written before evalkit named it, the
first machine that wrote the same bytes again): measured on this study, ES's bytes reproduce
across CPU models and GRPO's do not (docs/study.md), so a mismatch says which machine to resume on.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.jsonio import file_sha256
from evalkit.models import weight_files

__all__ = ["SUMS_FILE", "MACHINE_FILE", "machine", "describe_machine", "read_machine", "write_machine", "checkpoint_dirs", "missing_checkpoints", "write_sums", "check_sums"]

SUMS_FILE = "weights.sha256"
MACHINE_FILE = "weights.machine.json"


def checkpoint_dirs(result: dict) -> list[str]:
    """The checkpoint folders a training stage's result names (relative to the study folder):
    every saved one of a seeded arm, else its final one."""
    dirs = [c["checkpoint"] for c in result.get("checkpoints") or ()]
    return dirs or ([result["checkpoint"]] if result.get("checkpoint") else [])


def missing_checkpoints(out: Path, result: dict) -> list[str]:
    """The recorded checkpoint folders that hold no weights here."""
    return [d for d in checkpoint_dirs(result) if not weight_files(Path(out) / d)]


def machine() -> dict:
    """What decides whether a seeded training writes the same bytes again: the CPU (its vendor,
    family, model and stepping, read from /proc/cpuinfo where there is one; a hypervisor's masked
    "model name" alone does not tell two generations apart), its core count, and torch with its
    thread count."""
    import os
    import platform

    import torch

    info = {"machine": platform.machine(), "cpus": os.cpu_count()}
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8").split("\n\n")[0].splitlines()
    except OSError:
        lines = []
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    for key, name in (("vendor_id", "vendor"), ("model name", "model_name"), ("cpu family", "family"),
                      ("model", "model"), ("stepping", "stepping")):
        if key in fields:
            info[name] = fields[key]
    if "model_name" not in info:
        info["model_name"] = platform.processor() or "unknown"
    info.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
    return info


def describe_machine(info: dict | None) -> str:
    """One line for a message: "AMD EPYC (AuthenticAMD family 26 model 2 stepping 1), 2 CPUs, torch 2.13.0"."""
    if not info:
        return "a machine not recorded"
    parts = [info["vendor"]] if "vendor" in info else []
    parts += [f"{k} {info[k]}" for k in ("family", "model", "stepping") if k in info]
    cpu = f" ({' '.join(parts)})" if parts else ""
    return f"{info.get('model_name', 'unknown')}{cpu}, {info.get('cpus')} CPUs, torch {info.get('torch')}"


def write_sums(folder: Path, checkpoints: list[Path]) -> Path:
    """`folder/weights.sha256`: the sha256 of every weights file of these checkpoints, and
    `folder/weights.machine.json`: the machine that wrote them."""
    from evalkit.jsonio import write_atomic

    folder = Path(folder)
    lines = [f"{file_sha256(f)}  {f.relative_to(folder).as_posix()}\n"
             for c in checkpoints for f in weight_files(c)]
    write_machine(folder, machine())
    write_atomic(folder / SUMS_FILE, lambda fh: fh.writelines(lines))
    return folder / SUMS_FILE


def write_machine(folder: Path, info: dict) -> None:
    """`folder/weights.machine.json`: the machine (machine()) that wrote, or wrote again, its weights."""
    from evalkit.jsonio import write_json_atomic

    write_json_atomic(Path(folder) / MACHINE_FILE, info)


def read_machine(folder: Path) -> dict | None:
    """The machine recorded beside `folder/weights.sha256`; None for sums written before evalkit
    recorded it."""
    import json

    try:
        return json.loads((Path(folder) / MACHINE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_sums(folder: Path) -> dict[str, str]:
    """{path relative to folder: sha256} of `folder/weights.sha256`."""
    sums = {}
    for line in (Path(folder) / SUMS_FILE).read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, _, name = line.partition("  ")
            sums[name.strip()] = digest.strip()
    return sums


def check_sums(folder: Path) -> list[str]:
    """One line per listed file that is missing or differs from its recorded sha256."""
    wrong = []
    for name, digest in read_sums(folder).items():
        path = Path(folder) / name
        if not path.is_file():
            wrong.append(f"{name}: not written")
        elif (now := file_sha256(path)) != digest:
            wrong.append(f"{name}: sha256 {now[:12]}, recorded {digest[:12]}")
    return wrong
