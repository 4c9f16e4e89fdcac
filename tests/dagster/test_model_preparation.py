"""The model files a first refresh needs, prepared beside it (jarvis_core/text/preparation.py):
when the cache needs them, that a refresh starts the preparation and waits for it, and that
processes exporting the query model at once export it once."""

import os
import sys
import threading
import time
from pathlib import Path

from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_core.settings import CACHE_ENV, EmbeddingSettings
from jarvis_core.text import export, preparation
from jarvis_core.text.export import FORMAT_VERSION, export_query_model
from jarvis_core.text.preparation import needs_preparation
from jarvis_pipeline import refresh
from jarvis_pipeline.refresh import run_refresh
from tests.dagster.sensor_helpers import make_vault
from tests.pipeline_helpers import write_config

MODEL = "all-MiniLM-L6-v2"


def test_only_a_writable_cache_without_the_conversion_or_the_export_needs_preparing(
        tmp_path, monkeypatch):
    seeded = Path(os.environ[CACHE_ENV])  # the session's: converted and exported
    settings = EmbeddingSettings()  # the default model; auto: OpenVINO on this CPU
    assert not needs_preparation(settings, seeded)
    assert needs_preparation(settings, tmp_path / "empty")
    assert not needs_preparation(EmbeddingSettings(backend=HASHED_NGRAMS), tmp_path / "empty")
    with monkeypatch.context() as read_only:  # root may write anywhere: access is faked
        read_only.setattr(preparation.os, "access", lambda path, mode: False)
        assert not needs_preparation(settings, tmp_path / "empty")
    for part in ("openvino", "query-model"):  # one of the two is not enough
        (tmp_path / part).mkdir()
        (tmp_path / part / part).symlink_to(seeded / part, target_is_directory=True)
        assert needs_preparation(settings, tmp_path / part)


def test_a_refresh_starts_the_preparation_and_waits_for_it(tmp_path, monkeypatch):
    prepared = tmp_path / "prepared"
    monkeypatch.setattr(preparation, "_lacking", lambda settings, cache_dir: (False, True))
    monkeypatch.setattr(preparation, "_command", lambda settings, cache_dir: [
        sys.executable, "-c",
        f"import pathlib, time; time.sleep(3); pathlib.Path({str(prepared)!r}).touch()"])
    config = write_config(tmp_path / "project", {"notes": make_vault(tmp_path / "vault")},
                          embedding={"backend": HASHED_NGRAMS})  # the refresh is not the point
    assert run_refresh(config)["ok"]
    assert prepared.exists()


def test_while_the_model_is_converted_the_embeddings_run_after_the_other_layers(
        tmp_path, monkeypatch):
    """They would wait for the conversion: the other layers of every source run meanwhile."""
    monkeypatch.setattr(preparation, "_lacking", lambda settings, cache_dir: (True, False))
    monkeypatch.setattr(preparation, "_command",
                        lambda settings, cache_dir: [sys.executable, "-c", "pass"])
    jobs = []
    run_source_job = refresh.run_source_job
    monkeypatch.setattr(refresh, "run_source_job", lambda *args: (
        jobs.append(args[3]) or run_source_job(*args)))
    config = write_config(tmp_path / "project", {"notes": make_vault(tmp_path / "vault")},
                          embedding={"backend": HASHED_NGRAMS})
    assert run_refresh(config)["ok"]
    assert jobs[1:] == ["index_sources", "embed_sources"]


def test_exports_started_together_export_once(tmp_path, monkeypatch):
    exported = []

    def slow_export(model, model_dir, key, signature, target):
        exported.append(model)
        time.sleep(0.5)  # long enough for the other to look meanwhile
        manifest = {"key": key, "format": FORMAT_VERSION, "files": {}, "dimension": 384,
                    "max_seq_length": 256, "exporter": {"method": "test"}}
        (target / export.MANIFEST_NAME).write_text(export.json.dumps(manifest))
        return manifest

    monkeypatch.setattr(export, "_export", slow_export)
    results = []
    exporters = [threading.Thread(target=lambda: results.append(
        export_query_model(MODEL, tmp_path / "query-model"))) for _ in range(2)]
    for exporter in exporters:
        exporter.start()
    for exporter in exporters:
        exporter.join()
    assert exported == [MODEL]
    assert sorted(result.reused for result in results) == [False, True]
