"""Report section for `evalkit regrade --compare`: where evalkit's grader and another disagree.

    from analyses.report.grader_sections import graders_section
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from analyses.report.document import Section, Table
from analyses.report.inputs import Output

__all__ = ["graders_section", "SHOWN"]

SHOWN = 50  # disagreement rows per comparison in the page (all are in grader-compare.json)


def graders_section(outputs: Sequence[Output]) -> Section | None:
    if not outputs:
        return None
    summary, blocks = [], []
    for output in outputs:
        for c in output.data["comparisons"]:
            summary.append({"run": output.label, "evalkit grader": c["evalkit"], "other grader": c["other"],
                            "samples": c["samples"], "disagree": c["disagree"],
                            "undecided (timeout, error)": c.get("undecided", 0), "agreement": c["agreement"],
                            "pass@1 evalkit": c["pass_at_1"]["evalkit"], "pass@1 other": c["pass_at_1"]["other"]})
            rows = [{"problem": r["problem_id"], "sample": r["sample_index"], "gold": r["gold"],
                     "completion ends": r["completion_tail"][-200:],
                     "evalkit": f"{r['evalkit']['outcome']}: {r['evalkit']['extracted']}",
                     "other": f"{r['other']['outcome']}: {r['other']['extracted']}"}
                    for r in c["disagreements"][:SHOWN]]
            if rows:
                more = c["disagree"] - len(rows)
                caption = (f"{output.label}: evalkit vs {c['other']}, the samples one grader credits and the other "
                           f"does not" + (f" (first {len(rows)}; {more} more in grader-compare.json)" if more else ""))
                blocks.append(Table(f"grader_disagreements_{len(blocks)}", caption, pd.DataFrame(rows)))
    text = ("Each run graded by evalkit's grader and by another (`evalkit regrade RUN --compare GRADER`). A "
            "disagreement is a sample one grader credits and the other does not; reading them is how a grader's "
            "blind spot on these outputs shows. A sample either grader timed out or failed on is undecided: "
            "agreement is over the samples both decided.")
    return Section("graders", "Grader audit", (text, Table("graders", "Agreement of the graders",
                                                           pd.DataFrame(summary)), *blocks))
