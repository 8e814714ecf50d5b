"""GRPO with a weak model's prefixes (guidance) and hints for all-wrong groups, on tiny models: the
given tokens are context (never a loss target), the metrics count them apart, resume is bitwise,
bad options are refused."""

from __future__ import annotations

import shutil

import pytest
import torch
from typer.testing import CliRunner

from evalkit.cli import app


@pytest.fixture(scope="module")
def guide(tmp_path_factory):
    from helpers.tinymodel import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("guide") / "model", seed=7)


def _opts(model, **kw):
    from evalkit.train.grpo import GRPOOptions

    base = dict(model=str(model), task="arith", task_size=8, group_size=4, prompts_per_step=2, steps=2, lr=1e-2,
                max_new_tokens=6, grader_workers=1, save_every=1, device="cpu")
    return GRPOOptions(**{**base, **kw})


def _batch(model_path, opts, guide_path=None):
    from evalkit.grading import Grader
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import stop_token_ids
    from evalkit.train.common import load_training_task
    from evalkit.train.grpo import Policy, collect_batch

    model, tok = load_model(resolve_model(str(model_path)))
    guide = load_model(resolve_model(str(guide_path)))[0] if guide_path else None
    task = load_training_task("arith", 8, 0, "{}")
    with Grader(task.spec, workers=1) as grader:
        policy = Policy(model, tok, grader, tuple(stop_token_ids(model, tok)), opts, guide=guide)
        groups, metrics = collect_batch(policy, task, 1)
    return groups, metrics, tok


def _only_continuations_are_targets(groups, tok):
    """The given text is part of the rollout's prompt (context), never of its completion."""
    for g in groups:
        for k in range(len(g.completions)):
            prompt, context = g.prompt_of(k), (g.contexts[k] if g.contexts else 0)
            assert len(prompt) == len(g.prompt_ids) + context
            assert tuple(prompt[: len(g.prompt_ids)]) == g.prompt_ids


def test_guided_rollouts_continue_a_guide_prefix_given_as_context(tiny_model, guide):
    groups, metrics, tok = _batch(tiny_model, _opts(tiny_model, guide_model=str(guide), guide_tokens=2,
                                                    guided_rollouts=2), guide)
    assert all(len(g.completions) == 4 for g in groups)
    assert all(sum(1 for c in g.contexts if c) == 2 for g in groups)  # m of G rollouts were guided
    assert metrics["frac_guided"] == 0.5 and metrics["guide_tokens_mean"] > 0
    assert {"reward_guided", "reward_unguided", "entropy_unguided"} <= set(metrics)
    _only_continuations_are_targets(groups, tok)


def test_all_wrong_groups_are_resampled_from_a_hint(tiny_model):
    groups, metrics, tok = _batch(tiny_model, _opts(tiny_model, hint="all-wrong", hint_fraction=0.5))
    assert metrics["frac_reward_zero_std"] == 1.0  # the raw figure: a random model gets every answer wrong
    assert metrics["frac_hinted"] == 1.0 and "reward_after_hint" in metrics
    assert all(all(c > 0 for c in g.contexts) for g in groups)
    _only_continuations_are_targets(groups, tok)


def test_context_tokens_get_no_gradient(tiny_model, guide):
    """The loss reads log-probabilities of completion tokens only: a given token is input, never a
    target, so the policy gets no gradient towards it; the gradient reaches only target positions."""
    from evalkit.models import load_model, resolve_model
    from evalkit.train.grpo import LossSpec, policy_loss, token_logprobs

    groups, _, _ = _batch(tiny_model, _opts(tiny_model, guide_model=str(guide), guide_tokens=2,
                                            guided_rollouts=2), guide)
    model, _ = load_model(resolve_model(str(tiny_model)))
    g = groups[0]
    rows = [(g.prompt_of(k), c) for k, c in enumerate(g.completions)]
    logp, mask = token_logprobs(model, rows, temperature=1.0, pad_id=0)
    assert mask.sum(-1).tolist() == [float(len(c)) for _, c in rows]  # the continuations' tokens only
    logp.retain_grad()
    loss, _ = policy_loss(logp, logp.detach(), torch.tensor([1.0, -1.0, 0.5, -0.5]), mask,
                          LossSpec(eps_low=0.2, eps_high=0.2, loss_type="dapo", num_sequences=4,
                                   num_tokens=int(mask.sum()), max_completion_length=6))
    loss.backward()
    assert bool(((logp.grad != 0) <= (mask > 0)).all())  # gradient only where a completion token is


def test_guided_run_resumes_bitwise(tiny_model, guide, tmp_path):
    from safetensors.torch import load_file

    from evalkit.train.grpo import run_grpo

    kw = dict(guide_model=str(guide), guide_tokens=2, guided_rollouts=1, hint="all-wrong")
    straight = run_grpo(_opts(tiny_model, **kw), tmp_path / "a")
    run_grpo(_opts(tiny_model, steps=1, **kw), tmp_path / "b")
    resumed = run_grpo(_opts(tiny_model, **kw), tmp_path / "b")
    a = load_file(f"{straight['final_checkpoint']}/model.safetensors")
    b = load_file(f"{resumed['final_checkpoint']}/model.safetensors")
    assert all(torch.equal(a[key], b[key]) for key in a)
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == (tmp_path / "b" / "metrics.jsonl").read_text()


def test_bad_guidance_options_are_one_line(tiny_model, guide, tmp_path):
    from transformers import AutoTokenizer

    retok = tmp_path / "retok"
    shutil.copytree(guide, retok)
    tok = AutoTokenizer.from_pretrained(retok)
    tok.add_tokens(["<extra>"])
    tok.save_pretrained(retok)
    base = ["train", "grpo", "--model", str(tiny_model), "--task-size", "8", "--group-size", "4", "--device", "cpu"]
    cases = [
        (["--guide-model", str(guide), "--guide-tokens", "2", "--guided-rollouts", "4"], "must be below --group-size"),
        (["--guided-rollouts", "1", "--guide-tokens", "2"], "give --guide-model"),
        (["--guide-model", str(retok), "--guide-tokens", "2", "--guided-rollouts", "1"], "tokenizers differ"),
        (["--hint", "always"], "--hint always"),
        (["--hint", "all-wrong", "--hint-fraction", "1.5"], "--hint-fraction 1.5"),
    ]
    for extra, message in cases:
        out = tmp_path / "out"
        result = CliRunner().invoke(app, [*base, *extra, "--out", str(out)])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert message in result.output and not out.exists()
