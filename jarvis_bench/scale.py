"""``jarvis bench scale``: what a refresh and the queries cost against the corpus's size.

Per target size, a generated corpus (``scale_corpus``, written item by item to disk: this
process never holds it) gets, each in a child process (``scale_child``) measured from outside
by ``os.wait4`` (wall; user + system CPU; peak RSS, with the child's own sampler, see below):
its first refresh, a no-op refresh, a refresh after one note is edited and one after one
ticket is edited, then warm p50/p95 of every query tool on the published version. A refresh
child also reports each layer's wall, CPU and peak RSS and when the corpus was first
searchable (the progressive first refresh publishes text, keyword index and graph before the
embeddings) and complete. Then the size on disk of each store. A chart (SVG, ``scale_chart``)
is written beside the JSON.

The embedder is the configured model at its full cost (``--embedder model``), or
``hashed-ngrams``, a cheap deterministic stand-in that fits the largest sizes on a CPU
(jarvis_core/text/hashed_ngrams.py); each row says which embedded it, from the published
version's manifest.

A child's peak RSS is its own ``VmHWM``, read inside it (the refresh child's sampler resets it
every tick to know each layer's), never ``os.wait4``'s ``ru_maxrss``: Linux keeps the
high-water mark of the memory a child had before its ``exec``, a copy of the parent's, so a
child of a 1.5 GB process (a test worker) "peaks" at 1.5 GB whatever it does. Its git
subprocesses' memory is not counted.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jarvis_bench.scale_chart import chart_svg
from jarvis_bench.scale_corpus import write_corpus
from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_core.stores import serving

MODEL = "model"
EMBEDDERS = (MODEL, HASHED_NGRAMS)
COLUMNS = ["target_chunks", "chunks", "peak_rss_mb", "first_searchable_seconds", "wall_seconds",
           "cpu_seconds", "noop_seconds", "note_edit_seconds", "ticket_edit_seconds", "disk_mb"]
CHILD = "jarvis_bench.scale_child"


class ScaleError(RuntimeError):
    """A measured child failed; the message holds its error output."""


def run_child(*arguments: str) -> tuple[dict, dict]:
    """(the child's JSON, its wall and CPU from ``wait4``, its own peak RSS and its launch
    time)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        launched, started = time.time(), time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", CHILD, *arguments], stdout=out,
                                 stderr=err, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise ScaleError(f"{CHILD} {' '.join(arguments)} exited "
                             f"{os.waitstatus_to_exitcode(status)}: "
                             f"{err.read().decode(errors='replace')[-2000:]}")
        result = json.loads(out.read())
    return result, {"wall_seconds": round(wall, 2),
                    "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
                    "peak_rss_mb": result["peak_rss_mb"], "launched": launched}


def measured_refresh(config_path: Path) -> dict:
    """One refresh in a child: its cost as a whole and per layer, its report."""
    child, cost = run_child("refresh", str(config_path))
    report = child["report"]
    if not report["ok"]:
        raise ScaleError(f"refresh of {config_path} failed: {report['reasons']}, "
                         f"failed steps {[s['failed_steps'] for s in report['sources']]}")
    launched = cost.pop("launched")
    return {**cost, "peak_anon_mb": child["peak_anon_mb"],
            "children_peak_rss_mb": child["children_peak_rss_mb"],
            "first_searchable_seconds": round(child["searchable_at"] - launched, 2),
            "complete_seconds": round(child["complete_at"] - launched, 2),
            "startup_seconds": round(child["refresh_started"] - launched, 2),
            "startup_peak_rss_mb": child["startup_peak_rss_mb"],
            "layers": child["layers"], "outside_layers": child["outside_layers"],
            "report": report}


def edit_note(root: Path) -> Path:
    """Append a paragraph to the first note; the note edited."""
    note = min((root / "vault").rglob("note-*.md"))
    note.write_text(note.read_text() + "\nEdited for the scale benchmark: one more line.\n")
    return note


def edit_ticket(root: Path) -> int:
    """Change the first issue's body in its export file; the issue's number."""
    export = min((root / "tickets").glob("issues-*.json"))
    issues = json.loads(export.read_text())
    issues[0]["body"] += " Edited for the scale benchmark."
    issues[0]["updated_at"] = "2030-01-01T00:00:00+00:00"
    export.write_text(json.dumps(issues))
    return issues[0]["number"]


def store_sizes(data_dir: Path) -> dict[str, float]:
    """MB on disk of each store (each entry of the data directory): the blocks allocated, a
    file hard-linked into several places (published versions share the files they did not
    change) counted once, under the first entry that holds it."""
    seen: set[tuple[int, int]] = set()

    def size(path: Path) -> int:
        total = 0
        for file in [path] if path.is_file() else path.rglob("*"):
            status = file.lstat()
            if stat.S_ISREG(status.st_mode) and (status.st_dev, status.st_ino) not in seen:
                seen.add((status.st_dev, status.st_ino))
                total += status.st_blocks * 512
        return total

    return {entry.name: round(size(entry) / 2**20, 2) for entry in sorted(data_dir.iterdir())}


def _edit_refresh(config_path: Path, edited: str) -> dict:
    """The refresh after an edit (``edited`` says what was): its cost, per layer, and which
    sources ran."""
    refresh = measured_refresh(config_path)
    return {key: refresh[key] for key in ("wall_seconds", "cpu_seconds", "peak_rss_mb",
                                          "peak_anon_mb", "complete_seconds", "layers")} | {
        "edited": edited, "sources_run": sorted(refresh["report"]["reasons"])}


def scale_row(root: Path, target_chunks: int, embedder: str) -> dict:
    """One size: the corpus written under ``root``, its refreshes and its queries."""
    started = time.perf_counter()
    corpus = write_corpus(root, target_chunks,
                          embedding_backend=None if embedder == MODEL else embedder)
    generate_seconds = round(time.perf_counter() - started, 2)
    config_path = root / "jarvis.yaml"
    first = measured_refresh(config_path)
    noop = measured_refresh(config_path)
    note = _edit_refresh(config_path, str(edit_note(root).relative_to(root)))
    ticket = _edit_refresh(config_path, f"issue #{edit_ticket(root)}")
    queries, query_cost = run_child("queries", str(config_path), str(corpus["bundles"]))
    manifest = serving.current_version(root / "data").manifest
    disk = store_sizes(root / "data")
    report = first.pop("report")
    return {"target_chunks": target_chunks, "chunks": manifest["chunks"],
            "embedding": {"model": manifest["model"], **manifest["embedding"]},
            **first, "published_versions": 2 if report["partial"] else 1,
            "noop_seconds": noop["wall_seconds"], "noop_cpu_seconds": noop["cpu_seconds"],
            "noop_peak_rss_mb": noop["peak_rss_mb"], "noop_ran": sorted(noop["report"]["reasons"]),
            "note_edit_seconds": note["wall_seconds"], "note_edit": note,
            "ticket_edit_seconds": ticket["wall_seconds"], "ticket_edit": ticket,
            "queries": queries, "query_peak_rss_mb": query_cost["peak_rss_mb"],
            "disk_mb": round(sum(disk.values()), 1), "stores_mb": disk, "corpus": corpus,
            "generate_seconds": generate_seconds,
            "counts": {source["source"]: source["layers"] for source in report["sources"]}}


def embedder_label(embedder: str) -> str:
    if embedder == MODEL:
        return "the configured model, full cost"
    return f"{embedder}: a cheap deterministic stand-in for the model"


def run_scale_benchmark(sizes: tuple[int, ...], work_dir: Path, chart: Path,
                        embedder: str = MODEL) -> dict:
    """A row per size (smallest first), the chart written to ``chart``."""
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes must be positive chunk counts, got {sizes}")
    if embedder not in EMBEDDERS:
        raise ValueError(f"embedder must be one of {', '.join(EMBEDDERS)}, got {embedder!r}")
    rows = [scale_row(work_dir / f"chunks-{size}", size, embedder) for size in sorted(sizes)]
    chart.parent.mkdir(parents=True, exist_ok=True)
    chart.write_text(chart_svg(rows, embedder_label(embedder)))
    return {"embedder": embedder_label(embedder), "cpus": os.cpu_count(),
            "load_average": [round(load, 2) for load in os.getloadavg()],
            "chart": str(chart),
            "model_cache": os.environ.get("JARVIS_CACHE_DIR") or "each size's data directory, "
            "cold: with the model, its first refresh includes exporting it",
            "sizes": rows}
