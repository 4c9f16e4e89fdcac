"""Bounded work per item: CPU time to parse one note or ticket, links kept per note, text
kept per ticket. The settings live in ``ingest`` (jarvis_core.config.IngestSettings); an
item over a limit is cut with a warning naming the setting, or fails on its own.

The time limit counts the main thread's own CPU time (a busy machine or busy threads do not
use it up). A watchdog thread reads that clock and, once an item is over, interrupts the
main thread, where the interrupt raises ``ItemTooSlow`` in the parsing code. No operating
system signal is sent: a process-wide CPU timer (``ITIMER_VIRTUAL``) delivers its signal
to any thread, and one landing in a native thread pool (the embedder's) crashed the
process. Elsewhere than the main thread (a thread pool) the limit is not enforced; the
size limits still bound the work there."""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# The interrupt is delivered as this signal's Python handler, without the signal being sent.
_INTERRUPT = signal.SIGVTALRM


class ItemTooSlow(Exception):
    """Parsing one item took more CPU time than ``ingest.max_item_seconds``."""


class _Watchdog:
    """A daemon thread that interrupts the main thread once its CPU clock passes the armed
    deadline. CPU time runs no faster than wall time, so sleeping for what remains of the
    budget never oversleeps it."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._clock = time.pthread_getcpuclockid(threading.main_thread().ident)
        self._changed = threading.Condition()
        self._deadline: float | None = None
        self._fired = False
        threading.Thread(target=self._watch, name="jarvis-item-cpu-limit", daemon=True).start()

    def arm(self, seconds: float) -> None:
        with self._changed:
            self._deadline = time.clock_gettime(self._clock) + seconds
            self._fired = False
            self._changed.notify()

    def disarm(self) -> bool:
        """Stop watching; whether the budget ran out: the interrupt was sent, or the deadline
        passed before this thread could send it (a long native call held the GIL)."""
        with self._changed:
            deadline, self._deadline = self._deadline, None
            return self._fired or (deadline is not None
                                   and time.clock_gettime(self._clock) >= deadline)

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._deadline is None:
                    self._changed.wait()
                    continue
                remaining = self._deadline - time.clock_gettime(self._clock)
                if remaining > 0:
                    self._changed.wait(max(remaining, 0.005))
                    continue
                self._deadline, self._fired = None, True
                _thread.interrupt_main(_INTERRUPT)


_watchdog: _Watchdog | None = None


def _can_time() -> bool:
    return (hasattr(time, "pthread_getcpuclockid")
            and threading.current_thread() is threading.main_thread())


@contextmanager
def cpu_time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise ``ItemTooSlow`` naming ``what`` once the block has used ``seconds`` of the main
    thread's CPU time."""
    global _watchdog
    if not _can_time():
        yield
        return

    message = f"{what} took over {seconds:g} CPU seconds to parse (ingest.max_item_seconds)"

    def expired(signum, frame) -> None:
        raise ItemTooSlow(message)

    if _watchdog is None or _watchdog.pid != os.getpid():  # threads do not survive a fork
        _watchdog = _Watchdog()
    previous = signal.signal(_INTERRUPT, expired)
    _watchdog.arm(seconds)
    try:
        yield
    finally:
        try:
            if _watchdog.disarm():
                time.sleep(0)  # a call: an interrupt sent as the block ended is raised here
                # Over budget whatever became of the interrupt (not sent in time, or caught
                # by the code it landed in): the item fails all the same.
                raise ItemTooSlow(message)
        finally:
            signal.signal(_INTERRUPT, previous)


def clip(text: str, limit: int, what: str, warnings: list[str]) -> str:
    """``text`` cut to ``limit`` characters, with a warning naming ``what`` when cut."""
    if len(text) <= limit:
        return text
    warnings.append(f"{what}: {len(text)} characters, cut to {limit} "
                    "(ingest.max_ticket_chars)")
    return text[:limit]
