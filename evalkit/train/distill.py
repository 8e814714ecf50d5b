"""On-policy distillation, with sparse-token supervision (Liu et al.).

    evalkit train distill --teacher runs/grpo/step-000096 --out runs/distill --steps 20
    evalkit train distill --teacher T --out runs/sparse --token-fraction 0.005 --select divergence

One step t:
1. draw `prompts_per_step` problems (seeded by (seed, t)) and sample `samples_per_prompt`
   completions each from the student with evalkit's sampler (as GRPO samples its groups);
   grade them (the reward is a metric, not the objective);
2. teacher-force each completion through student and teacher (full vocabulary, temperature 1):
   per generated token the reverse KL `KL(student || teacher) = sum_v p_s (log p_s - log p_t)`;
3. select the supervised tokens of each sample: all of them (`--token-fraction 1`, the default),
   `ceil(f * length)` of them, or `--tokens-per-sample m`, chosen by `--select`: `divergence`
   (the largest KL, measured in the same pass, detached), `entropy` (the student's most uncertain
   positions) or `random` (seeded by (seed, t, sample): the control the sparse-token claim needs);
4. loss = the selected tokens' KL summed over the batch / the number of selected tokens; AdamW,
   gradients clipped to `max_grad_norm` (the GRPO trainer's optimizer and checkpoints).

Metrics: `kl` (mean over all generated tokens), `kl_selected`, `tokens_selected`, `reward`,
`completions/*`. The tokenizers of teacher and student must match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from evalkit.errors import UsageError
from evalkit.options import TemperatureOptions, option
from evalkit.records import TRAINERS
from evalkit.train.common import GradientOptions

__all__ = ["DistillOptions", "run_distill", "select_tokens", "distill_loss", "SELECT"]

SELECT = ("divergence", "entropy", "random")


@dataclass(frozen=True)
class DistillOptions(TemperatureOptions, GradientOptions):
    kind: ClassVar[str] = "distill"
    greedy = False
    own_defaults = {"lr": 1e-5, "micro_batch": 4}

    teacher: str = option("", "Teacher checkpoint (its tokenizer must be the student's).")
    samples_per_prompt: int = option(4, "Student samples per prompt and step.", min=1)
    token_fraction: float = option(1.0, "Share of each sample's tokens supervised, in (0, 1]; 1 = every token.",
                                   above=0, max=1)
    tokens_per_sample: int = option(0, "Supervise this many tokens per sample instead of a fraction (0 = use "
                                    "--token-fraction).", min=0)
    select: str = option("divergence", "Which tokens: divergence (largest KL, same pass), entropy (student's most "
                         "uncertain) or random (the control).", choices=SELECT)

    def completions_per_unit(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt  # the student's; teacher-forcing generates none

    def _checks(self) -> None:
        from evalkit.models import tokenizer_difference

        if not self.teacher:
            raise UsageError("--teacher: give the teacher checkpoint (same tokenizer as the student)")
        if why := tokenizer_difference(self.model, self.teacher):
            raise UsageError(f"--teacher {self.teacher}: {why}; distillation needs one tokenization")


TRAINERS["train-distill"] = DistillOptions  # its records are upgraded with it (evalkit.records)


def run_distill(opts: DistillOptions, out: Path, *, progress: Callable | None = None) -> dict:
    """Run (or resume) distillation into `out`; returns the summary written to summary.json."""
    from evalkit.train.common import gradient_run
    from evalkit.train.grpo import _summary

    opts.validate()
    at = gradient_run(opts, out, "train-distill", opts.steps, _distill_steps, progress=progress)
    return _summary(at.run, at.log, out, opts.steps)


def _distill_steps(model, tokenizer, stop, at, opts: DistillOptions, cleanup):
    from evalkit.models import load_model, resolve_model, tokenizer_mismatch
    from evalkit.train.common import Policy

    teacher, teacher_tok = load_model(resolve_model(opts.teacher), dtype=opts.dtype, device=at.device)
    teacher.requires_grad_(False)
    why = tokenizer_mismatch(tokenizer, teacher_tok, model, teacher)
    if why:
        raise UsageError(f"--teacher {opts.teacher}: {why}; distillation needs one tokenization")

    def step_fn(step: int, grader, optimizer) -> dict:
        return distill_step(Policy(model, tokenizer, grader, tuple(stop), opts), teacher, at.task, step, optimizer)

    return step_fn


def select_tokens(kl, entropy, k: int, how: str, seed: int):
    """Indices of the `k` supervised positions of one sample (all when k >= length)."""
    import torch

    n = kl.shape[0]
    if k >= n:
        return torch.arange(n, device=kl.device)
    if how == "random":
        gen = torch.Generator().manual_seed(seed)
        return torch.randperm(n, generator=gen)[:k].to(kl.device).sort().values
    score = kl if how == "divergence" else entropy
    return torch.topk(score, k).indices.sort().values


def distill_loss(student_logits, teacher_logits, selected):
    """Summed reverse KL(student || teacher) over the selected positions of one sample, and the
    per-position KL (detached) of all positions; logits [T, V] at temperature 1."""
    import torch

    ls = torch.log_softmax(student_logits.float(), dim=-1)
    lt = torch.log_softmax(teacher_logits.float(), dim=-1)
    kl = (ls.exp() * (ls - lt)).sum(-1)
    return kl[selected].sum(), kl.detach()


def _k(opts: DistillOptions, length: int) -> int:
    import math

    if opts.tokens_per_sample:
        return min(length, opts.tokens_per_sample)
    return max(1, math.ceil(opts.token_fraction * length))


def _sample(policy, task, step: int):
    from evalkit.sampling import SamplingConfig, render_prompt, sample_problems
    from evalkit.train.common import decode_and_grade, derive_seed, pick_problems

    model, tokenizer, grader, opts, stop = policy.model, policy.tokenizer, policy.grader, policy.opts, policy.stop

    problems = pick_problems(task.problems, opts.prompts_per_step, derive_seed(opts.seed, "distill-prompts", step))
    cfg = SamplingConfig(opts.samples_per_prompt, opts.temperature, 1.0, opts.max_new_tokens,
                         derive_seed(opts.seed, "distill-sample", step))
    prompts = [render_prompt(tokenizer, p.prompt) for p in problems]
    model.eval()
    samples = sample_problems(model, tokenizer, problems, cfg, stop_ids=stop)
    _, rewards = decode_and_grade(tokenizer, grader, samples, problems)
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id in stop else stop[0]
    ids = [tuple(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    seqs = [(ids[s.problem_index], s.token_ids + ((eos,) if s.finish_reason == "stop" else ())) for s in samples]
    return seqs, rewards, samples


def _logits(model, batch, pad_id: int):
    """Completion-position logits [len(completion), V] of each (prompt, completion) row."""
    from evalkit.forced import forced_forward

    logits, _ = forced_forward(model, [list(p) + list(c) for p, c in batch], pad_id=pad_id, left=False)
    return [logits[r, len(p) - 1 : len(p) + len(c) - 1] for r, (p, c) in enumerate(batch)]


def distill_step(policy, teacher, task, step: int, optimizer) -> dict:
    """One step (module docstring; `policy`: evalkit.train.common.Policy, the student); returns
    its metrics record."""
    import torch

    from evalkit.train.common import completion_metrics, derive_seed

    model, tokenizer, opts, stop = policy.model, policy.tokenizer, policy.opts, policy.stop
    seqs, rewards, samples = _sample(policy, task, step)
    seqs_idx = [i for i, (_, c) in enumerate(seqs) if c]
    total_selected = sum(_k(opts, len(seqs[i][1])) for i in seqs_idx)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop[0]
    model.train()
    optimizer.zero_grad(set_to_none=True)
    kl_all, kl_sel, n_all = 0.0, 0.0, 0
    for start in range(0, len(seqs_idx), opts.micro_batch):
        batch_idx = seqs_idx[start : start + opts.micro_batch]
        batch = [seqs[i] for i in batch_idx]
        with torch.no_grad():
            t_rows = _logits(teacher, batch, pad)
        loss = 0.0
        for i, s_row, t_row in zip(batch_idx, _logits(model, batch, pad), t_rows, strict=True):
            with torch.no_grad():
                ls = torch.log_softmax(s_row.float(), -1)
                entropy = -(ls.exp() * ls).sum(-1)
                kl_detached = (ls.exp() * (ls - torch.log_softmax(t_row.float(), -1))).sum(-1)
            chosen = select_tokens(kl_detached, entropy, _k(opts, len(seqs[i][1])), opts.select,
                                   derive_seed(opts.seed, "distill-select", step, i))
            summed, kl = distill_loss(s_row, t_row, chosen)
            loss = loss + summed / total_selected
            kl_all, n_all = kl_all + float(kl.sum()), n_all + kl.numel()
            kl_sel += float(kl[chosen].sum())
        loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), opts.max_grad_norm)
    optimizer.step()
    model.eval()
    return {"reward": sum(rewards) / len(rewards), "kl": kl_all / max(n_all, 1),
            "kl_selected": kl_sel / max(total_selected, 1), "tokens_selected": total_selected,
            "tokens_total": n_all, "loss": kl_sel / max(total_selected, 1), "grad_norm": float(grad_norm),
            **completion_metrics(samples)}
