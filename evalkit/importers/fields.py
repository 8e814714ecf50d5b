"""The field types every importer's schema is made of, and the checks between records.

    from evalkit.importers.fields import COMPLETIONS, TOKEN_IDS, add_problem
    record = check(Obj({"outputs": ListOf(Obj({"text": TEXT, "token_ids": TOKEN_IDS}))}), raw, where, FMT)
    add_problem(problems, key, {"question": q, "gold": g}, where)   # a second, different gold is refused

Each reader (one module per format) declares the records its tool writes with these types
(`evalkit.schema`), checks every record at the border, and then trusts it: a string where a
list of completions is expected is refused (never one completion per character), a token
count or index is a non-negative integer, a sample index is never NaN, a grade is a bool, a
number, a string or null. Limits: `MAX_SCORE_TEXT` characters for a grade given as text.
"""

from __future__ import annotations

from evalkit.errors import UsageError
from evalkit.schema import Bool, Float, Int, Json, ListOf, MapOf, Null, Str, Type, found

__all__ = ["TEXT", "COMPLETIONS", "TOKEN_IDS", "COUNT", "INDEX", "KEY", "GOLD", "SCORE", "add_problem",
           "bounded_gaps", "MAX_SCORE_TEXT"]

MAX_SCORE_TEXT = 1000
TEXT = Str()
COMPLETIONS = ListOf(Str())  # a list of completion texts: a string is refused, never split into characters
TOKEN_IDS = ListOf(Int(min=0))
COUNT = Int(min=0)  # token counts
INDEX = Int(min=0)  # sample and document indices
KEY = Int(min=0) | Str()  # a problem's id as tools write it
GOLD = Str() | Int() | Float() | Bool() | ListOf(Json()) | MapOf(Json()) | Null()  # a gold as written (graded as text)
SCORE: Type = Bool() | Float(finite=False) | Str(max_len=MAX_SCORE_TEXT) | Null()  # a tool's own grade


def add_problem(problems: dict, key: str, info: dict, where) -> dict:
    """`problems[key] = info` the first time; later, the same problem with another gold answer
    is refused naming both (a file whose copies of one problem disagree on its answer)."""
    known = problems.get(key)
    if known is None:
        problems[key] = info
        return info
    if known.get("gold") is None and info.get("gold") is not None:
        known["gold"] = info["gold"]
    elif info.get("gold") is not None and _text(info["gold"]) != _text(known["gold"]):
        raise UsageError(f"{where}: problem {str(key)[:60]!r} has two different gold answers: {found(known['gold'])} "
                         f"earlier, {found(info['gold'])} here")
    return known


def _text(gold) -> str:
    return " ".join(str(gold).split())


def bounded_gaps(numbers: list[int]) -> tuple[int, int | None]:
    """(how many of 0..max(numbers) are missing, the first missing or None), in time and memory
    bounded by len(numbers): a file naming index 10^12 costs what its own lines cost."""
    seen = sorted(set(numbers))
    if not seen:
        return 0, None
    missing = seen[-1] + 1 - len(seen)
    first = next((i for i, n in enumerate(seen) if n != i), None) if missing else None
    return missing, first
