"""The numeric value of a constant LaTeX expression, without sympy: the grader's fast path.

    value("2\\sqrt{3}")          # 3.4641016...
    value("\\frac{\\pi}{4} + 1")  # 1.7853981...
    value("x + 1")               # None: a variable
    value("7^{7^{7^{7}}}")       # None: too large (math-verify then decides, under its deadline)

Numbers, `+ - * / ^`, `\\frac`, `\\sqrt` (and `\\sqrt[n]`), `\\pi`, `\\cdot`, `\\times`,
`\\div`, parentheses and braces, and implicit products (`2\\pi`, `3(4)`). Anything else
(letters, functions, `\\pm`, a mixed number such as `1\\frac{1}{4}`, sets) has no value
here, and the comparison goes to math-verify. Evaluated in floats with a whitelist of
AST nodes; an overflow or a huge exponent has no value. With `variables`, the named
one-letter variables take the given values (`value("2x+1", variables={"x": 3.0})` is 7.0,
`value("i(2-i)", variables={"i": 1j})` is (1+2j)): math_forms checks equations and complex
constants with it.
"""

from __future__ import annotations

import ast
import cmath
import math
import operator
import re

__all__ = ["value"]

_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*|\.\d+)|(\\[a-zA-Z]+)|(.))")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def value(latex: str, variables: dict[str, float | complex] | None = None) -> float | complex | None:
    """The value of `latex` (module docstring), or None."""
    if len(latex) > 200 or re.search(r"\d\s*\\[dt]?frac", latex):  # a mixed number reads 1\frac14 = 5/4
        return None
    latex = re.sub(r"(\d)[eE]([-+]?\d+)(?![\d.])", r"\1*10^{\2}", latex)  # 3e8 is 3 * 10^8, not 3 * e * 8
    python = _to_python(latex, variables or {})
    if python is None:
        return None
    try:
        result = _eval(ast.parse(python, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, TypeError, RecursionError):
        return None
    return result if result is not None and cmath.isfinite(result) else None


def _to_python(latex: str, variables: dict) -> str | None:
    """LaTeX tokens as a Python expression (`\\frac{a}{b}` -> `((a)/(b))`), or None."""
    out, pos, factor_end = [], 0, False
    text = latex.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            break
        number, command, char = match.groups()
        pos = match.end()
        if char is not None and char.isspace():
            continue
        if char == "e" and "e" not in variables:
            char, number = None, "2.718281828459045"  # Euler's number, in a constant expression
        variable = char is not None and char in variables
        starts_factor = number is not None or command in ("\\frac", "\\sqrt", "\\pi") or char in ("(", "{") or variable
        if starts_factor and factor_end:
            out.append("*")  # 2\pi, 3(4), 2x: an implicit product
        if number is not None:
            out.append(number)
        elif variable:
            out.append(f"({variables[char]!r})")
        elif command is not None:
            piece = _command(command, text, pos, variables)
            if piece is None:
                return None
            out.append(piece[0])
            pos = piece[1]
        elif char == "^" and re.match(r"\s*\d{2}", text[pos:]):
            return None  # TeX reads 2^34 as 2^3 * 4
        else:
            mapped = {"^": "**", "{": "(", "}": ")", "(": "(", ")": ")", "+": "+", "-": "-", "*": "*", "/": "/"}
            if char not in mapped:
                return None
            out.append(mapped[char])
        factor_end = number is not None or command is not None or char in (")", "}") or variable
    return "".join(out) or None


def _command(command: str, text: str, pos: int, variables: dict) -> tuple[str, int] | None:
    """(python, new position) for one LaTeX command, or None when it has no value here."""
    if command in ("\\cdot", "\\times"):
        return "*", pos
    if command == "\\div":
        return "/", pos
    if command == "\\pi":
        return "(3.141592653589793)", pos
    if command == "\\frac":
        num, pos = _group(text, pos)
        den, pos = _group(text, pos) if num is not None else (None, pos)
        if num is None or den is None or (a := _to_python(num, variables)) is None or (b := _to_python(den, variables)) is None:
            return None
        return f"(({a})/({b}))", pos
    if command == "\\sqrt":
        root = "2"
        if text.startswith("[", pos):
            end = text.find("]", pos)
            if end < 0 or (root := _to_python(text[pos + 1 : end], variables)) is None:
                return None
            pos = end + 1
        body, pos = _group(text, pos)
        if body is None or (inner := _to_python(body, variables)) is None:
            return None
        return f"(({inner})**(1/({root})))", pos
    return None


def _group(text: str, pos: int) -> tuple[str | None, int]:
    """A braced group, or one digit, at text[pos:] (TeX's one-token argument)."""
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if pos < len(text) and text[pos].isdigit():
        return text[pos], pos + 1
    if pos >= len(text) or text[pos] != "{":
        return None, pos
    return braced(text, pos)


def braced(text: str, pos: int) -> tuple[str | None, int]:
    """What the brace at text[pos] encloses and the position after its closing brace; (None, pos)
    when it is never closed."""
    depth = 0
    for end in range(pos, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[pos + 1 : end], end + 1
    return None, pos


def _eval(node: ast.AST) -> float | complex | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)):
        return node.value if isinstance(node.value, complex) else float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _eval(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        op = _BINARY.get(type(node.op))
        return None if op is None else op(left, right)
    return None


def _power(left: float | complex, right: float | complex) -> float | complex | None:
    """`left ** right` for a real exponent up to 1000 (an integer one for a negative or complex base)."""
    if isinstance(right, complex) or abs(right) > 1000:
        return None
    if isinstance(left, complex) or left < 0:
        return left ** int(right) if right == int(right) else None
    return math.pow(left, right)
