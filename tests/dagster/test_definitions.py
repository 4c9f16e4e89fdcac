"""The definitions load fast, and the webserver serves the asset graph from workspace.yaml."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import dagster as dg
import pytest

from jarvis_core.garbage_collection import YOUNG_COLLECTION_ALLOCATIONS
from tests.pipeline_helpers import PROJECT_ROOT

_ASSET_GRAPH_QUERY = """
{ assetNodes { assetKey { path } description groupName
               assetChecksOrError { ... on AssetChecks { checks { name blocking } } } } }
"""


_LOAD = """
import gc, json, sys
import jarvis_definitions
after_import = sorted(sys.modules)
definitions = jarvis_definitions.defs()
print(json.dumps({"after_import": after_import, "after_load": sorted(sys.modules),
                  "assets": len(definitions.resolve_asset_graph().get_all_asset_keys()),
                  "young_collection": gc.get_threshold()[0]}))
"""


def test_importing_the_entry_point_does_nothing_and_loading_stays_light(sample_config,
                                                                        tmp_path):
    """Importing creates no file or folder and imports no project package; building the
    definitions reads the configuration but imports no model or store library, and has the
    process collect garbage as `jarvis` does (Dagster's processes for Jarvis's runs)."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    env = {**os.environ, "JARVIS_CONFIG": str(sample_config.config_path),
           "PYTHONPATH": str(PROJECT_ROOT)}
    result = subprocess.run([sys.executable, "-c", _LOAD], cwd=workdir, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert list(workdir.iterdir()) == []
    assert not sample_config.data_dir.exists()
    assert not {"jarvis_assets", "jarvis_core.config"} & set(loaded["after_import"])
    assert loaded["assets"] >= 10
    heavy = {"torch", "sentence_transformers", "transformers", "qdrant_edge", "tantivy",
             "neo4j", "igraph", "pygal"}
    assert not heavy & set(loaded["after_load"])
    assert loaded["young_collection"] == YOUNG_COLLECTION_ALLOCATIONS


def test_definitions_validate_and_every_sensor_says_what_it_does(sample_config):
    from jarvis_definitions import build_definitions

    definitions = build_definitions(sample_config)
    dg.Definitions.validate_loadable(definitions)
    assert {sensor.name: bool(sensor.description) for sensor in definitions.sensors} == {
        sensor.name: True for sensor in definitions.sensors}
    assert {"source_partitions_sensor", "vault_changes_sensor", "run_failure_notices"} <= {
        sensor.name for sensor in definitions.sensors}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


@pytest.mark.slow
def test_webserver_serves_the_asset_graph_from_workspace_yaml(tmp_path, sample_config):
    port = _free_port()
    env = {**os.environ, "JARVIS_CONFIG": str(sample_config.config_path),
           "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    (tmp_path / "dagster_home").mkdir()
    server = subprocess.Popen(
        [sys.executable, "-m", "dagster_webserver", "-w", "workspace.yaml", "-h", "127.0.0.1",
         "-p", str(port)], cwd=PROJECT_ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        nodes = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                nodes = _graphql(port, _ASSET_GRAPH_QUERY)["data"]["assetNodes"]
                if nodes:
                    break
            except (OSError, KeyError, TypeError):
                pass
            time.sleep(1)
        assert nodes, f"webserver did not serve the asset graph: {server.poll()}"
    finally:
        server.terminate()
        server.wait(timeout=30)
    by_key = {"/".join(node["assetKey"]["path"]): node for node in nodes}
    assert {"raw_notes", "chunks"} <= set(by_key)
    assert by_key["raw_notes"]["groupName"] == "sources"
    assert all(node["description"] for node in by_key.values())
    check_names = {check["name"] for check in by_key["chunks"]["assetChecksOrError"]["checks"]}
    assert {"every_document_has_chunks", "chunks_within_token_limit"} <= check_names


def test_shipped_workspace_names_the_entry_point():
    text = (PROJECT_ROOT / "workspace.yaml").read_text()
    assert "jarvis_definitions" in text
    assert "[tool.dagster]" not in (PROJECT_ROOT / "pyproject.toml").read_text()

