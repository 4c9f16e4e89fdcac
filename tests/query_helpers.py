"""Helpers for the query-side tests: a published version with its exported query encoder, the
modules a fresh `jarvis` process imports, and MCP sessions with a server over stdio."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from jarvis_core.config import JarvisConfig
from jarvis_core.settings import CACHE_ENV, EmbeddingSettings
from jarvis_core.stores import serving
from jarvis_core.stores.publish import place_query_model
from jarvis_core.text.query_model import prepare_query_model
from tests.pipeline_helpers import PROJECT_ROOT, copy_data, write_config

HEAVY_MODULES = ("torch", "transformers", "sentence_transformers", "dagster")
JARVIS = str(Path(sys.executable).with_name("jarvis"))
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@functools.cache
def exported_encoder() -> Path:
    """all-MiniLM-L6-v2 exported for the light query path where the pipeline exports it: in
    the session's model cache ($JARVIS_CACHE_DIR), so it is made once per test run (or
    reused from the project's cache, while its key matches)."""
    exported, why_not = prepare_query_model(EmbeddingSettings(model=MODEL),
                                            Path(os.environ[CACHE_ENV]))
    assert exported is not None, why_not
    return exported


def publish_encoder(data_dir: Path) -> serving.PublishedVersion:
    """The current version of ``data_dir`` with the exported encoder in it, placed as the
    pipeline places it; a version that has one already (the pipeline publishes it when the
    model can be exported) is left as it is."""
    version = serving.current_version(data_dir)
    if version.manifest.get("encoder"):
        return version
    manifest = {**version.manifest,
                "encoder": place_query_model(exported_encoder(), version.path)}
    (version.path / serving.MANIFEST_FILE).write_text(json.dumps(manifest, indent=2))
    return serving.current_version(data_dir)


def light_copy(published: JarvisConfig, directory: Path) -> JarvisConfig:
    """A configuration over a copy of ``published``'s data whose version holds the exported
    encoder (the light query path), its vaults unchanged."""
    copy_data(published.data_dir, directory / "data")
    config = write_config(directory, {name: vault.path
                                      for name, vault in published.sources_of("vault").items()})
    publish_encoder(config.data_dir)
    return config


_LIST_MODULES = """
import atexit, json, sys
atexit.register(lambda: print("MODULES " + json.dumps(sorted(sys.modules)), file=sys.stderr))
from jarvis_cli.main import cli
cli(sys.argv[1:], prog_name="jarvis")
"""


def jarvis_modules(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `jarvis ARGS` in a fresh process; its result and the modules it imported."""
    completed = subprocess.run([sys.executable, "-c", _LIST_MODULES, *args], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=300,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"})
    listed = [line for line in completed.stderr.splitlines() if line.startswith("MODULES ")]
    assert listed, completed.stderr
    return completed, set(json.loads(listed[-1].removeprefix("MODULES ")))


def heavy(modules: set[str]) -> list[str]:
    """The heavy packages among ``modules`` (what the light query path must not load)."""
    return [name for name in HEAVY_MODULES if name in modules]


SAMPLE_MAIL = PROJECT_ROOT / "sample_data" / "mail" / "lumen.mbox"
SAMPLE_CONFLUENCE = PROJECT_ROOT / "sample_data" / "confluence"
DEDUPE_THREAD = "CAK7wq2dedupe01.1009@mail.lumen.example"
INGEST_PAGE = "65541"
INGEST_TITLE = "Ingest: idempotency and the dedupe key"


def documents_config(root: Path) -> JarvisConfig:
    """A small vault beside the sample mailbox and Confluence space, stores under ``root``:
    every kind read-note and the source-type filters know, in a few seconds."""
    vault = root / "vault"
    vault.mkdir(parents=True)
    (vault / "Dedupe.md").write_text(
        "# Dedupe notes\n\nThe dedupe key decision was argued on lumen-dev; see the ADR page "
        "and LUM-4.\n")
    (vault / "Sleep.md").write_text("# Sleep\n\nEight hours, a dark room and no screens.\n")
    return _documents_project(root, vault)


def documents_copy(published: JarvisConfig, root: Path) -> JarvisConfig:
    """A private copy under ``root`` of a published ``documents_config`` project: its vault
    and its data copied, free to edit and refresh (a refresh runs only what was changed)."""
    vault = root / "vault"
    shutil.copytree(published.sources["notes"].path, vault, symlinks=True)
    config = _documents_project(root, vault)
    copy_data(published.data_dir, config.data_dir)
    return config


def _documents_project(root: Path, vault: Path) -> JarvisConfig:
    return write_config(root / "project", {"notes": vault},
                        mail={"lumen-mail": str(SAMPLE_MAIL)},
                        confluence={"lumen-wiki": str(SAMPLE_CONFLUENCE)})


def publish_partially(config: JarvisConfig, embedded: tuple[str, ...] = ()) -> None:
    """What a large first refresh publishes before its embeddings are done, made with the
    real pipeline: every source ingested (its kind's ingest job) and indexed (text, keyword
    index, graph, analytics), only the ``embedded`` sources' embeddings made, then one
    publish."""
    from jarvis_definitions import build_definitions
    from jarvis_pipeline.instance import project_instance
    from jarvis_pipeline.refresh import register_sources, run_source_job
    from jarvis_resources.tables import tables_held_open

    definitions = build_definitions(config)
    kinds = {source: config.kind_of(source) for source in config.source_names}
    with project_instance(config) as instance, tables_held_open(config):
        register_sources(instance, kinds)
        for source, kind in kinds.items():
            for job in (kind.ingest_job, "index_sources"):
                entry = run_source_job(config, definitions, instance, job, source)
                assert entry["ok"], entry
        for source in embedded:
            entry = run_source_job(config, definitions, instance, "embed_sources", source)
            assert entry["ok"], entry
        published = definitions.resolve_job_def("publish_serving").execute_in_process(
            instance=instance, raise_on_error=False)
        assert published.success


@contextlib.asynccontextmanager
async def served(command: list[str], log: Path):
    """An initialised client session (the MCP SDK's) with the server ``command`` starts over
    stdio, its stderr in ``log``. The server imports what the tests import (their
    PYTHONPATH, e.g. a git worktree's)."""
    env = {"HF_HUB_OFFLINE": "1"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(PROJECT_ROOT),
                                   env=env)
    with log.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=300) as session:
                await session.initialize()
                yield session


async def _converse(command: list[str], calls: dict, log: Path):
    async with served(command, log) as session:
        tools = (await session.list_tools()).tools
        results = {}
        for label, call in calls.items():
            if callable(call):  # something to do between two calls, e.g. a refresh
                results[label] = await anyio.to_thread.run_sync(call)
            else:
                results[label] = await session.call_tool(*call)
    return {tool.name: tool for tool in tools}, results


def converse(command: list[str], calls: dict, log: Path):
    """Start the server, list its tools, make ``calls`` (label -> (tool, arguments), or a
    function to run in between) in one session, and return (tools by name, results by
    label)."""
    return anyio.run(_converse, command, calls, log)
