"""The v3 forgetting suite (issue 44): studies/data/facts-mc-v3.jsonl holds at least 600 items of the
families in KEPT, each with four distinct choices and no distractor that may also be right, as
studies/make_facts_mc_v3.py writes it (the same bytes every time); KEPT is the families whose latest
recorded base accuracy lies in the band."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
STUDIES = ROOT / "studies"
SUITE = STUDIES / "data" / "facts-mc-v3.jsonl"
CANDIDATES = STUDIES / "data" / "facts-mc-v3-candidates.jsonl"


@pytest.fixture(scope="module")
def gen():
    sys.path.insert(0, str(STUDIES))
    try:
        import make_facts_mc_v3

        yield make_facts_mc_v3
    finally:
        sys.path.remove(str(STUDIES))


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _family(row: dict) -> str:
    return row["id"].rsplit("-", 1)[0]


def _plain_variant(a: str, b: str) -> bool:
    """Independent of the generator: equal up to case or a regular English plural."""
    a, b = a.lower(), b.lower()
    for x, y in ((a, b), (b, a)):
        if y in (x, x + "s", x + "es") or (x.endswith("y") and y == x[:-1] + "ies"):
            return True
    return False


def test_the_suite_has_600_items_of_exactly_the_kept_families(gen):
    from evalkit.forgetting.multiple_choice import read_items

    rows = _rows(SUITE)
    assert len(read_items(SUITE.read_text(encoding="utf-8"), "facts-v3")) == len(rows) >= 600
    assert {_family(r) for r in rows} == set(gen.KEPT)
    assert len({r["id"] for r in rows}) == len(rows)


@pytest.mark.parametrize("path", [SUITE, CANDIDATES], ids=["suite", "candidates"])
def test_every_item_has_four_distinct_choices_and_no_second_right_one(path, gen):
    for r in _rows(path):
        choices, answer = r["choices"], r["choices"][r["answer"]]
        assert len(choices) == 4 and len({c.lower() for c in choices}) == 4, r["id"]
        for d in choices:
            if d != answer:
                assert not _plain_variant(answer, d), (r["id"], answer, d)
                assert not gen.also_right(_family(r), answer, d), (r["id"], answer, d)


def test_the_files_are_what_the_generator_writes(gen):
    assert SUITE.read_text(encoding="utf-8") == "".join(json.dumps(r) + "\n" for r in gen.build(gen.KEPT))
    assert CANDIDATES.read_text(encoding="utf-8") == "".join(json.dumps(r) + "\n" for r in gen.build(None))


def test_variants_and_clashes_are_refused(gen):
    for a, b in [("eye", "eyes"), ("Hand", "hands"), ("foot", "feet"), ("knife", "knives"), ("berry", "Berries"),
                 ("glass", "glasses"), ("Au", "au")]:
        assert gen.variant(a, b) and gen.variant(b, a), (a, b)
    for a, b in [("cat", "cut"), ("H", "He"), ("S", "Sn"), ("eye", "ear"), ("hand", "head")]:
        assert not gen.variant(a, b), (a, b)
    assert gen.also_right("material", "steel", "metal") and not gen.also_right("body", "steel", "metal")
    # body-640 and body-648, the pilot's two items with a second right choice, no longer have one
    by_id = {r["id"]: r for r in gen.build(("body",))}
    assert "eye" not in by_id["body-640"]["choices"] and "hands" not in by_id["body-648"]["choices"]


def test_kept_is_the_band_rule_on_the_latest_scores(gen):
    """Each candidate family's latest recorded base accuracy (the extension's file where it scored the
    family, the pilot's otherwise) decides KEPT: in [0.40, 0.85]."""
    pilot = json.loads((ROOT / "results" / "pilot-v3" / "pilot.json").read_text())["facts"]["families"]
    extension = json.loads((ROOT / "results" / "pilot-v3" / "facts-v3-extension.json").read_text())["families"]
    scores = {f: r["accuracy"] for f, r in pilot.items()} | {f: r["accuracy"] for f, r in extension.items()}
    families = {_family(r) for r in gen.build(None)}
    assert set(scores) == families
    assert set(gen.KEPT) == {f for f, acc in scores.items() if 0.40 <= acc <= 0.85}
    counts = {f: sum(1 for r in gen.build(None) if _family(r) == f) for f in extension}
    assert all(extension[f]["items"] == counts[f] for f in extension)
