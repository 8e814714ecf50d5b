"""The plan of a study: its stages, each one call of an existing library function into its own
subfolder, built by one builder per kind of stage keyed by (method, seed or None).

    stages = plan(spec)    # in order; each names the stages it needs and what determines its output

A study without `seeds` (studies/seed-cpu.toml) trains each method once:

    data/heldout.jsonl      the held-out split (eval generator minus questions seen in training)
    train/<method>/         the method's trainer (`RUNNERS`; es-grpo: evalkit.train.run_es_grpo)
    passk/<base|method>/    evalkit.passk.run_passk on the held-out split
    entropy/ length/ groups/   analyses' reports over the passk runs (groups: with GRPO's log)
    diff/<method>/          evalkit.diff against the base, in the training dtype; diff/es-vs-grpo/
    forgetting/<method>/    evalkit.forgetting.runner.run_forgetting with --train-task KL
    interpolate/es-grpo/    evalkit.interpolate.run_interpolate from ES's final checkpoint to GRPO's
    findings/, report/      analyses.study_findings (one row per claim), analyses.report

A study with `seeds = [...]` (studies/seed-cpu-v2.toml) trains every method once per seed, with
checkpoints along training and a stopping rule on a validation split:

    data/                          heldout.jsonl, validation.jsonl, splits.json: the training generator
                                   with three seeds; held-out and validation questions unique, never in
                                   training (the task's own question key: arith's `a + b` and `b + a`
                                   are one question), and validation never held out
    train/<m>/seed-<s>/            the trainer, a checkpoint every save_every updates
    validation/<m>/seed-<s>/       greedy passk on the validation split at each candidate checkpoint
                                   (the arm's last trainer's); the rule picks one (study.json result)
    validation/base/               the base's greedy validation reward, for reference
    curves/<base|m/seed-<s>>/      [evaluations.curves] passk on the held-out split at every saved
                                   checkpoint (pass@1, pass@k and entropy over training)
    passk/, passk-nucleus/         [evaluations.passk] / [evaluations.passk-nucleus] at the picked checkpoints
    passk-final/<m>/seed-<s>/      [evaluations.passk-final] at each arm's final checkpoint (stage
                                   final-passk-<m>-s<s>; the picked run when the pick is the final)
    masked/<es|grpo>/seed-<s>/     [evaluations.masked] evalkit.masking at the pick: the gain its top-q
                                   update entries keep, on the validation split (greedy)
    diff/, forgetting/, interpolate/es-grpo/   as above, per seed, at the picked checkpoints
    sparsity/seed-<s>/             evalkit.study.sparsity: ES and GRPO at matched update norm, scale free
    train-bf16/<es|grpo>/, sparsity/bf16/   a short bf16-trained run per arm, diffed in bf16 bits
    findings/, report/             analyses.study_findings (seeded), analyses.report

The GRPO control (GRPO at ES-then-GRPO's GRPO step count) is the GRPO arm's checkpoint at that
step, evaluated in curves/ (spec.py checks that GRPO saves there). Stage names carry the seed
(`train-es-s0`). A stage's identity holds its options and the identities of the stages it reads,
so an edited study file changes exactly the stages it touches (and those after them); a seeded
study's stages also name the sampler, so a study resumed by another sampler redoes what it draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from evalkit.options import plain
from evalkit.study.spec import StudySpec, saved_steps

__all__ = ["Stage", "plan", "identity_hash", "pick", "arm_checkpoints"]


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


def plan(spec: StudySpec, sampler: str | None = None) -> list[Stage]:
    """Every stage of the study, in the order they run. A seeded study's stages name `sampler`, the
    sampler the study draws with: the one it was started with (evalkit.study.recorded_sampler),
    else this evalkit's."""
    stages = _seeded(spec) if spec.seeds else _one_run(spec)
    ev = spec.evaluations
    passk = tuple(s.name for s in stages if s.name.startswith("passk-") and not s.name.startswith("passk-nucleus"))
    for name, make in (("entropy", _entropy), ("length", _length)):
        if name in ev:
            stages.append(_report_stage(name, passk, spec.recorded(name), make(ev[name])))
    if "groups" in ev and not spec.seeds:
        needs = ("passk-base", *(("train-grpo",) if "grpo" in spec.methods else ()))
        stages.append(_report_stage("groups", needs, spec.recorded("groups"), _groups(spec)))
    if not spec.seeds:
        stages += _one_run_comparisons(spec)
    claims = {"claims": "docs/study.md", "seeded": True} if spec.seeds else {"claims": "docs/references.md"}
    stages.append(_report_stage("findings", tuple(s.name for s in stages), claims, _findings(spec)))
    stages.append(_report(spec, tuple(s.name for s in stages)))
    if spec.seeds:  # evalkit.study refuses to go on drawing under another sampler, rather than mix two samplers' runs
        from evalkit.sampling import SAMPLER_VERSION

        stages = [replace(s, identity={**s.identity, "sampler": sampler or SAMPLER_VERSION}) for s in stages]
    return _with_inputs(stages)


def _one_run(spec: StudySpec) -> list[Stage]:
    """The held-out split, each method trained once, and passk on the base and every method."""
    stages = [_heldout(spec)] + [_train(spec, m, None) for m in spec.methods]
    return stages + [_passk(spec, "passk", m, None) for m in ["base", *spec.methods]]


def _one_run_comparisons(spec: StudySpec) -> list[Stage]:
    """diff, forgetting and interpolate of a study without seeds (after the sample reports)."""
    ev, stages = spec.evaluations, []
    if "diff" in ev:
        stages += [_diff(spec, [m], None) for m in spec.methods]
        if {"es", "grpo"} <= set(spec.methods):
            stages.append(_diff(spec, ["es", "grpo"], None))
    if "forgetting" in ev:
        stages += [_forgetting_base(spec)] if spec.base_once() else []
        stages += [_forgetting(spec, m, None) for m in spec.methods]
    if "interpolate" in ev and {"es", "grpo"} <= set(spec.methods):
        stages.append(_interpolate(spec, None))
    return stages


def _seeded(spec: StudySpec) -> list[Stage]:
    """The splits, the base's evaluations, then per seed every arm trained on it: trained,
    validated, evaluated (each evaluation on the arms and seeds its filters keep: spec.evaluates).
    ES's and GRPO's arms come first and the stages reading both arms' checkpoints right after
    GRPO's validation: a study resumed on a clone without weights (evalkit.study.weights) then
    trains again as few arms as the stages left to run load."""
    ev = spec.evaluations
    evaluations = [k for k in ("passk-nucleus", "curves") if k in ev]
    stages = [_splits(spec)] + [_evaluation(spec, k, "base", None) for k in ("passk", *evaluations)
                                if spec.evaluates(k, "base")]
    stages.append(_validate(spec, "base", None))
    if spec.base_once() and any(spec.evaluates("forgetting", m, s) for m in spec.methods for s in spec.seeds):
        stages.append(_forgetting_base(spec))
    pair = {"es", "grpo"} <= set(spec.methods)
    order = [m for m in spec.methods if m in ("es", "grpo")] + [m for m in spec.methods if m not in ("es", "grpo")]
    for seed in spec.seeds:
        for m in (m for m in order if seed in spec.seeds_of(m)):
            stages += [_train(spec, m, seed), _validate(spec, m, seed)]
            if pair and m == order[1] and seed in spec.seeds_of(order[0]):
                stages += [make(spec, seed) for key, make in (("sparsity", _sparsity), ("interpolate", _interpolate))
                           if key in ev and seed in spec.scopes.get(key, {}).get("seeds", spec.seeds)]
            for key, make in (("passk", _evaluation), ("passk-final", _passk_final), ("masked", _masked),
                              *((k, _evaluation) for k in evaluations), ("diff", _diff_arm),
                              ("forgetting", _forgetting)):
                if spec.evaluates(key, m, seed):
                    stages.append(make(spec, key, m, seed) if make is _evaluation else make(spec, m, seed))
    if "sparsity" in ev and pair and ev["sparsity"].bf16_completions:
        stages += [_train_bf16(spec, m, x) for m in ("es", "grpo") for x in ev["sparsity"].bf16_scales]
        stages.append(_sparsity_bf16(spec))
    return stages


def _evaluation(spec: StudySpec, kind: str, model: str, seed: int | None) -> Stage:
    """passk and passk-nucleus at the picked checkpoint, curves at every saved one."""
    return _curves(spec, model, seed) if kind == "curves" else _passk(spec, kind, model, seed)


def _diff_arm(spec: StudySpec, model: str, seed: int) -> Stage:
    return _diff(spec, [model], seed)


def _with_inputs(stages: list[Stage]) -> list[Stage]:
    """Each identity gains the identity hashes of the stages it reads."""
    hashes, out = {}, []
    for stage in stages:
        stage = replace(stage, identity={**stage.identity, "inputs": {n: hashes[n] for n in stage.needs}})
        hashes[stage.name] = identity_hash(stage.identity)
        out.append(stage)
    return out


# ---------------------------------------------------------------- names, folders and paths


def _rel(path, root: Path) -> str:
    return str(Path(path).resolve().relative_to(root.resolve()))


def _root(folder: Path, out: str) -> Path:
    """The study folder of a stage's folder (`out` below it)."""
    return folder.parents[len(Path(out).parts) - 1]


def _tag(model: str, seed: int | None) -> str:
    return model if seed is None else f"{model}-s{seed}"


def _folder(kind: str, model: str, seed: int | None) -> str:
    return f"{kind}/{model}" if seed is None else f"{kind}/{model}/seed-{seed}"


def _trained(model: str, seed: int | None) -> tuple[str, ...]:
    """The training stage whose checkpoints a stage of this model loads (none for the base)."""
    return () if model == "base" else (f"train-{_tag(model, seed)}",)


def _source(spec: StudySpec, model: str, seed: int | None) -> tuple[str, ...]:
    """The stage that names the model's checkpoint: its training, or (seeded) its validation's pick."""
    if model == "base":
        return ()
    return (f"validate-{_tag(model, seed)}",) if spec.seeds else _trained(model, seed)


def _data(spec: StudySpec) -> str:
    return "splits" if spec.seeds else "heldout"


def _heldout_file(spec: StudySpec, results: dict, root: Path) -> str:
    result = results[_data(spec)]
    return str(root / (result["heldout_file"] if spec.seeds else result["file"]))


def _checkpoint(spec: StudySpec, model: str, seed: int | None, results: dict, root: Path) -> str:
    """The base model, a method's final checkpoint, or (seeded) the checkpoint its validation picked."""
    if model == "base":
        return spec.base_model
    if spec.seeds:
        return str(root / results[f"validate-{_tag(model, seed)}"]["picked"]["checkpoint"])
    return str(root / results[f"train-{model}"]["checkpoint"])


def _seed_key(spec: StudySpec, seed: int | None) -> dict:
    """A seeded study's stage identities name their seed (None for the base's)."""
    return {"seed": seed} if spec.seeds else {}


# ---------------------------------------------------------------- data


def _write_problems(path: Path, problems, task: str) -> None:
    """One line per problem; a task whose scorer reads the problem's record (evalkit.tasks.files
    FILE_KINDS: pairsum, several right answers) keeps `kind` and `entry`, so the file is graded by it."""
    from evalkit.jsonio import write_atomic
    from evalkit.tasks.files import FILE_KINDS

    def line(p) -> str:
        record = {"id": p.id, "question": p.prompt, "answer": p.answer}
        return json.dumps(record | ({"kind": task, "entry": p.entry} if task in FILE_KINDS else {})) + "\n"

    write_atomic(path, lambda fh: fh.writelines(line(p) for p in problems))


def _heldout(spec: StudySpec) -> Stage:
    """The one-run plan's held-out split: the eval generator minus prompts seen in training (the
    exact prompt text, as its committed studies were split)."""
    def run(folder: Path, _) -> dict:
        from evalkit.tasks import load_task

        def load(task):
            return load_task(task["name"], size=task["size"], seed=task["seed"], config=task["config"]).problems

        seen = {p.prompt for p in load(spec.train_task)}
        kept = [p for p in load(spec.eval_task) if p.prompt not in seen]
        folder.mkdir(parents=True, exist_ok=True)
        _write_problems(folder / "heldout.jsonl", kept[: spec.eval_task["limit"]], spec.eval_task["name"])
        return {"file": "data/heldout.jsonl", "problems": len(kept[: spec.eval_task["limit"]]),
                "dropped_seen_in_training": len(load(spec.eval_task)) - len(kept)}

    return Stage("heldout", "data", (), {"train": spec.train_task, "eval": spec.eval_task}, 0, run)


def _splits(spec: StudySpec) -> Stage:
    """A seeded study's held-out and validation splits: unique questions by the task's question key."""
    def run(folder: Path, _) -> dict:
        from evalkit.errors import UsageError
        from evalkit.jsonio import write_json_atomic
        from evalkit.tasks import load_task, question_key

        def load(task, seed, size):
            return load_task(task["name"], size=size, seed=seed, config=task["config"]).problems

        name, val = spec.train_task["name"], spec.validation
        seen = {question_key(name, p.prompt) for p in load(spec.train_task, spec.train_task["seed"],
                                                             spec.train_task["size"])}
        held, held_drops = _unique(load(spec.eval_task, spec.eval_task["seed"], spec.eval_task["size"]), seen, name,
                                   spec.eval_task["limit"])
        valid, valid_drops = _unique(load(spec.train_task, val["seed"], val["size"]),
                                     seen | {question_key(name, p.prompt) for p in held}, name, val["limit"])
        folder.mkdir(parents=True, exist_ok=True)
        for file, chosen in (("heldout.jsonl", held), ("validation.jsonl", valid)):
            _write_problems(folder / file, chosen, name)
        record = {"question_key": ("arith: the sorted operands (a + b and b + a are one question); pairsum: the "
                                  "sorted numbers and the target; else the text"),
                  "heldout": {"problems": len(held), **held_drops},
                  "validation": {"problems": len(valid), **valid_drops}}
        write_json_atomic(folder / "splits.json", record)
        short = [k for k, want in (("heldout", spec.eval_task["limit"]), ("validation", val["limit"]))
                 if record[k]["problems"] < want]
        if short:
            raise UsageError(f"{short[0]}: only {record[short[0]]['problems']} unique unseen questions; raise its "
                             "size (more problems generated) or lower its limit")
        return {"heldout_file": "data/heldout.jsonl", "validation_file": "data/validation.jsonl", **record}

    identity = {"train": spec.train_task, "eval": spec.eval_task, "validation": spec.validation,
                "dedupe": "question_key-v1"}
    return Stage("splits", "data", (), identity, 0, run)


def _unique(problems, taken: set, task: str, limit: int) -> tuple[list, dict]:
    """The first `limit` problems whose question is neither in `taken` nor a repeat."""
    from evalkit.tasks import question_key

    kept, keys, seen_in, repeats = [], set(), 0, 0
    for p in problems:
        key = question_key(task, p.prompt)
        if key in taken:
            seen_in += 1
        elif key in keys:
            repeats += 1
        elif len(kept) < limit:
            kept.append(p)
            keys.add(key)
    return kept, {"dropped_seen": seen_in, "dropped_repeats": repeats, "generated": len(problems)}


# ---------------------------------------------------------------- training and the stopping rule


def _trainers(spec: StudySpec, method: str, seed: int | None) -> tuple:
    trainers = spec.methods[method]
    return trainers if seed is None else tuple(replace(t, opts=replace(t.opts, seed=seed)) for t in trainers)


def _train(spec: StudySpec, method: str, seed: int | None) -> Stage:
    trainers = _trainers(spec, method, seed)
    out = _folder("train", method, seed)

    def run(folder: Path, _) -> dict:
        import time

        from evalkit.console import train_progress
        from evalkit.train import RUNNERS, run_es_grpo

        started, label, root = time.monotonic(), method + ("" if seed is None else f" s{seed}"), _root(folder, out)
        if method == "es-grpo":
            with train_progress(f"{label}: es") as a, train_progress(f"{label}: grpo") as b:
                bars = {"es": a, "grpo": b}
                summary = run_es_grpo(trainers[0].opts, trainers[1].opts, folder, progress_for=bars.get)
        else:
            with train_progress(label) as progress:
                summary = RUNNERS[trainers[0].kind](trainers[0].opts, folder, progress=progress)
        result = {"checkpoint": _rel(summary["final_checkpoint"], root), "complete": summary["complete"]}
        if seed is not None:
            result |= {"checkpoints": arm_checkpoints(folder, trainers, root),
                       "seconds_this_run": time.monotonic() - started, "budget": _budget(folder, trainers)}
        if getattr(trainers[0].opts, "hint", None):
            result["hint_completions"] = _hint_completions(folder, trainers[0].opts)
        return result

    identity = {"method": method, **({"seed": seed} if seed is not None else {}),
                "trainers": [plain(asdict(t.opts)) for t in trainers], "budget": spec.budget["spent"][method]}
    return Stage(f"train-{_tag(method, seed)}", out, (), identity, sum(t.opts.cost()["tokens"] for t in trainers),
                 run)


def _hint_completions(folder: Path, opts) -> int:
    """Completions the hints added beyond the budget's first samplings: group_size per all-zero
    group (metrics.jsonl: frac_hinted of groups_sampled)."""
    from evalkit.train.common import MetricsLog

    lines = MetricsLog(folder / "metrics.jsonl").records()
    return opts.group_size * sum(round(x.get("frac_hinted", 0.0) * x.get("groups_sampled", 0)) for x in lines)


def arm_checkpoints(folder: Path, trainers, root: Path) -> list[dict]:
    """Every saved checkpoint of an arm, in training order: trainer (es / grpo), its step, the
    completions the arm had spent by then, and the folder (relative to the study)."""
    out, spent = [], 0
    for i, t in enumerate(trainers):
        sub = folder / t.kind if len(trainers) > 1 else folder
        per = t.opts.completions_per_unit()
        for step in saved_steps(t.opts):
            path = sub / f"step-{step:06d}"
            out.append({"trainer": t.kind, "stage": i, "step": step, "completions": spent + step * per,
                        "checkpoint": _rel(path, root), "last_trainer": i == len(trainers) - 1})
        spent += t.opts.count * per
    return out


def _budget(folder: Path, trainers) -> dict:
    """What the arm spent, measured from its logs: completions and generated tokens
    (metrics.jsonl `completions/mean_length` x the completions of the update: GRPO's
    `groups_sampled` x `group_size`, every sampling round of dynamic sampling included, else the
    trainer's completions per update)."""
    completions = tokens = 0
    for t in trainers:
        sub = folder / t.kind if len(trainers) > 1 else folder
        per = t.opts.completions_per_unit()
        for line in (sub / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                drawn = per
                if "groups_sampled" in record and t.kind == "grpo":
                    drawn = int(record["groups_sampled"]) * t.opts.group_size
                completions += drawn
                tokens += drawn * float(record.get("completions/mean_length") or 0.0)
    return {"completions": completions, "tokens": round(tokens)}


def _validate(spec: StudySpec, model: str, seed: int | None) -> Stage:
    """Greedy passk on the validation split at each candidate checkpoint; the rule picks one."""
    v = spec.validation
    out = _folder("validation", model, seed)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.options import PasskOptions
        from evalkit.passk import run_passk

        root = _root(folder, out)
        task = str(root / results["splits"]["validation_file"])
        if model == "base":
            candidates = [{"step": 0, "checkpoint": spec.base_model, "completions": 0}]
        else:
            candidates = [c for c in results[f"train-{_tag(model, seed)}"]["checkpoints"] if c["last_trainer"]]
        rows = []
        for c in candidates:
            path = c["checkpoint"] if model == "base" else str(root / c["checkpoint"])
            opts = PasskOptions(model=path, task=task, n=1, ks=(1,), temperature=0.0, max_new_tokens=v["max_new_tokens"],
                                batch_size=v["batch_size"], limit=None, dtype=spec.dtype, device=spec.device)
            sub = folder / (f"step-{c['step']:06d}" if model != "base" else "")
            summary = run_passk(opts, sub)
            reward = summary["outcomes"].get("correct", 0) / summary["samples"]
            rows.append({**c, "reward": reward, "run": _rel(sub, root)})
        return {"rule": v["rule"], "candidates": rows, "picked": pick(rows, v["rule"])}

    identity = {"validation": v, "model": model, "seed": seed, "dtype": spec.dtype}
    return Stage(f"validate-{_tag(model, seed)}", out, ("splits", *_trained(model, seed)), identity,
                 v["limit"] * v["max_new_tokens"], run, weights=_trained(model, seed))


def pick(rows: list[dict], rule: str) -> dict:
    """best-greedy: the highest greedy validation reward, ties to the earlier checkpoint;
    final: the last one."""
    if rule == "final":
        return rows[-1]
    best = max(r["reward"] for r in rows)
    return next(r for r in rows if r["reward"] == best)


def _bf16_trainer(spec: StudySpec, method: str, scale: float = 1.0):
    """The arm's trainer in bf16, its first seed, bf16_completions' worth of updates, one checkpoint,
    its step size (ES's alpha, GRPO's lr) times `scale`."""
    t = spec.methods[method][0]
    count = max(1, round(spec.evaluations["sparsity"].bf16_completions / t.opts.completions_per_unit()))
    size = {"alpha": t.opts.alpha * scale} if t.kind == "es" else {"lr": t.opts.lr * scale}
    return replace(t.opts, dtype="bfloat16", seed=spec.seeds_of(method)[0], save_every=count, **{t.opts.units: count},
                   **(size if scale != 1.0 else {}))


def _bf16_name(method: str, scale: float) -> str:
    """es, or es-x4 for the run at 4 times its step size."""
    return method if scale == 1.0 else f"{method}-x{scale:g}"


def _train_bf16(spec: StudySpec, method: str, scale: float = 1.0) -> Stage:
    opts, name = _bf16_trainer(spec, method, scale), _bf16_name(method, scale)

    def run(folder: Path, _) -> dict:
        from evalkit.train import RUNNERS

        summary = RUNNERS[method](opts, folder)
        return {"checkpoint": _rel(summary["final_checkpoint"], folder.parents[1]), "complete": summary["complete"],
                "completions": opts.cost()["completions"]}

    identity = {"method": method, "trainer": plain(asdict(opts)), **({"scale": scale} if scale != 1.0 else {})}
    return Stage(f"train-bf16-{name}", f"train-bf16/{name}", (), identity, opts.cost()["tokens"], run)


# ---------------------------------------------------------------- evaluations


def _passk_opts(spec: StudySpec, o, model: str, task: str):
    """The evaluation's options on one model and the held-out split (its first `limit` problems
    where the study file gives one, else all)."""
    return replace(o, model=model, task=task, dtype=spec.dtype, device=spec.device)


def _problems(spec: StudySpec, o) -> int:
    """Held-out problems an evaluation reads: its `limit`, at most the split's."""
    return min(o.limit or spec.eval_task["limit"], spec.eval_task["limit"])


def _passk(spec: StudySpec, kind: str, model: str, seed: int | None) -> Stage:
    """[evaluations.<kind>] (passk, passk-nucleus) on the held-out split."""
    o = spec.evaluations[kind]
    out = _folder(kind, model, seed)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import passk_progress
        from evalkit.passk import run_passk

        root = _root(folder, out)
        opts = _passk_opts(spec, o, _checkpoint(spec, model, seed, results, root), _heldout_file(spec, results, root))
        with passk_progress(f"{kind} {_tag(model, seed)}") as progress:
            summary = run_passk(opts, folder, progress=progress)
        return {"run": _rel(folder, root), "complete": summary["complete"]}

    tokens = o.cost(_problems(spec, o))["tokens"]
    identity = {"model": model, **_seed_key(spec, seed), kind: spec.recorded(kind), "dtype": spec.dtype}
    return Stage(f"{kind}-{_tag(model, seed)}", out, (_data(spec), *_source(spec, model, seed)), identity, tokens,
                 run, weights=_trained(model, seed))


def _passk_final(spec: StudySpec, model: str, seed: int) -> Stage:
    """[evaluations.passk-final] at the arm's final checkpoint (its last trainer's last step), beside
    the picked one's passk: when the rule picked the final checkpoint and the two settings are one,
    the picked checkpoint's run is read instead of drawn again (`same_as`)."""
    o, tag = spec.evaluations["passk-final"], _tag(model, seed)
    out = _folder("passk-final", model, seed)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import passk_progress
        from evalkit.passk import run_passk

        root = _root(folder, out)
        final = results[f"train-{tag}"]["checkpoint"]
        if f"passk-{tag}" in results and final == results[f"validate-{tag}"]["picked"]["checkpoint"] and \
                spec.recorded("passk-final") == spec.recorded("passk"):
            return {**results[f"passk-{tag}"], "checkpoint": final, "same_as": f"passk-{tag}"}
        opts = _passk_opts(spec, o, str(root / final), _heldout_file(spec, results, root))
        with passk_progress(f"passk-final {tag}") as progress:
            summary = run_passk(opts, folder, progress=progress)
        return {"run": _rel(folder, root), "complete": summary["complete"], "checkpoint": final}

    identity = {"model": model, "seed": seed, "passk-final": spec.recorded("passk-final"), "dtype": spec.dtype}
    # the picked run, read when the pick is the final checkpoint (when passk evaluates this arm and seed)
    needs = ("splits", f"train-{tag}", f"validate-{tag}", *((f"passk-{tag}",) if spec.evaluates("passk", model, seed)
                                                            else ()))
    return Stage(f"final-passk-{tag}", out, needs, identity, o.cost(_problems(spec, o))["tokens"], run,
                 weights=_trained(model, seed))


def _masked(spec: StudySpec, model: str, seed: int) -> Stage:
    """evalkit.masking at the arm's picked checkpoint: its update masked to the top-q entries
    ([evaluations.masked]), each masked model, the base and the pick scored greedily on the
    validation split as the stopping rule scores them."""
    from evalkit.options import PasskOptions

    v, tag, out = spec.validation, _tag(model, seed), _folder("masked", model, seed)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.masking import run_masked

        root = _root(folder, out)
        evaluation = PasskOptions(model=spec.base_model, task=str(root / results["splits"]["validation_file"]), n=1,
                                  ks=(1,), temperature=0.0, max_new_tokens=v["max_new_tokens"],
                                  batch_size=v["batch_size"], limit=None, dtype=spec.dtype, device=spec.device)
        trained = str(root / results[f"validate-{tag}"]["picked"]["checkpoint"])
        report = run_masked(spec.base_model, trained, spec.evaluations["masked"], evaluation, folder)
        return {"file": _rel(folder / "masked.json", root),
                "retained": {r["label"]: r["retained"] for r in report["rows"]}}

    masks = len(spec.evaluations["masked"].fractions) * len(spec.evaluations["masked"].mask_by) * \
        len(spec.evaluations["masked"].scope)
    identity = {"model": model, "seed": seed, "masked": spec.recorded("masked"), "validation": v, "dtype": spec.dtype}
    return Stage(f"masked-{tag}", out, ("splits", f"validate-{tag}"), identity,
                 (masks + 2) * v["limit"] * v["max_new_tokens"], run, weights=_trained(model, seed))


def _curves(spec: StudySpec, model: str, seed: int | None) -> Stage:
    """[evaluations.curves] at every saved checkpoint (the base: one point, step 0)."""
    o = spec.evaluations["curves"]
    out = "curves/base" if model == "base" else _folder("curves", model, seed)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import passk_progress
        from evalkit.passk import run_passk

        root = _root(folder, out)
        task = _heldout_file(spec, results, root)
        points = ([{"trainer": "base", "step": 0, "completions": 0, "checkpoint": spec.base_model}]
                  if model == "base" else results[f"train-{_tag(model, seed)}"]["checkpoints"])
        rows = []
        for p in points:
            path = p["checkpoint"] if model == "base" else str(root / p["checkpoint"])
            sub = folder if model == "base" else folder / f"{p['trainer']}-step-{p['step']:06d}"
            with passk_progress(f"curves {_tag(model, seed)} {p['trainer']} {p['step']}") as progress:
                run_passk(_passk_opts(spec, o, path, task), sub, progress=progress)
            rows.append({**p, "run": _rel(sub, root)})
        return {"points": rows}

    n_points = 1 if model == "base" else sum(len(saved_steps(t.opts)) for t in spec.methods[model])
    tokens = n_points * o.cost(_problems(spec, o))["tokens"]
    return Stage(f"curves-{_tag(model, seed)}", out, ("splits", *_trained(model, seed)),
                 {"curves": spec.recorded("curves"), "model": model, "seed": seed, "dtype": spec.dtype}, tokens, run,
                 weights=_trained(model, seed))


def _report_stage(name: str, needs: tuple, options: dict, run) -> Stage:
    return Stage(name, name, needs, {"evaluation": name, "options": options}, 0, run)


def _runs(root: Path, results: dict) -> list:
    from analyses.runs import load_run

    return [load_run(root / r["run"]) for key, r in results.items() if key.startswith("passk-")]


def _entropy(options):
    def run(folder: Path, results: dict) -> dict:
        from analyses.sample_stats import entropy_report, write_report
        from evalkit.errors import UsageError

        runs = _runs(folder.parent, results)
        try:
            report = entropy_report(runs, fit=options.fit)
        except UsageError as exc:  # e.g. every run at one entropy: the table still stands
            report = entropy_report(runs)
            report.notes["fit_not_made"] = str(exc)
        write_report(report, folder)
        return {"file": f"{folder.name}/entropy.json"}

    return run


def _length(options):
    def run(folder: Path, results: dict) -> dict:
        from analyses.sample_stats import length_report, write_report

        base, *others = _runs(folder.parent, results)  # passk-base is the first stage read
        write_report(length_report(others, base=base, quantiles=options.quantiles), folder)
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
        report = groups_report(load_run(root / results["passk-base"]["run"]), group_sizes=list(o.group_sizes),
                               target=o.target, **kept)
        write_report(report, folder)
        return {"file": f"{folder.name}/groups.json"}

    return run


def _diff(spec: StudySpec, models: list[str], seed: int | None) -> Stage:
    """evalkit.diff of the base against each of `models` (one; es-vs-grpo: two), in the training dtype."""
    o = spec.evaluations["diff"]
    label = "-vs-".join(models) if seed is None else _tag(models[0], seed)
    out = f"diff/{label}" if seed is None else _folder("diff", models[0], seed)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import bytes_progress
        from evalkit.diff import diff_checkpoints, write_outputs

        root = _root(folder, out)
        paths = [spec.base_model, *(_checkpoint(spec, m, seed, results, root) for m in models)]
        as_dtype = None if spec.dtype == "float32" else spec.dtype  # compare in the training dtype
        with bytes_progress(f"diff {label}") as progress:
            result = diff_checkpoints(paths, replace(o, as_dtype=as_dtype), progress=progress)
        write_outputs(result, folder)
        return {"file": _rel(folder / "diff.json", root)}

    which = {"models": models} if seed is None else {"model": models[0], "seed": seed}
    trained = tuple(t for m in models for t in _trained(m, seed))
    needs = tuple(s for m in models for s in _source(spec, m, seed))
    return Stage(f"diff-{label}", out, needs, {"diff": spec.recorded("diff"), **which, "dtype": spec.dtype}, 0, run,
                 weights=trained)




def _forgetting_opts(spec: StudySpec, model: str):
    return replace(spec.evaluations["forgetting"], base=spec.base_model, train_task=spec.train_task["name"],
                   model=model, dtype=spec.dtype, device=spec.device)


def _forgetting(spec: StudySpec, model: str, seed: int | None) -> Stage:
    """evalkit forgetting of the arm's checkpoint against the base; with base_once, the base's
    units come from the forgetting-base stage (the same bytes as scoring both)."""
    out, once = _folder("forgetting", model, seed), spec.base_once()

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import counted_progress
        from evalkit.forgetting.runner import run_forgetting

        root, said = _root(folder, out), []
        opts = _forgetting_opts(spec, _checkpoint(spec, model, seed, results, root))
        base = root / results["forgetting-base"]["folder"] if once else None
        with counted_progress() as progress:
            report = run_forgetting(opts, folder, progress=progress, base_from=base, log=said.append)
        return {"file": _rel(folder / "forgetting.json", root), "verdict": report["verdict"],
                **({"base_units": said[0]} if once else {})}

    which = {"method": model} if seed is None else {"model": model, "seed": seed}
    tokens = spec.evaluations["forgetting"].cost()["tokens"] - (_base_tokens(spec) if once else 0)
    return Stage(f"forgetting-{_tag(model, seed)}", out, (*_source(spec, model, seed),
                                                           *(("forgetting-base",) if once else ())),
                 {"forgetting": spec.recorded("forgetting"), **which, "dtype": spec.dtype},
                 tokens, run, weights=_trained(model, seed))


def _forgetting_base(spec: StudySpec) -> Stage:
    """The base's forgetting units once per study ([evaluations.forgetting] base_once = true),
    which every arm's forgetting stage takes (evalkit.forgetting.base_units)."""
    def run(folder: Path, _) -> dict:
        from evalkit.console import counted_progress
        from evalkit.forgetting.base_units import SUMMARY, score_base

        with counted_progress() as progress:
            summary = score_base(_forgetting_opts(spec, spec.base_model), folder, progress=progress)
        root = _root(folder, "forgetting/base")
        return {"folder": _rel(folder, root), "file": _rel(folder / SUMMARY, root), "units": summary["units"],
                "benchmarks": summary["benchmarks"]}

    identity = {"forgetting": spec.recorded("forgetting"), "model": "base", "dtype": spec.dtype}
    return Stage("forgetting-base", "forgetting/base", (), identity, _base_tokens(spec), run)


def _base_tokens(spec: StudySpec) -> int:
    """The base's half of a forgetting run's generated tokens (the KL's are the run's own)."""
    o = spec.evaluations["forgetting"]
    return (o.cost()["tokens"] - o.kl_prompts * o.kl_samples * o.kl_max_new_tokens) // 2


def _interpolate(spec: StudySpec, seed: int | None) -> Stage:
    """ES's checkpoint (t = 0) to GRPO's (t = 1) on the held-out split: the final ones, or (seeded)
    the picked ones of one seed."""
    o = spec.evaluations["interpolate"]
    out = _folder("interpolate", "es-grpo", seed)

    def run(folder: Path, results: dict) -> dict:
        from evalkit.interpolate import run_interpolate

        root = _root(folder, out)
        opts = replace(o, model=_checkpoint(spec, "es", seed, results, root), dtype=spec.dtype, device=spec.device,
                       other=_checkpoint(spec, "grpo", seed, results, root), task=_heldout_file(spec, results, root))
        barrier = run_interpolate(opts, folder)["barrier"]
        return {"file": _rel(folder / "interpolate.json", root),
                "loss_barrier": (barrier.get("loss") or {}).get("height"),
                "error_barrier": (barrier.get("error") or {}).get("height")}

    tokens = o.points * o.cost(_problems(spec, o))["tokens"]
    needs = (_data(spec), *_source(spec, "es", seed), *_source(spec, "grpo", seed))
    return Stage(f"interpolate-es-grpo{'' if seed is None else f'-s{seed}'}", out, needs,
                 {"interpolate": spec.recorded("interpolate"), **({} if seed is None else {"seed": seed}),
                  "dtype": spec.dtype}, tokens, run,
                 weights=(*_trained("es", seed), *_trained("grpo", seed)))


def _sparsity(spec: StudySpec, seed: int) -> Stage:
    o = spec.evaluations["sparsity"]

    def run(folder: Path, results: dict) -> dict:
        from evalkit.study.sparsity import matched_sparsity

        root = folder.parents[1]
        arms = {m: results[f"train-{m}-s{seed}"]["checkpoints"] for m in ("es", "grpo")}
        report = matched_sparsity(spec.base_model, {m: [{**c, "path": str(root / c["checkpoint"])} for c in cs]
                                                    for m, cs in arms.items()}, o, folder)
        return {"file": _rel(folder / "sparsity.json", root), "matched": report["matched"]}

    trains = (f"train-es-s{seed}", f"train-grpo-s{seed}")
    return Stage(f"sparsity-s{seed}", f"sparsity/seed-{seed}", trains, {"sparsity": spec.recorded("sparsity"),
                                                                         "seed": seed}, 0, run, weights=trains)


def _sparsity_bf16(spec: StudySpec) -> Stage:
    """Each bf16 run diffed against the base in bf16 bits: the share of weights changed, beside the
    run's per-step update size over half a bf16 ulp (the mean over its steps of the share of
    entries whose step exceeds half the bf16 spacing at their weight, from its metrics.jsonl:
    `update/over_half_ulp_frac`, which ES's and GRPO's trainers log). Per method its first scale's
    run (the one a claim reads), and every (method, scale) in `by_scale`."""
    scales = spec.evaluations["sparsity"].bf16_scales

    def run(folder: Path, results: dict) -> dict:
        from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs

        root, out, rows = folder.parents[1], {}, []
        for m in ("es", "grpo"):
            for x in scales:
                name = _bf16_name(m, x)
                train = results[f"train-bf16-{name}"]
                result = diff_checkpoints([spec.base_model, str(root / train["checkpoint"])],
                                          DiffOptions(as_dtype="bfloat16"))
                write_outputs(result, folder / name)
                overall = result.summary["updates"]["other"]["overall"]
                row = {"file": _rel(folder / name / "diff.json", root), "changed_frac_bits": overall["changed_frac_bits"]}
                out.setdefault(m, row)
                rows.append({"method": m, "scale": x, **row, **_step_sizes(root / f"train-bf16/{name}")})
        return {**out, "by_scale": rows}

    trains = tuple(f"train-bf16-{_bf16_name(m, x)}" for m in ("es", "grpo") for x in scales)
    return Stage("sparsity-bf16", "sparsity/bf16", trains, {"as_dtype": "bfloat16"}, 0, run, weights=trains)


def _step_sizes(folder: Path) -> dict:
    """A bf16 run's per-step update size from its log: the mean share of entries whose step exceeds
    half the bf16 spacing at their weight, and the mean relative step norm (None where not logged)."""
    from evalkit.train.common import MetricsLog

    lines = MetricsLog(folder / "metrics.jsonl").records()
    over = [x["update/over_half_ulp_frac"] for x in lines if x.get("update/over_half_ulp_frac") is not None]
    rel = [x.get("update/rel_norm_fp32", x.get("update/rel_norm")) for x in lines]
    rel = [r for r in rel if r is not None]
    return {"step_over_half_ulp": sum(over) / len(over) if over else None,
            "step_rel_norm": sum(rel) / len(rel) if rel else None, "steps": len(lines)}


def _findings(spec: StudySpec):
    def run(folder: Path, results: dict) -> dict:
        from analyses.study_findings import write_findings, write_seeded_findings

        if spec.seeds:
            write_seeded_findings(folder.parent, folder)
        else:
            write_findings(folder.parent, list(spec.methods), folder)
        return {"file": f"{folder.name}/findings.json"}

    return run


def _report(spec: StudySpec, needs: tuple) -> Stage:
    def run(folder: Path, results: dict) -> dict:
        from analyses.report import build_report

        root, extra = folder.parent, ()
        if spec.seeds:
            from analyses.report.study_sections import study_sections

            inputs = [root / "passk" / "base"] + sorted((root / "passk").glob("*/seed-*"))
            inputs += [root / name for name in ("entropy", "length") if (root / name).is_dir()]
            inputs += sorted((root / "interpolate").glob("es-grpo/seed-*"))
            extra = study_sections(json.loads((root / results["findings"]["file"]).read_text(encoding="utf-8")))
        else:
            inputs = [root / "passk" / m for m in ("base", *spec.methods)]
            inputs += [root / name for name in ("entropy", "length", "groups", "diff", "forgetting", "train",
                                                "interpolate") if (root / name).is_dir()]
        result = build_report(inputs, folder, title=spec.report_title, extra=extra)
        return {"file": f"{folder.name}/index.html", "sections": list(result.sections),
                "unused_inputs": [f"{p}: {why}" for p, why in result.problems]}

    return Stage("report", "report", needs, {"title": spec.report_title, **({"seeded": True} if spec.seeds else {})},
                 0, run)
