"""health-status and performance-metrics: how the published knowledge base and the pipeline
behind it are doing, and how the tools have been answering (from the access log).

Dagster's daemon heartbeats and sensor and schedule ticks are read from the instance's SQLite
storage under ``<data_dir>/dagster`` (read-only, without importing Dagster), so the query side
stays free of it. Sources are the profile's; a vault is compared with its published notes by
a stat walk (content hashes only for files whose size or mtime moved), a repository by its
head."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jarvis_core.audit import AuditLog
from jarvis_core.profiles import Profile
from jarvis_core.stores import serving


def _age(moment: datetime | None, now: datetime) -> float | None:
    if moment is None:
        return None
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return round((now - aware).total_seconds(), 1)


def _check(name: str, probe) -> dict:
    try:
        detail = probe()
    except Exception as exc:  # every failure is the answer here
        return {"store": name, "reachable": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"store": name, "reachable": True, "detail": detail}


def _stores(kb, snapshot, audit: AuditLog) -> list[dict]:
    """Each store of the version opened (and the tables queried) as a request would."""

    def tables() -> str:
        (chunks,) = snapshot.cursor().execute("SELECT count(*) FROM chunks").fetchone()
        return f"{chunks} chunks"

    checks = [_check("tables", tables),
              _check("vectors", lambda: snapshot.vectors and "opened"),
              _check("keyword", lambda: kb.keyword.open(snapshot) or "opened"),
              _check("graph", lambda: snapshot.graph() and "opened"),
              _check("audit", lambda: f"{len(audit.entries(limit=1))} call read")]
    return checks


def _dagster(data_dir: Path, now: datetime) -> dict:
    """Daemon heartbeats and the last tick of each sensor and schedule, when an instance
    exists."""
    home = data_dir / "dagster"
    answer: dict = {"instance": str(home), "daemons": [], "ticks": []}
    runs, schedules = home / "history" / "runs.db", home / "schedules" / "schedules.db"
    if runs.is_file():
        with sqlite3.connect(f"file:{runs}?mode=ro", uri=True, timeout=5) as conn:
            for daemon, stamp in conn.execute(
                    "SELECT daemon_type, timestamp FROM daemon_heartbeats ORDER BY 1"):
                moment = datetime.fromisoformat(str(stamp)).replace(tzinfo=UTC)
                answer["daemons"].append({"daemon": daemon, "last_heartbeat": moment.isoformat(),
                                          "age_seconds": _age(moment, now)})
    if schedules.is_file():
        last: dict[str, dict] = {}
        with sqlite3.connect(f"file:{schedules}?mode=ro", uri=True, timeout=5) as conn:
            for kind, status, stamp, body in conn.execute(
                    "SELECT type, status, timestamp, tick_body FROM job_ticks "
                    "WHERE id IN (SELECT max(id) FROM job_ticks GROUP BY selector_id)"):
                try:
                    name = json.loads(body).get("job_name")
                except (TypeError, ValueError):
                    name = None
                moment = datetime.fromisoformat(str(stamp)).replace(tzinfo=UTC)
                last[name or "?"] = {"name": name, "type": kind.lower(), "status": status,
                                     "at": moment.isoformat(), "age_seconds": _age(moment, now)}
        answer["ticks"] = [last[name] for name in sorted(last)]
    return answer


def _source(kb, snapshot, name: str, now: datetime) -> dict:
    config = kb.config
    kind = config.kind_of(name)
    last = None
    if kind.ingested in snapshot.table_names():
        (last,) = snapshot.cursor().execute(
            f"SELECT max(ingested_at) FROM {kind.ingested} WHERE source = ?", [name]).fetchone()
    entry = {"name": name, "kind": kind.name, "published": last is not None,
             "last_ingested_at": last.isoformat() if last else None,
             "age_seconds": _age(last, now), "changed_since_publish": None}
    try:  # the kind's change watch, as refresh and the sensors ask it
        change = kind.watch.compare(name, kind.watch.look(name, config.sources[name]),
                                    config.data_dir)
        entry["changed_since_publish"] = int(change is not None)
        entry["change"] = change.reason if change is not None else None
    except Exception as exc:  # a missing clone or folder: said, not raised
        entry["error"] = f"{type(exc).__name__}: {exc}"
    return entry


def health_status(kb, audit: AuditLog, now: datetime | None = None) -> dict:
    now = now or datetime.now(UTC)
    try:
        snapshot = kb.snapshots.current()
    except serving.NotPublished as exc:
        return {"status": "unpublished", "message": str(exc), "published": None,
                "stores": [], "dagster": _dagster(kb.config.data_dir, now), "sources": []}
    manifest = snapshot.version.manifest
    published_at = datetime.fromisoformat(manifest["published_at"])
    stores = _stores(kb, snapshot, audit)
    sources = [_source(kb, snapshot, name, now) for name in kb.config.source_names]
    healthy = all(store["reachable"] for store in stores) and snapshot.embeddings["complete"]
    return {"status": "ok" if healthy else "degraded", "message": None,
            "published": {"version": snapshot.version.name, "published_at": published_at
                          .isoformat(), "age_seconds": _age(published_at, now),
                          "model": manifest["model"], "embeddings": snapshot.embeddings,
                          "skipped": [problem.as_dict()
                                      for problem in getattr(snapshot, "skipped", [])]},
            "stores": stores, "dagster": _dagster(kb.config.data_dir, now), "sources": sources}


def performance_metrics(audit: AuditLog, profile: Profile, hours: float = 24.0,
                        now: datetime | None = None) -> dict:
    """Per tool: calls, errors and latency percentiles over the last ``hours``; a restricted
    profile sees its own calls only."""
    since = (now or datetime.now(UTC)) - timedelta(hours=hours)
    tools = audit.tool_metrics(since, profile=profile.name if profile.restricted else None)
    return {"since": since.isoformat(), "hours": hours,
            "profile": profile.name, "calls": sum(t["calls"] for t in tools.values()),
            "tools": [{"tool": name, **figures} for name, figures in tools.items()]}
