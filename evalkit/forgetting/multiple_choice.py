"""Multiple-choice benchmarks (MMLU, HellaSwag, ARC style) from local JSONL files.

    evalkit forgetting BASE MODEL --mc-file mmlu=mmlu_dev.jsonl --mc-file arc=arc_easy.jsonl

File format: one JSON object per line,
    {"question": "The capital of France is", "choices": ["Paris", "Rome"], "answer": 0}
with `answer` the 0-based index of the right choice and an optional "id".
Blank lines are skipped. The question is used as written (write
"Question: ...\\nAnswer:" into it if you want that format); no chat template.

Scoring by log-likelihood, as lm-evaluation-harness does: context tokens =
tokenizer(question), continuation tokens = tokenizer(" " + choice), both
without special tokens, encoded separately and concatenated; the score of a
choice is `sum_t log p(cont_t | context, cont_<t)`. Normalisation (`norm`):
`sum` (the default, lm-eval `acc`), `token` (divided by the number of
continuation tokens), `byte` (divided by the UTF-8 length of the choice, as
lm-eval `acc_norm` divides by characters). The prediction is the argmax
(first index on ties); correct when it equals `answer`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.forgetting.generate import EvalSettings, ItemOutcome

__all__ = ["McItem", "McItems", "load", "read_items", "choice_logprobs", "pairs", "outcomes", "evaluate", "NORMS"]

NORMS = ("sum", "token", "byte")


@dataclass(frozen=True)
class McItem:
    """One question of a multiple-choice file; `answer` indexes `choices`."""

    id: str
    question: str
    answer: int
    choices: tuple[str, ...]


@dataclass(frozen=True)
class McItems:
    """One multiple-choice benchmark (an `--mc-file NAME=PATH`)."""

    name: str
    source: str  # the file's path as given
    sha256: str  # of the file's bytes: another version of the file is another benchmark
    items: tuple[McItem, ...]

    @property
    def ids(self) -> list[str]:
        return [it.id for it in self.items]

    def identity(self) -> dict:
        return {"name": self.name, "source": self.source, "source_sha256": self.sha256, "items": len(self.items)}


def load(name: str, path: str, *, limit: int = 0) -> McItems:
    file = Path(path).expanduser()
    if not file.is_file():
        raise UsageError(f"--mc-file {name}={path}: no such file; give a JSONL file of multiple-choice items")
    data = file.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--mc-file {name}={path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    items = read_items(text, f"{name}={path}")
    return McItems(name, str(file.resolve()), hashlib.sha256(data).hexdigest(), items[:limit] if limit else items)


def read_items(text: str, where: str) -> tuple[McItem, ...]:
    """Parse and check the JSONL text; a bad line is a UsageError naming it."""
    items = []
    for lineno, line in enumerate(text.split("\n"), 1):  # lines end at \n only, as in evalkit.jsonio
        if not line.strip():
            continue
        try:
            row = json.loads(line, strict=False)
            choices = tuple(str(c) for c in row["choices"])
            answer = row["answer"]
            ok = isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(choices)
            if len(choices) < 2 or not ok:
                raise ValueError("need at least 2 choices and an answer index within them")
            items.append(McItem(str(row.get("id", f"{lineno}")), str(row["question"]), answer, choices))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise UsageError(
                f"--mc-file {where}: line {lineno} is not a valid item ({exc}); expected "
                '{"question": str, "choices": [str, ...], "answer": 0-based int}'
            ) from exc
    if not items:
        raise UsageError(f"--mc-file {where}: no items in the file")
    return tuple(items)


def _encode(tokenizer, question: str, choice: str) -> tuple[list[int], list[int]]:
    ctx = tokenizer(question, add_special_tokens=False)["input_ids"]
    cont = tokenizer(" " + choice, add_special_tokens=False)["input_ids"]
    if not ctx:  # the first continuation token needs something to condition on
        ctx = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
    return ctx, cont


def choice_logprobs(model, tokenizer, pairs: list[tuple[str, str]], *, batch_size: int = 8) -> list[tuple[float, int]]:
    """(sum of continuation log-probs, continuation tokens) per (question, choice)."""
    import torch

    from evalkit.forced import forced_forward

    device = next(model.parameters()).device
    encoded = [_encode(tokenizer, q, c) for q, c in pairs]
    out: list[tuple[float, int]] = []
    for start in range(0, len(encoded), batch_size):
        part = encoded[start : start + batch_size]
        with torch.inference_mode():  # right padding: positions are plain 0..len-1
            logits, _ = forced_forward(model, [ctx + cont for ctx, cont in part], pad_id=tokenizer.pad_token_id or 0,
                                       left=False)
            logits = logits.float()
        for row, (ctx, cont) in enumerate(part):
            pos = torch.arange(len(ctx) - 1, len(ctx) + len(cont) - 1, device=device)
            logp = torch.log_softmax(logits[row, pos], dim=-1)
            target = torch.tensor(cont, device=device)
            out.append((float(logp.gather(-1, target[:, None]).sum()), len(cont)))
    return out


def _normalise(total: float, n_tokens: int, choice: str, norm: str) -> float:
    if norm == "token":
        return total / max(n_tokens, 1)
    if norm == "byte":
        return total / max(len(choice.encode("utf-8")), 1)
    return total


def pairs(items: McItems) -> list[tuple[str, str]]:
    """(question, choice) for every choice of every item, in order: what `choice_logprobs` scores."""
    return [(it.question, c) for it in items.items for c in it.choices]


def outcomes(items: McItems, scores: list[tuple[float, int]], norm: str, on_done=None) -> list[ItemOutcome]:
    """Each item's outcome from the scores of its choices (`choice_logprobs` over `pairs(items)`)."""
    scores = iter(scores)
    found = []
    for it in items.items:
        values = [_normalise(*next(scores), c, norm) for c in it.choices]
        pick = max(range(len(values)), key=values.__getitem__)
        detail = "scores=" + ",".join(f"{v:.4f}" for v in values)
        found.append(ItemOutcome(it.id, "correct" if pick == it.answer else "incorrect", str(pick), detail))
        if on_done is not None:
            on_done(1)
    return found


def evaluate(items: McItems, model, tokenizer, settings: EvalSettings, on_done=None) -> list[ItemOutcome]:
    if settings.mc_norm not in NORMS:
        raise UsageError(f"--mc-norm {settings.mc_norm}: choose one of {', '.join(NORMS)}")
    scores = choice_logprobs(model, tokenizer, pairs(items), batch_size=settings.batch_size)
    return outcomes(items, scores, settings.mc_norm, on_done)
