"""Teacher-forced entropy of stored or external completions, as a Report (the forward pass
itself is evalkit.forced.entropies_of_records; this module only reads and tabulates).

    evalkit entropy --model smollm2-135m --samples vllm_out.jsonl --out reports/ent_vllm
    evalkit entropy --model runs/base/../ckpt --samples runs/base   # recompute a run's entropy

`--samples` is either a JSONL of prompt/completion records (prompt: the user
message, rendered with the chat template unless --raw-prompt; optional
temperature and finish_reason, default "stop") or a passk run folder, whose
prompts are rebuilt from its task identity and whose completions are re-
tokenized from text; the recorded entropy is then shown beside the
recomputed one. See evalkit/forced.py for the definition and its limits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analyses.sample_stats import Report

__all__ = ["teacher_report", "run_records"]


def run_records(run) -> list[dict]:
    """prompt/completion records of a passk run, prompts rebuilt from its task."""
    from evalkit.forced import records_of_run

    return records_of_run(run.path)


def teacher_report(samples: Path, run, records: list[dict], values: list, num_tokens: list, model: dict, *,
                   raw_prompt: bool = False) -> Report:
    """The Report of teacher-forced entropies (evalkit.forced.entropies_of_records), beside the
    recorded ones when `run` (a passk run folder, else None) holds them."""
    from metrics.entropy import entropy_summary

    values = np.array([np.nan if h is None else h for h in values])
    table = pd.DataFrame({"index": range(len(records)), "num_tokens": num_tokens, "mean_entropy": values})
    correct = np.zeros(len(records), dtype=bool)
    notes = {"model": model, "samples": str(samples), "raw_prompt": raw_prompt,
             "definition": "exact full-vocabulary entropy of softmax(logits/temperature), nats, mean over "
                           "generated tokens incl. the stop token when finish_reason == stop"}
    if run is not None:
        table.insert(1, "problem_id", run.samples["problem_id"].to_numpy())
        table["recorded_entropy"] = run.samples["mean_entropy"].to_numpy()
        table["abs_diff"] = (table["mean_entropy"] - table["recorded_entropy"]).abs()
        correct = run.samples["correct"].to_numpy()
        if table["abs_diff"].notna().any():
            notes["max_abs_diff_vs_recorded"] = float(table["abs_diff"].max())
    summary = entropy_summary(values, table["num_tokens"], correct)
    if run is None:
        summary.pop("mean_correct"), summary.pop("mean_incorrect")
    notes["summary"] = summary
    runs = (run.identity(),) if run is not None else ()
    return Report("entropy", runs, {"samples": table}, notes)
