"""One typed reader for files other tools wrote: each field's type and range checked once, at the border.

    from evalkit.schema import Obj, ListOf, Str, Int, Opt, check, load_json
    LINE = Obj({"doc_id": Int(min=0) | Str(), "resps": ListOf(ListOf(Str()))}, optional={"filter": Str()})
    record = check(LINE, load_json(text, "out/samples.jsonl:3"), "out/samples.jsonl:3", "lm-eval samples")
    # error: out/samples.jsonl:3: field 'resps[0]': expected a list of strings, found a string ('The answer is 7.')

A schema is made of small types (`Str`, `Int`, `Float`, `Bool`, `ListOf`, `MapOf`, `Obj`, `Json`,
`Regex`, `Choice`, `a | b`, `Opt(a)`); `check(schema, value, where, fmt)` returns the value
(numbers as Python numbers, parquet's numpy arrays as lists) or raises one UsageError:
`<where>: field <path>: expected <what>, found <what>`, or `<where>: no field <path>; not a <fmt>
file?` for a missing required field. After `check`, code trusts the types (STYLE.md rule 24).

Rules every reader gets from here, not from its own code:
- a string is never a list (of completions, of token ids): `ListOf` refuses it, so a string is
  never read as one item per character;
- `Int` refuses bools, floats (3.0 included) and NaN; `Float` refuses NaN and +-Inf unless asked
  (`finite=False`); ranges (`min`, `max`) are checked, so a negative token count or index is an
  error naming the field, never an index from the end;
- nesting is bounded: `load_json` refuses a document nested deeper than the parser's stack allows
  (a 200,000-deep array is one line, not a RecursionError), and a free-form value kept whole
  (`Json`) is at most `MAX_DEPTH` levels deep;
- sizes: `ListOf(max_len=...)` and `Str(max_len=...)` bound what a reader keeps.
Limits: `MAX_DEPTH` (64) levels for a kept free-form value; a JSON document deeper than about
900 levels (Python's recursion limit, less the caller's frames) is refused as a whole.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["Type", "Str", "Int", "Float", "Bool", "Null", "ListOf", "MapOf", "Obj", "Json", "Regex", "Choice", "FileName",
           "Opt", "check", "refuse", "found", "load_json", "read_json", "read_toml", "json_lines", "MAX_DEPTH", "plain"]

MAX_DEPTH = 64


class Mismatch(Exception):
    """A value that does not fit its type; `path` is filled in on the way out of the containers."""

    def __init__(self, expected: str, value, missing: bool = False, shown: str | None = None):
        self.expected, self.value, self.missing, self.path = expected, value, missing, []
        self.shown = shown  # what was found, when `found(value)` would not say it


def found(value) -> str:
    """What a value is, in words, for a message: `a string ('abc')`, `-5`, `NaN`, `null`, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, numbers.Number):
        v = float(value) if not isinstance(value, numbers.Integral) else int(value)
        return "NaN" if isinstance(v, float) and math.isnan(v) else repr(v)
    if isinstance(value, str):
        return f"a string ({value[:40]!r}{'...' if len(value) > 40 else ''})"
    if isinstance(value, dict):
        return f"an object ({len(value)} keys)"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


def plain(value):
    """numpy scalars and arrays (how pandas gives parquet values) as Python values, one level."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return value.tolist()
    return value


class Type:
    expected = "a value"

    def __or__(self, other: Type) -> Type:
        return Either(self, other)

    def __call__(self, value):  # the checked value, or Mismatch
        raise NotImplementedError


class Either(Type):
    def __init__(self, *types: Type):
        self.types = types
        self.expected = " or ".join(t.expected for t in types)

    def __call__(self, value):
        deepest = None
        for t in self.types:
            try:
                return t(value)
            except Mismatch as exc:
                if exc.path and (deepest is None or len(exc.path) > len(deepest.path)):
                    deepest = exc
        if deepest is not None:  # one alternative fitted the value's kind and failed inside: say where
            raise deepest
        raise Mismatch(self.expected, value)


def Opt(t: Type) -> Type:  # noqa: N802 (reads as a type)
    """`t`, or null."""
    return Either(t, Null())


class Null(Type):
    expected = "null"

    def __call__(self, value):
        if value is not None:
            raise Mismatch(self.expected, value)
        return None


class Str(Type):
    def __init__(self, max_len: int | None = None, nonempty: bool = False):
        self.max_len, self.nonempty = max_len, nonempty
        self.expected = "a non-empty string" if nonempty else "a string"

    def __call__(self, value):
        if not isinstance(value, str) or (self.nonempty and not value):
            raise Mismatch(self.expected, value)
        if self.max_len is not None and len(value) > self.max_len:
            raise Mismatch(f"a string of at most {self.max_len} characters", value,
                           shown=f"a string of {len(value)} characters")
        return value


def _range(lo, hi) -> str:
    def show(x):
        return str(x) if isinstance(x, int) else f"{x:g}"

    if lo is not None and hi is not None:
        return f" in [{show(lo)}, {show(hi)}]"
    return f" >= {show(lo)}" if lo is not None else f" <= {show(hi)}" if hi is not None else ""


class Int(Type):
    def __init__(self, min: int | None = None, max: int | None = None):  # noqa: A002
        self.lo, self.hi = min, max
        self.expected = "an integer" + _range(min, max)

    def __call__(self, value):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or type(value).__name__ == "bool_":
            raise Mismatch(self.expected, value)
        value = int(value)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise Mismatch(self.expected, value)
        return value


class Float(Type):
    """A number (an integer is read as a float); finite unless `finite=False`."""

    def __init__(self, min: float | None = None, max: float | None = None, finite: bool = True):  # noqa: A002
        self.lo, self.hi, self.finite = min, max, finite
        self.expected = ("a finite number" if finite else "a number") + _range(min, max)

    def __call__(self, value):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or type(value).__name__ == "bool_":
            raise Mismatch(self.expected, value)
        value = float(value)
        if math.isnan(value):
            if self.finite:
                raise Mismatch(self.expected, value)
            return value
        if (self.finite and math.isinf(value)) or (self.lo is not None and value < self.lo) or \
                (self.hi is not None and value > self.hi):
            raise Mismatch(self.expected, value)
        return value


class Bool(Type):
    expected = "true or false"

    def __call__(self, value):
        if not isinstance(value, bool) and type(value).__name__ != "bool_":
            raise Mismatch(self.expected, value)
        return bool(value)


class Choice(Type):
    def __init__(self, *values):
        self.values = values
        self.expected = "one of " + ", ".join(map(repr, values))

    def __call__(self, value):
        if isinstance(value, bool) or value not in self.values:
            raise Mismatch(self.expected, value)
        return value


class Regex(Type):
    """A string that compiles as a Python regular expression."""

    expected = "a valid regular expression"

    def __call__(self, value):
        if not isinstance(value, str):
            raise Mismatch(self.expected, value)
        try:
            re.compile(value)
        except (re.error, RecursionError, OverflowError) as exc:
            raise Mismatch(f"a valid regular expression ({exc})", value) from None
        return value


class FileName(Type):
    """A file's name in the folder the file naming it is in: no folder part, not `.` or `..`
    (an index cannot point a reader at /etc/passwd or outside its checkpoint)."""

    expected = "a file name in the same folder"

    def __call__(self, value):
        if not isinstance(value, str) or not value or value in (".", "..") or "/" in value or "\\" in value \
                or "\0" in value:
            raise Mismatch(self.expected, value)
        return value


class ListOf(Type):
    """A list (a parquet array read as one); never a string."""

    def __init__(self, item: Type, min_len: int = 0, max_len: int | None = None):
        self.item, self.min_len, self.max_len = item, min_len, max_len
        self.expected = f"a {'non-empty ' if min_len else ''}list of {_plural(item.expected)}"

    def __call__(self, value):
        value = plain(value)
        if not isinstance(value, list | tuple):
            raise Mismatch(self.expected, value)
        if len(value) < self.min_len or (self.max_len is not None and len(value) > self.max_len):
            raise Mismatch(f"a list of {self.min_len} to {self.max_len} items" if self.max_len is not None
                           else self.expected, value)
        out = []
        for i, item in enumerate(value):
            try:
                out.append(self.item(item))
            except Mismatch as exc:
                exc.path.insert(0, f"[{i}]")
                raise
        return out


ADJECTIVES = ("non-empty", "finite", "valid", "positive")


def _plural(expected: str) -> str:
    """'a string' -> 'strings', 'a finite number >= 0' -> 'finite numbers >= 0' (for 'a list of ...')."""
    words = expected.split(" ")
    if words[0] not in ("a", "an"):
        return expected
    words = words[1:]
    noun = next((i for i, w in enumerate(words) if w not in ADJECTIVES), None)
    if noun is None:
        return expected
    words[noun] += "es" if words[noun].endswith(("x", "s")) else "s"
    return " ".join(words)


class MapOf(Type):
    """An object with any keys (strings, or of type `keys`), every value of one type."""

    def __init__(self, value: Type, keys: Type | None = None):
        self.value, self.keys = value, keys
        self.expected = f"an object of {_plural(value.expected)}"

    def __call__(self, value):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise Mismatch("an object", value)
        out = {}
        for key, item in value.items():
            try:
                if self.keys is not None:
                    try:
                        self.keys(key)
                    except Mismatch as exc:
                        raise Mismatch(f"a key that is {exc.expected}", key) from None
                out[key] = self.value(item)
            except Mismatch as exc:
                exc.path.insert(0, f".{key}")
                raise
        return out


class Obj(Type):
    """An object with `fields` required and `optional` ones (absent optional fields stay absent;
    other keys are kept as they are unless `extra=False` drops them)."""

    expected = "an object"

    def __init__(self, fields: dict[str, Type], optional: dict[str, Type] | None = None, extra: bool = True):
        self.fields, self.optional, self.extra = fields, optional or {}, extra

    def __call__(self, value):
        if not isinstance(value, dict):
            raise Mismatch(self.expected, value)
        out = dict(value) if self.extra else {}
        for key, t in self.fields.items():
            if key not in value:
                exc = Mismatch("", None, missing=True)
                exc.path.insert(0, f".{key}")
                raise exc
            out[key] = self._one(key, t, value[key])
        for key, t in self.optional.items():
            if key in value:
                out[key] = self._one(key, t, value[key])
        return out

    @staticmethod
    def _one(key: str, t: Type, item):
        try:
            return t(item)
        except Mismatch as exc:
            exc.path.insert(0, f".{key}")
            raise


class Json(Type):
    """Any JSON value, kept whole, at most `max_depth` levels deep (checked without recursion)."""

    def __init__(self, max_depth: int = MAX_DEPTH):
        self.max_depth = max_depth
        self.expected = "a value"

    def __call__(self, value):
        stack = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, dict | list | tuple):
                if depth > self.max_depth:
                    raise Mismatch(f"a value nested at most {self.max_depth} levels deep", value,
                                   shown=f"one nested more than {self.max_depth} levels")
                stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
        return value


def _path(parts: list[str]) -> str:
    text = "".join(parts).lstrip(".")
    return repr(text)


def check(schema: Type, value, where, fmt: str | None = None):
    """`value` checked against `schema`; a mismatch is one UsageError naming `where` and the field."""
    try:
        return schema(value)
    except Mismatch as exc:
        if exc.missing:
            hint = f"; not a {fmt} file?" if fmt else ""
            raise UsageError(f"{where}: no field {_path(exc.path)}{hint}") from None
        field = f"field {_path(exc.path)}: " if exc.path else ""
        raise UsageError(f"{where}: {field}expected {exc.expected}, found {exc.shown or found(exc.value)}") from None


def refuse(where, field: str, expected: str, value) -> UsageError:
    """The same one-line message for a check made outside a schema (a rule between two fields)."""
    return UsageError(f"{where}: field {field!r}: expected {expected}, found {found(value)}")


# ---------------------------------------------------------------- JSON with bounded nesting


def load_json(text: str | bytes, where, fmt: str | None = None):
    """json.loads, with every failure one line: not JSON, not UTF-8, or nested too deeply."""
    hint = f"; not a {fmt} file?" if fmt else ""
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{where}: nested too deeply to read (over ~{_parser_depth()} levels; evalkit keeps at "
                         f"most {MAX_DEPTH}){hint}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON ({exc.msg}){hint}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _parser_depth() -> int:
    import sys

    return sys.getrecursionlimit() - 100


def read_json(path: Path, fmt: str | None = None):
    """A whole JSON file; a folder, a missing or unreadable file is one line too."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path}: a folder, not a {fmt or 'JSON'} file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return load_json(data, path, fmt)


def read_toml(path: Path, what: str) -> dict:
    """A whole TOML file (`what`: "study file", "claims file"): missing, unreadable or not TOML is one line."""
    import tomllib

    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: not a readable TOML file ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path}: tables or arrays nested too deep to be a {what}") from None


def json_lines(path: Path, fmt: str | None = None, *, torn_ok: bool = False) -> list[tuple[int, object]]:
    """(line number, value) of every non-blank line of a JSONL file. `torn_ok`: a last line
    without its newline (a writer killed mid-line) is left out instead of refused."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path}: a folder, not a {fmt or 'JSONL'} file")
    out = []
    try:
        with open(path, "rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if torn_ok and not raw.endswith(b"\n"):
                    break
                if raw.strip():
                    out.append((number, load_json(raw, f"{path}:{number}", fmt)))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return out
