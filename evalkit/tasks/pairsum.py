"""`pairsum`: pick two numbers of a short list that add up to a target, where several pairs do.

A task with several solution paths (issue 44: coverage where narrowing can happen): every
problem has at least `pairs` different right answers, so a model can keep many of them or
narrow onto one, and the answers of one problem are almost never right for another (its list
and target), so the chance floor of pass@k stays near zero.

Example problem: "Pick two numbers from this list that add up to 14: 10, 3, 4, 11. Answer like
3 + 4." -> "3 + 11" (also right: "10 + 4").

Config: `numbers` (list length, default 4, at least 3), `max_value` (the list's numbers are
distinct, drawn from 1..max_value, default 20), `pairs` (the least number of pairs summing to the
target, default 2). The generator draws a list, keeps the sums reached by at least `pairs`
pairs, and picks one of them as the target (a list with none is drawn again). `prompt` (1, 2 or 3, default 1: `PROMPTS`) changes the
question's words only; a seed draws the same lists and targets under every prompt, and a config
that leaves `prompt` out is the one the v3 pilot's first round ran.

Scoring (`score`, the same function for evaluation and training reward): the chain of numbers
that ends last in the completion's answer text, a chain being numbers joined by `+` ("23 + 28")
or numbers joined by `and` / `plus` ("23 and 28", "11 plus 28 = 39"), never the two mixed (so
"3 + 4 = 7 and 3 + 4 = 7" is read at its last "3 + 4", not as "7 and 3 + 4"). A number may carry a sign or decimals: "-3 + 11" and "3.5 + 10.5" are read
whole, never as "3 + 11" or "5 + 10". A chain of exactly two distinct numbers of the list whose
sum is the target is `correct`, any other chain `incorrect`, no chain `no_answer`. The extracted
answer is the pair written smaller first ("3 + 11"), so two completions naming one pair in
either order give one answer key (metrics.placebo). Version 1 read `+` only; the v3 pilot's
completions (results/pilot-v3/pilot.md) showed the base naming most of its pairs in words, which
version 1 graded `no_answer`, so pass@1 measured the format more than the pick. Version 2 joined
`and` and `+` in one chain, and read "3 + 4 = 7 and 3 + 4" as the chain "7 + 3 + 4".

Two questions are the same question (`question_key`: a study's splits never share one) when they
have the same numbers, in any order, and the same target.

Limits: the prompt's own example ("3 + 4") is right only when 3 and 4 are in the list and add
up to the target; a completion that writes several chains is read at its last one, so prose such
as "between 3 and 11" is read as a pair when it comes last; a list ("3, 11") and numbers in words
("three and four") are no chain.
"""

from __future__ import annotations

import json
import random
import re

from evalkit.errors import UsageError
from evalkit.tasks.base import Grade, Problem, Task, TaskSpec, answer_text

__all__ = ["build", "score", "answers", "question_key", "VERSION", "KIND"]

KIND = "pairsum"
VERSION = "pairsum-3"  # change it whenever a grade could change (2: "and", "plus" read; 3: apart from "+")
# `prompt` (config): 1 as the v3 pilot's first round ran it (its example "3 + 4" was the commonest
# wrong answer, results/pilot-v3/pilot.md); 2 and 3 name no numbers of their own
PROMPTS = {1: "Pick two numbers from this list that add up to {target}: {numbers}. Answer like 3 + 4.",
           2: "Which two numbers in this list add up to {target}: {numbers}? Write only the two numbers joined by a plus sign.",
           3: "Find two numbers in the list {numbers} whose sum is {target}. Answer in the form a + b = {target}."}
PROMPT_VERSION = 1
NUMBER = r"(?<![\w.])[-\u2212]?\d+(?:\.\d+)?(?![\w.]*\d)"  # a whole signed or decimal number, not a piece of one
JOIN = r"\s*(?:\+|\band\b|\bplus\b)\s*"  # "3 + 11", "3 and 11", "3 plus 11"
# chains of `+` and chains of words, found apart: "3 + 4 = 7 and 3 + 4" is never "7 and 3 + 4"
CHAINS = (re.compile(NUMBER + r"(?:\s*\+\s*" + NUMBER + ")+"),
          re.compile(NUMBER + r"(?:\s+(?:and|plus)\s+" + NUMBER + ")+", re.IGNORECASE))


def _question(text: str) -> re.Pattern:
    """A prompt's text read back: its target (a second `{target}` must repeat the first) and numbers."""
    pattern = re.escape(text).replace(re.escape("{numbers}"), r"(?P<numbers>\d+(?:, \d+)*)")
    head, _, tail = pattern.partition(re.escape("{target}"))
    return re.compile(head + r"(?P<target>\d+)" + tail.replace(re.escape("{target}"), r"(?P=target)"))


QUESTIONS = {v: _question(text) for v, text in PROMPTS.items()}
DEFAULTS = {"numbers": 4, "max_value": 20, "pairs": 2, "prompt": 1}


def build(size: int, seed: int, config: dict) -> Task:
    unknown = set(config) - set(DEFAULTS)
    if unknown:
        raise UsageError(f"pairsum: unknown config keys {sorted(unknown)}; valid: {', '.join(DEFAULTS)}")
    k, top, pairs = (_int(config, key, least) for key, least in (("numbers", 3), ("max_value", 3), ("pairs", 1)))
    version = config.get("prompt", DEFAULTS["prompt"])
    prompt = None if isinstance(version, bool) else PROMPTS.get(version)
    if prompt is None:
        raise UsageError(f"pairsum: config prompt must be one of {', '.join(map(str, PROMPTS))}, got {config['prompt']!r}")
    if k > top:
        raise UsageError(f"pairsum: numbers {k} must be at most max_value {top} (the list's numbers are distinct)")
    if pairs > k // 2:
        raise UsageError(f"pairsum: pairs {pairs} needs at least {2 * pairs} numbers in the list (numbers {k})")
    rng = random.Random(seed)
    problems = [_problem(rng, f"pairsum-{seed}-{i}", k, top, pairs, prompt) for i in range(size)]
    spec = TaskSpec("pairsum", KIND, size, seed, json.dumps(config, sort_keys=True), prompt_version=PROMPT_VERSION)
    return Task(spec, tuple(problems))


def _problem(rng: random.Random, pid: str, k: int, top: int, pairs: int, template: str) -> Problem:
    while True:
        numbers = rng.sample(range(1, top + 1), k)
        sums: dict[int, list] = {}
        for i in range(k):
            for j in range(i + 1, k):
                sums.setdefault(numbers[i] + numbers[j], []).append(sorted((numbers[i], numbers[j])))
        targets = sorted(t for t, found in sums.items() if len(found) >= pairs)
        if targets:
            target = rng.choice(targets)
            right = sorted(sums[target])
            entry = {"numbers": numbers, "target": target, "pairs": right}
            prompt = template.format(target=target, numbers=", ".join(map(str, numbers)))
            return Problem(pid, prompt, _pair(*right[0]), entry)


def _pair(a: int, b: int) -> str:
    return f"{min(a, b)} + {max(a, b)}"


def answers(entry: dict) -> list[str]:
    """Every right answer of a problem, written as `score` extracts them."""
    return [_pair(a, b) for a, b in entry["pairs"]]


def score(completion: str, problem: Problem) -> Grade:
    """`correct` when the last `+` chain names two distinct numbers of the list that add up to the target."""
    text = answer_text(completion)
    chains = sorted((m.end(), m.group(0)) for chain in CHAINS for m in chain.finditer(text))
    if not chains:
        return Grade("no_answer")
    texts = [t.replace("\u2212", "-") for t in re.split(JOIN, chains[-1][1], flags=re.IGNORECASE)]
    entry = problem.entry or {}
    if len(texts) != 2:
        return Grade("incorrect", " + ".join(texts), "not a pair")
    if not all(t.isdigit() for t in texts):
        return Grade("incorrect", " + ".join(texts), "not two whole numbers")
    a, b = int(texts[0]), int(texts[1])
    numbers = set(entry.get("numbers", ()))
    if a == b:
        why = "the same number twice"
    elif not {a, b} <= numbers:
        why = "not in the list"
    elif a + b != entry.get("target"):
        why = "wrong sum"
    else:
        return Grade("correct", _pair(a, b))
    return Grade("incorrect", _pair(a, b), why)


def question_key(question: str) -> str:
    """The numbers (sorted) and the target of a pairsum question; another text is its own key."""
    for pattern in QUESTIONS.values():
        match = pattern.fullmatch(question.strip())
        if match is not None:
            numbers = sorted(int(x) for x in match["numbers"].split(", "))
            return f"pairsum:{match['target']}:" + ",".join(map(str, numbers))
    return question


def _int(config: dict, key: str, least: int) -> int:
    value = config.get(key, DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"pairsum: config {key} must be an integer of at least {least}, got {value!r}")
    return value
