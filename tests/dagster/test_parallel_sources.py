"""Sources in parallel (docs/architecture.md#sources-in-parallel), with runs in processes of
their own as the daemon launches them: a publish never holds a source half refreshed, and
sources refreshed side by side publish what they publish one after another. Each process
records its runs through the storages `jarvis refresh` uses (``instance_at``): Dagster's
stock ones cost a child refreshing two small sources 13 CPU-s against 9.5."""

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time

import dagster as dg
import pytest
import yaml

from jarvis_bench.parallel_content import compare_contents, published_content
from jarvis_bench.scale_corpus import write_corpus
from jarvis_core.config import load_config
from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_core.stores.serving import current_version
from jarvis_definitions import build_definitions
from jarvis_pipeline.instance import instance_at
from tests.pipeline_helpers import PROJECT_ROOT, write_config

pytestmark = pytest.mark.slow
FROZEN_SECONDS = 12  # longer than a publish of a few notes takes here (about 3 s)
_REFRESH = """
from pathlib import Path
from jarvis_core.config import load_config
from jarvis_definitions import build_definitions
from jarvis_pipeline.instance import instance_at
from jarvis_pipeline.refresh import register_sources

def refresh(config_path, instance_dir, sources):
    config = load_config(config_path)
    instance = instance_at(Path(instance_dir))
    register_sources(instance, {source: config.kind_of(source) for source in sources})
    definitions = build_definitions(config)
    for source in sources:
        for job in (config.kind_of(source).ingest_job, "refresh_sources"):
            result = definitions.resolve_job_def(job).execute_in_process(
                partition_key=source, instance=instance, raise_on_error=False)
            assert result.success, (source, job)

if __name__ == "__main__":
    import sys
    refresh(sys.argv[1], sys.argv[2], sys.argv[3:])
"""


def refresh_elsewhere(config, home, *sources: str) -> subprocess.Popen:
    """A process refreshing ``sources`` one after another (ingestion, then later layers),
    recording its runs in an instance of its own under ``home`` (``child.instance``: no
    process writes another's, so freezing one blocks nobody's bookkeeping); its log goes
    to a file (a pipe nobody reads would fill and stop it)."""
    instance = home / "-".join(sources)
    instance.mkdir(parents=True)
    log = home / f"{instance.name}.log"
    with log.open("w") as output:
        child = subprocess.Popen(
            [sys.executable, "-c", _REFRESH, str(config.config_path), str(instance),
             *sources], env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}, stdout=output,
            stderr=subprocess.STDOUT)
    child.log, child.instance = log, instance
    return child


def refresh_here(config, home, *sources: str) -> None:
    """The same refreshes as ``refresh_elsewhere``'s process, run in this one (the same
    script's function; its runs recorded in an instance of their own under ``home``)."""
    instance = home / "-".join(sources)
    instance.mkdir(parents=True)
    script = {"__name__": "refresh_here"}
    exec(_REFRESH, script)
    script["refresh"](str(config.config_path), str(instance), sources)


def finished(child: subprocess.Popen) -> None:
    assert child.wait() == 0, child.log.read_text()[-3000:]


def publish(config, home) -> dg.ExecuteInProcessResult:
    (home / "publish").mkdir(exist_ok=True)
    instance = instance_at(home / "publish")
    return build_definitions(config).resolve_job_def("publish_serving").execute_in_process(
        instance=instance, raise_on_error=False)


def _chunks_written(instance: dg.DagsterInstance) -> bool:
    return bool(instance.fetch_materializations(dg.AssetKey("chunks"), limit=1).records)


def _a_store_held(data_dir) -> bool:
    """Whether some process holds a store's write turn (the sources' locks aside)."""
    for lock in data_dir.rglob(".*.lock"):
        if lock.parent.name != "refreshing":
            with lock.open() as probe:
                try:
                    fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
    return False


def freeze_between_turns(child: subprocess.Popen, data_dir) -> None:
    """Stop ``child`` at a moment it holds no store (so what waits for it waits only for
    its run to end, not for one of its writes)."""
    while True:
        os.kill(child.pid, signal.SIGSTOP)
        if not _a_store_held(data_dir):
            return
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.01)


def test_a_publish_waits_for_a_source_mid_refresh(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    for number in range(6):
        (vault / f"Note {number}.md").write_text(
            f"# Note {number}\n\nThe pump station {number} reports pressure every minute; "
            f"see [[Note {(number + 1) % 6}]].\n")
    # no vector cache: embedding loads the model, so the run is still far from its vectors
    config = write_config(tmp_path / "project", {"v": vault}, embedding={"cache": False})
    home = tmp_path / "dagster"
    refresh = refresh_elsewhere(config, home, "v")
    instance = instance_at(refresh.instance)  # read, never written
    deadline = time.monotonic() + 300
    while not _chunks_written(instance):
        assert refresh.poll() is None, refresh.log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the source's chunks were never written"
        time.sleep(0.01)
    # Frozen between its chunks and its vectors, the run cannot finish: a publish that did
    # not wait for it would complete meanwhile, with the new chunks and none of their vectors.
    freeze_between_turns(refresh, config.data_dir)
    try:
        results = []
        publishing = threading.Thread(target=lambda: results.append(publish(config, home)))
        publishing.start()
        publishing.join(timeout=FROZEN_SECONDS)
    finally:
        os.kill(refresh.pid, signal.SIGCONT)
    publishing.join()
    finished(refresh)
    assert results[0].success
    manifest = current_version(config.data_dir).manifest
    assert manifest["chunks"] >= 6
    assert manifest["vectors"] == {"v": manifest["chunks"]}
    assert manifest["vectors_complete"]


def test_sources_refreshed_side_by_side_publish_what_one_after_another_publishes(tmp_path):
    """Two sources of two kinds, in one process one after another (this one: what is compared
    is what they publish, not where), and in two processes at once (one each: every store
    written by both); both versions hold the same rows, vectors, keyword documents and
    graph."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 40, embedding_backend=HASHED_NGRAMS)  # the model is not the point
    sources = ("notes", "issues")  # a vault and a ticket set citing the corpus's repository
    settings = yaml.safe_load((corpus / "jarvis.yaml").read_text())
    del settings["repos"], settings["mail"]
    contents = {}
    for mode in ("one_after_another", "side_by_side"):
        root, home = tmp_path / mode, tmp_path / mode / "dagster"
        root.mkdir()
        (root / "jarvis.yaml").write_text(yaml.safe_dump({**settings,
                                                          "data_dir": str(root / "data")}))
        config = load_config(root / "jarvis.yaml")
        assert set(config.sources) == set(sources)
        if mode == "one_after_another":
            refresh_here(config, home, *sources)
        else:
            refreshes = [refresh_elsewhere(config, home, source) for source in sources]
            for refresh in refreshes:
                finished(refresh)
        assert publish(config, home).success
        manifest = current_version(config.data_dir).manifest
        assert set(manifest["vectors"]) == set(sources) and manifest["vectors_complete"]
        contents[mode] = published_content(config.data_dir)
    first, second = contents["one_after_another"], contents["side_by_side"]
    assert compare_contents(first, second)["differing"] == []
    # what a run whose writes were lost would have published
    lost_vector = {**second, "vectors": dict(list(second["vectors"].items())[1:])}
    lost_rows = {**second, "tables": {**second["tables"],
                                      "chunks": second["tables"]["chunks"][1:]}}
    lost_edges = {**second, "graph": {**second["graph"], "edges": second["graph"]["edges"][1:]}}
    for lost, store in ((lost_vector, "vectors:ids"), (lost_rows, "tables:chunks"),
                        (lost_edges, "graph:edges")):
        assert any(d.startswith(store) for d in compare_contents(first, lost)["differing"])
