"""The stages of a study, each one call of an existing library function into its own subfolder.

    stages = plan(spec)    # in order; each names the stages it needs and what determines its output

    data/heldout.jsonl      the held-out split (eval generator minus questions seen in training)
    train/<method>/         evalkit.train.run_es / run_grpo / run_es_grpo, evalkit.train.distill.run_distill
                            (grpo-guided, grpo-hinted: run_grpo with their options)
    passk/<base|method>/    evalkit.passk.run_passk on the held-out split
    entropy/ length/ groups/   analyses' reports over the passk runs (groups: with GRPO's log)
    diff/<method>/          evalkit.diff against the base, in the training dtype; diff/es-vs-grpo/
    forgetting/<method>/    evalkit.forgetting.runner.run_forgetting with --train-task KL
    interpolate/es-grpo/    evalkit.interpolate.run_interpolate from ES's final checkpoint to GRPO's
    findings/               analyses.study_findings: one row per claim (verdicts read es, grpo, es-grpo;
                            other methods' figures are listed)
    report/                 analyses.report.build_report over everything

Every method gets the train, passk, diff and forgetting stages and is in entropy, length and
the report; groups reads GRPO's log and diff-es-vs-grpo compares es and grpo only.

A stage's identity holds its options and the identities of the stages it reads, so an edited
study file changes exactly the stages it touches (and those after them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from evalkit.options import plain
from evalkit.study.spec import StudySpec

__all__ = ["Stage", "plan", "identity_hash"]


@dataclass(frozen=True)
class Stage:
    name: str
    out: str  # folder under the study folder
    needs: tuple[str, ...]
    identity: dict
    tokens: int  # estimated generated tokens
    run: Callable[[Path, dict], dict]  # (its folder, {needed stage: its result}) -> its result
    weights: tuple[str, ...] = ()  # the training stages whose checkpoints it loads (evalkit.study.weights)


def identity_hash(identity: dict) -> str:
    """Hash of a stage's identity (plain JSON, keys sorted). A study.json of an older evalkit is
    read through evalkit.records.upgrade, which gives its stages the options added since at the
    values they ran with, so its hashes are this evalkit's."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def plan(spec: StudySpec) -> list[Stage]:
    """Every stage of a study without `seeds`, in the order they run (with: evalkit.study.seeded)."""
    stages = [_heldout(spec)]
    stages += [_train(spec, name) for name in spec.methods]
    models = ["base", *spec.methods]
    stages += [_passk(spec, m) for m in models]
    passk = tuple(f"passk-{m}" for m in models)
    evaluations = spec.evaluations
    if "entropy" in evaluations:
        stages.append(_report_stage("entropy", passk, evaluations["entropy"], _entropy(evaluations["entropy"])))
    if "length" in evaluations:
        stages.append(_report_stage("length", passk, evaluations["length"], _length(evaluations["length"])))
    if "groups" in evaluations:
        needs = ("passk-base", *(("train-grpo",) if "grpo" in spec.methods else ()))
        stages.append(_report_stage("groups", needs, evaluations["groups"], _groups(spec)))
    if "diff" in evaluations:
        stages += [_diff(spec, [m]) for m in spec.methods]
        if {"es", "grpo"} <= set(spec.methods):
            stages.append(_diff(spec, ["es", "grpo"]))
    if "forgetting" in evaluations:
        stages += [_forgetting(spec, m) for m in spec.methods]
    if "interpolate" in evaluations and {"es", "grpo"} <= set(spec.methods):
        stages.append(_interpolate(spec))
    stages.append(_report_stage("findings", tuple(s.name for s in stages), {"claims": "docs/references.md"},
                                _findings(spec)))
    stages.append(_report(spec, tuple(s.name for s in stages)))
    return _with_inputs(stages)


def _with_inputs(stages: list[Stage]) -> list[Stage]:
    """Each identity gains the identity hashes of the stages it reads."""
    hashes, out = {}, []
    for stage in stages:
        stage = replace(stage, identity={**stage.identity, "inputs": {n: hashes[n] for n in stage.needs}})
        hashes[stage.name] = identity_hash(stage.identity)
        out.append(stage)
    return out


def _rel(path, root: Path) -> str:
    return str(Path(path).resolve().relative_to(root.resolve()))


# ---------------------------------------------------------------- data and training


def _heldout(spec: StudySpec) -> Stage:
    def run(folder: Path, _) -> dict:
        from evalkit.jsonio import write_atomic
        from evalkit.tasks import load_task

        def load(task):
            return load_task(task["name"], size=task["size"], seed=task["seed"], config=task["config"]).problems

        seen = {p.prompt for p in load(spec.train_task)}
        kept = [p for p in load(spec.eval_task) if p.prompt not in seen]
        chosen = kept[: spec.eval_task["limit"]]
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / "heldout.jsonl", lambda fh: fh.writelines(
            json.dumps({"id": p.id, "question": p.prompt, "answer": p.answer}) + "\n" for p in chosen))
        return {"file": "data/heldout.jsonl", "problems": len(chosen),
                "dropped_seen_in_training": len(load(spec.eval_task)) - len(kept)}

    return Stage("heldout", "data", (), {"train": spec.train_task, "eval": spec.eval_task}, 0, run)


def _train(spec: StudySpec, method: str) -> Stage:
    trainers = spec.methods[method]
    spent = spec.budget["spent"][method]
    tokens = spent if spec.budget["unit"] == "tokens" else sum(t.completions * t.opts.max_new_tokens for t in trainers)

    def run(folder: Path, _) -> dict:
        from evalkit.console import train_progress
        from evalkit.train import run_es, run_es_grpo, run_grpo
        from evalkit.train.distill import run_distill

        if method == "es-grpo":
            with train_progress("es-grpo: es") as a, train_progress("es-grpo: grpo") as b:
                bars = {"es": a, "grpo": b}
                summary = run_es_grpo(trainers[0].opts, trainers[1].opts, folder, progress_for=bars.get)
        else:
            runner = {"es": run_es, "grpo": run_grpo, "distill": run_distill}[trainers[0].kind]
            with train_progress(method) as progress:
                summary = runner(trainers[0].opts, folder, progress=progress)
        result = {"checkpoint": _rel(summary["final_checkpoint"], folder.parent.parent),
                  "complete": summary["complete"]}
        if getattr(trainers[0].opts, "hint", None):
            result["hint_completions"] = _hint_completions(folder, trainers[0].opts)
        return result

    identity = {"method": method, "trainers": [plain(asdict(t.opts)) for t in trainers], "budget": spent}
    return Stage(f"train-{method}", f"train/{method}", (), identity, tokens, run)


def _hint_completions(folder: Path, opts) -> int:
    """Completions the hints added beyond the budget's first samplings: group_size per all-zero
    group (metrics.jsonl: frac_hinted of groups_sampled)."""
    from evalkit.train.common import MetricsLog

    lines = MetricsLog(folder / "metrics.jsonl").records()
    return opts.group_size * sum(round(x.get("frac_hinted", 0.0) * x.get("groups_sampled", 0)) for x in lines)


def _checkpoint(spec: StudySpec, model: str, results: dict, root: Path) -> str:
    return spec.base_model if model == "base" else str(root / results[f"train-{model}"]["checkpoint"])


# ---------------------------------------------------------------- evaluations


def _passk(spec: StudySpec, model: str) -> Stage:
    o = spec.evaluations["passk"]
    needs = ("heldout",) if model == "base" else ("heldout", f"train-{model}")

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import passk_progress
        from evalkit.options import PasskOptions
        from evalkit.passk import run_passk

        root = folder.parent.parent
        opts = PasskOptions(model=_checkpoint(spec, model, results, root), task=str(root / results["heldout"]["file"]),
                            n=o["n"], ks=tuple(o["k"]), temperature=o["temperature"], top_p=o["top_p"],
                            max_new_tokens=o["max_new_tokens"], batch_size=o["batch_size"], seed=o["seed"],
                            limit=None, dtype=spec.dtype, device=spec.device)
        with passk_progress(f"passk {model}") as progress:
            summary = run_passk(opts, folder, progress=progress)
        return {"run": _rel(folder, root), "complete": summary["complete"]}

    tokens = spec.eval_task["limit"] * o["n"] * o["max_new_tokens"]
    return Stage(f"passk-{model}", f"passk/{model}", needs, {"model": model, "passk": o, "dtype": spec.dtype},
                 tokens, run, weights=needs[1:])


def _report_stage(name: str, needs: tuple, options: dict, run) -> Stage:
    return Stage(name, name, needs, {"evaluation": name, "options": options}, 0, run)


def _runs(root: Path, results: dict) -> list:
    from analyses.runs import load_run

    return [load_run(root / r["run"]) for key, r in results.items() if key.startswith("passk-")]


def _entropy(options: dict):
    def run(folder: Path, results: dict) -> dict:
        from analyses.sample_stats import entropy_report, write_report
        from evalkit.errors import UsageError

        runs = _runs(folder.parent, results)
        try:
            report = entropy_report(runs, fit=options["fit"])
        except UsageError as exc:  # e.g. every run at one entropy: the table still stands
            report = entropy_report(runs)
            report.notes["fit_not_made"] = str(exc)
        write_report(report, folder)
        return {"file": f"{folder.name}/entropy.json"}

    return run


def _length(options: dict):
    def run(folder: Path, results: dict) -> dict:
        from analyses.sample_stats import length_report, write_report

        base, *others = _runs(folder.parent, results)
        write_report(length_report(others, base=base, quantiles=options["quantiles"]), folder)
        return {"file": f"{folder.name}/length.json"}

    return run


def _groups(spec: StudySpec):
    def run(folder: Path, results: dict) -> dict:
        from analyses.group_stats import groups_report
        from analyses.runs import load_run
        from analyses.sample_stats import write_report

        o, root = spec.evaluations["groups"], folder.parent
        log = root / "train" / "grpo" / "metrics.jsonl" if "train-grpo" in results else None
        kept = {"train_log": log, "train_group_size": spec.methods["grpo"][0].opts.group_size} if log else {}
        report = groups_report(load_run(root / results["passk-base"]["run"]), group_sizes=o["group_sizes"],
                               target=o["target"], **kept)
        write_report(report, folder)
        return {"file": f"{folder.name}/groups.json"}

    return run


def _diff(spec: StudySpec, models: list[str]) -> Stage:
    o = spec.evaluations["diff"]
    label = "-vs-".join(models)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import bytes_progress
        from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs

        root = folder.parent.parent
        paths = [spec.base_model, *(_checkpoint(spec, m, results, root) for m in models)]
        as_dtype = None if spec.dtype == "float32" else spec.dtype  # compare in the training dtype
        with bytes_progress(f"diff {label}") as progress:
            result = diff_checkpoints(paths, DiffOptions(atol=o["atol"], threads=o["threads"], as_dtype=as_dtype),
                                      progress=progress)
        write_outputs(result, folder)
        return {"file": _rel(folder / "diff.json", root)}

    trains = tuple(f"train-{m}" for m in models)
    return Stage(f"diff-{label}", f"diff/{label}", trains, {"diff": o, "models": models, "dtype": spec.dtype}, 0, run,
                 weights=trains)


def _forgetting(spec: StudySpec, method: str) -> Stage:
    o = spec.evaluations["forgetting"]

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import counted_progress
        from evalkit.forgetting.runner import ForgettingOptions, run_forgetting

        root = folder.parent.parent
        opts = ForgettingOptions(base=spec.base_model, model=_checkpoint(spec, method, results, root),
                                 train_task=spec.train_task["name"], dtype=spec.dtype, device=spec.device, **o)
        with counted_progress() as progress:
            report = run_forgetting(opts, folder, progress=progress)
        return {"file": _rel(folder / "forgetting.json", root), "verdict": report["verdict"]}

    from evalkit.forgetting.runner import ForgettingOptions

    tokens = ForgettingOptions(**o).cost()["tokens"]
    return Stage(f"forgetting-{method}", f"forgetting/{method}", (f"train-{method}",),
                 {"forgetting": o, "method": method, "dtype": spec.dtype}, tokens, run, weights=(f"train-{method}",))


def _interpolate(spec: StudySpec) -> Stage:
    """ES's final checkpoint (t = 0) to GRPO's (t = 1) on the held-out split."""
    o = spec.evaluations["interpolate"]

    def run(folder: Path, results: dict) -> dict:
        from evalkit.interpolate import InterpolateOptions, run_interpolate

        root = folder.parent.parent
        opts = InterpolateOptions(model=_checkpoint(spec, "es", results, root),
                                  other=_checkpoint(spec, "grpo", results, root),
                                  task=str(root / results["heldout"]["file"]), dtype=spec.dtype, device=spec.device,
                                  points=o["points"], n=o["n"], ks=tuple(o["k"]), temperature=o["temperature"],
                                  max_new_tokens=o["max_new_tokens"], batch_size=o["batch_size"], limit=o["limit"],
                                  seed=o["seed"])
        summary = run_interpolate(opts, folder)
        barrier = summary["barrier"]
        return {"file": _rel(folder / "interpolate.json", root),
                "loss_barrier": (barrier.get("loss") or {}).get("height"),
                "error_barrier": (barrier.get("error") or {}).get("height")}

    limit = min(o["limit"] or spec.eval_task["limit"], spec.eval_task["limit"])
    tokens = o["points"] * limit * o["n"] * o["max_new_tokens"]
    return Stage("interpolate-es-grpo", "interpolate/es-grpo", ("heldout", "train-es", "train-grpo"),
                 {"interpolate": o, "dtype": spec.dtype}, tokens, run, weights=("train-es", "train-grpo"))


def _findings(spec: StudySpec):
    def run(folder: Path, results: dict) -> dict:
        from analyses.study_findings import write_findings

        write_findings(folder.parent, list(spec.methods), folder)
        return {"file": f"{folder.name}/findings.json"}

    return run


def _report(spec: StudySpec, needs: tuple) -> Stage:
    def run(folder: Path, results: dict) -> dict:
        from analyses.report import build_report

        root = folder.parent
        inputs = [root / "passk" / m for m in ("base", *spec.methods)]
        inputs += [root / name for name in ("entropy", "length", "groups", "diff", "forgetting", "train", "interpolate")
                   if (root / name).is_dir()]
        result = build_report(inputs, folder, title=spec.report_title)
        return {"file": f"{folder.name}/index.html", "sections": list(result.sections),
                "unused_inputs": [f"{p}: {why}" for p, why in result.problems]}

    return Stage("report", "report", needs, {"title": spec.report_title}, 0, run)
