"""A refresh killed with SIGKILL while embedding keeps what it embedded: the next refresh
frees what the dead run held, embeds only the missing chunks and ends consistent."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from jarvis_bench.synthetic_vault import write_vault
from jarvis_core.config import load_config
from jarvis_core.embedding_backends import HASHED_NGRAMS, choose_backend
from jarvis_core.stores.vectors.base import collection_name
from jarvis_core.stores.vectors.edge import EdgeVectorStore

JARVIS = Path(sys.executable).with_name("jarvis")
NOTES = 30


def _first_batch_written(stderr: Path, deadline: float) -> bool:
    while time.monotonic() < deadline:
        for line in stderr.read_text().splitlines():
            if " embeddings " in line and not line.split(" embeddings ")[1].startswith("0 "):
                return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_a_refresh_killed_while_embedding_resumes_where_it_stopped(tmp_path):
    write_vault(tmp_path / "vault", NOTES)
    config_file = tmp_path / "jarvis.yaml"
    config_file.write_text(yaml.safe_dump({
        "data_dir": "data", "vaults": {"generated": "vault"},
        # every vector really embedded, none from the cache; by the hashed stand-in, as what
        # is checked is which chunks are embedded again, not the model's vectors
        "embedding": {"cache": False, "backend": HASHED_NGRAMS}}))
    command = [str(JARVIS), "--config", str(config_file), "refresh", "--json"]
    stderr = tmp_path / "first.err"
    with stderr.open("w") as errors:
        first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            assert _first_batch_written(stderr, time.monotonic() + 240), stderr.read_text()
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.wait()

    config = load_config(config_file)
    model = config.embedding.model
    collection = collection_name(model, 384, choose_backend(config.embedding.backend).precision)
    with EdgeVectorStore(config.vectors_path, collection, 384, model) as store:
        kept = store.count("generated")
    assert kept > 0

    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    [source] = report["sources"]
    embeddings = source["layers"]["embeddings"]
    assert report["released_runs"]  # the dead run's slots were freed, nothing waited on them
    assert embeddings["reused"] == kept
    assert embeddings["embedded"] == embeddings["rows"] - kept
    snapshot = report["published"]["layers"]["serving_snapshot"]
    assert snapshot["vectors"] == snapshot["chunks"] == embeddings["rows"]
    assert snapshot["vectors_complete"] is True
