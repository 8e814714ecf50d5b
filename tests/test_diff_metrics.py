"""metrics.weights on hand-built arrays: every figure checked against a value worked out by hand."""

import math

import numpy as np
import pytest

from evalkit.checkpoints.tensors import layer_index, module_kind
from metrics import weights as W


def bf16(values) -> np.ndarray:
    """Exact bf16 bit patterns of values that bf16 represents exactly."""
    f32 = np.asarray(values, np.float32)
    bits = (f32.view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal(W.bf16_to_f32(bits), f32), "test value not exact in bf16"
    return bits


def run(a_bits, b_bits, a, b, **kw):
    """Stats with deltas computed lazily and given whole: both must agree exactly."""
    lazy, given = W.new_stats(), W.new_stats()
    W.chunk_stats(lazy, W.Chunk(a_bits, b_bits, a, b), atol=kw.get("atol", 1e-5), rtol=kw.get("rtol", W.BF16_RTOL))
    W.chunk_stats(given, W.Chunk(a_bits, b_bits, a, b, W.delta(a, b)), atol=kw.get("atol", 1e-5),
                  rtol=kw.get("rtol", W.BF16_RTOL))
    lazy, given = W.finish_stats(lazy), W.finish_stats(given)
    assert lazy.keys() == given.keys()
    for key, value in lazy.items():
        assert value == given[key] or (math.isnan(value) and math.isnan(given[key])), key
    return lazy


def test_bf16_planted_changes():
    n = 1000
    base = np.ones(n, np.float32)
    other = base.copy()
    other[[3, 17, 500]] = 1.5  # 3 changes of 0.5
    other[[40, 41]] = 1.0078125  # 2 changes of one bf16 ulp (2^-7)
    ab, bb = bf16(base), bf16(other)
    s = run(ab, bb, W.bf16_to_f32(ab), W.bf16_to_f32(bb))
    assert (s["n"], s["changed_bits"], s["changed_atol"], s["changed_rel"]) == (n, 5, 5, 5)
    sq = 3 * 0.25 + 2 * 2.0**-14
    assert s["update_norm"] == pytest.approx(math.sqrt(sq), rel=1e-12)
    assert s["rel_norm"] == pytest.approx(math.sqrt(sq) / math.sqrt(n), rel=1e-12)
    assert s["max_abs_update"] == 0.5
    # top 0.1% of 1000 = 1 entry (0.25), top 1% = 10 entries (all of it)
    assert s["top_0.1pct_share"] == pytest.approx(0.25 / sq, rel=1e-12)
    assert s["top_1pct_share"] == pytest.approx(1.0)
    assert s["top_10pct_share"] == pytest.approx(1.0)


def test_fp32_tolerances_separate_tiny_updates():
    base = np.full(100, 1.0, np.float32)
    other = base.copy()
    other[0] = 1.0 + 2.0**-23  # one fp32 ulp: below atol
    other[1] = 1.0 + 2.0**-12  # above atol, below half a bf16 ulp: absorbed in bf16
    other[2] = 1.0 + 2.0**-6  # survives bf16
    s = run(base.view(np.uint32), other.view(np.uint32), base, other)
    assert (s["changed_bits"], s["changed_atol"], s["changed_rel"]) == (3, 2, 1)
    assert s["max_abs_update"] == 2.0**-6


def test_signed_zero_and_nan_conventions():
    base = np.array([0.0, 1.0, np.nan, 2.0, np.inf], np.float32)
    other = np.array([-0.0, 1.0, np.nan, 2.5, np.inf], np.float32)
    ab, bb = bf16(base[:2]), bf16(other[:2])
    s = run(ab, bb, W.bf16_to_f32(ab), W.bf16_to_f32(bb))
    # +0 -> -0: the bits changed, the delta is 0
    assert (s["changed_bits"], s["changed_atol"], s["update_norm"]) == (1, 0, 0.0)
    s = run(base.view(np.uint32), other.view(np.uint32), base, other)
    assert s["changed_bits"] == 2  # -0 and 2.5; the identical NaN and Inf are unchanged
    assert (s["nan_base"], s["nan_other"], s["inf_base"], s["inf_other"]) == (1, 1, 1, 1)
    assert s["nonfinite_pairs"] == 2
    assert s["update_norm"] == 0.5 and s["max_abs_update"] == 0.5
    assert s["weight_norm"] == pytest.approx(math.sqrt(1 + 4))


def test_nan_payload_change_counts_as_changed():
    base = np.array([0x7FC0, 0x3F80], np.uint16)  # bf16 NaN, 1.0
    other = np.array([0x7FC1, 0x3F80], np.uint16)  # another NaN
    s = run(base, other, W.bf16_to_f32(base), W.bf16_to_f32(other))
    assert s["changed_bits"] == 1 and s["changed_atol"] == 0 and s["nonfinite_pairs"] == 1


@pytest.mark.parametrize("moved", [700, 7000])  # the sparse (<= 1/4 changed) and dense paths
def test_chunks_merge_to_the_same_figures(moved):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(10_000).astype(np.float32)
    b = a.copy()
    idx = rng.choice(a.size, moved, replace=False)
    b[idx] += rng.standard_normal(moved).astype(np.float32) * np.float32(0.01)
    whole = run(a.view(np.uint32), b.view(np.uint32), a, b)
    d = b.astype(np.float64) - a  # the definitions, computed directly
    assert whole["changed_bits"] == moved
    assert whole["changed_atol"] == np.count_nonzero(np.abs(d) > 1e-5)
    assert whole["changed_rel"] == np.count_nonzero(np.abs(d) > W.BF16_RTOL * np.abs(a))
    assert whole["update_norm"] == pytest.approx(np.sqrt((d**2).sum()), rel=1e-6)
    assert whole["max_abs_update"] == pytest.approx(np.abs(d).max(), rel=1e-6)
    top = np.sort(d**2)[::-1]
    for q in W.CONCENTRATION_QS:  # histogram estimate vs a sort: within the cut bin's spread
        exact = top[: math.ceil(q * d.size)].sum() / top.sum()
        assert whole[f"top_{q * 100:g}pct_share"] == pytest.approx(exact, rel=0.02)
    acc = W.new_stats()
    for lo in range(0, a.size, 999):
        x, y = a[lo:lo + 999], b[lo:lo + 999]
        W.chunk_stats(acc, W.Chunk(x.view(np.uint32), y.view(np.uint32), x, y), atol=1e-5)
    parts = W.finish_stats(acc)
    for key, value in whole.items():
        assert parts[key] == pytest.approx(value, rel=1e-6), key
    assert parts["changed_bits"] == moved


def test_concentration_is_exact_against_a_sort_for_distinct_bins():
    # values spaced so that every entry has its own histogram bin: the share must equal a sort
    d = 2.0 ** np.arange(-20, 0, 0.25)
    count, sq = np.zeros(W.HIST_BINS, np.int64), np.zeros(W.HIST_BINS)
    bins = (d.astype(np.float32).view(np.uint32) >> 16).astype(np.intp)
    assert len(set(bins)) == d.size
    np.add.at(count, bins, 1)
    np.add.at(sq, bins, d.astype(np.float32).astype(np.float64) ** 2)
    srt = np.sort(d.astype(np.float32).astype(np.float64) ** 2)[::-1]
    for q in (0.001, 0.01, 0.1, 0.5):
        k = math.ceil(q * d.size)
        assert W.concentration(count, sq, q) == pytest.approx(srt[:k].sum() / srt.sum(), rel=1e-12)
    assert math.isnan(W.concentration(np.zeros(W.HIST_BINS, np.int64), np.zeros(W.HIST_BINS), 0.1))


def test_update_rank_of_planted_low_rank_update():
    rng = np.random.default_rng(1)
    d = (rng.standard_normal((40, 3)) @ rng.standard_normal((3, 24))).astype(np.float32)
    assert W.update_rank(d) == {"rank": 3, "min_dim": 24, "rank_ratio": 3 / 24}
    assert W.update_rank(np.zeros((5, 4), np.float32))["rank"] == 0


def test_overlap_of_two_planted_updates():
    base = np.ones(100, np.float32)
    a, b = base.copy(), base.copy()
    a[0:20] += 0.5  # A changes 0..19
    b[10:17] += 0.5  # B changes 10..29, agreeing in sign on 10..16
    b[17:20] -= 0.5
    b[20:30] += 0.5
    da, db = W.delta(base, a), W.delta(base, b)
    s = W.finish_overlap(W.overlap_chunk(base.view(np.uint32), a.view(np.uint32),
                                         b.view(np.uint32), da, db))
    assert (s["changed_a"], s["changed_b"], s["changed_both"]) == (20, 20, 10)
    assert s["jaccard"] == pytest.approx(10 / 30)
    assert s["jaccard_chance"] == pytest.approx(0.04 / (0.4 - 0.04))
    assert s["jaccard_over_chance"] == pytest.approx(3.0)
    assert s["cosine"] == pytest.approx((7 - 3) * 0.25 / 5.0)
    assert s["sign_agreement"] == pytest.approx(0.7)


@pytest.mark.parametrize("name,kind,layer", [
    ("model.embed_tokens.weight", "embedding", None),
    ("model.layers.3.self_attn.q_proj.weight", "q_proj", 3),
    ("model.layers.12.self_attn.k_proj.bias", "k_proj", 12),
    ("model.layers.0.self_attn.v_proj.weight", "v_proj", 0),
    ("model.layers.0.self_attn.o_proj.weight", "o_proj", 0),
    ("model.layers.7.mlp.gate_proj.weight", "mlp_gate", 7),
    ("model.layers.7.mlp.up_proj.weight", "mlp_up", 7),
    ("model.layers.7.mlp.down_proj.weight", "mlp_down", 7),
    ("model.layers.1.input_layernorm.weight", "norm", 1),
    ("model.layers.1.post_attention_layernorm.weight", "norm", 1),
    ("model.norm.weight", "norm", None),
    ("lm_head.weight", "lm_head", None),
    ("model.rotary_emb.inv_freq", "other", None),
])
def test_module_kinds_and_layers(name, kind, layer):
    assert (module_kind(name), layer_index(name)) == (kind, layer)
