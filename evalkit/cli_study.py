"""`evalkit study`: train ES, GRPO, ES-then-GRPO (and distillation, guided and hinted GRPO) on one
budget, evaluate everything, one report.

    evalkit study studies/smoke.toml --out runs/smoke
    evalkit study studies/seed-cpu.toml --out results/study --dry-run
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["study"]


def study(
    spec: Annotated[Path, typer.Argument(help="Study file (TOML): base model, training task and held-out split, methods, budget, evaluations. See studies/.")],
    out: Annotated[Path, typer.Option(help="Study folder: study.json and one subfolder per stage. Rerun the same command to resume.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (stages, outputs, estimated generated tokens, what is done) and stop.")] = False,
    only: Annotated[str | None, typer.Option(help="Run this stage alone (e.g. report); the stages it reads must be done.")] = None,
    until: Annotated[str | None, typer.Option(help="Stop after this stage (e.g. before a long training stage, to end a working session cleanly); rerun without it to go on.")] = None,
) -> None:
    """Run a study: every stage one evalkit function into its own folder; resumable, stage by stage.

    Example: evalkit study studies/smoke.toml --out runs/smoke   (then: evalkit study ... --dry-run)
    """
    from evalkit.console import console, print_study_plan
    from evalkit.sampling import SAMPLER_VERSION
    from evalkit.study import pending_remakes, recorded_sampler, run_study, stage_status, study_plan

    if dry_run:
        plan_spec, stages, state = study_plan(spec, out)
        recorded = state.get("stages", {})
        print_study_plan(plan_spec, stages, [stage_status(out, s, state) for s in stages], out,
                         [(recorded.get(s.name) or {}).get("seconds") for s in stages])
        then = recorded_sampler(state)
        if then is not None and then != SAMPLER_VERSION:
            console.print(f"drawn by sampler {then}; this evalkit draws with {SAMPLER_VERSION}: done stages stay done, "
                          "a stage still to draw is refused (it would mix the two)")
        again = pending_remakes(out, stages, state)
        if again:
            console.print(f"checkpoints not in {out}, trained again (and checked against weights.sha256) before "
                          f"the stages that load them: {', '.join(again)}; about "
                          f"{sum(recorded[n].get('seconds') or 0 for n in again) / 3600:.1f} h at their first runs' times")
        return
    state = run_study(spec, out, only=only, until=until,
                      on_stage=lambda name, status: console.print(f"[bold]{name}[/bold]: {status}"))
    report = state["stages"].get("report", {})
    if report.get("status") == "done":
        console.print(f"report: {out / report['result']['file']}; findings: {out / 'findings' / 'findings.md'}")
