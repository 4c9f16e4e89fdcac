"""PNG charts of a snapshot (matplotlib), shown inline in the Dagster UI."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

from jarvis_core.analytics.history import AnalyticsSnapshot

# Part of every chart's key: bump it when the drawing changes, so kept pictures are redrawn.
CHART_STYLE = 1
TREND_SIZES = ("notes", "links")
TREND_PROBLEMS = ("orphans", "dead_ends", "broken_links", "stale_notes")


def chart_data(snapshot: AnalyticsSnapshot, trend: list[dict]) -> dict[str, dict]:
    """What each chart shows, by chart name: community sizes, degree distribution and, with
    two or more snapshots, the trend of the main counts."""
    data = {
        "community_sizes": {"source": snapshot.source, "bars": [
            [f"{c['id']}: {c['label'][:16]}", c["size"]]
            for c in snapshot.figures["communities"][:20]]},
        "degree_distribution": {"source": snapshot.source, "counts": [
            [int(degree), count]
            for degree, count in snapshot.figures["degree_distribution"].items()]},
    }
    if len(trend) >= 2:
        data["trend"] = {"source": snapshot.source, "points": [
            {"generated_at": point["generated_at"],
             **{name: point[name] for name in TREND_SIZES + TREND_PROBLEMS}}
            for point in trend]}
    return data


def _community_sizes(plt, data: dict):
    figure, axes = plt.subplots(figsize=(7, 3.5))
    axes.bar([label for label, _ in data["bars"]], [size for _, size in data["bars"]],
             color="#4c72b0")
    axes.set(title=f"{data['source']}: community sizes (Leiden)", ylabel="notes")
    axes.tick_params(axis="x", labelrotation=30, labelsize="small")
    return figure


def _degree_distribution(plt, data: dict):
    figure, axes = plt.subplots(figsize=(7, 3.5))
    degrees = [degree for degree, _ in data["counts"]]
    counts = [count for _, count in data["counts"]]
    if max(degrees, default=0) > 50:   # a long tail of hubs: log-log shows its shape
        axes.loglog([d + 1 for d in degrees], counts, "o", color="#55a868", markersize=4)
        axes.set(xlabel="distinct linked notes + 1 (log)", ylabel="notes (log)")
    else:
        axes.bar(degrees, counts, color="#55a868")
        axes.set(xlabel="distinct linked notes", ylabel="notes")
    axes.set_title(f"{data['source']}: degree distribution")
    return figure


def _trend(plt, data: dict):
    """Sizes and problems apart: they differ by orders of magnitude."""
    figure, panels = plt.subplots(1, 2, figsize=(9, 3.5), sharex=True)
    points = data["points"]
    times = [point["generated_at"] for point in points]
    for axes, names in zip(panels, (TREND_SIZES, TREND_PROBLEMS)):
        for series in names:
            axes.plot(times, [point[series] for point in points], marker="o", label=series)
        axes.legend(fontsize="small")
    figure.suptitle(f"{data['source']}: trend over {len(points)} snapshots")
    figure.autofmt_xdate()
    return figure


_DRAWINGS = {"community_sizes": _community_sizes,
             "degree_distribution": _degree_distribution, "trend": _trend}


def render_chart(name: str, data: dict, signature: str | None = None) -> bytes:
    """One chart of ``chart_data`` as PNG bytes carrying its ``signature`` (computed when
    not given). matplotlib is imported here (Agg, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure = _DRAWINGS[name](plt, data)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=80,
                   metadata={"Comment": signature or _signature(data)})
    plt.close(figure)
    return buffer.getvalue()


def render_charts(snapshot: AnalyticsSnapshot, trend: list[dict]) -> dict[str, bytes]:
    """Every chart of the snapshot as PNG bytes, by name."""
    return {name: render_chart(name, data)
            for name, data in chart_data(snapshot, trend).items()}


def png_markdown(title: str, png: bytes) -> str:
    """An inline image the Dagster UI renders in a markdown metadata value."""
    return f"![{title}](data:image/png;base64,{base64.b64encode(png).decode()})"


def _signature(data: dict) -> str:
    """A chart's signature, kept in its PNG (a tEXt comment, stored verbatim)."""
    text = json.dumps([CHART_STYLE, data], sort_keys=True, default=str)
    return f"jarvis-chart {hashlib.sha256(text.encode()).hexdigest()}"


def draw_charts(snapshot: AnalyticsSnapshot, trend: list[dict], directory: Path
                ) -> tuple[dict[str, bytes], str | None]:
    """The charts, written to ``directory`` as ``<name>.png``; (charts, why none were
    drawn). A chart whose PNG there was drawn from the same data (its signature) is read
    back, not drawn again: an unchanged graph's refresh skips matplotlib's 0.1 s a chart.
    A chart that cannot be drawn costs only the picture, never the snapshot."""
    charts = {}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in chart_data(snapshot, trend).items():
            path, signature = directory / f"{name}.png", _signature(data)
            kept = path.read_bytes() if path.is_file() else b""
            if signature.encode() in kept:
                charts[name] = kept
            else:
                charts[name] = render_chart(name, data, signature)
                path.write_bytes(charts[name])
    except (OSError, ValueError, RuntimeError) as exc:
        return {}, f"{type(exc).__name__}: {exc}"
    return charts, None
