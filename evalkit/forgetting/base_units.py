"""The base's forgetting units scored once for several runs against it (a study's forgetting-base stage).

    score_base(opts, Path("forgetting/base"))                       # journal.jsonl and base.json
    run_forgetting(opts, out, base_from=Path("forgetting/base"))    # takes them, computes the model's

A run against any model computes the same units for its `base` side (per benchmark, each batch of
items or of multiple-choice pairs: same items, prompts, seeds, batches and settings).
`score_base` journals them under the run identity less what reads the model (journal.base_identity) (its weights and the
KL, which teacher-forces both models on the base's samples, so the KL is still computed by each
run). A run whose identity agrees on everything else appends them to its own journal before it
starts (journal.take_base_units) and reads them as a resumed run reads its own units, so its forgetting.json and items.jsonl
are the same bytes as a run that scores both. Where the identities differ (another CPU thread
count, another evalkit or torch), the run scores the base itself and says why.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

__all__ = ["score_base", "SUMMARY"]

SUMMARY = "base.json"


def score_base(opts, out: Path, *, progress=None) -> dict:
    """The base's units of every benchmark of `opts` (ForgettingOptions; model and KL ignored),
    journalled in `out` (resumable as a run is), and base.json: each benchmark's items and accuracy."""
    from evalkit.forgetting.journal import JOURNAL, Journal, base_identity
    from evalkit.forgetting.runner import _load_items, _Run, _run_identity, resolve_suite
    from evalkit.jsonio import plain_json
    from evalkit.models import resolve_device, resolve_model, weights_hash
    from evalkit.outdir import OutputFolder

    opts = replace(opts, model=opts.base, train_task=None, kl_task=None)
    opts.validate()
    chosen, _ = resolve_suite(opts.suite, opts.mc_files)
    loaded = [(name, kind, *_load_items(name, kind, opts)) for name, kind in chosen]
    ref = resolve_model(opts.base)
    refs, device, sha = {"base": ref, "model": ref}, resolve_device(opts.device), weights_hash(ref.path)
    identity = base_identity(_run_identity(opts, refs, {"base": sha, "model": sha}, device, loaded, None))
    folder = OutputFolder.claim(Path(out), "forgetting-base", {"base": opts.base})
    try:
        folder.expect([JOURNAL])
        journal = Journal.open(folder.path, identity)
        try:
            run = _Run(opts, journal, loaded, refs, device, progress, sides=("base",))
            rows = {}
            for name, kind, module, items in loaded:
                outcomes = run._side(name, kind, module, items, "base")
                rows[name] = {"items": len(outcomes), "accuracy": sum(bool(o.correct) for o in outcomes)
                              / max(1, len(outcomes))}
        finally:
            journal.close()
        summary = plain_json({"kind": "forgetting-base", "base": {"name": ref.name, "path": ref.path, "sha256": sha},
                              "benchmarks": rows, "units": len(run.done), "identity": identity})
        folder.publish({SUMMARY: json.dumps(summary, indent=2, allow_nan=False, default=str) + "\n"})
    finally:
        folder.release()
    return summary
