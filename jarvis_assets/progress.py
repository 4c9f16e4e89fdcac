"""Progress of a long step as Dagster log lines (what `jarvis refresh` draws as bars)."""

import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from jarvis_core import progress

LOG_EVERY_SECONDS = 15.0


def progress_line(event: progress.Progress, elapsed: float) -> str:
    """'embeddings: 12,400 of 36,722 (34%), about 14 min left'."""
    line = f"{event.layer}: {event.done:,} of {event.total:,}"
    if event.total:
        line += f" ({event.done * 100 // event.total}%)"
    if 0 < event.done < event.total and elapsed > 0:
        left = elapsed / event.done * (event.total - event.done)
        line += f", about {left / 60:.0f} min left" if left >= 90 else f", about {left:.0f} s left"
    return line


@contextmanager
def logged_progress(context: dg.AssetExecutionContext) -> Iterator[None]:
    """While the block runs, progress reports become log lines of the run (at most one per
    LOG_EVERY_SECONDS, and the last one)."""
    started = time.monotonic()
    last = [0.0]

    def log(event: progress.Progress) -> None:
        now = time.monotonic()
        if event.total and (event.done == event.total or now - last[0] >= LOG_EVERY_SECONDS):
            last[0] = now
            context.log.info(f"{event.source}: {progress_line(event, now - started)}")

    progress.add_listener(log)
    try:
        yield
    finally:
        progress.remove_listener(log)
