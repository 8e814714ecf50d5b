"""Report figures: deterministic PNG bytes, readable in grey scale, labelled with units.

    from analyses.report.figures import Axes, line_chart
    png = line_chart([{"label": "base", "x": [1, 2, 4], "y": [.2, .3, .4]}],
                     Axes("k (samples)", "pass@k (fraction)"), log2x=True)

Determinism: the Agg backend through `FigureCanvasAgg` (no pyplot state), the
default rcParams plus fixed font (DejaVu Sans, shipped with matplotlib), size
and dpi, and `metadata={"Software": None}` so no version string or date is
written: the same inputs give the same bytes. Grey scale: every series has its
own line style and marker besides its colour (Okabe-Ito palette), bands and
bars differ by hatch, not only by hue.

Limits: at most len(STYLES) series are told apart by style; more reuse styles
(their labels still name them).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["STYLES", "DPI", "Axes", "line_chart", "panels", "dot_chart", "stacked_bars", "scatter_fit", "histogram"]

DPI = 100
STYLES = (  # (colour, line style, marker): distinct without colour
    ("#000000", "-", "o"), ("#D55E00", "--", "s"), ("#0072B2", ":", "^"),
    ("#009E73", "-.", "D"), ("#CC79A7", (0, (5, 1, 1, 1, 1, 1)), "v"),
    ("#E69F00", (0, (1, 1)), "P"), ("#56B4E9", (0, (8, 2)), "X"), ("#444444", (0, (3, 1, 3, 3)), "*"),
)
HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo")
RC = {"font.family": "DejaVu Sans", "font.size": 9.0, "axes.grid": True, "grid.alpha": 0.35,
      "hatch.linewidth": 0.6}
GREYS = ("#222222", "#777777", "#BBBBBB", "#FFFFFF")


@dataclass(frozen=True)
class Axes:
    """A chart's labels, y range and size (inches; None: the chart's own default)."""

    xlabel: str
    ylabel: str = ""
    title: str = ""
    ylim: tuple[float, float] | None = None
    width: float | None = None
    height: float | None = None

    def figure(self, width: float, height: float):
        """A figure of this size, or of the chart's default `width` x `height`."""
        return _figure(self.width or width, self.height or height)


def _styled(fn):
    """Run a chart function under fixed rcParams (defaults + DejaVu Sans), whatever the caller set."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import matplotlib.style

        with matplotlib.style.context(["default", RC]):
            return fn(*args, **kwargs)

    return wrapper


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def style(i: int) -> dict:
    colour, dash, marker = STYLES[i % len(STYLES)]
    return {"color": colour, "linestyle": dash, "marker": marker, "markersize": 5, "linewidth": 1.6}


def _draw_lines(ax, series: Sequence[dict], log2x: bool) -> None:
    for i, s in enumerate(series):
        st = style(s.get("style", i))
        if s.get("floor"):  # a chance floor beside its curve: the curve's colour, dotted, thin
            st.update(linestyle=(0, (1, 2)), linewidth=1.2, markersize=3)
        if len(s["x"]) > 30:  # a dense curve: markers every tenth point keep the styles apart
            st["markevery"] = max(1, len(s["x"]) // 10)
        ax.plot(s["x"], s["y"], label=s["label"], **st)
        if s.get("low") is not None:
            ax.fill_between(s["x"], s["low"], s["high"], color=st["color"], alpha=0.12,
                            hatch=HATCHES[i % len(HATCHES)], linewidth=0, edgecolor=st["color"])
        if s.get("hline") is not None:
            ax.axhline(s["hline"], color=st["color"], linestyle=st["linestyle"], linewidth=1.0)
    xs = [float(x) for s in series for x in s["x"]]
    if log2x:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(xs))
        if 0 < len(ticks) <= 12:
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    elif xs and all(x.is_integer() for x in xs):  # steps, layer indices
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _wide_range(series: Sequence[dict]) -> bool:
    ys = [float(y) for s in series for y in s["y"] if y is not None and y == y and y > 0]
    return bool(ys) and max(ys) / min(ys) > 20


@_styled
def line_chart(series: Sequence[dict], axes: Axes, *, log2x: bool = False, marks: Sequence[dict] = (),
               legend_below: bool = False) -> bytes:
    """Lines (x, y, label; optional low/high band, hline, style index, `floor`: drawn dotted as
    the chance floor of the curve of the same style); `marks` are
    vertical dotted lines {x, text} (e.g. where two curves cross); `legend_below`: the legend
    under the axes, where it covers no line. Default size 7 x 4."""
    fig = axes.figure(7.0, 4.0)
    ax = fig.add_subplot()
    _draw_lines(ax, series, log2x)
    _finish(ax, axes, legend=bool(series), below=legend_below)
    for j, m in enumerate(marks):
        ax.axvline(m["x"], color="#555555", linestyle=(0, (2, 2)), linewidth=1.0)
        right = _axis_fraction(ax, m["x"]) > 0.5  # text on the side with room, inside the axes
        ax.annotate(m["text"], (m["x"], 0.03 + 0.08 * (j % 4)), xycoords=("data", "axes fraction"),
                    xytext=(-4 if right else 4, 0), textcoords="offset points", fontsize=8,
                    ha="right" if right else "left",
                    bbox={"boxstyle": "round", "fc": "white", "ec": "#888888", "alpha": 0.9})
    return _png(fig)


def _axis_fraction(ax, x: float) -> float:
    lo, hi = ax.get_xlim()
    if ax.get_xscale() == "log":
        lo, hi, x = np.log(lo), np.log(hi), np.log(x)
    return (x - lo) / (hi - lo) if hi != lo else 0.5


def _finish(ax, axes: Axes, legend=True, below: bool = False) -> None:
    ax.set_xlabel(axes.xlabel)
    ax.set_ylabel(axes.ylabel)
    if axes.title:
        ax.set_title(axes.title)
    if axes.ylim is not None:
        ax.set_ylim(*axes.ylim)
    if legend and below:
        n = len(ax.get_legend_handles_labels()[1])
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=min(4, max(1, n)),
                  frameon=False)
    elif legend:
        ax.legend(fontsize=8, loc="best", frameon=True)


@_styled
def panels(specs: Sequence[dict], *, title: str = "", width: float = 7.0, height: float = 5.5) -> bytes:
    """Stacked line charts sharing nothing: each spec has series, xlabel, ylabel, log2x, logy,
    and `legend_below` (the legend under its axes)."""
    fig = _figure(width, height)
    axes = fig.subplots(len(specs), 1, squeeze=False)[:, 0]
    for ax, spec in zip(axes, specs, strict=True):
        _draw_lines(ax, spec["series"], spec.get("log2x", False))
        if spec.get("logy") and _wide_range(spec["series"]):  # log only when it helps reading
            ax.set_yscale("log")
        _finish(ax, Axes(spec["xlabel"], spec["ylabel"], spec.get("title", ""), spec.get("ylim")),
                below=spec.get("legend_below", False))
    if title:
        fig.suptitle(title)
    return _png(fig)


@_styled
def dot_chart(rows: Sequence[dict], *, xlabel: str, title: str = "", zero_line: bool = True,
              logx: bool = False, width: float = 7.0) -> bytes:
    """Horizontal dot-and-interval chart: rows {label, value, low, high, group}; one marker
    style per group (e.g. per model), interval as a whisker. Rows with the same label share
    a line, groups side by side."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    groups = list(dict.fromkeys(r.get("group", "") for r in rows))
    fig = _figure(width, 1.3 + 0.22 * max(len(labels), 1) * (1 + 0.35 * (len(groups) - 1)))
    ax = fig.add_subplot()
    step = 0.7 / len(groups)
    for i, r in enumerate(rows):
        g = groups.index(r.get("group", ""))
        st = style(g)
        low, high = r.get("low"), r.get("high")
        err = None if low is None else [[r["value"] - low], [high - r["value"]]]
        y = labels.index(r["label"]) + (g - (len(groups) - 1) / 2) * step
        ax.errorbar(r["value"], y, xerr=err, fmt=st["marker"], color=st["color"], capsize=3,
                    label=r.get("group") if r.get("group") and i == _first(rows, r) else None)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    if zero_line:
        ax.axvline(0, color="#555555", linewidth=1.0)
    if logx:
        ax.set_xscale("log")
    _finish(ax, Axes(xlabel, title=title), legend=len(groups) > 1 or bool(groups[0]))
    return _png(fig)


def _first(rows: Sequence[dict], row: dict) -> int:
    return next(i for i, r in enumerate(rows) if r.get("group", "") == row.get("group", ""))


@_styled
def stacked_bars(labels: Sequence[str], parts: dict[str, Sequence[float]], *, xlabel: str,
                 title: str = "", width: float = 7.0) -> bytes:
    """Horizontal stacked bars, one per label; each part has its own grey and hatch."""
    fig = _figure(width, 1.4 + 0.45 * max(len(labels), 1))
    ax = fig.add_subplot()
    left = [0.0] * len(labels)
    for i, (name, values) in enumerate(parts.items()):
        ax.barh(range(len(labels)), values, left=left, label=name, color=GREYS[i % len(GREYS)],
                hatch=HATCHES[i % len(HATCHES)], edgecolor="black", linewidth=0.6)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    _finish(ax, Axes(xlabel, title=title))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(labels) < 3 else -0.12),
              ncols=len(parts), frameon=False)
    return _png(fig)


@_styled
def scatter_fit(points: Sequence[dict], axes: Axes, *, curves: Sequence[dict] = (), annotate: bool = True) -> bytes:
    """Points {x, y, label, group} (one marker per group) plus fitted curves {x, y, label}.
    Default size 6 x 4."""
    fig = axes.figure(6.0, 4.0)
    ax = fig.add_subplot()
    groups = list(dict.fromkeys(p.get("group", p["label"]) for p in points))
    for g, name in enumerate(groups):
        mine = [p for p in points if p.get("group", p["label"]) == name]
        st = style(g)
        ax.plot([p["x"] for p in mine], [p["y"] for p in mine], linestyle="none", marker=st["marker"],
                color=st["color"], markersize=7, label=name)
        if annotate:
            for p in mine:
                ax.annotate(p["label"], (p["x"], p["y"]), xytext=(5, 4), textcoords="offset points",
                            fontsize=8)
    for i, c in enumerate(curves):
        st = style(len(groups) + i)
        ax.plot(c["x"], c["y"], color=st["color"], linestyle=st["linestyle"], linewidth=1.4,
                label=c["label"])
    _finish(ax, axes)
    return _png(fig)


@_styled
def histogram(series: Sequence[dict], edges: Sequence[float], axes: Axes, *,
              band: tuple[float, float] | None = None, band_label: str = "") -> bytes:
    """Step histograms of shares over fixed bins (series: {label, counts}), one line style each;
    `band` (lo, hi) shades a region of x (e.g. the GRPO clip band), labelled. Default size 7 x 3.6."""
    fig = axes.figure(7.0, 3.6)
    ax = fig.add_subplot()
    if band is not None:
        ax.axvspan(band[0], band[1], color="#BBBBBB", alpha=0.5, hatch="///", label=band_label)
    for i, s in enumerate(series):
        counts = np.asarray(s["counts"], dtype=np.float64)
        shares = counts / counts.sum() if counts.sum() else counts
        colour, line, _ = STYLES[i % len(STYLES)]
        ax.stairs(shares, edges, label=s["label"], color=colour, linestyle=line, linewidth=1.6)
    _finish(ax, axes)
    return _png(fig)
