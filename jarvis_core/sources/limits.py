"""Bounded work per item: CPU time to parse one note or ticket, links kept per note, text
kept per ticket. The settings live in ``ingest`` (jarvis_core.config.IngestSettings); an
item over a limit is cut with a warning naming the setting, or fails on its own.

The time limit is a CPU-time timer (``ITIMER_VIRTUAL``, so neither a busy machine nor
pytest-timeout's wall-clock ``SIGALRM`` interferes) whose signal raises ``ItemTooSlow`` in
the parsing code. Signals reach only the main thread, so elsewhere (a thread pool) the
limit is not enforced; the size limits still bound the work there."""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from jarvis_core.sources.parsed_note import ParsedNote


class ItemTooSlow(Exception):
    """Parsing one item took more CPU time than ``ingest.max_item_seconds``."""


def _can_time() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def cpu_time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise ``ItemTooSlow`` naming ``what`` once the block has used ``seconds`` of CPU."""
    if not _can_time():
        yield
        return

    def expired(signum, frame) -> None:
        raise ItemTooSlow(f"{what} took over {seconds:g} CPU seconds to parse "
                          "(ingest.max_item_seconds)")

    previous = signal.signal(signal.SIGVTALRM, expired)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def cap_links(note: ParsedNote, limit: int) -> str | None:
    """Keep at most ``limit`` links of a note (wikilinks, embeds, markdown links and typed
    relations, each kind cut in proportion, first written first kept); a warning when any
    were dropped."""
    kinds = ("wikilinks", "embeds", "links", "relations")
    total = sum(len(getattr(note, kind)) for kind in kinds)
    if total <= limit:
        return None
    for kind in kinds:
        items = getattr(note, kind)
        setattr(note, kind, items[:math.floor(limit * len(items) / total)])
    return (f"{total} links, over the {limit} kept per note (ingest.max_links_per_note): "
            f"only the first {limit} become graph edges")


def clip(text: str, limit: int, what: str, warnings: list[str]) -> str:
    """``text`` cut to ``limit`` characters, with a warning naming ``what`` when cut."""
    if len(text) <= limit:
        return text
    warnings.append(f"{what}: {len(text)} characters, cut to {limit} "
                    "(ingest.max_ticket_chars)")
    return text[:limit]
