"""``jarvis bench parallel``: four generated sources (a vault, a GitHub ticket export, a git
repository, a mail folder: ``scale_corpus``) refreshed as four concurrent runs against one
after another, under Dagster's own ``QueuedRunCoordinator`` (``max_concurrent_runs`` 4, then
1) on a fresh instance: the runs are submitted with ``dagster job launch``, dequeued by
``dagster-daemon`` and launched by it as separate processes through a code server
(``dagster api grpc``), the way a deployment runs them. Each source's ingestion runs, then
every later layer (``refresh_sources``), then one publish (``publish_serving``).

Wall is the time from the first run's start to the last run's end of each phase, summed
(submitting is left out: it waits outside the runs); CPU and peak RSS are the run processes'
own, sampled from /proc (every descendant of the code server); ``vectors``, how many vectors
the runs computed and read from the vector cache. ``identical`` compares the
two published versions: every published table's rows but the columns that record when
something was processed, the vector ids and vectors (within ``VECTOR_TOLERANCE``), the
keyword indexes' documents and the graph's nodes and edges."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from jarvis_assets.jobs import EMBEDDINGS
from jarvis_bench.parallel_content import compare_contents, published_content
from jarvis_bench.scale_corpus import write_corpus
from jarvis_core.settings import CACHE_ENV

SOURCES = ("notes", "issues", "scale", "lists")  # the corpus's vault, tickets, repo, mail
MODES = (("sequential", 1), ("parallel", len(SOURCES)))
PROJECT_ROOT = Path(__file__).resolve().parents[1]
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class ParallelBenchError(RuntimeError):
    """A run of the benchmark failed; the message says which and why."""


class TreeSampler(threading.Thread):
    """CPU and RSS of a process's descendants, read from /proc every ``interval`` s: CPU of
    each process as last seen (a process that ends loses at most one interval), peak RSS of
    them all together and of the largest."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.cpu: dict[int, float] = {}
        self.peak_total = self.peak_process = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self._done.set()
        self.join()

    def sample(self) -> None:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                    rss = int(Path(f"/proc/{entry}/statm").read_text().split()[1]) * _PAGE
                except (OSError, IndexError, ValueError):
                    continue
                stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK,
                                     rss)
        inside, grew = {self.root}, True
        while grew:
            found = {pid for pid, (ppid, _, _) in stats.items() if ppid in inside} - inside
            grew, inside = bool(found), inside | found
        inside.discard(self.root)
        total = 0
        for pid in inside:
            _, cpu, rss = stats[pid]
            self.cpu[pid] = cpu
            total += rss
            self.peak_process = max(self.peak_process, rss)
        self.peak_total = max(self.peak_total, total)


def _command(name: str) -> str:
    """An executable installed beside this interpreter (dagster, dagster-daemon, jarvis)."""
    return str(Path(sys.executable).parent / name)


def _env(root: Path, home: Path, warm: bool) -> dict[str, str]:
    """The runs' environment; ``warm``: with the cache the warm-up filled (``_shared_cache``),
    not the mode's own (a cache under each data directory, by default)."""
    return {**os.environ, "DAGSTER_HOME": str(home), "JARVIS_CONFIG": str(root / "jarvis.yaml"),
            "HF_HUB_OFFLINE": "1", **({CACHE_ENV: str(_shared_cache(root))} if warm else {}),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT),
                                                         os.environ.get("PYTHONPATH")]))}


def _write_config(root: Path, corpus: Path, vector_cache: bool) -> Path:
    """A jarvis.yaml for the shared corpus with its data under ``root``."""
    config = (corpus / "jarvis.yaml").read_text().replace(str(corpus / "data"), str(root / "data"))
    cache = "true" if vector_cache else "false"
    (root / "jarvis.yaml").write_text(f"{config}embedding:\n  cache: {cache}\n")
    return root / "jarvis.yaml"


def _shared_cache(root: Path) -> Path:
    return root.parent / "cache"


def _warm_vector_cache(root: Path, corpus: Path) -> None:
    """A refresh of the corpus beforehand, so that both modes read every vector from the
    cache (``$JARVIS_CACHE_DIR``) instead of computing it."""
    root.mkdir()
    config = _write_config(root, corpus, vector_cache=True)
    shutil.rmtree(_shared_cache(root), ignore_errors=True)
    done = subprocess.run([_command("jarvis"), "--config", str(config),
                           "refresh", "--json"], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1",
                               CACHE_ENV: str(_shared_cache(root))})
    if done.returncode != 0:
        raise ParallelBenchError(f"warming the vector cache failed: {done.stderr[-2000:]}")


def _configure(root: Path, corpus: Path, concurrent: int, vector_cache: bool) -> Path:
    """The mode's jarvis.yaml (the shared corpus, its own data; without the vector cache
    each mode embeds every chunk) and its fresh Dagster instance with the run queue's
    limit."""
    _write_config(root, corpus, vector_cache)
    home = root / "dagster"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(
        "run_coordinator:\n  module: dagster._core.run_coordinator\n"
        "  class: QueuedRunCoordinator\n  config:\n"
        f"    max_concurrent_runs: {concurrent}\n    dequeue_interval_seconds: 1\n"
        "telemetry:\n  enabled: false\n")
    return home


def _quiet_instigators(workspace: str, env: dict[str, str],
                       names: list[tuple[str, str]]) -> None:
    """Stop the sensors and schedules (they start running by default) so that only the
    benchmark's runs are launched."""
    calls = [subprocess.Popen([_command("dagster"), kind, "stop", name, "-w", workspace],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for kind, name in names]
    for call in calls:
        if call.wait() != 0:
            raise ParallelBenchError(f"stopping {call.args[1:4]} failed: "
                                     f"{call.stderr.read().decode()[-1000:]}")


def _launch(workspace: str, env: dict[str, str], job: str,
            source: str | None) -> tuple[str, subprocess.Popen]:
    run_id = str(uuid.uuid4())
    tags = json.dumps({"dagster/partition": source} if source else {})
    return run_id, subprocess.Popen(
        [_command("dagster"), "job", "launch", "-j", job, "-w", workspace, "--run-id",
         run_id, "--tags", tags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _phase(instance, workspace: str, env: dict[str, str], launches: list[tuple[str, str | None]],
           timeout: float) -> dict:
    """Submit the runs, wait for them all; their span (first start to last end)."""
    import dagster as dg

    submitted = [_launch(workspace, env, job, source) for job, source in launches]
    for _, call in submitted:
        if call.wait() != 0:
            raise ParallelBenchError(f"dagster job launch failed: {call.stderr.read().decode()}")
    run_ids = [run_id for run_id, _ in submitted]
    deadline = time.monotonic() + timeout
    while True:
        records = instance.get_run_records(dg.RunsFilter(run_ids=run_ids))
        if len(records) == len(run_ids) and all(r.dagster_run.is_finished for r in records):
            break
        if time.monotonic() > deadline:
            raise ParallelBenchError(f"runs {run_ids} not finished after {timeout:g} s")
        time.sleep(0.5)
    failed = [f"{r.dagster_run.job_name}[{r.dagster_run.tags.get('dagster/partition', '')}]"
              for r in records if r.dagster_run.status != dg.DagsterRunStatus.SUCCESS]
    if failed:
        raise ParallelBenchError(f"runs failed: {', '.join(failed)} "
                                 f"(their logs: {instance.root_directory})")
    held: dict[str, float] = {}
    embedded = {"computed": 0, "from_cache": 0}
    for record in records:
        for store, seconds in _held_in(instance, record.dagster_run.run_id).items():
            held[store] = held.get(store, 0.0) + seconds
        for name, count in _embedded_in(instance, record.dagster_run.run_id).items():
            embedded[name] += count
    return {"wall_seconds": max(r.end_time for r in records) - min(r.start_time for r in records),
            "run_seconds": sum(r.end_time - r.start_time for r in records), "held": held,
            "embedded": embedded}


def _embedded_in(instance, run_id: str) -> dict[str, int]:
    """Vectors the run's embeddings computed and read from the vector cache."""
    import dagster as dg

    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        materialization = entry.asset_materialization
        if materialization.asset_key == dg.AssetKey(EMBEDDINGS):
            metadata = {key: value.value for key, value in materialization.metadata.items()}
            from_cache = metadata["embedded_from_cache"]
            return {"computed": metadata["embedded"] - from_cache, "from_cache": from_cache}
    return {}


def _held_in(instance, run_id: str) -> dict[str, float]:
    """Seconds the run held each store's write turn (its tables resource logs them last),
    by the store's kind ('vector store', 'keyword index', ...; a path stripped)."""
    from jarvis_resources.tables import HELD_PREFIX

    for entry in reversed(instance.all_logs(run_id)):
        if entry.user_message.startswith(HELD_PREFIX):
            return {store.split(" /")[0]: seconds for store, seconds in
                    json.loads(entry.user_message[len(HELD_PREFIX):]).items()}
    return {}


def run_mode(root: Path, corpus: Path, concurrent: int, warm: bool, timeout: float) -> dict:
    """Ingestion, later layers and a publish of every source under a run queue of
    ``concurrent`` runs."""
    import dagster as dg

    from jarvis_core.config import load_config
    from jarvis_definitions import build_definitions
    from jarvis_pipeline.refresh import register_sources

    home = _configure(root, corpus, concurrent, vector_cache=warm)
    env = _env(root, home, warm)
    config = load_config(root / "jarvis.yaml")
    definitions = build_definitions(config)
    socket = str(Path(tempfile.mkdtemp(prefix="jarvis-grpc-")) / "code.sock")
    workspace = str(root / "workspace.yaml")
    Path(workspace).write_text(
        f"load_from:\n  - grpc_server:\n      socket: {socket}\n      location_name: jarvis\n")
    server = subprocess.Popen([_command("dagster"), "api", "grpc", "-m", "jarvis_definitions",
                               "-s", socket], env=env, cwd=PROJECT_ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemon = None
    try:
        while subprocess.run([_command("dagster"), "api", "grpc-health-check", "-s", socket],
                             env=env, capture_output=True).returncode != 0:
            if server.poll() is not None:
                raise ParallelBenchError("the code server (dagster api grpc) exited")
            time.sleep(0.5)
        repository = definitions.get_repository_def()
        _quiet_instigators(workspace, env, [("sensor", s.name) for s in repository.sensor_defs]
                           + [("schedule", s.name) for s in repository.schedule_defs])
        instance = dg.DagsterInstance.local_temp(str(home))
        register_sources(instance, {source: config.kind_of(source) for source in SOURCES})
        daemon = subprocess.Popen([_command("dagster-daemon"), "run", "-w", workspace],
                                  env=env, cwd=PROJECT_ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sampler = TreeSampler(server.pid)
        sampler.start()
        phases = {
            "ingest": _phase(instance, workspace, env, [
                (config.kind_of(source).ingest_job, source) for source in SOURCES], timeout),
            "layers": _phase(instance, workspace, env, [
                ("refresh_sources", source) for source in SOURCES], timeout),
            "publish": _phase(instance, workspace, env, [("publish_serving", None)], timeout)}
        sampler.stop()
    finally:
        for process in (daemon, server):
            if process is not None:
                process.terminate()
                process.wait()
    held: dict[str, float] = {}
    for phase in phases.values():
        for store, seconds in phase["held"].items():
            held[store] = round(held.get(store, 0.0) + seconds, 2)
    return {"max_concurrent_runs": concurrent,
            "wall_seconds": round(sum(p["wall_seconds"] for p in phases.values()), 2),
            "run_seconds": round(sum(p["run_seconds"] for p in phases.values()), 2),
            "held_seconds": held,
            "cpu_seconds": round(sum(sampler.cpu.values()), 2),
            "vectors": {name: sum(p["embedded"][name] for p in phases.values())
                        for name in ("computed", "from_cache")},
            "peak_rss_mb": round(sampler.peak_total / 2**20, 1),
            "peak_process_rss_mb": round(sampler.peak_process / 2**20, 1),
            "phases_seconds": {name: round(p["wall_seconds"], 2) for name, p in phases.items()}}


def run_parallel_benchmark(chunks_per_source: int, work_dir: Path, warm: bool = False,
                           timeout: float = 3600.0) -> dict:
    """Both modes on one generated corpus of about ``chunks_per_source`` chunks a source;
    ``warm``: with every vector in the cache beforehand (what refreshes that embed little
    cost: the layers around the embeddings), else embedding every chunk in each mode."""
    if chunks_per_source < 1:
        raise ValueError(f"chunks must be at least 1 per source, got {chunks_per_source}")
    work_dir.mkdir(parents=True, exist_ok=True)
    corpus = work_dir / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    written = write_corpus(corpus, chunks_per_source * len(SOURCES))
    if warm:
        shutil.rmtree(work_dir / "warm-up", ignore_errors=True)
        _warm_vector_cache(work_dir / "warm-up", corpus)
    modes, contents = {}, {}
    for name, concurrent in MODES:
        root = work_dir / name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        modes[name] = run_mode(root, corpus, concurrent, warm, timeout)
        contents[name] = published_content(root / "data")
    differences = compare_contents(contents["sequential"], contents["parallel"])
    from jarvis_core.stores.serving import current_version

    manifest = current_version(work_dir / "parallel" / "data").manifest
    return {"embedder": {"model": manifest["model"], **manifest["embedding"]},
            "vectors": "read from a cache warmed beforehand" if warm
            else "computed in each mode (no vector cache)",
            "cpus": os.cpu_count(), "chunks_per_source": chunks_per_source, "corpus": written,
            "published_chunks": manifest["chunks"], **modes,
            "speedup": round(modes["sequential"]["wall_seconds"]
                             / modes["parallel"]["wall_seconds"], 2),
            "identical": not differences["differing"], "differences": differences}
