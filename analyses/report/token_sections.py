"""Report sections for `evalkit traces` (how foreign traces look to a policy, what the clip cuts)
and `evalkit tokens` (how concentrated the teacher-student divergence is).

    from analyses.report.token_sections import traces_section, tokens_section
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

import analyses.report.figures as F
from analyses.report.document import Figure, Section, Table
from analyses.report.inputs import Output
from analyses.report.model_sections import short_name

__all__ = ["traces_section", "tokens_section"]


def traces_section(outputs: Sequence[Output]) -> Section | None:
    if not outputs:
        return None
    rows, ratio_series, prob_series, band = [], [], [], None
    for o in outputs:
        d = o.data
        gap, clip = d.get("idiolect_gap") or {}, d.get("clip") or {}
        rows.append({"traces": o.label, "policy": short_name(d["policy"]["name"]), "behaviour": d.get("behaviour"),
                     "tokens": d["tokens"], "nll_per_token": d["nll_per_token"], "idiolect_gap": gap.get("gap"),
                     "gap_ci_low": gap.get("ci_low"), "gap_ci_high": gap.get("ci_high"),
                     "share_p_below_0.01": d["probability"].get("share_below_0.01"),
                     "clipped_all": (clip.get("all_tokens") or {}).get("outside"),
                     "clipped_answer": (clip.get("answer_tokens") or {}).get("outside")})
        prob_series.append({"label": o.label, "counts": d["log10_probability_histogram"]["counts"]})
        if clip:
            ratio_series.append({"label": o.label, "counts": clip["log10_ratio_histogram"]["counts"]})
            band = (math.log10(1 - clip["eps_low"]), math.log10(1 + clip["eps_high"]))
    blocks: list = ["Each trace token teacher-forced through the policy: its probability, and with a behaviour "
                    "probability the ratio r = π_policy / π_behaviour that a GRPO/PPO loss clips to "
                    "[1 − ε_low, 1 + ε_high]. The idiolect gap is the traces' NLL per token minus the NLL of the "
                    "policy's own samples on the same prompts (95% bootstrap interval over prompts).",
                    Figure("traces_probability", "Policy probability of the trace tokens (log10)",
                           F.histogram(prob_series, outputs[0].data["log10_probability_histogram"]["edges"],
                                       F.Axes("log10 p(token) under the policy", "share of tokens")))]
    if ratio_series:
        edges = next(o.data["clip"]["log10_ratio_histogram"]["edges"] for o in outputs if o.data.get("clip"))
        blocks.append(Figure("traces_ratio", "Ratio π_policy / π_behaviour (log10) and the clip band",
                             F.histogram(ratio_series, edges, F.Axes("log10 ratio", "share of tokens"), band=band,
                                         band_label="not clipped")))
    blocks.append(Table("traces", "Traces under the policy", pd.DataFrame(rows)))
    return Section("traces", "Foreign traces under a policy", tuple(blocks))


def tokens_section(outputs: Sequence[Output]) -> Section | None:
    if not outputs:
        return None
    rows, series = [], []
    for i, o in enumerate(outputs):
        d = o.data
        label = f"{short_name(d['models']['teacher']['name'])} → {short_name(d['models']['student']['name'])}"
        rows.append({"pair": label, "tokens": d["tokens"], "reverse_kl_per_token": d["reverse_kl_per_token"],
                     "forward_kl_per_token": d["forward_kl_per_token"], "argmax_agreement": d["argmax_agreement"],
                     **d["concentration"], "tokens_for_half_median": d["tokens_for_half"]["median"],
                     "share_in_final_answer": d["where"]["in_final_answer"]})
        series.append({"label": label, "x": d["lorenz"]["share_of_tokens"], "y": d["lorenz"]["share_of_total"],
                       "style": i + 1})
    series.append({"label": "every token alike", "x": [0.0, 1.0], "y": [0.0, 1.0], "style": 0})
    return Section("tokens", "Where teacher and student disagree", (
        "Reverse KL(student ‖ teacher) per generated token of the student's samples, over the full vocabulary "
        "(the on-policy distillation objective). The Lorenz curve sorts tokens by divergence, largest first: "
        "a curve that rises at once means a few tokens carry the signal.",
        Figure("tokens_lorenz", "Share of the total divergence held by the most divergent tokens",
               F.line_chart(series, F.Axes("share of tokens (most divergent first)", "share of total reverse KL",
                                           ylim=(0, 1.02)))),
        Table("tokens", "Divergence concentration", pd.DataFrame(rows))))
