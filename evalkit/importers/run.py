"""`evalkit import`: another tool's samples -> an ordinary evalkit run folder.

    run_import("lm-eval", Path("out/samples_gsm8k_2025-01-01.jsonl"), Path("runs/lmeval"), ImportOptions())

Steps: the format's reader parses the files (nothing is written before it has read them whole:
a bad file is one UsageError); a file the tool had not finished, by what it declares itself
(a shard, a tmp_ file, missing documents, a log still running), is refused unless --partial;
the problems are matched to `--task`'s by id (refused where the question texts of the two sides
disagree: never shifted by an offset), then by question
text (whitespace-normalised, then the task's question inside the source's prompt), or, without
a task, the file's own gold answers become the task: `task/<name>.jsonl` in the run folder
(fields id, question, answer), which `evalkit regrade` rebuilds like any task file; the grades
are kept from the file (`--keep-grades`) or made by evalkit's grader (`--regrade`); num_tokens
come from the file's token ids or counts, else from `--tokenizer`, else stay null. `--out` is
locked before anything is read (one writer, evalkit.locks) and written in place through the run
folder's one writer (evalkit.rundir): run.json (`kind: passk`, provenance under `import`), then
samples.jsonl, then summary.json (evalkit.rundir.summarize, so pass@k, pass^k, maj@k, G-Pass@k,
mean@n). Problems with fewer samples than others are kept and counted. There is no final rename
that could fail after the grading (a link, a mount point): a kill at any instant leaves a folder
that the same command, rerun, finishes byte for byte (it appends the samples that are missing);
a folder that cannot be written (a full disk, removed meanwhile) gives one line, and the finished
import is kept beside it (`<out>.rescued-XXXX`, evalkit.outdir.rescue).

Limits: the run's model identity is what the source records (often only a name; no weights hash);
sampling settings the source does not record are absent (teacher-forced entropy then assumes
temperature 1); a task file written here names its
absolute path, so a moved run folder is regraded only with the file at its old place (or re-import).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, outcome_of
from evalkit.importers.folder import (
    KeptBeside,
    check_out,
    sweep_old_temporary_folder,
    task_file,
    write_run,
    write_task_file,
)
from evalkit.jsonio import file_sha256

__all__ = ["run_import", "FORMATS", "reader"]

FORMATS = {  # format name -> module of evalkit.importers with read(path, opts) -> Imported | list[Imported]
    "lm-eval": "lm_eval",
    "lighteval": "lighteval",
    "verl": "verl",
    "trl": "trl",
    "opencompass": "opencompass",
    "evalscope": "evalscope",
    "vllm": "vllm_jsonl",
    "inspect": "inspect_log",
    "jsonl": "generic",
}
BATCH = 256  # completions graded between progress updates


def reader(fmt: str) -> Callable[[Path, ImportOptions], Imported]:
    """The reader of a format; an unknown name lists the valid ones."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)} (csv files: jsonl)")
    from importlib import import_module

    return import_module(f"evalkit.importers.{FORMATS[fmt]}").read


def run_import(fmt: str, path: Path, out: Path, opts: ImportOptions, *, progress: Callable | None = None) -> dict:
    """Import `path` (a file or folder of format `fmt`) into the new run folder `out`; returns the summary.

    A folder holding several datasets (OpenCompass predictions, evalscope reviews) becomes one run
    folder per dataset, `out/<dataset>/`; the summary returned is then {"runs": {name: summary}}."""
    from evalkit.locks import locked
    from evalkit.rundir import check_writable

    opts.validate()
    read = reader(fmt)
    check_writable(Path(out))
    out, path = _absolute(Path(out)), _absolute(Path(path))  # the names hold if the working directory goes
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    with locked(out):  # one writer before any work; a refused import leaves no folder behind
        sweep_old_temporary_folder(out)
        found = read(path, opts)
        runs = found if isinstance(found, list) else [found]
        if len(runs) > 1 and opts.task:
            raise UsageError(f"{path}: holds {len(runs)} datasets ({', '.join(r.name for r in runs[:4])}); "
                             "--task names one: give the dataset's own file")
        for imported in runs:
            _check_whole(imported, opts)
        check_out(out, runs, _run_names(runs))
        if len(runs) == 1:
            return _import_one(runs[0], out, opts, progress)
        return {"runs": _import_several(runs, out, opts, progress)}


def _absolute(path: Path) -> Path:
    try:
        return Path(os.path.abspath(path))
    except FileNotFoundError:  # os.getcwd(): the working directory was removed
        raise UsageError(f"{path}: the working directory it is relative to was removed; cd to a folder that "
                         "exists, or give an absolute path") from None


def _import_several(runs: list[Imported], out: Path, opts: ImportOptions, progress) -> dict:
    """One run folder per dataset, `out/<dataset>/`; a refused dataset leaves none of the others
    that this call made behind (those of an earlier, interrupted call of the same import stay)."""
    made, summaries = [], {}
    try:
        for name, imported in zip(_run_names(runs), runs, strict=True):
            if not (out / name).exists():
                made.append(out / name)
            summaries[name] = _import_one(imported, out / name, opts, progress)
        return summaries
    except KeptBeside:  # the datasets finished before stay, the one that failed is beside its folder
        raise
    except UsageError:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        raise


def _import_one(imported: Imported, out: Path, opts: ImportOptions, progress) -> dict:
    from evalkit.locks import locked

    if not imported.samples:
        raise UsageError(f"{imported.files[0]}: holds no completions")
    keep = _keep_grades(imported, opts)
    counts = _token_counts(imported, opts)
    with locked(out):  # the import's own lock (shared), or a dataset folder's
        wrote: list[Path] = []  # the task file (and folder) written before run.json: gone if refused
        try:
            task, problems, matched = _task(imported, opts, out, wrote)
            samples = _assign(imported, matched, counts)
            records, grading = _records(samples, problems, task, keep, imported, opts, progress)
        except UsageError:
            for written in reversed(wrote):
                with contextlib.suppress(OSError):
                    if written.is_dir():
                        written.rmdir()
                    else:
                        written.unlink()
            raise
        return write_run(out, imported, task, records, grading | _provenance(imported, opts), task_file(task, out))


def _check_whole(imported: Imported, opts: ImportOptions) -> None:
    """A file the tool had not finished (by what it declares itself) is refused unless --partial."""
    if imported.partial and not opts.partial:
        raise UsageError(f"{imported.partial}; give --partial to import it as a partial run")


def _run_names(runs: list[Imported]) -> list[str]:
    names, seen = [], Counter()
    for imported in runs:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", imported.name).strip("._") or imported.format
        seen[name] += 1
        names.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return names


def _keep_grades(imported: Imported, opts: ImportOptions) -> bool:
    if opts.grades == "regrade":
        return False
    has = imported.grades is not None and all("score" in s for s in imported.samples)
    if opts.grades == "keep" and not has:
        raise UsageError(imported.no_grades_why or f"{imported.format}: the file has no per-sample grades; "
                         "use --regrade")
    return has


# ---------------------------------------------------------------- problems and the task


def _norm(text) -> str:
    return " ".join(str(text).split())


def _task(imported: Imported, opts: ImportOptions, out: Path, wrote: list[Path]):
    """(task, {problem id: Problem}, {source key: problem id}) from --task or the file's gold answers
    (a task file written in `out`, added to `wrote` with the folder it made)."""
    if opts.task:
        from evalkit.tasks import load_task

        task = load_task(opts.task, size=opts.task_size, seed=opts.task_seed, config=opts.task_config_dict())
        matched = _match(imported, task.problems, opts.task)
        return task, {p.id: p for p in task.problems}, matched
    return _own_task(imported, opts, out, wrote)


def _task_texts(problem) -> list[str]:
    texts = (problem.prompt, *((problem.entry or {}).get(k) for k in ("question", "problem", "prompt")))
    return [_norm(t) for t in texts if isinstance(t, str) and t.strip()]


def _agrees(question: str, texts: list[str], head: int = 60) -> bool:
    """The source's question and the task problem's text are the same problem: the opening of one
    (its first `head` characters, whitespace-normalised) is inside the other. Openings, because a
    source prompt puts few-shot examples before the question and a preset puts its instruction
    after it."""
    q = _norm(question)
    return any(t[:head] in q or q[:head] in t for t in texts)


def _match(imported: Imported, problems, task_name: str) -> dict[str, str]:
    """source key -> task problem id: by id (verified by the question text where both sides have
    one), by normalised question text, then by the longest task question found inside the source's
    text. A key that names another problem than the task's same id is refused, never shifted;
    unmatched keys are left out (counted by the caller)."""
    by_id = {p.id: p for p in problems}
    by_text: dict[str, str] = {}
    for p in problems:
        for text in _task_texts(p):
            by_text.setdefault(text, p.id)
    matched, how = {}, Counter()
    for key, info in imported.problems.items():
        question = _norm(info.get("question") or "")
        if key in by_id:
            texts = _task_texts(by_id[key])
            own = question and question != _norm(key)  # a question text of its own, not the key again
            if own and texts and not _agrees(question, texts):
                raise UsageError(f"--task {task_name}: problem {key!r} of the file is not problem {key!r} of the task "
                                 f"(file: {question[:70]!r}; task: {texts[0][:70]!r}); the file's ids and the task's "
                                 "name different problems: give the task the samples were drawn from, with the same ids")
            matched[key] = key
            how["id and question text" if own and texts else "id (no question text to check)"] += 1
        elif question in by_text:
            matched[key], how["text"] = by_text[question], how["text"] + 1
        elif question and (inside := [t for t in by_text if len(t) >= 8 and t in question]):
            matched[key], how["text inside the prompt"] = by_text[max(inside, key=len)], how["text inside the prompt"] + 1
    if not matched:
        first = next(iter(imported.problems))
        raise UsageError(f"no problem of the file matches a problem of --task {task_name} by id or question text "
                         f"(first: {first!r}); give the task the samples were drawn from")
    imported.notes["matched"] = dict(how)
    return matched


def _own_task(imported: Imported, opts: ImportOptions, out: Path, wrote: list[Path]):
    """The file's problems and gold answers as a task file in the run folder (see the module docstring)."""
    from evalkit.tasks import files
    from evalkit.tasks.hf import PRESETS, gold_answer

    rows, rules = [], Counter()
    preset = PRESETS.get(opts.preset) if opts.preset else None
    qkey, akey = (preset.question, preset.answer) if preset else ("question", "answer")
    for key, info in imported.problems.items():
        gold = info.get("gold")
        if gold is None or not str(gold).strip():
            raise UsageError(f"{imported.format}: problem {key!r} has no gold answer in the file; give --task "
                             "(the task the samples were drawn from)" + (" or --gold-field" if imported.format in
                                                                          ("jsonl", "vllm", "trl") else ""))
        if not preset:
            rule = "after_hashes" if "####" in str(gold) else "last_boxed" if "\\boxed" in str(gold) else "text"
            rules[rule] += 1
            gold = gold_answer(gold, rule) or str(gold).strip()
        rows.append({"id": key, qkey: str(info.get("question") or key), akey: str(gold)})
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", imported.name).strip("._")[:80] or "problems"
    path = out / "task" / f"{name}.jsonl"
    write_task_file(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), wrote)
    task = files.load(path, {"preset": opts.preset} if preset else None)
    imported.notes["gold"] = f"preset {opts.preset}" if preset else dict(rules)
    return task, {p.id: p for p in task.problems}, {key: key for key in imported.problems}


# ---------------------------------------------------------------- samples and grades


def _assign(imported: Imported, matched: dict[str, str], counts: list[int]) -> list[dict]:
    """Each matched sample with its problem id and sample index (the source's own index when it
    has one, else the order of appearance); a repeated index is refused."""
    out, seen, nxt = [], set(), Counter()
    unmatched = Counter()
    for s, tokens in zip(imported.samples, counts, strict=True):
        pid = matched.get(s["problem"])
        if pid is None:
            unmatched[s["problem"]] += 1
            continue
        index = s.get("index")
        index = nxt[pid] if index is None else int(index)
        nxt[pid] = max(nxt[pid], index + 1)
        if (pid, index) in seen:
            raise UsageError(f"{imported.format}: problem {pid!r} has sample index {index} twice")
        seen.add((pid, index))
        out.append({**s, "problem_id": pid, "sample_index": index, "num_tokens": tokens})
    if unmatched:
        imported.notes["unmatched"] = {"problems": len(unmatched), "samples": sum(unmatched.values()),
                                       "examples": [str(k)[:80] for k in list(unmatched)[:3]]}
    return out


def _records(samples, problems, task, keep: bool, imported: Imported, opts: ImportOptions, progress):
    """samples.jsonl records, and how they were graded (for run.json)."""
    records = []
    for s in samples:
        outcome, detail = outcome_of(s["score"]) if "score" in s else (None, None)
        record = {"problem_id": s["problem_id"], "sample_index": s["sample_index"], "completion": s["completion"],
                  "extracted": s.get("extracted"), "outcome": outcome, "detail": detail, "num_tokens": s["num_tokens"],
                  "finish_reason": s.get("finish_reason") or "stop", "mean_entropy": s.get("mean_entropy"),
                  "seed": s.get("seed")}
        if s.get("token_ids") is not None:
            record["token_ids"] = [int(t) for t in s["token_ids"]]
        records.append(record)
    if keep:
        return records, {"grader": f"{imported.format}'s own grades ({imported.grades})",
                         "grades": f"kept from the file's {imported.grades!r}"}
    return _regrade(records, problems, task, opts, progress)


def _regrade(records, problems, task, opts: ImportOptions, progress):
    from evalkit.grader_compare import agrees
    from evalkit.grading import Grader
    from evalkit.tasks import grader_version

    agree = Counter()
    with Grader(task.spec, workers=opts.grader_workers, deadline=opts.grade_timeout) as grader:
        for start in range(0, len(records), BATCH):
            batch = records[start : start + BATCH]
            grades = grader.grade([(r["completion"], problems[r["problem_id"]]) for r in batch])
            for r, g in zip(batch, grades, strict=True):
                if r["outcome"] is not None:
                    r["source_outcome"] = r["outcome"]
                    same = agrees(r["outcome"], g.outcome)  # None: either side has no verdict
                    if same is not None:
                        agree[same] += 1
                r.update(extracted=g.extracted, outcome=g.outcome, detail=g.detail)
            if progress:
                progress(min(start + BATCH, len(records)), len(records))
    grading = {"grader": grader_version(task.spec.kind), "grades": "regraded by evalkit"}
    if agree:
        grading["agreement_with_source"] = {"same_correctness": agree[True], "samples": sum(agree.values())}
    return records, grading


def _token_counts(imported: Imported, opts: ImportOptions) -> list[int | None]:
    """Each completion's generated tokens: the file's count or token ids, else --tokenizer's count,
    else null (pass@k, maj@k and regrading need no tokens; `evalkit length` and `entropy` say so)."""
    samples = imported.samples
    counts = [s["num_tokens"] if isinstance(s.get("num_tokens"), int) else
              len(s["token_ids"]) if s.get("token_ids") is not None else None for s in samples]
    missing = [i for i, c in enumerate(counts) if c is None]
    if missing and opts.tokenizer is None:
        imported.mapping["num_tokens"] = (f"null for {len(missing)} completions: the file has no token ids or counts "
                                          "(import with --tokenizer MODEL to count them)")
    elif missing:
        from evalkit.models import token_counter

        count = token_counter(opts.tokenizer)
        for i in missing:
            counts[i] = count(samples[i]["completion"])
        imported.mapping["num_tokens"] = (imported.mapping.get("num_tokens", "") + f" counted with the tokenizer of "
                                          f"{opts.tokenizer} for {len(missing)} completions").strip()
    return counts


# ---------------------------------------------------------------- provenance


def _provenance(imported: Imported, opts: ImportOptions) -> dict:
    files = [{"path": str(f.resolve()), "sha256": file_sha256(f), "bytes": f.stat().st_size} for f in imported.files]
    record = {"format": imported.format, "sources": files, "mapping": imported.mapping,
              "task": opts.task or "the file's gold answers", "notes": imported.notes}
    if imported.partial:
        record["partial"] = imported.partial
    if imported.reported:
        record["reported"] = asdict(imported.reported)
    return record
