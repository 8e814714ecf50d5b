"""The report as data (sections of paragraphs, tables, figures) and its HTML/Markdown renderings.

    from analyses.report.document import Section, Table, write_document
    write_document("Study", [Section("summary", "Summary", ("No difference ...",))], Path("reports/x"))

`index.html` is one self-contained page: figures are inline `data:image/png`
URIs, the style sheet is inline, there are no scripts, fonts or links to
anything outside the file, and a Content-Security-Policy forbids any fetch
except inline images. `report.md` says the same, pointing at `figures/*.png`;
every table is also `tables/<name>.csv` (full precision) and every figure
`figures/<name>.png`.

Limits: numbers in the HTML/Markdown tables are rounded for reading (4
significant digits); the CSV files hold the exact values.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

__all__ = ["Section", "Table", "Figure", "render_html", "render_markdown", "document_files", "write_document",
           "fmt"]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#111;line-height:1.45}
h1{border-bottom:2px solid #333}h2{border-bottom:1px solid #999;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.86em}.scroll{overflow-x:auto;max-width:100%}
th,td{border:1px solid #999;padding:2px 6px;text-align:right}th{background:#eee}
td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #ccc}
figcaption{font-size:.9em;color:#333}.problems{border:2px solid #000;padding:.3em 1em;background:#f4f4f4}
caption{text-align:left;font-weight:bold;padding:.2em 0}
"""


@dataclass(frozen=True)
class Table:
    name: str  # file stem of tables/<name>.csv
    caption: str
    frame: pd.DataFrame


@dataclass(frozen=True)
class Figure:
    name: str  # file stem of figures/<name>.png
    caption: str
    png: bytes


@dataclass(frozen=True)
class Section:
    key: str  # stable id: the HTML element is id="sec-<key>"
    title: str
    blocks: tuple = ()  # str (paragraph), tuple[str, ...] (bullet list), Table, Figure


def fmt(value) -> str:
    """Display form of one table cell: 4 significant digits, '-' for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}" if value != int(value) or abs(value) >= 1e15 else str(int(value))
    if hasattr(value, "item"):
        return fmt(value.item())
    return str(value)


def _rows(frame: pd.DataFrame) -> list[list[str]]:
    return [[fmt(v) for v in row] for row in frame.astype(object).itertuples(index=False)]


def _html_table(t: Table) -> str:
    if t.frame.empty:  # e.g. a study report before its arms are done
        return f'<p id="tab-{t.name}">{html.escape(t.caption)}: no rows <small>(tables/{t.name}.csv)</small></p>'
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>"
                   for row in _rows(t.frame))
    return (f'<div class="scroll"><table id="tab-{t.name}"><caption>{html.escape(t.caption)} '
            f'<small>(tables/{t.name}.csv)</small></caption><tr>{head}</tr>{body}</table></div>')


def _html_block(block) -> str:
    if isinstance(block, Table):
        return _html_table(block)
    if isinstance(block, Figure):
        data = base64.b64encode(block.png).decode("ascii")
        return (f'<figure id="fig-{block.name}"><img alt="{html.escape(block.caption)}" '
                f'src="data:image/png;base64,{data}"><figcaption>{html.escape(block.caption)} '
                f'(figures/{block.name}.png)</figcaption></figure>')
    if isinstance(block, tuple):
        return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block) + "</ul>"
    return f"<p>{html.escape(block)}</p>"


def render_html(title: str, sections: Sequence[Section]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
             f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for s in sections:
        css = ' class="problems"' if s.key == "problems" else ""
        parts.append(f'<section id="sec-{s.key}"{css}><h2>{html.escape(s.title)}</h2>')
        parts += [_html_block(b) for b in s.blocks]
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_block(block) -> str:
    if isinstance(block, Table) and block.frame.empty:
        return f"*{block.caption}* (`tables/{block.name}.csv`): no rows"
    if isinstance(block, Table):
        cols = [_md_cell(str(c)) for c in block.frame.columns]
        lines = [f"*{block.caption}* (`tables/{block.name}.csv`)", "",
                 "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in _rows(block.frame)]
        return "\n".join(lines)
    if isinstance(block, Figure):
        return f"![{block.caption}](figures/{block.name}.png)\n\n*{block.caption}*"
    if isinstance(block, tuple):
        return "\n".join(f"- {item}" for item in block)
    return block


def render_markdown(title: str, sections: Sequence[Section]) -> str:
    parts = [f"# {title}"]
    for s in sections:
        parts.append(f"## {s.title}")
        parts += [_md_block(b) for b in s.blocks]
    return "\n\n".join(parts) + "\n"


def document_files(title: str, sections: Sequence[Section]) -> dict[str, bytes]:
    """index.html, report.md, figures/<name>.png and tables/<name>.csv, by relative path."""
    files: dict[str, bytes] = {}
    for block in (b for s in sections for b in s.blocks):
        if isinstance(block, Figure):
            name, data = f"figures/{block.name}.png", block.png
        elif isinstance(block, Table):
            name, data = f"tables/{block.name}.csv", block.frame.to_csv(index=False).encode("utf-8")
        else:
            continue
        assert name not in files, f"two blocks named {name}"
        files[name] = data
    return {"index.html": render_html(title, sections).encode("utf-8"),
            "report.md": render_markdown(title, sections).encode("utf-8"), **files}


def write_document(title: str, sections: Sequence[Section], out: Path) -> list[Path]:
    """The report's files into `out` under evalkit.outdir's contract: locked, never over a
    user's files, replaced atomically with the figures and tables of an earlier report that
    this one lacks removed. Returns the paths written."""
    from evalkit.outdir import OutputFolder

    with OutputFolder.claim(Path(out), "report") as folder:
        return folder.publish(document_files(title, sections))
