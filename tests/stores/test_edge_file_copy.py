"""How an Edge store's files are copied (publish, readers' copies): the bytes as they are,
holes kept, and zeros written out in the source left as holes in the copy."""

import os

import pytest

from jarvis_core.stores.vectors.edge_files import COPY_BLOCK, copy_file

ZEROS = 8 * COPY_BLOCK  # written out, as Edge's maps leave preallocated files on tmpfs


def allocated(path) -> int:
    return os.stat(path).st_blocks * 512


def test_a_copy_has_the_same_bytes_and_leaves_zeros_and_holes_unwritten(tmp_path):
    source, target = tmp_path / "source", tmp_path / "copy"
    head, tail = os.urandom(5000), os.urandom(300)
    with open(source, "wb") as file:
        file.write(head + bytes(ZEROS))
        file.seek(len(head) + ZEROS + 3 * COPY_BLOCK)  # a hole, then the tail
        file.write(tail)
    if allocated(source) < ZEROS:
        pytest.skip(f"{tmp_path}'s file system does not store written zeros")

    copy_file(str(source), str(target))

    assert target.read_bytes() == source.read_bytes()
    assert allocated(target) <= 4 * COPY_BLOCK  # the blocks holding head and tail, at most
