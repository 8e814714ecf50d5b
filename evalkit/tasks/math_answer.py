"""The final answer a math completion commits to, as text.

    final_answer("so x = \\boxed{2} or x = \\boxed{3}.", "...")       # Found("2, 3", "boxes")
    final_answer("... = $36 in total. The final answer is $36.", "")  # Found("36", "answer phrase")

Anchored answers; the last of them by position wins:
- `\\boxed{...}` / `\\fbox{...}` (`\\boxed 5` too). Boxes joined only by connectives
  (`and`, `or`, `,`, `x =`, `\\quad`, math delimiters, one unit word) are one answer, the
  set of their values (one box per root: Math-Verify's `\\boxed{1}\\boxed{2}` = `1,2`);
  the same value boxed twice counts once;
- a final-answer phrase: "answer is X", "answer: X", "Answer = X", "**Answer:** X",
  "the answer (arabic numerals) is X" (zero-shot CoT's trigger), Minerva's "Final
  Answer: The final answer is X. I hope it is correct." (lm-eval `minerva_math`), and
  GSM8K's `#### X` (lm-eval `gsm8k.yaml` strict-match, OpenAI's `extract_answer`). X is a
  box, a `$...$` / `\\(...\\)` / `\\[...\\]`, a currency amount (`$36`), a time, a number
  (with the math glued to it: `2x`), a short text up to the end of the sentence
  (`x^2+2x+1`, `odd`), or the number a sentence states ("Harald sold 8,000 copies").
  After a box, only "the answer is" / "the final answer is" / `####` count, with a math
  or number value (not "Check our answer: ...", not "the answer is positive").
The phrases are also read in French ("Réponse :", "la réponse est donc"), Spanish and
German, and Chinese (GAOKAO-Bench's "【答案】X<eoa>", "答案是", "答："); a letter answer ("A",
"(C) 12") is a letter, never the article "a". An answer slot left blank ("the answer is
____") is no answer. A model that goes on to invent the next exercise ("Your turn:",
"Question:", "Q:", "Problem 2.", Minerva's "Subproblem 2:") is read only up to it, as
lm-eval stops generation at "Problem:" / "Question:", also when it wrote no box or phrase
before it; a marker that restates the question, or a numbered part that asks nothing
("Question 5: yes, because ..."), is not an invented exercise. When the gold lists n
answers, the last n distinct boxes are its answer (one box per root or part).

Without an anchored answer, the profile's fallbacks (evalkit.tasks.mathgrade): a
completion that is nothing but a value is that value; a text that stops inside math
(an open brace, `\\[`, `$$`) was cut off: no answer; then
- "last math" (the last `$...$`, `\\[...\\]`, `\\(...\\)` or bold `**...**` value) and
  "equation" (the value after the last `=` / "equals"), the later of the two; a number
  stated after that math span, in the closing sentences, wins over it;
- "last number": the last number or number tuple (lm-eval GSM8K's flexible-extract),
  skipping values that restate the question.
Code in ``` fences is not read by the fallbacks (its ```output block is); GSM8K's `<<9*2=18>>` annotations are
removed first.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from evalkit.tasks.base import answer_text
from evalkit.tasks.math_equal import equivalent, normalize, plain_number
from evalkit.tasks.math_text import (
    BOX,
    EQUALS,
    FILLER,
    LATEX_START,
    MIXED,
    SPACED,
    TIME,
    TUPLE,
    VALUE,
    boxes,
    clean,
    close,
    cut_off,
    frac_to_slash,
    last_side,
    latex_env,
    math_spans,
    number_led,
    operands,
    restates,
    superscripts,
)

__all__ = ["Found", "final_answer", "last_boxed", "box_group"]

_PHRASE = re.compile(  # English, French, Spanish, German, Chinese (GAOKAO-Bench's 【答案】, CMATH's 答案是)
    r"(?i:answer|r[ée]ponse|respuesta|antwort)\"?(?:\s*\([^()\n]{0,30}\))?\s*(?:\*\*)?\s*"
    r"(?::|=|\b(?i:is|est|es|ist)\b(?:\s+donc\b)?:?)\s*(?:\*\*)?"
    r"|####|【答案】\s*[:：]?|答案\s*(?:是|为|為|[:：])\s*[:：]?|(?<![\u3400-\u9fff])答\s*[:：]")
_CJK = re.compile(r"[\u3400-\u9fff]")
_JSON_VALUE = re.compile(r'\s*"((?:[^"\\\n]|\\.)*)"')  # ZeroEval's {"answer": "..."}
_LATEX_COMMAND = re.compile(r"\s*-?\\(?:d?frac|sqrt|pi|tfrac|text|mathrm|begin|left)")
_CONNECTIVE = re.compile(
    r"\$\$?|\\[()\[\]]|\\q?quad|\band\b|\bor\b|[,;&.]|\\\\|\\(?:implies|Rightarrow)|"
    r"[A-Za-z](?:_\{?\w+\}?)?\s*=|\\text\s*\{[^{}]{0,30}\}|\s+"
)
# a math span worth reading as an answer: a number, a relation or a construct (not `$x$`)
_MATHY = re.compile(r"\d|[<>=]|\\(?:frac|sqrt|pi|infty|begin|[lg]eq?|ne|cup|pm)(?![a-zA-Z])")
# prose after "the answer is", not an answer: "in \\boxed{}", "not given", "that we ..."
_STOP_WORD = re.compile(r"(?i)(?:in|the|a|an|to|that|not|given|as|we|which|this|it|of|for|on|at|by|from|so|"
                        r"then|clear|simple|obvious|below|above|shown|correct|incorrect|wrong|right|just|"
                        r"simply|actually|also|still|here|there|now|twice)\b")
# a bare one-token completion that can be an answer: a number, math, a letter, a number word
_MATHY_TOKEN = re.compile(r"\d|[\\^_=+*/()<>]|^\(?[A-Za-z]\)?$|^(?i:" + "|".join(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred".split()) + ")$")
_MAX_GROUP = 24  # boxes read as one answer at most (a set of roots, not a wall of boxes)
_WINDOW = 300  # characters after a phrase that its answer may span (keeps grading linear in the text)
_SENTENCE_END = re.compile(r"\n|\.(?=\s|$)|;\s|!(?=\s|$)|[。！；]")
# the next exercise a model invents: lm-eval stops generation at "Question:" / "Problem:", a few-shot
# prompt's "Q:"; base models also write "Problem 2.", Minerva's "Subproblem 2:" or a chat turn ("Human:")
_INVENTED = re.compile(r"\n\s*(?:\**(?:now (?:it )?is your turn|your turn|now you try|try this|exercise|question|"
                       r"problem)\b[^\n]{0,40}?:|given this context, can you|(?:q|human|user|问题|题目)\s*\d*\s*[:：]"
                       r"|(?:sub)?problem\s+\d+\b)", re.IGNORECASE)
_ASKS = re.compile(r"[\s.:)-]*(?:find|compute|calculate|determine|what|how|show|prove|solve|evaluate|simplify|express|"
                   r"write|give|suppose|consider|if|let|given)\b", re.IGNORECASE)
_MARKERS = re.compile(r"<eo[ae]>")  # GAOKAO-Bench's end of explanation / end of answer
_JOINER = re.compile(r"[ \t]*,?[ \t]+(?:and|or)[ \t]+|[ \t]*[和或][ \t]*")
_CODE = re.compile(r"```(?!output).*?(?:```|$)", re.DOTALL)  # a program, not its ```output
_CALC = re.compile(r"<<[^<>]*>>")
_BLANK = re.compile(r"\s*_{2,}")


@dataclass(frozen=True)
class Found:
    """The answer a completion commits to: its text (empty: none, `rule` says why) and the
    rule that found it."""

    text: str
    rule: str  # "boxed", "boxes", "answer phrase", "whole", "last math", "equation", "last number"
    restates: bool = False  # an unevaluated expression of the question's own numbers


def last_boxed(text: str) -> str | None:
    """Content of the last non-empty `\\boxed{...}` / `\\fbox{...}` (balanced braces), or None
    (lighteval / lm-eval `remove_boxed(last_boxed_only_string(...))`)."""
    found = boxes(text)
    return found[-1][2] if found else None


def final_answer(completion: str, question: str, fallbacks: tuple[str, ...] = ("equation", "last number"),
                 restate: bool = True, expect: int = 1) -> Found | None:
    """The answer the completion commits to under the contract above, or None. `restate`:
    flag unevaluated expressions of the question's numbers (for a gold that is a number).
    `expect`: how many answers the gold lists (one box per root or part is read as a list)."""
    text = _invented_cut(superscripts(_MARKERS.sub("\n", _CALC.sub("", answer_text(completion)))), question)
    found_operands = operands(question) if restate else set()
    found = _anchored(text, expect)
    if found is not None:
        return Found(found.text, found.rule, bool(found.text) and restates(found.text, found_operands))
    return _fallback(_CODE.sub(" ", text), found_operands, fallbacks)


def _invented_cut(text: str, question: str = "") -> str:
    """The text before the first exercise the model invents after writing something. Not
    an invented exercise: a marker at the very start, one followed by the question's own
    words (a restatement: Minerva's "Subproblem 1: <the question>"), and a numbered one
    ("Question 5:", "Subproblem 1:") that asks nothing (the answer's own part: "Question 5:
    yes, because ...", "Subproblem 1: To find the velocity, we ...")."""
    asked = re.sub(r"\s+", " ", question)
    numbered = len(re.findall(r"(?m)^\s*\(?\d+[.)]", question)) >= 2
    for invented in _INVENTED.finditer(text):
        if not re.search(r"[0-9A-Za-z]|" + _CJK.pattern, text[: invented.start()]):
            continue
        paragraph = text[invented.end() :].split("\n\n", 1)[0]
        restated = re.sub(r"\s+", " ", paragraph[:300].split("?")[0]).strip(" :")  # its question, not the answer after it
        if len(restated) >= 15 and restated in asked:
            continue
        if re.search(r"\d", invented.group()) and (numbered or ("?" not in paragraph and not _ASKS.match(paragraph))):
            continue
        return text[: invented.start()]
    return text


def _anchored(text: str, expect: int = 1) -> Found | None:
    """The last box group or final-answer phrase (see the module docstring); an empty
    Found for an unfinished box or a blank answer slot."""
    if _unclosed_box(text):
        return Found("", "unfinished box")
    box = box_group(text, expect)
    best = (box[0], Found(box[1], box[2])) if box else None
    for match in _PHRASE.finditer(text):
        if box and (match.end() <= box[0] or not _final_phrase(text, match)):
            continue
        if _BLANK.match(text, match.end()):
            best = (match.end(), Found("", "blank answer"))
            continue
        if match.group().startswith(("answer\"", "Answer\"")) and (json_value := _json_value(text, match.end())):
            best = json_value
            continue
        value = _phrase_value(text, match.end(), math_only=box is not None)
        if value is not None and (best is None or value[0] >= best[0]):
            best = (value[0], Found(last_side(value[1]), "answer phrase"))
    return best[1] if best else None


def _json_value(text: str, pos: int) -> tuple[int, Found] | None:
    """(end, Found) of a JSON `"answer": "..."` string (ZeroEval asks for one): the whole
    string is the answer; prose with no number in it states that there is none."""
    match = _JSON_VALUE.match(text, pos)
    if match is None:
        return None
    try:
        value = json.loads(f'"{match.group(1)}"').strip()
    except ValueError:
        return None
    if len(re.findall(r"[A-Za-z]{2,}", value)) >= 3 and not re.search(r"\d", value):
        return match.end(), Found("", "no answer stated")
    value = last_side(value)
    if plain_number(normalize(value)) is None and TIME.fullmatch(value) is None:
        inner = _phrase_value(value, 0, math_only=False)  # "4 (3 onions and 1 potato)" -> 4
        value = inner[1] if inner else value
    return (match.end(), Found(value, "answer phrase")) if value else None


def _unclosed_box(text: str) -> bool:
    """The last box was opened and never closed, with nothing on its line: `&= \\boxed{\\`."""
    opened = [m for m in BOX.finditer(text) if m.group().endswith("{")]
    if not opened or close(text, opened[-1].end()) is not None:
        return False
    return not re.search(r"[A-Za-z0-9]", text[opened[-1].end() :].split("\n", 1)[0])


def _final_phrase(text: str, match: re.Match) -> bool:
    """ "The final answer is", "the answer is", "####", "la réponse est", "答案是": what may
    override an earlier box."""
    before = text[max(0, match.start() - 7) : match.start()].lower()
    return match.group() == "####" or match.group().startswith(("【", "答")) or before.endswith(
        ("final ", "the ", "final **", "**final ", "la "))


def box_group(text: str, expect: int = 1) -> tuple[int, str, str] | None:
    """(end, value, rule) of the last box and the boxes joined to it by connectives; when
    a gold lists `expect` answers, the last `expect` distinct boxes (one box per root or
    part, whatever stands between them)."""
    found = boxes(text)
    if not found:
        return None
    group = [found[-1]]
    for earlier in reversed(found[:-1][-_MAX_GROUP:]):
        gap = text[earlier[1] : group[0][0]]
        if len(gap) > 80 or "\n\n" in gap or len(_CONNECTIVE.sub(" ", gap).split()) > 1:
            break  # one unit word may stand between ("\\boxed{1} papers and \\boxed{2} bins")
        group.insert(0, earlier)
    values = []
    for _, _, content in group:  # "\\boxed{x+11} or \\boxed{11+x}": one answer written twice
        if not any(equivalent(v, content) for v in values):
            values.append(content)
    for _, _, content in reversed(found[: -len(group)][-_MAX_GROUP:]):
        if len(values) >= min(expect, _MAX_GROUP):
            break
        if not any(equivalent(v, content) for v in values):
            values.insert(0, content)
    return group[-1][1], ", ".join(values), "boxed" if len(values) == 1 else "boxes"


def _phrase_value(text: str, pos: int, *, math_only: bool) -> tuple[int, str] | None:
    """(end, value) of the answer right after a phrase, or None when none starts there."""
    pos = FILLER.match(text, pos).end()
    latex = LATEX_START.match(text, pos)
    if (box := BOX.match(text, latex.end() if latex else pos)) is not None:
        group = box_group(text[: _box_end(text, box)])
        return (group[0], group[1]) if group else None
    if latex and (inner := latex_env(text, latex)) is not None:
        return (latex.end() + len(inner), inner.strip()) if inner.strip() else None
    if text.startswith(("\\$", "$"), pos):  # "$36": money
        pos += 2 if text.startswith("\\$", pos) else 1
    if (time := TIME.match(text, pos)) is not None:
        return time.end(), time.group()
    if (mixed := MIXED.match(text, pos)) is not None and int(mixed.group(2)) < int(mixed.group(3)):
        return mixed.end(), mixed.group()  # 1 1/2
    if (spaced := SPACED.match(text, pos)) is not None:
        return spaced.end(), spaced.group()  # 1 000
    if _LATEX_COMMAND.match(text, pos):
        end = _SENTENCE_END.search(text, pos, pos + _WINDOW)
        stop = end.start() if end else min(len(text), pos + _WINDOW)
        return (stop, text[pos:stop].strip().rstrip("$").strip()) if text[pos:stop].strip() else None
    if (match := VALUE.match(text, pos)) is not None:
        end, value = number_led(text, match)
        return _plain_math(text, match.start(), end) or _joined(text, end, value)
    return None if math_only else _text_value(text, pos)


def _plain_math(text: str, start: int, end: int) -> tuple[int, str] | None:
    """A number that goes on as plain-text math to the end of its sentence, with no word in
    it: "1 - 2/π", "e^(-π/4) * (√2 / 2)" (not "12.3 m/s^2": a unit after a space)."""
    if not re.match(r"[ \t]*(?:[/*^]|\\cdot|\\times)[ \t]*(?:π|√|\\|\(|[A-Za-z0-9])", text[end:]):
        return None
    stop = _SENTENCE_END.search(text, end, end + _WINDOW)
    span = text[start : stop.start() if stop else min(len(text), end + _WINDOW)].strip().rstrip("$").strip()
    return None if re.search(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", "", span)) else (start + len(span), span)


def _joined(text: str, end: int, value: str) -> tuple[int, str]:
    """A number followed by more numbers joined by "and" / "or" / 和 is a list: "2 and 3" ->
    `2, 3` (not "7 and 10 = 17", which number_led reads as its result)."""
    values = [value]
    while (joiner := _JOINER.match(text, end)) is not None and (more := VALUE.match(text, joiner.end())):
        if re.match(r"[ \t]*(?:=|[A-Za-z]*\s*=|(?:is|are|was|were|equals)\b)", text[more.end():]):
            break  # "15 and 6 is 9": a remark after the answer, not a second answer
        values.append(clean(more))
        end = more.end()
    return end, ", ".join(values)


def _box_end(text: str, box: re.Match) -> int:
    end = close(text, box.end()) if box.group().endswith("{") else None
    return (end + 1) if end is not None else len(text)


def _text_value(text: str, pos: int) -> tuple[int, str] | None:
    """Words or plain-text math up to the end of the sentence (`x^2+2x+1`, `odd`, `(C)`),
    or the number a longer sentence states ("The total volume is 72 inches^3")."""
    end = _SENTENCE_END.search(text, pos, pos + _WINDOW)
    stop = end.start() if end else min(len(text), pos + _WINDOW)
    value = text[pos:stop].strip().strip("*").strip().strip("\"'`").strip()
    if re.fullmatch(r"\(?[A-Z]\)?(?:\s*[,、和]\s*\(?[A-Z]\)?)*", value) or re.match(r"\([A-Z]\)(?:\s|$)", value):
        return stop, value  # a letter answer: "A", "A, C", "(C) 12" (not the article in "a total of 5")
    if _CJK.search(value) and (numbers := list(VALUE.finditer(value))):
        return stop, clean(numbers[-1])  # "他看了3页" (he read 3 pages): its number
    if len(_CJK.findall(value)) > 12 or re.search(r"[，：]", value):
        return None  # a sentence in Chinese that opens a derivation ("首先，我们解这个方程组："): no answer
    if not value or not re.search(r"[A-Za-z0-9]|" + _CJK.pattern, value) or _STOP_WORD.match(value):
        return None
    words = len(re.findall(r"[A-Za-z]{2,}", value))
    if len(value) <= 60 and (words <= 1 or words <= 3 and not VALUE.search(value)):
        return stop, value
    stated = _stated_number(value)
    return (stop, stated) if stated is not None else None


def _stated_number(sentence: str) -> str | None:
    """The number a sentence states: the one after its last "is" / "are" / "=", else its
    only number ("Harald sold 8,000 copies" -> 8,000). None for a sentence holding math or
    another final-answer phrase (that one is read itself)."""
    if re.search(r"\$|\\\(|\\\[|(?i:answer)", sentence):
        return None
    verb = list(re.finditer(r"\b(?:is|are|was|were)\b|=", sentence))
    if verb and (match := VALUE.search(sentence, verb[-1].end())) is not None:
        return clean(match)
    found = list(VALUE.finditer(sentence))
    return clean(found[0]) if len(found) == 1 else None


def _fallback(text: str, operands: set[str], fallbacks: tuple[str, ...]) -> Found | None:
    """The fallbacks of the module docstring, for a text without an anchored answer."""
    whole = _whole(text)
    if whole is not None:
        return Found(whole.text, whole.rule, restates(whole.text, operands))
    if "last math" in fallbacks and cut_off(text):
        return Found("", "cut off inside math")
    number = next(((end, value) for end, value in _last_number(text) if not restates(value, operands)), None)
    found = [(end, rule, value) for rule, finder in (("last math", _last_math), ("equation", _equation))
             if rule in fallbacks for end, value in finder(text)[:1]]
    if found:
        end, rule, value = max(found, key=lambda f: f[0])
        if rule == "last math" and number is not None and number[0] > end and "last number" in fallbacks:
            return Found(number[1], "last number")
        return Found(value, rule, restates(value, operands))
    if "last number" in fallbacks and number is not None:
        return Found(number[1], "last number")
    return None


def _whole(text: str) -> Found | None:
    """A completion that is nothing but its answer: `1 000`, `$-\\frac{10}{9}$`, `$odd$`."""
    body = text.strip().strip("\"'`").rstrip(".").strip()
    spans = math_spans(body)
    if len(spans) == 1 and spans[0][0] == len(body) and body.startswith(("$", "\\(", "\\[")):
        inner = spans[0][1]
    elif len(body) <= 80 and "\n" not in body and _one_value(body):
        inner = body
    else:
        return None  # a lone word ("Johnle.") is not an answer; `$odd$` or `\\boxed{odd}` is
    value = last_side(inner)
    return Found(value, "whole") if re.search(r"[A-Za-z0-9]", value) else None


def _one_value(body: str) -> bool:
    """One value on one line: no sentence, no chain of equations (`13 + 7 = 20` is read by
    the equation rule), and one token only if it is math (`2x`, `\\frac12`, `E`, `four`; not
    `7twQ`, whose number the last-number rule reads)."""
    bare = re.sub(r"\\[A-Za-z]+", "", body)
    if _CJK.search(body) and not re.fullmatch(r"-?[\d.,/]+\s*[\u3400-\u9fff]{1,4}", body):
        return False  # a sentence in Chinese ("所以一共有858颗"): its number is read by the last-number rule
    if re.search(r"(?<![<>!\\])=(?![=>])", body) and not re.search(r"[A-Za-z]", body.split("=")[0]):
        return False
    if re.search(r"[@&;~?!|\"'<>]|[=+\-*/^]$", body):
        return False  # junk, or a chain left open (`.17 + 16 =`)
    if not re.search(r"\s", body):
        if _MATHY_TOKEN.fullmatch(body) is not None:  # `E`, `(C)`, `four`
            return True
        if re.search(r"[A-Za-z]", bare) and not re.search(r"[\\{}^_+*/=]", body):
            return False  # letters glued to a number without math (`7twQ`, `7H1H`): the last number reads it
        return bool(re.search(r"\d", body)) and len(body) <= 40 and not re.search(r"[A-Za-z]{2,}", bare)
    return not re.search(r"[A-Za-z]{2,}", bare)


def _last_math(text: str) -> list[tuple[int, str]]:
    """The math spans and bold values worth reading (`$x \\geq 5$`, `**(8, -2)**`), latest first."""
    spans = [(end, inner) for end, inner in math_spans(text) if _MATHY.search(inner)]
    spans += [(m.end(), m.group(1).strip()) for m in re.finditer(r"\*\*([^*\n]{1,60})\*\*", text)
              if _MATHY.search(m.group(1)) and not re.search(r"[A-Za-z]{3,}", m.group(1))]
    return [(end, last_side(inner)) for end, inner in sorted(spans, reverse=True)]


def _equation(text: str) -> list[tuple[int, str]]:
    """The value after the last `=` / "equals" that starts with a number."""
    for match in reversed(list(EQUALS.finditer(text))):
        pos = FILLER.match(text, match.end()).end()
        opener = LATEX_START.match(text, pos)
        pos += 1 if text.startswith("$", pos) and opener and latex_env(text, opener) is None else 0
        value = VALUE.match(text, pos)
        if value is not None:
            end, found = number_led(text, value)
            return [(end, last_side(found))]
    return []


def _last_number(text: str) -> list[tuple[int, str]]:
    """The numbers and number tuples of the text, latest first."""
    text = frac_to_slash(text)
    found = [(m.end(), clean(m)) for m in VALUE.finditer(text)]
    found += [(m.end(), m.group()) for m in TUPLE.finditer(text)]
    found += [(m.end(), m.group()) for m in MIXED.finditer(text) if int(m.group(2)) < int(m.group(3))]
    return sorted(found, reverse=True)
