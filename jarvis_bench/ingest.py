"""`jarvis bench ingest`: the ingest side at the sizes people have, in one run.

1. Jira wiki markup: our converter against jira2markdown on a real export (``jira_speedup``).
2. The whole export through the pipeline but the embeddings (parse, chunk, keyword index,
   graph, analytics), against what embedding its chunks costs here (the embedder's rate
   measured on the export's own chunks).
3. A generated vault: a first refresh, timed to the first published version (keyword and
   graph search work) and to the complete one; then a refresh with nothing changed, in this
   process and as a fresh `jarvis refresh` process.
4. The configured (sample) sources, already published: a cold no-op `jarvis refresh`
   against a cold `jarvis status`, in CPU seconds.

Embeddings are made for real and never come from the embedding cache (a fresh cache
directory per run)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

from jarvis_bench.jira_markup import run_markup_benchmark
from jarvis_bench.synthetic_vault import write_vault
from jarvis_core.config import JarvisConfig, load_config
from jarvis_core.settings import CACHE_ENV

EMBED_SAMPLE = 512  # chunks embedded to measure the rate


def _config(root: Path, sources: dict, **settings) -> Path:
    path = root / "jarvis.yaml"
    path.write_text(yaml.safe_dump({"data_dir": "data", **sources, **settings}))
    return path


def _cold_cpu(command: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return round(time.perf_counter() - started, 3), round(cpu, 3)


def _export_index(export: Path, root: Path) -> dict:
    """The export's tickets through every layer but the embeddings, and what embedding its
    chunks would cost at the embedder's measured rate."""
    from jarvis_core.stores.connections import read_only
    from jarvis_core.text.embedder import Embedder
    from jarvis_definitions import build_definitions
    from jarvis_pipeline.instance import project_instance
    from jarvis_pipeline.refresh import register_sources, run_source_job

    tickets = root / "export"
    with tarfile.open(export) as archive:
        archive.extractall(tickets, filter="data")
    config = load_config(_config(root, {"tickets": {"export": str(tickets)}}))
    definitions = build_definitions(config)
    started, cpu = time.perf_counter(), time.process_time()
    kind = config.kind_of("export")
    with project_instance(config) as instance:
        register_sources(instance, {"export": kind})
        # its ingestion (the raw asset is partitioned by ticket sets), then its later layers
        entry = run_source_job(config, definitions, instance, kind.ingest_job, "export")
        if entry["ok"]:
            indexed = run_source_job(config, definitions, instance, "index_sources", "export")
            entry = {**indexed, "ok": indexed["ok"],
                     "layers": {**entry["layers"], **indexed["layers"]}}
    index_seconds = time.perf_counter() - started
    with read_only(config.duckdb_path) as conn:
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        sample = [f"{context}\n{text}" for context, text in conn.execute(
            f"SELECT context, text FROM chunks USING SAMPLE {EMBED_SAMPLE} ROWS").fetchall()]
    embedder = Embedder(config.embedding.model, cache_dir=config.cache_dir)
    embedder.embed(sample[:32])  # warm
    embed_started = time.perf_counter()
    embedder.embed(sample)
    rate = len(sample) / (time.perf_counter() - embed_started)
    layers = entry["layers"]
    return {"ok": entry["ok"], "tickets": layers["raw_tickets"]["rows"], "chunks": chunks,
            "failed": layers["raw_tickets"].get("failed", 0),
            "index_seconds": round(index_seconds, 2),
            "index_cpu_seconds": round(time.process_time() - cpu, 2),
            "embed_chunks_per_second": round(rate, 1),
            "embedding_seconds_at_that_rate": round(chunks / rate, 1),
            "index_share_of_embedding": round(index_seconds / (chunks / rate), 4)}


def _vault_refresh(notes: int, root: Path) -> dict:
    """A first refresh of a generated vault (progressive), then a no-op one."""
    from jarvis_pipeline.refresh import run_refresh

    write_vault(root / "vault", notes)
    config_file = _config(root, {"vaults": {"generated": "vault"}})
    config = load_config(config_file)
    first = run_refresh(config)
    noop_started, noop_cpu = time.perf_counter(), time.process_time()
    noop = run_refresh(config)
    noop_seconds = time.perf_counter() - noop_started
    env = {**os.environ, "JARVIS_CONFIG": str(config_file)}
    cold_wall, cold_cpu = _cold_cpu([str(Path(sys.executable).with_name("jarvis")), "refresh"],
                                    env)
    full = first.get("seconds", {}).get("published")
    layers = first["sources"][0]["layers"] if first["sources"] else {}
    return {
        "notes": notes, "ok": first["ok"] and noop["ok"],
        "chunks": layers.get("chunks", {}).get("rows"),
        "first_published_seconds": first.get("seconds", {}).get("first_published"),
        "complete_seconds": full,
        "first_published_share": round(first["seconds"]["first_published"] / full, 4)
        if full and "first_published" in first.get("seconds", {}) else None,
        "noop_seconds": round(noop_seconds, 3),
        "noop_cpu_seconds": round(time.process_time() - noop_cpu, 3),
        "noop_sources_run": len(noop["sources"]),
        "noop_cold_process_seconds": cold_wall, "noop_cold_process_cpu_seconds": cold_cpu,
        "noop_share": round(cold_wall / full, 4) if full else None,
    }


def _sample_noop(config: JarvisConfig) -> dict:
    """A cold no-op `jarvis refresh` of the configured sources against a cold `jarvis status`
    (the configuration must be published and unchanged)."""
    jarvis = str(Path(sys.executable).with_name("jarvis"))
    env = {**os.environ, "JARVIS_CONFIG": str(config.config_path)}
    _cold_cpu([jarvis, "refresh"], env)  # publishes first if anything changed
    refresh = [_cold_cpu([jarvis, "refresh"], env) for _ in range(3)]
    status = [_cold_cpu([jarvis, "status"], env) for _ in range(3)]
    refresh_cpu = sorted(cpu for _, cpu in refresh)[1]
    status_cpu = sorted(cpu for _, cpu in status)[1]
    return {"refresh_cpu_seconds": refresh_cpu, "status_cpu_seconds": status_cpu,
            "ratio": round(refresh_cpu / status_cpu, 2), "goal_ratio": 3.0}


def run_ingest_benchmark(config: JarvisConfig, jira: Path, notes: int = 10_000,
                         markup_sample: int = 200, reference_seconds: float = 120.0) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="jarvis-bench-ingest-"))
    previous_cache = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(scratch / "cache")  # nothing embedded before
    try:
        report = {"jira_markup": run_markup_benchmark(
            jira, markup_sample, reference_seconds=reference_seconds)}
        report["jira_speedup"] = report["jira_markup"]["jira_speedup"]
        report["jira_export"] = _export_index(jira, scratch / "jira")
        report["generated_vault"] = _vault_refresh(notes, scratch / "vault")
    finally:
        if previous_cache is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = previous_cache
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        report["sample_noop"] = _sample_noop(config)
    except subprocess.CalledProcessError as exc:
        report["sample_noop"] = {"error": f"{' '.join(exc.cmd[1:])} failed (exit "
                                          f"{exc.returncode})"}
    return report
