"""The plan of a study with `seeds = [...]`: every method trained once per seed, checkpoints
along training, a stopping rule on a validation split, and the evaluations at the picked one.

    stages = plan_seeded(spec)     # evalkit.study.stages.plan calls it when the file gives seeds

    data/                          heldout.jsonl, validation.jsonl, splits.json: the training generator
                                   with three seeds; held-out and validation questions unique, never in
                                   training (commuted forms `a + b` / `b + a` are one question), and
                                   validation never held out
    train/<m>/seed-<s>/            the trainer (evalkit.train), a checkpoint every save_every updates
    validation/<m>/seed-<s>/       greedy passk on the validation split at each candidate checkpoint
                                   (the arm's last trainer's); the rule picks one (study.json result)
    validation/base/               the base's greedy validation reward, for reference
    curves/<base|m/seed-<s>>/      [evaluations.curves] passk on the held-out split at every saved
                                   checkpoint (pass@1, pass@k and entropy over training)
    passk/, passk-nucleus/         [evaluations.passk] / [evaluations.passk-nucleus] at the picked checkpoints
    diff/<m>/seed-<s>/             evalkit.diff of the picked checkpoint against the base
    forgetting/<m>/seed-<s>/       evalkit.forgetting at the picked checkpoint
    interpolate/es-grpo/seed-<s>/  evalkit.interpolate from ES's picked checkpoint to GRPO's ([evaluations.interpolate])
    sparsity/seed-<s>/             evalkit.study.sparsity: ES and GRPO at matched update norm, scale free
    train-bf16/<es|grpo>/, sparsity/bf16/   a short bf16-trained run per arm, diffed in bf16 bits
    findings/, report/             analyses.study_findings (seeded), analyses.report

The GRPO control (GRPO at ES-then-GRPO's GRPO step count) is the GRPO arm's checkpoint at that
step, evaluated in curves/ (spec.py checks that GRPO saves there). Stage names carry the seed
(`train-es-s0`); a study without `seeds` keeps the one-run plan of evalkit.study.stages.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from evalkit.options import plain
from evalkit.sampling import SAMPLER_VERSION
from evalkit.study.spec import StudySpec, saved_steps
from evalkit.study.stages import Stage, _rel, _report_stage, _with_inputs

__all__ = ["plan_seeded", "question_key", "picked_checkpoint", "arm_checkpoints"]


def plan_seeded(spec: StudySpec) -> list[Stage]:
    ev = spec.evaluations
    stages = [_splits(spec), _passk(spec, "passk", "base", None)]
    if "passk-nucleus" in ev:
        stages.append(_passk(spec, "passk-nucleus", "base", None))
    if "curves" in ev:
        stages.append(_curves(spec, "base", None))
    stages.append(_validate(spec, "base", None))
    pair = {"es", "grpo"} <= set(spec.methods)
    # ES's and GRPO's arms come first and the stages reading both arms' checkpoints right after
    # GRPO's validation: a study resumed on a clone without weights (evalkit.study.weights) then
    # trains again as few arms as the stages left to run load.
    order = [m for m in spec.methods if m in ("es", "grpo")] + [m for m in spec.methods if m not in ("es", "grpo")]
    for seed in spec.seeds:
        for m in order:
            stages += [_train(spec, m, seed), _validate(spec, m, seed)]
            if pair and m == order[1]:
                if "sparsity" in ev:
                    stages.append(_sparsity(spec, seed))
                if "interpolate" in ev:
                    stages.append(_interpolate(spec, seed))
            stages.append(_passk(spec, "passk", m, seed))
            if "passk-nucleus" in ev:
                stages.append(_passk(spec, "passk-nucleus", m, seed))
            if "curves" in ev:
                stages.append(_curves(spec, m, seed))
            if "diff" in ev:
                stages.append(_diff(spec, m, seed))
            if "forgetting" in ev:
                stages.append(_forgetting(spec, m, seed))
    if "sparsity" in ev and pair and ev["sparsity"]["bf16_completions"]:
        stages += [_train_bf16(spec, m) for m in ("es", "grpo")]
        stages.append(_sparsity_bf16(spec))
    for name, make in (("entropy", _entropy), ("length", _length)):
        if name in ev:
            stages.append(_report_stage(name, _passk_names(stages), ev[name], make(spec)))
    stages.append(_report_stage("findings", tuple(s.name for s in stages), {"claims": "docs/study.md", "seeded": True},
                                _findings(spec)))
    stages.append(_report(spec, tuple(s.name for s in stages)))
    # a study resumed by another sampler redoes what it draws, rather than mixing two samplers' runs
    return _with_inputs([replace(s, identity={**s.identity, "sampler": SAMPLER_VERSION}) for s in stages])


def _tag(model: str, seed: int | None) -> str:
    return model if seed is None else f"{model}-s{seed}"


def _folder(kind: str, model: str, seed: int | None) -> str:
    return f"{kind}/{model}" if seed is None else f"{kind}/{model}/seed-{seed}"


def _trained(model: str, seed: int | None) -> tuple[str, ...]:
    """The training stage whose checkpoints a stage of this model loads (none for the base)."""
    return () if model == "base" else (f"train-{model}-s{seed}",)


def _passk_names(stages) -> tuple:
    return tuple(s.name for s in stages if s.name.startswith("passk-") and not s.name.startswith("passk-nucleus"))


# ---------------------------------------------------------------- the splits


def question_key(task: str, question: str) -> str:
    """What makes two questions the same question: for arith, the multiset of its operands (so
    `13 + 14` and `14 + 13` are one); otherwise the text."""
    if task == "arith":
        from evalkit.tasks.arith import operands

        found = operands(question)
        if found is not None:
            return "arith:" + "+".join(map(str, sorted(found)))
    return question


def _splits(spec: StudySpec) -> Stage:
    def run(folder: Path, _) -> dict:
        from evalkit.jsonio import write_atomic, write_json_atomic
        from evalkit.tasks import load_task

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
            write_atomic(folder / file, lambda fh, chosen=chosen: fh.writelines(
                json.dumps({"id": p.id, "question": p.prompt, "answer": p.answer}) + "\n" for p in chosen))
        record = {"question_key": "arith: the sorted operands (a + b and b + a are one question); else the text",
                  "heldout": {"problems": len(held), **held_drops},
                  "validation": {"problems": len(valid), **valid_drops}}
        write_json_atomic(folder / "splits.json", record)
        short = [k for k, want in (("heldout", spec.eval_task["limit"]), ("validation", val["limit"]))
                 if record[k]["problems"] < want]
        if short:
            from evalkit.errors import UsageError

            raise UsageError(f"{short[0]}: only {record[short[0]]['problems']} unique unseen questions; raise its "
                             "size (more problems generated) or lower its limit")
        return {"heldout_file": "data/heldout.jsonl", "validation_file": "data/validation.jsonl", **record}

    identity = {"train": spec.train_task, "eval": spec.eval_task, "validation": spec.validation,
                "dedupe": "question_key-v1"}
    return Stage("splits", "data", (), identity, 0, run)


def _unique(problems, taken: set, task: str, limit: int) -> tuple[list, dict]:
    """The first `limit` problems whose question is neither in `taken` nor a repeat."""
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


def _trainers(spec: StudySpec, method: str, seed: int) -> tuple:
    return tuple(replace(t, opts=replace(t.opts, seed=seed)) for t in spec.methods[method])


def _train(spec: StudySpec, method: str, seed: int) -> Stage:
    trainers = _trainers(spec, method, seed)
    spent = spec.budget["spent"][method]
    tokens = sum(t.completions * t.opts.max_new_tokens for t in trainers)

    def run(folder: Path, _) -> dict:
        import time

        from evalkit.console import train_progress
        from evalkit.train import run_es, run_es_grpo, run_grpo

        started = time.monotonic()
        if method == "es-grpo":
            with train_progress(f"es-grpo s{seed}: es") as a, train_progress(f"es-grpo s{seed}: grpo") as b:
                bars = {"es": a, "grpo": b}
                summary = run_es_grpo(trainers[0].opts, trainers[1].opts, folder, progress_for=bars.get)
        else:
            runner = {"es": run_es, "grpo": run_grpo}[trainers[0].kind]
            with train_progress(f"{method} s{seed}") as progress:
                summary = runner(trainers[0].opts, folder, progress=progress)
        root = folder.parents[2]
        return {"checkpoint": _rel(summary["final_checkpoint"], root), "complete": summary["complete"],
                "checkpoints": arm_checkpoints(folder, trainers, root), "seconds_this_run": time.monotonic() - started,
                "budget": _budget(folder, trainers)}

    identity = {"method": method, "seed": seed, "trainers": [plain(asdict(t.opts)) for t in trainers],
                "budget": spent}
    return Stage(f"train-{method}-s{seed}", _folder("train", method, seed), (), identity, tokens, run)


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
    """What the arm spent, measured from its logs: completions, generated tokens and the
    trainers' own seconds (metrics.jsonl `completions/mean_length` x the completions of the
    update: GRPO's `groups_sampled` x `group_size`, every sampling round of dynamic sampling
    included, else the trainer's completions per update)."""
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


def picked_checkpoint(result: dict) -> dict:
    return result["picked"]


def _validate(spec: StudySpec, model: str, seed: int | None) -> Stage:
    v = spec.validation
    needs = ("splits",) if model == "base" else ("splits", f"train-{model}-s{seed}")

    def run(folder: Path, results: dict) -> dict:
        from evalkit.options import PasskOptions
        from evalkit.passk import run_passk

        root = folder.parent.parent if seed is None else folder.parents[2]
        task = str(root / results["splits"]["validation_file"])
        if model == "base":
            candidates = [{"step": 0, "checkpoint": spec.base_model, "completions": 0}]
        else:
            candidates = [c for c in results[f"train-{model}-s{seed}"]["checkpoints"] if c["last_trainer"]]
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
    tokens = v["limit"] * v["max_new_tokens"]
    return Stage(f"validate-{_tag(model, seed)}", _folder("validation", model, seed), needs, identity, tokens, run,
                 weights=_trained(model, seed))


def pick(rows: list[dict], rule: str) -> dict:
    """best-greedy: the highest greedy validation reward, ties to the earlier checkpoint;
    final: the last one."""
    if rule == "final":
        return rows[-1]
    best = max(r["reward"] for r in rows)
    return next(r for r in rows if r["reward"] == best)


# ---------------------------------------------------------------- evaluations


def _model_path(spec: StudySpec, model: str, seed, results: dict, root: Path) -> str:
    if model == "base":
        return spec.base_model
    return str(root / results[f"validate-{model}-s{seed}"]["picked"]["checkpoint"])


def _passk_opts(spec: StudySpec, o: dict, model: str, task: str):
    from evalkit.options import PasskOptions

    return PasskOptions(model=model, task=task, n=o["n"], ks=tuple(o["k"]), temperature=o["temperature"],
                        top_p=o["top_p"], max_new_tokens=o["max_new_tokens"], batch_size=o["batch_size"],
                        seed=o["seed"], limit=None, dtype=spec.dtype, device=spec.device)


def _passk(spec: StudySpec, kind: str, model: str, seed: int | None) -> Stage:
    o = spec.evaluations[kind]
    needs = ("splits",) if model == "base" else ("splits", f"validate-{model}-s{seed}")

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import passk_progress
        from evalkit.passk import run_passk

        root = folder.parent.parent if seed is None else folder.parents[2]
        opts = _passk_opts(spec, o, _model_path(spec, model, seed, results, root), str(root / results["splits"]["heldout_file"]))
        with passk_progress(f"{kind} {_tag(model, seed)}") as progress:
            summary = run_passk(opts, folder, progress=progress)
        return {"run": _rel(folder, root), "complete": summary["complete"]}

    tokens = spec.eval_task["limit"] * o["n"] * o["max_new_tokens"]
    identity = {"model": model, "seed": seed, kind: o, "dtype": spec.dtype}
    return Stage(f"{kind}-{_tag(model, seed)}", _folder(kind, model, seed), needs, identity, tokens, run,
                 weights=_trained(model, seed))


def _curves(spec: StudySpec, model: str, seed: int | None) -> Stage:
    """[evaluations.curves] at every saved checkpoint (the base: one point, step 0)."""
    o = spec.evaluations["curves"]
    needs = ("splits",) if model == "base" else ("splits", f"train-{model}-s{seed}")

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import passk_progress
        from evalkit.passk import run_passk

        root = folder.parents[1] if seed is None else folder.parents[2]
        task = str(root / results["splits"]["heldout_file"])
        points = ([{"trainer": "base", "step": 0, "completions": 0, "checkpoint": spec.base_model}]
                  if model == "base" else results[f"train-{model}-s{seed}"]["checkpoints"])
        rows = []
        for p in points:
            path = p["checkpoint"] if model == "base" else str(root / p["checkpoint"])
            sub = folder if model == "base" else folder / f"{p['trainer']}-step-{p['step']:06d}"
            with passk_progress(f"curves {_tag(model, seed)} {p['trainer']} {p['step']}") as progress:
                run_passk(_passk_opts(spec, o, path, task), sub, progress=progress)
            rows.append({**p, "run": _rel(sub, root)})
        return {"points": rows}

    n_points = 1 if model == "base" else sum(len(saved_steps(t.opts)) for t in spec.methods[model])
    tokens = n_points * spec.eval_task["limit"] * o["n"] * o["max_new_tokens"]
    folder = "curves/base" if model == "base" else _folder("curves", model, seed)
    return Stage(f"curves-{_tag(model, seed)}", folder, needs, {"curves": o, "model": model, "seed": seed,
                                                               "dtype": spec.dtype}, tokens, run,
                 weights=_trained(model, seed))


def _diff(spec: StudySpec, model: str, seed: int) -> Stage:
    o = spec.evaluations["diff"]

    def run(folder: Path, results: dict) -> dict:
        from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs

        root = folder.parents[2]
        as_dtype = None if spec.dtype == "float32" else spec.dtype
        result = diff_checkpoints([spec.base_model, _model_path(spec, model, seed, results, root)],
                                  DiffOptions(atol=o["atol"], threads=o["threads"], as_dtype=as_dtype))
        write_outputs(result, folder)
        return {"file": _rel(folder / "diff.json", root)}

    return Stage(f"diff-{_tag(model, seed)}", _folder("diff", model, seed), (f"validate-{model}-s{seed}",),
                 {"diff": o, "model": model, "seed": seed, "dtype": spec.dtype}, 0, run, weights=_trained(model, seed))


def _interpolate(spec: StudySpec, seed: int) -> Stage:
    """[evaluations.interpolate] from ES's picked checkpoint (t = 0) to GRPO's (t = 1) of one seed,
    on the held-out split."""
    o = spec.evaluations["interpolate"]
    needs = ("splits", f"validate-es-s{seed}", f"validate-grpo-s{seed}")

    def run(folder: Path, results: dict) -> dict:
        from evalkit.interpolate import InterpolateOptions, run_interpolate

        root = folder.parents[2]
        opts = InterpolateOptions(model=_model_path(spec, "es", seed, results, root),
                                  other=_model_path(spec, "grpo", seed, results, root),
                                  task=str(root / results["splits"]["heldout_file"]), dtype=spec.dtype,
                                  device=spec.device, points=o["points"], n=o["n"], ks=tuple(o["k"]),
                                  temperature=o["temperature"], max_new_tokens=o["max_new_tokens"],
                                  batch_size=o["batch_size"], limit=o["limit"], seed=o["seed"])
        barrier = run_interpolate(opts, folder)["barrier"]
        return {"file": _rel(folder / "interpolate.json", root),
                "loss_barrier": (barrier.get("loss") or {}).get("height"),
                "error_barrier": (barrier.get("error") or {}).get("height")}

    limit = min(o["limit"] or spec.eval_task["limit"], spec.eval_task["limit"])
    tokens = o["points"] * limit * o["n"] * o["max_new_tokens"]
    return Stage(f"interpolate-es-grpo-s{seed}", _folder("interpolate", "es-grpo", seed), needs,
                 {"interpolate": o, "seed": seed, "dtype": spec.dtype}, tokens, run,
                 weights=(f"train-es-s{seed}", f"train-grpo-s{seed}"))


def _forgetting(spec: StudySpec, model: str, seed: int) -> Stage:
    o = spec.evaluations["forgetting"]

    def run(folder: Path, results: dict) -> dict:
        from evalkit.console import counted_progress
        from evalkit.forgetting.runner import ForgettingOptions, run_forgetting

        root = folder.parents[2]
        opts = ForgettingOptions(base=spec.base_model, model=_model_path(spec, model, seed, results, root),
                                 train_task=spec.train_task["name"], dtype=spec.dtype, device=spec.device,
                                 **_forgetting_options(o))
        with counted_progress() as progress:
            report = run_forgetting(opts, folder, progress=progress)
        return {"file": _rel(folder / "forgetting.json", root), "verdict": report["verdict"]}

    from evalkit.forgetting.runner import ForgettingOptions

    tokens = ForgettingOptions(**_forgetting_options(o)).cost()["tokens"]
    return Stage(f"forgetting-{_tag(model, seed)}", _folder("forgetting", model, seed),
                 (f"validate-{model}-s{seed}",), {"forgetting": o, "model": model, "seed": seed,
                                                  "dtype": spec.dtype}, tokens, run, weights=_trained(model, seed))


def _forgetting_options(o: dict) -> dict:
    return {**o, "mc_files": tuple(tuple(x) for x in o.get("mc_files", ()))}


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
    return Stage(f"sparsity-s{seed}", f"sparsity/seed-{seed}", trains, {"sparsity": o, "seed": seed}, 0, run,
                 weights=trains)


def _bf16_trainer(spec: StudySpec, method: str):
    """The arm's trainer in bf16, the first seed, bf16_completions' worth of updates, one checkpoint."""
    t = spec.methods[method][0]
    count = max(1, round(spec.evaluations["sparsity"]["bf16_completions"] / t.opts.completions_per_unit()))
    return replace(t.opts, dtype="bfloat16", seed=spec.seeds[0], save_every=count, **{t.opts.units: count})


def _train_bf16(spec: StudySpec, method: str) -> Stage:
    opts = _bf16_trainer(spec, method)

    def run(folder: Path, _) -> dict:
        from evalkit.train import run_es, run_grpo

        summary = {"es": run_es, "grpo": run_grpo}[method](opts, folder)
        return {"checkpoint": _rel(summary["final_checkpoint"], folder.parents[1]), "complete": summary["complete"],
                "completions": opts.cost()["completions"]}

    return Stage(f"train-bf16-{method}", f"train-bf16/{method}", (), {"method": method, "trainer": plain(asdict(opts))},
                 opts.cost()["tokens"], run)


def _sparsity_bf16(spec: StudySpec) -> Stage:
    def run(folder: Path, results: dict) -> dict:
        from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs

        root, out = folder.parents[1], {}
        for m in ("es", "grpo"):
            result = diff_checkpoints([spec.base_model, str(root / results[f"train-bf16-{m}"]["checkpoint"])],
                                      DiffOptions(as_dtype="bfloat16"))
            write_outputs(result, folder / m)
            overall = result.summary["updates"]["other"]["overall"]
            out[m] = {"file": _rel(folder / m / "diff.json", root), "changed_frac_bits": overall["changed_frac_bits"]}
        return out

    trains = ("train-bf16-es", "train-bf16-grpo")
    return Stage("sparsity-bf16", "sparsity/bf16", trains, {"as_dtype": "bfloat16"}, 0, run, weights=trains)


def _entropy(spec: StudySpec):
    def run(folder: Path, results: dict) -> dict:
        from analyses.runs import load_run
        from analyses.sample_stats import entropy_report, write_report

        runs = [load_run(folder.parent / r["run"]) for k, r in results.items() if k.startswith("passk-")]
        write_report(entropy_report(runs), folder)
        return {"file": f"{folder.name}/entropy.json"}

    return run


def _length(spec: StudySpec):
    def run(folder: Path, results: dict) -> dict:
        from analyses.runs import load_run
        from analyses.sample_stats import length_report, write_report

        runs = {k: load_run(folder.parent / r["run"]) for k, r in results.items() if k.startswith("passk-")}
        base = runs.pop("passk-base")
        write_report(length_report(list(runs.values()), base=base, quantiles=spec.evaluations["length"]["quantiles"]),
                     folder)
        return {"file": f"{folder.name}/length.json"}

    return run


def _findings(spec: StudySpec):
    def run(folder: Path, results: dict) -> dict:
        from analyses.study_findings import write_seeded_findings

        write_seeded_findings(folder.parent, folder)
        return {"file": f"{folder.name}/findings.json"}

    return run


def _report(spec: StudySpec, needs: tuple) -> Stage:
    def run(folder: Path, results: dict) -> dict:
        from analyses.report import build_report
        from analyses.report.study_sections import study_sections

        root = folder.parent
        inputs = [root / "passk" / "base"] + sorted((root / "passk").glob("*/seed-*"))
        inputs += [root / name for name in ("entropy", "length") if (root / name).is_dir()]
        inputs += sorted((root / "interpolate").glob("es-grpo/seed-*"))
        findings = json.loads((root / results["findings"]["file"]).read_text(encoding="utf-8"))
        result = build_report(inputs, folder, title=spec.report_title, extra=study_sections(findings))
        return {"file": f"{folder.name}/index.html", "sections": list(result.sections),
                "unused_inputs": [f"{p}: {why}" for p, why in result.problems]}

    return Stage("report", "report", needs, {"title": spec.report_title, "seeded": True}, 0, run)
