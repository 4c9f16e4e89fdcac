"""Write turns across processes (jarvis_core/stores/locks.py): a waiter gets the store when
the holder is done, gives up with an error naming the store and the holder, and gets it at
once when the holder dies; runs of different sources share the gate, a publish waits for
them."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from jarvis_core.stores.locks import (
    StoreBusy,
    publishing,
    refreshing_sources,
    source_run,
    write_turn,
)
from tests.pipeline_helpers import PROJECT_ROOT

_HOLDER = """
import sys, time
from pathlib import Path
from jarvis_core.stores import locks
locks.label_holder("run abcd1234 of refresh_sources")
what, path, seconds = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
turn = (locks.write_turn(path, "the test store") if what == "store"
        else locks.source_run(path, sys.argv[4]))
with turn:
    print("held", flush=True)
    time.sleep(seconds)
"""


def hold(*args: object) -> subprocess.Popen:
    """A process holding a turn (``store PATH SECONDS`` or ``source DATA_DIR SECONDS NAME``),
    returned once it holds it."""
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, *map(str, args)],
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_turn_waits_for_the_holder_to_finish(tmp_path):
    lock = tmp_path / ".store.lock"
    child = hold("store", lock, 1.0)
    started = time.monotonic()
    with write_turn(lock, "the test store", timeout=30):
        waited = time.monotonic() - started
    child.wait()
    assert 0.5 < waited < 10


def test_a_turn_gives_up_naming_the_store_and_its_holder(tmp_path):
    lock = tmp_path / ".store.lock"
    child = hold("store", lock, 30)
    try:
        with pytest.raises(StoreBusy) as busy, write_turn(lock, "the test store", timeout=0.3):
            pass
    finally:
        child.kill()
        child.wait()
    message = str(busy.value)
    assert "the test store" in message and str(lock) in message
    assert f"pid {child.pid}" in message and "run abcd1234 of refresh_sources" in message
    assert "gave up waiting for it after 0.3 s" in message


def test_a_turn_is_free_as_soon_as_its_holder_dies(tmp_path):
    lock = tmp_path / ".store.lock"
    child = hold("store", lock, 300)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    started = time.monotonic()
    with write_turn(lock, "the test store", timeout=5):
        assert time.monotonic() - started < 1


def test_turns_nest_in_a_thread_and_exclude_other_threads(tmp_path):
    lock, order = tmp_path / ".store.lock", []

    def other() -> None:
        with write_turn(lock, "the test store", timeout=10):
            order.append("other")

    with write_turn(lock, "the test store"), write_turn(lock, "the test store"):
        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.3)
        order.append("first")
    thread.join()
    assert order == ["first", "other"]


def test_sources_refresh_side_by_side_and_a_publish_waits_for_them(tmp_path):
    first = hold("source", tmp_path, 1.5, "notes")
    with source_run(tmp_path, "issues", timeout=1):  # another source: no wait
        assert [line.split(":")[0] for line in refreshing_sources(tmp_path)] == [
            "issues", "notes"]
    with pytest.raises(StoreBusy) as busy, publishing(tmp_path, timeout=0.3):
        pass
    assert f"notes: pid {first.pid}" in str(busy.value)
    started = time.monotonic()
    with publishing(tmp_path, timeout=30):
        assert first.poll() is not None  # the source's run had ended
    first.wait()
    assert time.monotonic() - started > 0.5
    with pytest.raises(StoreBusy, match="another run of it"):
        second = hold("source", tmp_path, 30, "notes")
        try:
            with source_run(tmp_path, "notes", timeout=0.3):
                pass
        finally:
            second.kill()
            second.wait()
