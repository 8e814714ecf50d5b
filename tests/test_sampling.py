"""The sampler: greedy equals transformers' generate, sampling follows the
model's distribution, samples are reproducible per (seed, problem, index)."""

from dataclasses import replace

import numpy as np
import pytest

from evalkit.models import load_model, resolve_model
from evalkit.sampling import (
    SamplingConfig,
    render_prompt,
    sample_chunk,
    sample_seed,
    stop_token_ids,
)


@pytest.fixture(scope="module")
def loaded(tiny_model):
    return load_model(resolve_model(str(tiny_model)))


PROMPTS = ["What is 2+2?", "Spell cat backwards, then say something longer."]


def _run(loaded, cfg, prompts=PROMPTS, ids=("a", "b")):
    model, tok = loaded
    rendered = [render_prompt(tok, p) for p in prompts]
    return sample_chunk(model, tok, rendered, list(ids), cfg, stop_ids=stop_token_ids(model, tok))


def test_greedy_matches_hf_generate(loaded):
    import torch

    model, tok = loaded
    samples = _run(loaded, SamplingConfig(n=1, temperature=0.0, max_new_tokens=12))
    rendered = [render_prompt(tok, p) for p in PROMPTS]
    enc = tok(rendered, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        ref = model.generate(
            **enc, do_sample=False, max_new_tokens=12, pad_token_id=tok.pad_token_id,
            eos_token_id=stop_token_ids(model, tok),
        )
    for s in samples:
        row = ref[s.problem_index, enc["input_ids"].shape[1]:].tolist()
        generated = list(s.token_ids) + ([tok.eos_token_id] if s.finish_reason == "stop" else [])
        assert row[: len(generated)] == generated


def test_same_chunk_gives_identical_samples(loaded):
    cfg = SamplingConfig(n=4, temperature=1.0, max_new_tokens=10, seed=3)
    assert _run(loaded, cfg) == _run(loaded, cfg)


def test_seed_changes_samples_and_seeds_never_overlap(loaded):
    a = _run(loaded, SamplingConfig(n=4, max_new_tokens=10, seed=0))
    b = _run(loaded, SamplingConfig(n=4, max_new_tokens=10, seed=1))
    assert [s.token_ids for s in a] != [s.token_ids for s in b]
    seeds = {sample_seed(0, f"p{i}", j) for i in range(200) for j in range(64)}
    assert len(seeds) == 200 * 64  # seed + j schemes collide across problems; hashing does not


def test_first_token_frequencies_follow_the_softmax(loaded):
    """4000 one-token samples: a chi-square test accepts softmax(logits / T)
    and rejects the distribution at another temperature (the test has power)."""
    import torch
    from scipy.stats import chisquare

    model, tok = loaded
    temperature = 0.25
    cfg = SamplingConfig(n=4000, temperature=temperature, max_new_tokens=1)
    samples = _run(loaded, cfg, prompts=PROMPTS[:1], ids=("x",))
    enc = tok([render_prompt(tok, PROMPTS[0])], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        logits = model(**enc).logits[0, -1].double()
    first = [s.token_ids[0] if s.token_ids else tok.eos_token_id for s in samples]
    counts = np.bincount(first, minlength=len(logits))

    def p_value(t):
        expected = torch.softmax(logits / t, -1).numpy() * len(samples)
        keep = expected >= 5  # pool the rare tokens into one cell
        obs, exp = counts[keep], expected[keep]
        if expected[~keep].sum() > 1:
            obs = np.append(obs, counts[~keep].sum())
            exp = np.append(exp, expected[~keep].sum())
        return chisquare(obs, exp * obs.sum() / exp.sum()).pvalue

    assert p_value(temperature) > 1e-4
    assert p_value(2 * temperature) < 1e-6


def test_entropy_is_exact_mean_over_generated_tokens(loaded):
    import torch

    model, tok = loaded
    cfg = SamplingConfig(n=2, temperature=1.3, max_new_tokens=6, seed=5)
    samples = _run(loaded, cfg, prompts=PROMPTS[:1], ids=("x",))
    prompt_ids = tok([render_prompt(tok, PROMPTS[0])], add_special_tokens=False)["input_ids"][0]
    for s in samples:
        generated = list(s.token_ids) + ([tok.eos_token_id] if s.finish_reason == "stop" else [])
        ids = torch.tensor([prompt_ids + generated])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt_ids) - 1 : -1] / 1.3
        logp = torch.log_softmax(logits.double(), -1)
        ent = -(logp.exp() * logp).sum(-1).mean().item()
        assert s.num_tokens == len(generated)
        assert s.mean_entropy == pytest.approx(ent, rel=1e-4)


def test_top_p_restricts_to_nucleus(loaded):
    import torch

    model, tok = loaded
    cfg = SamplingConfig(n=300, temperature=1.0, top_p=0.3, max_new_tokens=1)
    samples = _run(loaded, cfg, prompts=PROMPTS[:1], ids=("x",))
    enc = tok([render_prompt(tok, PROMPTS[0])], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        probs = torch.softmax(model(**enc).logits[0, -1], -1)
    order = probs.argsort(descending=True)
    cum = probs[order].cumsum(0)
    nucleus = set(order[: int((cum < 0.3).sum()) + 1].tolist())
    drawn = {s.token_ids[0] if s.token_ids else tok.eos_token_id for s in samples}
    assert drawn <= nucleus


def test_shared_prompt_prefix_is_prefilled_once_with_the_same_result(loaded, monkeypatch):
    """A common prefix (here a shared instruction) runs once; logits and samples match the
    plain prefill."""
    import torch

    from evalkit import sampling

    model, tok = loaded
    texts = [f"You are a careful solver of small puzzles. {p}" for p in [*PROMPTS, "Add 3 and 4."]]
    rendered = [render_prompt(tok, p) for p in texts]
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in rendered]
    assert ids[0][:40] == ids[1][:40] == ids[2][:40]
    calls = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: calls.append(k["input_ids"].shape) or forward(*a, **k))
    with torch.inference_mode():
        shared, mask = sampling._prefill(model, tok, rendered, "cpu")
    assert len(calls) == 2 and calls[0][0] == 1 and calls[0][1] >= 40  # prefix once, then rests
    assert mask.shape[1] == shared.cache.get_seq_length()
    cfg = SamplingConfig(n=3, temperature=1.0, max_new_tokens=10, seed=5)
    got = _run(loaded, cfg, prompts=texts, ids=("a", "b", "c"))
    monkeypatch.setattr(sampling, "SHARED_PREFIX_MIN", 10**9)
    with torch.inference_mode():
        plain, _ = sampling._prefill(model, tok, rendered, "cpu")
    assert torch.allclose(shared.logits, plain.logits, atol=1e-5)
    ref = _run(loaded, cfg, prompts=texts, ids=("a", "b", "c"))
    assert [s.token_ids for s in ref] == [s.token_ids for s in got]  # equal up to float rounding:
    assert [s.mean_entropy for s in ref] == pytest.approx([s.mean_entropy for s in got], abs=1e-5)


STOPS = "aeio "  # frequent characters as stop tokens: the tiny model's rows finish at scattered steps


def _stops(loaded) -> list[int]:
    model, tok = loaded
    return sorted({tok.convert_tokens_to_ids(c) for c in STOPS} | set(stop_token_ids(model, tok)))


def _draws_of_own_uniforms(loaded, prompt: str, sample, cfg, stops) -> bool:
    """Whether `sample` is what its own uniforms select from unbatched, teacher-forced logits: the
    batch it was drawn in (padding, finished rows kept or compacted) changes only float rounding."""
    import torch

    from evalkit import sampling

    model, tok = loaded
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + list(sample.token_ids)])).logits[0, len(prompt_ids) - 1 :]
    u = sampling._uniforms([sample.seed], cfg.max_new_tokens, "cpu")[0, : sample.num_tokens]
    drawn, _ = sampling._draw(logits[: sample.num_tokens], u, cfg, record=False)
    drawn = drawn.tolist()
    if sample.finish_reason == "stop":
        return drawn[:-1] == list(sample.token_ids) and drawn[-1] in stops
    return drawn == list(sample.token_ids) and sample.num_tokens == cfg.max_new_tokens and not set(drawn) & set(stops)


@pytest.mark.parametrize("compact_below", [0.0, 0.75, 1.0])
def test_finished_rows_kept_or_compacted_draw_from_their_own_uniforms(loaded, monkeypatch, compact_below):
    """Rows finish at scattered steps; kept in the batch (0), compacted below 3/4 live (the default)
    or at every finish (1), each sample is the draw of its own uniforms, and the same chunk gives
    bitwise the same samples."""
    from evalkit import kvcache, sampling

    monkeypatch.setattr(sampling, "COMPACT_BELOW", compact_below)
    compactions = []
    select = kvcache.InPlaceLayer.batch_select_indices
    monkeypatch.setattr(kvcache.InPlaceLayer, "batch_select_indices",
                        lambda self, idx: compactions.append(len(idx)) or select(self, idx))
    model, tok = loaded
    stops = _stops(loaded)
    cfg = SamplingConfig(n=8, temperature=1.0, max_new_tokens=24, seed=2)
    prompts = [render_prompt(tok, p) for p in [*PROMPTS, "hi"]]
    samples = sample_chunk(model, tok, prompts, ["a", "b", "c"], cfg, stop_ids=stops)
    finishes = {s.finish_reason for s in samples}
    assert finishes == {"stop", "length"} and len({s.num_tokens for s in samples}) > 4
    assert (len(compactions) > 0) == (compact_below > 0)
    assert all(_draws_of_own_uniforms(loaded, prompts[s.problem_index], s, cfg, stops) for s in samples)
    assert sample_chunk(model, tok, prompts, ["a", "b", "c"], cfg, stop_ids=stops) == samples


def test_the_cache_is_preallocated_and_written_in_place(loaded, monkeypatch):
    """One buffer per layer for keys and values, allocated once: decode steps write into it (its data
    pointer stays put) and nothing grows by concatenation."""
    import torch

    from evalkit import kvcache

    model, tok = loaded
    made, pointers, cats = [], set(), []
    preallocate = kvcache.preallocate
    monkeypatch.setattr(kvcache, "preallocate", lambda *a, **k: made.append(preallocate(*a, **k)) or made[-1])
    update = kvcache.InPlaceLayer.update
    monkeypatch.setattr(kvcache.InPlaceLayer, "update",
                        lambda self, k, v, *a, **kw: pointers.add(self.key_buffer.data_ptr()) or update(self, k, v))
    cat = torch.cat
    monkeypatch.setattr(torch, "cat", lambda *a, **k: (made and cats.append(a[0][0].shape)) or cat(*a, **k))
    cfg = SamplingConfig(n=3, temperature=1.0, max_new_tokens=10, seed=1)
    samples = _run(loaded, cfg)  # nothing finishes early: no compaction
    (cache,) = made
    assert kvcache.is_preallocated(cache) and len(cache.layers) == model.config.num_hidden_layers
    layer = cache.layers[0]
    assert layer.key_buffer.shape[0] == 2 * 3 and layer.key_buffer.shape[2] >= layer.length
    assert len(pointers) == model.config.num_hidden_layers  # one buffer per layer, never replaced
    assert max(s.num_tokens for s in samples) == 10
    assert cats and all(len(shape) != 4 or shape[-1] != layer.key_buffer.shape[-1] for shape in cats)  # after the
    # prefill, torch.cat joins only rotary halves and the first step's mask, never keys or values


def _threads(count: int):
    """torch's intra-op thread count set to `count` for a `with` block."""
    import contextlib

    import torch

    @contextlib.contextmanager
    def block():
        before = torch.get_num_threads()
        torch.set_num_threads(count)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    return block()


def test_a_chunk_splits_into_lanes_each_on_one_thread(loaded, monkeypatch):
    """Issue 46: on 2 threads, 3 prompts x 16 samples are two lanes of 24 rows, each prefilled and
    decoded in its own thread with one intra-op thread (no barrier between the two), and torch's
    thread count is back to 2 afterwards."""
    import threading

    import torch

    from evalkit import sampling

    seen = []
    lane = sampling._lane
    monkeypatch.setattr(sampling, "_lane", lambda *a: seen.append(
        (threading.current_thread().name, torch.get_num_threads(), len(a[3]))) or lane(*a))
    model, tok = loaded
    prompts = [render_prompt(tok, p) for p in [*PROMPTS, "hi"]]
    with _threads(2):
        samples = sample_chunk(model, tok, prompts, ["a", "b", "c"], SamplingConfig(n=16, max_new_tokens=6),
                               stop_ids=stop_token_ids(model, tok))
        assert torch.get_num_threads() == 2
    assert sorted(seen) == [("MainThread", 1, 24), ("evalkit-lane-1", 1, 24)]
    assert [(s.problem_index, s.sample_index) for s in samples] == [(i, j) for i in range(3) for j in range(16)]
    assert sampling.lane_count(48, 2) == 2 and sampling.lane_count(20, 2) == 1 and sampling.lane_count(500, 1) == 1


def test_samples_do_not_depend_on_how_many_lanes_run_at_once(loaded, monkeypatch):
    """The lanes fix which rows share a batch; whether they run side by side or one after the other
    (a busy machine) does not move a bit: tokens, entropy, lengths."""
    from evalkit import sampling

    model, tok = loaded
    stops = _stops(loaded)
    prompts = [render_prompt(tok, p) for p in [*PROMPTS, "hi"]]
    cfg = SamplingConfig(n=16, temperature=1.0, max_new_tokens=24, seed=4)
    with _threads(2):
        side_by_side = sample_chunk(model, tok, prompts, ["a", "b", "c"], cfg, stop_ids=stops)

        def one_after_another(jobs, threads_each, cancel):
            import torch

            with _threads(threads_each), torch.inference_mode():
                return [job() for job in jobs]

        monkeypatch.setattr(sampling, "run_lanes", one_after_another)
        in_turn = sample_chunk(model, tok, prompts, ["a", "b", "c"], cfg, stop_ids=stops)
    assert {s.finish_reason for s in in_turn} == {"stop", "length"}
    assert in_turn == side_by_side


def test_samples_on_one_and_two_threads_draw_the_same_tokens_on_the_tiny_model(loaded):
    """One thread is one lane of 48 rows, two threads two lanes of 24: other batches, so other float
    rounding, but each row draws from its own uniforms: the same tokens here; the mean entropy the
    same to float32 rounding."""
    model, tok = loaded
    stops = _stops(loaded)
    prompts = [render_prompt(tok, p) for p in [*PROMPTS, "hi"]]
    cfg = SamplingConfig(n=16, temperature=1.0, max_new_tokens=24, seed=4)
    got = {}
    for count in (1, 2):
        with _threads(count):
            got[count] = sample_chunk(model, tok, prompts, ["a", "b", "c"], cfg, stop_ids=stops)
    assert [replace(x, mean_entropy=0.0) for x in got[1]] == [replace(x, mean_entropy=0.0) for x in got[2]]
    assert [x.mean_entropy for x in got[1]] == pytest.approx([x.mean_entropy for x in got[2]], rel=1e-6)


@pytest.mark.parametrize("failing_lane", ["MainThread", "evalkit-lane-1"])
def test_a_failing_lane_stops_the_others_and_raises(loaded, monkeypatch, failing_lane):
    """An error in either lane is raised by sample_chunk (not the other lane's stop); the other lane
    stops at its next step (no thread left drawing) and the thread count is restored."""
    import threading

    import torch

    from evalkit import sampling

    draw = sampling._draw

    def failing(logits, u, cfg, *, record):
        if threading.current_thread().name == failing_lane:
            raise RuntimeError("a lane failed")
        return draw(logits, u, cfg, record=record)

    monkeypatch.setattr(sampling, "_draw", failing)
    model, tok = loaded
    prompts = [render_prompt(tok, p) for p in [*PROMPTS, "hi"]]
    with _threads(2):
        with pytest.raises(RuntimeError, match="a lane failed"):
            sample_chunk(model, tok, prompts, ["a", "b", "c"], SamplingConfig(n=16, max_new_tokens=400),
                         stop_ids=[-1])
        assert torch.get_num_threads() == 2
    for thread in [t for t in threading.enumerate() if t.name.startswith("evalkit-lane")]:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a lane kept drawing after the other failed"


def test_the_draw_searches_the_float32_cdf_as_the_float64_one():
    """`_draw` finds the token in the float32 CDF against the smallest float32 at or above the float64
    target: the same token as searching the CDF converted to float64 (sampler hf-1's way), also at
    targets that fall exactly on, just above and just below a CDF value."""
    import torch

    from evalkit.sampling import _draw, _float32_at_or_above

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 500, generator=gen) * 3
    cdf = torch.softmax(logits, -1).cumsum(-1)
    exact = cdf[:, 123].double() / cdf[:, -1].double()
    edges = torch.cat([exact, torch.nextafter(exact, torch.ones_like(exact)), torch.nextafter(exact, -exact)])
    u = torch.cat([torch.rand(64, generator=gen, dtype=torch.float64), edges.clamp(0, 1 - 1e-16)])
    logits = torch.cat([logits] * 4)
    cfg = SamplingConfig(temperature=1.0)
    got, _ = _draw(logits, u, cfg, record=False)
    cdf64 = torch.log_softmax(logits, -1).exp().cumsum(-1).double()
    want = torch.searchsorted(cdf64, (u * cdf64[:, -1])[:, None]).squeeze(-1).clamp(max=499)
    assert torch.equal(got, want)
    x = torch.tensor([1.0, 1 + 2**-30, 0.1], dtype=torch.float64)
    up = _float32_at_or_above(x)
    assert bool((up.double() >= x).all()) and bool((torch.nextafter(up, torch.zeros_like(up)).double() < x).all())


@pytest.mark.slow
def test_pass_at_1_on_the_default_model_matches_sampler_hf3_within_the_paired_interval():
    """Issue 46: this sampler (hf-4: lanes of single-threaded rows, evalkit.decode's step) against hf-3
    on the built-in model: 24 arith problems x 32 samples, the same seeds; pass@1 per problem paired,
    95% percentile bootstrap over problems (2000 draws). hf-3's side is its stored draw
    (tests/data/sampler_hf3_arith24x32.json, written by `python benchmarks/sampler_hf3.py` with the
    frozen hf-3 sampler on 2 threads). Both draw by the same uniforms, so most samples are equal;
    those that differ come from float rounding (other batches, other op grouping, or another CPU)."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from sampler_hf1 import draw_and_grade
    from sampler_hf3 import REFERENCE

    old = json.loads(REFERENCE.read_text(encoding="utf-8"))
    with _threads(2):  # hf-4's lanes follow the thread count: the two lanes of a 2-core machine
        new = draw_and_grade(sample_chunk)
    assert [(r["problem_id"], r["sample_index"]) for r in new["rows"]] == \
        [(r["problem_id"], r["sample_index"]) for r in old["rows"]]
    shape = (old["settings"]["problems"], old["settings"]["samples"])
    correct = {name: np.array([r["correct"] for r in run["rows"]]).reshape(shape) for name, run in
               (("now", new), ("hf-3", old))}
    same = sum(a["completion"] == b["completion"] for a, b in zip(new["rows"], old["rows"], strict=True))
    diff = correct["now"].mean(axis=1) - correct["hf-3"].mean(axis=1)
    rng = np.random.default_rng(0)
    boot = diff[rng.integers(0, len(diff), size=(2000, len(diff)))].mean(axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    assert correct["hf-3"].mean() > 0.02, "the base must solve some problems for the comparison to mean anything"
    assert same >= len(new["rows"]) // 2, f"only {same} of {len(new['rows'])} completions equal hf-3's"
    assert lo <= 0 <= hi, (f"pass@1 now {correct['now'].mean():.4f} vs hf-3 {correct['hf-3'].mean():.4f}: "
                           f"paired difference interval [{lo:.4f}, {hi:.4f}]; {same} of {diff.size * shape[1]} equal")
