"""`evalkit tokens`: where a teacher and a student disagree, token by token, on the student's samples.

    evalkit tokens runs/grpo/step-000096 smollm2-135m --samples runs/base --out reports/tokens

Sparse-token on-policy distillation (Liu et al.): almost all of the teacher-student signal sits
in a handful of tokens per trajectory. On the student's own samples (a passk run folder of the
student), teacher-forced through both models (evalkit.forced.score_positions, one forward pass
per batch and model), at every generated position, over the full vocabulary at the run's
temperature: the reverse KL `KL(student || teacher) = sum_v p_s (log p_s - log p_t)` (the
on-policy distillation objective), the forward KL `KL(teacher || student)`, and whether the
two argmax tokens agree.

Report (`tokens.json`, CSVs): how concentrated the total reverse KL is (share held by the top
0.05%, 0.5% and 5% of tokens, metrics.tokens; tokens per trajectory needed for half of its
divergence; a Lorenz curve), where the divergent tokens sit (relative position in the
completion by tenths, inside the final answer or not, correct vs incorrect samples), and the
most divergent tokens with their context. The two tokenizers must match (one line otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.options import BatchOptions, ModelOptions, option

__all__ = ["TokensOptions", "run_tokens", "SHARES"]

SHARES = (0.0005, 0.005, 0.05)


@dataclass(frozen=True)
class TokensOptions(BatchOptions, ModelOptions):  # model: the teacher
    own_defaults = {"batch_size": 8}

    student: str = option("smollm2-135m", "The student: checkpoint folder, hub name, or built-in 'smollm2-135m'.")
    samples: str = option("", "A passk run folder of the student (its own samples are scored).")
    top: int = option(20, "Tokens of largest divergence listed.", min=0)


def run_tokens(opts: TokensOptions, out: Path | None = None, *, progress: Callable | None = None) -> dict:
    """tokens.json's content; with `out`, written there under evalkit.outdir's contract (the
    folder claimed before any work: locked, never a user's files)."""
    from evalkit.outdir import computed_into

    opts.validate()
    return computed_into(out, "tokens", {"options": opts.identity()}, lambda: _tokens(opts, progress), output_files)


def _tokens(opts: TokensOptions, progress: Callable | None) -> dict:
    """Per-token divergence of teacher and student on the student's samples; tokens.json's content."""
    from evalkit.forced import forced_from_records, records_of_run, score_positions
    from evalkit.models import identity, load_model, resolve_device, resolve_model
    from evalkit.models import tokenizer_mismatch as mismatch

    if not opts.samples or not Path(opts.samples).is_dir():
        raise UsageError(f"--samples {opts.samples!r}: give a passk run folder of the student")
    records = records_of_run(Path(opts.samples))
    device = resolve_device(opts.device)
    refs = {"teacher": resolve_model(opts.model), "student": resolve_model(opts.student)}
    (teacher, t_tok), (student, s_tok) = (load_model(refs[k], dtype=opts.dtype, device=device) for k in refs)
    why = mismatch(s_tok, t_tok, student, teacher)
    if why:
        raise UsageError(f"teacher and student: {why}; per-token divergence needs one tokenization")
    samples = forced_from_records(s_tok, records)
    tick = progress("teacher and student", len(samples)) if progress else None
    scored = score_positions([student, teacher], samples, _divergence, max_batch=opts.batch_size, on_batch=tick)
    report = summarize(records, samples, scored, s_tok, opts.top)
    report = {"kind": "tokens", "samples": opts.samples,
              "models": {k: identity(r, opts.dtype)
                         for k, r in refs.items()}, **report}
    return report


def _divergence(sample, rows) -> dict:
    import torch

    ls, lt = (torch.log_softmax(r, dim=-1) for r in rows)
    ps, pt = ls.exp(), lt.exp()
    return {"reverse_kl": (ps * (ls - lt)).sum(-1).clamp(min=0).double().cpu().numpy(),
            "forward_kl": (pt * (lt - ls)).sum(-1).clamp(min=0).double().cpu().numpy(),
            "agree": (ls.argmax(-1) == lt.argmax(-1)).cpu().numpy()}


def summarize(records, samples, scored, tok, top: int) -> dict:
    import numpy as np

    from metrics.tokens import concentration, lorenz, tokens_for_half

    kl = [s["reverse_kl"] for s in scored if s is not None]
    flat = np.concatenate(kl) if kl else np.array([])
    where = _where(records, scored, tok)
    return {
        "tokens": int(flat.size), "trajectories": len(kl),
        "reverse_kl_total": float(flat.sum()), "reverse_kl_per_token": float(flat.mean()) if flat.size else None,
        "forward_kl_per_token": float(np.concatenate([s["forward_kl"] for s in scored if s]).mean())
        if flat.size else None,
        "argmax_agreement": float(np.concatenate([s["agree"] for s in scored if s]).mean()) if flat.size else None,
        "concentration": {f"top_{q * 100:g}pct": share for q, share in concentration(flat, SHARES).items()},
        "tokens_for_half": {"median": float(np.median([tokens_for_half(v) for v in kl])) if kl else None,
                            "mean": float(np.mean([tokens_for_half(v) for v in kl])) if kl else None},
        "lorenz": lorenz(flat),
        "where": where,
        "most_divergent": _most_divergent(tok, samples, scored, top),
        "answer_mask_rule": "the tokens spelling the completion's final answer (evalkit.tasks.mathgrade)",
    }


def _where(records, scored, tok) -> dict:
    """Share of the total reverse KL by tenth of the completion, in the answer, by outcome."""
    import numpy as np

    from evalkit.traces import answer_token_mask

    by_tenth = np.zeros(10)
    answer, other, by_outcome = 0.0, 0.0, {}
    for r, s in zip(records, scored, strict=True):
        if s is None:
            continue
        kl = s["reverse_kl"]
        tenth = np.minimum((np.arange(kl.size) * 10) // max(kl.size, 1), 9)
        np.add.at(by_tenth, tenth, kl)
        mask = answer_token_mask(tok, r, kl.size)
        answer += float(kl[mask].sum())
        other += float(kl[~mask].sum())
        key = "correct" if r.get("outcome") == "correct" else "not_correct"
        total, tokens = by_outcome.get(key, (0.0, 0))
        by_outcome[key] = (total + float(kl.sum()), tokens + int(kl.size))
    total = by_tenth.sum()
    return {"by_tenth_of_completion": (by_tenth / total).tolist() if total > 0 else None,
            "in_final_answer": answer / (answer + other) if answer + other > 0 else None,
            "per_token_by_outcome": {k: t / n if n else None for k, (t, n) in by_outcome.items()}}


def _most_divergent(tok, samples, scored, n: int) -> list[dict]:
    flat = [(-float(s["reverse_kl"][k]), i, k) for i, s in enumerate(scored) if s is not None
            for k in range(len(s["reverse_kl"]))]
    flat.sort()
    out = []
    for value, i, k in flat[:n]:
        ids = samples[i].completion_ids
        token = tok.decode([ids[k]]) if k < len(ids) else "<stop>"
        out.append({"sample": i, "position": k, "token": token, "reverse_kl": -value,
                    "forward_kl": float(scored[i]["forward_kl"][k]), "agree": bool(scored[i]["agree"][k]),
                    "before": tok.decode(list(ids[max(0, k - 12) : k])), "after": tok.decode(list(ids[k + 1 : k + 6]))})
    return out


def output_files(report: dict) -> dict[str, str]:
    """tokens.json and tokens_most_divergent.csv, by file name."""
    import pandas as pd

    from evalkit.jsonio import plain_json

    return {"tokens.json": json.dumps(plain_json(report), indent=2, allow_nan=False, default=str) + "\n",
            "tokens_most_divergent.csv": pd.DataFrame(report["most_divergent"]).to_csv(index=False)}
