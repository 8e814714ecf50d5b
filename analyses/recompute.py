"""Recompute one figure of a seeded study's findings from its committed samples, and compare it
with what findings.json says.

    python -m analyses.recompute results/study-v2 "figures/coverage/passk/differences/es - grpo/64"
    python -m analyses.recompute results/study-v2 claims/coverage/verdict
    python -m analyses.recompute results/study-v2 figures/budget      # a whole block

The path walks findings.json by keys separated by "/" (a claim by its `claim` name). The
figures are computed again by analyses.study_seeded from the study's files (samples.jsonl of
every passk and curve run, the trainers' logs, diff.json, forgetting's items), and the claims by
analyses.study_findings' rules; nothing is read from findings.json but the value to compare.
Exit 0 when the two agree (numbers to 1e-9), 1 when they differ (a path the recomputed findings
lack included), 2 for a path findings.json lacks, 3 when the recomputation itself fails.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

__all__ = ["recompute", "lookup", "agree"]


def lookup(tree, path: str):
    """The value at `path` ("a/b/c") in findings-shaped JSON; KeyError naming the missing key."""
    node = tree
    for key in [k for k in path.split("/") if k]:
        if isinstance(node, list):
            named = [x for x in node if isinstance(x, dict) and x.get("claim") == key]
            if named:
                node = named[0]
            elif key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise KeyError(key)
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            raise KeyError(key)
    return node


def agree(a, b, tol: float = 1e-9) -> bool:
    """Equal as JSON, numbers within `tol` (NaN equals NaN; findings.json holds no NaN: None)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(agree(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(agree(x, y, tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= tol * max(1.0, abs(a), abs(b))
    return a == b


def recompute(root: Path) -> dict:
    """findings.json's content, computed afresh from the study folder's files."""
    from analyses.study_findings import seeded_result

    return seeded_result(Path(root))  # as the file holds it: keys as strings


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(args) != 2:
        print("usage: python -m analyses.recompute STUDY_FOLDER PATH (see --help)", file=sys.stderr)
        return 2
    root, path = Path(args[0]), args[1]
    findings = root / "findings" / "findings.json"
    if not findings.is_file():
        print(f"error: {findings}: no findings (run the study's findings stage first)", file=sys.stderr)
        return 2
    stored = json.loads(findings.read_text(encoding="utf-8"))
    try:
        was = lookup(stored, path)
    except KeyError as exc:
        print(f"error: {path}: no key {exc} in {findings}", file=sys.stderr)
        return 2
    try:
        fresh = recompute(root)
    except Exception as exc:  # a run the figures need is missing or unreadable: not a disagreement
        print(f"error: recomputing {root}'s figures failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    try:
        now = lookup(fresh, path)
    except KeyError:
        now = "<not in the recomputed findings>"
    print(json.dumps({"path": path, "findings.json": was, "recomputed": now}, indent=1))
    same = agree(was, now)
    print("agree" if same else "DIFFER", file=sys.stderr)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
