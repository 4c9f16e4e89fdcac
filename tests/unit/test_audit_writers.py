"""The access log with several writers: processes appending at once lose no entry, a writer
held up beyond SQLite's busy timeout waits and then writes, an argument SQLite cannot store
as UTF-8 is still recorded, and a write that cannot be done raises instead of vanishing (the
MCP server then withholds the answer: tests/e2e/test_serving_replicas.py)."""

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from jarvis_core import audit as audit_module
from jarvis_core.assistant_settings import AuditSettings
from jarvis_core.audit import AuditEntry, AuditLog, AuditUnavailable

WRITERS, EACH = 4, 150


def entry(correlation_id: str, **arguments) -> AuditEntry:
    return AuditEntry(tool="search-hybrid", arguments=arguments, client="c", profile="all",
                      transport="http", correlation_id=correlation_id, duration_ms=1.0,
                      documents=["v/a.md"])


def test_processes_writing_at_once_lose_no_entry(tmp_path):
    path = tmp_path / "audit.sqlite"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from jarvis_core.assistant_settings import AuditSettings
        from jarvis_core.audit import AuditEntry, AuditLog
        log = AuditLog(Path({str(path)!r}), AuditSettings())
        while time.time() < float(sys.argv[2]):  # start together
            time.sleep(0.001)
        for number in range({EACH}):
            log.record(AuditEntry(tool="read", arguments={{"n": number}}, client=sys.argv[1],
                                  profile="all", transport="http",
                                  correlation_id=f"{{sys.argv[1]}}-{{number}}",
                                  duration_ms=1.0, documents=["v/a.md"]))
    """)
    start = str(time.time() + 3)
    writers = [subprocess.Popen([sys.executable, "-c", script, f"w{n}", start],
                                stderr=subprocess.PIPE, text=True) for n in range(WRITERS)]
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
    log = AuditLog(path, AuditSettings())
    ids = {row["correlation_id"] for row in log.entries()}
    log.close()
    assert ids == {f"w{w}-{n}" for w in range(WRITERS) for n in range(EACH)}


def test_a_writer_held_up_beyond_the_busy_timeout_waits_and_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(audit_module, "BUSY_TIMEOUT_SECONDS", 0.05)
    monkeypatch.setattr(audit_module, "WRITE_PATIENCE_SECONDS", 10)
    log = AuditLog(tmp_path / "audit.sqlite", AuditSettings())
    other = sqlite3.connect(tmp_path / "audit.sqlite", isolation_level=None,
                            check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process's long write transaction
    releaser = threading.Timer(0.6, lambda: other.execute("COMMIT"))
    releaser.start()
    try:
        log.record(entry("held"))
    finally:
        releaser.join()
        other.close()
    assert [row["correlation_id"] for row in log.entries()] == ["held"]
    log.close()


def test_a_write_that_cannot_be_done_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(audit_module, "BUSY_TIMEOUT_SECONDS", 0.05)
    monkeypatch.setattr(audit_module, "WRITE_PATIENCE_SECONDS", 0.3)
    log = AuditLog(tmp_path / "audit.sqlite", AuditSettings())
    other = sqlite3.connect(tmp_path / "audit.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(AuditUnavailable, match="could not be written"):
            log.record(entry("never"))
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert log.entries() == []
    log.close()


def test_an_argument_sqlite_cannot_store_is_recorded_with_the_character_replaced(tmp_path):
    log = AuditLog(tmp_path / "audit.sqlite", AuditSettings())
    log.record(entry("lone\udc80surrogate", query="frost \ud800 alert"))
    [row] = log.entries()
    assert (row["correlation_id"], row["arguments"]) == ("lone?surrogate",
                                                         {"query": "frost ? alert"})
    log.close()
