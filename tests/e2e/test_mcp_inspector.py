"""Failing tool calls through the reference TypeScript client, the MCP Inspector's CLI (npm):
each must show Jarvis's own message. The Inspector checks structured content against the
tool's outputSchema even on an error, so an error result carrying structured content shows
only `MCP error -32602: Structured content does not match the tool's output schema`."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.pipeline_helpers import PROJECT_ROOT
from tests.query_helpers import light_copy

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("npx") is None, reason="needs npx (Node.js)")]


def test_the_inspector_shows_jarvis_error_messages(published_sample, tmp_path):
    config = light_copy(published_sample, tmp_path)
    done = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "mcp_inspector_check.py"),
         "--config", str(config.config_path), "--errors-only"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "npm_config_update_notifier": "false"})
    assert done.returncode == 0, done.stdout + done.stderr
    shown = done.stdout
    assert "-> Error: 'No Such Note.md' names no document in 'sample'" in shown
    assert "-> Error: limit must be between 1 and 50" in shown
    assert "-> Error reading note: Access denied: " in shown
    assert "Structured content" not in shown
