"""Small, faithful trainers whose checkpoints every evalkit evaluator reads.

    evalkit train es --out runs/es
    evalkit train grpo --out runs/grpo
    evalkit train es-grpo --out runs/es-grpo

`evalkit.train.es` (Evolution Strategies, Qiu et al. 2025), `evalkit.train.grpo`
(GRPO as in TRL, with DAPO and Dr. GRPO options), `evalkit.train.common`
(checkpoints, metrics log, resume). Heavy libraries are imported inside functions.
"""

from __future__ import annotations

from dataclasses import replace
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
    from evalkit.train.es import validate as es_validate
    from evalkit.train.grpo import run_grpo
    from evalkit.train.grpo import validate as grpo_validate

    if es_opts.model != grpo_opts.model:
        raise UsageError("es-grpo: the GRPO stage starts from ES's checkpoint; give --model once")
    es_validate(es_opts)
    grpo_validate(grpo_opts)  # bad GRPO settings are refused now, not after the ES stage
    if "vllm" in (es_opts.backend, grpo_opts.backend):  # before any folder is made
        from evalkit.passk import resolve_device
        from evalkit.scale.vllm_train import check_vllm_backend

        check_vllm_backend(resolve_device(grpo_opts.device))
    from evalkit.train.common import identity_options

    run = RunDir.open(out, {"kind": "train-es-grpo", "es": identity_options(es_opts),
                            "grpo": identity_options(grpo_opts)})
    es = run_es(es_opts, Path(out) / "es", progress=progress_for and progress_for("es"))
    if not es["complete"]:
        raise UsageError(f"{out}/es did not finish; rerun the same command to resume")
    stage2 = replace(grpo_opts, model=es["final_checkpoint"])
    grpo = run_grpo(stage2, Path(out) / "grpo", progress=progress_for and progress_for("grpo"))
    summary = {**run.settings, "complete": grpo["complete"], "es": es, "grpo": grpo,
               "final_checkpoint": grpo["final_checkpoint"]}
    run.write_summary(summary)
    return summary
