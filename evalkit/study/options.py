"""The options of a study's own tables, owned by their classes (evalkit.options): the stopping
rule's validation split and the fair sparsity comparison.

    [validation]             ValidationOptions: the split, its length cap and the rule
    [evaluations.sparsity]   SparsityOptions: the top-q share curve, effective rank, the bf16 runs

A study file's table is read with `from_table`, so a bad value is refused naming its key
(`validation.rule last: choose best-greedy or final`) before any work.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.options import (
    BatchOptions,
    LimitOptions,
    MaxTokensOptions,
    OptionError,
    Options,
    SeedOptions,
    option,
)

__all__ = ["ValidationOptions", "SparsityOptions", "RULES"]

RULES = ("best-greedy", "final")


@dataclass(frozen=True)
class ValidationOptions(SeedOptions, MaxTokensOptions, LimitOptions, BatchOptions):
    """The split that picks each arm's checkpoint: the training generator with its own seed,
    minus every question of the training and held-out splits (commuted forms included). `seed`:
    the split's (the training generator's; not the training or held-out seed); `limit`: the
    validation problems kept (a number: 0 is refused); `max_new_tokens`: the greedy validation
    completions' cap."""

    own_defaults = {"seed": 2, "limit": 64, "max_new_tokens": 32}

    size: int = option(200, "Problems generated before questions seen in training or held out are dropped.", min=1)
    rule: str = option("best-greedy", "best-greedy: each arm's saved checkpoint with the highest greedy validation "
                       "reward, ties to the earlier; final: the last checkpoint (no rule).", choices=RULES)

    def _checks(self) -> None:
        if self.limit is None:
            raise OptionError("limit", 0, "must be >= 1")


@dataclass(frozen=True)
class SparsityOptions(Options):
    """Sparsity compared fairly: at matched update norm (the ES and GRPO checkpoints whose
    ||delta|| / ||W|| are closest), with scale-free statistics (the share of ||delta||^2 in the
    top q of entries, effective rank per matrix), and from short runs trained in bf16, where
    "unchanged" is a bit-identical bf16 weight, as Mukherjee et al. count it."""

    qs: tuple[float, ...] = option((1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.25, 0.5), "Top-q fractions of the share curve.",
                                   each={"above": 0, "max": 1})
    bf16_completions: int = option(256, "Completions of each arm's short bf16-trained run (ES and GRPO, the study's "
                                   "options, the first seed); 0 = none.", min=0)
    bf16_scales: tuple[float, ...] = option((1.0,), "Step sizes of the short bf16 runs, as multiples of ES's alpha and "
                                            "GRPO's lr: one run per method and scale (the first is the run a claim "
                                            "reads).", each={"above": 0})
    effective_rank: bool = option(True, "Effective rank (Roy and Vetterli) of every 2-D update at the matched "
                                  "checkpoints (not `evalkit diff --rank`'s rank(delta)/min(shape)).", name="rank")

    def _checks(self) -> None:
        if not self.bf16_scales or len(set(self.bf16_scales)) != len(self.bf16_scales):
            raise OptionError("bf16_scales", list(self.bf16_scales), "give distinct scales, e.g. [1.0, 4.0]")
