"""Multiple-choice scoring: hand-made items on a bigram model whose answers
are known, the three normalisations, and batching against direct forwards."""

import json
import math
from types import SimpleNamespace

import pytest
import torch

from evalkit.errors import UsageError
from evalkit.forgetting import multiple_choice as mc
from evalkit.forgetting.generate import EvalSettings

BOOST = 4.0
PAIRS = ["b ", " c", "cd", "de", "ef", "fg", "q ", " r", "rs"]  # boosted bigrams


class Bigram(torch.nn.Module):
    """logits[t] = table[token_t]: next-token log-probs are known in closed form."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(table)

    def forward(self, input_ids, attention_mask=None, **_):
        return SimpleNamespace(logits=self.table[input_ids])


@pytest.fixture(scope="module")
def bigram():
    from helpers.tinymodel import make_tokenizer

    tok = make_tokenizer()
    ids = tok.get_vocab()
    table = torch.zeros(len(tok), len(tok))
    for a, b in PAIRS:
        table[ids[a], ids[b]] = BOOST
    return Bigram(table), tok


def _logp(a: str, b: str, vocab: int) -> float:
    """log p(b | a) = table[a, b] - log sum_v exp(table[a, v]), by hand."""
    boosts = sum(pair[0] == a for pair in PAIRS)
    log_z = math.log(boosts * math.exp(BOOST) + vocab - boosts)
    return (BOOST if a + b in PAIRS else 0.0) - log_z


def _seq(question: str, choice: str, vocab: int) -> float:
    text = question[-1] + " " + choice
    return sum(_logp(text[i], text[i + 1], vocab) for i in range(len(text) - 1))


def _items(rows):
    text = "\n".join(json.dumps(r) for r in rows)
    return mc.McItems("hand", "<memory>", "-", mc.read_items(text, "hand"))


def test_log_likelihoods_match_the_closed_form(bigram):
    model, tok = bigram
    v = len(tok)
    got = mc.choice_logprobs(model, tok, [("ab", "cd"), ("ab", "xy"), ("pq", "rs")], batch_size=2)
    # " cd" after "b": b->' ', ' '->c, c->d all boosted; " xy": only b->' '.
    assert got[0] == (pytest.approx(_seq("ab", "cd", v), abs=1e-5), 3)
    assert got[1] == (pytest.approx(_seq("ab", "xy", v), abs=1e-5), 3)
    assert got[2] == (pytest.approx(_seq("pq", "rs", v), abs=1e-5), 3)
    assert got[0][0] > got[1][0]


def test_known_answers_are_found(bigram):
    model, tok = bigram
    items = _items([
        {"question": "ab", "choices": ["cd", "xy"], "answer": 0},
        {"question": "pq", "choices": ["zz", "rs", "yy"], "answer": 1},
        {"question": "ab", "choices": ["xy", "cd"], "answer": 0, "id": "wrong-key"},
    ])
    outcomes = mc.evaluate(items, model, tok, EvalSettings(batch_size=3))
    assert [o.outcome for o in outcomes] == ["correct", "correct", "incorrect"]
    assert [o.extracted for o in outcomes] == ["0", "1", "1"]
    assert outcomes[2].item_id == "wrong-key"


@pytest.mark.parametrize("norm,pick", [("sum", "1"), ("token", "0"), ("byte", "0")])
def test_normalisation_changes_the_pick(bigram, norm, pick):
    # " cdefg": 6 boosted tokens (sum about -6.4, mean about -1.06);
    # " x": one boosted, one not (sum about -6.1, mean about -3.06).
    model, tok = bigram
    items = _items([{"question": "b", "choices": ["cdefg", "x"], "answer": 0}])
    outcome = mc.evaluate(items, model, tok, EvalSettings(mc_norm=norm))[0]
    assert outcome.extracted == pick


def test_batched_scores_equal_direct_forwards_on_a_real_model(tiny_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model)
    pairs = [("Question: 2+2=\nAnswer:", "4"), ("Sky is", "blue today"), ("x", "a much longer choice here")]
    batched = mc.choice_logprobs(model, tok, pairs, batch_size=3)
    for (q, c), (score, n) in zip(pairs, batched, strict=True):
        ctx = tok(q, add_special_tokens=False)["input_ids"]
        cont = tok(" " + c, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ctx + cont])).logits[0]
        logp = torch.log_softmax(logits.double(), -1)
        direct = sum(float(logp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont))
        assert n == len(cont)
        assert score == pytest.approx(direct, abs=1e-4)


@pytest.mark.parametrize("line", [
    '{"question": "q", "choices": ["a"], "answer": 0}',
    '{"question": "q", "choices": ["a", "b"], "answer": 2}',
    '{"question": "q", "choices": ["a", "b"]}',
    '{"question": "q", "choices": ["a", "b"], "answer": true}',
    "not json",
])
def test_bad_lines_are_usage_errors_naming_the_line(line):
    with pytest.raises(UsageError, match="line 2"):
        mc.read_items('{"question": "ok", "choices": ["a", "b"], "answer": 1}\n' + line, "x=y.jsonl")


def test_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        mc.load("mmlu", str(tmp_path / "absent.jsonl"))
