"""What runs inside the measured child processes of ``jarvis bench scale``, printing JSON:

- ``python -m jarvis_bench.scale_child refresh CONFIG``: ``jarvis refresh`` in this process
  (``run_refresh``), with the wall, CPU and peak RSS of each layer. A sampler thread reads the
  process's peak RSS (VmHWM) every ``TICK_SECONDS`` and resets it (``/proc/self/clear_refs``),
  so every tick knows the true peak of its own interval: no peak is missed, and a layer's peak
  is the highest of the ticks its steps overlap (a peak within a tick of a layer's boundary
  may count on both sides). It reads the anonymous part of RSS (``RssAnon``) at each tick too:
  memory the process owns, without the pages of store files it maps (Qdrant Edge's, which
  the kernel drops under pressure). A layer's steps, with their own asset checks, are the
  Dagster steps' start and end events of the refresh's runs.
- ``python -m jarvis_bench.scale_child queries CONFIG BUNDLES``: warm p50/p95 of keyword,
  semantic, hybrid, graph depth 2 and GraphRAG searches on the published version, through
  ``KnowledgeBase`` as the MCP server and the CLI use it.
"""

from __future__ import annotations

import json
import random
import re
import resource
import sys
import threading
import time
from array import array
from pathlib import Path

import numpy as np

from jarvis_core.config import load_config
from jarvis_core.garbage_collection import collect_less_often

TICK_SECONDS = 0.025
QUERIES = 100
CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")
_HWM = re.compile(r"^VmHWM:\s+(\d+) kB", re.MULTILINE)
_ANON = re.compile(r"^RssAnon:\s+(\d+) kB", re.MULTILINE)


def _cpu_seconds() -> float:
    """This process's CPU, its threads and the children it waited for (git) included."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class PeakSampler:
    """Ticks of (time, peak RSS in KiB since the previous tick, anonymous RSS in KiB at the
    tick, CPU seconds so far). The first tick holds the peak of everything before the sampler
    started."""

    def __init__(self) -> None:
        self.times, self.peaks_kib, self.cpu = array("d"), array("d"), array("d")
        self.anon_kib = array("d")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jarvis-peak-sampler",
                                        daemon=True)

    def _tick(self) -> None:
        status = STATUS.read_text()
        CLEAR_REFS.write_text("5")  # VmHWM starts again from the current RSS
        self.times.append(time.time())
        self.peaks_kib.append(int(_HWM.search(status).group(1)))
        self.anon_kib.append(int(_ANON.search(status).group(1)))
        self.cpu.append(_cpu_seconds())

    def _run(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self._tick()

    def __enter__(self) -> PeakSampler:
        self._tick()
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()
        self._tick()

    def span(self, start: float, end: float) -> dict:
        """CPU seconds (interpolated between ticks), the peak RSS and the highest anonymous
        RSS (MB) of [start, end]: the highest of the ticks whose intervals overlap it."""
        times, cpu = np.frombuffer(self.times), np.frombuffer(self.cpu)
        first, last = np.searchsorted(times, [start, end])
        ticks = slice(first, min(last, len(times) - 1) + 1)
        return {"cpu_seconds": float(np.interp(end, times, cpu) - np.interp(start, times, cpu)),
                "peak_rss_mb": float(np.frombuffer(self.peaks_kib)[ticks].max(initial=0)) / 1024,
                "peak_anon_mb": float(np.frombuffer(self.anon_kib)[ticks].max(initial=0)) / 1024}

    @property
    def peak_rss_mb(self) -> float:
        return max(self.peaks_kib) / 1024

    @property
    def peak_anon_mb(self) -> float:
        return max(self.anon_kib) / 1024


def step_spans(instance, run_ids: list[str]) -> list[tuple[str, float, float]]:
    """(layer, start, end) of every step of the runs: an asset's step under the asset's name,
    an asset check's under the asset it checks."""
    import dagster as dg

    spans = []
    for run_id in run_ids:
        started, layer_of, steps = {}, {}, []
        for entry in instance.all_logs(run_id, of_type={
                dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS,
                dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.ASSET_CHECK_EVALUATION}):
            event = entry.dagster_event
            if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
                layer_of[entry.step_key] = event.event_specific_data.asset_key.to_user_string()
            elif event.event_type == dg.DagsterEventType.STEP_START:
                started[entry.step_key] = entry.timestamp
            else:
                steps.append((entry.step_key, started.pop(entry.step_key), entry.timestamp))
        spans += [(layer_of.get(step, step), start, end) for step, start, end in steps]
    return spans


def layer_costs(sampler: PeakSampler, spans: list[tuple[str, float, float]]) -> dict:
    """Per layer: wall and CPU seconds summed over its steps (one per source, two for a
    publish of a progressive refresh), the highest peak RSS and anonymous RSS, and how many
    steps."""
    layers: dict[str, dict] = {}
    for layer, start, end in spans:
        cost = sampler.span(start, end)
        entry = layers.setdefault(layer, {"wall_seconds": 0.0, "cpu_seconds": 0.0,
                                          "peak_rss_mb": 0.0, "peak_anon_mb": 0.0,
                                          "steps": 0})
        entry["wall_seconds"] += end - start
        entry["cpu_seconds"] += cost["cpu_seconds"]
        for peak in ("peak_rss_mb", "peak_anon_mb"):
            entry[peak] = max(entry[peak], cost[peak])
        entry["steps"] += 1
    return {layer: {"wall_seconds": round(entry["wall_seconds"], 2),
                    "cpu_seconds": round(entry["cpu_seconds"], 2),
                    "peak_rss_mb": round(entry["peak_rss_mb"], 1),  # as the whole's
                    "peak_anon_mb": round(entry["peak_anon_mb"], 1),
                    "steps": entry["steps"]} for layer, entry in sorted(layers.items())}


def _run_ids(report: dict) -> list[str]:
    runs = [run for entry in report["sources"] for run in entry.get("run_ids", [entry["run_id"]])]
    return runs + [report[publish]["run_id"] for publish in ("partial", "published")
                   if report[publish]]


def measured_refresh(config_path: Path) -> dict:
    """The refresh's report and what it cost, per layer and as a whole; times (``..._at``,
    ``..._started``) are epoch seconds, for the parent to set against the child's launch."""
    from jarvis_pipeline.instance import project_instance
    from jarvis_pipeline.refresh import run_refresh

    config = load_config(config_path)
    with PeakSampler() as sampler:
        refresh_started = time.time()
        report = run_refresh(config)
        refresh_ended = time.time()
    seconds = report["seconds"]
    spans = []
    if report["sources"]:
        with project_instance(config) as instance:
            spans = step_spans(instance, _run_ids(report))
    layers = layer_costs(sampler, spans)
    whole = sampler.span(refresh_started, refresh_ended)
    # the largest process the refresh started and waited for: on a cold model cache the
    # model's preparation (jarvis_core/text/preparation.py), which holds torch beside it
    children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"report": report, "layers": layers, "peak_rss_mb": round(sampler.peak_rss_mb, 1),
            "peak_anon_mb": round(sampler.peak_anon_mb, 1),
            "children_peak_rss_mb": round(children_kib / 1024, 1),
            "startup_peak_rss_mb": round(sampler.peaks_kib[0] / 1024, 1),
            "refresh_started": refresh_started,
            "searchable_at": refresh_started + seconds.get(
                "first_published", seconds.get("published", refresh_ended - refresh_started)),
            "complete_at": refresh_started + seconds.get("published",
                                                         refresh_ended - refresh_started),
            "outside_layers": {
                "wall_seconds": round(refresh_ended - refresh_started
                                      - sum(end - start for _, start, end in spans), 2),
                "cpu_seconds": round(whole["cpu_seconds"]
                                     - sum(entry["cpu_seconds"] for entry in layers.values()),
                                     2)}}


def warm_latencies(config_path: Path, bundles: int, seed: int = 5) -> dict:
    """p50/p95 (ms) per query tool after ``WARMUP`` queries, on the published version."""
    from jarvis_bench.embed import _CONTENT_WORDS
    from jarvis_bench.query import GOALS_MS, _timed
    from jarvis_query.knowledge_base import KnowledgeBase

    pick = random.Random(seed)
    queries = [" ".join(pick.sample(_CONTENT_WORDS, pick.randint(2, 4))) for _ in range(QUERIES)]
    notes = [f"note-{pick.randrange(bundles):05d}" for _ in range(QUERIES)]
    kb = KnowledgeBase(load_config(config_path))
    try:
        started = time.perf_counter()
        kb.load()
        loaded = time.perf_counter() - started
        tools = {"keyword": _timed(lambda q: kb.search_vault(q, search_content=True), queries),
                 "semantic": _timed(kb.search_semantic, queries),
                 "hybrid": _timed(kb.search_hybrid, queries),
                 "graph_depth_2": _timed(lambda note: kb.search_graph(note, depth=2), notes),
                 "graphrag": _timed(kb.search_graphrag, queries)}
    finally:
        kb.close()
    for tool, goal in GOALS_MS.items():
        tools[tool]["goal_p50_ms"] = goal
    return {"queries": QUERIES, "load_seconds": round(loaded, 2), "tools": tools}


def main(argv: list[str]) -> None:
    collect_less_often()  # as the `jarvis` command does
    mode, config_path, *rest = argv
    if mode == "refresh":
        result = measured_refresh(Path(config_path))
    elif mode == "queries":
        result = warm_latencies(Path(config_path), int(rest[0]))
        result["peak_rss_mb"] = round(int(_HWM.search(STATUS.read_text()).group(1)) / 1024, 1)
    else:
        raise SystemExit(f"unknown mode {mode!r}: refresh or queries")
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
