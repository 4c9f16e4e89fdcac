"""The Dagster instance of a data directory, shared by `jarvis refresh`, `jarvis ui` and
`jarvis daemon`: runs, partitions and sensor cursors recorded by one are seen by the others,
so a daemon started after a refresh does not run every source again as new."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from jarvis_core.config import ConfigError, JarvisConfig

_SETTINGS = Path(__file__).with_name("dagster.yaml")


def dagster_home(config: JarvisConfig) -> Path:
    """$DAGSTER_HOME when set, else ``<data_dir>/dagster``, with the instance settings
    (telemetry off) installed on first use, and with ``instance.postgres_url`` set,
    Dagster's PostgreSQL storages named in them: `jarvis refresh`, `jarvis ui`, `jarvis
    daemon` and every run they launch read this folder's dagster.yaml."""
    home = Path(os.environ.get("DAGSTER_HOME") or config.data_dir / "dagster")
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copy(_SETTINGS, home / "dagster.yaml")
    if config.instance.postgres_url:
        _name_postgres_storage(home / "dagster.yaml", config.instance.postgres_url)
    return home


_STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage")
_POSTGRES_SETTING = "instance.postgres_url"


def _name_postgres_storage(settings_file: Path, url: str) -> None:
    """Dagster's stock ``storage: postgres:`` in the instance settings, in place of any
    storage they named; the server is reached first, so that a wrong URL fails here
    naming the setting, not in Dagster's connection retries."""
    import yaml

    _check_postgres(url)
    settings = yaml.safe_load(settings_file.read_text()) or {}
    storage = {"postgres": {"postgres_url": url}}
    if settings.get("storage") == storage and not set(settings) & set(_STORAGE_KEYS[1:]):
        return
    for key in _STORAGE_KEYS:
        settings.pop(key, None)
    settings_file.chmod(0o600)  # before the URL, which may hold a password, is written
    settings_file.write_text(yaml.safe_dump({**settings, "storage": storage}, sort_keys=False))


def _check_postgres(url: str) -> None:
    """Connect once to the server ``url`` names (5 s at most), or raise a ConfigError naming
    the setting and libpq's reason."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    try:
        engine = sqlalchemy.create_engine(url, poolclass=NullPool,
                                          connect_args={"connect_timeout": 5})
        with engine.connect():
            pass
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as exc:
        reason = getattr(exc, "orig", None) or exc
        raise ConfigError(f"{_POSTGRES_SETTING}: cannot reach the PostgreSQL server "
                          f"({str(reason).strip()})") from exc


class UnfitDagster(ValueError):
    """The installed dagster's private storage code is not what the fast storages override."""

    def __init__(self, changes: list[str]):
        import dagster

        super().__init__(
            "jarvis_pipeline/instance_storage.py overrides private methods of Dagster's SQLite "
            f"storages, and the installed dagster {dagster.__version__} is not what they were "
            f"written for ({'; '.join(changes)}): set instance.fast_storage: false in "
            "jarvis.yaml to record runs through Dagster's stock storages (slower: every event "
            "waits for the disk), or update the overrides to this dagster.")


def fast_storage_changes() -> list[str]:
    """How the installed dagster differs from what the fast storages were written for."""
    try:
        from jarvis_pipeline.instance_storage import dagster_changes
    except ImportError as exc:  # a private module or name moved
        return [f"the fast storages cannot be imported ({exc})"]
    return dagster_changes()


def project_instance(config: JarvisConfig):
    """The persistent instance of the data directory (dagster is imported here, not by the
    commands that do not run the pipeline): ``instance_at`` its Dagster home."""
    return instance_at(dagster_home(config), config.instance.fast_storage)


def instance_at(home: Path, fast_storage: bool = True):
    """The persistent instance of the Dagster home ``home`` (its dagster.yaml, if any, read).
    With ``fast_storage``, where its settings leave storage at Dagster's SQLite default, the
    same files are written through storages that keep their engines
    (``jarvis_pipeline.instance_storage``); without, the storages are Dagster's own, as
    ``DagsterInstance.get()`` makes them from the settings. Its runs' output is left to the
    process's own (``_TERMINAL_OUTPUT``)."""
    import dagster as dg
    import yaml

    settings_file = home / "dagster.yaml"
    settings = (yaml.safe_load(settings_file.read_text()) if settings_file.exists() else {}) or {}
    overrides = {}
    if fast_storage and not any(key in settings for key in _STORAGE_KEYS):
        changes = fast_storage_changes()
        if changes:
            raise UnfitDagster(changes)
        from jarvis_pipeline.instance_storage import storage_overrides

        overrides = storage_overrides(home)
    if "compute_logs" not in settings:
        overrides = {**overrides, "compute_logs": _TERMINAL_OUTPUT}
    # Dagster's public constructor of a persistent instance from a folder's dagster.yaml,
    # with overrides. Nothing of it is temporary when the folder is given.
    return dg.DagsterInstance.local_temp(str(home), overrides=overrides)


# The runs of a refresh execute in its own process, whose output is the terminal's (or the
# daemon's log): Dagster's default capture of it to files starts a `tail` and a Python
# watcher process per run. Its structured event log is kept as ever; `jarvis ui` and the
# daemon, which read dagster.yaml themselves, keep the default capture for the runs they
# launch, and a dagster.yaml naming its own `compute_logs` is followed.
_TERMINAL_OUTPUT = {"module": "dagster._core.storage.noop_compute_log_manager",
                    "class": "NoOpComputeLogManager"}


PROCESS_TAG = "jarvis/process"  # host:pid of the `jarvis refresh` that ran the run in-process


def process_tags() -> dict[str, str]:
    return {PROCESS_TAG: f"{socket.gethostname()}:{os.getpid()}"}


def _alive(process: str) -> bool:
    host, _, pid = process.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_abandoned_runs(instance) -> list[str]:
    """Runs of a `jarvis refresh` that was killed stay "started" and keep their concurrency
    slots, so the next run would wait for them forever: mark them failed and free their
    slots. Returns their run ids."""
    import dagster as dg

    in_flight = instance.get_runs(filters=dg.RunsFilter(statuses=[
        dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]))
    released = []
    for run in in_flight:
        process = run.tags.get(PROCESS_TAG)
        if process and not _alive(process):
            instance.report_run_failed(run, f"the jarvis process that ran it ({process}) ended "
                                            "without finishing it (killed?)")
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            released.append(run.run_id)
    return released
