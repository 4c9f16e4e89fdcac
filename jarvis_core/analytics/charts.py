"""PNG charts of a snapshot (matplotlib), shown inline in the Dagster UI."""

from __future__ import annotations

import base64
import io
from pathlib import Path

from jarvis_core.analytics.history import AnalyticsSnapshot


def render_charts(snapshot: AnalyticsSnapshot, trend: list[dict]) -> dict[str, bytes]:
    """PNG charts: community sizes, degree distribution and, with two or more snapshots,
    the trend of the main counts. matplotlib is imported here (Agg, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    charts = {}

    def save(name: str, figure) -> None:
        buffer = io.BytesIO()
        figure.tight_layout()
        figure.savefig(buffer, format="png", dpi=80)
        plt.close(figure)
        charts[name] = buffer.getvalue()

    communities = snapshot.figures["communities"][:20]
    figure, axes = plt.subplots(figsize=(7, 3.5))
    axes.bar([f"{c['id']}: {c['label'][:16]}" for c in communities],
             [c["size"] for c in communities], color="#4c72b0")
    axes.set(title=f"{snapshot.source}: community sizes (Leiden)", ylabel="notes")
    axes.tick_params(axis="x", labelrotation=30, labelsize="small")
    save("community_sizes", figure)

    distribution = snapshot.figures["degree_distribution"]
    figure, axes = plt.subplots(figsize=(7, 3.5))
    degrees, counts = [int(d) for d in distribution], list(distribution.values())
    if max(degrees, default=0) > 50:   # a long tail of hubs: log-log shows its shape
        axes.loglog([d + 1 for d in degrees], counts, "o", color="#55a868", markersize=4)
        axes.set(xlabel="distinct linked notes + 1 (log)", ylabel="notes (log)")
    else:
        axes.bar(degrees, counts, color="#55a868")
        axes.set(xlabel="distinct linked notes", ylabel="notes")
    axes.set_title(f"{snapshot.source}: degree distribution")
    save("degree_distribution", figure)

    if len(trend) >= 2:   # sizes and problems apart: they differ by orders of magnitude
        figure, panels = plt.subplots(1, 2, figsize=(9, 3.5), sharex=True)
        times = [point["generated_at"] for point in trend]
        for axes, names in zip(panels, (("notes", "links"), (
                "orphans", "dead_ends", "broken_links", "stale_notes"))):
            for name in names:
                axes.plot(times, [point[name] for point in trend], marker="o", label=name)
            axes.legend(fontsize="small")
        figure.suptitle(f"{snapshot.source}: trend over {len(trend)} snapshots")
        figure.autofmt_xdate()
        save("trend", figure)
    return charts


def png_markdown(title: str, png: bytes) -> str:
    """An inline image the Dagster UI renders in a markdown metadata value."""
    return f"![{title}](data:image/png;base64,{base64.b64encode(png).decode()})"


def draw_charts(snapshot: AnalyticsSnapshot, trend: list[dict], directory: Path
                ) -> tuple[dict[str, bytes], str | None]:
    """Render the charts and write them to ``directory`` as ``<name>.png``; (charts, why none
    were drawn). A chart that cannot be drawn costs only the picture, never the snapshot."""
    try:
        charts = render_charts(snapshot, trend)
        directory.mkdir(parents=True, exist_ok=True)
        for name, png in charts.items():
            (directory / f"{name}.png").write_bytes(png)
    except (OSError, ValueError, RuntimeError) as exc:
        return {}, f"{type(exc).__name__}: {exc}"
    return charts, None
