"""Shared fixtures: temporary vaults and configurations on disk, never the user's data."""

import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml

from jarvis_assets.definitions import build_definitions
from jarvis_assets.jobs import refresh_sources_job
from jarvis_assets.partitions import source_partitions
from jarvis_core.config import JarvisConfig, load_config
from jarvis_query.status import read_only

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_VAULT = PROJECT_ROOT / "sample_data" / "vault"


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch):
    """Tests never read the developer's JARVIS_* settings or write outside tmp dirs."""
    for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def write_config(directory: Path, vaults: dict[str, Path], **settings) -> JarvisConfig:
    """A jarvis.yaml in ``directory`` naming ``vaults``, with stores under directory/data."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "jarvis.yaml"
    body = {"data_dir": "data", "vaults": {name: str(p) for name, p in vaults.items()},
            **settings}
    path.write_text(yaml.safe_dump(body))
    return load_config(path)


@pytest.fixture
def sample_vault(tmp_path) -> Path:
    """A private copy of the shipped sample vault, safe to edit."""
    target = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, target, symlinks=True)
    return target


@pytest.fixture
def sample_config(tmp_path, sample_vault) -> JarvisConfig:
    return write_config(tmp_path / "project", {"sample": sample_vault})


def run(config, source: str, instance: dg.DagsterInstance,
        raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    if source not in instance.get_dynamic_partitions(source_partitions.name):
        instance.add_dynamic_partitions(source_partitions.name, [source])
    job = build_definitions(config).resolve_job_def(refresh_sources_job.name)
    return job.execute_in_process(partition_key=source, instance=instance,
                                  raise_on_error=raise_on_error)


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    [materialization] = result.asset_materializations_for_node(asset)
    return {key: value.value for key, value in materialization.metadata.items()}


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {evaluation.check_name: evaluation
            for evaluation in result.get_asset_check_evaluations()}


def rows(config, sql: str, params=None) -> list[tuple]:
    with read_only(config.duckdb_path) as conn:
        return conn.execute(sql, params or []).fetchall()


@pytest.fixture(scope="session")
def published_sample(tmp_path_factory) -> JarvisConfig:
    """The sample vault refreshed and published once per session, for tests that only query
    it (tests that edit a vault make their own)."""
    from jarvis_cli.refresh import run_refresh

    with pytest.MonkeyPatch.context() as patch:
        for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
            patch.delenv(name, raising=False)
        patch.setenv("HF_HUB_OFFLINE", "1")
        root = tmp_path_factory.mktemp("published-sample")
        shutil.copytree(SAMPLE_VAULT, root / "vault", symlinks=True)
        config = write_config(root / "project", {"sample": root / "vault"})
        report = run_refresh(config)
    assert report["ok"], report
    return config
