"""Answer forms that need more than a plain number, for math_equal: scientific notation,
named solution groups, times of day, complex constants and equations checked by value.

    scientific("4.5e33")                    # (Fraction(45 * 10**32), 2): value and significant digits
    scientific("6\\times10^{-3}")           # (Fraction(3, 500), 1)
    same_time("20:34", "8:34 P.M.")         # True
    named_groups("p=5,q=2;p=7,q=2")         # (["p", "q"], [{"p": "5", "q": "2"}, {"p": "7", "q": "2"}])
    proportional("y=2x+3", "2x-y+3=0")      # True: the same equation rearranged

All of them read text already normalised by math_equal.normalize with its spaces removed
(math_equal._key), except `named_groups` and `proportional`, which take normalised text.

Sources: scientific notation as Python and lm-eval write it (`3e8`) and as LaTeX writes it
(`3 \\times 10^{8}`), the forms of Minerva's OCW golds (`4.5e33`) and OlympiadBench's judge
examples (`7.8\\times 10^2` = 780, OpenBMB/OlympiadBench eval/scoring_examples.json);
Math-Verify 0.9 reads `2e-8` as `2e - 8` (Euler's number), so evalkit decides these itself.
Limits: a variable equation is checked by value only for polynomial and rational sides in
one-letter variables (`x`, `y`); anything else goes to math-verify under a one-second limit.
"""

from __future__ import annotations

import math
import random
import re
from fractions import Fraction

from evalkit.tasks.math_value import value

__all__ = ["scientific", "same_significant", "clock", "same_time", "named_groups", "proportional", "complex_value"]

_MANTISSA = r"(?P<m>[-+]?(?:\d+\.?\d*|\.\d+))"
_EXPONENT = r"(?:\{(?P<b>[-+]?\d+)\}|(?P<p>[-+]?\d+))"
_SCI = re.compile(rf"{_MANTISSA}(?:[eE](?P<e>[-+]?\d+)|(?:\\times|\\cdot|\*|×|x)10\^{_EXPONENT})")
_POWER_OF_TEN = re.compile(rf"(?P<s>[-+]?)10\^{_EXPONENT}")
_MAX_EXPONENT = 300  # beyond it a float cannot hold the value; such a gold is compared as text
_CLOCK = re.compile(r"(?i)^(\d{1,2}):(\d{2})\s*(?:([ap])\.?\s*m\.?)?$")
_NAMED = re.compile(r"^([A-Za-z](?:_\{?\w+\}?)?)=(.+)$")


def scientific(key: str) -> tuple[Fraction, int] | None:
    """(value, significant digits of the mantissa) of a number in scientific notation
    (`3e8`, `2.3E-3`, `6\\times10^{-3}`, `9.98x10^-25`, `10^{-8}`), else None."""
    if (match := _SCI.fullmatch(key)) is not None:
        mantissa, exponent = match.group("m"), match.group("e") or match.group("b") or match.group("p")
    elif (match := _POWER_OF_TEN.fullmatch(key)) is not None:
        mantissa, exponent = f"{match.group('s')}1", match.group("b") or match.group("p")
    else:
        return None
    if abs(int(exponent)) > _MAX_EXPONENT:
        return None
    digits = len(re.sub(r"^[-+]?0*\.?0*", "", mantissa).replace(".", "")) or 1
    return Fraction(mantissa) * Fraction(10) ** int(exponent), digits


def same_significant(gold: Fraction, digits: int, answer: Fraction) -> bool:
    """The answer rounded to the gold's significant digits is the gold (`4.46e33` answers
    `4.5e33`; `4.4e33` and `5e33` do not): a gold in scientific notation states a measured
    value to its digits (Minerva's OCW answers are given "to two significant figures")."""
    if answer == gold:
        return True
    try:
        return f"{float(answer):.{digits - 1}e}" == f"{float(gold):.{digits - 1}e}"
    except OverflowError:
        return False


def clock(text: str) -> tuple[int, int, str] | None:
    """(hour, minute, "a" / "p" / "") of a time of day: `4:30`, `8:34 P.M.`, `20:34`."""
    match = _CLOCK.match(text.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), (match.group(3) or "").lower()


def same_time(gold: str, answer: str) -> bool:
    """Two times of day are the same time: `8:34 P.M.` = `20:34`, `4:30` = `4:30 pm` (a time
    without a half of the day matches either half); `20:34` is not `8:34 a.m.`."""
    a, b = clock(gold), clock(answer)
    if a is None or b is None or a[1] != b[1]:
        return False
    if a[2] and b[2]:
        return _hours(a) == _hours(b)
    if not a[2] and not b[2]:
        return a[0] == b[0]
    half, bare = (a, b) if a[2] else (b, a)
    return bare[0] in (half[0], _hours(half))


def _hours(time: tuple[int, int, str]) -> int:
    """The hour on a 24-hour clock: 12 a.m. is 0, 12 p.m. is 12, 8 p.m. is 20."""
    return time[0] % 12 + (12 if time[2] == "p" else 0)


def named_groups(text: str) -> tuple[list[str], list[dict[str, str]]] | None:
    """Solutions written as named values, one group per solution: `p=5,q=2;p=7,q=2`, or
    `p=5, q=2, p=7, q=2` (each name once per group), as (names in order, one dict per group).
    None unless every item is `name=value` and every group names the same variables."""
    items = [part.strip() for part in re.split(r"[,;]", text) if part.strip()]
    pairs = [_NAMED.match(item.replace(" ", "")) for item in items]
    if len(pairs) < 2 or any(p is None for p in pairs):
        return None
    names: list[str] = []
    for pair in pairs:
        if pair.group(1) in names:
            break
        names.append(pair.group(1))
    if len(names) < 2 or len(pairs) % len(names):
        return None
    groups = [{p.group(1): p.group(2) for p in pairs[i : i + len(names)]} for i in range(0, len(pairs), len(names))]
    if any(set(group) != set(names) for group in groups):
        return None
    return names, groups


def complex_value(latex: str) -> complex | None:
    """The value of a constant expression with the imaginary unit `i` (`i(2-i)` = 1+2i), or
    None when it holds another letter or no `i` at all."""
    if not re.search(r"(?<![A-Za-z\\])i(?![A-Za-z])", latex) or re.search(r"(?<!\\)[A-Za-hj-z]|i[A-Za-z]", latex):
        return None
    return value(latex, variables={"i": 1j})


def proportional(first: str, second: str) -> bool | None:
    """Whether two equations `L1 = R1`, `L2 = R2` are the same up to a constant factor
    (`L1 - R1 = c (L2 - R2)`, c != 0), checked at seeded random points of their variables:
    True, False, or None when a side has no value here (functions, subscripts, ...)."""
    sides = [[s for s in eq.split("=")] for eq in (first, second)]
    if any(len(s) != 2 for s in sides):
        return None
    letters = sorted(set(re.findall(r"(?<![A-Za-z\\])[a-z](?![A-Za-z])", f"{first} {second}")))
    if not letters or len(letters) > 4:
        return None
    rng = random.Random(0)
    ratios = []
    for _ in range(5):
        point = {name: rng.uniform(0.7, 2.3) for name in letters}
        differences = [_difference(eq, point) for eq in sides]
        if None in differences:
            return None
        d1, d2 = differences
        if abs(d2) < 1e-12:
            if abs(d1) > 1e-9:
                return False
            continue
        ratios.append(d1 / d2)
    if not ratios:
        return None
    return all(abs(r) > 1e-12 and math.isclose(r, ratios[0], rel_tol=1e-9) for r in ratios)


def _difference(sides: list[str], point: dict[str, float]) -> float | None:
    left, right = (value(side, variables=point) for side in sides)
    if left is None or right is None or isinstance(left, complex) or isinstance(right, complex):
        return None
    return left - right
