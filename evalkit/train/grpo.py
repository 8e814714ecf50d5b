"""GRPO as TRL's GRPOTrainer computes it, with the DAPO and Dr. GRPO options.

    evalkit train grpo --out runs/grpo --group-size 8 --prompts-per-step 4 --lr 1e-6 --steps 50

One step t:
1. draw `prompts_per_step` problems (seeded by (seed, t)) and sample G
   completions each with evalkit's sampler (`sample_chunk`, n = G);
2. reward 1.0 when the evaluation scorer (through `Grader`) says correct;
3. group advantages (`metrics.grpo.group_advantages`: TRL's eps 1e-4 and
   Bessel std; `--scale-rewards none` is Dr. GRPO); with
   `--dynamic-sampling` (DAPO) only groups with 0 < #correct < G are kept and
   fresh prompts are sampled until the batch is full or
   `--max-sampling-rounds` is reached (then it trains on what it has);
4. per token `-min(ratio*A, clip(ratio, 1-eps_low, 1+eps_high)*A) + beta*KL`,
   `ratio = exp(logp - logp_old)`, KL the k3 estimator
   `exp(ref - logp) - (ref - logp) - 1` to the base model; log-probs of the
   tempered distribution (logits / temperature, as TRL); aggregated as
   `grpo` (mean per sequence, then over sequences), `dapo` (sum / active
   tokens), `dr_grpo` (sum / (B * max_new_tokens));
5. `--updates-per-batch` AdamW steps (TRL's num_iterations; with 1 the
   ratio is exactly 1 and nothing is clipped), gradients clipped to
   `--max-grad-norm`.

Memory: the loss is computed in micro-batches of sequences sorted by
length, with normalisers taken from the whole batch so the summed gradient
equals the full-batch one; the vocabulary projection runs only on
completion positions. Limits: constant learning rate (TRL decays linearly);
the stop token is trained as the tokenizer's eos token (`sample_chunk`
drops which stop id ended a row); one process.

`--backend vllm` (GPU): step 1's sampling runs on a colocated vLLM engine
that is given the policy's weights after every update
(`evalkit.train.vllm`); everything else is the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from evalkit.options import TemperatureOptions, TopPOptions, option
from evalkit.records import TRAINERS
from evalkit.train.common import GradientOptions, Policy
from evalkit.train.guidance import Rollout

__all__ = ["GRPOOptions", "run_grpo", "policy_loss", "LossSpec", "Policy", "collect_batch", "token_logprobs", "LOSS_TYPES"]

LOSS_TYPES = ("grpo", "dapo", "dr_grpo")


@dataclass(frozen=True)
class GRPOOptions(TopPOptions, TemperatureOptions, GradientOptions):  # backend vllm: groups sampled by vLLM
    kind: ClassVar[str] = "grpo"
    greedy = False  # a group needs different samples

    group_size: int = option(8, "Completions per prompt G (TRL num_generations: 8).", min=2,
                             note="a group needs at least 2 samples (TRL default 8)")
    loss: str = option("dapo", "Aggregation: grpo (per sequence), dapo (per token), dr_grpo (B * max_new_tokens).",
                       choices=LOSS_TYPES)  # dapo: TRL 1.x default
    epsilon: float = option(0.2, "Lower clip epsilon (TRL: 0.2).", min=0)
    epsilon_high: float | None = option(None, "Upper clip epsilon; default = --epsilon (DAPO: 0.28).", min=0)
    beta: float = option(0.0, "KL (k3) weight to the starting model; 0 = no reference model.", min=0)
    scale_rewards: str = option("group", "group: divide advantages by group std + 1e-4; none: Dr. GRPO.",
                                choices=("group", "none"))
    dynamic_sampling: bool = option(False, "DAPO dynamic sampling: keep groups with 0 < #correct < G, resample to "
                                    "fill.")
    max_sampling_rounds: int = option(4, "Sampling rounds allowed per step with --dynamic-sampling.", min=1)
    updates_per_batch: int = option(1, "AdamW steps per sampled batch (TRL num_iterations; >1 makes clipping "
                                    "active).", min=1)
    # context for rollouts (evalkit.train.guidance): a weak model's prefixes, hints for all-wrong groups
    guide_model: str | None = option(None, "Weak guide model: its completions' first --guide-tokens tokens start "
                                     "--guided-rollouts of each group (context: out of the loss and ratio).")
    guide_tokens: int = option(0, "Prefix length taken from the guide model's completion.", min=0)
    guided_rollouts: int = option(0, "Rollouts per group (< G) that continue a guide prefix.", min=0)
    hint: str | None = option(None, "all-wrong: a group whose rewards are all 0 is sampled once more from a hint "
                              "(the first --hint-fraction of the reference solution or answer; context, out of the "
                              "loss).", choices=("all-wrong",))
    hint_fraction: float = option(0.5, "Share of the reference given as the hint, in (0, 1).", above=0, below=1)

    def scale(self):
        from evalkit.options import SCALE

        return SCALE["grpo-context" if self.guided_rollouts or self.hint else "grpo"]

    def completions_per_unit(self) -> int:
        return self.prompts_per_step * self.group_size  # a guided rollout (prefix + continuation) is one

    def _checks(self) -> None:
        from evalkit.options import OptionError
        from evalkit.train.guidance import check_guidance

        check_guidance(self)
        if self.guided_rollouts and self.guide_tokens >= self.max_new_tokens:
            raise OptionError("guide_tokens", self.guide_tokens, f"must be below max_new_tokens {self.max_new_tokens} "
                              "(the guide's prefix is part of the rollout)")


TRAINERS["train-grpo"] = GRPOOptions  # its records are upgraded with it (evalkit.records)


# ---------------------------------------------------------------- the loss


@dataclass(frozen=True)
class LossSpec:
    """The loss of one batch: clip range, aggregation, KL weight, and the whole batch's
    normalisers (`num_sequences` B, `num_tokens` active tokens, `max_completion_length`)."""

    eps_low: float
    eps_high: float
    loss_type: str
    num_sequences: int
    num_tokens: int
    max_completion_length: int
    beta: float = 0.0


def policy_loss(logp, old_logp, adv, mask, spec: LossSpec, ref_logp=None):
    """This micro-batch's share of the clipped GRPO loss, and summed token statistics.

    logp, old_logp, ref_logp, mask: (b, T) tensors; adv: (b,). The shares of
    all micro-batches add up to the full-batch loss because the normalisers in
    `spec` are the whole batch's. Formulas: module docstring (TRL `_compute_loss`).
    """
    import torch

    eps_low, eps_high, loss_type, beta = spec.eps_low, spec.eps_high, spec.loss_type, spec.beta
    num_sequences, num_tokens, max_completion_length = spec.num_sequences, spec.num_tokens, spec.max_completion_length

    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    a = adv[:, None]
    per_token = -torch.min(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)
    kl = None
    if beta != 0.0:
        diff = ref_logp - logp
        kl = torch.exp(diff) - diff - 1
        per_token = per_token + beta * kl
    summed = per_token * mask
    if loss_type == "grpo":
        loss = (summed.sum(-1) / mask.sum(-1).clamp(min=1.0)).sum() / num_sequences
    elif loss_type == "dapo":
        loss = summed.sum() / max(num_tokens, 1)
    elif loss_type == "dr_grpo":
        loss = summed.sum() / (num_sequences * max_completion_length)
    else:
        raise ValueError(f"loss_type {loss_type!r}")
    with torch.no_grad():
        low = (ratio < 1 - eps_low) & (a < 0)
        high = (ratio > 1 + eps_high) & (a > 0)
        stats = {
            "clip_low": float((low * mask).sum()),
            "clip_high": float((high * mask).sum()),
            "clip_region": float(((low | high) * mask).sum()),
            "kl": float((kl * mask).sum()) if kl is not None else None,
            "tokens": float(mask.sum()),
        }
    return loss, stats


def token_logprobs(model, seqs, *, temperature: float, pad_id: int):
    """Log-probs of each completion token under `model` at `temperature`.

    seqs: list of (prompt_ids, completion_ids). Returns (logp (b, T), mask
    (b, T)) with T the longest completion. Right-padded forward of the
    decoder; the vocabulary projection only at the positions that predict a
    completion token; `logp = logit[tok] - logsumexp(logits)`.
    """
    import torch

    from evalkit.forced import forced_forward

    device = next(model.parameters()).device
    t_max = max(len(c) for _, c in seqs)
    rows, cols, targets, slots = [], [], [], []
    for r, (p, c) in enumerate(seqs):
        for k, tok in enumerate(c):
            rows.append(r)
            cols.append(len(p) + k - 1)  # the position whose output predicts token k
            targets.append(tok)
            slots.append(r * t_max + k)
    hidden, _ = forced_forward(model, [list(p) + list(c) for p, c in seqs], pad_id=pad_id, left=False, hidden=True)
    picked = hidden[torch.tensor(rows, device=device), torch.tensor(cols, device=device)]
    logits = model.get_output_embeddings()(picked).float() / temperature
    target = torch.tensor(targets, device=device)
    flat = logits.gather(-1, target[:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    logp = torch.zeros(len(seqs) * t_max, dtype=flat.dtype, device=device)
    logp = logp.index_put((torch.tensor(slots, device=device),), flat).view(len(seqs), t_max)
    mask = torch.zeros(len(seqs) * t_max, device=device)
    mask[torch.tensor(slots, device=device)] = 1.0
    return logp, mask.view(len(seqs), t_max)


# ------------------------------------------------------------ one step


@dataclass(frozen=True)
class Group:
    prompt_ids: tuple[int, ...]
    completions: tuple[tuple[int, ...], ...]  # stop token appended when the row stopped
    rewards: tuple[float, ...]
    prompts: tuple = ()  # per completion, its prompt ids when given text extends it (guidance, hints)
    contexts: tuple = ()  # per completion, how many prompt tokens are given text (0: the policy's own)

    def prompt_of(self, k: int) -> tuple[int, ...]:
        return self.prompts[k] if self.prompts else self.prompt_ids


def _sample_groups(policy: Policy, problems, seed: int, metrics: dict | None = None) -> tuple[list, list]:
    """A group per problem: G - m rollouts of the policy's own, and m continuing a guide model's
    prefix (`policy.guide`, evalkit.train.guidance); returns (groups, the policy's own samples)
    and puts the guided rollouts' metrics into `metrics` when given."""
    from evalkit.sampling import SamplingConfig, render_prompt, sample_problems
    from evalkit.train.common import decode_and_grade, derive_seed
    from evalkit.train.guidance import given_rollouts, guide_prefixes

    opts, tokenizer, stop = policy.opts, policy.tokenizer, policy.stop
    m = opts.guided_rollouts if policy.guide is not None else 0
    cfg = SamplingConfig(opts.group_size - m, opts.temperature, opts.top_p, opts.max_new_tokens, seed)
    prompts = [render_prompt(tokenizer, p.prompt) for p in problems]
    if policy.sampler is None:
        policy.model.eval()
        samples = sample_problems(policy.model, tokenizer, problems, cfg, stop_ids=stop)
    else:  # same Samples from another engine (evalkit.train.vllm)
        samples = policy.sampler(prompts, problems, cfg, stop)
    _, rewards = decode_and_grade(tokenizer, policy.grader, samples, problems)
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id in stop else stop[0]
    prefixes = guide_prefixes(policy, prompts, problems, m, derive_seed(seed, "guide")) if m else []
    guided = given_rollouts(policy, prompts, problems, prefixes, derive_seed(seed, "guided")) if m else []
    groups = []
    for i, prompt in enumerate(prompts):
        ids = tuple(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        own = [Rollout(i, ids, s.token_ids + ((eos,) if s.finish_reason == "stop" else ()), r, 0, s)
               for s, r in zip(samples, rewards, strict=True) if s.problem_index == i]
        groups.append(_group(ids, own + [g for g in guided if g.problem == i]))
    if m and metrics is not None:
        metrics.update(_guided_metrics(samples, rewards, guided))
    return groups, samples


def _group(prompt_ids, rollouts: list[Rollout]) -> Group:
    """A Group of one problem's rollouts (given text, when any, kept per completion)."""
    given = any(r.context for r in rollouts)
    return Group(prompt_ids, tuple(r.completion for r in rollouts), tuple(r.reward for r in rollouts),
                 tuple(r.prompt_ids for r in rollouts) if given else (),
                 tuple(r.context for r in rollouts) if given else ())


def _guided_metrics(samples, rewards, guided) -> dict:
    import numpy as np

    def entropy(rows):
        values = [s.mean_entropy for s in rows if s.mean_entropy is not None]
        return float(np.mean(values)) if values else None

    return {"frac_guided": len(guided) / (len(guided) + len(samples)),
            "reward_guided": float(np.mean([g.reward for g in guided])), "reward_unguided": float(np.mean(rewards)),
            "entropy_guided": entropy([g.sample for g in guided]), "entropy_unguided": entropy(samples),
            "guide_tokens_mean": float(np.mean([g.context for g in guided]))}


def _hint_groups(policy: Policy, problems, groups: list[Group], seed: int) -> tuple[list, dict]:
    """Groups whose rewards are all 0, sampled once more from a hint (evalkit.train.guidance)."""
    from evalkit.sampling import render_prompt
    from evalkit.train.guidance import given_rollouts, hint_text

    opts = policy.opts
    wrong = [k for k, g in enumerate(groups) if not any(g.rewards)]
    if not wrong:
        return groups, {"frac_hinted": 0.0}
    chosen = [problems[k] for k in wrong]
    prompts = [render_prompt(policy.tokenizer, p.prompt) for p in chosen]
    given = [[hint_text(p, opts.hint_fraction)] * opts.group_size for p in chosen]
    rows = given_rollouts(policy, prompts, chosen, given, seed)
    out = list(groups)
    for j, k in enumerate(wrong):
        out[k] = _group(groups[k].prompt_ids, [r for r in rows if r.problem == j])
    return out, {"frac_hinted": len(wrong) / len(groups), "reward_before_hint": 0.0,
                 "reward_after_hint": sum(r.reward for r in rows) / len(rows),
                 "hint_tokens_mean": sum(r.context for r in rows) / len(rows)}


def collect_batch(policy: Policy, task, step: int) -> tuple[list, dict]:
    """Groups to train on; all sampled groups feed the reward metrics. `frac_reward_zero_std` is
    the raw figure, before hints."""
    from evalkit.train.common import completion_metrics, derive_seed, pick_problems
    from metrics.grpo import group_stats, keep_informative_groups

    opts = policy.opts
    kept, sampled, samples, used, extra = [], [], [], set(), {}
    rounds = opts.max_sampling_rounds if opts.dynamic_sampling else 1
    for round_ in range(rounds):
        pool = [p for p in task.problems if p.id not in used]
        need = opts.prompts_per_step - len(kept)
        if need <= 0 or not pool:
            break
        problems = pick_problems(pool, need, derive_seed(opts.seed, "grpo-prompts", step, round_))
        used.update(p.id for p in problems)
        seed = derive_seed(opts.seed, "grpo-sample", step, round_)
        groups, round_samples = _sample_groups(policy, problems, seed, extra)
        sampled += groups
        samples += round_samples
        if opts.hint:
            groups, hinted = _hint_groups(policy, problems, groups, derive_seed(seed, "hint"))
            extra.update(hinted)
        keep = keep_informative_groups([g.rewards for g in groups]) if opts.dynamic_sampling else None
        kept += [g for k, g in enumerate(groups) if keep is None or keep[k]]
    metrics = {
        **group_stats([g.rewards for g in sampled]),
        **completion_metrics(samples),
        "groups_sampled": len(sampled),
        "groups_kept": len(kept),
        "sampling_rounds": round_ + 1,
        **extra,
    }
    return kept, metrics


def grpo_update(model, ref_model, optimizer, groups: list[Group], opts: GRPOOptions, pad_id: int) -> dict:
    """`updates_per_batch` AdamW steps on the batch; returns loss and clip/KL statistics."""
    import torch

    from metrics.grpo import group_advantages

    adv = group_advantages([g.rewards for g in groups], scale=opts.scale_rewards).reshape(-1)
    seqs = [(g.prompt_of(k), c) for g in groups for k, c in enumerate(g.completions)]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i][0]) + len(seqs[i][1]))
    batches = [order[i : i + opts.micro_batch] for i in range(0, len(order), opts.micro_batch)]
    logp_of = lambda m, idx: token_logprobs(m, [seqs[i] for i in idx], temperature=opts.temperature, pad_id=pad_id)  # noqa: E731
    with torch.no_grad():
        old = [logp_of(model, b)[0] for b in batches] if opts.updates_per_batch > 1 else None
        ref = [logp_of(ref_model, b)[0] for b in batches] if opts.beta != 0.0 else None
    spec = LossSpec(opts.epsilon, opts.epsilon if opts.epsilon_high is None else opts.epsilon_high, opts.loss,
                    len(seqs), sum(len(c) for _, c in seqs), opts.max_new_tokens, opts.beta)
    totals = {"loss": 0.0, "clip_low": 0.0, "clip_high": 0.0, "clip_region": 0.0, "kl": 0.0, "tokens": 0.0}
    model.train()
    for _ in range(opts.updates_per_batch):
        optimizer.zero_grad(set_to_none=True)
        for k, idx in enumerate(batches):
            logp, mask = logp_of(model, idx)
            loss, stats = policy_loss(
                logp, old[k] if old else logp.detach(), torch.tensor(adv[idx], dtype=logp.dtype, device=logp.device),
                mask, spec, ref_logp=ref[k] if ref else None,
            )
            loss.backward()
            totals["loss"] += float(loss.detach()) / opts.updates_per_batch
            for key in ("clip_low", "clip_high", "clip_region", "kl", "tokens"):
                totals[key] += stats[key] or 0.0
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), opts.max_grad_norm)
        optimizer.step()
    model.eval()
    t = max(totals["tokens"], 1.0)
    out = {
        "loss": totals["loss"],
        "grad_norm": float(grad_norm),
        "clip_ratio/low_mean": totals["clip_low"] / t,
        "clip_ratio/high_mean": totals["clip_high"] / t,
        "clip_ratio/region_mean": totals["clip_region"] / t,
    }
    if opts.beta != 0.0:
        out["kl"] = totals["kl"] / t
    from evalkit.train.common import adamw_step_record

    return out | adamw_step_record(optimizer)  # the step's size against bf16's spacing (es.py logs ES's)


# ------------------------------------------------------------ the run


def run_grpo(opts: GRPOOptions, out: Path, *, progress: Callable | None = None) -> dict:
    """Run (or resume) GRPO into `out`; returns the summary written to summary.json."""
    from evalkit.train.common import gradient_run

    opts.validate()
    at = gradient_run(opts, out, "train-grpo", opts.steps, _grpo_steps, progress=progress)
    return _summary(at.run, at.log, out, opts.steps)


def _grpo_steps(model, tokenizer, stop, at, opts: GRPOOptions, cleanup):
    """The GRPO step for `gradient_run`: sample groups, grade, update (and push to a vLLM engine)."""
    from evalkit.models import load_model

    ref_model = None
    if opts.beta != 0.0:
        ref_model, _ = load_model(at.ref, dtype=opts.dtype, device=at.device)
        ref_model.requires_grad_(False)
    engine = None
    if opts.backend == "vllm":  # loads the same weights the policy was loaded from
        from evalkit.train.vllm import ENTROPY_KIND, VllmPolicySampler

        engine = VllmPolicySampler(at.source.path, opts, tokenizer, stop, at.device)
        cleanup.callback(engine.close)

    guide = None
    if opts.guided_rollouts:
        from evalkit.models import resolve_model

        guide, _ = load_model(resolve_model(opts.guide_model), dtype=opts.dtype, device=at.device)

    def step_fn(step: int, grader, optimizer) -> dict:
        policy = Policy(model, tokenizer, grader, tuple(stop), opts, engine.sample if engine else None, guide)
        groups, record = collect_batch(policy, at.task, step)
        if groups:
            record.update(grpo_update(model, ref_model, optimizer, groups, opts, tokenizer.pad_token_id))
            if engine:
                engine.push(model)
        return record | ({"entropy_kind": ENTROPY_KIND} if engine else {})

    return step_fn


def _summary(run, log, out: Path, steps: int) -> dict:
    from evalkit.train.common import latest_checkpoint

    records = log.records()
    final = latest_checkpoint(out)
    zero = [r["frac_reward_zero_std"] for r in records if "frac_reward_zero_std" in r]
    summary = {
        **run.settings,
        "complete": final is not None and final.step >= steps,
        "steps": steps,
        "final_checkpoint": str(final.path) if final else None,
        "mean_frac_reward_zero_std": sum(zero) / len(zero) if zero else None,
        "steps_without_update": sum("loss" not in r for r in records),
    }
    run.write_summary(summary)
    return summary
