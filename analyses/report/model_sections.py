"""Weights and forgetting sections, from `evalkit diff --out` and `evalkit forgetting --out`.

    from analyses.report.model_sections import weights_section, forgetting_section
    section = weights_section(found.of("diff"))           # None when no diff.json was given

diff.json (evalkit.diff): per update (`other`, or `A` and `B` against one base)
the overall, per-module-kind and per-layer changed fractions and norms
(Mukherjee et al. 2025 conventions, see metrics.weights), and with three
checkpoints the overlap of the two updates (Jaccard against chance, cosine,
sign agreement). forgetting.json (evalkit.forgetting): per benchmark the
paired accuracy difference model - base with its bootstrap interval, McNemar
p-values, and the forward KL(pi_base || pi_model) on training-task prompts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

import analyses.report.figures as F
from analyses.report.document import Figure, Section, Table
from analyses.report.inputs import Output

__all__ = ["weights_section", "forgetting_section", "forgetting_findings", "short_name"]

KIND_ORDER = ("embedding", "q_proj", "k_proj", "v_proj", "o_proj", "mlp_gate", "mlp_up",
              "mlp_down", "norm", "lm_head", "other")
STATS = ("changed_frac_bits", "changed_frac_atol", "changed_frac_rel", "update_norm", "rel_norm",
         "max_abs_update")
OVERLAP = ("jaccard", "jaccard_chance", "jaccard_over_chance", "cosine", "sign_agreement")


def short_name(name: str) -> str:
    """Last two components of a checkpoint path (display only)."""
    parts = Path(str(name)).parts
    return "/".join(parts[-2:]) if parts else str(name)


def _updates(outputs: Sequence[Output]) -> list[tuple[str, dict, Output]]:
    """(display label, update dict, source) for every update in every diff.json."""
    out = []
    for source in outputs:
        inputs = source.data["inputs"]
        base = short_name(inputs["base"]["name"])
        for lab, update in source.data["updates"].items():
            out.append((f"{short_name(inputs[lab]['name'])} − {base}", update, source))
    return out


def _unchanged(updates) -> list[str]:
    """A trained model whose weights equal its base's bitwise: training did not change it."""
    return [f"{label}: no weight changed (the trained model equals its base bitwise), so every difference "
            "from the base in this report is zero by construction." for label, u, _ in updates
            if u["overall"].get("changed_bits") == 0]


def _kind_rows(updates) -> pd.DataFrame:
    rows = []
    for label, u, _ in updates:
        kinds = sorted(u["kinds"].items(), key=lambda kv: KIND_ORDER.index(kv[0]) if kv[0] in KIND_ORDER else 99)
        for kind, stats in [("overall", u["overall"]), *kinds]:
            rows.append({"update": label, "kind": kind, "n": stats.get("n"), **{k: stats.get(k) for k in STATS}})
    return pd.DataFrame(rows)


def _layer_rows(updates) -> pd.DataFrame:
    rows = [{"update": label, "layer": int(i), **{k: s.get(k) for k in STATS}}
            for label, u, _ in updates for i, s in sorted(u["layers"].items(), key=lambda kv: int(kv[0]))]
    return pd.DataFrame(rows, columns=["update", "layer", *STATS])


def _layer_figure(layers: pd.DataFrame) -> Figure:
    def series(key):
        return [{"label": lab, "x": t["layer"].tolist(), "y": t[key].tolist(), "style": i}
                for i, (lab, t) in enumerate(layers.groupby("update", sort=False))]

    specs = [{"series": series("changed_frac_bits"), "xlabel": "layer index",
              "ylabel": "changed fraction\n(raw bits differ)", "ylim": (-0.02, 1.02)},
             {"series": series("rel_norm"), "xlabel": "layer index", "logy": True,
              "ylabel": "relative update norm\n‖ΔW‖₂ / ‖W‖₂ (unitless)"}]
    return Figure("weights_layers", "Changed fraction and relative update norm per layer",
                  F.panels(specs, title="Weight updates per layer"))


def _kind_figure(kinds: pd.DataFrame) -> Figure:
    rows = [{"label": f"{r['kind']}", "group": r["update"], "value": 100 * (r["changed_frac_bits"] or 0.0)}
            for r in kinds.to_dict("records")]
    png = F.dot_chart(rows, xlabel="parameters changed (% of entries, raw bits differ)", zero_line=False,
                      title="Changed fraction per module kind")
    return Figure("weights_kinds", "Changed fraction per module kind, one marker style per update", png)


def _dtypes(source: Output) -> str:
    csv = source.path.parent / "tensors.csv"
    try:
        return ", ".join(sorted(pd.read_csv(csv, usecols=["dtype"])["dtype"].astype(str).unique()))
    except (OSError, ValueError, KeyError):
        return "unknown (no tensors.csv beside diff.json)"


def _overlap_rows(outputs: Sequence[Output]) -> pd.DataFrame:
    rows = []
    for source in outputs:
        ov = source.data.get("overlap")
        if not ov:
            continue
        inputs = source.data["inputs"]
        a, b = short_name(inputs["A"]["name"]), short_name(inputs["B"]["name"])
        for kind, stats in [("overall", ov["overall"]), *sorted(ov["kinds"].items())]:
            rows.append({"update_a": a, "update_b": b, "base": short_name(inputs["base"]["name"]),
                         "kind": kind, **{k: stats.get(k) for k in OVERLAP}})
    return pd.DataFrame(rows)


def weights_section(outputs: Sequence[Output]) -> Section | None:
    if not outputs:
        return None
    updates = _updates(outputs)
    kinds, layers = _kind_rows(updates), _layer_rows(updates)
    notes = [f"{s.label}: stored dtypes {_dtypes(s)}; atol {s.data['options']['atol']:g}, "
             f"rtol {s.data['options']['rtol']:g}" for s in outputs]
    blocks: list = ["Changed fraction counts entries whose raw bits differ; it depends on the dtype the "
                    "checkpoints were saved in (bf16 absorbs small updates), so the dtypes are listed.",
                    tuple(notes), *_unchanged(updates), _kind_figure(kinds)]
    if not layers.empty:
        blocks.append(_layer_figure(layers))
    blocks.append(Table("weights_kinds", "Update per module kind (norms in weight units; rel_norm = "
                        "‖ΔW‖₂/‖W‖₂)", kinds))
    if not layers.empty:
        blocks.append(Table("weights_layers", "Update per layer", layers))
    overlap = _overlap_rows(outputs)
    if not overlap.empty:
        blocks.append(Table("weights_overlap", "Overlap of two updates of one base: Jaccard of the changed "
                            "sets (and its value by chance), cosine of the updates, sign agreement", overlap))
    return Section("weights", "Weights", tuple(blocks))


def _kl_cells(kl: dict | None) -> dict:
    if not kl or kl.get("status") != "computed":
        return {"kl_sequence": None, "kl_sequence_se": None, "kl_per_token": None}
    return {k: kl.get(k) for k in ("kl_sequence", "kl_sequence_se", "kl_per_token")}


def _forgetting_rows(outputs: Sequence[Output]) -> pd.DataFrame:
    rows = []
    for source in outputs:
        d = source.data
        model, base = short_name(d["models"]["model"]["name"]), short_name(d["models"]["base"]["name"])
        for r in d["benchmarks"]:
            low, high = r["ci_low"], r["ci_high"]
            rows.append({"model": model, "base": base, "benchmark": r["benchmark"], "items": r["n"],
                         "base_accuracy": r["base_accuracy"], "model_accuracy": r["model_accuracy"],
                         "difference": r["difference"], "ci_low": low, "ci_high": high,
                         "supported": bool(low > 0 or high < 0) if _finite(low, high) else False,
                         "mcnemar_p": r["mcnemar"]["p_value"], "p_holm": r["mcnemar"].get("p_holm"),
                         **_kl_cells(d.get("kl"))})
    return pd.DataFrame(rows)


def _finite(*xs) -> bool:
    return all(isinstance(x, int | float) and math.isfinite(x) for x in xs)


def forgetting_findings(outputs: Sequence[Output]) -> list[str]:
    rows = _forgetting_rows(outputs) if outputs else pd.DataFrame()
    return [f"{r['model']} vs {r['base']} on {r['benchmark']}: accuracy {100 * r['difference']:+.1f} points "
            f"[{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}] ({r['items']} items, paired bootstrap)"
            for r in rows.to_dict("records") if r["supported"]]


def forgetting_section(outputs: Sequence[Output]) -> Section | None:
    if not outputs:
        return None
    frame = _forgetting_rows(outputs)
    dots = [{"label": r["benchmark"], "group": r["model"], "value": 100 * r["difference"],
             "low": 100 * r["ci_low"], "high": 100 * r["ci_high"]} for r in frame.to_dict("records")
            if _finite(r["difference"], r["ci_low"], r["ci_high"])]
    blocks: list = []
    if dots:
        png = F.dot_chart(dots, xlabel="accuracy change, model − base (percentage points)",
                          title="Forgetting per benchmark")
        blocks.append(Figure("forgetting", "Accuracy change on benchmarks not trained on, with 95% paired "
                             "bootstrap intervals", png))
    blocks.append(Table("forgetting", "Forgetting per benchmark (accuracies as fractions; KL columns: "
                        "forward KL(π_base ‖ π_model) on training-task prompts, nats per completion "
                        "and per token)", frame))
    for s in outputs:
        kl = s.data.get("kl") or {}
        text = f"{s.label}: {s.data.get('verdict', '')}"
        if kl.get("status") == "computed":
            text += f" KL estimator: {kl.get('direction')}, {kl.get('estimator')}."
        elif kl:
            text += f" KL not computed: {kl.get('reason')}."
        blocks.append(text)
    return Section("forgetting", "Forgetting", tuple(blocks))
