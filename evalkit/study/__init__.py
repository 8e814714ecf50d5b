"""`evalkit study`: the ES vs GRPO comparison as one resumable command.

    evalkit study studies/smoke.toml --out runs/smoke          # rerun the same command to resume
    evalkit study studies/seed-cpu.toml --out results/study --dry-run

The study file (evalkit.study.spec) names the base model, the training task and its
held-out split, the methods with a shared budget, and the evaluations; the plan
(evalkit.study.stages, with or without seeds) turns it into stages, each one library call into its own subfolder.
`DIR/study.json` records the plan and, per stage, its identity, status (`done`, `running`,
`failed`, `interrupted`), wall time and output. A stage whose output exists with the same
identity is skipped; an interrupted one is rerun into the same folder, and the trainers,
passk and forgetting resume inside it. A stage whose settings changed since it ran is refused (its folder
holds other results), naming it. A failing stage stops the study with its one-line error;
the stages before it keep their outputs. A study folder can be committed without its weights:
each training stage writes weights.sha256 beside its checkpoints, and on a clone without them
the stages that load them first train them again and check the bytes (evalkit.study.weights).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["run_study", "study_plan", "stage_status", "pending_remakes", "recorded_sampler", "STUDY_FILE"]

STUDY_FILE = "study.json"


def study_plan(spec_path: Path, out: Path) -> tuple:
    """(spec, stages, the state recorded in `out`/study.json) without running anything."""
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    spec = read_spec(spec_path)
    state = _state(out)
    return spec, plan(spec, recorded_sampler(state)), state


# stages that read what others drew and draw nothing themselves (any other stage samples or trains)
READS_ONLY = ("splits", "diff", "sparsity", "entropy", "length", "groups", "findings", "report")


def recorded_sampler(state: dict) -> str | None:
    """The sampler a seeded study in progress draws with, as its study.json records it in its
    stages' identities (None: a new study, or one without seeds)."""
    return next((st["identity"]["sampler"] for st in (state.get("stages") or {}).values()
                 if isinstance(st.get("identity"), dict) and "sampler" in st["identity"]), None)


def _same_sampler(out: Path, todo: list, state: dict) -> None:
    """A UsageError when a stage still to draw would draw with another sampler than the study's
    done stages did (a study started before a sampler change): its samples would not be
    comparable with theirs. A finished study still reads as done, and reading stages rerun."""
    from evalkit.sampling import SAMPLER_VERSION

    then = recorded_sampler(state)
    if then is None or then == SAMPLER_VERSION:
        return
    draws = [s.name for s in todo if not s.name.startswith(READS_ONLY) and stage_status(out, s, state) != "done"]
    if draws:
        raise UsageError(f"{out}: this study's samples were drawn by sampler {then} (study.json) and this evalkit "
                         f"draws with {SAMPLER_VERSION}; finishing {draws[0]} would mix the two: run the study "
                         "again into another --out (or with the evalkit it was started with)")


def run_study(spec_path: Path, out: Path, *, only: str | None = None, until: str | None = None,
              on_stage: Callable[[str, str], None] | None = None) -> dict:
    """Run (or resume) the study into `out`; returns study.json. `only`: run that stage alone
    (the stages it reads must be done); `until`: stop after that stage (e.g. at the end of a
    working session, so that no training stage is cut). `on_stage(name, status)` is told of each stage."""
    from evalkit.rundir import check_writable

    check_writable(out)
    spec, stages, state = study_plan(spec_path, out)
    names = [s.name for s in stages]
    for flag, name in (("--only", only), ("--until", until)):
        if name is not None and name not in names:
            raise UsageError(f"{flag} {name}: no such stage; the stages are {', '.join(names)}")
    from evalkit.locks import FolderLock

    out = Path(out)
    _check_folder(out, state)
    with FolderLock(out):  # one study process per folder
        state = _state(out)
        todo = [s for s in _through(stages, until) if only is None or s.name == only]
        _refuse(out, todo, stages, state)  # before anything is written: a refused study leaves study.json as it was
        _same_sampler(out, todo, state)
        state = _record_plan(out, spec, stages, state)
        makers = {n for s in stages for n in s.weights}
        _register_claims(out, spec, [s for s in stages if s.name in makers], state)
        _record_sums(out, [s for s in stages if s.name in makers], state)
        for stage in todo:
            if stage_status(out, stage, state) == "done":
                if on_stage:
                    on_stage(stage.name, "done")
                continue
            _remake_weights(out, stage, stages, state, on_stage)
            _run_stage(out, stage, state, on_stage)
            if stage.name in makers:
                _record_sums(out, [stage], state)
    return state


def _refuse(out: Path, todo: list, stages: list, state: dict) -> None:
    """A UsageError for the first stage to run whose settings changed since it ran (its folder holds
    other results), or whose inputs are not done (--only)."""
    for stage in todo:
        status = stage_status(out, stage, state)
        if status == "changed":
            raise UsageError(f"stage {stage.name}: its settings changed since it ran in {out / stage.out}; "
                             f"use another --out, or remove {out / stage.out} to redo it (and what reads it)")
        missing = [n for n in stage.needs if n not in {s.name for s in todo}
                   and stage_status(out, _by_name(stages, n), state) != "done"]
        if status != "done" and missing:
            raise UsageError(f"stage {stage.name} reads {', '.join(missing)}, not done yet: run the study "
                             "without --only first")


def _through(stages, until: str | None):
    """The stages up to and including `until` (all without it)."""
    for stage in stages:
        yield stage
        if stage.name == until:
            return


def pending_remakes(out: Path, stages, state: dict) -> list[str]:
    """The done training stages whose checkpoints are not in `out` (a study committed without its
    weights, resumed on a fresh clone) and that a stage still to run loads: `run_study` trains
    them again first (evalkit.study.weights)."""
    from evalkit.study.weights import missing_checkpoints

    todo = {n for s in stages if stage_status(out, s, state) != "done" for n in s.weights}
    return [s.name for s in stages if s.name in todo and stage_status(out, s, state) == "done"
            and missing_checkpoints(out, state["stages"][s.name]["result"])]


def _record_sums(out: Path, trains, state: dict) -> None:
    """weights.sha256 beside each done training stage's checkpoints, where it has none yet and
    every checkpoint is here (a study started before evalkit wrote them gains them)."""
    from evalkit.study.weights import SUMS_FILE, checkpoint_dirs, missing_checkpoints, write_sums

    for train in trains:
        record = state.get("stages", {}).get(train.name)
        if (not record or record.get("status") != "done" or (out / train.out / SUMS_FILE).is_file()
                or missing_checkpoints(out, record["result"])):
            continue
        write_sums(out / train.out, [out / d for d in checkpoint_dirs(record["result"])])


def _remake_weights(out: Path, stage, stages, state: dict, on_stage) -> None:
    """Train again each stage `stage` loads whose checkpoints are missing, into its own folder,
    and check the new weights against its weights.sha256 (evalkit.study.weights). Its record
    keeps the first run's files and time; `remade` lists the reruns."""
    import shutil

    from evalkit.study.weights import (
        SUMS_FILE,
        check_sums,
        checkpoint_dirs,
        describe_machine,
        machine,
        missing_checkpoints,
        read_machine,
        write_machine,
        write_sums,
    )
    from evalkit.train.common import resumes_from

    for name in stage.weights:
        record = state["stages"][name]
        missing = missing_checkpoints(out, record["result"])
        if not missing:
            continue
        train, dirs = _by_name(stages, name), checkpoint_dirs(record["result"])
        folder = out / train.out
        # from the last checkpoint before the first missing one: later ones are written again
        first = dirs.index(missing[0])
        if first and not resumes_from(out / dirs[first - 1]):
            first = 0  # only the newest checkpoint keeps a gradient trainer's AdamW state: from step 0
        for d in dirs[first:]:
            shutil.rmtree(out / d, ignore_errors=True)
        kept = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()
                and not any(part.startswith(("step-", ".step-")) for part in p.relative_to(folder).parts)}
        if on_stage:
            on_stage(name, f"training again: {len(missing)} of its {len(dirs)} checkpoints are not in {out} "
                           f"(needed by {stage.name})")
        started = time.monotonic()
        try:
            train.run(folder, {})
        finally:  # the first run's log, summary and sums stand; the rerun only brings its weights back
            for path, data in kept.items():
                path.write_bytes(data)
        verified = (folder / SUMS_FILE).is_file()
        wrong = check_sums(folder) if verified else []
        here = machine()
        if wrong:
            for d in dirs:
                shutil.rmtree(out / d, ignore_errors=True)
            raise UsageError(
                f"stage {name}: trained again because its checkpoints were not in {out}, but the weights differ "
                f"from those its done stages read ({wrong[0]}; {folder / SUMS_FILE}): the rerun did not reproduce "
                f"the first run (written on {describe_machine(read_machine(folder))}; trained again on "
                f"{describe_machine(here)}; GRPO's gradients are reproducible on one CPU model, not across "
                f"them; ES's weights are). Bring the original checkpoints back into {folder}, resume on a machine "
                f"with the first run's CPU, or remove {folder} and the stages that read it to redo them")
        if not verified:
            write_sums(folder, [out / d for d in dirs])
        elif read_machine(folder) is None:  # sums from before evalkit named the machine: this one wrote the same bytes
            write_machine(folder, here)
        record.setdefault("remade", []).append({"seconds": round(time.monotonic() - started, 1),
                                                "checkpoints": len(dirs), "verified": verified,
                                                "for": stage.name, "machine": here})
        _save(out, state)


def _by_name(stages, name: str):
    return next(s for s in stages if s.name == name)


def stage_status(out: Path, stage, state: dict) -> str:
    """done (same identity, output present), changed (other identity), or to run."""
    from evalkit.study.stages import identity_hash

    record = state.get("stages", {}).get(stage.name)
    if record is None or not (out / stage.out).exists():
        return "to run"
    if recorded_hash(state, stage.name) != identity_hash(stage.identity):
        return "changed" if record["status"] == "done" else "to run"
    return "done" if record["status"] == "done" else record["status"]


def recorded_hash(state: dict, name: str) -> str:
    """The hash of a recorded stage's identity as this evalkit computes it (defaults left out),
    its inputs rehashed the same way: records written before an option existed still match."""
    from evalkit.study.stages import identity_hash

    identity = dict(state["stages"][name]["identity"])
    inputs = identity.get("inputs") or {}
    if any(n not in state["stages"] for n in inputs):
        return state["stages"][name]["identity_hash"]
    identity["inputs"] = {n: recorded_hash(state, n) for n in inputs}
    return identity_hash(identity)


def _run_stage(out: Path, stage, state: dict, on_stage) -> None:
    from evalkit.study.stages import identity_hash

    record = state["stages"].get(stage.name) or {}
    same = stage.name in state["stages"] and recorded_hash(state, stage.name) == identity_hash(stage.identity)
    # an interrupted or failed stage resumes and its time adds up; a done one runs again only
    # because its folder was removed, so its earlier time was spent on outputs that are gone
    seconds = record.get("seconds", 0.0) if same and record.get("status") != "done" else 0.0
    record = {"identity": stage.identity, "identity_hash": identity_hash(stage.identity), "out": stage.out,
              "status": "running", "seconds": seconds, "tokens_estimate": stage.tokens}
    state["stages"][stage.name] = record
    _save(out, state)
    if on_stage:
        on_stage(stage.name, "running")
    started = time.monotonic()
    results = {n: state["stages"][n]["result"] for n in stage.needs}
    try:
        record["result"] = stage.run(out / stage.out, results)
        record["status"] = "done"
    except KeyboardInterrupt:
        record["status"] = "interrupted"
        raise
    except UsageError as exc:
        record.update(status="failed", error=str(exc))
        raise UsageError(f"stage {stage.name} failed: {exc}") from None
    except Exception as exc:
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    finally:
        record["seconds"] = round(seconds + time.monotonic() - started, 1)
        _save(out, state)
    if on_stage:
        on_stage(stage.name, "done")


def _state(out: Path) -> dict:
    import json

    path = Path(out) / STUDY_FILE
    if not path.is_file():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc}); use another --out") from None
    if not isinstance(state, dict) or state.get("kind") != "study":
        raise UsageError(f"{path}: not an evalkit study record; use another --out")
    import evalkit.train  # noqa: F401 (the trainers' options upgrade their stages' records)
    from evalkit.records import upgrade

    return upgrade(state)  # a study of an older evalkit: its stages as this one records them


def _check_folder(out: Path, state: dict) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a folder")
    if not state and out.is_dir() and any(p.name != ".lock" for p in out.iterdir()):
        raise UsageError(f"{out}: folder is not empty and holds no evalkit study; use another --out")


def _register_claims(out: Path, spec, trains: list, state: dict) -> None:
    """The study file's claims (analyses.claims.registration: settings and verdict code hashed),
    recorded in study.json once, before the first training stage runs; a study that registers
    late lists the training stages already done. Kept as recorded from then on: the findings
    compare the claims file with it and flag any change as revised after data."""
    if spec.claims is None or "registration" in state:
        return
    from analyses.claims import read_claims, registration

    done = [s.name for s in trains if stage_status(out, s, state) == "done"]
    state["registration"] = registration(read_claims(Path(spec.claims)), spec.claims, done_before=done)
    _save(out, state)


def _record_plan(out: Path, spec, stages, state: dict) -> dict:
    from dataclasses import asdict

    from evalkit.jsonio import plain_json
    from evalkit.records import SCHEMA_VERSION, versions
    from evalkit.study.stages import identity_hash

    out.mkdir(parents=True, exist_ok=True)
    spec_record = {k: v for k, v in asdict(spec).items()  # keys a study may leave out only when it gives them
                   if k != "methods" and not (k in ("claims", "arm_seeds", "scopes") and not v)}
    spec_record["methods"] = {name: [asdict(t) for t in trainers] for name, trainers in spec.methods.items()}
    spec_record["evaluations"] = {name: spec.recorded(name) for name in spec.evaluations}
    state = {"schema_version": SCHEMA_VERSION, "kind": "study", "title": spec.title, "spec": plain_json(spec_record),
             "plan": [{"stage": s.name, "out": s.out, "needs": list(s.needs), "tokens_estimate": s.tokens,
                       "identity_hash": identity_hash(s.identity)} for s in stages],
             "versions": versions(), "stages": state.get("stages", {}),
             **({"registration": state["registration"]} if "registration" in state else {})}
    _save(out, state)
    return state


def _save(out: Path, state: dict) -> None:
    from evalkit.jsonio import plain_json, write_json_atomic

    write_json_atomic(Path(out) / STUDY_FILE, plain_json(state))
