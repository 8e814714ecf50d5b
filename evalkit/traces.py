"""`evalkit traces`: how likely foreign reasoning traces are under a policy, and what a GRPO clip cuts.

    evalkit traces smollm2-135m --traces runs/grpo-eval --out reports/traces           # a passk run's samples
    evalkit traces POLICY --traces vllm_out.jsonl --out reports/traces                 # with stored logprobs
    evalkit traces POLICY --traces teacher.jsonl --behaviour TEACHER --out reports/t   # scored by their writer

Echo-GRPO (Lee et al.): off-policy traces reach the GRPO loss with tokens the policy finds
unlikely, and the ratio clip cuts exactly those. Per trace token, teacher-forced
(evalkit.forced.score_positions, one forward pass per batch and model): the policy's
log-probability of the token, its exact entropy, and with a behaviour probability (stored
`logprobs` in the JSONL, or `--behaviour MODEL`) the ratio `r = pi_policy / pi_behaviour`.

Report (`traces.json`, CSVs): the NLL per token of the traces under the policy beside the NLL
of the policy's own samples on the same prompts (temperature 1, as long as the longest trace;
the "idiolect gap", with a percentile bootstrap over prompts); quantiles of the policy's token
probability and the shares below 0.01 and 0.1; the share of tokens whose ratio lies outside
`[1 - eps_low, 1 + eps_high]` (TRL's eps 0.2 by default; DAPO uses eps_high 0.28), below and
above, over all tokens and over the tokens of the final answer (evalkit.tasks.mathgrade's
final answer, located in the trace); the least likely tokens with their context. Traces are
scored on their generated tokens (the stop token, whose id a text does not carry, is left out).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.options import BatchOptions, BootstrapOptions, ModelOptions, SeedOptions, option

__all__ = ["TracesOptions", "run_traces", "read_traces", "answer_token_mask"]

HIST_EDGES = [-12.0, -8.0, -6.0, -4.0, -3.0, -2.0, -1.5, -1.0, -0.5, -0.2, 0.0]  # log10 p bins


@dataclass(frozen=True)
class TracesOptions(BootstrapOptions, SeedOptions, BatchOptions, ModelOptions):  # model: the policy
    own_defaults = {"batch_size": 8, "n_boot": 2000}

    traces: str = option("", "JSONL of prompt/completion (optional logprobs), or a passk run folder.")
    behaviour: str | None = option(None, "The model that wrote the traces, to score them under it.")
    raw_prompt: bool = option(False, "Prompts are already rendered; skip the chat template.")
    eps_low: float = option(0.2, "Lower clip epsilon of the ratio a GRPO/PPO loss would clip.", min=0, below=1)
    eps_high: float = option(0.2, "Upper clip epsilon.", min=0)
    own_samples: int = option(1, "Policy samples per prompt for the idiolect gap (0: skip).", min=0)
    least: int = option(20, "Least likely tokens listed.", min=0)


def read_traces(source: str) -> list[dict]:
    """Records {prompt, completion, [logprobs], [outcome]} from a JSONL file or a passk run folder."""
    from evalkit.forced import read_samples_file, records_of_run

    path = Path(source)
    if not source:
        raise UsageError("--traces: give a JSONL of prompt/completion records or a passk run folder")
    records = records_of_run(path) if path.is_dir() else read_samples_file(path)
    for number, r in enumerate(records, 1):
        lp = r.get("logprobs")
        if lp is not None and (not isinstance(lp, list) or not all(isinstance(x, int | float) for x in lp)):
            raise UsageError(f"{source}: record {number}: logprobs must be a list of numbers, one per token")
    return records


def run_traces(opts: TracesOptions, out: Path | None = None, *, progress: Callable | None = None) -> dict:
    """traces.json's content; with `out`, written there under evalkit.outdir's contract (the
    folder claimed before any work: locked, never a user's files)."""
    from evalkit.outdir import computed_into

    opts.validate()
    return computed_into(out, "traces", {"options": opts.identity()}, lambda: _traces(opts, progress), output_files)


def _traces(opts: TracesOptions, progress: Callable | None) -> dict:
    """Score the traces under the policy (and behaviour); returns traces.json's content."""
    from evalkit.models import identity as model_identity
    from evalkit.models import load_model, resolve_device, resolve_model

    records = read_traces(opts.traces)
    device = resolve_device(opts.device)
    policy_ref = resolve_model(opts.model)
    policy, tok = load_model(policy_ref, dtype=opts.dtype, device=device)
    behaviour = _behaviour(opts, policy, tok, device)
    samples = _forced(tok, records, opts.raw_prompt)
    behaviour_logp = _stored_logprobs(records, samples) if behaviour is None else None
    models = [policy] if behaviour is None else [policy, behaviour]
    tick = progress("scoring traces", len(samples)) if progress else None
    scored = _score(models, samples, opts, tick)
    own = _own_nll(policy, tok, records, samples, opts, progress) if opts.own_samples else None
    identity = model_identity(policy_ref, opts.dtype)
    report = summarize(records, samples, scored, behaviour_logp, own, tok, opts)
    report = {"kind": "traces", "policy": identity, "traces": opts.traces,
              "behaviour": opts.behaviour or ("stored logprobs" if behaviour_logp else None), **report}
    return report


def _behaviour(opts: TracesOptions, policy, tok, device):
    if opts.behaviour is None:
        return None
    from evalkit.models import load_model, resolve_model, tokenizer_mismatch

    model, other = load_model(resolve_model(opts.behaviour), dtype=opts.dtype, device=device)
    why = tokenizer_mismatch(tok, other, policy, model)
    if why:
        raise UsageError(f"--behaviour {opts.behaviour}: {why}; the ratio needs one tokenization")
    return model


def _forced(tok, records: list[dict], raw_prompt: bool) -> list:
    """Teacher-forced samples of the traces' generated tokens (no stop token: its id is unknown)."""
    from dataclasses import replace

    from evalkit.forced import forced_from_records

    return [replace(s, stopped=False) for s in forced_from_records(tok, records, raw_prompt=raw_prompt)]


def _stored_logprobs(records: list[dict], samples: list) -> list | None:
    stored = [r.get("logprobs") for r in records]
    if all(lp is None for lp in stored):
        return None
    for number, (lp, s) in enumerate(zip(stored, samples, strict=True), 1):
        if lp is None or len(lp) != len(s.completion_ids):
            raise UsageError(f"record {number}: {0 if lp is None else len(lp)} stored logprobs for "
                             f"{len(s.completion_ids)} tokens under the policy's tokenizer: the tokenizers "
                             "differ (give --behaviour instead)")
    return stored


def _token_stats(sample, rows) -> dict:
    import torch

    target = torch.tensor(sample.completion_ids, device=rows[0].device)
    out = {}
    for name, logits in zip(("policy", "behaviour"), rows, strict=False):
        logp = torch.log_softmax(logits, dim=-1)
        out[name] = logp.gather(-1, target[:, None]).squeeze(-1).double().cpu().numpy()
        if name == "policy":
            out["entropy"] = (-(logp.exp() * logp).sum(-1)).double().cpu().numpy()
    return out


def _score(models, samples, opts: TracesOptions, tick) -> list[dict]:
    from evalkit.forced import score_positions

    return score_positions(models, samples, _token_stats, max_batch=opts.batch_size, on_batch=tick)


def _own_nll(policy, tok, records, samples, opts: TracesOptions, progress) -> dict:
    """The policy's own NLL per token on each trace prompt: `own_samples` completions at T = 1."""
    import numpy as np

    from evalkit.forced import ForcedSample
    from evalkit.sampling import SamplingConfig, render_prompt, sample_texts, stop_token_ids

    prompts = sorted({r["prompt"] for r in records})
    length = max(1, max(len(s.completion_ids) for s in samples))
    cfg = SamplingConfig(n=opts.own_samples, temperature=1.0, max_new_tokens=length, seed=opts.seed,
                         record_entropy=False)
    stop = stop_token_ids(policy, tok)
    forced = []
    tick = progress("own samples", len(prompts)) if progress else None
    for start in range(0, len(prompts), opts.batch_size):
        part = prompts[start : start + opts.batch_size]
        rendered = [p if opts.raw_prompt else render_prompt(tok, p) for p in part]
        for s in sample_texts(policy, tok, rendered, part, cfg, stop_ids=stop, rendered=True):
            ids = tuple(tok(rendered[s.problem_index], add_special_tokens=False)["input_ids"])
            forced.append((part[s.problem_index], ForcedSample(ids, s.token_ids, False, 1.0)))
        if tick:
            tick(len(part))
    scored = _score([policy], [f for _, f in forced], opts, None)
    nll: dict = {}
    for (prompt, _), stats in zip(forced, scored, strict=True):
        if stats is not None:
            nll.setdefault(prompt, []).append(-stats["policy"])
    return {p: float(np.concatenate(v).mean()) for p, v in nll.items()}


def answer_token_mask(tok, record: dict, n_tokens: int):
    """True at the completion tokens that spell its final answer (mathgrade's contract; the last
    occurrence of the answer's text in the completion)."""
    import numpy as np

    from evalkit.tasks.mathgrade import final_answer

    mask = np.zeros(n_tokens, dtype=bool)
    found = final_answer(record["completion"], record["prompt"])
    if found is None or not found.text:
        return mask
    start = record["completion"].rfind(found.text)
    if start < 0:
        return mask
    end = start + len(found.text)
    offsets = tok(record["completion"], add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    for i, (a, b) in enumerate(offsets[:n_tokens]):
        mask[i] = a < end and b > start
    return mask


def summarize(records, samples, scored, stored, own, tok, opts: TracesOptions) -> dict:
    """The report's figures from the per-token arrays."""
    import numpy as np

    from metrics.passk import bootstrap_passk
    from metrics.tokens import clip_shares, probability_summary

    logp = [s["policy"] if s else np.array([]) for s in scored]
    if stored is not None:
        beh = [np.asarray(x, dtype=np.float64) for x in stored]
    elif any(s and "behaviour" in s for s in scored):
        beh = [s["behaviour"] if s else np.array([]) for s in scored]
    else:
        beh = None
    all_logp = np.concatenate(logp) if logp else np.array([])
    answer = [answer_token_mask(tok, r, len(lp)) for r, lp in zip(records, logp, strict=True)]
    report = {"tokens": int(all_logp.size), "traces_scored": len(records),
              "nll_per_token": float(-all_logp.mean()) if all_logp.size else None,
              "mean_entropy": float(np.concatenate([s["entropy"] for s in scored if s]).mean()) if all_logp.size
              else None, "probability": probability_summary(np.exp(all_logp)),
              "log10_probability_histogram": _histogram(all_logp / np.log(10))}
    if beh is not None:
        ratio = [np.exp(a - b) for a, b in zip(logp, beh, strict=True)]
        flat = np.concatenate(ratio)
        mask = np.concatenate(answer)
        report["clip"] = {"eps_low": opts.eps_low, "eps_high": opts.eps_high,
                          "all_tokens": clip_shares(flat, eps_low=opts.eps_low, eps_high=opts.eps_high),
                          "answer_tokens": clip_shares(flat[mask], eps_low=opts.eps_low, eps_high=opts.eps_high),
                          "log10_ratio_histogram": _histogram(np.log10(flat), edges=[-4, -2, -1, -0.5, -0.2,
                                                                                     -0.1, 0, 0.1, 0.2, 0.5,
                                                                                     1, 2, 4])}
    if own:
        by_prompt: dict = {}
        for r, lp in zip(records, logp, strict=True):
            by_prompt.setdefault(r["prompt"], []).append(-lp)
        pairs = [(float(np.concatenate(v).mean()), own[p]) for p, v in by_prompt.items() if p in own]
        gap = np.array([a - b for a, b in pairs])
        (low,), (high,) = bootstrap_passk(gap[:, None], n_boot=opts.n_boot, seed=opts.seed)
        report["idiolect_gap"] = {"traces_nll": float(np.mean([a for a, _ in pairs])),
                                  "own_nll": float(np.mean([b for _, b in pairs])), "gap": float(gap.mean()),
                                  "ci_low": float(low), "ci_high": float(high), "prompts": len(pairs),
                                  "own_samples_per_prompt": opts.own_samples}
    report["least_likely"] = _least_likely(tok, samples, logp, opts.least)
    report["per_trace"] = [{"index": i, "tokens": int(len(lp)), "nll_per_token": float(-lp.mean()) if len(lp)
                            else None, "answer_tokens": int(m.sum()), "outcome": r.get("outcome")}
                           for i, (r, lp, m) in enumerate(zip(records, logp, answer, strict=True))]
    return report


def _histogram(values, edges=None) -> dict:
    import numpy as np

    edges = HIST_EDGES if edges is None else edges
    v = np.clip(np.asarray(values, dtype=np.float64), edges[0], edges[-1])
    counts, _ = np.histogram(v, bins=edges)
    return {"edges": list(edges), "counts": counts.tolist()}


def _least_likely(tok, samples, logp, n: int) -> list[dict]:
    import numpy as np

    flat = [(float(lp[k]), i, k) for i, lp in enumerate(logp) for k in range(len(lp))]
    flat.sort()
    out = []
    for value, i, k in flat[:n]:
        ids = samples[i].completion_ids
        out.append({"trace": i, "position": k, "token": tok.decode([ids[k]]), "probability": float(np.exp(value)),
                    "before": tok.decode(list(ids[max(0, k - 12) : k])),
                    "after": tok.decode(list(ids[k + 1 : k + 6]))})
    return out


def output_files(report: dict) -> dict[str, str]:
    """traces.json, traces_per_trace.csv and traces_least_likely.csv, by file name."""
    import pandas as pd

    from evalkit.jsonio import plain_json

    return {"traces.json": json.dumps(plain_json(report), indent=2, allow_nan=False, default=str) + "\n",
            "traces_per_trace.csv": pd.DataFrame(report["per_trace"]).to_csv(index=False),
            "traces_least_likely.csv": pd.DataFrame(report["least_likely"]).to_csv(index=False)}
