"""`evalkit entropy`, `evalkit length`, `evalkit groups`: findings from passk run folders.

    evalkit entropy runs/step100 runs/step200 runs/step300 --fit --out reports/ent
    evalkit entropy --model smollm2-135m --samples vllm_out.jsonl --out reports/ent_vllm
    evalkit length runs/grpo --base runs/base --model smollm2-135m --out reports/len
    evalkit groups runs/base --group-sizes 2,4,8,16 --train-log out/grpo/metrics.jsonl

Each prints rich tables and, with --out DIR, writes DIR/<command>.json (the
numbers, the runs' identities from summary.json, the definitions used) and
DIR/<command>_<table>.csv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit import console as console_out
from evalkit.cli_options import build, int_list, with_options
from evalkit.errors import UsageError
from evalkit.options import EntropyOptions, GroupsOptions, LengthOptions, ModelOptions

__all__ = ["entropy", "length", "groups"]

Out = Annotated[Path | None, typer.Option(help="Folder for <command>.json and CSV tables.")]
Mixed = Annotated[bool, typer.Option(help="Allow runs of different tasks in one table (labelled by task).")]


def _finish(report, folder, show) -> None:
    """Write the files first (a broken pipe or Ctrl-C while printing loses nothing), then print."""
    from analyses.sample_stats import report_files
    from evalkit.console import console

    paths = folder.publish(report_files(report)) if folder is not None else []
    show(report)
    if paths:
        console.print(f"wrote {', '.join(str(p) for p in paths)}")


def _inputs(*paths) -> dict:
    return {"inputs": [str(p) for p in paths if p is not None]}


@with_options(EntropyOptions, ModelOptions, skip=("model",), helps={
    "temperature": "With --samples: temperature of records without one (0 = greedy, entropy at 1).",
    "dtype": "With --model: float32, bfloat16 or float16.", "device": "With --model: auto, cpu, cuda ..."})
def entropy(
    runs: Annotated[list[Path] | None, typer.Argument(help="passk run folders, in trajectory order.")] = None,
    steps: Annotated[str | None, typer.Option(help="Training step of each run, comma-separated, in argument order; orders the table.")] = None,
    model: Annotated[str | None, typer.Option(help="With --samples: model whose exact entropy to compute.")] = None,
    samples: Annotated[Path | None, typer.Option(help="JSONL of prompt/completion (optional temperature, finish_reason), or a passk run folder, to teacher-force.")] = None,
    raw_prompt: Annotated[bool, typer.Option(help="With --samples: prompts are already rendered; skip the chat template.")] = False,
    allow_mixed_tasks: Mixed = False,
    out: Out = None,
    **given,
) -> None:
    """Mean token entropy per run (all, correct, incorrect, quantiles); --fit for the entropy law.

    Example: evalkit entropy runs/step100 runs/step200 runs/step300 --fit --steps 100,200,300
    """
    from analyses.runs import load_runs, need_token_counts
    from analyses.sample_stats import entropy_report
    from evalkit.outdir import claimed

    opts = build(EntropyOptions, given).validate()
    teacher = samples is not None or model is not None
    if teacher:
        if runs:
            raise UsageError("give either run folders or --model with --samples, not both")
        if samples is None or model is None:
            raise UsageError("teacher-forced entropy needs both --model and --samples FILE")
        model_opts = build(ModelOptions, given, model=model).validate()
    elif not runs:
        raise UsageError("give one or more passk run folders, or --model M --samples FILE")
    step_list = int_list(steps, "--steps") if steps else None
    with claimed(out, "entropy", _inputs(*(runs or []), samples, model)) as folder:
        if teacher:
            report = _teacher_report(model_opts, samples, raw_prompt, opts)
            return _finish(report, folder, console_out.print_teacher)
        need_token_counts(runs, "entropy")
        report = entropy_report(load_runs(runs, allow_mixed_tasks=allow_mixed_tasks), steps=step_list, fit=opts.fit)
        _finish(report, folder, console_out.print_entropy)


@with_options(LengthOptions)
def length(
    runs: Annotated[list[Path], typer.Argument(help="passk run folders.")],
    base: Annotated[Path | None, typer.Option(help="Base run folder for AES (O1-Pruner, a=1 b=3 g=5).")] = None,
    model: Annotated[str | None, typer.Option(help="Tokenizer for outcome efficiency (else characters are counted).")] = None,
    allow_mixed_tasks: Mixed = False,
    out: Out = None,
    **given,
) -> None:
    """Response length, truncation, tokens per correct answer, outcome efficiency, AES.

    Example: evalkit length runs/grpo --base runs/base --model smollm2-135m --out reports/len
    """
    from analyses.runs import load_runs, need_token_counts
    from analyses.sample_stats import length_report
    from evalkit.models import token_counter
    from evalkit.outdir import claimed

    opts = build(LengthOptions, given).validate()
    paths = [*runs, *([base] if base else [])]
    with claimed(out, "length", _inputs(*paths)) as folder:
        need_token_counts(paths, "length")
        loaded = load_runs(paths, allow_mixed_tasks=allow_mixed_tasks)
        base_run = loaded.pop() if base else None
        report = length_report(loaded, base=base_run, count=token_counter(model) if model else None,
                               quantiles=opts.quantiles)
        _finish(report, folder, console_out.print_length)


@with_options(GroupsOptions)
def groups(
    run: Annotated[Path, typer.Argument(help="passk run folder (n samples per problem).")],
    train_log: Annotated[Path | None, typer.Option(help="A training log with frac_reward_zero_std: evalkit's metrics.jsonl, TRL's "
                                                 "trainer_state.json, verl's file-logger JSONL, or a TensorBoard event "
                                                 "file or folder (--report-to tensorboard).")] = None,
    salvage: Annotated[bool, typer.Option(help="Read a TensorBoard --train-log whose records are torn or fail their CRC: "
                                               "the intact ones are used and the skipped bytes named (without it, one "
                                               "line naming the last good step).")] = False,
    out: Out = None,
    **given,
) -> None:
    """Estimated fraction of zero-advantage GRPO groups (all correct / all wrong) per G.

    Example: evalkit groups runs/base --group-sizes 2,4,8,16 --target 0.5 --train-log out/grpo/metrics.jsonl
    """
    from analyses.group_stats import groups_report
    from analyses.runs import load_run
    from evalkit.outdir import claimed

    opts = build(GroupsOptions, given).validate()
    with claimed(out, "groups", _inputs(run, train_log)) as folder:
        report = groups_report(load_run(run), group_sizes=list(opts.group_sizes), target=opts.target,
                               train_log=train_log, train_group_size=opts.train_group_size, salvage=salvage)
        _finish(report, folder, console_out.print_groups)


def _teacher_report(model_opts, samples, raw_prompt, opts):
    """Read the samples (a run folder or a JSONL), teacher-force them, tabulate."""
    from analyses.runs import load_run
    from analyses.teacher_report import run_records, teacher_report
    from evalkit.console import counted_progress
    from evalkit.forced import entropies_of_records, read_samples_file

    run = load_run(samples) if Path(samples).is_dir() else None
    records = run_records(run) if run is not None else read_samples_file(samples)
    raw = raw_prompt and run is None
    with counted_progress() as progress:
        tick = progress("teacher forcing", len(records))
        values, tokens, identity = entropies_of_records(model_opts, records, raw_prompt=raw,
                                                        temperature=opts.temperature,
                                                        batch_tokens=opts.batch_tokens, on_batch=tick)
    return teacher_report(samples, run, records, values, tokens, identity, raw_prompt=raw_prompt)
