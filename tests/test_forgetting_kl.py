"""Forward KL: the per-token estimator's expectation equals the exact
sequence-level KL(pi_base || pi_model) on a tiny model whose completions (at
most 2 tokens) can all be enumerated; self-KL is zero; Monte Carlo agrees."""

import numpy as np
import pytest
import torch

from evalkit.forgetting import kl
from evalkit.forgetting.runner import ForgettingOptions
from evalkit.models import tokenizer_mismatch


@pytest.fixture(scope="module")
def pair(tiny_model, tmp_path_factory):
    from helpers.tinymodel import make_tiny_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    other = make_tiny_model(tmp_path_factory.mktemp("kl") / "other", seed=1)
    base = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    model = AutoModelForCausalLM.from_pretrained(other).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model)
    tok.padding_side = "left"
    return base, model, tok


def _prompt_ids(tok, text="ab"):
    from evalkit.sampling import render_prompt

    return tok(render_prompt(tok, text), add_special_tokens=False)["input_ids"]


def _exact_two_token_kl(base, model, prompt, stop: set[int]) -> float:
    """sum over all completions y (length <= 2) of p(y) log p(y)/q(y), by enumeration."""
    with torch.no_grad():
        lp1 = torch.log_softmax(base(torch.tensor([prompt])).logits[0, -1].double(), -1)
        lq1 = torch.log_softmax(model(torch.tensor([prompt])).logits[0, -1].double(), -1)
        vocab = lp1.numel()
        ctx = torch.tensor([prompt + [y] for y in range(vocab)])
        lp2 = torch.log_softmax(base(ctx).logits[:, -1].double(), -1)
        lq2 = torch.log_softmax(model(ctx).logits[:, -1].double(), -1)
    total = 0.0
    for y1 in range(vocab):
        if y1 in stop:  # the completion ends here
            total += float(lp1[y1].exp() * (lp1[y1] - lq1[y1]))
            continue
        lp_seq = lp1[y1] + lp2[y1]  # every y2 ends the completion (stop or length)
        lq_seq = lq1[y1] + lq2[y1]
        total += float((lp_seq.exp() * (lp_seq - lq_seq)).sum())
    return total


def _estimator_expectation(base, model, tok, prompt, stop: set[int]) -> float:
    """E_{y ~ base}[sum_t KL_t] using kl.token_kls, which only depends on y1 here."""
    with torch.no_grad():
        p1 = torch.softmax(base(torch.tensor([prompt])).logits[0, -1].double(), -1)
    vocab = p1.numel()
    some = tok.get_vocab()["x"]
    rows = [(prompt, [], True) if y in stop else (prompt, [y, some], False) for y in range(vocab)]
    values = kl.token_kls(base, model, rows, pad_id=tok.pad_token_id, batch_size=37)
    assert all(v.size == (1 if y in stop else 2) for y, v in enumerate(values))
    return float(sum(p1[y] * values[y].sum() for y in range(vocab)))


def test_estimator_expectation_equals_exact_sequence_kl(pair):
    from evalkit.sampling import stop_token_ids

    base, model, tok = pair
    prompt = _prompt_ids(tok)
    stop = set(stop_token_ids(base, tok))
    exact = _exact_two_token_kl(base, model, prompt, stop)
    estimate = _estimator_expectation(base, model, tok, prompt, stop)
    assert exact > 0.01
    assert estimate == pytest.approx(exact, rel=1e-4)


def test_stop_position_is_included_and_padding_does_not_matter(pair):
    base, model, tok = pair
    prompt = _prompt_ids(tok)
    short, long = _prompt_ids(tok, "a"), _prompt_ids(tok, "a much longer prompt")
    x = tok.get_vocab()["x"]
    alone = kl.token_kls(base, model, [(prompt, [x], True)], pad_id=tok.pad_token_id)[0]
    mixed = kl.token_kls(base, model, [(long, [x, x, x], False), (prompt, [x], True), (short, [], True)],
                         pad_id=tok.pad_token_id)
    assert alone.size == 2 and mixed[1].size == 2 and mixed[2].size == 1 and mixed[0].size == 3
    np.testing.assert_allclose(mixed[1], alone, rtol=1e-4)


def test_self_kl_is_zero(pair):
    base, _, tok = pair
    result = kl.forward_kl(base, base, tok, ["ab", "cd", "ef"], ["p0", "p1", "p2"],
                           ForgettingOptions(kl_max_new_tokens=4))
    assert result["kl_sequence"] == 0.0 and result["kl_sequence_se"] == 0.0
    assert result["direction"].startswith("KL(pi_base || pi_model)")


def test_monte_carlo_estimate_agrees_with_exact(pair):
    from evalkit.sampling import stop_token_ids

    base, model, tok = pair
    prompt = _prompt_ids(tok)
    exact = _exact_two_token_kl(base, model, prompt, set(stop_token_ids(base, tok)))
    n = 200  # the same prompt under different ids: independent samples
    result = kl.forward_kl(base, model, tok, ["ab"] * n, [f"p{i}" for i in range(n)],
                           ForgettingOptions(kl_max_new_tokens=2, batch_size=50))
    assert result["prompts"] == n and result["kl_sequence_se"] > 0
    assert abs(result["kl_sequence"] - exact) < 4 * result["kl_sequence_se"]


def test_different_tokenizers_are_refused(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    other = AutoTokenizer.from_pretrained(tiny_model)
    other.add_tokens(["<extra>"])
    assert tokenizer_mismatch(tok, tok) is None
    assert "tokenizers differ" in tokenizer_mismatch(tok, other)
