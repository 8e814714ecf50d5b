"""Small, faithful trainers whose checkpoints every evalkit evaluator reads.

    evalkit train es --out runs/es
    evalkit train grpo --out runs/grpo
    evalkit train es-grpo --out runs/es-grpo

`evalkit.train.es` (Evolution Strategies, Qiu et al. 2025), `evalkit.train.grpo`
(GRPO as in TRL, with DAPO and Dr. GRPO options), `evalkit.train.common`
(checkpoints, metrics log, resume). Heavy libraries are imported inside functions. Importing
this package registers every trainer's options with evalkit.records (which upgrades their records).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from evalkit.train import distill, es, grpo  # noqa: F401 (each registers its options in evalkit.records.TRAINERS)

__all__ = ["run_es", "run_grpo", "run_es_grpo", "RUNNERS"]


def run_es(es_opts, out: Path, *, progress=None) -> dict:
    """ES in this process, or on Ray actors when the options ask for Ray workers
    (evalkit.train.es_ray): the same run folder and the same weights either way."""
    if es_opts.uses_ray:
        from evalkit.train.es_ray import run_es_ray

        return run_es_ray(es_opts, out, progress=progress)
    return es.run_es(es_opts, out, progress=progress)


def run_grpo(grpo_opts, out: Path, *, progress=None) -> dict:
    """GRPO (one process; its backend, hf or vllm, is in the options)."""
    return grpo.run_grpo(grpo_opts, out, progress=progress)


# the trainer that runs each options class's kind (ES-then-GRPO is two of them: run_es_grpo)
RUNNERS = {"es": run_es, "grpo": run_grpo, "distill": distill.run_distill}


def run_es_grpo(es_opts, grpo_opts, out: Path, *, progress_for=None) -> dict:
    """ES into `out/es`, then GRPO from ES's final checkpoint into `out/grpo`.

    `out/run.json` holds both stages' settings; rerunning resumes whichever
    stage was interrupted. `progress_for(label)` may return a progress callback.
    """
    from evalkit.errors import UsageError
    from evalkit.rundir import RunDir, check_writable

    if es_opts.model != grpo_opts.model:
        raise UsageError("es-grpo: the GRPO stage starts from ES's checkpoint; give --model once")
    es_opts.validate()  # both stages' settings and backends, before any folder is made
    grpo_opts.validate()
    check_writable(out)
    run = RunDir.open(out, {"kind": "train-es-grpo", "es": es_opts.record(), "grpo": grpo_opts.record()})
    es = run_es(es_opts, Path(out) / "es", progress=progress_for and progress_for("es"))
    if not es["complete"]:
        raise UsageError(f"{out}/es did not finish; rerun the same command to resume")
    stage2 = replace(grpo_opts, model=es["final_checkpoint"])
    grpo = run_grpo(stage2, Path(out) / "grpo", progress=progress_for and progress_for("grpo"))
    summary = {**run.settings, "complete": grpo["complete"], "es": es, "grpo": grpo,
               "final_checkpoint": grpo["final_checkpoint"]}
    run.write_summary(summary)
    return summary
