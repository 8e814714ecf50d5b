"""`evalkit forgetting`: what a trained model lost on benchmarks it was not trained on.

    evalkit forgetting smollm2-135m runs/grpo/final --limit 20 --train-task arith --out runs/forget

Suites are plain lists of benchmark names; a benchmark name is one of
`BENCHMARKS`, any reasoning-gym dataset name, or a name given a file with
`--mc-file NAME=PATH` (multiple choice). Each benchmark lives in its own
file: `rgym_families.py`, `humaneval.py`, `multiple_choice.py`; the sandbox
for generated code is `sandbox.py`, the forward KL is `kl.py`, and
`runner.py` ties them together.
"""

from __future__ import annotations

__all__ = ["SUITES", "BENCHMARKS", "MC_FORMAT"]

# name -> kind. "rgym": a reasoning-gym family scored by its own scorer;
# "humaneval": code run against its tests in the sandbox; "mc": multiple
# choice from a local JSONL file (skipped when no file is given).
BENCHMARKS: dict[str, str] = {
    "word_sorting": "rgym",
    "letter_counting": "rgym",
    "spell_backward": "rgym",
    "humaneval": "humaneval",
    "mmlu": "mc",
    "hellaswag": "mc",
    "arc": "mc",
}

SUITES: dict[str, tuple[str, ...]] = {
    "default": ("word_sorting", "letter_counting", "spell_backward", "humaneval", "mmlu", "hellaswag", "arc"),
    "reasoning": ("word_sorting", "letter_counting", "spell_backward"),
    "code": ("humaneval",),
}

MC_FORMAT = (
    'one JSON object per line: {"question": str, "choices": [str, ...], "answer": int (0-based)}, '
    'optional "id"'
)
