"""The compiled chunk kernels (C: evalkit.diff_ckernel; numba: evalkit.diff_kernels) give
exactly the numpy reference's figures (diff.json, tensors.csv, overlap.csv byte for byte) on
planted bf16, fp16 and fp32 checkpoints with NaN, Inf, signed zeros and odd chunk lengths."""

import numpy as np
import pytest
from helpers.checkpoints import CONFIG, SHAPES, write_st

from evalkit import diff_ckernel
from evalkit import diff_kernels as K
from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs
from metrics import weights as W

COMPILED = [
    pytest.param("c", marks=pytest.mark.skipif(not diff_ckernel.available(),
                                               reason=f"C kernels: {diff_ckernel.reason()}")),
    pytest.param("numba", marks=pytest.mark.skipif(not K.available(), reason="no numba")),
]
MODULES = {"c": diff_ckernel, "numba": K}


def to_dtype_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    f32 = values.astype(np.float32)
    if dtype == "BF16":
        return (f32.view(np.uint32) >> 16).astype(np.uint16)
    with np.errstate(over="ignore"):  # beyond fp16's range: Inf, as intended
        return f32.astype(np.float16).view(np.uint16) if dtype == "F16" else f32


def awkward(seed: int) -> dict:
    """Base weights with NaN, Inf, +0 and huge values; every value exact in bf16 and fp16."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in SHAPES.items():
        v = (rng.standard_normal(shape) * 0.05).astype(np.float16).astype(np.float32)
        v = (to_dtype_bits(v, "BF16").astype(np.uint32) << 16).view(np.float32)
        flat = v.reshape(-1)
        flat[:6] = [np.nan, np.inf, -np.inf, 0.0, 1.0, 60000.0]
        out[name] = v
    return out


def update(base: dict, seed: int) -> dict:
    """Sparse large changes, dense tiny ones (absorbed or not), NaN/Inf, +0 -> -0, overflow."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, v in base.items():
        w = v.copy().reshape(-1)
        idx = rng.choice(w.size, w.size // 10, replace=False)
        w[idx] += rng.standard_normal(idx.size).astype(np.float32) * 0.01
        dense = rng.random(w.size) < 0.5
        w[dense] += np.float32(1e-4) * np.sign(rng.standard_normal(dense.sum())).astype(np.float32)
        w[:6] = [np.nan, np.inf, 1.0, -0.0, -np.inf, -60000.0]
        w[6] = np.nan if seed % 2 else w[6]
        out[name] = w.reshape(v.shape)
    return out


def save(folder, values: dict, dtype: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(__import__("json").dumps(CONFIG))
    write_st(folder / "model.safetensors", {n: (dtype, to_dtype_bits(v, dtype)) for n, v in values.items()})
    return str(folder)


def outputs(args, tmp_path, tag: str, **kw) -> dict:
    result = diff_checkpoints(args, DiffOptions(**kw))
    files = write_outputs(result, tmp_path / tag)
    return {f.name: f.read_bytes() for f in files}


@pytest.mark.parametrize("kernel", COMPILED)
@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
@pytest.mark.parametrize("chunk", [1 << 19, 203])
def test_compiled_and_numpy_write_identical_outputs(tmp_path, kernel, dtype, chunk):
    base = awkward(0)
    dirs = [save(tmp_path / k, v, dtype)
            for k, v in (("base", base), ("a", update(base, 1)), ("b", update(base, 2)))]
    for args in (dirs[:2], dirs):
        fast = outputs(args, tmp_path, f"{kernel}{len(args)}", kernel=kernel, chunk_elems=chunk)
        ref = outputs(args, tmp_path, f"numpy{len(args)}", kernel="numpy", chunk_elems=chunk)
        assert fast.keys() == ref.keys() and len(fast) == len(args)  # csv, json (+ overlap)
        for name in ref:
            assert fast[name] == ref[name], (dtype, len(args), name)
    s = diff_checkpoints(dirs[:2], DiffOptions(kernel=kernel)).summary["updates"]["other"]
    o = s["overall"]
    assert (o["nan_base"], o["inf_base"]) == (len(SHAPES), 2 * len(SHAPES))
    assert o["nonfinite_pairs"] >= 3 * len(SHAPES)
    assert 0 < o["changed_rel"] < o["changed_bits"] and o["top_1pct_share"] > 0.01


@pytest.mark.parametrize("kernel", COMPILED)
def test_as_dtype_goes_through_the_kernel_identically(tmp_path, kernel):
    base = awkward(3)
    dirs = [save(tmp_path / "base", base, "F32"), save(tmp_path / "o", update(base, 1), "BF16")]
    fast = outputs(dirs, tmp_path, kernel, kernel=kernel, as_dtype="bfloat16")
    assert fast == outputs(dirs, tmp_path, "numpy", kernel="numpy", as_dtype="bfloat16")


@pytest.mark.parametrize("kernel", COMPILED)
@pytest.mark.parametrize("n", [1, 13, 4096, 10_007])
def test_chunk_kernels_match_metrics_on_raw_chunks(kernel, n):
    mod = MODULES[kernel]
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 0.02).astype(np.float32)
    b = a + (rng.random(n) < 0.3) * rng.standard_normal(n).astype(np.float32) * 1e-3
    c = a - (rng.random(n) < 0.3) * rng.standard_normal(n).astype(np.float32) * 1e-3
    a[:: max(1, n // 3)] = np.inf
    bits = [x.astype(np.float32).view(np.uint32) for x in (a, b, c)]
    ref, fast = W.new_stats(), W.new_stats()
    W.chunk_stats(ref, W.Chunk(bits[0], bits[1], a.copy(), b.astype(np.float32)), atol=1e-5)
    mod.chunk_stats(fast, bits[0], bits[1], "F32", atol=1e-5, rtol=W.BF16_RTOL)
    for key, value in ref.items():
        assert np.array_equal(fast[key], value), key
    da, db = W.delta(a, b.astype(np.float32)), W.delta(a, c.astype(np.float32))
    da[~np.isfinite(da)], db[~np.isfinite(db)] = 0, 0
    assert mod.overlap_chunk(*bits, "F32") == W.overlap_chunk(*bits, da, db)


def test_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="numba or numpy"):
        K.usable("BF16", "cuda")


def test_unknown_kernel_option_is_a_usage_error(tmp_path):
    from evalkit.errors import UsageError

    base = awkward(0)
    dirs = [save(tmp_path / k, v, "BF16") for k, v in (("b", base), ("o", update(base, 1)))]
    with pytest.raises(UsageError, match="choose auto, c, numba or numpy"):
        diff_checkpoints(dirs, DiffOptions(kernel="cuda"))


@pytest.mark.parametrize("kernel", COMPILED)
@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
def test_kernels_match_numpy_on_arbitrary_bit_patterns(kernel, dtype):
    """Every bit pattern may occur (NaN payloads, Inf, subnormals, signed zeros, deltas that
    overflow float32): counts, sums, max and histogram equal the numpy reference's exactly."""
    from evalkit.checkpoints.tensors import to_values

    rng = np.random.default_rng({"BF16": 1, "F16": 2, "F32": 3}[dtype])
    width = np.uint32 if dtype == "F32" else np.uint16
    n = 40_009  # not a multiple of 8: the tail is padded
    top = int(np.iinfo(width).max)
    base = rng.integers(0, top, n, dtype=width, endpoint=True)
    wide = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -3e38, 1e-40], np.float32)
    base[8:16] = to_dtype_bits(wide, dtype).view(width) if dtype != "F32" else wide.view(width)
    sides = []
    for seed in (1, 2):
        other = base.copy()
        draw = np.random.default_rng(seed).random(n)
        other[draw < 0.3] ^= width(1)  # one-ulp moves (and sign or class flips of odd patterns)
        anew = draw > 0.8
        other[anew] = np.random.default_rng(seed + 10).integers(0, top, int(anew.sum()),
                                                                dtype=width, endpoint=True)
        other[:4] = base[:4] ^ width(1 << (15 if width is np.uint16 else 31))  # sign flips
        sides.append(other)
    mod = MODULES[kernel]
    for other in sides:
        ref, fast = W.new_stats(), W.new_stats()
        W.chunk_stats(ref, W.Chunk(base, other, to_values(base, dtype), to_values(other, dtype)), atol=1e-5)
        mod.chunk_stats(fast, base, other, dtype, atol=1e-5, rtol=W.BF16_RTOL)
        for key, value in ref.items():
            assert np.array_equal(fast[key], value), (key, fast[key], value)
        assert ref["nan_base"] and ref["inf_base"] and ref["nonfinite_pairs"]
        qs = W.CONCENTRATION_QS  # the span of occupied bins changes no share
        spanned = W.concentration(ref["hist_count"], ref["hist_sq"], qs,
                                  span=(ref["hist_lo"], ref["hist_hi"]))
        assert spanned == W.concentration(ref["hist_count"], ref["hist_sq"], qs)
        assert ref["hist_count"][1:ref["hist_lo"]].sum() == ref["hist_count"][ref["hist_hi"]:].sum() == 0
    da, db = (W.delta(to_values(base, dtype), to_values(x, dtype)) for x in sides)
    for d, x in ((da, sides[0]), (db, sides[1])):
        d[~(np.isfinite(d) & np.isfinite(to_values(base, dtype)))] = 0
        d[base == x] = 0
    assert mod.overlap_chunk(base, *sides, dtype) == W.overlap_chunk(base, *sides, da, db)


def test_without_a_c_compiler_auto_falls_back_and_c_says_why(tmp_path, monkeypatch):
    from evalkit.errors import UsageError

    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(diff_ckernel, "_STATE", {})
    assert not diff_ckernel.available() and "no C compiler" in diff_ckernel.reason()
    base = awkward(0)
    dirs = [save(tmp_path / k, v, "BF16") for k, v in (("b", base), ("o", update(base, 1)))]
    with pytest.raises(UsageError, match="kernel 'c' cannot run: no C compiler"):
        diff_checkpoints(dirs, DiffOptions(kernel="c"))
    fallback = outputs(dirs, tmp_path, "auto", kernel="auto")
    assert fallback == outputs(dirs, tmp_path, "numpy", kernel="numpy")
