"""When two math answers are the same answer: normalisation, then equivalence.

    equivalent("\\frac12", "0.5")                  # True: shorthand, then exact numbers
    equivalent("\\$18", "18.00")                   # True: currency dropped
    equivalent("(0,9)", "[0,9)")                   # False: an interval keeps its brackets
    equivalent("10, 4, -2", "4, 10, -2")           # True: a bare list is a set of answers

Both sides are normalised the same way (`normalize`), following hendrycks' MATH
`_strip_string` (math_equivalence.py: `\\left`/`\\right`, `\\dfrac`, `^\\circ`, `\\$`,
units after `\\text{ `, `\\%`, `.5` -> `0.5`, `\\frac12`, `\\sqrt3`), Minerva's
`normalize_final_answer` (lm-eval `minerva_math/utils.py`: `\\text{and}` -> `,`, thin
spaces, `{,}` thousands, `\\text{...}` unwrapped) and Qwen2.5-Math's `strip_string`
(`evaluation/parser.py`: a trailing `\\text{unit}`, `%`, `\\{ \\}`, `\\le`/`\\leq`). Then the
first of these that decides:

1. the normalised strings are equal (spaces ignored);
2. times (`4:30 p.m.` = `4:30 PM`, `8:34 P.M.` = `20:34`), text and letter answers
   (`\\text{(C)}` = `C`, `\\text{odd}` = `odd`, case-insensitive; Chinese text as written);
3. numbers, exactly (`0.5` = `\\frac{1}{2}` = `1/2`, `1\\frac14` = `5/4` = `1 1/4`), or agreeing
   to 6 decimal places as math-verify's `float_rounding=6` (`0.333333` = `\\frac13`; values
   that round to 0 there agree to a relative 1e-6: `1e-8` is not `2e-8`); scientific notation
   is a number (`3e8` = `3 \\times 10^8`), and a gold written in it is known to its
   significant digits (`4.46 \\times 10^{33}` answers `4.5e33`; math_forms.same_significant);
   a decimal gold of three or more significant digits also accepts an exact answer (a
   fraction, a radical, pi) that rounds to it (`\\frac{\\pi}{3}` answers `1.0472`);
4. structure: a bare comma list is a set (every element matched once, in any order:
   Math-Verify's FiniteSet; hendrycks compares the strings in order), a bracketed tuple
   or interval is compared element by element with its brackets, and a pair written once
   in parentheses and once bare is compared in order (`(1000, 10)` answers `10^{3},10`; a
   set in braces never is); solutions written as named values (`p=5,q=2;p=7,q=2`) are a set
   of tuples in the gold's order of names; a gold `y = ...` or
   `x = ...` with a one-variable left side also accepts its right side alone (NeMo-Skills'
   `math_equal` and Qwen2.5-Math's `math_equal`), `y = ...` and `f(x) = ...` are compared by
   their right sides, an answer `k = 5` to a gold that is no equation is read by its last
   side, and two equations are the same when they have the same roots on seeded random
   lines through their variables (math_forms.same_equation, no sympy);
5. constant expressions by value, without sympy (evalkit.tasks.math_value: `2\\sqrt{3}` =
   `\\sqrt{12}`, `e` is Euler's number), to 6 decimal places as above; with the imaginary
   unit, as complex values (`i(2-i)` = `1+2i`);
6. math-verify (an equation within one second to parse and to verify, else unequal): `verify(parse(gold), parse(answer))`, gold first, defaults
   (`float_rounding=6, numeric_precision=15, strict=True`), LaTeX parsed with the
   reward-safe normalisation of Math-Verify's README (`malformed_operators=False,
   nits=False`).

Chosen where the conventions differ (each has a test row in tests/test_math_equal.py):
a percentage is its number (MATH's convention: `25\\%` = `25`; `0.25` is not `25\\%`,
where Qwen2.5-Math's `include_percentage` accepts x/100 and x*100); `\\text{13}` is 13
(Math-Verify #37 keeps it a symbol); a decimal comma (`1000,99` = 1000.99, as
Math-Verify) is read only when the gold is one plain number, so `2,3` stays a list.

Limits: answers in words ("twenty-seven") are not numbers; text answers must match as
text after case and `\\text{}` are dropped (`even function` is not `even`).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from evalkit.tasks.math_forms import (
    clock,
    complex_value,
    named_groups,
    same_equation,
    same_significant,
    same_time,
    scientific,
)
from evalkit.tasks.math_text import superscripts
from evalkit.tasks.math_value import braced, value

__all__ = ["normalize", "equivalent", "plain_number", "split_top", "is_prose", "answer_count"]

_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
                                                      "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100}
_THIN = re.compile(r"\\[,;:!]|\\q?quad\b|\\displaystyle|\\(?:big|Big|bigg|Bigg)(?![a-zA-Z])")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![a-zA-Z])")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ\b|°|\\degree\b")
_PERCENT = re.compile(r"\\?%|\\text\{\s*percent\s*\}|\s+percent\b|\s+pct\b")
_AND = re.compile(r",?\s*\\text\{\s*,?\s*(?:and|or)\s*\}\s*|,?\s+and\s+|(?<![A-Za-z\\])\s*or\s*(?![A-Za-z])|\s*[和或及]\s*")
_WRAP = re.compile(r"\\(?:text|textbf|textit|textnormal|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_UNIT = re.compile(r"^(?P<v>.*?\S)\s*\\(?:text|mbox|textnormal|mathrm)\s*\{\s*[^{}]*\}(?:\s*\^\s*\{?-?[1-9]\}?)?\s*\.?$")
_WORDS_AFTER_NUMBER = re.compile(r"^(?P<v>-?[\d.,/]*\d(?:\s*\\pi)?)\s+(?:[A-Za-z]{2,}\.?\s*)+(?:\^\s*\{?[23]\}?)?$")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_SPACE_THOUSANDS = re.compile(r"-?\d{1,3}(?: \d{3})+(?:\.\d+)?")
_CJK_UNIT = re.compile(r"^(?P<v>-?[\d.,/]*\d(?:\s*\\pi)?)\s*[\u3400-\u9fff]{1,4}$")  # 858颗, 3页, 12元
_MIXED = re.compile(r"(?<![\d.,/])(\d+)\s+(\d+)\s*/\s*(\d+)(?![\d/.])")  # 1 1/2
# one spelling for characters that models write in more than one way
_CHARACTERS = str.maketrans({"π": "\\pi ", "√": "\\sqrt", "−": "-", "×": "\\times ", "·": "\\cdot ", "，": ",",
                             "（": "(", "）": ")", "：": ":", "；": ";", "、": ",", "\u00a0": " ", "\u202f": " ",
                             "\u2009": " "})
_LETTER = re.compile(r"^\(?([A-Z])\)?$")
_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_RELATION = re.compile(r"(?<![<>!\\])=(?!=)")
_SIMPLE_LHS = re.compile(r"^(?:[A-Za-z](?:_\{?\w+\}?)?(?:\(\w\))?|\\[a-z]+)$")
_FUNCTION_LHS = re.compile(r"^(?:y|[a-z]\([a-z]\))$")  # y, f(x), y(x), g(t): a function named by its value


def normalize(text: str) -> str:
    """The normalised form of an answer (module docstring), without its spaces removed."""
    s = superscripts(text.strip().replace("\n", " ").translate(_CHARACTERS))
    s = _MIXED.sub(_mixed, s)
    s = _LEFT_RIGHT.sub("", s)
    s = re.sub(r"\\[dtc]frac", r"\\frac", s)
    s = s.replace(",\\!", "").replace("\\!", "")  # "10,\\!000" (Minerva drops ",\\!")
    s = re.sub(r"(?<!\\)\\ ", " ", _THIN.sub("", s)).replace("~", " ")
    s = re.sub(r"\\begin\{array\}\{[^{}]*\}", r"\\begin{pmatrix}", s).replace("\\end{array}", "\\end{pmatrix}")
    s = re.sub(r"[bvBV]matrix\b", "pmatrix", s)
    s = re.sub(r"\{\s*,\s*\}", "", s).replace("\\{", "{").replace("\\}", "}")
    s = _DEGREES.sub("", s)
    s = s.replace("\\$", "").replace("$", "").replace("€", "").replace("£", "")
    s = _PERCENT.sub("", s)
    s = _AND.sub(", ", s)
    s = _strip_units(s)
    s = _WRAP.sub(r"\1", s)
    s = _fix_shorthand(s)
    s = re.sub(r"(^|[\s{(\[,=-])\.(\d)", r"\g<1>0.\2", s)
    s = re.sub(r"\\(?:leq|leqslant)\b", r"\\le", s)
    s = re.sub(r"\\(?:geq|geqslant)\b", r"\\ge", s)
    s = re.sub(r"\\(?:neq)\b", r"\\ne", s).replace("≤", "\\le").replace("≥", "\\ge")
    s = s.strip().rstrip(".\\").strip()  # "185\\" (NeMo-Skills strips a trailing backslash)
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    elif _SPACE_THOUSANDS.fullmatch(s):
        s = s.replace(" ", "")
    return s


def _mixed(match: re.Match) -> str:
    """`1 1/2` -> `1\\frac{1}{2}` (a mixed number written in plain text); `3 5/4` stays."""
    whole, num, den = match.groups()
    return f"{whole}\\frac{{{num}}}{{{den}}}" if 0 < int(num) < int(den) else match.group()


def _strip_units(s: str) -> str:
    """`85\\text{ feet}` -> `85`, `15\\mbox{ cm}^2` -> `15`, `5 apples` -> `5`: a unit after
    a value (hendrycks' `_remove_right_units`, Qwen2.5-Math's trailing `\\text{...}`)."""
    for _ in range(3):  # "12\\text{ square}\\text{ feet}", "15000 \\text{ kcal m}^{-2} \\text{ yr}^{-1}"
        match = _UNIT.match(s)
        if match and clock(_WRAP.sub(r"\1", s)) is None:
            s = match.group("v").strip()
    match = _WORDS_AFTER_NUMBER.match(s) or _CJK_UNIT.match(s)
    return match.group("v") if match else s


def _fix_shorthand(s: str) -> str:
    """`\\frac12` -> `\\frac{1}{2}`, `\\frac{360}7` -> `\\frac{360}{7}`, `\\sqrt3` -> `\\sqrt{3}`:
    TeX's one-token arguments (hendrycks `_fix_fracs`/`_fix_sqrt`, Minerva's shorthand)."""
    out, i = [], 0
    while i < len(s):
        match = re.compile(r"\\(frac|sqrt)(?![a-zA-Z])").search(s, i)
        if match is None:
            out.append(s[i:])
            break
        out.append(s[i : match.end()])
        j = match.end()
        count = 2 if match.group(1) == "frac" else 1
        if match.group(1) == "sqrt" and s[j : j + 1] == "[":  # \sqrt[3]{x}
            close = s.find("]", j)
            if close > 0:
                out.append(s[j : close + 1])
                j = close + 1
        for _ in range(count):
            arg, j = _tex_argument(s, j)
            if arg is None:
                break
            out.append("{" + arg + "}")
        i = j
    return "".join(out)


def _tex_argument(s: str, j: int) -> tuple[str | None, int]:
    """One TeX argument at s[j:]: a braced group, a control word, or one character."""
    k = j
    while k < len(s) and s[k] == " ":
        k += 1
    if k >= len(s):
        return None, j
    if s[k] == "{":
        inner, end = braced(s, k)
        return (inner, end) if inner is not None else (None, j)
    if s[k] == "\\":
        word = re.match(r"\\[a-zA-Z]+", s[k:])
        return (word.group(), k + word.end()) if word else (None, j)
    if s[k].isalnum():
        return s[k], k + 1
    return None, j


def _key(s: str) -> str:
    return s.replace(" ", "").replace("\\,", "")


def split_top(s: str) -> list[str]:
    """Split at commas outside brackets and braces: `1, (2, 3)` -> [`1`, `(2, 3)`]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in ",;" and depth == 0:
            parts.append(s[start:i].strip())
            start = i + 1
    parts.append(s[start:].strip())
    return [p for p in parts if p]


def plain_number(s: str, *, decimal_comma: bool = False) -> Fraction | None:
    """The exact value of a plain number: `-3`, `2.50`, `.4`, `7/2`, `\\frac{7}{2}`,
    `1\\frac{1}{4}` (a mixed number), `1000,99` with `decimal_comma`, a number word up to
    twenty and the tens (`four`, `ninety`), scientific notation (`3e8`, `6\\times10^{-3}`); else None."""
    s = _key(s)
    if s.lower() in _WORDS:  # "Four" (Qwen2.5-Math converts word numbers with word2number)
        return Fraction(_WORDS[s.lower()])
    if decimal_comma and re.fullmatch(r"-?\d+,(?:\d{1,2}|\d{4,})", s):
        s = s.replace(",", ".")
    if re.fullmatch(r"[-+]?(?:\d+\.?\d*|\.\d+)", s):
        return Fraction(s)
    match = re.fullmatch(r"(-?)(?:(\d+)/(\d+)|\\frac\{(\d+)\}\{(\d+)\})", s)
    if match:
        num, den = (match.group(2), match.group(3)) if match.group(2) else (match.group(4), match.group(5))
        if int(den) == 0:
            return None
        return Fraction(int(num), int(den)) * (-1 if match.group(1) else 1)
    match = re.fullmatch(r"(-?)(\d+)\\frac\{(\d+)\}\{(\d+)\}", s)
    if match and int(match.group(4)) > 0 and int(match.group(3)) < int(match.group(4)):
        value = int(match.group(2)) + Fraction(int(match.group(3)), int(match.group(4)))
        return -value if match.group(1) else value
    sci = scientific(s)  # 3e8, 6\times10^{-3}, 10^{-8}
    return sci[0] if sci else None


def _numbers_equal(a: Fraction, b: Fraction) -> bool:
    """Exactly, or to 6 decimal places (math-verify's `float_rounding=6`) when either side
    is not an integer: `0.333333` = 1/3, `0.3333` != 1/3, integers only exactly."""
    if a == b:
        return True
    if a.denominator == 1 and b.denominator == 1:
        return False
    try:
        return _close(float(a), float(b))
    except OverflowError:  # a value past a float's range is equal only exactly
        return False


def _close(a: float, b: float) -> bool:
    """Equal to 6 decimal places, or, for values that round to 0 there (`1e-8`), to a
    relative 1e-6: `1e-8` is not `2e-8`, where math-verify's rounding makes them equal."""
    if round(a, 6) != round(b, 6):
        return False
    return round(a, 6) != 0 or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-300)


def _text(s: str) -> str | None:
    """A text answer (letters, spaces and light punctuation, no math), lowercased; a list
    of single letters (`A, D`) in sorted order."""
    bare = s.replace("\\", "")
    if re.fullmatch(r"[\u3400-\u9fff\s,.。]+", bare) and re.search(r"[\u3400-\u9fff]", bare):
        return re.sub(r"[\s,.。]+", "", bare)  # a text answer in Chinese: 分层抽样
    if re.search(r"[\d^_{}=<>+*/]", bare) or not re.search(r"[A-Za-z]", bare):
        return None
    if re.fullmatch(r"\(?[A-Za-z]\)?(?:\s*,\s*\(?[A-Za-z]\)?)+", bare.strip()):
        return "".join(sorted(re.sub(r"[^A-Za-z]", "", bare).lower()))
    return re.sub(r"[\s,.()]+", "", bare).lower()


def is_prose(s: str) -> bool:
    """A gold that is a sentence, not an answer: five or more words and no math."""
    words = _PROSE_WORD.findall(s)
    return len(words) >= 5 and not re.search(r"[\d\\^=]", s)


def _letter(s: str) -> str | None:
    """A multiple-choice letter: `C`, `(C)`, `\\text{(C)}`, `(C) 12` -> `C`."""
    match = _LETTER.match(s.strip()) or re.match(r"^\(([A-Z])\)\s", s.strip())
    return match.group(1) if match else None


def _bracketed(s: str) -> tuple[str, list[str], str] | None:
    """A tuple or interval `(a, b)`, `[a, b)` whose brackets enclose the whole answer."""
    if len(s) < 2 or s[0] not in "([" or s[-1] not in ")]":
        return None
    depth = 0
    for i, ch in enumerate(s):
        depth += 1 if ch in "([{" else -1 if ch in ")]}" else 0
        if depth == 0 and i < len(s) - 1:
            return None  # "(1, 2) \\cup (3, 4)": more than one group
    parts = split_top(s[1:-1])
    return (s[0], parts, s[-1]) if len(parts) >= 2 else None


def _sides(s: str) -> list[str]:
    return [p.strip() for p in _RELATION.split(s)]


def equivalent(gold: str, answer: str) -> bool:
    """Whether `answer` is the same answer as `gold` (module docstring); both raw text. A gold
    that lists forms of one answer with `##` (GAOKAO-Bench's `\\frac{3}{10} \\#\\# 0.3`)
    accepts any of them."""
    if re.search(r"\\#\s*\\#", gold):
        return any(equivalent(form, answer) for form in re.split(r"\\#\s*\\#", gold) if form.strip())
    return _equal(normalize(gold), normalize(answer), depth=0)


def _equal(gold: str, answer: str, depth: int) -> bool:
    braced = (_unbrace(gold), _unbrace(answer)) != (gold.strip(), answer.strip())  # `{1, 3}`: a set
    gold, answer = _unbrace(gold), _unbrace(answer)
    if _key(gold) == _key(answer):
        return True
    if not gold or not answer or depth > 3:
        return False
    if (decided := _simple(gold, answer)) is not None:
        return decided
    if (decided := _structure(gold, answer, depth, braced)) is not None:
        return decided
    a, b = value(gold), value(answer)
    if a is not None and b is not None:  # no sympy needed
        return math.isclose(a, b, rel_tol=1e-12) or _close(a, b) or _rounds_to(gold, a, b, answer)
    if (c := complex_value(gold)) is not None and (d := complex_value(answer)) is not None:
        return abs(c - d) <= 1e-9 * max(1.0, abs(c))  # i(2-i) = 1+2i
    if (a is None) != (b is None) and _not_a_number(answer if a is not None else gold):
        return False  # a number is never a variable expression, an interval or a matrix
    return _math_verify(gold, answer)


def answer_count(gold: str) -> int:
    """How many answers a gold lists: `1, -2` and `1 \\pm \\sqrt{19}` two, `p=5,q=2;p=7,q=2`
    two (solutions), a tuple or interval one."""
    s = _unbrace(normalize(gold))
    if (named := named_groups(s)) is not None:
        return len(named[1])
    return len(_expand_pm(split_top(s)))


def _rounds_to(gold: str, gold_value: float | Fraction, answer_value: float | Fraction, answer: str) -> bool:
    """A decimal gold of three or more significant digits is the rounded value of an exact
    answer (`1.0472` for `\\frac{\\pi}{3}`, `0.333` for `1/3`): credited when the answer's
    value is within half a unit of the gold's last digit. An answer that is itself a
    decimal must agree to 6 places (`0.46` does not answer `0.5`, nor `1.41` `1.414`)."""
    match = re.fullmatch(r"-?(\d*)\.(\d+)", _key(gold))
    if match is None or "." in answer or isinstance(answer_value, complex):
        return False
    if len((match.group(1) + match.group(2)).lstrip("0")) < 3:
        return False
    half_unit = Fraction(1, 2 * 10 ** len(match.group(2)))  # exact: a huge Fraction never becomes a float
    return abs(answer_value - gold_value) <= (half_unit if isinstance(answer_value, Fraction) else float(half_unit) * (1 + 1e-9))


def _not_a_number(s: str) -> bool:
    """An expression with a free variable (not `e` or `i`), a bracketed interval or tuple,
    a union or a matrix: what no constant equals."""
    if re.search(r"[=<>:]|\\(?:in|le|ge|ne|lt|gt)\b", s):
        return False  # a relation: math-verify reads `k = 1/3` by its last side
    bare = re.sub(r"\\(?:text|mathrm|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+", " ", s)
    return bool(re.search(r"(?<![A-Za-z])[a-df-hj-zA-Z](?![A-Za-z])", bare) or _bracketed(s)
                or "\\cup" in s or "matrix" in s)


def _unbrace(s: str) -> str:
    """`{1, 2}` (a set written with braces) -> `1, 2`; other braces stay."""
    s = s.strip()
    if len(s) > 1 and s[0] == "{" and s[-1] == "}" and _closing(s, 0) == len(s) - 1:
        return s[1:-1].strip()
    return s


def _closing(s: str, start: int) -> int:
    depth = 0
    for i in range(start, len(s)):
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth == 0:
            return i
    return -1


def _expand_pm(parts: list[str]) -> list[str]:
    """`1 \\pm \\sqrt{19}` -> `1 + \\sqrt{19}`, `1 - \\sqrt{19}`: a ± answer is two answers."""
    out = []
    for p in parts:
        if p.count("\\pm") == 1 and "\\mp" not in p:
            out += [p.replace("\\pm", "+"), p.replace("\\pm", "-")]
        else:
            out.append(p)
    return out


def _simple(gold: str, answer: str) -> bool | None:
    """Times, letters, text and plain numbers; None when neither side is one of them."""
    if clock(gold) is not None:
        return same_time(gold, answer)
    if (t := clock(answer)) is not None and re.fullmatch(r"\d{1,2}", gold):  # "2:00 pm" for GSM8K's gold 2
        return t[1] == 0 and t[0] == int(gold)
    if (letter := _letter(gold)) is not None and _text(gold) is not None:
        return _letter(answer) == letter or _text(answer) == _text(gold)
    if (text := _text(gold)) is not None:
        return _text(answer) == text if _text(answer) is not None else None
    number = plain_number(gold)
    if number is not None:
        other = plain_number(answer, decimal_comma=True)
        if other is not None:
            if (sci := scientific(_key(gold))) is not None:  # 4.5e33 is known to two digits
                return same_significant(sci[0], sci[1], other)
            return _numbers_equal(number, other) or _rounds_to(gold, number, other, answer)
    return None


def _structure(gold: str, answer: str, depth: int, braced: bool = False) -> bool | None:
    """Lists, tuples and intervals, named solutions, equations; None when the structure
    does not decide. `braced`: a side was a set in braces (`{1,3}`, never an ordered pair)."""
    g, a = _bracketed(gold), _bracketed(answer)
    if g is not None and a is not None:
        return (g[0], g[2], len(g[1])) == (a[0], a[2], len(a[1])) and all(
            _equal(x, y, depth + 1) for x, y in zip(g[1], a[1], strict=True))
    if (named := named_groups(gold)) is not None:
        return _named_equal(named, answer, depth)
    if not braced and (pair := _pair_and_list(gold, g, answer, a)) is not None:  # gold `10^{3},10`, answer `(1000, 10)`
        golds, answers = pair
        return all(_equal(x, y, depth + 1) for x, y in zip(golds, answers, strict=True))
    golds, answers = _distinct(_expand_pm(split_top(gold)), depth), _distinct(_expand_pm(split_top(answer)), depth)
    if len(golds) > 1 or len(answers) > 1:
        if len(golds) != len(answers):  # a partial answer (one root of two) is wrong (Math-Verify #47)
            return False
        return _matched(golds, answers, depth)
    return _equation(gold, answer, depth)


def _equation(gold: str, answer: str, depth: int) -> bool | None:
    """Equations and answers that name their value (`k = 5`, `y = 2x`, `f(x) = 2x`)."""
    gold_sides, answer_sides = _sides(gold), _sides(answer)
    if len(gold_sides) == 1 and len(answer_sides) > 1:  # "k = 5" answers "5"
        return _equal(gold, answer_sides[-1], depth + 1)
    if len(gold_sides) == 2 and len(answer_sides) == 1 and _SIMPLE_LHS.match(_key(gold_sides[0])):
        return _equal(gold_sides[1], answer, depth + 1)  # gold "y = 2x + 3", answer "2x + 3"
    if len(gold_sides) == 2 == len(answer_sides):
        if _FUNCTION_LHS.match(_key(gold_sides[0])) and _FUNCTION_LHS.match(_key(answer_sides[0])):
            return _equal(gold_sides[1], answer_sides[1], depth + 1)  # y = 2x+1 answers f(x) = 2x+1
        if (same := same_equation(gold, answer)) is not None:  # 4x-5y=-50 rearranged: decided without sympy
            return same
    if "\\approx" in answer:
        exact, approx = answer.split("\\approx", 1)
        return _equal(gold, exact, depth + 1) or _equal(gold, approx, depth + 1)
    return None


def _pair_and_list(gold: str, g: tuple | None, answer: str, a: tuple | None) -> tuple[list, list] | None:
    """An ordered pair written once in parentheses and once as a bare list of as many values
    (a gold `10^{3},10` for the pair `(1000, 10)`): both as lists, compared in order."""
    if (g is None) == (a is None):
        return None
    pair, bare = (g, answer) if g is not None else (a, gold)
    parts = split_top(bare)
    if (pair[0], pair[2]) != ("(", ")") or len(parts) != len(pair[1]) or len(parts) < 2:
        return None
    return (pair[1], parts) if g is not None else (parts, pair[1])


def _named_equal(named: tuple[list[str], list[dict]], answer: str, depth: int) -> bool:
    """Solutions written as named values (`p=5,q=2;p=7,q=2`) against the same form in any
    order of names, or tuples in the gold's order of names (`(5,2),(7,2)`): the same set."""
    names, golds = named
    other = named_groups(answer)
    if other is not None:
        if set(other[0]) != set(names):
            return False
        answers = other[1]
    else:
        tuples = [_bracketed(part) for part in split_top(answer)] if answer.startswith("(") else [_bracketed(f"({answer})")]
        if any(t is None or t[0] != "(" or len(t[1]) != len(names) for t in tuples):
            return False
        answers = [dict(zip(names, t[1], strict=True)) for t in tuples]
    rows = [tuple(group[n] for n in names) for group in golds]
    return _matched([f"({','.join(r)})" for r in rows], [f"({','.join(a[n] for n in names)})" for a in answers], depth)


def _distinct(parts: list[str], depth: int) -> list[str]:
    """A set's elements once each: `(3,17,3,7)` listed twice counts once."""
    if len(parts) < 2:
        return parts
    out = []
    for p in parts:
        if not any(_key(p) == _key(q) or _equal(q, p, depth + 1) for q in out):
            out.append(p)
    return out


def _matched(golds: list[str], answers: list[str], depth: int) -> bool:
    """Every gold element equals a distinct answer element (a set of answers, any order)."""
    left = list(answers)
    for g in golds:
        hit = next((i for i, a in enumerate(left) if _equal(g, a, depth + 1)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


SYMBOLIC_CHARS = 1000  # the longest MATH / GSM8K / AIME gold is 131 characters


EQUATION_SECONDS = 1  # math-verify's limit for an equation against an equation (its own limit is 5 s)


def _math_verify(gold: str, answer: str) -> bool:
    """math-verify's verdict on two normalised answers; a value it cannot parse is unequal.
    A value longer than SYMBOLIC_CHARS is not parsed (its LaTeX parse grows to seconds: a
    40,000-character `1+1+...` takes 5 s) and is unequal unless equal as text. A comparison
    with an equation that math-verify cannot decide within EQUATION_SECONDS to parse and to
    verify is unequal, not `timeout`: most equations were already decided by value
    (math_forms.same_equation), and what sympy cannot settle in a second it seldom settles
    in five."""
    from math_verify import verify
    from math_verify.errors import (
        TimeoutException,  # a BaseException: `except Exception` lets it through
    )

    if max(len(gold), len(answer)) > SYMBOLIC_CHARS:
        return False
    equation = "=" in gold or "=" in answer
    limit = EQUATION_SECONDS if equation else 5
    try:
        parsed_gold, parsed_answer = _parse(gold, limit), _parse(answer, limit)
        if not parsed_gold or not parsed_answer:
            return False
        return bool(verify(list(parsed_gold), list(parsed_answer), timeout_seconds=limit, raise_on_error=True))
    except TimeoutException:
        if not equation:
            raise  # the grade is `timeout`
        return False
    except Exception:  # sympy raises many types on odd input
        return False


@lru_cache(maxsize=4096)
def _parse(value: str, limit: int = 5) -> tuple:
    """math-verify's parse of one isolated value (cached: a gold is parsed once per worker)."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse

    config = LatexExtractionConfig(
        boxed_match_priority=0,
        normalization_config=NormalizationConfig(
            basic_latex=True, units=True, malformed_operators=False, nits=False, boxed="all", equations=False
        ),
    )
    try:
        return tuple(parse(f"${value}$", extraction_config=[config], extraction_mode="first_match",
                           parsing_timeout=limit, raise_on_error=True))
    except Exception as exc:
        if type(exc).__name__ == "TimeoutException":
            raise
        return ()
