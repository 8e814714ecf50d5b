"""Real inputs for the report tests, made with evalkit's own functions on tiny models.

Two edited tiny checkpoints give runs with a known shape: "sharp" emits "7"
almost always (solves the answer-7 problems, never the answer-3 ones), "broad"
emits "7" or "3" about a quarter of the time each (worse at k=1, better at
large k). So RL-like "sharp" wins at small k and "broad" overtakes it at large k.
"""

from __future__ import annotations

import json
from pathlib import Path

QUESTIONS = [("3+4", "7"), ("2+5", "7"), ("1+6", "7"), ("9-2", "7"), ("14/2", "7"), ("0+7", "7"),
             ("1+2", "3"), ("6/2", "3")]


def edit_model(src: Path, dst: Path, logits: dict[str, float]) -> Path:
    """Copy of `src` whose first generated token is chosen by `logits` (token -> logit),
    followed by end of turn: attention/MLP outputs zeroed, so the residual stream is the
    last token's embedding, and lm_head rows aimed at the embeddings of newline and the digits."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(src)
    tok = AutoTokenizer.from_pretrained(src)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight
        nl = emb[tok.convert_tokens_to_ids("\n")]
        nl_unit = nl / nl.norm()
        eos_row = torch.zeros_like(nl)
        root_d = emb.shape[1] ** 0.5  # RMSNorm output has norm sqrt(d)
        for text, logit in logits.items():
            i = tok.convert_tokens_to_ids(text)
            emb[i] -= (emb[i] @ nl_unit) * nl_unit  # digit embedding orthogonal to newline's
            model.lm_head.weight[i] = logit / root_d * nl_unit
            eos_row += 6.0 / root_d * emb[i] / emb[i].norm()
        model.lm_head.weight[tok.eos_token_id] = eos_row
    model.save_pretrained(dst)
    tok.save_pretrained(dst)
    return dst


def task_file(folder: Path) -> Path:
    path = folder / "digits.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "answer": a}) + "\n"
                            for i, (q, a) in enumerate(QUESTIONS)))
    return path


def passk(model: Path, task: str, out: Path, n: int = 8) -> Path:
    from evalkit.passk import PasskOptions, run_passk

    ks = tuple(k for k in (1, 2, 4, 8) if k <= n)
    run_passk(PasskOptions(model=str(model), task=task, n=n, ks=ks, limit=None if task.endswith(".jsonl") else 3,
                           max_new_tokens=4, batch_size=64, device="cpu", grader_workers=1), out)
    return out


def sample_reports(runs: list[Path], out: Path) -> Path:
    """entropy.json (with the law fitted) and length.json in one folder, as the CLI writes them."""
    from analyses.runs import load_run
    from analyses.sample_stats import entropy_report, length_report, write_report

    loaded = [load_run(p) for p in runs]
    write_report(entropy_report(loaded, steps=list(range(len(loaded))), fit=True), out)
    write_report(length_report(loaded[1:], base=loaded[0]), out)
    return out


def groups_output(run: Path, train_log: Path, out: Path) -> Path:
    from analyses.group_stats import groups_report
    from analyses.runs import load_run
    from analyses.sample_stats import write_report

    write_report(groups_report(load_run(run), group_sizes=(2, 4, 8), train_log=train_log,
                               train_group_size=4), out)
    return out


def train_grpo(model: Path, task: Path, out: Path) -> Path:
    from evalkit.train.grpo import GRPOOptions, run_grpo

    run_grpo(GRPOOptions(model=str(model), task=str(task), group_size=4, prompts_per_step=2, steps=3,
                         lr=1e-2, max_new_tokens=4, save_every=3, device="cpu", grader_workers=1), out)
    return out


def diff(models: list[Path], out: Path) -> Path:
    from evalkit.diff import diff_checkpoints, write_outputs

    write_outputs(diff_checkpoints([str(m) for m in models]), out)
    return out


def forgetting(base: Path, model: Path, task: Path, out: Path) -> Path:
    from evalkit.forgetting.runner import ForgettingOptions, run_forgetting

    mc = out.parent / "mc.jsonl"
    rows = [{"question": q, "choices": [a, "5"], "answer": 0} for q, a in QUESTIONS]
    mc.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_forgetting(ForgettingOptions(base=str(base), model=str(model), suite="digits_mc",
                                     mc_files=(("digits_mc", str(mc)),), train_task=str(task), limit=0,
                                     kl_prompts=3, kl_max_new_tokens=4, device="cpu", grader_workers=1), out)
    return out


_BUILT: dict = {}


def build_all(root: Path, tiny_model: Path) -> dict[str, Path]:
    """Every input kind once per test session (cached): runs, trainer, diffs, reports, forgetting."""
    if "paths" in _BUILT:
        return _BUILT["paths"]
    root.mkdir(parents=True, exist_ok=True)
    task = task_file(root)
    sharp = edit_model(tiny_model, root / "models" / "sharp", {"7": 9.0})
    broad = edit_model(tiny_model, root / "models" / "broad", {"7": 4.0, "3": 4.0})
    paths = {
        "task": task, "sharp_model": sharp, "broad_model": broad,
        "broad": passk(broad, str(task), root / "runs" / "broad"),
        "sharp": passk(sharp, str(task), root / "runs" / "sharp"),
        "arith": passk(tiny_model, "arith", root / "runs" / "arith", n=4),
        "train": train_grpo(broad, task, root / "train" / "grpo"),
    }
    final = sorted(paths["train"].glob("step-*"))[-1]
    paths["diff"] = diff([broad, final], root / "reports" / "diff")
    paths["diff3"] = diff([tiny_model, sharp, broad], root / "reports" / "diff3")
    paths["samples"] = sample_reports([paths["broad"], paths["sharp"]], root / "reports" / "samples")
    paths["groups"] = groups_output(paths["broad"], paths["train"] / "metrics.jsonl", root / "reports" / "groups")
    paths["forgetting"] = forgetting(broad, sharp, task, root / "reports" / "forgetting")
    _BUILT["paths"] = paths
    return paths
