"""Small, faithful trainers whose checkpoints every evalkit evaluator reads.

    evalkit train es --out runs/es
    evalkit train grpo --out runs/grpo
    evalkit train es-grpo --out runs/es-grpo

`evalkit.train.es` (Evolution Strategies, Qiu et al. 2025), `evalkit.train.grpo`
(GRPO as in TRL, with DAPO and Dr. GRPO options), `evalkit.train.common`
(checkpoints, metrics log, resume). Heavy libraries are imported inside functions.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

__all__ = ["run_es_grpo"]


def run_es_grpo(es_opts, grpo_opts, out: Path, *, progress_for=None) -> dict:
    """ES into `out/es`, then GRPO from ES's final checkpoint into `out/grpo`.

    `out/run.json` holds both stages' settings; rerunning resumes whichever
    stage was interrupted. `progress_for(label)` may return a progress callback.
    """
    from evalkit.errors import UsageError
    from evalkit.runstore import RunDir
    from evalkit.train.es import run_es
    from evalkit.train.grpo import run_grpo

    if es_opts.model != grpo_opts.model:
        raise UsageError("es-grpo: the GRPO stage starts from ES's checkpoint; give --model once")
    from evalkit.train.common import IDENTITY_OMITTED_DEFAULTS

    def identity(opts) -> dict:  # options added later stay out at their default (old runs resume)
        return {k: v for k, v in asdict(opts).items() if IDENTITY_OMITTED_DEFAULTS.get(k, v) != v}

    run = RunDir.open(out, {"kind": "train-es-grpo", "es": identity(es_opts), "grpo": identity(grpo_opts)})
    es = run_es(es_opts, Path(out) / "es", progress=progress_for and progress_for("es"))
    if not es["complete"]:
        raise UsageError(f"{out}/es did not finish; rerun the same command to resume")
    stage2 = replace(grpo_opts, model=es["final_checkpoint"])
    grpo = run_grpo(stage2, Path(out) / "grpo", progress=progress_for and progress_for("grpo"))
    summary = {**run.settings, "complete": grpo["complete"], "es": es, "grpo": grpo,
               "final_checkpoint": grpo["final_checkpoint"]}
    run.write_summary(summary)
    return summary
