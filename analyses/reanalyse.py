"""Re-analyse a seeded study under pre-registered claims (analyses.preregistered), from its files only.

    python -m analyses.reanalyse results/study-v2 --claims studies/seed-cpu-v2.claims.toml --out results/study-v2-reanalysis
    python -m analyses.reanalyse results/study-v2 --claims studies/seed-cpu-v2.claims.toml --out results/study-v2-reanalysis --check

Writes findings.json, findings.md and report/ (index.html, report.md, figures, tables) into
--out; never writes the study folder. `--check` writes nothing: it computes everything again
and compares it with --out's findings.json (numbers to 1e-9; the verdict code's hashes, which
change with any edit of that code, left out), printing `agree` (exit 0) or the first path that
differs (exit 1). A study that recorded no registration (v2) is read under the claims file's
own, marked retrospective, and the rules of its own findings.json that were changed after its
data (analyses.rule_history) are listed with the verdicts under both versions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["write_reanalysis", "reanalysis", "main"]

NOT_COMPARED = ("verdict_code",)  # hashes of the code: they change with any edit, the figures need not


def reanalysis(root: Path, claims_path: Path | None, *, command: str = "") -> dict:
    """findings.json's content (plain JSON): analyses.preregistered's, with the study's revised rules."""
    from analyses.preregistered import preregistered_findings
    from evalkit.jsonio import plain_json

    state = json.loads((Path(root) / "study.json").read_text(encoding="utf-8"))
    # the rules of analyses.study_findings revised after v2's data concern a study re-read from its own
    # findings.json; a study that registered its claims is judged by them, not by those rules
    history = [] if state.get("registration") else _rule_history(Path(root))
    result = preregistered_findings(root, claims_path, command=command, history=history)
    return json.loads(json.dumps(plain_json(result)))


def _rule_history(root: Path) -> list[dict]:
    from analyses.rule_history import revised_rules

    path = Path(root) / "findings" / "findings.json"
    if not path.is_file():
        return []
    return revised_rules(json.loads(path.read_text(encoding="utf-8")))


def write_reanalysis(root: Path, claims_path: Path | None, out: Path, *, command: str = "") -> dict:
    """findings.json, findings.md and report/ in `out` (module docstring)."""
    from analyses.reanalysis_tables import reanalysis_markdown
    from analyses.report.claims_sections import write_claims_report
    from evalkit.jsonio import write_atomic, write_json_atomic

    result = reanalysis(root, claims_path, command=command)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "findings.json", result)
    write_atomic(out / "findings.md", lambda fh: fh.write(reanalysis_markdown(result)))
    write_claims_report(result, out / "report")
    return result


def _strip(tree):
    if isinstance(tree, dict):
        return {k: _strip(v) for k, v in tree.items() if k not in NOT_COMPARED}
    if isinstance(tree, list):
        return [_strip(x) for x in tree]
    return tree


def _first_difference(a, b, path: str = "") -> str | None:
    from analyses.recompute import agree

    if isinstance(a, dict) and isinstance(b, dict):
        for k in dict.fromkeys([*a, *b]):
            if k not in a or k not in b:
                return f"{path}/{k}"
            found = _first_difference(a[k], b[k], f"{path}/{k}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}/{i}")
            if found:
                return found
        return None
    return None if agree(a, b) else path or "/"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m analyses.reanalyse", description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--claims", type=Path, default=None, help="the claims file (default: study.json's)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check", action="store_true", help="compare with --out's findings.json, write nothing")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command = ("python -m analyses.reanalyse " + " ".join([str(args.study)] + (
        [f"--claims {args.claims}"] if args.claims else []) + [f"--out {args.out}"]))
    from evalkit.errors import UsageError

    try:
        if not args.check:
            write_reanalysis(args.study, args.claims, args.out, command=command)
            print(f"wrote {args.out / 'findings.json'}, findings.md, report/index.html")
            return 0
        stored = json.loads((args.out / "findings.json").read_text(encoding="utf-8"))
        fresh = reanalysis(args.study, args.claims, command=command)
    except (UsageError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    where = _first_difference(_strip(stored), _strip(fresh))
    print("agree" if where is None else f"DIFFER at {where}", file=sys.stderr)
    return 0 if where is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
