"""Helpers for tests that run the pipeline: configurations on disk, a per-source refresh run,
and what a run reported."""

import os
import shutil
from pathlib import Path

import dagster as dg
import yaml

from jarvis_assets.jobs import refresh_sources_job
from jarvis_core.audit import AUDIT_FILE
from jarvis_core.config import JarvisConfig, load_config
from jarvis_core.sources import registry
from jarvis_core.stores.connections import read_only
from jarvis_core.stores.vectors.edge_files import copy_file
from jarvis_definitions import build_definitions
from jarvis_pipeline.instance import dagster_home
from jarvis_pipeline.refresh import register_sources
from jarvis_resources.tables import tables_held_open

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_VAULT = PROJECT_ROOT / "sample_data" / "vault"


def write_config(directory: Path, vaults: dict[str, Path], **settings) -> JarvisConfig:
    """A jarvis.yaml in ``directory`` naming ``vaults``, with stores under directory/data."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "jarvis.yaml"
    body = {"data_dir": "data", "vaults": {name: str(p) for name, p in vaults.items()},
            **settings}
    path.write_text(yaml.safe_dump(body))
    return load_config(path)


def name_a_storage(config: JarvisConfig, base_dir: Path) -> None:
    """The project instance's settings name a storage of their own: SQLite under
    ``base_dir``."""
    settings_file = dagster_home(config) / "dagster.yaml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["storage"] = {"sqlite": {"base_dir": str(base_dir)}}
    settings_file.write_text(yaml.safe_dump(settings))


def private_copy(published: JarvisConfig, directory: Path) -> JarvisConfig:
    """A refreshed one-vault project (``published_sample``, say) copied under ``directory``,
    its vault and its data, configured as ``write_config`` makes it: for a module that
    changes the vault or refreshes it, instead of refreshing the vault once more."""
    [(name, source)] = published.sources.items()
    vault = directory / "vault"
    shutil.copytree(source.path, vault, symlinks=True)
    config = write_config(directory / "project", {name: vault})
    copy_data(published.data_dir, config.data_dir)
    return config


def data_copy(config: JarvisConfig, directory: Path) -> JarvisConfig:
    """``config`` with its sources where they are and a copy of its data (``copy_data``, the
    Dagster instance included) under ``directory``: a state a module fixture made once, for a
    test that takes it further."""
    body = yaml.safe_load(config.config_path.read_text())
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "jarvis.yaml").write_text(yaml.safe_dump({**body, "data_dir": "data"}))
    copy_data(config.data_dir, directory / "data")
    return load_config(directory / "jarvis.yaml")


_WRITTEN_MEANWHILE = shutil.ignore_patterns(".read-copies", f"{AUDIT_FILE}*")


def copy_data(data_dir: Path, target: Path, leave: tuple[str, ...] = ()) -> None:
    """A data directory copied without what other processes (the other test workers) may be
    writing meanwhile: the readers' vector copies and the access log of their queries; nor
    its folders named in ``leave``. Holes are kept and files a version links to the model
    cache are linked again where the copy is on the same file system: a plain copy writes
    out Edge's preallocated files and the encoder (the sample's data, 19 MB on disk, took
    592 MB per copy, 15 GB per test run)."""
    def ignored(folder: str, names: list[str]) -> set[str]:
        left = set(leave) & set(names) if Path(folder) == data_dir else set()
        return _WRITTEN_MEANWHILE(folder, names) | left

    shutil.copytree(data_dir, target, symlinks=True, copy_function=_copy_or_link,
                    ignore=ignored)


def _copy_or_link(source: str, target: str) -> None:
    if os.stat(source).st_nlink > 1:  # linked to the model cache, which nobody writes
        try:
            os.link(source, target)
            return
        except OSError:  # another file system: the checkout's data, say
            pass
    copy_file(source, target)


class SourceRun:
    """A source's ingest run and the run of its later layers (two runs: the raw asset is
    partitioned by its kind's sources), read as one result."""

    def __init__(self, *results: dg.ExecuteInProcessResult) -> None:
        self.results = results

    @property
    def success(self) -> bool:
        return all(result.success for result in self.results)

    def asset_materializations_for_node(self, node: str) -> list:
        found = []
        for result in self.results:
            if node in {n.name for n in result.job_def.graph.node_defs}:
                found += result.asset_materializations_for_node(node)
        return found

    def get_asset_check_evaluations(self) -> list:
        return [e for result in self.results for e in result.get_asset_check_evaluations()]

    def get_asset_materialization_events(self) -> list:
        return [e for result in self.results for e in result.get_asset_materialization_events()]

    def get_step_failure_events(self) -> list:
        return [e for result in self.results for e in result.get_step_failure_events()]

    @property
    def all_events(self) -> list:
        return [e for result in self.results for e in result.all_events]


def run(config, source: str, instance: dg.DagsterInstance,
        raise_on_error: bool = True) -> SourceRun:
    """The ingestion of one source, then its later layers, as `jarvis refresh` runs them
    (the tables file held open meanwhile, so the steps' connections are cheap)."""
    kind = config.kind_of(source) or next(
        kind for kind in registry.kinds()
        if source in instance.get_dynamic_partitions(kind.partitions))
    register_sources(instance, {source: kind})
    definitions = build_definitions(config)
    with tables_held_open(config):
        ingested = definitions.resolve_job_def(kind.ingest_job).execute_in_process(
            partition_key=source, instance=instance, raise_on_error=raise_on_error)
        if not ingested.success:
            return SourceRun(ingested)
        return SourceRun(ingested, definitions.resolve_job_def(
            refresh_sources_job.name).execute_in_process(
            partition_key=source, instance=instance, raise_on_error=raise_on_error))


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    [materialization] = result.asset_materializations_for_node(asset)
    return {key: value.value for key, value in materialization.metadata.items()}


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {evaluation.check_name: evaluation
            for evaluation in result.get_asset_check_evaluations()}


def report_check(checks: list[dict], name: str, asset: str | None = None) -> dict:
    """The one evaluation of check ``name`` (of ``asset``, when given) among a refresh
    report's ``checks``: a check that did not run fails the test instead of passing it, as
    ``all(...)`` over the matching evaluations would."""
    found = [c for c in checks if c["check"] == name and asset in (None, c["asset"])]
    assert len(found) == 1, f"check {name!r} ran {len(found)} times: {checks}"
    return found[0]


def rows(config, sql: str, params=None) -> list[tuple]:
    with read_only(config.duckdb_path) as conn:
        return conn.execute(sql, params or []).fetchall()
