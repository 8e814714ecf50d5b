"""Sparsity tested by function (issue 44): exact top-q masks of an update, the masked models they
make (q = 1 the trained model, q = 0 the base, bitwise), and the gain they keep."""

from __future__ import annotations

import json

import numpy as np
import pytest

from metrics.masking import gain_retained, mask_keys, select, top_count, top_thresholds


def _select_all(arrays, k):
    [(threshold, ties)] = top_thresholds(lambda: iter(arrays), [k])
    masks, taken = [], 0
    for a in arrays:
        m, used = select(a, threshold, ties - taken)
        masks.append(m)
        taken += used
    return masks


def _reference(arrays, k):
    """The k largest keys by a stable sort: larger first, then array order, then index."""
    flat = np.concatenate(arrays).astype(np.int64)
    order = np.lexsort((np.arange(flat.size), -flat))[:k]
    chosen = np.zeros(flat.size, bool)
    chosen[order] = True
    return np.split(chosen, np.cumsum([a.size for a in arrays])[:-1])


@pytest.mark.parametrize("k", [0, 1, 7, 50, 333, 1000])
def test_radix_select_picks_exactly_the_top_k_with_ties_in_order(k):
    rng = np.random.default_rng(1)
    values = [rng.normal(size=n).astype(np.float32) for n in (300, 500, 200)]
    values[1][::3] = values[0][0]  # many ties, across arrays, and some in the cut's bin
    values[2][:50] = 0.0
    keys = [mask_keys(v, None, "abs") for v in values]
    got = _select_all(keys, k)
    assert sum(int(m.sum()) for m in got) == k
    for g, r in zip(got, _reference(keys, k), strict=True):
        assert np.array_equal(g, r)


def test_keys_order_like_values_and_rel_divides_by_the_base():
    d = np.array([0.0, -3.0, 1e-30, 2.0, 5.0, 0.0], np.float32)
    w = np.array([1.0, 1.0, 1.0, 0.0, 10.0, 0.0], np.float32)
    assert np.array_equal(np.argsort(mask_keys(d, w, "abs"), kind="stable"), np.argsort(np.abs(d), kind="stable"))
    rel = mask_keys(d, w, "rel").view(np.float32)
    assert rel[3] == np.inf and rel[5] == 0.0 and rel[4] == pytest.approx(0.5) and rel[1] == 3.0
    assert np.array_equal(mask_keys(d, w, "random", seed=[0, 1]), mask_keys(d, w, "random", seed=[0, 1]))
    with pytest.raises(ValueError, match="choose one of"):
        mask_keys(d, w, "size")


def test_top_count():
    assert [top_count(q, 100) for q in (0, 0.01, 0.05, 0.2, 1.0)] == [0, 1, 5, 20, 100]
    assert top_count(0.05, 7) == 1 and top_count(1e-9, 10) == 1
    with pytest.raises(ValueError):
        top_count(1.5, 10)


def test_gain_retained():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, 80).astype(float)
    trained = np.maximum(base, rng.integers(0, 2, 80))
    assert gain_retained(base, trained, trained)["retained"] == 1.0
    assert gain_retained(base, trained, base)["retained"] == 0.0
    half = np.where(np.arange(80) % 2 == 0, trained, base)
    g = gain_retained(base, trained, half, n_boot=4000)
    assert g["retained_ci"][0] < g["retained"] < g["retained_ci"][1]
    assert g["masked_gain"] == pytest.approx(half.mean() - base.mean())
    flat = gain_retained(base, base, base)
    assert np.isnan(flat["retained"]) and flat["undefined_frac"] == 1.0


torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def trained_pair(tmp_path_factory):
    """(base folder, trained folder): the tiny model, and a copy with a sparse-ish update."""
    from helpers.tinymodel import make_tiny_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("masking")
    base = make_tiny_model(root / "base", seed=0)
    model = AutoModelForCausalLM.from_pretrained(base)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            step = torch.randn(p.shape, generator=gen) * 0.01
            step[torch.rand(p.shape, generator=gen) < 0.5] = 0.0  # exact zeros: ties at 0
            p.add_(step * (1 + i % 3))
    model.save_pretrained(root / "trained")
    AutoTokenizer.from_pretrained(base).save_pretrained(root / "trained")
    return base, root / "trained"


def _state(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _pairs(base, trained):
    from evalkit.checkpoints import open_checkpoint
    from evalkit.masking import pairs_of

    return pairs_of(open_checkpoint(str(base)), open_checkpoint(str(trained)))


def _same_bits(a, b):
    return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


@pytest.mark.parametrize("by", ["abs", "rel", "random"])
@pytest.mark.parametrize("scope", ["global", "tensor"])
def test_q1_is_the_trained_model_and_q0_the_base_bitwise(trained_pair, by, scope):
    from evalkit.masking import masked_tensors

    base, trained = trained_pair
    pairs = _pairs(base, trained)
    b, t = _state(base), _state(trained)
    full, figures = masked_tensors(pairs, by, scope, 1.0)
    assert figures["kept_frac"] == 1.0 and figures["norm_share_kept"] == 1.0
    assert full.keys() == t.keys() and all(_same_bits(full[k], t[k]) for k in t)
    none, figures = masked_tensors(pairs, by, scope, 0.0)
    assert figures["kept"] == 0 and all(_same_bits(none[k], b[k]) for k in b)


@pytest.mark.parametrize("scope", ["global", "tensor"])
@pytest.mark.parametrize("q", [0.01, 0.2])
def test_abs_mask_keeps_exactly_the_largest_changes(trained_pair, scope, q):
    from evalkit.masking import masked_tensors

    base, trained = trained_pair
    b, t = _state(base), _state(trained)
    names = sorted(t)
    got, figures = masked_tensors(_pairs(base, trained), "abs", scope, q)
    deltas = [(t[n] - b[n]).abs().view(-1).numpy() for n in names]
    keys = [mask_keys(d, None, "abs") for d in deltas]
    if scope == "global":
        expected = _reference(keys, top_count(q, sum(d.size for d in deltas)))
    else:
        expected = [_reference([k], top_count(q, k.size))[0] for k in keys]
    for n, e in zip(names, expected, strict=True):
        kept = (got[n] == t[n]).view(-1).numpy() & (t[n] != b[n]).view(-1).numpy()
        assert np.array_equal(kept, e & (deltas[names.index(n)] != 0)), n  # an unchanged entry is both sides
        assert torch.equal(torch.where(torch.from_numpy(e).view(t[n].shape), t[n], b[n]), got[n])
    assert figures["kept"] == sum(int(e.sum()) for e in expected)


def test_run_masked_end_to_end(trained_pair, tmp_path):
    from evalkit.masking import MaskOptions, run_masked
    from evalkit.options import PasskOptions

    base, trained = trained_pair
    task = tmp_path / "t.jsonl"
    task.write_text("".join(json.dumps({"id": f"p{i}", "question": f"{i}?", "answer": "1"}) + "\n" for i in range(6)))
    evaluation = PasskOptions(model=str(trained), task=str(task), n=1, ks=(1,), temperature=0.0, max_new_tokens=2,
                              grader_workers=1, device="cpu")
    opts = MaskOptions(fractions=(0.05, 1.0), mask_by=("abs",), scope=("global",))
    report = run_masked(str(base), str(trained), opts, evaluation, tmp_path / "out")
    rows = {r["label"]: r for r in report["rows"]}
    assert set(rows) == {"abs-global-q0.05", "abs-global-q1"}
    assert rows["abs-global-q1"]["same_as"] == "trained" and rows["abs-global-q1"]["run"] == "runs/trained"
    assert rows["abs-global-q0.05"]["run"] == "masks/abs-global-q0.05/run"
    assert (tmp_path / "out" / "masks" / "abs-global-q0.05" / "run" / "summary.json").is_file()
    assert not (tmp_path / "out" / "masks" / "abs-global-q0.05" / "model").exists()  # weights deleted
    assert (tmp_path / "out" / "masked.csv").is_file() and rows["abs-global-q0.05"]["problems"] == 6
    again = run_masked(str(base), str(trained), opts, evaluation, tmp_path / "out")  # resumes: nothing redone
    assert json.dumps(again["rows"]) == json.dumps(report["rows"])  # NaN (no gain on a random model) too


def test_cli_lists_of_floats_and_words():
    from evalkit.cli_options import build
    from evalkit.errors import UsageError
    from evalkit.masking import MaskOptions

    opts = build(MaskOptions, {"fractions": "0.01, 0.05,1", "mask_by": "abs,random", "scope": "tensor"}).validate()
    assert opts.fractions == (0.01, 0.05, 1.0) and opts.mask_by == ("abs", "random") and opts.scope == ("tensor",)
    with pytest.raises(UsageError, match="--fractions"):
        build(MaskOptions, {"fractions": "1%"})
    with pytest.raises(UsageError, match="--mask-by"):
        build(MaskOptions, {"mask_by": "size"}).validate()
