"""The run directory: append-only samples plus an atomically replaced summary. The one writer of
passk-shaped folders (`evalkit passk`, interpolate's points, import, regrade, the study's passk
stages all write through it):

    settings = sampled_settings(opts, task, problems, sampling, sampler)   # run.json, after kind and model
    with RunDir.open(out, {"kind": "passk", "model": model, **settings}) as run:
        sample_missing(run, chunks, opts.n, executor.map, grader.grade)   # SampleRecord lines
        run.write_summary(summarize(run.samples(), problems, run.settings, opts.record()))

Layout (DESIGN.md's contract; docs/run-folder.md):
    run.json        the settings that determine the samples (written first)
    samples.jsonl   one line per (problem, sample index), appended when graded (`SampleRecord`)
    summary.json    identities, settings, per-k estimates, outcome counts (`summarize`)

A crash at any instant loses at most the samples in flight: each line is
written with one `write` on an O_APPEND descriptor and fsynced per batch; a
torn last line is cut off when the run is reopened; the summary is written
to a temporary file (`.summary.json.tmpPID`) and renamed over the old one; the
temporary files a kill leaves are removed when the folder is locked again
(evalkit.locks). A write that fails (a full disk, the folder removed) is one
line naming what is kept. A stored run.json is read through
`evalkit.records.upgrade`, so folders of older versions resume.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import (
    REJECTED,
    append_jsonl,
    cut_torn_line,
    read_samples,
    sample_problem,
    split_lines,
    temp_writer,
    write_atomic,
    write_failure,
    write_json_atomic,
)
from evalkit.locks import LOCK, FolderLock
from evalkit.records import SCHEMA_VERSION, upgrade

__all__ = ["SETTINGS", "SAMPLES", "SUMMARY", "RunDir", "WriteFailed", "SampleRecord", "sample_missing", "sampled_settings",
           "summarize", "estimator_options", "check_writable", "discarded_if_unused", "read_settings", "refuse_if_different"]

SETTINGS, SAMPLES, SUMMARY = "run.json", "samples.jsonl", "summary.json"
RUN_KINDS = ("passk", "train-", "interpolate")  # every run.json evalkit writes has a `kind` starting so


def check_writable(out: Path | None, what: str = "--out") -> None:
    """Refuse an output folder that cannot be written (under a regular file, a dangling or
    looping link, read-only, a full filesystem) before any work starts, without creating
    anything (evalkit.outdir.probe_out)."""
    from evalkit.outdir import probe_out

    if out is not None:
        probe_out(Path(out), what)


class RunDir:
    """One run's folder; `open` creates it or checks that it holds the same run."""

    def __init__(self, path: Path, settings: dict):
        self.path = Path(path)
        self.settings = {"schema_version": SCHEMA_VERSION, **settings}

    @classmethod
    def open(cls, path: str | Path, settings: dict, *, repair: bool = False, inputs: tuple[str, ...] = ()) -> RunDir:
        """Check or create the run folder, and hold its lock until `release()` or the end of a `with`
        (one writer). `repair`: corrupt lines of samples.jsonl move to samples.rejected.jsonl (to be
        sampled again). `inputs`: entries a new folder may already hold, put there by its own writer
        (an import's task/ folder)."""
        run = cls(Path(path), settings)
        if run.path.exists() and not run.path.is_dir():
            raise UsageError(f"{run.path}: exists and is not a folder")
        run.lock = FolderLock(run.path)
        try:
            with run.writing("what it held is kept; rerun the same command once it can be written"):
                run._check_or_create(inputs)
                if repair:
                    run._set_aside_corrupt_lines()
        except BaseException:
            run.lock.release(remove_if_created=True)
            raise
        return run

    def _check_or_create(self, inputs: tuple[str, ...]) -> None:
        stored_path = self.path / SETTINGS
        if stored_path.exists():
            stored = read_settings(stored_path)
            if not str(stored.get("kind", "")).startswith(RUN_KINDS):
                raise UsageError(f"{self.path}: holds {SETTINGS}, which is not an evalkit run's (kind "
                                 f"{stored.get('kind')!r}); nothing of a user is overwritten: use a new or empty --out")
            if self._holds_no_work():  # only its settings and empty logs: a failed start, taken over
                write_json_atomic(stored_path, self.settings)
                return
            refuse_if_different(self.path, upgrade(stored), self.settings)
            cut_torn_line(self.path / SAMPLES)
            return
        if any(p.name not in (LOCK, *inputs) and temp_writer(p.name) is None for p in self.path.iterdir()):
            raise UsageError(f"{self.path}: folder is not empty and holds no evalkit run; use another --out")
        write_json_atomic(stored_path, self.settings)

    def _holds_no_work(self) -> bool:
        """Nothing but run.json, the lock and empty files: a start that failed before any work
        (a bad model, a killed start), which another command may take over."""
        return _no_work(self.path)

    def _set_aside_corrupt_lines(self) -> int:
        path = self.path / SAMPLES
        good, bad = split_lines(path, check=sample_problem)
        if bad:
            with open(self.path / REJECTED, "ab") as fh:
                fh.writelines(raw for _, raw in bad)
            write_atomic(path, lambda fh: fh.writelines(
                json.dumps(r, ensure_ascii=False) + "\n" for _, r in good))
        return len(bad)

    def samples(self) -> list[dict]:
        return read_samples(self.path / SAMPLES)

    def append(self, records: Iterable[dict]) -> None:
        with self.writing(f"the samples appended before are kept in {SAMPLES}; rerun the same command to resume"):
            append_jsonl(self.path / SAMPLES, records)

    def write_summary(self, summary: dict) -> Path:
        path = self.path / SUMMARY
        with self.writing(f"the samples are kept in {SAMPLES}; rerun the same command to write {SUMMARY}"):
            write_json_atomic(path, summary)
        return path

    @contextlib.contextmanager
    def writing(self, kept: str):
        """An OSError of the writes inside is one line (a `WriteFailed`): the folder, why, and
        `kept` (what is there and how to go on)."""
        try:
            yield
        except OSError as exc:
            raise WriteFailed(self.path, write_failure(exc), kept) from None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()


class WriteFailed(UsageError):
    """A run folder that could not be written (a full disk, the folder removed): one line, with
    `folder` and `why` for a caller that keeps its result elsewhere (evalkit.outdir.rescue)."""

    def __init__(self, folder: Path, why: str, kept: str):
        super().__init__(f"{folder}: cannot be written ({why}); {kept}")
        self.folder, self.why = folder, why


@dataclass(frozen=True)
class SampleRecord:
    """One line of samples.jsonl (docs/run-folder.md): a graded completion."""

    problem_id: str
    sample_index: int
    completion: str
    extracted: str | None
    outcome: str | None  # None until graded (an import keeping no grades grades them next)
    detail: str | None
    num_tokens: int | None  # None: an import without token counts
    finish_reason: str
    mean_entropy: float | None
    seed: int | None

    @classmethod
    def drawn(cls, problem, sample_index: int, text: str, sample, grade) -> SampleRecord:
        """A sampled completion (evalkit.sampling.Sample) with its grade."""
        return cls(problem.id, sample_index, text, grade.extracted, grade.outcome, grade.detail, sample.num_tokens,
                   sample.finish_reason, sample.mean_entropy, sample.seed)

    def line(self, **extra) -> dict:
        return asdict(self) | extra


def sample_missing(run: RunDir, chunks: list, n: int, draw: Callable, grade: Callable, *, extra: dict | None = None,
                   progress: Callable | None = None) -> int:
    """Sample the run's fixed chunks that miss samples, grade them, append what is missing (`extra`
    added to every line); returns the tokens generated. `draw(jobs)` yields `(chunk index, {(problem
    id, j): (text, Sample)})` for `jobs = [(chunk index, problems)]`, in any order; `grade` is
    `Grader.grade`; `progress(done, total, tokens)`."""
    stored = run.samples()
    known = {p.id for part in chunks for p in part}
    if stray := next((r for r in stored if r["problem_id"] not in known), None):
        raise UsageError(f"{run.path / SAMPLES}: holds a sample of problem {stray['problem_id']!r}, which this "
                         "task does not have; the folder belongs to another task: use another --out")
    done = {(r["problem_id"], r["sample_index"]) for r in stored}
    total, tokens = sum(len(part) for part in chunks) * n, 0
    if progress:
        progress(len(done), total, 0)
    jobs = [(i, part) for i, part in enumerate(chunks) if any((p.id, j) not in done for p in part for j in range(n))]
    for index, drawn in draw(jobs):
        missing = [(p, j) for p in chunks[index] for j in range(n) if (p.id, j) not in done]
        tokens += sum(s.num_tokens for _, s in drawn.values())
        grades = grade([(drawn[(p.id, j)][0], p) for p, j in missing])
        run.append(SampleRecord.drawn(p, j, *drawn[(p.id, j)], g).line(**(extra or {}))
                   for (p, j), g in zip(missing, grades, strict=True))
        done.update((p.id, j) for p, j in missing)
        if progress:
            progress(len(done), total, tokens)
    return tokens


def sampled_settings(opts, task, problems: int, sampling: dict, sampler: str) -> dict:
    """What decides a passk-shaped folder's samples besides its kind and model(s), as run.json holds
    it: the task's identity, its grader, the sampler (evalkit.scale.sampler_version: a run drawn by
    another sampler is not resumed), the problem count, the effective sampling settings, the
    chunking (`batch_size`: batch composition changes float rounding), the device and CPU threads."""
    from evalkit.chunks import cpu_threads
    from evalkit.models import resolve_device
    from evalkit.tasks import grader_version

    device = resolve_device(opts.device)
    return {"task": task.spec.identity(), "grader": grader_version(task.spec.kind), "sampler": sampler,
            "problems": problems, "sampling": sampling, "batch_size": opts.batch_size, "device": device,
            "cpu_threads": cpu_threads(opts, device)}


OUTCOME_COUNTS = ("correct", "incorrect", "no_answer", "timeout", "error")


def estimator_options(n: int, stored: dict | None = None) -> dict:
    """The options `summarize` reads, for a run that does not record them all (an import records
    only these; a summary of an older evalkit may lack some): `stored` as it is, with n, k at the
    powers of two below n and n itself, and passk's seed, confidence and n_boot where missing."""
    from evalkit.options import PasskOptions

    stored = {k: v for k, v in (stored or {}).items() if v is not None and (k != "ks" or v)}
    default = PasskOptions.defaults()
    wanted = {"n": n, "ks": sorted({min(2**i, n) for i in range(n.bit_length())} | {n}),
              **{k: default[k] for k in ("seed", "confidence", "n_boot")}}
    return stored | {k: v for k, v in wanted.items() if k not in stored}


def summarize(records: list[dict], problems, settings: dict, options: dict) -> dict:
    """summary.json of stored samples: `settings` (run.json's), per-k estimates with intervals,
    pass^k, maj@k, G-Pass@k and mean@n beside them, and outcome counts. `options` is the run's
    options as records hold them (`Options.record()`; model and task are in the settings): its
    `n`, `ks`, `confidence`, `n_boot` and `seed` set the estimates."""
    from evalkit.jsonio import frame_records
    from evalkit.records import versions
    from metrics.passk import passk_table

    per_problem: dict[str, Counter] = {p.id: Counter() for p in problems}
    for r in records:
        per_problem[r["problem_id"]][r["outcome"]] += 1
    ns = [sum(c.values()) for c in per_problem.values()]
    answered = [(n, c["correct"]) for n, c in zip(ns, per_problem.values(), strict=True) if n > 0]
    outcomes = Counter(r["outcome"] for r in records)
    boot = {"n_boot": options["n_boot"], "confidence": options["confidence"], "seed": options["seed"]}
    table = passk_table([n for n, _ in answered], [c for _, c in answered], list(options["ks"]),
                        **boot) if answered else None
    summary = {
        **settings,
        "complete": all(n >= options["n"] for n in ns),
        "versions": versions(),
        "options": {k: v for k, v in options.items() if k not in ("model", "task")},
        "samples": len(records),
        "problems_with_samples": len(answered),
        "outcomes": {o: outcomes.get(o, 0) for o in OUTCOME_COUNTS},
        "confidence": options["confidence"],
        "interval": "percentile bootstrap over problems",
        "pass_at_k": [] if table is None else frame_records(table),
    }
    return summary | _voting(records, answered, list(options["ks"]), boot)


def _voting(records: list[dict], answered: list[tuple[int, int]], ks: list[int], boot: dict) -> dict:
    """pass^k, maj@k, G-Pass@k_tau, mG-Pass@k and mean@n beside pass@k (metrics.voting), with the
    same bootstrap settings; maj@k needs every incorrect sample's extracted answer (else null)."""
    from evalkit.jsonio import frame_records
    from metrics.voting import (
        TAUS,
        g_pass_table,
        maj_table,
        mean_at_n,
        mg_pass_table,
        pass_hat_table,
        vote_classes,
    )

    ns, cs = [n for n, _ in answered], [c for _, c in answered]
    unknown = sum(r["outcome"] == "incorrect" and r.get("extracted") in (None, "") for r in records)
    maj = None
    if answered and not unknown:
        _, classes = vote_classes([r["problem_id"] for r in records], [r["outcome"] == "correct" for r in records],
                                  [r.get("extracted") if r["outcome"] == "incorrect" else None for r in records])
        maj = frame_records(maj_table(classes, ks, **boot))
    return {
        "pass_hat_k": frame_records(pass_hat_table(ns, cs, ks, **boot)) if answered else [],
        "maj_at_k": maj,
        "g_pass_at_k": frame_records(g_pass_table(ns, cs, ks, taus=TAUS, **boot)) if answered else [],
        "mg_pass_at_k": frame_records(mg_pass_table(ns, cs, ks, **boot)) if answered else [],
        "mean_at_n": mean_at_n(ns, cs, **boot) if answered else None,
        "voting": {"definitions": "metrics/voting.py", "g_pass_taus": list(TAUS),
                   "maj_ties": "split uniformly (the expectation of lm-eval's and lighteval's first-seen rule)",
                   "maj_not_computed": (f"{unknown} incorrect samples have no extracted answer; `evalkit regrade` "
                                        "adds them") if unknown else None},
    }


def discarded_if_unused(run_fn):
    """Wrap a trainer `run_fn(opts, out, ...)`: when it fails (a model that does not load, Ctrl-C
    before the first step) and `out` did not exist before, the folder it made is removed as long as
    it holds no work (its settings, its lock and empty logs only): nothing is left behind."""
    import functools
    import shutil

    @functools.wraps(run_fn)
    def wrapper(opts, out, *args, **kwargs):
        existed = os.path.lexists(out)
        try:
            return run_fn(opts, out, *args, **kwargs)
        except BaseException:
            folder = Path(out)
            if not existed and folder.is_dir() and _no_work(folder):
                shutil.rmtree(folder, ignore_errors=True)
            raise

    return wrapper


def _no_work(folder: Path) -> bool:
    for entry in folder.iterdir():
        if entry.name in (SETTINGS, LOCK) or temp_writer(entry.name) is not None:
            continue
        if not entry.is_file() or entry.stat().st_size > 0:
            return False
    return True


def read_settings(path: Path) -> dict:
    """A stored run.json (or summary.json) as a dict, or a UsageError naming the file and the fix."""
    fix = "move the folder aside and rerun, or use another --out"
    try:
        stored = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); {fix}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); {fix}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror}); {fix}") from None
    if not isinstance(stored, dict):
        raise UsageError(f"{path}: not a JSON object; {fix}")
    return stored


def refuse_if_different(path: Path, stored: dict, wanted: dict, *, ordered: bool = False) -> None:
    """A UsageError naming the first key whose value differs (`kind` first, then the sampler, which a
    regrade cannot mend, then the grader, then by name; `ordered`:
    in the order of `wanted`'s keys, then any only `stored` has)."""
    same_kind = stored.get("kind") == wanted.get("kind")
    if same_kind and "sampler" in wanted and stored.get("sampler") != wanted["sampler"]:  # regrading cannot mend it
        raise UsageError(f"{path} holds a run with sampler={json.dumps(stored.get('sampler'))}, not "
                         f"{json.dumps(wanted['sampler'])}; use another --out or the same settings")
    if same_kind and "grader" in wanted and stored.get("grader") != wanted["grader"]:
        raise UsageError(
            f"{path} was graded by {stored.get('grader')}, this evalkit grades with {wanted['grader']}: "
            f"`evalkit regrade {path}` brings a passk run's grades up to date; or use another --out"
        )
    keys = dict.fromkeys([*wanted, *stored]) if ordered else sorted(set(stored) | set(wanted),
                                                                    key=lambda k: (k != "kind", k))
    for key in keys:  # what it is, first
        if stored.get(key) != wanted.get(key):
            raise UsageError(
                f"{path} holds a run with {key}={json.dumps(stored.get(key))}, "
                f"not {json.dumps(wanted.get(key))}; use another --out or the same settings"
            )
