"""`evalkit traces` and `evalkit tokens`: teacher-forced token diagnostics.

    evalkit traces smollm2-135m --traces runs/grpo-eval --out reports/traces
    evalkit tokens runs/grpo/step-000096 smollm2-135m --samples runs/base --out reports/tokens
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.tokens import TokensOptions
from evalkit.traces import TracesOptions

__all__ = ["traces", "tokens"]

Out = Annotated[Path | None, typer.Option(help="Folder for the JSON report and its CSV tables.")]
HELPS = {
    "traces": "JSONL of prompt/completion (optional per-token `logprobs` of the model that wrote them), "
              "or a passk run folder (e.g. another model's samples).",
    "behaviour": "Score the traces under the model that wrote them (when they carry no logprobs): the ratio "
                 "r = pi_policy / pi_behaviour.",
    "raw_prompt": "JSONL prompts are already rendered: skip the chat template.",
    "eps_low": "Lower clip epsilon of the GRPO ratio (TRL: 0.2).",
    "eps_high": "Upper clip epsilon (TRL: = eps_low; DAPO: 0.28).",
    "own_samples": "Policy samples per trace prompt for the idiolect gap (0 = skip).",
    "least": "Least likely tokens listed with their context.",
    "batch_size": "Sequences per forward pass, teacher-forced (bounds memory: batch x tokens x vocabulary).",
    "seed": "Seed of the policy's own samples and of the bootstrap.",
    "n_boot": "Bootstrap resamples for the idiolect gap's interval.",
    "top": "Most divergent tokens listed with their context.",
}


@with_options(TracesOptions, skip=("model",), helps=HELPS)
def traces(
    policy: Annotated[str, typer.Argument(help="The policy: checkpoint folder, hub name, or smollm2-135m.")],
    out: Out = None,
    **given,
) -> None:
    """How likely foreign traces are under POLICY, and how much of them a GRPO ratio clip would cut.

    Example: evalkit traces smollm2-135m --traces runs/grpo-eval --out reports/traces
    """
    from evalkit.console import counted_progress, print_traces
    from evalkit.traces import run_traces

    with counted_progress() as progress:
        report = run_traces(build(TracesOptions, given, model=policy), out, progress=progress)
    print_traces(report, out)


@with_options(TokensOptions, skip=("model", "student"), helps=HELPS)
def tokens(
    teacher: Annotated[str, typer.Argument(help="The teacher: checkpoint folder, hub name, or smollm2-135m.")],
    student: Annotated[str, typer.Argument(help="The student whose samples are scored.")],
    out: Out = None,
    **given,
) -> None:
    """Per-token KL between TEACHER and STUDENT on the student's samples: how concentrated, where.

    Example: evalkit tokens runs/grpo/step-000096 smollm2-135m --samples runs/base --out reports/tokens
    """
    from evalkit.console import counted_progress, print_tokens
    from evalkit.tokens import run_tokens

    with counted_progress() as progress:
        report = run_tokens(build(TokensOptions, given, model=teacher, student=student), out, progress=progress)
    print_tokens(report, out)
