"""The verdict rules of analyses.study_findings that were changed after a study's data was read,
as first written, so that a re-analysis shows each claim's verdict under both.

    rows = revised_rules(json.loads(Path("results/study-v2/findings/findings.json").read_text()))

Two rules were changed on 2026-12-05 (commit c6ad05b) after the v2 study's figures had been read;
the code as first written is at commit b42e26b (analyses/study_findings.py):

- `coverage_verdict`: as first written, ES - GRPO holding 0 was `inconclusive` whatever GRPO -
  base said; revised, GRPO - base above 0 (GRPO widened pass@k) with ES - GRPO not above 0 is
  `contradicted`.
- `es_concentrated` (in the sparsity rule): as first written, ES's top-1% share of ||dW||^2 above
  GRPO's made ES "more concentrated"; revised, it must also exceed an i.i.d. Gaussian update's
  share by 5%.

Each row reads the figures the study's own findings.json holds (which `python -m
analyses.recompute` checks against the samples) and applies both versions; the revised verdict
must equal the file's, and the row says so.
"""

from __future__ import annotations

__all__ = ["coverage_first_written", "concentrated_first_written", "revised_rules", "FIRST_WRITTEN", "REVISED"]

FIRST_WRITTEN, REVISED = "b42e26b", "c6ad05b"


def coverage_first_written(es_grpo: dict | None, grpo_base: dict | None, es_base: dict | None) -> str:
    """analyses.study_findings.coverage_verdict at b42e26b."""
    from analyses.study_findings import side

    signs = side(es_grpo), side(grpo_base), side(es_base)
    if None in signs:
        return "not tested"
    d, g, e = signs
    if d < 0:
        return "contradicted"
    if d > 0:
        return "supported" if g < 0 and e >= 0 else "partly supported"
    return "inconclusive"


def concentrated_first_written(es_share: float, grpo_share: float, gaussian_share: float) -> bool:
    """The concentration test at b42e26b: ES's top-q share above GRPO's (no Gaussian reference)."""
    return es_share > grpo_share


def _coverage(claim: dict) -> dict:
    from analyses.study_findings import coverage_verdict, half_width

    settings = {}
    for kind, row in (claim.get("settings") or {}).items():
        args = row.get("es - grpo"), row.get("grpo - base"), row.get("es - base")
        first = coverage_first_written(*args)
        settings[kind] = {"k": row.get("k"), "first_written": first, "revised": coverage_verdict(*args)[0],
                          "detectable_first_written": half_width(args[0]) if first == "inconclusive" else None}
    main = settings.get(claim.get("setting")) or {}
    return {"claim": "coverage", "rule": "coverage_verdict", "statement": claim["statement"],
            "first_written": main.get("first_written"), "revised": main.get("revised"),
            "detectable_first_written": main.get("detectable_first_written"), "by_setting": settings,
            "what_changed": "GRPO - base above 0 (GRPO widened pass@k) with ES - GRPO holding 0: inconclusive -> "
                            "contradicted"}


def _sparsity(claim: dict) -> dict:
    from analyses.study_findings import es_concentrated, sparsity_verdict

    bf16 = claim.get("bf16") or {}
    sparser = ([bf16["es"]["changed_frac_bits"] < bf16["grpo"]["changed_frac_bits"]]
               if {"es", "grpo"} <= set(bf16) and all(bf16[m]["changed_frac_bits"] for m in ("es", "grpo")) else None)
    first, revised = [], []
    for row in (claim.get("matched") or {}).values():
        if row.get("matched") is None:
            continue
        q = row["qs"].index(0.01) if 0.01 in row["qs"] else 0
        shares = row["top_share"]["es"][q], row["top_share"]["grpo"][q], row["gaussian_top_share"][q]
        first.append(concentrated_first_written(*shares))
        revised.append(es_concentrated(*shares))
    return {"claim": "sparsity", "rule": "es_concentrated", "statement": claim["statement"],
            "first_written": sparsity_verdict(sparser, first or None)[0],
            "revised": sparsity_verdict(sparser, revised or None)[0],
            "concentrated_first_written": first, "concentrated_revised": revised,
            "what_changed": "ES more concentrated: top-1% share above GRPO's -> above GRPO's and over 5% above an "
                            "i.i.d. Gaussian update's"}


def revised_rules(findings: dict) -> list[dict]:
    """Per claim of a seeded study's findings.json whose rule was revised after the data: its
    verdict as first written and as revised, and whether the revised one is the file's."""
    rows = []
    for claim in findings.get("claims", []):
        make = {"coverage": _coverage, "sparsity": _sparsity}.get(claim["claim"])
        if make is None:
            continue
        row = make(claim)
        row.update(first_written_commit=FIRST_WRITTEN, revised_commit=REVISED, in_findings=claim["verdict"],
                   revised_is_the_files=row["revised"] == claim["verdict"],
                   changed_the_verdict=row["revised"] != row["first_written"])
        rows.append(row)
    return rows
