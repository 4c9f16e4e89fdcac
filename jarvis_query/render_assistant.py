"""Readable text for the assistant features' answers: memories remembered, recalled and
forgotten, health, performance figures and the access log (`jarvis audit`). Each function
takes the answer's JSON-ready dict, as jarvis_query/render.py does."""

from __future__ import annotations

import json

from jarvis_query.render import table

AUDIT_COLUMNS = ["at", "client", "profile", "tool", "outcome", "duration_ms", "documents",
                 "arguments"]
METRIC_COLUMNS = ["tool", "calls", "errors", "p50_ms", "p95_ms", "p99_ms", "max_ms"]


def _memory_line(memory: dict) -> str:
    tags = " ".join(f"#{tag}" for tag in memory["tags"])
    return (f"{memory['title']} ({memory['vault']}/{memory['path']}, importance "
            f"{memory['importance']}{', archived' if memory['archived'] else ''}) {tags}")


def render_remember(data: dict) -> str:
    return "\n".join([f"remembered: {_memory_line(data['memory'])}",
                      f"searchable {data['searchable']}"])


def render_forget(data: dict) -> str:
    return (f"forgotten: {data['forgotten']['vault']}/{data['forgotten']['path']}\n"
            f"archived to {data['archived_to']['vault']}/{data['archived_to']['path']} "
            "(recall finds it with include_archive)")


def render_recall(data: dict) -> str:
    memories = data["memories"]
    lines = [f"{len(memories)} of {data['found']} memories for {data['query']!r} "
             f"({data['tokens']} of {data['token_budget']} tokens)"]
    weights = ", ".join(f"{name} {weight}" for name, weight in data["weights"].items())
    lines.append(f"score = {weights}")
    for rank, memory in enumerate(memories, 1):
        parts = ", ".join(f"{name} {value}" for name, value in memory["components"].items())
        lines += [f"{rank:>2}. {memory['score']:.4f}  {_memory_line(memory)}",
                  f"    {parts}; used {memory['uses']}×", f"    {memory['text']}"]
    if data["pending"]:
        lines.append(f"{data['pending']} memories written since the last refresh are not "
                     "searchable yet")
    return "\n".join(lines)


def render_health(data: dict) -> str:
    lines = [f"status: {data['status']}"]
    if data["message"]:
        lines.append(data["message"])
    published = data["published"]
    if published:
        lines.append(f"published version {published['version']} at "
                     f"{published['published_at']} ({published['age_seconds']:.0f} s ago)")
    lines += [f"  {store['store']}: " + ("ok" if store["reachable"] else store["error"])
              for store in data["stores"]]
    for daemon in data["dagster"]["daemons"]:
        lines.append(f"  daemon {daemon['daemon']}: last heartbeat {daemon['age_seconds']} s ago")
    for tick in data["dagster"]["ticks"]:
        lines.append(f"  {tick['type']} {tick['name']}: {tick['status']} {tick['age_seconds']} "
                     "s ago")
    if data["sources"]:
        lines += ["", table(data["sources"], ["name", "kind", "published", "last_ingested_at",
                                              "changed_since_publish"])]
    return "\n".join(lines)


def render_metrics(data: dict) -> str:
    header = (f"{data['calls']} calls in the last {data['hours']:g} hours "
              f"(profile {data['profile']})")
    return header if not data["tools"] else f"{header}\n{table(data['tools'], METRIC_COLUMNS)}"


def render_audit(data: dict) -> str:
    """Access log entries, one line each."""
    entries = data["entries"]
    if not entries:
        return "no calls recorded"
    rows = [{**entry, "at": entry["at"][:19], "documents": len(entry["documents"]),
             "arguments": json.dumps(entry["arguments"], ensure_ascii=False)[:80]}
            for entry in entries]
    return table(rows, AUDIT_COLUMNS)
