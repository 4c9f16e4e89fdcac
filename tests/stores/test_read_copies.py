"""Readers' kept copies of a published Edge shard: reused when free, copied when busy or
damaged, freed when their process dies, removed with their version."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from jarvis_core.stores.vectors.base import VectorPoint
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_core.stores.vectors.edge_files import EDGE_SIDECAR
from jarvis_core.stores.vectors.read_copies import open_read_copy, remove_unpublished

DIM = 4
PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def published(tmp_path) -> Path:
    """A published shard of three points."""
    with EdgeVectorStore(tmp_path / "work", "chunks", DIM, "test/model") as store:
        store.upsert([VectorPoint(f"{n:032x}", np.eye(DIM)[n], {}) for n in range(3)])
        store.publish_copy(tmp_path / "v1")
    return tmp_path / "v1"


def test_a_free_kept_copy_is_opened_without_copying(published, tmp_path):
    root = tmp_path / "copies"
    with open_read_copy(root, "v1", published) as first:
        assert first.store.count() == 3
        kept = first.slot / EDGE_SIDECAR  # copied with the shard; Edge never rewrites it
        inode = kept.stat().st_ino
    with open_read_copy(root, "v1", published) as second:
        assert second.slot == first.slot
        assert kept.stat().st_ino == inode  # the same file: nothing was copied again
        assert second.store.count() == 3


def test_readers_at_once_each_get_their_own_slot(published, tmp_path):
    root = tmp_path / "copies"
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(open_read_copy(root, "v1", published))
                   for _ in range(3)]
        assert len({reader.slot for reader in readers}) == 3
        assert [reader.store.count() for reader in readers] == [3, 3, 3]


def test_a_damaged_kept_copy_is_copied_again(published, tmp_path):
    root = tmp_path / "copies"
    with open_read_copy(root, "v1", published) as reader:
        slot = reader.slot
    (slot / "part-0000" / "edge_config.json").unlink()
    with open_read_copy(root, "v1", published) as again:
        assert again.slot == slot and again.store.count() == 3


def test_a_dead_readers_slot_is_free_again(published, tmp_path):
    root = tmp_path / "copies"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from jarvis_core.stores.vectors.read_copies import open_read_copy
            copy = open_read_copy(Path({str(root)!r}), "v1", Path({str(published)!r}))
            print(copy.slot, flush=True)
            time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    try:
        held = Path(holder.stdout.readline().strip())
        with open_read_copy(root, "v1", published) as while_held:
            assert while_held.slot != held
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with open_read_copy(root, "v1", published) as after:
        assert after.slot == held and after.store.count() == 3


def test_copies_of_unpublished_versions_go_unless_held(published, tmp_path):
    root = tmp_path / "copies"
    open_read_copy(root, "v0", published).close()
    open_read_copy(root, "v1", published).close()
    with open_read_copy(root, "v-held", published):
        remove_unpublished(root, ["v1"])
        assert sorted(path.name for path in root.iterdir()) == ["v-held", "v1"]
    remove_unpublished(root, ["v1"])
    assert [path.name for path in root.iterdir()] == ["v1"]
