"""GRPO pieces against hand-computed values: advantages, clipped loss per aggregation, log-probs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.grpo import group_advantages, group_stats, keep_informative_groups

torch = pytest.importorskip("torch")

from evalkit.train.grpo import LossSpec, policy_loss, token_logprobs  # noqa: E402


def test_group_advantages_trl_bessel_and_eps():
    # group [1, 0, 0, 1]: mean 0.5, Bessel std sqrt(1/3)
    adv = group_advantages([[1, 0, 0, 1]])
    s = math.sqrt(1 / 3)
    assert np.allclose(adv, [[0.5 / (s + 1e-4), -0.5 / (s + 1e-4), -0.5 / (s + 1e-4), 0.5 / (s + 1e-4)]])
    assert np.allclose(group_advantages([[1, 0, 0, 0]], scale="none"), [[0.75, -0.25, -0.25, -0.25]])
    assert np.array_equal(group_advantages([[1, 1], [0, 0]]), [[0, 0], [0, 0]])


def test_group_advantages_refuse_bad_shapes():
    with pytest.raises(ValueError):
        group_advantages([[1]])
    with pytest.raises(ValueError):
        group_advantages([[1, 0]], scale="batch")


def test_group_stats_and_dynamic_sampling_mask():
    r = [[1, 1, 1], [0, 1, 0], [0, 0, 0], [1, 0, 1]]
    stats = group_stats(r)
    assert stats["reward"] == pytest.approx(6 / 12)
    assert stats["reward_std"] == pytest.approx((0 + math.sqrt(1 / 3) + 0 + math.sqrt(1 / 3)) / 4)
    assert stats["frac_reward_zero_std"] == 0.5
    assert keep_informative_groups(r).tolist() == [False, True, False, True]


# Three sequences, T = 2, one padded token. Chosen so that one token is clipped
# high (ratio e^0.3 > 1.28, A > 0) and one low (ratio e^-0.4 < 0.8, A < 0).
LOGP = [[-1.0, -2.0], [-0.5, -1.0], [-0.3, 0.0]]
OLD = [[-1.3, -1.5], [-0.1, -1.0], [-0.3, 0.0]]
ADV = [1.0, -2.0, 0.5]
MASK = [[1, 1], [1, 1], [1, 0]]
# per-token -min(r*A, clip(r)*A), by hand:
PER_TOKEN = [
    [-1.28, -math.exp(-0.5)],  # e^0.3 clipped to 1.28; e^-0.5 with A > 0 is not clipped
    [0.8 * 2, 2.0],  # e^-0.4 * -2 = -1.34 vs 0.8 * -2 = -1.6: min is -1.6
    [-0.5, None],
]


def _loss(loss_type, **kw):
    t = torch.tensor
    args = dict(eps_low=0.2, eps_high=0.28, loss_type=loss_type, num_sequences=3, num_tokens=5,
                max_completion_length=4)
    args.update(kw)
    return policy_loss(t(LOGP, dtype=torch.float64), t(OLD, dtype=torch.float64), t(ADV, dtype=torch.float64),
                       t(MASK), LossSpec(**{k: v for k, v in args.items() if k != "ref_logp"}),
                       ref_logp=args.get("ref_logp"))


def test_loss_aggregations_by_hand():
    rows = [[x for x in row if x is not None] for row in PER_TOKEN]
    total = sum(sum(r) for r in rows)
    expected = {
        "grpo": sum(sum(r) / len(r) for r in rows) / 3,
        "dapo": total / 5,
        "dr_grpo": total / (3 * 4),
    }
    for loss_type, value in expected.items():
        loss, stats = _loss(loss_type)
        assert float(loss) == pytest.approx(value, abs=1e-12), loss_type
        assert (stats["clip_low"], stats["clip_high"], stats["clip_region"], stats["tokens"]) == (1, 1, 2, 5)


def test_symmetric_epsilon_clips_differently():
    # eps_high = 0.4: e^0.3 = 1.35 is no longer clipped; its term becomes -e^0.3
    loss, stats = _loss("dapo", eps_high=0.4)
    total = -math.exp(0.3) - math.exp(-0.5) + 1.6 + 2.0 - 0.5
    assert float(loss) == pytest.approx(total / 5, abs=1e-12)
    assert stats["clip_high"] == 0 and stats["clip_low"] == 1


def test_kl_k3_term_with_beta():
    ref = torch.tensor(LOGP, dtype=torch.float64) + torch.tensor([[0.5, 0.0], [0.0, -0.2], [0.0, 0.0]],
                                                                  dtype=torch.float64)
    loss0, _ = _loss("dapo")
    loss, stats = _loss("dapo", beta=0.1, ref_logp=ref)
    k3 = (math.exp(0.5) - 0.5 - 1) + (math.exp(-0.2) + 0.2 - 1)
    assert stats["kl"] == pytest.approx(k3, abs=1e-12)
    assert float(loss) == pytest.approx(float(loss0) + 0.1 * k3 / 5, abs=1e-12)


def test_ratio_one_gives_minus_advantage_and_no_clipping():
    logp = torch.tensor(LOGP, dtype=torch.float64, requires_grad=True)
    loss, stats = policy_loss(logp, logp.detach(), torch.tensor(ADV, dtype=torch.float64), torch.tensor(MASK),
                              LossSpec(eps_low=0.2, eps_high=0.2, loss_type="grpo", num_sequences=3, num_tokens=5,
                                       max_completion_length=4))
    assert float(loss.detach()) == pytest.approx(-(1.0 - 2.0 + 0.5) / 3)
    assert stats["clip_region"] == 0
    loss.backward()  # d loss / d logp = -A / (len * B) on active tokens
    expected = [[-1 / 6, -1 / 6], [2 / 6, 2 / 6], [-0.5 / 3, 0.0]]
    assert torch.allclose(logp.grad, torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_micro_batch_shares_add_up_to_the_full_batch(loss_type):
    full, _ = _loss(loss_type)
    t = torch.tensor
    parts = 0.0
    for rows in ([0], [1, 2]):
        part, _ = policy_loss(t(LOGP, dtype=torch.float64)[rows], t(OLD, dtype=torch.float64)[rows],
                              t(ADV, dtype=torch.float64)[rows], t(MASK)[rows],
                              LossSpec(eps_low=0.2, eps_high=0.28, loss_type=loss_type, num_sequences=3, num_tokens=5,
                                       max_completion_length=4))
        parts += float(part)
    assert parts == pytest.approx(float(full), abs=1e-12)


def test_token_logprobs_match_a_plain_forward(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    seqs = [((5, 6, 7, 8), (9, 10, 11)), ((12, 13), (14,)), ((20, 21, 22), (23, 24))]
    logp, mask = token_logprobs(model, seqs, temperature=0.7, pad_id=0)
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    with torch.no_grad():
        for r, (p, c) in enumerate(seqs):
            logits = model(input_ids=torch.tensor([list(p) + list(c)])).logits[0] / 0.7
            ref = torch.log_softmax(logits.float(), -1)
            for k, tok in enumerate(c):
                assert float(logp[r, k]) == pytest.approx(float(ref[len(p) + k - 1, tok]), abs=1e-5)
