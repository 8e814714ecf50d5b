"""Context given to GRPO rollouts: a weak model's prefix (guidance) and a hint for all-wrong groups.

    evalkit train grpo --guide-model M --guide-tokens 8 --guided-rollouts 2 --out runs/guided
    evalkit train grpo --hint all-wrong --hint-fraction 0.5 --out runs/hinted

Weak-model guidance (Shen et al.): in each group, `guided_rollouts` of the G rollouts start from a
`guide_tokens`-token prefix of a completion the guide model sampled (temperature as GRPO's); the
policy continues from there. Hints for difficulty extremes (Hu et al.): a group whose rewards
are all 0 is sampled once more, each rollout starting from the first `hint_fraction` (by
characters) of the problem's reference: its worked solution when the task provides one
(`entry["solution"]`), else its answer.

In both, the given text becomes part of the rollout's prompt: the policy's continuation is
sampled after `rendered prompt + given text`, graded as `given text + continuation`, and trained
with the given tokens as context, so they are out of the loss and of the ratio by construction
(token_logprobs covers completion tokens only). Advantages use the whole group.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.errors import UsageError

__all__ = ["Rollout", "hint_text", "given_rollouts", "guide_prefixes", "check_guidance"]


def check_guidance(opts) -> None:
    """Guidance options that cannot work together, refused with the reason (the values' own
    rules are GRPOOptions' metadata)."""
    if opts.guided_rollouts:
        if not opts.guide_model:
            raise UsageError("--guided-rollouts: give --guide-model (the weak model whose prefixes guide)")
        if opts.guided_rollouts >= opts.group_size:
            raise UsageError(f"--guided-rollouts {opts.guided_rollouts}: must be below --group-size "
                             f"{opts.group_size} (some rollouts must be the policy's own)")
        if opts.guide_tokens < 1:
            raise UsageError("--guide-tokens: give the prefix length (>= 1) with --guided-rollouts")
        from evalkit.models import tokenizer_difference

        if why := tokenizer_difference(opts.model, opts.guide_model):
            raise UsageError(f"--guide-model {opts.guide_model}: {why}; the prefix must be the policy's tokens")


def hint_text(problem, fraction: float) -> str:
    """The first `fraction` of the problem's worked solution, else of its answer."""
    entry = problem.entry or {}
    source = str(entry.get("solution") or problem.answer)
    return source[: max(1, int(len(source) * fraction))]


@dataclass(frozen=True)
class Rollout:
    """One rollout of a group, as GRPO trains on it."""

    problem: int  # index of its problem in the step's batch
    prompt_ids: tuple[int, ...]  # the rendered prompt's tokens, given text included
    completion: tuple[int, ...]  # the policy's tokens, stop token appended when it stopped
    reward: float
    context: int = 0  # how many of prompt_ids are given text (0: the policy's own rollout)
    sample: object = None  # the evalkit.sampling.Sample it came from


def given_rollouts(policy, prompts, problems, given: list[list[str]], seed: int) -> list[Rollout]:
    """For problem i and each text in `given[i]`, one policy rollout continuing `prompt + text`
    (`policy`: evalkit.train.grpo.Policy: model, tokenizer, grader, stop, opts)."""
    from evalkit.sampling import SamplingConfig, decode_completion, sample_chunk

    model, tokenizer, grader, opts, stop = policy.model, policy.tokenizer, policy.grader, policy.opts, policy.stop

    rows = [(i, text) for i, texts in enumerate(given) for text in texts]
    if not rows:
        return []
    budget = max(1, opts.max_new_tokens - max(len(tokenizer(t, add_special_tokens=False)["input_ids"])
                                                for _, t in rows))
    cfg = SamplingConfig(1, opts.temperature, opts.top_p, budget, seed)
    contexts = [prompts[i] + text for i, text in rows]
    ids = [f"{problems[i].id}#given{k}" for k, (i, _) in enumerate(rows)]
    model.eval()
    samples = sample_chunk(model, tokenizer, contexts, ids, cfg, stop_ids=stop)
    texts = [rows[s.problem_index][1] + decode_completion(tokenizer, s.token_ids) for s in samples]
    rewards = [1.0 if g.outcome == "correct" else 0.0 for g in grader.grade(
        [(t, problems[rows[s.problem_index][0]]) for t, s in zip(texts, samples, strict=True)])]
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id in stop else stop[0]
    out = []
    for s, r in zip(samples, rewards, strict=True):
        i, text = rows[s.problem_index]
        prompt_ids = tuple(tokenizer(contexts[s.problem_index], add_special_tokens=False)["input_ids"])
        context = len(prompt_ids) - len(tokenizer(prompts[i], add_special_tokens=False)["input_ids"])
        out.append(Rollout(i, prompt_ids, s.token_ids + ((eos,) if s.finish_reason == "stop" else ()), r, context, s))
    return out


def guide_prefixes(policy, prompts, problems, m: int, seed: int) -> list[list[str]]:
    """m prefixes per prompt: the first `guide_tokens` tokens of the guide model's
    (`policy.guide`) samples, as text."""
    from evalkit.sampling import SamplingConfig, decode_completion, sample_chunk

    guide, tokenizer, opts, stop = policy.guide, policy.tokenizer, policy.opts, policy.stop

    cfg = SamplingConfig(m, opts.temperature, opts.top_p, opts.guide_tokens, seed, record_entropy=False)
    samples = sample_chunk(guide, tokenizer, prompts, [f"{p.id}#guide" for p in problems], cfg, stop_ids=stop)
    out: list[list[str]] = [[] for _ in prompts]
    for s in samples:
        out[s.problem_index].append(decode_completion(tokenizer, s.token_ids))
    return out
