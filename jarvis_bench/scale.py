"""``jarvis bench scale``: the first refresh of a generated corpus (``scale_corpus``) per
target size, each in a child process measured from outside: wall, CPU and peak RSS from
``os.wait4`` (the child's own ``getrusage``, its waited descendants included), then a no-op
refresh measured alike, the published chunk count and the size on disk of each store.
The configured embedder is used (the model's full cost): ``embedder`` in the output says so.
A chart (SVG) of peak RSS and wall against chunks is written beside the JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jarvis_bench.scale_corpus import write_corpus

COLUMNS = ["target_chunks", "chunks", "peak_rss_mb", "wall_seconds", "cpu_seconds",
           "noop_seconds", "noop_peak_rss_mb", "disk_mb"]


class ScaleError(RuntimeError):
    """A measured refresh failed; the message holds its error output."""


def measured_refresh(config_path: Path) -> tuple[dict, dict]:
    """(the refresh's JSON, its wall/CPU/peak RSS) for one ``jarvis refresh`` child."""
    jarvis = str(Path(sys.executable).parent / "jarvis")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen([jarvis, "--config", str(config_path), "refresh", "--json"],
                                 stdout=out, stderr=err, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise ScaleError(f"refresh of {config_path} exited {child.returncode}: "
                             f"{err.read().decode(errors='replace')[-2000:]}")
        report = json.loads(out.read())
    return report, {"wall_seconds": round(wall, 2),
                    "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
                    "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}  # Linux: KiB


def store_sizes(data_dir: Path) -> dict[str, float]:
    """MB on disk of each store (each entry of the data directory)."""
    def size(path: Path) -> int:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

    return {entry.name: round(size(entry) / 2**20, 2) for entry in sorted(data_dir.iterdir())}


def scale_row(root: Path, target_chunks: int) -> dict:
    """One size: the corpus written under ``root``, its first and its no-op refresh."""
    corpus = write_corpus(root, target_chunks)
    first, cost = measured_refresh(root / "jarvis.yaml")
    noop, noop_cost = measured_refresh(root / "jarvis.yaml")
    if not first["ok"]:
        raise ScaleError(f"first refresh at {target_chunks} chunks failed: {first['reasons']}")
    snapshot = first["published"]["layers"]["serving_snapshot"]
    disk = store_sizes(root / "data")
    return {"target_chunks": target_chunks, "chunks": snapshot["chunks"], **cost,
            "noop_seconds": noop_cost["wall_seconds"], "noop_cpu_seconds": noop_cost["cpu_seconds"],
            "noop_peak_rss_mb": noop_cost["peak_rss_mb"], "noop_published": noop["version"],
            "disk_mb": round(sum(disk.values()), 1), "stores_mb": disk, "corpus": corpus,
            "layers": {source["source"]: source["layers"] for source in first["sources"]}}


def chart_svg(rows: list[dict]) -> str:
    """Peak RSS (MB) and wall (s) against chunks, two polylines on log-free linear axes."""
    width, height, pad = 640, 360, 50
    top_x = max(row["chunks"] for row in rows) or 1
    series = (("peak_rss_mb", "peak RSS (MB)", "#c0392b"), ("wall_seconds", "wall (s)", "#2c7fb8"))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
             f'<text x="{pad}" y="20" font-size="14">jarvis bench scale: first refresh '
             f'against chunks (max {top_x})</text>']
    for number, (field, label, colour) in enumerate(series):
        top_y = max(row[field] for row in rows) or 1
        points = " ".join(
            f"{pad + (width - 2 * pad) * row['chunks'] / top_x:.1f},"
            f"{height - pad - (height - 2 * pad) * row[field] / top_y:.1f}" for row in rows)
        parts += [f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>',
                  f'<text x="{pad}" y="{40 + 16 * number}" font-size="12" fill="{colour}">'
                  f'{label}, top {top_y}</text>']
    parts.append("</svg>")
    return "\n".join(parts)


def run_scale_benchmark(sizes: tuple[int, ...], work_dir: Path, chart: Path) -> dict:
    """A row per size (smallest first), the chart written to ``chart``."""
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes must be positive chunk counts, got {sizes}")
    rows = [scale_row(work_dir / f"chunks-{size}", size) for size in sorted(sizes)]
    chart.parent.mkdir(parents=True, exist_ok=True)
    chart.write_text(chart_svg(rows))
    return {"embedder": "configured", "cpus": os.cpu_count(), "chart": str(chart),
            "model_cache": os.environ.get("JARVIS_CACHE_DIR") or "each size's data directory, "
            "cold: its first refresh includes exporting the model",
            "sizes": rows}
