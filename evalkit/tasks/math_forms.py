"""Answer forms that need more than a plain number, for math_equal: scientific notation,
named solution groups, times of day, complex constants and equations checked by value.

    scientific("4.5e33")                    # (Fraction(45 * 10**32), 2): value and significant digits
    scientific("6\\times10^{-3}")           # (Fraction(3, 500), 1)
    same_time("20:34", "8:34 P.M.")         # True
    named_groups("p=5,q=2;p=7,q=2")         # (["p", "q"], [{"p": "5", "q": "2"}, {"p": "7", "q": "2"}])
    same_equation("y=2x+3", "2x-y+3=0")     # True: the same equation rearranged

All of them read text already normalised by math_equal.normalize with its spaces removed
(math_equal._key), except `named_groups` and `same_equation`, which take normalised text.

Sources: scientific notation as Python and lm-eval write it (`3e8`) and as LaTeX writes it
(`3 \\times 10^{8}`), the forms of Minerva's OCW golds (`4.5e33`) and OlympiadBench's judge
examples (`7.8\\times 10^2` = 780, OpenBMB/OlympiadBench eval/scoring_examples.json);
Math-Verify 0.9 reads `2e-8` as `2e - 8` (Euler's number), so evalkit decides these itself.
Limits: a variable equation is checked by value only for polynomial and rational sides in
one-letter variables (`x`, `y`); anything else goes to math-verify under a one-second limit.
"""

from __future__ import annotations

import random
import re
from fractions import Fraction

from evalkit.tasks.math_value import value

__all__ = ["scientific", "same_significant", "clock", "same_time", "named_groups", "same_equation", "complex_value"]

_MANTISSA = r"(?P<m>[-+]?(?:\d+\.?\d*|\.\d+))"
_EXPONENT = r"(?:\{(?P<b>[-+]?\d+)\}|\((?P<r>[-+]?\d+)\)|(?P<p>[-+]?\d+))"
_SCI = re.compile(rf"{_MANTISSA}(?:[eE](?P<e>[-+]?\d+)|(?:\\times|\\cdot|\*|×|x)10\^{_EXPONENT})")
_POWER_OF_TEN = re.compile(rf"(?P<s>[-+]?)10\^{_EXPONENT}")
_MAX_EXPONENT = 300  # beyond it a float cannot hold the value; such a gold is compared as text
_CLOCK = re.compile(r"(?i)^(\d{1,2}):(\d{2})\s*(?:([ap])\.?\s*m\.?)?$")
_NAMED = re.compile(r"^([A-Za-z](?:_\{?\w+\}?)?)=(.+)$")


def scientific(key: str) -> tuple[Fraction, int] | None:
    """(value, significant digits of the mantissa) of a number in scientific notation
    (`3e8`, `2.3E-3`, `6\\times10^{-3}`, `9.98x10^-25`, `10^{-8}`), else None."""
    if (match := _SCI.fullmatch(key)) is not None:
        mantissa, exponent = match.group("m"), match.group("e") or match.group("b") or match.group("r") or match.group("p")
    elif (match := _POWER_OF_TEN.fullmatch(key)) is not None:
        mantissa, exponent = f"{match.group('s')}1", match.group("b") or match.group("r") or match.group("p")
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


def same_equation(first: str, second: str) -> bool | None:
    """Whether two equations have the same solutions, checked by value: on seeded random
    lines through their variables, every root of one side's `L - R` is a root of the
    other's, both ways (`4x-5y=-50` = `-4x+5y=50`; `\\frac{x^2}{a^2}+\\frac{y^2}{b^2}=1` =
    `b^2x^2+a^2y^2=a^2b^2`; `x^2+y^2=1` != `x^2-y^2=1`). True, False, or None when a side
    has no value here (functions, subscripts), no root is found, or values grow past 1e12
    (where a float cannot tell `x^{100}+1` from `x^{100}`)."""
    equations = [eq.split("=") for eq in (first, second)]
    if any(len(sides) != 2 for sides in equations):
        return None
    letters = sorted(set(re.findall(r"(?<![A-Za-z\\])[a-z](?![A-Za-z])", f"{first} {second}")))
    if not letters or len(letters) > 4:
        return None
    rng, roots = random.Random(0), 0
    for trial in range(2 * len(letters) + 2):
        free, point = letters[trial % len(letters)], {name: rng.uniform(0.6, 1.9) for name in letters}
        for this, other in (equations, equations[::-1]):
            for root in _roots(this, free, point):
                at = dict(point, **{free: root})
                if not _vanishes(this, at):
                    continue  # a pole, where the sign changes too
                if (vanishes := _vanishes(other, at)) is None:
                    return None
                if not vanishes:
                    return False
                roots += 1
    return True if roots >= 3 else None


def _difference(sides: list[str], point: dict[str, float]) -> tuple[float, float] | None:
    """(L - R, the larger of |L| and |R|) at a point, or None."""
    left, right = (value(side, variables=point) for side in sides)
    if left is None or right is None or isinstance(left, complex) or isinstance(right, complex):
        return None
    scale = max(abs(left), abs(right))
    return (left - right, scale) if scale < 1e12 else None


def _vanishes(sides: list[str], point: dict[str, float]) -> bool | None:
    found = _difference(sides, point)
    return None if found is None else abs(found[0]) <= 1e-7 * max(1.0, found[1])


_GRID = sorted([0.013 + s * 0.1 * 1.25**k for k in range(30) for s in (1, -1)])  # about -65 to 65, finer near 0


def _roots(sides: list[str], free: str, point: dict[str, float]) -> list[float]:
    """Up to two roots of `L - R` in the variable `free` (sign changes on a grid, bisected)."""
    grid = _GRID
    values = []
    for t in grid:
        found = _difference(sides, dict(point, **{free: t}))
        values.append(None if found is None else found[0])
    roots = []
    for k in range(len(grid) - 1):
        (a, fa), (b, fb) = (grid[k], values[k]), (grid[k + 1], values[k + 1])
        if fa is None or fb is None or fa * fb > 0 or len(roots) >= 2:
            continue
        for _ in range(40):
            middle = (a + b) / 2
            found = _difference(sides, dict(point, **{free: middle}))
            if found is None:
                break
            a, b, fa = (middle, b, found[0]) if found[0] * fa > 0 else (a, middle, fa)
        else:
            roots.append((a + b) / 2)
    return roots
