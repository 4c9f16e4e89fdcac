"""The memory tools' logic: remember (a new note in the memory vault), recall (memories
ranked and packed into a token budget) and forget (archive one).

Recall ranks with the seed's weights, every component in [0, 1] and given in the answer:

- relevance 0.4: the memory's best hybrid-search score (keyword and semantic legs fused by
  RRF, as search-hybrid does), min-max scaled over the memories found (the GraphRAG
  convention: RRF scores differ little in absolute terms);
- recency 0.3: 0.5 ** (age / ``memory.recency_half_life_days``), from the memory's
  ``created`` time;
- frequency 0.2: how many successful calls returned or read the memory (the access log),
  log-scaled and saturating at ``FREQUENCY_SATURATION`` uses;
- importance 0.1: the memory's own ``importance`` (0-1, 0.5 when absent).

Memories are then taken best first while they fit the token budget (counted with the
embedding model's tokenizer, as GraphRAG's context block is); one that does not fit is
skipped for a smaller one after it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache

from jarvis_core.memory import Memory, MemoryNoteError, MemoryVault
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_core.text.tokens import TokenCounter, token_counter
from jarvis_query.fusion import min_max
from jarvis_query.resources import document_uri
from jarvis_query.results import sql_strings
from jarvis_query.validation import QueryError, check_limit, require_text

WEIGHTS = {"relevance": 0.4, "recency": 0.3, "frequency": 0.2, "importance": 0.1}
FREQUENCY_SATURATION = 10   # uses at which the frequency component reaches 1
CANDIDATES = 100            # chunks each search leg contributes before memories are ranked

Uses = Callable[[list[str]], dict[str, int]]


@lru_cache(maxsize=4)
def _counter(model: str) -> TokenCounter:
    return token_counter(model)


def memory_vault(kb) -> MemoryVault:
    """The memory vault of ``kb``'s configuration (a restricted one may not hold it)."""
    try:
        return MemoryVault.from_config(kb.config)
    except MemoryNoteError as exc:
        raise QueryError(str(exc)) from exc


def describe(memory: Memory) -> dict:
    """A memory as the tools show it (its text apart)."""
    return {"path": memory.path, "vault": memory.vault,
            "uri": document_uri(memory.vault, memory.path), "id": memory.id,
            "title": memory.title,
            "created": memory.created.isoformat() if memory.created else None,
            "importance": memory.importance, "tags": list(memory.tags),
            "client": memory.client, "conversation": memory.conversation,
            "archived": memory.archived}


def remember(kb, text: str, importance: float = 0.5, tags: list[str] | None = None,
             title: str | None = None, client: str | None = None,
             conversation: str | None = None) -> dict:
    vault = memory_vault(kb)
    try:
        memory = vault.write(text, importance=importance, tags=tuple(tags or ()), title=title,
                             client=client, conversation=conversation)
    except MemoryNoteError as exc:
        raise QueryError(str(exc)) from exc
    return {"memory": describe(memory),
            "searchable": f"after the next refresh of vault '{vault.vault}' (the vault sensor "
                          "requests it when the note appears)"}


def forget(kb, memory: str) -> dict:
    """Archive the active memory ``memory`` (its path or id)."""
    require_text(memory, "memory")
    vault = memory_vault(kb)
    try:
        found = vault.find(memory, include_archive=False)
        archived = vault.archive(found)
    except MemoryNoteError as exc:
        raise QueryError(str(exc)) from exc
    return {"forgotten": describe(found), "archived_to": describe(archived)}


def _scores(kb, snapshot, vault: MemoryVault, query: str,
            include_archive: bool) -> dict[str, float]:
    """memory path -> its best fused search score, best first."""
    hits = kb.hybrid.retrieve(snapshot, query, CANDIDATES, VectorFilter(sources=[vault.vault]))
    if not hits:
        return {}
    # only the paths: published() would also read and cut every chunk's text (2 ms more)
    paths = dict(snapshot.cursor().execute(
        "SELECT chunk_id, path FROM chunks WHERE chunk_id IN "
        f"({sql_strings([hit.chunk_id for hit in hits])})").fetchall())
    best: dict[str, float] = {}
    for hit in hits:
        path = paths.get(hit.chunk_id)
        if path and vault.is_memory(path) and (include_archive or not vault.is_archived(path)):
            best.setdefault(path, hit.score)
    return best


def score_components(memory: Memory, relevance: float, uses: int, now: datetime,
                half_life_days: float) -> dict:
    age_days = (now - memory.created).total_seconds() / 86400 if memory.created else None
    components = {
        "relevance": relevance,
        "recency": 0.5 ** (max(age_days, 0) / half_life_days) if age_days is not None else 0.0,
        "frequency": min(1.0, math.log1p(uses) / math.log1p(FREQUENCY_SATURATION)),
        "importance": memory.importance}
    components = {name: round(value, 4) for name, value in components.items()}
    return {**components, "total": round(sum(WEIGHTS[n] * components[n] for n in WEIGHTS), 4)}


def _block(entry: dict) -> str:
    """A memory as it goes into the context block."""
    created = entry["created"][:10] if entry["created"] else "undated"
    return (f"[{entry['score']:.3f}] {entry['title']} ({entry['vault']}/{entry['path']}, "
            f"{created}, importance {entry['importance']})\n{entry['text']}\n")


def recall(kb, uses: Uses, query: str, limit: int = 10, include_archive: bool = False,
           token_budget: int | None = None, now: datetime | None = None) -> dict:
    """The memories that best answer ``query``, ranked by WEIGHTS and packed into
    ``token_budget`` tokens (``memory.token_budget`` by default)."""
    require_text(query, "query")
    check_limit(limit)
    vault = memory_vault(kb)
    budget = vault.settings.token_budget if token_budget is None else token_budget
    if isinstance(budget, bool) or not isinstance(budget, int) or not 100 <= budget <= 100_000:
        raise QueryError("token_budget must be between 100 and 100000", "token_budget")
    now = now or datetime.now(UTC)
    snapshot = kb.snapshots.current()
    scores = _scores(kb, snapshot, vault, query, include_archive)
    memories, moved = {}, 0
    for path in scores:
        try:
            memories[path] = vault.read(path)
        except MemoryNoteError:
            moved += 1  # archived or forgotten since the version was published
    relevance = min_max([(path, scores[path]) for path in memories])
    counted = uses([name for memory in memories.values() for name in vault.documents(memory)])
    entries = []
    for path, memory in memories.items():
        used_by = sum(counted.get(name, 0) for name in vault.documents(memory))
        parts = score_components(memory, relevance[path], used_by, now,
                            vault.settings.recency_half_life_days)
        entries.append({**describe(memory), "text": memory.text, "uses": used_by,
                        "score": parts["total"], "components": {n: parts[n] for n in WEIGHTS}})
    entries.sort(key=lambda entry: (-entry["score"], entry["path"]))
    blocks = [_block(entry) for entry in entries]
    sizes = [size - 2 for size in _counter(snapshot.model).count(blocks)]  # specials: once
    chosen, used = [], 2
    for entry, block, size in zip(entries, blocks, sizes, strict=True):
        if len(chosen) < limit and used + size <= budget:
            chosen.append((entry | {"tokens": size}, block))
            used += size
    published = {path for (path,) in snapshot.cursor().execute(
        "SELECT path FROM notes WHERE source = ?", [vault.vault]).fetchall()}
    return {"query": query, "weights": WEIGHTS, "memories": [entry for entry, _ in chosen],
            "context": "\n".join(block for _, block in chosen), "tokens": used,
            "token_budget": budget, "found": len(entries), "omitted": len(entries) - len(chosen),
            "moved_since_publish": moved, "include_archive": include_archive,
            "pending": sum(path not in published for path in vault.paths())}
