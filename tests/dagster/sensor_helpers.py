"""Helpers for the sensor tests: small sources on disk, a serving version published by hand
(what a refresh would record for them, without running one), the sensors as the definitions
make them (one change sensor per kind, the source partitions sensor), sources registered in
their partitions, and sensor ticks against an ephemeral Dagster instance as the daemon
makes them."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import duckdb
import yaml

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_assets.sources import ingest_job
from jarvis_core.config import JarvisConfig, load_config
from jarvis_core.sources import registry
from jarvis_core.sources.tickets.export import export_file_hashes
from jarvis_core.sources.vault.scan import scan_existing_vault
from jarvis_core.stores import serving, tables
from jarvis_resources import JarvisConfigResource
from sensors.source_changes import change_sensor
from sensors.source_partitions import source_partitions_sensor

# The sensors as build_definitions makes them: each kind's change sensor requesting its
# ingest job, and the partitions sensor requesting any kind's.
INGEST_JOBS = {kind.name: ingest_job(kind) for kind in registry.kinds()}
CHANGE_SENSORS = {kind.name: change_sensor(kind, INGEST_JOBS[kind.name])
                  for kind in registry.kinds()}
PARTITIONS_SENSOR = source_partitions_sensor(registry.kinds(), list(INGEST_JOBS.values()))

NOTE = "Inbox/Quick Capture.md"
VAULT_FILES = {
    NOTE: "# Quick Capture\n\nBuy a reed switch for the greenhouse logger.\n",
    "Projects/Greenhouse.md": "# Greenhouse\n\nSee [[Quick Capture]] and ![[wiring.csv]].\n",
    "Projects/Empty.md": "",
    "Attachments/sensor-calibration.csv": "raw,celsius\n1,20\n",
}
SAMPLE_GITHUB = Path(__file__).resolve().parents[2] / "sample_data" / "tickets" / "github"


def register(instance: dg.DagsterInstance, kind: str, *names: str) -> None:
    """``names`` registered as sources of ``kind``: partitions of the layers after ingestion
    and of the kind's raw asset, as the partitions sensor leaves them."""
    instance.add_dynamic_partitions(source_partitions.name, list(names))
    instance.add_dynamic_partitions(kind_partitions(registry.kind(kind)).name, list(names))


def write_config(directory: Path, vaults: dict[str, Path], **settings) -> JarvisConfig:
    """A jarvis.yaml in ``directory`` naming ``vaults`` (and any other section), with the
    stores under directory/data."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "jarvis.yaml"
    body = {"data_dir": "data", "vaults": {name: str(p) for name, p in vaults.items()},
            **settings}
    path.write_text(yaml.safe_dump(body))
    return load_config(path)


def make_vault(root: Path) -> Path:
    for relative, text in VAULT_FILES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dana Kim", "GIT_AUTHOR_EMAIL": "dana@example.com",
           "GIT_COMMITTER_NAME": "Dana Kim", "GIT_COMMITTER_EMAIL": "dana@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", f"Add {name}")
    return git(repo, "rev-parse", "HEAD")


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    commit(root, "README.md", "# Code\n")
    return root


def make_export(root: Path) -> Path:
    """A copy of the shipped GitHub issues export (an issues file and a comments file)."""
    shutil.copytree(SAMPLE_GITHUB, root)
    return root


def _vault_rows(source: str, root: Path) -> dict[str, list[dict]]:
    """The rows raw_notes keeps for change detection: size, mtime and sha256 of each note,
    and the attachments' paths."""
    scan = scan_existing_vault(root)
    return {
        "notes": [{"source": source, "path": f.path, "size_bytes": f.size_bytes,
                   "mtime_ns": f.mtime_ns,
                   "content_hash": hashlib.sha256(f.absolute_path.read_bytes()).hexdigest()}
                  for f in scan.notes],
        "attachments": [{"source": source, "path": f.path, "size_bytes": f.size_bytes,
                         "mtime_ns": f.mtime_ns, "extension": Path(f.path).suffix}
                        for f in scan.attachments],
    }


def publish(config: JarvisConfig, *, skip: tuple[str, ...] = ()) -> Path:
    """A serving version holding what a refresh of every configured source (but ``skip``)
    records for change detection: vault notes and attachments, repository heads, export
    file hashes (with the settings row raw_tickets keeps under the empty path). Returns its
    tables file."""
    rows: dict[str, list[dict]] = {"notes": [], "attachments": [], "repo_state": [],
                                   "ticket_files": []}
    for source, vault in config.sources_of("vault").items():
        if source not in skip:
            for table, found in _vault_rows(source, vault.path).items():
                rows[table] += found
    for source, repo in config.sources_of("repo").items():
        if source not in skip:
            rows["repo_state"].append({"source": source, "branch": repo.branch,
                                       "head": git(repo.path, "rev-parse", repo.branch)})
    for source, export in config.sources_of("tickets").items():
        if source not in skip:
            rows["ticket_files"] += [{"source": source, "path": path, "file_hash": digest}
                                     for path, digest in export_file_hashes(export.path).items()]
            rows["ticket_files"].append({"source": source, "path": "", "file_hash": "settings"})
    name, staging = serving.begin_version(config.data_dir)
    with duckdb.connect() as conn:  # the working database, in memory
        tables.ensure_schema(conn, registry.declared_tables())
        for table, table_rows in rows.items():
            for row in table_rows:
                conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES "
                             f"({', '.join('?' * len(row))})", list(row.values()))
        serving.copy_tables(conn, staging, registry.published_tables())
    return serving.commit_version(config.data_dir, name, staging, {}).tables_path


def tick(sensor: dg.SensorDefinition, config: JarvisConfig, instance: dg.DagsterInstance,
         cursor: str | None = None) -> dg.SensorResult:
    """One evaluation of ``sensor`` as the daemon makes it."""
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor,
        resources={"jarvis": JarvisConfigResource(config_file=str(config.config_path))})
    return sensor(context)


def apply(result: dg.SensorResult, instance: dg.DagsterInstance) -> None:
    """What the daemon does with a tick's partition requests."""
    for request in result.dynamic_partitions_requests:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


@dg.op
def _requested_work() -> None:
    """Stands for the refresh a request starts: the tests need its run record, not its work."""


@dg.job
def requested_run():
    _requested_work()


def record_run(instance: dg.DagsterInstance, request: dg.RunRequest,
               status: dg.DagsterRunStatus = dg.DagsterRunStatus.NOT_STARTED) -> dg.DagsterRun:
    """The run record the daemon creates for a run request (its tags and partition), in
    ``status``; nothing is executed."""
    return instance.create_run_for_job(
        requested_run, status=status,
        tags={**request.tags, "dagster/partition": request.partition_key})
