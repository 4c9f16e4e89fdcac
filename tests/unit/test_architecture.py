"""The layout holds: imports run one way (import-linter's contracts in pyproject.toml),
modules stay small enough to read, asset bodies stay short."""

import ast
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jarvis_core", "jarvis_resources", "jarvis_assets", "sensors", "schedules",
            "jarvis_query", "jarvis_cli", "jarvis_bench")
MAX_MODULE_LINES = 420
MAX_ASSET_FUNCTION_LINES = 60


def _modules(*packages: str) -> list[Path]:
    return sorted(path for package in packages for path in (PROJECT_ROOT / package).rglob("*.py"))


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=PROJECT_ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_module_is_too_long_to_read():
    long = {str(path.relative_to(PROJECT_ROOT)): lines for path in _modules(*PACKAGES)
            if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_asset_layer_functions_are_short():
    """Asset bodies read, call the core, write and report; the work lives in the core."""
    long = {}
    for path in _modules("jarvis_assets"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_ASSET_FUNCTION_LINES:
                    long[f"{path.name}:{node.name}"] = lines
    assert long == {}
