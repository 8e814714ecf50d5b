"""Scanning a math completion: numbers, math spans, boxes, equations (for math_answer).

    values = [m.group("v") for m in VALUE.finditer("3 + 4 = 7 apples")]   # ["3 + 4", "7"]
    math_spans("so $x \\geq 5$ and $6 for pens")                          # [(14, "x \\geq 5")]

Currency: a `$` before a number, with no closing `$` on its line or with words inside
(`$6 for pencils and $3`), is money, not LaTeX. Numbers: `1,000` and `1 000` (thousands),
`1000,99` (a decimal comma), `.4`, scientific notation (`3e8`, `9.98 x 10^-25`,
`3 \\times 10^{8}`), digits glued to Chinese text (`858颗`), and an arithmetic chain of them
(`3 + 4`), as one value; `MIXED` finds a mixed number in plain text (`1 1/2`).
"""

from __future__ import annotations

import math
import re

__all__ = [
    "VALUE", "MIXED", "SPACED", "TIME", "LATEX_START", "EQUALS", "FILLER", "BOX", "latex_env", "math_spans", "boxes", "close",
    "clean", "last_side", "numbers", "operands", "restates", "number_led", "frac_to_slash", "cut_off", "superscripts",
]

_SCI = (r"(?:[eE][-+]?\d+(?![\w.])|[ \t]*(?:\\times|\\cdot|×|x|\*)[ \t]*10[ \t]*\^[ \t]*"
        r"(?:\{[ \t]*[-+−]?\d+[ \t]*\}|\([ \t]*[-+−]?\d+[ \t]*\)|[-+−]?\d+))")  # 3e8, 3 \times 10^{8}, 1.28 x 10^(-6)
_NUM = (r"(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?:[\u00a0\u202f]\d{3})+(?![\d/,-])|\d+)(?:[.,]\d+)?(?:" + _SCI + r")?"
        r"|\.\d+)")
MIXED = re.compile(r"(?<![\d.,/])(\d+)[ \t]+([1-9]\d*)/(\d+)(?![\d/]|\.\d)", re.ASCII)  # 1 1/2 (a proper fraction after a whole)
_OP = r"(?:[-+*/×÷^]|\\times|\\cdot|\\div)"
VALUE = re.compile(  # a number or an arithmetic chain of numbers on one line; digits may touch CJK text (858颗)
    rf"(?<![A-Za-z0-9_.\\])(?P<v>\(?-?(?:{_NUM})\)?(?:[ \t]*{_OP}[ \t]*\(?-?(?:{_NUM})\)?)*)(?P<pct>[ \t]*\\?%)?(?![\d])",
    re.ASCII,  # ASCII digits only: a Malayalam ൪ in garbage is no 4
)
# thousands separated by plain spaces (`1 000`), read only as an answer that ends its sentence: elsewhere
# `= 56 108` is 56 and then garbage (typographic spaces, U+00A0 and U+202F, are read everywhere)
SPACED = re.compile(r"(?<![\d.,])\d{1,3}(?: \d{3})+(?=[ \t]*(?:$|\n|[.。;!](?:\s|$)))", re.ASCII)
TUPLE = re.compile(rf"[(\[]\s*-?(?:{_NUM})(?:\s*,\s*-?(?:{_NUM}))+\s*[)\]]", re.ASCII)  # (1, 2), [0, 4]
TIME = re.compile(r"(?i)(?<![\d:])\d{1,2}:\d{2}(?:\s*[ap]\.?\s?m\b\.?)?(?![\d:])")
LATEX_START = re.compile(r"\s*(?:\$\$?|\\\(|\\\[)")
EQUALS = re.compile(r"=|\bequals\b|\bis equal to\b")
FILLER = re.compile(r"\s*(?:\*\*|[\"'`:])?\s*(?:(?:(?:definitely|clearly|indeed|simply|just|exactly|thus|approximately|"
                    r"about|roughly|around)\b|≈|~)\s*)?")
BOX = re.compile(r"\\(?:boxed|fbox)\s*\{|\\boxed\s+(?=[^\s{\\])")
# more math right after a number, with no space: `2x`, `3\\sqrt{2}`, `5^2`, `2\\pi` (not `5cm`, `18\\text{ dollars}`)
_GLUED = re.compile(r"[A-Za-z](?![A-Za-z])|\\(?:sqrt|pi|frac|dfrac|cdot|times|infty)(?![a-zA-Z])|[\^_({π√]")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
_IN_WORDS = re.compile(rf"(?:[ \t]+(?:and|plus|minus|times)[ \t]+(?:{_NUM}))+(?=[ \t]*=)")
_OPENER = re.compile(r"\$\$?|\\\(|\\\[")


_SUPERSCRIPT = re.compile("(?<=[0-9)}])[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")  # after a number only: `m²` is a unit
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")


def superscripts(text: str) -> str:
    """Unicode superscripts after a number as TeX powers: `10⁻⁷` -> `10^{-7}` (`m²` stays)."""
    return _SUPERSCRIPT.sub(lambda m: "^{" + m.group().translate(_SUPERSCRIPT_DIGITS) + "}", text)


def latex_env(text: str, start: re.Match) -> str | None:
    """The inside of a `$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` opened at `start`, or
    None for a currency sign."""
    opener = start.group().strip()
    end = _find_close(text, {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}[opener], start.end())
    inner = text[start.end() : end if end >= 0 else len(text)]
    if opener == "$":
        words = re.search(r"(?<![\\a-zA-Z{])[a-zA-Z]{3,}", re.sub(r"\\text\s*\{[^{}]*\}", "", inner))
        if end < 0 or ("\n" in inner and "\\begin{" not in inner) or (re.match(r"\s*\d", inner) and words):
            return None  # a `$` span holds one line, unless it is an environment (`\begin{pmatrix} 1 \\\n 2 ...`)
    return inner


def _find_close(text: str, closer: str, start: int) -> int:
    """The next `closer` at or after `start` that is not an escaped `\\$`, or -1."""
    end = text.find(closer, start)
    while end > 0 and closer.startswith("$") and text[end - 1] == "\\":
        end = text.find(closer, end + 1)
    return end


def math_spans(text: str) -> list[tuple[int, str]]:
    """(end, inside) of each closed math span, left to right; currency signs skipped."""
    spans, pos = [], 0
    while (match := _OPENER.search(text, pos)) is not None:
        inner = latex_env(text, match)
        stop = match.end() + len(inner or "") + len(match.group())
        if inner is None or stop > len(text):
            pos = match.end()
            continue
        spans.append((stop, inner.strip()))
        pos = stop
    return spans


def boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every non-empty `\\boxed{}` / `\\fbox{}` / `\\boxed 5`, in
    order; a box never closed holds what its line holds (`\\boxed{2^3 = 12`)."""
    out = []
    for match in BOX.finditer(text):
        if match.group().endswith("{"):
            end = close(text, match.end())
            if end is None:
                line = text.find("\n", match.end())
                end = line if line >= 0 else len(text)
                content, stop = text[match.end() : end].strip(), end
                content = content if re.search(r"[A-Za-z0-9]", content) else ""
            else:
                content, stop = text[match.end() : end].strip(), end + 1
        else:
            token = re.match(r"[^\s$.,]+", text[match.end() :])
            content, stop = token.group(), match.end() + token.end()
        if content:
            out.append((match.start(), stop, content))
    return out


def close(text: str, start: int) -> int | None:
    """The index of the `}` closing a brace opened just before `start`."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return None


def number_led(text: str, match: re.Match) -> tuple[int, str]:
    """(end, value) of a value that starts with a number: the number (and its result after
    `=`), or the whole token when more math is glued to it (`2x`, `3\\sqrt{2}`, `5^2`)."""
    end = match.end()
    if _GLUED.match(text, end):
        token = re.match(r"[^\s,;]+", text[match.start() :]).group().rstrip(".$")
        return match.start() + len(token), token
    if (words := _IN_WORDS.match(text, end)) is not None:  # "7 and 10 = 17": the result
        end = words.end()
    then = EQUALS.match(text, FILLER.match(text, end).end())
    if then:
        after = FILLER.match(text, then.end()).end()
        result = VALUE.match(text, after + (1 if text.startswith("$", after) else 0))
        if result is not None:
            return number_led(text, result)
    return end, clean(match)


def clean(match: re.Match) -> str:
    """A matched value without the sentence's parentheses, with its `%`."""
    value = match.group("v").strip()
    if value.count("(") != value.count(")"):
        value = value.strip("()").strip()
    elif value.startswith("(") and value.endswith(")") and value.count("(") == 1:
        value = value[1:-1].strip()
    return value + ("%" if match.group("pct") else "")


def last_side(value: str) -> str:
    """An arithmetic chain answers with its last side: "4 + 20 = 40" -> "40", "14 + 17 ≈ 31.0"
    -> "31.0". An equation with letters (`y = 2x + 3`, `a_3 = 2`) is kept whole: the
    comparison decides."""
    sides = [s.strip() for s in re.split(r"(?<![<>!\\])=(?![=>])|\\approx\b|≈", value)]
    sides = [s for s in sides if s]
    first = re.sub(r"\\(?:times|cdot|frac|dfrac|div|left|right)", "", sides[0]) if sides else ""
    if len(sides) < 2 or re.search(r"[A-Za-z]", first):
        return value.strip()
    return sides[-1]


def numbers(text: str) -> list[str]:
    return [n.replace(",", "") for n in re.findall(r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?", text)]


def operands(question: str) -> set[str]:
    """The question's numbers and its fractions (`3/5`, `\\frac{3}{5}` as `3/5`)."""
    slashed = frac_to_slash(question)
    return set(numbers(question)) | set(re.findall(r"\d+\s*/\s*\d+", slashed.replace(" ", "")))


def frac_to_slash(text: str) -> str:
    """`-\\frac{10}{9}` -> ` -10/9`, so a number scan reads a fraction as one value."""
    return re.sub(r"(-?)\\[dt]?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}", r" \1\2/\3", text)


def restates(value: str, operands: set[str]) -> bool:
    """An unevaluated arithmetic expression (an operator between plain numbers, no letters)
    whose numbers all come from the question: `13 + 14` for "What is 13 + 14?". A fraction in
    lowest terms is a value."""
    body = value.replace("\\times", "*").replace("\\cdot", "*").replace("\\div", "/")
    body = frac_to_slash(body).replace(" ", "")
    if (fraction := re.fullmatch(r"-?(\d+)/(\d+)", body)) and math.gcd(*map(int, fraction.groups())) == 1:
        return False  # `\\frac{6}{5}` in lowest terms is a value, `6/3` is still a division to do
    if re.search(r"[A-Za-z\\]", body) or not re.search(rf"[\d)]{_OP}\(?-?\d", body.lstrip("(-")):
        return False
    found = numbers(body)
    return len(found) >= 2 and all(n in operands for n in found)


def cut_off(text: str) -> bool:
    """Text that stops inside LaTeX: an open `\\[`, `\\(` or `$$`, an open brace, or a
    command at its very end (`= \\frac{10628`, `\\boxed`)."""
    tail = text.rstrip()
    if not tail:
        return False
    for opener, closer in (("\\[", "\\]"), ("\\(", "\\)"), ("$$", "$$")):
        last = tail.rfind(opener)
        if last >= 0 and tail.find(closer, last + len(opener)) < 0 and (opener != "$$" or tail.count("$$") % 2):
            return len(_WORD.findall(tail[last:])) < 3  # prose after a stray `$$` is no cut formula
    window = tail[-400:]
    return window.count("{") > window.count("}") or bool(re.search(r"\\[A-Za-z]*$", tail))
