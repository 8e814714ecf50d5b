"""One option vocabulary: the groups every command shares, and the backend choice, in one place.

    PasskOptions(model="runs/grpo/step-000050", task="arith", n=16, backend="hf", ray_workers=2)

Each group is a frozen dataclass; a command's options inherit the groups it uses (flat fields,
one name and one default per meaning), so `evalkit passk`, `evalkit train` and
`evalkit forgetting` spell and default them alike:

    ModelOptions    model, dtype, device
    TaskOptions     task, task_size, task_seed, task_config (JSON text); preset and *_field
                    for dataset and file tasks
    GradingOptions  grader_workers (processes), grade_timeout (seconds)
    ScaleOptions    backend (hf | vllm), ray_workers, ray_address, threads

`check_backend` is the one place that decides which backends and scale-outs go together;
`evalkit.cli_options` turns these fields into typer options with their help texts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from evalkit.errors import UsageError

__all__ = ["ModelOptions", "TaskOptions", "GradingOptions", "ScaleOptions", "PasskOptions",
           "BACKENDS", "check_backend", "check_finite"]

BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class ModelOptions:
    model: str = "smollm2-135m"
    dtype: str = "float32"
    device: str = "auto"


@dataclass(frozen=True)
class TaskOptions:
    task: str = "arith"
    task_size: int = 200
    task_seed: int = 0
    task_config: str = "{}"
    # dataset and file tasks (evalkit.tasks.hf): a benchmark preset and the fields to read
    preset: str | None = None
    question_field: str | None = None
    answer_field: str | None = None
    id_field: str | None = None

    def task_config_dict(self) -> dict:
        """`task_config` parsed, with the dataset options merged in (when given)."""
        from evalkit.tasks import parse_task_config

        config = parse_task_config(self.task_config)
        extra = {k: getattr(self, k) for k in ("preset", "question_field", "answer_field", "id_field")
                 if getattr(self, k)}
        return {**config, **extra}


@dataclass(frozen=True)
class GradingOptions:
    grader_workers: int = 2
    grade_timeout: float = 10.0


@dataclass(frozen=True)
class ScaleOptions:
    backend: str = "hf"  # hf: transformers in this process; vllm: a vLLM engine on the GPU
    ray_workers: int = 0  # Ray actors each holding a model replica (0 = no Ray)
    ray_address: str | None = None  # join this cluster instead of starting a local one
    threads: int = 0  # CPU threads per model replica; 0 = torch's default (Ray: cores // workers)


@dataclass(frozen=True)
class PasskOptions(ScaleOptions, GradingOptions, TaskOptions, ModelOptions):
    n: int = 16
    ks: tuple[int, ...] = (1, 2, 4, 8, 16)
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    limit: int | None = 50
    batch_size: int = 64
    confidence: float = 0.95
    n_boot: int = 1000
    logprobs: int = 20  # with backend vllm: top-k log-probs per token for the entropy bound

    @property
    def uses_ray(self) -> bool:
        return bool(self.ray_workers or self.ray_address)


def check_backend(backend: str, *, ray: bool, device: str | None = None) -> None:
    """hf or vllm; vLLM spreads over GPUs itself, so it is refused with Ray workers, and it
    needs a GPU (`device` resolved, when known)."""
    if backend not in BACKENDS:
        raise UsageError(f"--backend {backend}: choose {' or '.join(BACKENDS)}")
    if backend == "vllm" and ray:
        raise UsageError("--backend vllm spreads over GPUs itself; drop --ray-workers/--ray-address")
    if backend == "vllm" and device is not None and not device.startswith("cuda"):
        raise UsageError(f"--backend vllm runs on a GPU; got --device {device} (use --device cuda)")


def check_finite(opts) -> None:
    """Every float option is a number: NaN or inf would pass range checks and poison run.json."""
    for f in fields(opts):
        value = getattr(opts, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"--{f.name.replace('_', '-')} {value}: give a finite number")
