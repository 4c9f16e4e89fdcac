"""Progress of long steps (embedding above all), for whoever shows it: `jarvis refresh`
draws bars from it on a terminal; the Dagster assets write it as log lines for the UI.

Listeners are process-wide, like logging handlers: the code doing the work reports, and
does not know who (if anyone) is watching."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    source: str
    layer: str
    done: int
    total: int


Listener = Callable[[Progress], None]

_listeners: list[Listener] = []
_lock = threading.Lock()


def add_listener(listener: Listener) -> None:
    with _lock:
        _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def report(source: str, layer: str, done: int, total: int) -> None:
    """Tell every listener how far ``layer`` of ``source`` is (``done`` of ``total`` items)."""
    with _lock:
        listeners = list(_listeners)
    event = Progress(source, layer, done, total)
    for listener in listeners:
        listener(event)


class Stopwatch:
    """Seconds per phase of a step, as ``<phase>_seconds`` (an asset's metadata)."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[f"{phase}_seconds"] = round(now - self._last, 3)
        self._last = now
