"""The MCP prompts: ready-made requests an assistant's user can pick, filled from the
knowledge base as the caller's profile sees it.

- answer-from-notes: a GraphRAG evidence pack for the question, each source with its
  ``jarvis://`` URI, and the instruction to answer from it alone, citing those URIs.
- summarise-changes: the notes of a vault modified in the last days (by the published
  modification time), each with its opening, and the instruction to summarise them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jarvis_query.resources import document_uri
from jarvis_query.results import snippet
from jarvis_query.validation import MAX_NAME_CHARS, QueryError, check_vault, require_text

PROMPT_TOKENS = 3000      # the evidence pack's budget in answer-from-notes
MAX_DAYS = 366
MAX_CHANGED = 100         # notes listed in summarise-changes


def answer_from_notes(kb, question: str) -> tuple[str, list[str]]:
    """The prompt text and the documents it quotes."""
    require_text(question, "question")
    pack = kb.search_graphrag(question, limit=8, max_tokens=PROMPT_TOKENS)
    sources = pack["sources"]
    lines = ["Answer the question below from the sources that follow, and from nothing else.",
             "Cite every claim with the URI of the source it comes from, in square brackets,",
             "e.g. [jarvis://vault/Notes/Topic.md]. If the sources do not answer the question,",
             "say so plainly instead of guessing.", "", f"Question: {question}", "",
             "Sources:"]
    if not sources:
        lines.append("(no source matched the question)")
    for source in sources:
        lines += [f"[{source['rank']}] {source['title']} — "
                  f"{document_uri(source['vault'], source['path'])}", source["text"], ""]
    return "\n".join(lines), [f"{s['vault']}/{s['path']}" for s in sources]


def summarise_changes(kb, vault: str, days: str | int = 7,
                      now: datetime | None = None) -> tuple[str, list[str]]:
    """The prompt text and the notes it lists."""
    require_text(vault, "vault", MAX_NAME_CHARS)
    check_vault(kb.config, vault)
    try:
        days = int(str(days).strip())
    except ValueError:
        raise QueryError(f"days must be a whole number of days, got '{days}'", "days") from None
    if not 1 <= days <= MAX_DAYS:
        raise QueryError(f"days must be between 1 and {MAX_DAYS}", "days")
    since = (now or datetime.now(UTC)) - timedelta(days=days)
    snapshot = kb.snapshots.current()
    rows = snapshot.cursor().execute(
        "SELECT n.path, n.title, n.modified_at, arg_min(c.text, c.position) FROM notes n "
        "LEFT JOIN chunks c ON c.source = n.source AND c.path = n.path "
        "WHERE n.source = ? AND n.modified_at >= ? GROUP BY ALL "
        "ORDER BY n.modified_at DESC, n.path LIMIT ?",
        [vault, since.replace(tzinfo=None), MAX_CHANGED]).fetchall()
    lines = [f"Summarise what changed in my vault '{vault}' in the last {days} days: the",
             "themes, decisions and open questions, grouped by topic. Cite each note by its",
             "URI in square brackets.", "", f"Notes modified since {since:%Y-%m-%d}:"]
    if not rows:
        lines.append("(no note was modified in that time)")
    for path, title, modified, opening in rows:
        lines += [f"- {title} ({modified:%Y-%m-%d %H:%M}) {document_uri(vault, path)}",
                  f"  {snippet(opening or '')}"]
    return "\n".join(lines), [f"{vault}/{path}" for path, *_ in rows]
