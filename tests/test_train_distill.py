"""`evalkit train distill` on tiny models: at f = 1 the step's gradient is the reverse-KL gradient
computed directly; at f < 1 only the selected tokens carry gradient; resume is bitwise; bad input."""

from __future__ import annotations

import shutil

import pytest
import torch
from typer.testing import CliRunner

from evalkit.cli import app


@pytest.fixture(scope="module")
def teacher(tiny_model, tmp_path_factory):
    from helpers.tinymodel import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("teacher") / "model", seed=3)


def _opts(student, teacher, **kw):
    from evalkit.train.distill import DistillOptions

    base = dict(model=str(student), teacher=str(teacher), task="arith", task_size=8, steps=2, prompts_per_step=2,
                samples_per_prompt=2, max_new_tokens=4, lr=1e-2, grader_workers=1, save_every=1, device="cpu")
    return DistillOptions(**{**base, **kw})


def test_full_fraction_step_is_the_reverse_kl_gradient(tiny_model, teacher, monkeypatch):
    import evalkit.train.distill as distill
    from evalkit.models import load_model, resolve_model
    from evalkit.tasks import load_task

    student, tok = load_model(resolve_model(str(tiny_model)))
    t_model, _ = load_model(resolve_model(str(teacher)))
    seqs = [((5, 6, 7), (10, 11, 12)), ((5, 8), (13, 14, 15, 16)), ((9,), (17,))]
    monkeypatch.setattr(distill, "_sample", lambda *a, **k: (seqs, [0.0, 1.0, 0.0], []))
    monkeypatch.setattr(distill, "completion_metrics", lambda s: {}, raising=False)

    class Capture(torch.optim.SGD):  # keeps the gradients: no step taken
        def step(self, closure=None):
            return None

    opt = Capture(student.parameters(), lr=0.0)
    import evalkit.train.common as common

    monkeypatch.setattr(common, "completion_metrics", lambda s: {})
    opts = _opts(tiny_model, teacher, micro_batch=2, max_grad_norm=1e9)
    from evalkit.train.common import Policy

    record = distill.distill_step(Policy(student, tok, None, (3,), opts), t_model, load_task("arith", size=8), 1, opt)
    ours = {n: p.grad.clone() for n, p in student.named_parameters()}
    assert record["tokens_selected"] == 8 == record["tokens_total"]

    student.zero_grad()
    total = 0.0
    for p, c in seqs:  # the direct computation: every position, one sequence at a time
        ids = torch.tensor([list(p) + list(c)])
        ls = torch.log_softmax(student(input_ids=ids).logits[0, len(p) - 1 : -1].float(), -1)
        with torch.no_grad():
            lt = torch.log_softmax(t_model(input_ids=ids).logits[0, len(p) - 1 : -1].float(), -1)
        total = total + (ls.exp() * (ls - lt)).sum()
    (total / 8).backward()
    for name, p in student.named_parameters():
        assert torch.allclose(ours[name], p.grad, atol=1e-6, rtol=1e-4), name


@pytest.mark.parametrize("how", ["divergence", "entropy", "random"])
def test_only_selected_tokens_carry_gradient(how):
    from evalkit.train.distill import distill_loss, select_tokens

    torch.manual_seed(0)
    s = torch.randn(10, 7, requires_grad=True)
    t = torch.randn(10, 7)
    with torch.no_grad():
        ls = torch.log_softmax(s, -1)
        kl = (ls.exp() * (ls - torch.log_softmax(t, -1))).sum(-1)
        ent = -(ls.exp() * ls).sum(-1)
    chosen = select_tokens(kl, ent, 3, how, seed=5)
    loss, _ = distill_loss(s, t, chosen)
    loss.backward()
    carrying = (s.grad.abs().sum(-1) > 0).nonzero().squeeze(-1)
    assert carrying.tolist() == chosen.tolist() and len(chosen) == 3
    if how == "divergence":
        assert set(chosen.tolist()) == set(torch.topk(kl, 3).indices.tolist())


def test_resume_is_bitwise(tiny_model, teacher, tmp_path):
    from safetensors.torch import load_file

    from evalkit.train.distill import run_distill

    straight = run_distill(_opts(tiny_model, teacher, token_fraction=0.5), tmp_path / "a")
    run_distill(_opts(tiny_model, teacher, token_fraction=0.5, steps=1), tmp_path / "b")
    resumed = run_distill(_opts(tiny_model, teacher, token_fraction=0.5), tmp_path / "b")
    a = load_file(f"{straight['final_checkpoint']}/model.safetensors")
    b = load_file(f"{resumed['final_checkpoint']}/model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    assert lines == (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert '"kl_selected"' in lines[0] and '"tokens_selected"' in lines[0]


def test_bad_input_is_one_line(tiny_model, teacher, tmp_path):
    from transformers import AutoTokenizer

    retok = tmp_path / "retok"
    shutil.copytree(teacher, retok)
    tok = AutoTokenizer.from_pretrained(retok)
    tok.add_tokens(["<extra>"])
    tok.save_pretrained(retok)
    base = ["train", "distill", "--model", str(tiny_model), "--task-size", "8", "--max-new-tokens", "4",
            "--device", "cpu", "--steps", "1"]
    for extra, message in ((["--teacher", str(retok)], "tokeniz"), (["--teacher", str(teacher), "--token-fraction",
                                                                      "0"], "--token-fraction 0"),
                           (["--teacher", str(teacher), "--select", "best"], "--select best"), ([], "--teacher")):
        out = tmp_path / "out"
        result = CliRunner().invoke(app, [*base, *extra, "--out", str(out)])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert message in result.output
        assert not out.exists() or sorted(p.name for p in out.iterdir()) == []
