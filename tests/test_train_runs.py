"""End-to-end trainer runs on tiny models: learning, checkpoints, resume, es-grpo, bad input.

The learnable task: a tiny Llama is first taught (a few supervised steps) to
answer "Secret digit #i?" with some digit, uniformly at random, so it knows the
format but not the answer. The task's answer is then fixed to the digit the
base model ranks second (chosen before training, so neither trainer starts at
0 or 1). Reward comes from evalkit's own math scorer. Improvement is measured
exactly, from logits over all 16 prompts: the mean probability of the answer
(GRPO, which samples) and the share of prompts whose greedy answer it is (ES,
whose fitness is greedy).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from evalkit.cli_train import train_app  # noqa: E402
from evalkit.train.common import resumes_from  # noqa: E402
from evalkit.train.es import ESOptions, run_es  # noqa: E402
from evalkit.train.grpo import GRPOOptions, run_grpo  # noqa: E402

N_PROMPTS = 16


def _question(i: int) -> str:
    return f"Secret digit #{i}?"


def _prompts(tok):
    return [tok.apply_chat_template([{"role": "user", "content": _question(i)}], add_generation_prompt=True,
                                    tokenize=False) for i in range(N_PROMPTS)]


def _answer_stats(folder, tok, digit: str) -> tuple[float, float]:
    """(mean probability of `digit` as first token, share of prompts where it is greedy)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder)
    enc = tok(_prompts(tok), return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        logits = model(**enc).logits[:, -1]
    i = tok.convert_tokens_to_ids(digit)
    return float(logits.softmax(-1)[:, i].mean()), float((logits.argmax(-1) == i).float().mean())


@pytest.fixture(scope="module")
def digit_task(tmp_path_factory):
    """(model folder, task file, answer digit): a tiny model that answers with a random digit."""
    from helpers.tinymodel import make_tiny_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("digit")
    folder = make_tiny_model(root / "model", seed=0)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    prompts = _prompts(tok)
    starts = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    for _ in range(40):
        digits = torch.randint(0, 10, (N_PROMPTS,), generator=gen).tolist()
        enc = tok([p + str(d) + tok.eos_token for p, d in zip(prompts, digits, strict=True)],
                  return_tensors="pt", padding=True, add_special_tokens=False)
        labels = torch.full_like(enc["input_ids"], -100)
        for r, s in enumerate(starts):
            labels[r, s : s + 2] = enc["input_ids"][r, s : s + 2]  # the digit and the stop token
        loss = model(**enc, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(folder)
    tok.padding_side = "left"
    probs = {d: _answer_stats(folder, tok, d)[0] for d in "0123456789"}
    answer = sorted(probs, key=probs.get, reverse=True)[1]
    task = root / "digit.jsonl"
    task.write_text("".join(json.dumps({"id": f"d{i}", "question": _question(i), "answer": answer}) + "\n"
                            for i in range(N_PROMPTS)))
    return folder, task, answer, tok


def _grpo_opts(folder, task, **kw):
    base = dict(model=str(folder), task=str(task), group_size=8, prompts_per_step=4, steps=4, lr=1e-2,
                max_new_tokens=2, grader_workers=1, save_every=2, device="cpu")
    return GRPOOptions(**{**base, **kw})


def _es_opts(folder, task, **kw):
    base = dict(model=str(folder), task=str(task), population=8, sigma=0.02, alpha=0.01, iterations=3,
                prompts_per_iteration=16, max_new_tokens=2, grader_workers=1, save_every=1, device="cpu")
    return ESOptions(**{**base, **kw})


def test_grpo_raises_the_reward_and_writes_checkpoints(digit_task, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, task, answer, tok = digit_task
    before, _ = _answer_stats(folder, tok, answer)
    summary = run_grpo(_grpo_opts(folder, task), tmp_path / "grpo")
    after, _ = _answer_stats(summary["final_checkpoint"], tok, answer)
    assert after > before + 0.1, (before, after)
    records = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for key in ("reward", "reward_std", "frac_reward_zero_std", "entropy", "clip_ratio/low_mean",
                "clip_ratio/high_mean", "clip_ratio/region_mean", "completions/mean_length",
                "completions/clipped_ratio", "loss", "grad_norm"):
        assert key in records[0], key
    assert sorted(p.name for p in (tmp_path / "grpo").glob("step-*")) == ["step-000002", "step-000004"]
    assert not (tmp_path / "grpo" / "step-000002" / "optimizer.pt").exists()
    assert (tmp_path / "grpo" / "step-000004" / "optimizer.pt").is_file()
    assert resumes_from(tmp_path / "grpo" / "step-000004")
    assert not resumes_from(tmp_path / "grpo" / "step-000002")  # its AdamW state is gone
    AutoModelForCausalLM.from_pretrained(tmp_path / "grpo" / "step-000004")
    AutoTokenizer.from_pretrained(tmp_path / "grpo" / "step-000004")


def test_es_raises_greedy_accuracy_with_exact_restores(digit_task, tmp_path):
    folder, task, answer, tok = digit_task
    _, before = _answer_stats(folder, tok, answer)
    summary = run_es(_es_opts(folder, task), tmp_path / "es")
    _, after = _answer_stats(summary["final_checkpoint"], tok, answer)
    assert after > before, (before, after)
    records = [json.loads(line) for line in (tmp_path / "es" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["restore_residual"] == 0 for r in records)
    assert all(r["restore_fixups_per_member"] > 0 for r in records)  # sigma 0.02 forces some
    for key in ("fitness/mean", "fitness/std", "fitness/min", "fitness/max", "zero_spread", "reward",
                "entropy", "completions/mean_length"):
        assert key in records[0], key
    assert summary["restore_residual_total"] == 0
    assert all(resumes_from(p) for p in (tmp_path / "es").glob("step-*"))  # weights and seed are its state


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(Path(folder) / "model.safetensors")


@pytest.mark.parametrize("trainer", ["es", "grpo"])
def test_interrupted_run_resumes_to_the_same_weights(digit_task, tmp_path, trainer):
    folder, task, _, _ = digit_task
    if trainer == "es":
        opts, run = _es_opts(folder, task, population=3, iterations=2), run_es
    else:
        opts, run = _grpo_opts(folder, task, steps=2, save_every=1, prompts_per_step=2, group_size=4), run_grpo
    run(opts, tmp_path / "a")
    run(replace(opts, **{"iterations" if trainer == "es" else "steps": 1}), tmp_path / "b")
    with open(tmp_path / "b" / "metrics.jsonl", "a") as fh:  # killed during step 2, after checkpoint 1
        fh.write('{"step": 2, "torn')
    run(opts, tmp_path / "b")
    wa, wb = _weights(tmp_path / "a" / "step-000002"), _weights(tmp_path / "b" / "step-000002")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == (tmp_path / "b" / "metrics.jsonl").read_text()


def test_checkpoint_goes_through_passk_and_diff(digit_task, tmp_path):
    from evalkit.passk import PasskOptions, run_passk

    folder, task, _, _ = digit_task
    summary = run_es(_es_opts(folder, task, population=2, iterations=1), tmp_path / "es")
    ckpt = summary["final_checkpoint"]
    passk = run_passk(PasskOptions(model=ckpt, task=str(task), n=2, ks=(1, 2), limit=4, max_new_tokens=2,
                                   grader_workers=1, device="cpu"), tmp_path / "passk")
    assert passk["complete"] and passk["samples"] == 8
    diff = pytest.importorskip("evalkit.diff")
    result = diff.diff_checkpoints([str(folder), ckpt])
    assert result.summary["tensors_compared"] > 0
    assert result.summary["updates"]["other"]["overall"]["changed_bits"] > 0


def _cli(args):
    return CliRunner().invoke(train_app, args)


def test_es_grpo_writes_both_stages_through_the_cli(digit_task, tmp_path):
    folder, task, _, _ = digit_task
    out = tmp_path / "both"
    args = ["es-grpo", "--out", str(out), "--model", str(folder), "--task", str(task), "--population", "2",
            "--iterations", "1", "--steps", "1", "--group-size", "2", "--prompts-per-step", "2",
            "--max-new-tokens", "2", "--grader-workers", "1", "--device", "cpu", "--sigma", "0.02"]
    result = _cli(args)
    assert result.exit_code == 0, result.output
    assert (out / "es" / "step-000001" / "model.safetensors").is_file()
    assert (out / "grpo" / "step-000001" / "model.safetensors").is_file()
    grpo_run = json.loads((out / "grpo" / "run.json").read_text())
    assert grpo_run["model"]["name"].endswith("es/step-000001")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["es"]["complete"]
    again = _cli(args)  # complete: nothing to redo
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize("args, message", [
    (["es", "--population", "1"], "--population 1"),
    (["grpo", "--group-size", "1"], "--group-size 1"),
    (["es", "--noise", "gaussian"], "--noise"),
    (["grpo", "--loss", "ppo"], "--loss"),
])
def test_bad_options_exit_2(tmp_path, args, message):
    result = _cli([*args, "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert message in result.output


def test_folder_with_another_run_is_refused(digit_task, tmp_path):
    folder, task, _, _ = digit_task
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"kind": "train-grpo"}))
    (out / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")  # work done
    result = _cli(["es", "--out", str(out), "--model", str(folder), "--task", str(task), "--device", "cpu"])
    assert result.exit_code == 2
    assert "kind" in result.output and "another --out" in result.output


def test_task_without_scorer_is_refused(monkeypatch, tmp_path, digit_task):
    import evalkit.tasks as tasks

    folder, _, _, _ = digit_task
    spec = tasks.TaskSpec("mystery", "unscored", 1)
    monkeypatch.setattr(tasks, "load_task", lambda *a, **k: tasks.Task(spec, (tasks.Problem("p", "q", "1"),)))
    result = _cli(["grpo", "--out", str(tmp_path / "g"), "--model", str(folder), "--device", "cpu"])
    assert result.exit_code == 2
    assert "no scorer" in result.output


def test_identity_records_every_option_and_a_changed_one_is_refused(digit_task, tmp_path):
    """run.json keeps every option that shapes the run, so resuming with another --sigma is
    refused, naming it; how the work is spread (Ray workers, threads) is not identity."""
    from evalkit.train.es import ESOptions

    recorded = ESOptions(sigma=0.01).identity()
    assert recorded["sigma"] == 0.01 and recorded["noise"] == "iid" and recorded["backend"] == "hf"
    assert ESOptions(backend="vllm").identity()["backend"] == "vllm"
    assert ESOptions(ray_workers=4, threads=3).identity() == ESOptions().identity()
    folder, task, _, _ = digit_task
    common = ["es", "--model", str(folder), "--task", str(task), "--device", "cpu", "--population", "2",
              "--iterations", "1", "--prompts-per-iteration", "2", "--max-new-tokens", "2",
              "--out", str(tmp_path / "run")]
    assert _cli(common).exit_code == 0
    settings = json.loads((tmp_path / "run" / "run.json").read_text())
    assert settings["options"]["sigma"] == 0.001
    result = _cli([*common, "--sigma", "0.002"])
    assert result.exit_code == 2 and "sigma" in result.output
