"""Greedy completions for generation benchmarks, identical for both models.

    texts = greedy_completions(model, tokenizer, prompts, ids, max_new_tokens=96)

Prompts are rendered with the model's chat template (`render_prompt`) and
decoded greedily (`sample_chunk` at temperature 0, n = 1) in fixed chunks of
`batch_size` prompts in item order, so the same items give the same
completions on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evalkit.options import GradingOptions

__all__ = ["ItemOutcome", "EvalSettings", "greedy_completions"]


@dataclass(frozen=True)
class EvalSettings(GradingOptions):
    """How every benchmark is run; the same for base and model. grader_workers: grader /
    sandbox processes; grade_timeout: seconds per graded item or program (wall clock)."""

    max_new_tokens: int = 0  # 0 = each benchmark's own default
    batch_size: int = 8
    seed: int = 0
    mc_norm: str = "sum"  # multiple choice: sum, token or byte

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


def greedy_completions(
    model,
    tokenizer,
    prompts: Sequence[str],
    ids: Sequence[str],
    *,
    max_new_tokens: int,
    batch_size: int = 8,
    seed: int = 0,
    on_done: Callable[[int], None] | None = None,
) -> list[str]:
    """Decoded greedy completions, one per prompt, in order."""
    from evalkit.sampling import (
        SamplingConfig,
        decode_completion,
        render_prompt,
        sample_chunk,
        stop_token_ids,
    )

    cfg = SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=max_new_tokens, seed=seed,
                         record_entropy=False)
    stop = stop_token_ids(model, tokenizer)
    texts: list[str] = []
    for start in range(0, len(prompts), batch_size):
        part = [render_prompt(tokenizer, p) for p in prompts[start : start + batch_size]]
        samples = sample_chunk(model, tokenizer, part, list(ids[start : start + batch_size]), cfg, stop_ids=stop)
        samples = sorted(samples, key=lambda s: s.problem_index)
        texts.extend(decode_completion(tokenizer, s.token_ids) for s in samples)
        if on_done is not None:
            on_done(len(part))
    return texts
