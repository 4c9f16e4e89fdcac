"""The `jarvis` command's processes collect young garbage less often than CPython's default
(jarvis_core/garbage_collection.py)."""

import gc

from click.testing import CliRunner

from jarvis_cli.main import cli
from jarvis_core.garbage_collection import YOUNG_COLLECTION_ALLOCATIONS


def test_a_jarvis_command_collects_young_garbage_every_10000_allocations(tmp_path):
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's default (the tests' processes have ours)
    try:
        CliRunner().invoke(cli, ["--config", str(tmp_path / "jarvis.yaml"), "status"])
        assert gc.get_threshold() == (YOUNG_COLLECTION_ALLOCATIONS, 10, 10)
    finally:
        gc.set_threshold(*before)
