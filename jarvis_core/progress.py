"""Progress of long steps (embedding above all), for whoever shows it: `jarvis refresh`
draws bars from it on a terminal; the Dagster assets write it as log lines for the UI.

Listeners are process-wide, like logging handlers: the code doing the work reports, and
does not know who (if anyone) is watching."""

from __future__ import annotations

import threading
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
