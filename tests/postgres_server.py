"""A throwaway PostgreSQL server from the machine's own packages, for the tests of the
instance on PostgreSQL: ``initdb`` and ``pg_ctl`` into a temporary folder, listening on a
Unix socket only, fsync off, stopped and removed at the end. Root cannot run ``initdb``, so
as root the server runs as the ``postgres`` user."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy
from sqlalchemy.pool import NullPool

SERVER_USER = "postgres"


def postgres_binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on PATH, else Debian's newest
    /usr/lib/postgresql/<version>/bin; None when there is none."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda path: int(Path(path).parts[-3]))
    return Path(found[-1]).parent if found else None


def unavailable_reason() -> str | None:
    """Why no throwaway server can start here, or None."""
    if postgres_binaries() is None:
        return "no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and no {SERVER_USER!r} user to run initdb as"
    return None


def _as_server_user(*command: str) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *command] if os.geteuid() == 0 else list(command)


@contextmanager
def throwaway_server() -> Iterator[str]:
    """A running server for the session; yields the URL of its ``postgres`` database."""
    binaries = postgres_binaries()
    folder = Path(tempfile.mkdtemp(prefix="jarvis-postgres-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    data, log = folder / "data", folder / "server.log"
    user = SERVER_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    subprocess.run(_as_server_user(str(binaries / "initdb"), "-D", str(data), "-U", user,
                                   "--auth=trust", "--no-sync", "--no-instructions",
                                   "-E", "UTF8"), check=True, capture_output=True)
    try:
        subprocess.run(_as_server_user(
            str(binaries / "pg_ctl"), "start", "-w", "-D", str(data), "-l", str(log), "-o",
            f"-k {folder} -c listen_addresses='' -F"), check=True, capture_output=True)
        try:
            yield f"postgresql+psycopg2://{user}@/postgres?host={folder}"
        finally:
            subprocess.run(_as_server_user(str(binaries / "pg_ctl"), "stop", "-D", str(data),
                                           "-m", "immediate"), check=False, capture_output=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def new_database(server_url: str) -> str:
    """A fresh, empty database on the server: its URL (each test its own instance)."""
    name = f"jarvis_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(server_url, poolclass=NullPool,
                                      isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    return server_url.replace("/postgres?", f"/{name}?", 1)
