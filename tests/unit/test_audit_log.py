"""The access log: append-only rows with their documents, redaction, retention, the use
counts memory ranking reads, latency figures, and calls that survive a killed process."""

import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta

import pytest

from jarvis_core.assistant_settings import AuditSettings
from jarvis_core.audit import REDACTED, AuditEntry, AuditLog, latency, redact

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def entry(tool="search-hybrid", *, documents=(), client="claude", profile="all",
          outcome="ok", duration_ms=10.0, at=NOW, session="s1", **arguments) -> AuditEntry:
    return AuditEntry(tool=tool, arguments=arguments, client=client, profile=profile,
                      transport="stdio", correlation_id="c", duration_ms=duration_ms,
                      outcome=outcome, documents=list(documents), session=session, at=at)


@pytest.fixture
def log(tmp_path):
    audit = AuditLog(tmp_path / "audit.sqlite", AuditSettings(), now=NOW)
    yield audit
    audit.close()


def test_calls_are_listed_with_their_documents_and_filtered(log):
    log.record(entry(documents=["v/a.md", "v/b.md"], query="alerting"))
    log.record(entry("read-note", documents=["v/a.md"], client="cursor", path="a.md",
                     at=NOW + timedelta(minutes=5), session="s2"))
    [first, second] = log.entries()
    assert first["tool"] == "search-hybrid" and first["documents"] == ["v/a.md", "v/b.md"]
    assert first["arguments"] == {"query": "alerting"}
    assert first["at"] == NOW.isoformat()
    assert [e["tool"] for e in log.entries(client="cursor")] == ["read-note"]
    assert [e["tool"] for e in log.entries(since=NOW + timedelta(minutes=1))] == ["read-note"]
    assert [e["tool"] for e in log.entries(session="s1")] == ["search-hybrid"]
    assert [e["tool"] for e in log.entries(limit=1)] == ["read-note"]  # the newest


def test_rows_are_never_updated(log):
    log.record(entry())
    with sqlite3.connect(log.path) as conn, pytest.raises(sqlite3.IntegrityError,
                                                          match="append-only"):
        conn.execute("UPDATE calls SET tool = 'forged'")


def test_redaction_keeps_queries_and_hides_secrets():
    settings = AuditSettings(redact_arguments=("text",))
    stored = redact({"query": "rotate the api_key: sk-123 today", "text": "my diary",
                     "tags": ["password=hunter2"], "limit": 5, "long": "x" * 3000}, settings)
    assert stored["query"] == f"rotate the {REDACTED} today"
    assert stored["text"] == REDACTED
    assert stored["tags"] == [REDACTED]
    assert stored["limit"] == 5
    assert len(stored["long"]) < 2100 and stored["long"].endswith("[cut]")


def test_retention_prunes_old_calls_and_their_documents(tmp_path):
    path = tmp_path / "audit.sqlite"
    with_old = AuditLog(path, AuditSettings(retention_days=30), now=NOW)
    with_old.record(entry(documents=["v/old.md"], at=NOW - timedelta(days=31)))
    with_old.record(entry(documents=["v/new.md"], at=NOW - timedelta(days=1)))
    with_old.close()
    reopened = AuditLog(path, AuditSettings(retention_days=30), now=NOW)
    assert [e["documents"] for e in reopened.entries()] == [["v/new.md"]]
    assert reopened.uses(["v/old.md", "v/new.md"]) == {"v/old.md": 0, "v/new.md": 1}
    reopened.close()


def test_uses_count_successful_calls_per_document(log):
    log.record(entry(documents=["v/a.md"]))
    log.record(entry(documents=["v/a.md", "v/b.md"], profile="work"))
    log.record(entry(documents=["v/a.md"], outcome="error"))
    assert log.uses(["v/a.md", "v/b.md", "v/c.md"]) == {"v/a.md": 2, "v/b.md": 1, "v/c.md": 0}
    assert log.uses(["v/a.md"], profile="work") == {"v/a.md": 1}


def test_tool_metrics_give_counts_errors_and_percentiles(log):
    for duration in range(1, 101):
        log.record(entry(duration_ms=float(duration), outcome="error" if duration > 95 else "ok"))
    log.record(entry("read-note", duration_ms=7.0, profile="work"))
    metrics = log.tool_metrics(NOW - timedelta(hours=1))
    assert metrics["search-hybrid"]["calls"] == 100
    assert metrics["search-hybrid"]["errors"] == 5
    assert metrics["search-hybrid"]["p50_ms"] == pytest.approx(50.5)
    assert metrics["search-hybrid"]["p95_ms"] == pytest.approx(95.05)
    assert metrics["search-hybrid"]["max_ms"] == 100
    assert list(log.tool_metrics(NOW - timedelta(hours=1), profile="work")) == ["read-note"]
    assert latency([4.0]) == {"p50_ms": 4.0, "p95_ms": 4.0, "p99_ms": 4.0, "mean_ms": 4.0,
                              "max_ms": 4.0}


def test_a_call_recorded_before_the_process_dies_is_kept(tmp_path):
    """The process is killed right after recording (no close, no clean exit)."""
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from jarvis_core.assistant_settings import AuditSettings
        from jarvis_core.audit import AuditEntry, AuditLog
        log = AuditLog(Path({str(tmp_path / 'audit.sqlite')!r}), AuditSettings())
        log.record(AuditEntry(tool="recall", arguments={{"query": "q"}}, client="c",
                              profile="all", transport="stdio", correlation_id="x",
                              duration_ms=1.0, documents=["v/m.md"]))
        os._exit(9)
    """)
    died = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert died.returncode == 9, died.stderr
    log = AuditLog(tmp_path / "audit.sqlite", AuditSettings())
    [kept] = log.entries()
    assert (kept["tool"], kept["documents"]) == ("recall", ["v/m.md"])
    log.close()
