"""evalkit diff on synthetic checkpoints with planted changes, sharding, and bad input."""

import json
import math
import signal

import numpy as np
import pytest
from helpers.checkpoints import CONFIG, PLAN, SHAPES, base_values, planted, save, to_bits, write_st  # noqa: F401
from typer.testing import CliRunner

from evalkit.checkpoints.safetensors import read_header
from evalkit.checkpoints.tensors import ChunkReader
from evalkit.diff import DiffOptions, diff_checkpoints
from evalkit.errors import UsageError


@pytest.fixture(params=["BF16", "F32"])
def pair(request, tmp_path):
    dtype = request.param
    base = base_values(dtype)
    return (save(tmp_path / "base", base, dtype), save(tmp_path / "other", planted(base), dtype),
            base, dtype)


def expected(names, base: dict) -> dict:
    """Figures worked out from the plan: count, squared update norm, max, weight norm^2."""
    n = sum(base[t].size for t in names)
    changed = sum(len(PLAN[t][0]) for t in names if t in PLAN)
    sq = sum(len(PLAN[t][0]) * PLAN[t][1] ** 2 for t in names if t in PLAN)
    mx = max([abs(PLAN[t][1]) for t in names if t in PLAN], default=0.0)
    sq_w = sum(float(np.dot(base[t].ravel().astype(np.float64), base[t].ravel())) for t in names)
    return {"n": n, "changed": changed, "sq": sq, "max": mx, "sq_w": sq_w}


def check(stats: dict, exp: dict) -> None:
    assert stats["n"] == exp["n"]
    for key in ("changed_bits", "changed_atol", "changed_rel"):
        assert stats[key] == exp["changed"], key
    assert stats["changed_frac_bits"] == exp["changed"] / exp["n"]
    assert stats["update_norm"] == pytest.approx(math.sqrt(exp["sq"]), rel=1e-9)
    assert stats["max_abs_update"] == exp["max"]
    assert stats["weight_norm"] == pytest.approx(math.sqrt(exp["sq_w"]), rel=1e-6)
    if exp["sq"]:
        assert stats["rel_norm"] == pytest.approx(math.sqrt(exp["sq"] / exp["sq_w"]), rel=1e-6)


@pytest.mark.parametrize("chunk", [1 << 18, 37])
def test_planted_changes_every_figure(pair, chunk):
    base_dir, other_dir, base, _ = pair
    result = diff_checkpoints([str(base_dir), str(other_dir)], DiffOptions(chunk_elems=chunk))
    summary, update = result.summary, result.summary["updates"]["other"]
    assert summary["tensors_compared"] == len(SHAPES)
    rows = {r["tensor"]: r for r in result.tensors}
    for name in SHAPES:
        check(rows[name], expected([name], base))
    check(update["overall"], expected(list(SHAPES), base))
    for layer in ("0", "1"):
        check(update["layers"][layer], expected([n for n in SHAPES if f"layers.{layer}." in n], base))
    check(update["kinds"]["norm"], expected([n for n in SHAPES if "norm" in n], base))
    check(update["kinds"]["embedding"], expected(["model.embed_tokens.weight"], base))
    # concentration: lm_head holds 3 entries of 0.5 among 1024
    lm = rows["lm_head.weight"]
    assert lm["top_0.1pct_share"] == pytest.approx(2 / 3)  # ceil(1.024) = 2 entries
    assert lm["top_1pct_share"] == pytest.approx(1.0)
    assert math.isnan(rows["model.embed_tokens.weight"]["top_1pct_share"])  # no update
    assert summary["missing"] == summary["extra"] == summary["mismatched"] == []


def test_chunked_equals_whole(pair):
    base_dir, other_dir, _, _ = pair
    whole = diff_checkpoints([str(base_dir), str(other_dir)])
    chunked = diff_checkpoints([str(base_dir), str(other_dir)], DiffOptions(chunk_elems=37))
    assert_close(whole.summary, chunked.summary)  # float sums differ only in order


def assert_close(x, y, path="") -> None:
    """Equal structure; ints and strings exactly, floats to 1e-6 (float32 partial sums per chunk)."""
    if isinstance(x, dict):
        assert x.keys() == y.keys(), path
        for key in x:
            assert_close(x[key], y[key], f"{path}.{key}")
    elif isinstance(x, list):
        assert len(x) == len(y), path
        for i, (a, b) in enumerate(zip(x, y, strict=True)):
            assert_close(a, b, f"{path}[{i}]")
    elif isinstance(x, float) and not math.isnan(x):
        assert y == pytest.approx(x, rel=1e-6), path
    elif isinstance(x, float):
        assert math.isnan(y), path
    else:
        assert x == y, path


def test_sharded_and_unsharded_agree(pair, tmp_path):
    base_dir, other_dir, base, dtype = pair
    one = diff_checkpoints([str(base_dir), str(other_dir)])
    sharded_other = save(tmp_path / "other3", planted(base), dtype, shards=3)
    sharded_base = save(tmp_path / "base2", base, dtype, shards=2)
    for args in ([base_dir, sharded_other], [sharded_base, other_dir], [sharded_base, sharded_other]):
        res = diff_checkpoints([str(a) for a in args])
        assert res.summary["updates"] == one.summary["updates"]
        assert sorted(res.tensors, key=lambda r: r["tensor"]) == sorted(one.tensors, key=lambda r: r["tensor"])
    single = diff_checkpoints([str(base_dir / "model.safetensors"), str(other_dir / "model.safetensors")])
    assert single.summary["updates"] == one.summary["updates"]
    serial = diff_checkpoints([str(base_dir), str(other_dir)], DiffOptions(threads=1))
    assert serial.summary == one.summary and serial.tensors == one.tensors  # threads: same bits


def test_reader_matches_safetensors_safe_open(tmp_path):
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(0)
    tensors = {f"t.{dt}": torch.randn(33, 7, generator=gen).to(getattr(torch, dt))
               for dt in ("bfloat16", "float16", "float32", "float64")}
    tensors["t.int"] = torch.arange(-50, 50, dtype=torch.int32)
    save_file(tensors, str(tmp_path / "x.safetensors"))
    entries = read_header(tmp_path / "x.safetensors")
    reader = ChunkReader(1, 1 << 16)
    with safe_open(str(tmp_path / "x.safetensors"), framework="pt") as fh:
        for name, entry in entries.items():
            for first in range(0, entry.numel, 50):  # chunked reads at odd offsets
                count = min(50, entry.numel - first)
                ref = fh.get_tensor(name).reshape(-1)[first:first + count]
                values = reader.values(0, entry, reader.bits(0, entry, first, count))
                assert np.array_equal(values, ref.double().numpy()), name
    reader.close()


def test_real_checkpoint_format_sharded_by_transformers(tiny_model, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.bfloat16)
    with torch.no_grad():
        model.model.layers[1].mlp.up_proj.weight[2, :5] += 1.0
    model.save_pretrained(tmp_path / "one")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="40KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    base = tmp_path / "base"
    AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.bfloat16).save_pretrained(base)
    one = diff_checkpoints([str(base), str(tmp_path / "one")])
    sharded = diff_checkpoints([str(base), str(tmp_path / "sharded")])
    assert one.summary["updates"] == sharded.summary["updates"]
    overall = one.summary["updates"]["other"]["overall"]
    assert overall["changed_bits"] == 5  # +1.0 moves every one of the 5 entries
    assert one.summary["updates"]["other"]["kinds"]["mlp_up"]["changed_bits"] == 5
    assert one.summary["updates"]["other"]["layers"]["1"]["changed_bits"] == 5


def test_three_way_overlap(tmp_path):
    base = base_values("F32")
    a, b = planted(base), planted(base)
    # B repeats A's plan, flips the sign on q_proj of layer 0, and adds 10 changes of its own
    b["model.layers.0.self_attn.q_proj.weight"].reshape(-1)[[0, 5, 255]] = 0.5
    b["model.embed_tokens.weight"].reshape(-1)[:10] += 0.125
    dirs = [save(tmp_path / k, v, "F32") for k, v in (("base", base), ("a", a), ("b", b))]
    result = diff_checkpoints([str(d) for d in dirs])
    ov = result.summary["overlap"]["overall"]
    planted_n = sum(len(p) for p, _ in PLAN.values())
    assert (ov["changed_a"], ov["changed_b"], ov["changed_both"]) == (planted_n, planted_n + 10, planted_n)
    assert ov["jaccard"] == pytest.approx(planted_n / (planted_n + 10))
    n = sum(v.size for v in base.values())
    pa, pb = planted_n / n, (planted_n + 10) / n
    assert ov["jaccard_chance"] == pytest.approx(pa * pb / (pa + pb - pa * pb))
    assert ov["sign_agreement"] == pytest.approx((planted_n - 3) / planted_n)
    sq = {t: len(p) * m * m for t, (p, m) in PLAN.items()}
    dot = sum(sq.values()) - 2 * sq["model.layers.0.self_attn.q_proj.weight"]
    assert ov["cosine"] == pytest.approx(dot / math.sqrt(sum(sq.values()) * (sum(sq.values()) + 10 / 64)))
    rows = {r["tensor"]: r for r in result.overlaps}
    assert rows["model.layers.0.self_attn.q_proj.weight"]["cosine"] == pytest.approx(-1.0)
    assert set(result.summary["updates"]) == {"A", "B"}


def test_missing_extra_and_mismatched_are_listed(tmp_path):
    base = base_values("F32")
    other = planted(base)
    del other["model.norm.weight"]
    other["model.extra.weight"] = np.zeros(4, np.float32)
    other["model.layers.1.self_attn.q_proj.weight"] = np.zeros((16, 8), np.float32)
    bdir = save(tmp_path / "b", base, "F32")
    odir = tmp_path / "o"
    odir.mkdir()
    write_st(odir / "model.safetensors", {
        **{n: ("F32", v) for n, v in other.items() if n != "lm_head.weight"},
        "lm_head.weight": ("BF16", to_bits(other["lm_head.weight"], "BF16"))})
    s = diff_checkpoints([str(bdir), str(odir)]).summary
    assert s["missing"] == [f"{odir}: model.norm.weight"]
    assert s["extra"] == [f"{odir}: model.extra.weight"]
    assert len(s["mismatched"]) == 2 and "F32[16, 16] vs F32[16, 8]" in " ".join(s["mismatched"])
    assert s["tensors_compared"] == len(SHAPES) - 3
    # the rest is compared: layer 0's planted q_proj and layer 1's down_proj
    assert s["updates"]["other"]["overall"]["changed_bits"] == 3 + 40


def _bad_inputs(tmp_path) -> dict:
    """name -> (args, a piece of the expected message)."""
    good = save(tmp_path / "good", base_values("F32"), "F32")
    data = (good / "model.safetensors").read_bytes()
    cases = {}

    def variant(name, raw=None, config=CONFIG):
        folder = tmp_path / name
        folder.mkdir()
        if config:
            (folder / "config.json").write_text(json.dumps(config))
        if raw is not None:
            (folder / "model.safetensors").write_bytes(raw)
        return folder

    cases["no weights"] = (variant("empty"), "no *.safetensors")
    cases["truncated"] = (variant("trunc", data[:-10]), "truncated")
    cases["short"] = (variant("short", data[:5]), "bad header length")
    huge = (10**12).to_bytes(8, "little") + data[8:]
    cases["header length"] = (variant("hlen", huge), "bad header length")
    n = int.from_bytes(data[:8], "little")
    cases["corrupt json"] = (variant("json", data[:8] + b"{" * n + data[8 + n:]), "not valid JSON")
    idx = variant("idx")
    (idx / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "gone.safetensors"}}))
    cases["missing shard"] = (idx, "gone.safetensors, which is missing")
    other_arch = save(tmp_path / "arch", base_values("F32"), "F32", config={**CONFIG, "num_hidden_layers": 3})
    cases["architecture"] = (other_arch, "different architecture")
    nothing = variant("nocommon")
    write_st(nothing / "model.safetensors", {"x": ("F32", np.zeros(3, np.float32))})
    cases["no common"] = (nothing, "no tensor names in common")
    return good, cases


def test_bad_input_gives_one_line_and_exit_2(tmp_path):
    from evalkit.cli import app

    good, cases = _bad_inputs(tmp_path)
    runner = CliRunner()
    for name, (folder, message) in cases.items():
        res = runner.invoke(app, ["diff", str(good), str(folder)])
        assert res.exit_code == 2, (name, res.output)
        assert message in res.output and res.output.count("\n") == 1, (name, res.output)
        assert str(folder) in res.output, name
        assert "Traceback" not in res.output
    res = runner.invoke(app, ["diff", str(good)])
    assert res.exit_code == 2 and "BASE OTHER" in res.output
    res = runner.invoke(app, ["diff", str(good), str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "nowhere" in res.output


def _fuzzed_headers(data: bytes, rng) -> list[bytes]:
    n = int.from_bytes(data[:8], "little")
    header = data[8:8 + n]
    out = []
    for _ in range(250):
        raw = bytearray(header)
        for _ in range(rng.integers(1, 6)):
            raw[rng.integers(len(raw))] = rng.integers(256)
        out.append(data[:8] + bytes(raw) + data[8 + n:])
    for cut in rng.integers(0, len(data), 40):
        out.append(data[:cut])
    crafted = [
        b"[" * 100_000, b"{}", b"[]", b'{"x": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}}',
        b'{"x": {"dtype": "F32", "shape": [true], "data_offsets": [0, 4]}}',
        b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}',
        b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},'
        b' "y": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"x": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}',
        b'{"x": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}}', b"\xff\xfe" * 8,
    ]
    for text in crafted:
        out.append(len(text).to_bytes(8, "little") + text + b"\0" * 8)
    return out


def test_fuzzed_headers_never_crash_or_hang(tmp_path):
    good = save(tmp_path / "good", base_values("F32"), "F32")
    data = (good / "model.safetensors").read_bytes()
    rng = np.random.default_rng(0)
    folder = tmp_path / "fuzz"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    outcomes = {"ok": 0, "error": 0}
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("hang")))
    signal.alarm(120)
    try:
        for raw in _fuzzed_headers(data, rng):
            (folder / "model.safetensors").write_bytes(raw)
            try:
                diff_checkpoints([str(good), str(folder)], DiffOptions(chunk_elems=64))
                outcomes["ok"] += 1
            except UsageError as exc:
                assert "model.safetensors" in str(exc) or str(folder) in str(exc)
                outcomes["error"] += 1
    finally:
        signal.alarm(0)
    assert outcomes["error"] > 200  # most mutations are caught, none escaped as another error


def test_cli_writes_json_and_csv(pair, tmp_path):
    import pandas as pd

    from evalkit.cli import app

    base_dir, other_dir, base, _ = pair
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["diff", str(base_dir), str(other_dir), "--out", str(out), "--rank"])
    assert res.exit_code == 0, res.output
    assert "Most-changed layers" in res.output and "mlp_down" in res.output
    summary = json.loads((out / "diff.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert summary["updates"]["other"]["overall"]["changed_bits"] == expected(list(SHAPES), base)["changed"]
    table = pd.read_csv(out / "tensors.csv")
    assert len(table) == len(SHAPES)
    q0 = table.set_index("tensor").loc["model.layers.0.self_attn.q_proj.weight"]
    # positions 0, 5, 255 of a 16x16: two entries in row 0, one in row 15 -> rank 2
    assert q0["changed_bits"] == 3 and q0["rank"] == 2 and q0["rank_ratio"] == 2 / 16
    assert summary["updates"]["other"]["rank"]["matrices"] == 6


def test_cli_three_way_writes_overlap(tmp_path):
    from evalkit.cli import app

    base = base_values("BF16")
    dirs = [save(tmp_path / k, v, "BF16") for k, v in (("b", base), ("x", planted(base)), ("y", planted(base)))]
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["diff", *map(str, dirs), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "Overlap of updates A and B" in res.output
    overlap = json.loads((out / "diff.json").read_text())["overlap"]["overall"]
    assert overlap["jaccard"] == 1.0 and overlap["cosine"] == pytest.approx(1.0)
    assert (out / "overlap.csv").read_text().count("\n") == len(SHAPES) + 1


def test_nan_and_inf_in_checkpoints_are_counted(tmp_path):
    base = base_values("BF16")
    other = planted(base)
    base["model.embed_tokens.weight"].reshape(-1)[[1, 2]] = np.nan  # same NaN on both sides
    other["model.embed_tokens.weight"].reshape(-1)[[1, 2]] = np.nan
    other["model.layers.1.self_attn.q_proj.weight"].reshape(-1)[9] = np.inf
    dirs = [save(tmp_path / k, v, "BF16") for k, v in (("b", base), ("o", other))]
    s = diff_checkpoints([str(d) for d in dirs]).summary["updates"]["other"]["overall"]
    assert (s["nan_base"], s["nan_other"], s["inf_base"], s["inf_other"]) == (2, 2, 0, 1)
    assert s["nonfinite_pairs"] == 3
    assert s["changed_bits"] == expected(list(SHAPES), base)["changed"] + 1  # the Inf
    assert s["update_norm"] == pytest.approx(math.sqrt(expected(list(SHAPES), base)["sq"]))
    assert math.isfinite(s["weight_norm"])
