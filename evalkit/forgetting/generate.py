"""Greedy completions for generation benchmarks, identical for both models.

    texts = greedy_completions(model, tokenizer, prompts, ids, EvalSettings(), 96)

Prompts are rendered with the model's chat template (`render_prompt`) and
decoded greedily (`sample_chunk` at temperature 0, n = 1) in fixed chunks of
`batch_size` prompts in item order, so the same items give the same
completions on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evalkit.options import BatchOptions, GradingOptions, MaxTokensOptions, SeedOptions, option

__all__ = ["ItemOutcome", "EvalSettings", "greedy_completions"]


@dataclass(frozen=True)
class EvalSettings(SeedOptions, BatchOptions, MaxTokensOptions, GradingOptions):
    """How every benchmark is run; the same for base and model (evalkit forgetting's options
    inherit these). grader_workers: grader / sandbox processes; grade_timeout: seconds per graded
    item or program (wall clock); max_new_tokens 0: each benchmark's own cap (reasoning-gym 96,
    HumanEval 384); batch_size: prompts, or choice sequences; seed: decoding, the bootstrap and
    the KL's samples."""

    per_benchmark = True
    own_defaults = {"max_new_tokens": 0, "batch_size": 8}

    mc_norm: str = option("sum", "Multiple-choice score: sum (log-likelihood), token (per token) or byte (per UTF-8 "
                          "byte).", choices=("sum", "token", "byte"))

    def tokens(self, default: int) -> int:
        return self.max_new_tokens or default


@dataclass(frozen=True)
class ItemOutcome:
    item_id: str
    outcome: str  # correct, incorrect, no_answer, timeout, error
    extracted: str | None = None
    detail: str | None = None
    completion: str | None = None  # generated text; None for multiple choice

    @property
    def correct(self) -> bool:
        return self.outcome == "correct"


def greedy_completions(model, tokenizer, prompts: Sequence[str], ids: Sequence[str], settings: EvalSettings,
                       default_tokens: int, on_done: Callable[[int], None] | None = None) -> list[str]:
    """Decoded greedy completions, one per prompt, in order; at most `settings.tokens(default_tokens)`
    new tokens each, `settings.batch_size` prompts at a time, seeded by `settings.seed`."""
    max_new_tokens, batch_size, seed = settings.tokens(default_tokens), settings.batch_size, settings.seed
    from evalkit.sampling import SamplingConfig, decode_completion, sample_texts, stop_token_ids

    cfg = SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=max_new_tokens, seed=seed,
                         record_entropy=False)
    stop = stop_token_ids(model, tokenizer)
    texts: list[str] = []
    for start in range(0, len(prompts), batch_size):
        samples = sample_texts(model, tokenizer, prompts[start : start + batch_size], ids[start : start + batch_size],
                               cfg, stop_ids=stop)
        samples = sorted(samples, key=lambda s: s.problem_index)
        texts.extend(decode_completion(tokenizer, s.token_ids) for s in samples)
        if on_done is not None:
            on_done(len(samples))
    return texts
