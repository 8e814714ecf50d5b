"""Terminal output: progress bars, number formats and every command's tables. Nothing here computes.

Progress bars start on their first update and print nothing if never started, so an error
before any work stays one line. Numbers: `num` (3 decimals, integers as such), `pct`
(a fraction as a percentage), `sig` (3 significant digits), `pval`; None and NaN print "-".
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

console = Console()
err_console = Console(stderr=True)

KIND_ORDER = ("embedding", "q_proj", "k_proj", "v_proj", "o_proj", "mlp_gate", "mlp_up",
              "mlp_down", "norm", "lm_head", "other")


# ---------------------------------------------------------------- progress bars


@contextlib.contextmanager
def progress_bar(*columns, transient: bool = False):
    """Yields `task(description, **fields) -> id` and the rich Progress; the bar starts with its
    first task and is stopped only if it started."""
    bar = Progress(*columns, console=err_console, transient=transient)
    started: list = []

    def task(description: str, **kwargs):
        if not started:
            bar.start()
            started.append(True)
        return bar.add_task(description, **kwargs)

    try:
        yield task, bar
    finally:
        if started:
            bar.stop()


@contextlib.contextmanager
def step_progress(label: str):
    """One step before the work, such as a vLLM engine's start-up: a spinner with its time while it
    runs (gone if it fails, so an error stays one line), then `label: 41.2 s`."""
    started = time.monotonic()
    with progress_bar(SpinnerColumn(), TextColumn(f"[bold]{label}"), TimeElapsedColumn(), transient=True) as (task, _):
        task(label)
        yield
    err_console.print(f"{label}: {time.monotonic() - started:.1f} s")


@contextlib.contextmanager
def passk_progress(label: str = "sampling"):
    """A callback `(done, total, tokens=0)` driving a bar with ETA and tokens/s; its `step(label)`
    is `step_progress`, for what comes before the first sample (evalkit.passk)."""
    columns = (TextColumn(f"[bold]{label}"), BarColumn(), TextColumn("{task.completed}/{task.total} samples"),
               TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with progress_bar(*columns) as (task, bar):
        state: dict = {}

        def update(done: int, total: int, tokens: int = 0) -> None:
            if not state:
                state.update(id=task(label, total=total, rate=""), start=time.monotonic())
            elapsed = time.monotonic() - state["start"]
            rate = f"{tokens / elapsed:.0f} tok/s" if elapsed > 0 and tokens else ""
            bar.update(state["id"], total=total, completed=done, rate=rate)

        update.step = step_progress
        yield update


@contextlib.contextmanager
def train_progress(label: str):
    """Yields `update(step, total, reward)`: step, reward, ETA; starts at a resumed run's step."""
    columns = (TextColumn(f"[bold]{label}"), BarColumn(), TextColumn("step {task.completed}/{task.total}"),
               TextColumn("reward {task.fields[reward]}"), TimeElapsedColumn(), TextColumn("eta"),
               TimeRemainingColumn())
    with progress_bar(*columns) as (task, bar):
        state: dict = {}

        def update(step: int, total: int, reward: float) -> None:
            if not state:
                state["id"] = task(label, total=total, completed=step - 1, reward="-")
            bar.update(state["id"], total=total, completed=step, reward=f"{reward:.3f}")

        yield update


@contextlib.contextmanager
def bytes_progress(label: str):
    """Yields `update(done, total)` in bytes (evalkit diff); the bar disappears when done."""
    with progress_bar(f"[bold]{label}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                      transient=True) as (task, bar):
        state: dict = {}

        def update(done: int, total: int) -> None:
            if not state:
                state["id"] = task(label, total=total)
            bar.update(state["id"], completed=done)

        yield update


@contextlib.contextmanager
def counted_progress():
    """Yields `start(label, total) -> tick(k=1)`: one bar per (benchmark, model), or per batch job."""
    with progress_bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn()) as (task, bar):
        def start(label: str, total: int):
            tid = task(label, total=total)
            return lambda k=1: bar.advance(tid, k)

        yield start


# ---------------------------------------------------------------- numbers


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x, digits: int = 3) -> str:
    if _missing(x):
        return "-"
    if isinstance(x, float) and x.is_integer() and abs(x) >= 10:
        return str(int(x))
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def pct(x, digits: int = 2) -> str:
    return "-" if _missing(x) else f"{100 * x:.{digits}f}%"


def sig(x) -> str:
    return "-" if _missing(x) else f"{x:.3g}"


def pval(x) -> str:
    return "-" if _missing(x) else (f"{x:.3g}" if x >= 1e-3 else f"{x:.1e}")


def _interval(row: dict) -> str:
    return f"[{num(row.get('ci_low'))}, {num(row.get('ci_high'))}]"


# ---------------------------------------------------------------- passk, regrade


def print_passk(summary: dict, out: Path, *, resumable: bool = True) -> None:
    """`resumable` False (an import): uneven samples are what the source holds, not work to finish."""
    task = summary["task"]
    mark = "PARTIAL " if summary.get("partial") else ""
    title = f"{mark}pass@k  {summary['model']['name']} on {task['name']}  ({summary['problems_with_samples']} problems, n={summary['sampling']['n']})"
    table = Table(title=title)
    for col in ("k", "pass@k", f"{int(summary['confidence'] * 100)}% CI", "problems", "excluded (n<k)"):
        table.add_column(col, justify="right")
    for row in summary["pass_at_k"]:
        ci = _interval(row)
        table.add_row(str(row["k"]), num(row["pass_at_k"]), ci, str(row["n_problems"]), str(row["n_excluded"]))
    console.print(table)
    _print_voting(summary)
    counts = ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
    console.print(f"{mark.lower()}outcomes: {counts}")
    if not summary["complete"] and resumable:
        console.print("[yellow]incomplete: rerun the same command to finish the missing samples[/yellow]")
    console.print(f"wrote {out / 'samples.jsonl'} and {out / 'summary.json'}")


def _print_voting(summary: dict) -> None:
    """pass^k, maj@k, G-Pass@k at tau 0.5 and mG-Pass@k per k, and mean@n (metrics/voting.py); runs
    summarized before these existed print nothing here."""
    if not summary.get("pass_hat_k"):
        return
    rows = {key: {r["k"]: r for r in summary.get(key) or []} for key in ("pass_hat_k", "maj_at_k", "mg_pass_at_k")}
    rows["g_pass_at_k"] = {r["k"]: r for r in summary.get("g_pass_at_k") or [] if r["tau"] == 0.5}
    mark = "PARTIAL " if summary.get("partial") else ""
    table = Table(title=f"{mark}beside pass@k (their intervals: summary.json)")
    heads = (("pass^k (all k right)", "pass_hat_k"), ("maj@k", "maj_at_k"), ("G-Pass@k t=0.5", "g_pass_at_k"),
             ("mG-Pass@k", "mg_pass_at_k"))
    for col in ("k", *(head for head, _ in heads)):
        table.add_column(col, justify="right")
    for k in rows["pass_hat_k"]:
        table.add_row(str(k), *(num(row[key]) if (row := rows[key].get(k)) else "-" for _, key in heads))
    console.print(table)
    mean = summary.get("mean_at_n") or {}
    why = (summary.get("voting") or {}).get("maj_not_computed")
    console.print(f"{mark.lower()}mean@n {num(mean.get('mean_at_n'))} {_interval(mean)}" + (f"; maj@k not computed: {why}" if why else ""))


def print_import(summary: dict, out: Path) -> None:
    """The imported run's pass@k tables, then where the samples came from and what was counted; a
    folder of several datasets prints each run in turn."""
    if "runs" in summary:
        for name, one in summary["runs"].items():
            print_import(one, out / name)
        return
    info = summary["import"]
    print_passk(summary, out, resumable=False)
    mark = "partial: " if summary.get("partial") else ""
    sources = ", ".join(Path(s["path"]).name for s in info["sources"])
    per = ", ".join(f"{v} problems x {k}" for k, v in info["samples_per_problem"].items())
    console.print(f"{mark}imported {summary['samples']} completions of {summary['problems_with_samples']} problems from "
                  f"{info['format']} ({sources}); samples per problem: {per}; grades: {info['grades']}")
    if summary.get("partial"):
        console.print(f"[yellow]partial: {summary['partial']}; every figure above covers only what the file holds[/yellow]")
    notes = info.get("notes") or {}
    if notes.get("filter_read"):
        console.print(f"lm-eval filter: {notes['filter_read']} ({notes.get('filter_choice', 'chosen')}; in the file: "
                      f"{', '.join(notes.get('filters', []))}; --filter NAME for another)")
    if notes.get("unmatched"):
        u = notes["unmatched"]
        console.print(f"[yellow]not matched to --task {info['task']}: {u['problems']} problems ({u['samples']} "
                      f"samples) left out, e.g. {u['examples'][0]!r}[/yellow]")
    if info.get("agreement_with_source"):
        a = info["agreement_with_source"]
        console.print(f"the file's own grades agree with evalkit's on {a['same_correctness']} of {a['samples']}")
    if rep := info.get("reported"):
        own = next((r["pass_at_k"] for r in summary["pass_at_k"] if r["k"] == 1), None)
        console.print(f"{mark}the tool reported {rep['metric']} {num(rep['value'])} ({Path(rep['source']).name}); "
                      f"evalkit's pass@1 {num(own)}")
    if str(info["mapping"].get("num_tokens", "")).startswith("null"):
        console.print("num_tokens are null (no tokenizer given): `evalkit length` and `entropy` need them; import "
                      "with --tokenizer MODEL to count them")
    console.print(f"provenance (files, sha256, field mapping) in {out / 'run.json'}")


def print_regrade(result, out: Path) -> None:
    """Old against new pass@k, and the outcomes that changed."""
    summary, regraded = result.summary, result.summary["regraded"]
    old = {row["k"]: row for row in result.previous["pass_at_k"]}
    table = Table(title=f"regraded {summary['problems_with_samples']} problems x n={summary['sampling']['n']}: "
                        f"{regraded['from']} -> {regraded['to']}")
    level = f"{int(summary['confidence'] * 100)}% CI"
    for col in ("k", "old pass@k", f"old {level}", "new pass@k", f"new {level}", "change"):
        table.add_column(col, justify="right")
    for row in summary["pass_at_k"]:
        before = old.get(row["k"], {})
        change = None if before.get("pass_at_k") is None else row["pass_at_k"] - before["pass_at_k"]
        table.add_row(str(row["k"]), num(before.get("pass_at_k")),
                      f"[{num(before.get('ci_low'))}, {num(before.get('ci_high'))}]", num(row["pass_at_k"]),
                      f"[{num(row['ci_low'])}, {num(row['ci_high'])}]", "-" if change is None else f"{change:+.3f}")
    console.print(table)
    moves = ", ".join(f"{k} {v}" for k, v in regraded["transitions"].items()) or "none"
    console.print(f"changed outcomes: {regraded['changed']} of {summary['samples']} ({moves})")
    if result.torn_line:
        console.print(f"[yellow]line {result.torn_line} of the old samples.jsonl was torn (a crash mid-write) "
                      "and is left out[/yellow]")
    console.print(f"wrote {out / 'samples.jsonl'} and {out / 'summary.json'}")


def print_grader_compare(entry: dict, out: Path, rows: int = 8) -> None:
    """Agreement of two graders, pass@1 under each, and the first disagreements."""
    decided = entry.get("decided", entry["samples"])
    undecided = f"; {entry['undecided']} with a timeout or error counted in neither" if entry.get("undecided") else ""
    console.print(f"{entry['evalkit']} vs {entry['other']}: {decided - entry['disagree']} of "
                  f"{decided} samples both decided agree ({pct(entry['agreement'])}){undecided}; pass@1 "
                  f"{num(entry['pass_at_1']['evalkit'])} vs {num(entry['pass_at_1']['other'])}")
    if entry["disagreements"]:
        table = Table(title=f"where they disagree (first {min(rows, entry['disagree'])} of {entry['disagree']})",
                      title_justify="left")
        for col in ("problem", "gold", "completion ends", "evalkit", "other"):
            table.add_column(col, overflow="fold")
        for row in entry["disagreements"][:rows]:
            table.add_row(str(row["problem_id"]), str(row["gold"])[:30], row["completion_tail"][-60:],
                          f"{row['evalkit']['outcome']} {row['evalkit']['extracted']!s:.30}",
                          f"{row['other']['outcome']} {row['other']['extracted']!s:.30}")
        console.print(table)
    console.print(f"wrote {out / 'grader-compare.json'}")


# ---------------------------------------------------------------- diff


STAT_COLUMNS = (("changed", "changed_frac_bits", pct), (">atol", "changed_frac_atol", pct),
                (">rtol|w|", "changed_frac_rel", pct), ("|dW|", "update_norm", sig),
                ("|dW|/|W|", "rel_norm", sig), ("max|dW|", "max_abs_update", sig))
SHARE_COLUMNS = (("top 0.1%", "top_0.1pct_share", pct), ("top 1%", "top_1pct_share", pct),
                 ("top 10%", "top_10pct_share", pct))


def _stat_table(title: str, first: str, rows: list[tuple[str, dict]], columns):
    table = Table(title=title, title_justify="left")
    table.add_column(first)
    for head, _, _ in columns:
        table.add_column(head, justify="right")
    for label, stats in rows:
        table.add_row(label, *(fmt(stats.get(key)) for _, key, fmt in columns))
    return table


def print_diff(summary: dict, top: int = 8) -> None:
    """Overall, per module kind, most-changed layers, overlap and problems, as rich tables."""
    updates = summary["updates"]
    base = summary["inputs"]["base"]["name"]
    cast = summary["options"].get("as_dtype")
    console.print(f"[bold]base[/bold] {base}; " + "; ".join(
        f"[bold]{lab}[/bold] {summary['inputs'][lab]['name']}" for lab in updates)
        + f"; {summary['tensors_compared']} tensors compared" + (f" as {cast}" if cast else ""))
    console.print("[dim]changed: raw bits differ; >atol: |dW| > atol; >rtol|w|: |dW| > rtol*|W| "
                  "(survives bf16); top q: share of |dW|^2 in the largest q of entries[/dim]")
    for lab, u in updates.items():
        kinds = sorted(u["kinds"].items(), key=lambda kv: KIND_ORDER.index(kv[0]))
        rows = [("overall", u["overall"]), *kinds]
        console.print(_stat_table(f"Update {lab} - base, by module kind", "kind", rows, STAT_COLUMNS))
        console.print(_stat_table(f"Concentration of |dW|^2 ({lab})", "kind", rows, SHARE_COLUMNS))
        layers = sorted(u["layers"].items(), key=lambda kv: (-kv[1]["changed_frac_bits"],
                                                             -(kv[1]["rel_norm"] or 0)))
        console.print(_stat_table(f"Most-changed layers ({lab}, by changed fraction)", "layer",
                             [(f"layers.{i}", s) for i, s in layers[:top]], STAT_COLUMNS))
        if u.get("rank"):
            r = u["rank"]
            console.print(f"rank(dW)/min(shape) over {r['matrices']} matrices ({lab}): mean "
                          f"{r['mean_rank_ratio']:.3f}, min {r['min_rank_ratio']:.3f}, "
                          f"{r['full_rank']} full rank")
    if "overlap" in summary:
        _print_overlap(summary["overlap"])
    _print_problems(summary)


def _print_overlap(overlap: dict) -> None:
    columns = (("changed A", "changed_a", str), ("changed B", "changed_b", str),
               ("both", "changed_both", str), ("Jaccard", "jaccard", sig),
               ("chance", "jaccard_chance", sig), ("x chance", "jaccard_over_chance", sig),
               ("cosine", "cosine", sig), ("same sign", "sign_agreement", pct))
    rows = [("overall", overlap["overall"]),
            *sorted(overlap["kinds"].items(), key=lambda kv: KIND_ORDER.index(kv[0]))]
    console.print(_stat_table("Overlap of updates A and B (changed by bits)", "", rows, columns))


def _print_problems(summary: dict) -> None:
    overall = [u["overall"] for u in summary["updates"].values()]
    nonfinite = {key: sum(o[key] for o in overall) for key in
                 ("nan_base", "inf_base", "nan_other", "inf_other", "nonfinite_pairs")}
    lines = [f"[yellow]{key}[/yellow] ({len(summary[key])}): " + "; ".join(summary[key][:5])
             + (" ..." if len(summary[key]) > 5 else "")
             for key in ("missing", "extra", "mismatched", "skipped") if summary[key]]
    lines += [f"[dim]tied[/dim]: {t}" for t in summary["tied"]]
    if any(nonfinite.values()):
        lines.append("[red]non-finite[/red]: " + ", ".join(f"{k} {v}" for k, v in nonfinite.items()))
    for line in lines:
        console.print(line)


# ---------------------------------------------------------------- entropy, length, groups


def _frame_table(title: str, frame, columns: dict[str, str]):
    table = Table(title=title)
    for header in columns.values():
        table.add_column(header, justify="right")
    for row in frame.to_dict("records"):
        table.add_row(*(num(row.get(c)) for c in columns))
    return table


def print_entropy(report) -> None:
    frame = report.tables["runs"].assign(spread=lambda t: [
        f"{num(a, 2)}-{num(b, 2)}" for a, b in zip(t["q10"], t["q90"], strict=True)])
    cols = {"run": "run", "step": "step", "accuracy": "acc", "mean_per_sample": "H",
            "mean_per_token": "H/token", "mean_correct": "H ok", "mean_incorrect": "H wrong",
            "spread": "q10-q90", "n_missing": "missing"}
    if any(r.get("task_key") for r in report.runs):
        cols = {"task": "task", **cols}
    console.print(_frame_table("token entropy (nats)", frame, cols))
    console.print(f"order: {report.notes['ordering']}")
    fit = report.notes.get("fit")
    if fit:
        console.print(f"fit R = -a*exp(H) + b: a={fit['a']:.4g} b={fit['b']:.4g} R^2={num(fit['r2'])} "
                      f"ceiling at H=0: {fit['ceiling']:.3f} ({fit['n_points']} runs)")
        if fit.get("warning"):
            console.print(f"[yellow]{fit['warning']}[/yellow]")


def print_teacher(report) -> None:
    summary = report.notes["summary"]
    console.print(f"teacher-forced entropy, {report.notes['model']['name']}: "
                  f"{summary['n_samples']} samples, mean per sample {num(summary['mean_per_sample'], 4)} nats, "
                  f"per token {num(summary['mean_per_token'], 4)}")
    if "max_abs_diff_vs_recorded" in report.notes:
        console.print(f"max |teacher - recorded| = {report.notes['max_abs_diff_vs_recorded']:.2e} nats")


def print_length(report) -> None:
    cols = {"run": "run", "accuracy": "acc", "mean_tokens": "tokens", "mean_tokens_correct": "ok",
            "mean_tokens_incorrect": "wrong", "truncation_rate": "cut", "tokens_per_correct": "tok/ok",
            "outcome_efficiency": "out.eff", "aes": "AES"}
    if any(r.get("task_key") for r in report.runs):
        cols = {"task": "task", **cols}
    console.print(_frame_table("response length (tokens)", report.tables["runs"], cols))
    bins = {"run": "run", "bin": "bin", "min_tokens": "min", "max_tokens": "max", "n": "n", "accuracy": "acc"}
    console.print(_frame_table("accuracy by length quantile", report.tables["by_length"], bins))
    unlocated = int(report.tables["runs"]["n_unlocated"].sum())
    console.print(f"outcome efficiency unit: {report.notes['outcome_efficiency_unit']}; "
                  f"correct answers not located in the text: {unlocated}")


def print_groups(report) -> None:
    cols = {"group_size": "G", "frac_zero": "zero adv.", "frac_all_correct": "all correct",
            "frac_all_wrong": "all wrong", "frac_informative": "informative", "n_problems": "problems",
            "n_excluded": "excluded (n<G)"}
    console.print(_frame_table("zero-advantage groups (estimated)", report.tables["sizes"], cols))
    console.print(_frame_table("by difficulty (pass rate)", report.tables["buckets"], {"bucket": "bucket", **cols}))
    notes, uniform = report.notes, report.notes["uniform_problems"]
    smallest = notes["smallest_group_size"]
    reached = smallest if smallest else f"not reached up to G = {notes['searched_up_to']}"
    console.print(f"smallest G with >= {notes['target_informative']:.0%} informative groups: {reached}")
    console.print(f"always all-correct: {len(uniform['all_correct'])}, always all-wrong: "
                  f"{len(uniform['all_wrong'])} of {notes['n_problems']} problems (DAPO would filter them)")
    if "train_log" in report.tables:
        log_cols = {"step": "step", "observed_frac_zero": "observed", "predicted_frac_zero": "predicted",
                    "difference": "obs - pred"}
        title = f"training log vs prediction at G={notes['train_log']['group_size']}"
        console.print(_frame_table(title, report.tables["train_log"], log_cols))


# ---------------------------------------------------------------- forgetting


def pct_points(x) -> str:
    return "-" if _missing(x) else f"{100 * x:.1f}"


def print_forgetting(report: dict, out: Path | None) -> None:
    models = report["models"]
    stats = report["statistics"]
    table = Table(title=f"forgetting: {models['base']['name']} (base) -> {models['model']['name']} (model)")
    for col in ("benchmark", "n", "base%", "model%", "diff", f"{int(stats['confidence'] * 100)}% CI",
                "b/c", "p", "p Holm"):
        table.add_column(col, justify="left" if col == "benchmark" else "right", no_wrap=True)
    for r in report["benchmarks"]:
        m = r["mcnemar"]
        table.add_row(r["benchmark"], str(r["n"]), pct_points(r["base_accuracy"]), pct_points(r["model_accuracy"]),
                      f"{100 * r['difference']:+.1f}", f"{100 * r['ci_low']:+.1f}..{100 * r['ci_high']:+.1f}",
                      f"{m['b']}/{m['c']}", pval(m["p_value"]), pval(m.get("p_holm")))
    console.print(table)
    console.print("[dim]accuracy and diff in percentage points; b/c = items only the base / only the model "
                  "got right; p = McNemar (exact below 25 discordant)[/dim]")
    for line in report["skipped"]:
        console.print(f"[yellow]{line}[/yellow]")
    _print_kl(report.get("kl"))
    console.print(f"[bold]{report['verdict']}[/bold]")
    if out is not None:
        console.print(f"wrote {out / 'forgetting.json'} and {out / 'items.jsonl'}")


def _print_kl(kl: dict | None) -> None:
    if not kl:
        return
    if kl["status"] != "computed":
        console.print(f"[yellow]KL on {kl['task']['name']} not computed: {kl['reason']}[/yellow]")
        return
    se = kl["kl_sequence_se"]
    tok_se = kl["kl_per_token_se"]
    console.print(
        f"{kl['direction']} on {kl['task']['name']} ({kl['prompts']} prompts x {kl['samples_per_prompt']}): "
        f"{kl['kl_sequence']:.4f}" + (f" ± {se:.4f} (SE)" if se is not None else "") + " per completion, "
        f"{kl['kl_per_token']:.5f}" + (f" ± {tok_se:.5f}" if tok_se is not None else "") + " per token"
    )
    console.print(f"[dim]estimator: {kl['estimator']}[/dim]")


# ---------------------------------------------------------------- study


def print_study_plan(spec, stages, statuses: list[str], out: Path, seconds: list[float | None] | None = None) -> None:
    """The methods with their steps and budgets, then the stages in order, their folders, what
    they read, estimated tokens, and their status; with `seconds` (each stage's recorded time),
    how far the study is (`plan_progress`)."""
    budget = spec.budget
    console.print(f"[bold]{spec.title}[/bold]: base {spec.base_model}, {len(spec.methods)} methods, budget "
                  f"{budget['per_method']} {budget['unit']} each")
    methods = Table(title="methods")
    for col in ("method", "trainer", "iterations / steps", budget["unit"]):
        methods.add_column(col, justify="left" if col in ("method", "trainer") else "right")
    for name, trainers in spec.methods.items():
        at_most = budget.get("at_most", {}).get(name)
        methods.add_row(name, " then ".join(t.kind for t in trainers),
                        " + ".join(str(t.count) for t in trainers),
                        f"{budget['spent'][name]:,}" + (f" (with hints at most {at_most:,})" if at_most else ""))
    console.print(methods)
    table = Table(title=f"plan ({out})")
    table.add_column("stage", no_wrap=True, min_width=max(len(s.name) for s in stages))  # names stay whole
    for col in ("output", "reads", "est. tokens", "status"):
        table.add_column(col, justify="right" if col == "est. tokens" else "left", overflow="fold")
    for stage, status in zip(stages, statuses, strict=True):
        reads = "every stage above" if len(stage.needs) > 4 else ", ".join(stage.needs) or "-"
        table.add_row(stage.name, stage.out, reads, f"{stage.tokens:,}" if stage.tokens
                      else "-", status)
    console.print(table)
    console.print(f"estimated generated tokens: {sum(s.tokens for s in stages):,}")
    if seconds is not None:
        console.print(plan_progress(stages, statuses, seconds))


def plan_progress(stages, statuses: list[str], seconds: list[float | None]) -> str:
    """How far a study is: stages done, estimated tokens left, and the stage time left: each stage
    to run at the rate its kind's done stages generated their estimated tokens (a kind is the name's
    first word: `passk-nucleus-es-s1` as `passk-base` and `passk-es-s0` did; a kind with none done
    at all done stages' rate), from the
    fastest of them to their pooled rate. An estimate of an estimate: the tokens are maxima, the
    times this machine's as it was shared (a paused or crowded stage is slow)."""
    def kind(name: str) -> str:  # passk-nucleus-es-s1 -> passk, train-es-grpo-s2 -> train
        return name.split("-")[0]

    done = [i for i, status in enumerate(statuses) if status == "done"]
    todo = [i for i, status in enumerate(statuses) if status != "done"]
    left = sum(stages[i].tokens for i in todo)
    line = f"done: {len(done)} of {len(stages)} stages; estimated tokens left: {left:,}"
    measured = [(kind(stages[i].name), stages[i].tokens, seconds[i]) for i in done
                if stages[i].tokens and seconds[i]]
    if not measured or not left:
        return line
    pooled, fastest = {}, {}
    for k in {m[0] for m in measured}:
        rows = [m for m in measured if m[0] == k]
        pooled[k] = sum(r[1] for r in rows) / sum(r[2] for r in rows)
        fastest[k] = max(r[1] / r[2] for r in rows)
    overall = sum(m[1] for m in measured) / sum(m[2] for m in measured)

    def hours(rates: dict) -> float:
        return sum(stages[i].tokens / rates.get(kind(stages[i].name), overall) for i in todo if stages[i].tokens) / 3600

    low, high = hours(fastest), hours(pooled)
    span = f"about {high:.1f} h" if high - low < 0.05 else f"{low:.1f} to {high:.1f} h"
    return line + (f"; {span} of stage time left (at the fastest done stage of each kind, and at their "
                   "pooled rate)")


# ---------------------------------------------------------------- traces, tokens


def print_traces(report: dict, out: Path | None) -> None:
    prob = report["probability"]
    console.print(f"[bold]traces under {report['policy']['name']}[/bold]: {report['traces_scored']} traces, "
                  f"{report['tokens']} tokens, NLL/token {num(report['nll_per_token'])}, "
                  f"entropy {num(report['mean_entropy'])} nats")
    if prob.get("n"):
        console.print(f"token probability: median {num(prob['q50'])}, q05 {num(prob['q05'])}; "
                      f"below 0.01: {pct(prob['share_below_0.01'])}, below 0.1: {pct(prob['share_below_0.1'])}")
    gap = report.get("idiolect_gap")
    if gap:
        console.print(f"idiolect gap (traces NLL - own NLL, per token): {gap['gap']:+.3f} "
                      f"[{gap['ci_low']:+.3f}, {gap['ci_high']:+.3f}] over {gap['prompts']} prompts "
                      f"(traces {num(gap['traces_nll'])}, own {num(gap['own_nll'])})")
    clip = report.get("clip")
    if clip:
        table = Table(title=f"ratio pi_policy / pi_behaviour ({report['behaviour']}) outside "
                            f"[{1 - clip['eps_low']:g}, {1 + clip['eps_high']:g}]")
        for col in ("tokens", "below", "above", "outside", "n"):
            table.add_column(col, justify="right")
        for name in ("all_tokens", "answer_tokens"):
            c = clip[name]
            table.add_row(name.replace("_", " "), pct(c["below"]), pct(c["above"]), pct(c["outside"]), str(c["n"]))
        console.print(table)
    _print_context("least likely tokens", report["least_likely"], "probability")
    if out is not None:
        console.print(f"wrote {out / 'traces.json'} and CSV tables")


def print_tokens(report: dict, out: Path | None) -> None:
    m = report["models"]
    console.print(f"[bold]{m['teacher']['name']} (teacher) vs {m['student']['name']} (student)[/bold] on "
                  f"{report['trajectories']} samples, {report['tokens']} tokens: reverse KL/token "
                  f"{sig(report['reverse_kl_per_token'])}, forward KL/token {sig(report['forward_kl_per_token'])}, "
                  f"argmax agreement {pct(report['argmax_agreement'])}")
    shares = ", ".join(f"{k.replace('_', ' ')}: {pct(v)}" for k, v in report["concentration"].items())
    half = report["tokens_for_half"]
    console.print(f"share of the total reverse KL held by the most divergent tokens: {shares}; tokens per "
                  f"trajectory for half its divergence: median {num(half['median'], 1)}")
    where = report["where"]
    console.print(f"in the final answer: {pct(where['in_final_answer'])} of the divergence; per token by outcome: "
                  + ", ".join(f"{k} {sig(v)}" for k, v in where["per_token_by_outcome"].items()))
    _print_context("most divergent tokens", report["most_divergent"], "reverse_kl")
    if out is not None:
        console.print(f"wrote {out / 'tokens.json'} and {out / 'tokens_most_divergent.csv'}")


def _print_context(title: str, rows: list[dict], value: str) -> None:
    table = Table(title=title)
    for col in (value, "context"):
        table.add_column(col, justify="right" if col == value else "left")
    for r in rows[:10]:
        context = f"{r['before']}[bold red]{r['token']}[/bold red]{r['after']}".replace("\n", "⏎")
        table.add_row(sig(r[value]), context)
    console.print(table)


def print_interpolate(summary: dict, out: Path) -> None:
    """`evalkit interpolate`: one row per point, then the two barriers."""
    table = Table(title=f"{summary['models']['A']['name']} -> {summary['models']['B']['name']} ({summary['path']})")
    plane = summary["path"] == "plane"
    for col in ("a", "b", "t") if plane else ("t",):
        table.add_column(col, justify="right")
    for col in ("accuracy", "loss (nats/token)"):
        table.add_column(col, justify="right")
    for p in summary["points"]:
        where = [num(p["a"], 3), num(p["b"], 3), num(p["t"], 3)] if plane else [num(p["t"], 3)]
        table.add_row(*where, num(p["accuracy"]), num(p["loss"], 4))
    console.print(table)
    for name, label in (("loss", "loss barrier"), ("error", "accuracy barrier (error rate)")):
        b = summary["barrier"].get(name)
        if b:
            console.print(f"{label}: {sig(b['height'])} at t = {num(b['t'], 3)} "
                          f"[{sig(b['ci_low'])}, {sig(b['ci_high'])}] ({b['confidence']:.0%} bootstrap over problems)")
    console.print(f"wrote {out / 'interpolate.json'}, {out / 'points.csv'} and points/")
