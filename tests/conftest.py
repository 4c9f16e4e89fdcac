"""Shared fixtures: temporary vaults and configurations on disk, never the user's data.
Helpers live in tests/pipeline_helpers.py."""

import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from jarvis_core.config import JarvisConfig, load_config
from jarvis_core.garbage_collection import collect_less_often
from jarvis_core.settings import CACHE_ENV, MODEL_CACHE_PARTS
from tests import postgres_server as postgres_server_module
from tests.pipeline_helpers import (
    PROJECT_ROOT,
    SAMPLE_VAULT,
    copy_data,
    private_copy,
    write_config,
)

# What `jarvis refresh` on the sample (README command 1) left: the shipped jarvis.yaml's data
# directory, and in it what it converted, exported and embedded.
PROJECT_DATA = PROJECT_ROOT / yaml.safe_load((PROJECT_ROOT / "jarvis.yaml").read_text())[
    "data_dir"]
PROJECT_MODEL_CACHE = PROJECT_DATA / "cache"


# The tests' temporary folders (pytest's and those the code under test makes) go to the
# RAM-backed /dev/shm where it and the memory have room for a run, else where TMPDIR or the
# system says. The stores create, fsync and delete many small files there: on this
# machine's ext4 that is system time tmpfs does not spend (tests/dagster on two workers,
# alternate runs: 195-207 CPU-s and 129-138 s of wall against 181-184 and 114-118). A
# run holds up to 8.4 GB there at once (module fixtures' folders stay until it ends).
RAM_TEMP = Path("/dev/shm")
RAM_TEMP_ROOM = 16 * 2**30  # bytes free there and memory available, or the usual folder


def _memory_available() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            kilobytes = next(line.split()[1] for line in meminfo
                             if line.startswith("MemAvailable:"))
        return int(kilobytes) * 1024
    except (OSError, StopIteration, ValueError):
        return 0


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Before the workers start (they, and every process the tests start, inherit TMPDIR);
    a TMPDIR or --basetemp given is kept. Each process collects garbage as the `jarvis`
    command does: the tests run refreshes and queries in process."""
    collect_less_often()
    if "TMPDIR" in os.environ or config.option.basetemp or hasattr(config, "workerinput"):
        return
    try:
        room = min(shutil.disk_usage(RAM_TEMP).free, _memory_available())
    except OSError:
        return
    if room >= RAM_TEMP_ROOM and os.access(RAM_TEMP, os.W_OK):
        os.environ["TMPDIR"] = str(RAM_TEMP)
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again


@pytest.fixture(scope="session", autouse=True)
def _shared_model_cache(tmp_path_factory):
    """One cache of converted and exported models and of vectors already computed for the
    whole session (and its subprocesses): models are converted once, not once per test's
    data directory. It starts as a copy of the project's own cache when there is one
    (entries are keyed by the model's files and the converters' versions, vectors by text
    and model, so a stale one is never used); tests never write to the project's. Tests
    of embedding itself turn the vector cache off (``embedding.cache: false``)."""
    cache = _shared_root(tmp_path_factory) / "model-cache"  # exports are atomic
    cache.mkdir(exist_ok=True)
    for part in MODEL_CACHE_PARTS:
        _seed(PROJECT_MODEL_CACHE / part, cache / part)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(cache))
        yield


def _seed(source, target) -> None:
    """Copy ``source`` to ``target`` unless ``target`` exists (a copy, not links: versions
    link their files to the cache, and a test that damages one must not reach the project);
    the copy appears whole or not at all, whichever worker makes it."""
    if target.exists() or not source.is_dir():
        return
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.copytree(source, staging, symlinks=True)
    try:
        os.replace(staging, target)
    except OSError:  # another worker put its copy in place first
        shutil.rmtree(staging, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch):
    """Tests never read the developer's JARVIS_* settings or write outside tmp dirs."""
    for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def sample_vault(tmp_path):
    """A private copy of the shipped sample vault, safe to edit."""
    target = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, target, symlinks=True)
    return target


@pytest.fixture
def sample_config(tmp_path, sample_vault) -> JarvisConfig:
    return write_config(tmp_path / "project", {"sample": sample_vault})


@pytest.fixture(scope="session")
def published_sample(tmp_path_factory) -> JarvisConfig:
    """The sample vault refreshed and published once per test run, shared by the workers,
    for tests that only query it (tests that edit a vault or refresh copy it first:
    ``private_copy``)."""
    def lay_out(root):
        shutil.copytree(SAMPLE_VAULT, root / "vault", symlinks=True)
        return write_config(root / "project", {"sample": root / "vault"})

    return _published_once(tmp_path_factory, "published-sample", lay_out)


@pytest.fixture
def sample_copy(published_sample, tmp_path) -> JarvisConfig:
    """A private copy of the published sample, free to edit and refresh (a copy, not a
    refresh: its vault elsewhere holds what is published, so its next refresh runs only
    what a test changed)."""
    return private_copy(published_sample, tmp_path)


@pytest.fixture(scope="session")
def published_documents(tmp_path_factory) -> JarvisConfig:
    """``documents_config`` (a small vault beside the sample mailbox and Confluence space)
    refreshed and published once per test run, shared by the workers, for tests that only
    query it (a test that edits or refreshes it copies it first: ``documents_copy``)."""
    from tests.query_helpers import documents_config  # MCP's client: not for unit tests

    return _published_once(tmp_path_factory, "published-documents", documents_config)


@pytest.fixture(scope="session")
def published_project(tmp_path_factory) -> JarvisConfig:
    """The project folder as README command 1 leaves it, refreshed and published once per
    test run and shared by the workers: the shipped jarvis.yaml (all five kinds of source)
    and workspace.yaml, the sample data and ``.venv`` (links to this checkout's and to this
    interpreter's), the stores in ``.jarvis``. Tests query it and run the documented
    commands in it (a refresh with nothing to do, tokens, the access log); a test that
    changes a source or what is published must not use it. Where README command 1 ran in
    this checkout, the project starts from a copy of its data directory (less the model
    cache: the session's is ``_shared_model_cache``), as a project folder moved elsewhere
    would: the refresh here then runs only what differs, nothing in CI (10 CPU-s less)."""
    def lay_out(root):
        project = root / "project"
        project.mkdir(parents=True)
        for name in ("jarvis.yaml", "workspace.yaml"):
            shutil.copy(PROJECT_ROOT / name, project / name)
        (project / "sample_data").symlink_to(PROJECT_ROOT / "sample_data")
        (project / ".venv").symlink_to(Path(sys.prefix))
        config = load_config(project / "jarvis.yaml")
        if (PROJECT_DATA / "serving").is_dir():
            copy_data(PROJECT_DATA, config.data_dir, leave=("cache",))
        return config

    return _published_once(tmp_path_factory, "published-project", lay_out)


def _published_once(tmp_path_factory, name: str, lay_out) -> JarvisConfig:
    """The configuration ``lay_out(root)`` writes under ``root/project``, refreshed and
    published by the first worker that needs it; the others wait for it."""
    from jarvis_pipeline.refresh import run_refresh

    root = _shared_root(tmp_path_factory) / name
    with _held(root.with_name(f"{root.name}.lock")):
        if (root / "published").exists():
            return load_config(root / "project" / "jarvis.yaml")
        shutil.rmtree(root, ignore_errors=True)  # a worker that failed to publish it
        with pytest.MonkeyPatch.context() as patch:
            for variable in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
                patch.delenv(variable, raising=False)
            patch.setenv("HF_HUB_OFFLINE", "1")
            config = lay_out(root)
            report = run_refresh(config)
        assert report["ok"], report
        (root / "published").touch()
    return config


def _shared_root(tmp_path_factory):
    """The session's temporary folder, or under xdist the one above every worker's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _held(lock_path):
    """An exclusive lock on ``lock_path`` across the worker processes."""
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


_TIER_ORDER = ("e2e", "dagster", "stores", "unit")
# Files far longer than most (about 40 s of CPU: refreshes in processes of their own), ahead of
# every tier, so that no worker is left alone with one at the end.
_LONGEST_FILES = ("tests/dagster/test_parallel_sources.py",)


def pytest_collection_modifyitems(items):
    """The longest files first, then the slowest tier: the workers start on the long files
    and end on the milliseconds-long ones, so none is left alone with a long file at the end."""
    def tier(item) -> int:
        parts = item.path.relative_to(item.config.rootpath).parts
        if "/".join(parts) in _LONGEST_FILES:
            return -1
        return _TIER_ORDER.index(parts[1]) if len(parts) > 2 and parts[1] in _TIER_ORDER else 0

    items.sort(key=tier)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the sentence-transformers files as one unit
    (tests/scheduling.py); any other mode is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.scheduling import FileScheduling

    return FileScheduling(config, log)


@pytest.fixture(scope="session")
def kb(published_sample):
    """One ``KnowledgeBase`` over the published sample, for tests that only query it."""
    from jarvis_query.knowledge_base import KnowledgeBase

    knowledge_base = KnowledgeBase(published_sample)
    yield knowledge_base
    knowledge_base.close()


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL server (tests/postgres_server.py), started for the tests that
    ask for it; they are skipped, with the reason, where no PostgreSQL is installed."""
    reason = postgres_server_module.unavailable_reason()
    if reason:
        pytest.skip(f"the PostgreSQL leg is skipped: {reason}")
    with postgres_server_module.throwaway_server() as url:
        yield url
