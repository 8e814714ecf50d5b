"""`evalkit train es|grpo|es-grpo`: thin typer commands over evalkit.train.

    evalkit train es --out runs/es --iterations 20
    evalkit train grpo --out runs/grpo --steps 20
    evalkit train es-grpo --out runs/es-grpo --iterations 20 --steps 20

`--model`, `--task`, `--max-new-tokens`, `--temperature` and `--seed` mean
what they mean for `evalkit passk`, with its defaults. ES has no
`--temperature`: its fitness is greedy by definition (Qiu et al. 2025).
`--backend vllm` (GPU, the 'vllm' extra) samples GRPO's groups, and scores
ES's members greedily, with a colocated vLLM engine given the HF model's
weights (evalkit.train.vllm); ES perturbs and restores the HF model.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from evalkit.cli_options import TrainOut, build, with_options
from evalkit.errors import handle_errors
from evalkit.train.distill import DistillOptions
from evalkit.train.es import ESOptions
from evalkit.train.grpo import GRPOOptions

__all__ = ["train_app", "es", "grpo", "es_grpo", "distill"]

train_app = typer.Typer(
    help="Train with Evolution Strategies, GRPO, or ES then GRPO; checkpoints every evaluator reads.",
    no_args_is_help=True,
)

ONE_PROCESS = ("ray_workers", "ray_address", "threads")
SEED = {"seed": "Run seed; every step's prompts, noise and samples derive from (seed, step)."}
GRPO = {**SEED, "temperature": "Sampling temperature of GRPO groups (and of its log-probs, as TRL).",
        "top_p": "Nucleus sampling mass; 1.0 = off."}
HELPS = {**SEED,
    "ray_workers": "Ray workers, each holding a model replica, that score population members (0 = no Ray); "
                   "needs the 'ray' extra.",
    "threads": "CPU threads that compute, per Ray worker (0 = cores // workers locally, 1 on a joined cluster).",
}
ES_BACKEND = ("Who scores members: hf (transformers) or vllm (colocated engine on the GPU, given each perturbed "
              "member's weights: a second weight copy and one push per member; entropy is a top-k lower bound); "
              "vllm needs the 'vllm' extra, not with --ray-workers.")
GRPO_BACKEND = ("Who samples GRPO groups: hf (transformers) or vllm (colocated engine on the GPU, given the "
                "policy's weights after every update; entropy is a top-k lower bound); vllm needs the 'vllm' extra.")
BOTH_BACKEND = ("hf or vllm for both stages: vllm scores ES members (a push of the perturbed weights per member) "
                "and samples GRPO groups on a colocated engine; needs the 'vllm' extra and a GPU.")


@with_options(ESOptions, helps=HELPS | {"backend": ES_BACKEND})
def es(out: TrainOut, **given) -> None:
    """Evolution Strategies: perturb in place, score greedily, z-score, update; exact restore.

    Example: evalkit train es --out runs/es --population 30 --iterations 20
    GPU, vLLM scoring: evalkit train es --out runs/es --backend vllm --device cuda
    Ray: evalkit train es --out runs/es --ray-workers 2
    """
    from evalkit.console import train_progress
    from evalkit.train import run_es

    with train_progress("es") as progress:
        _done(out, run_es(build(ESOptions, given), out, progress=progress))


@with_options(GRPOOptions, skip=ONE_PROCESS, helps=GRPO | {"backend": GRPO_BACKEND})
def grpo(out: TrainOut, **given) -> None:
    """GRPO (TRL's loss, DAPO/Dr. GRPO options): sample groups, grade, clipped update.

    Example: evalkit train grpo --out runs/grpo --group-size 8 --steps 20 --loss dapo --epsilon-high 0.28
    GPU, vLLM sampling: evalkit train grpo --out runs/grpo --backend vllm --device cuda
    """
    from evalkit.console import train_progress
    from evalkit.train import run_grpo

    with train_progress("grpo") as progress:
        _done(out, run_grpo(build(GRPOOptions, given), out, progress=progress))


@with_options(DistillOptions, skip=(*ONE_PROCESS, "backend"),
              helps=SEED | {"model": "The student: checkpoint folder, hub name, or built-in 'smollm2-135m'.",
                            "temperature": "Sampling temperature of the student's samples."})
def distill(out: TrainOut, **given) -> None:
    """On-policy distillation: the student samples, the teacher scores; reverse KL on all or selected tokens.

    Example: evalkit train distill --teacher runs/grpo/step-000096 --out runs/distill --steps 20
    Sparse: evalkit train distill --teacher T --out runs/sparse --token-fraction 0.005 --select divergence
    """
    from evalkit.console import train_progress
    from evalkit.train.distill import run_distill

    with train_progress("distill") as progress:
        _done(out, run_distill(build(DistillOptions, given), out, progress=progress))


@with_options(ESOptions, GRPOOptions, skip=ONE_PROCESS, helps=GRPO | {"backend": BOTH_BACKEND})
def es_grpo(out: TrainOut, **given) -> None:
    """ES, then GRPO from ES's final checkpoint: OUT/es/ and OUT/grpo/ in one folder.

    Example: evalkit train es-grpo --out runs/es-grpo --iterations 20 --steps 20
    --backend vllm scores ES members and samples GRPO groups with vLLM (checked before ES starts).
    """
    from evalkit.console import train_progress
    from evalkit.train import run_es_grpo

    with contextlib.ExitStack() as stack:
        summary = run_es_grpo(build(ESOptions, given), build(GRPOOptions, given), out,
                              progress_for=lambda label: stack.enter_context(train_progress(label)))
    _done(out, summary)


def _done(out: Path, summary: dict) -> None:
    state = "done" if summary["complete"] else "incomplete: rerun the same command to resume"
    typer.echo(f"{state}; final checkpoint {summary['final_checkpoint']}; metrics in {out}/**/metrics.jsonl")


train_app.command("es")(handle_errors(es))
train_app.command("grpo")(handle_errors(grpo))
train_app.command("es-grpo")(handle_errors(es_grpo))
train_app.command("distill")(handle_errors(distill))
