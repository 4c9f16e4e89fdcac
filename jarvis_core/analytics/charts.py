"""SVG charts of a snapshot (pygal), shown in the Dagster UI.

pygal rather than matplotlib: importing matplotlib took 0.45 s of every process that made a
snapshot (igraph imports it too when it is installed), more than computing the snapshot."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from jarvis_core.analytics.history import AnalyticsSnapshot

# Part of every chart's key: bump it when the drawing changes, so kept pictures are redrawn.
CHART_STYLE = 2
TREND_SIZES = ("notes", "links")
TREND_PROBLEMS = ("orphans", "dead_ends", "broken_links", "stale_notes")
_COLOURS = ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd")


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


def _config(pygal, **options) -> dict:
    """Options every chart shares: a fixed size written into the SVG (so an ``<img>`` knows
    it), a white ground, and no script fetched from the web (pygal's tooltips; an image runs
    no script)."""
    style = pygal.style.Style(background="white", plot_background="white", colors=_COLOURS)
    return {"width": 720, "height": 360, "explicit_size": True, "js": [], "style": style,
            **options}


def _community_sizes(pygal, data: dict):
    chart = pygal.Bar(**_config(pygal, title=f"{data['source']}: community sizes (Leiden)",
                                y_title="notes", show_legend=False, x_label_rotation=30))
    chart.x_labels = [label for label, _ in data["bars"]]
    chart.add("notes", [size for _, size in data["bars"]])
    return chart


def _degree_distribution(pygal, data: dict):
    title = f"{data['source']}: degree distribution"
    degrees = [degree for degree, _ in data["counts"]]
    counts = [count for _, count in data["counts"]]
    if max(degrees, default=0) > 50:   # a long tail of hubs: log-log shows its shape
        chart = pygal.XY(**_config(pygal, title=title, logarithmic=True, stroke=False,
                                   show_legend=False, x_title="distinct linked notes + 1 (log)",
                                   y_title="notes (log)"))
        chart.add("notes", [(degree + 1, count) for degree, count in zip(degrees, counts)])
        return chart
    chart = pygal.Bar(**_config(pygal, title=title, show_legend=False,
                                x_title="distinct linked notes", y_title="notes"))
    chart.x_labels = [str(degree) for degree in degrees]
    chart.add("notes", counts)
    return chart


def _trend(pygal, data: dict):
    """Sizes on the left axis, problems on the right: they differ by orders of magnitude."""
    points = data["points"]
    chart = pygal.DateTimeLine(**_config(
        pygal, y_title="notes, links", legend_at_bottom=True, legend_at_bottom_columns=3,
        title=f"{data['source']}: trend over {len(points)} snapshots (problems: right axis)",
        x_label_rotation=30, value_formatter=lambda value: f"{value:.3g}",
        x_value_formatter=lambda moment: moment.strftime("%Y-%m-%d %H:%M")))
    for names, secondary in ((TREND_SIZES, False), (TREND_PROBLEMS, True)):
        for series in names:
            chart.add(series, [(point["generated_at"], point[series]) for point in points],
                      secondary=secondary)
    return chart


_DRAWINGS = {"community_sizes": _community_sizes,
             "degree_distribution": _degree_distribution, "trend": _trend}


def render_chart(name: str, data: dict, signature: str | None = None) -> bytes:
    """One chart of ``chart_data`` as SVG bytes carrying its ``signature`` (computed when
    not given) in a comment after the XML declaration. pygal is imported here."""
    import pygal

    svg = _DRAWINGS[name](pygal, data).render()
    declaration = svg.index(b"?>") + 2
    comment = f"<!-- {signature or _signature(data)} -->".encode()
    return svg[:declaration] + comment + svg[declaration:]


def render_charts(snapshot: AnalyticsSnapshot, trend: list[dict]) -> dict[str, bytes]:
    """Every chart of the snapshot as SVG bytes, by name."""
    return {name: render_chart(name, data)
            for name, data in chart_data(snapshot, trend).items()}


def image_markdown(title: str, svg: bytes) -> str:
    """An inline image the Dagster UI renders in a markdown metadata value."""
    return f"![{title}](data:image/svg+xml;base64,{base64.b64encode(svg).decode()})"


def _signature(data: dict) -> str:
    """A chart's signature, kept in its SVG (a comment, stored verbatim)."""
    text = json.dumps([CHART_STYLE, data], sort_keys=True, default=str)
    return f"jarvis-chart {hashlib.sha256(text.encode()).hexdigest()}"


def draw_charts(snapshot: AnalyticsSnapshot, trend: list[dict], directory: Path
                ) -> tuple[dict[str, bytes], str | None]:
    """The charts, written to ``directory`` as ``<name>.svg``; (charts, why none were
    drawn). A chart whose SVG there was drawn from the same data (its signature) is read
    back, not drawn again. A chart that cannot be drawn costs only the picture, never the
    snapshot. The PNGs of Jarvis versions that drew with matplotlib are removed."""
    charts = {}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in chart_data(snapshot, trend).items():
            path, signature = directory / f"{name}.svg", _signature(data)
            kept = path.read_bytes() if path.is_file() else b""
            if signature.encode() in kept:
                charts[name] = kept
            else:
                charts[name] = render_chart(name, data, signature)
                path.write_bytes(charts[name])
                path.with_suffix(".png").unlink(missing_ok=True)
    except (OSError, ValueError, RuntimeError) as exc:
        return {}, f"{type(exc).__name__}: {exc}"
    return charts, None
