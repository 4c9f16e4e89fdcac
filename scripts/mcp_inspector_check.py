"""Every MCP tool through a real client: the MCP Inspector's CLI (npm) against `jarvis serve`.

Copies the sample vault to a scratch project with a memory vault and the sample repository
(whose code get-symbol and search-code are asked about), refreshes it, then asks the
Inspector for tools/list and calls every tool as a person would from the Inspector's form:
numbers and flags typed as text (`limit=3`, `alpha=0.5`, `similarity_threshold=0.2`,
`search_content=true`). Each call is a fresh server (the Inspector starts one per call), so
each one also measures a cold first answer against the Inspector's 60 s request timeout.

Then three calls that must fail (an unknown note, a bad argument, a path escaping the vault)
must show Jarvis's own message: the Inspector checks a result's structured content against the
tool's outputSchema even when isError is set, so an error carrying structured content would
show only `MCP error -32602: Structured content does not match the tool's output schema`.

    python scripts/mcp_inspector_check.py [--inspector PATH] [--config PATH] [--errors-only]

The Inspector comes from the npm registry, fetched by npx on first use (default: its binary is
looked up once, then started directly for each call), or is a path to an installed
`mcp-inspector` binary. `--config` checks an already refreshed project
(with a vault named `sample` and the sample repository named `lumen`) instead of a fresh copy.
Exit 1 when any call errs or times out, or a failing call does not show its Jarvis message.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
JARVIS = str(Path(sys.executable).with_name("jarvis"))
TIMEOUT_S = 60  # the Inspector's default request timeout
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"

CALLS: list[tuple[str, dict[str, str]]] = [
    ("search-semantic", {"query": "how much sleep do I need", "limit": "3",
                         "similarity_threshold": "0.2"}),
    ("search-vault", {"query": "shakshuka", "search_content": "true", "limit": "3"}),
    ("search-hybrid", {"query": "sleep", "alpha": "0.5", "limit": "3"}),
    ("search-graph", {"query_note_path": "Reading/Books/Why We Sleep.md", "depth": "2"}),
    ("search-graphrag", {"query": "why do we sleep", "limit": "3"}),
    ("search-code", {"query": "clamp future timestamps", "limit": "3"}),
    ("get-symbol", {"name": "clamp_future", "repo": "lumen"}),
    ("read-note", {"path": "Reading/Books/Why We Sleep.md", "vault": "sample"}),
    ("read", {"path": "Why We Sleep"}),  # the alias, opening a note by its title
    ("list-vaults", {}),
    ("get-vault-context", {"vault": "sample"}),
    ("remember", {"text": "The inspector check ran against the sample vault.",
                  "importance": "0.8", "tags": '["check"]'}),
    ("recall", {"query": "inspector check", "limit": "3", "include_archive": "true"}),
    ("health-status", {}),
    ("performance-metrics", {"hours": "1"}),
]
FAILING_CALLS: list[tuple[str, dict[str, str], str]] = [  # ..., the start of the message
    ("read-note", {"path": "No Such Note.md", "vault": "sample"},
     "Error: 'No Such Note.md' names no document in 'sample'"),
    ("search-semantic", {"query": "sleep", "limit": "0"}, "Error: limit must be between 1 and 50"),
    ("read-note", {"path": "../../etc/passwd", "vault": "sample"},
     "Error reading note: Access denied: "),
]


def _npm_inspector() -> list[str]:
    """The Inspector's binary as npx installs it: started directly, a call costs 1.2 s and
    0.9 s of CPU less than through npx, which resolves the package again each time."""
    done = subprocess.run(["npx", "-y", "-p", INSPECTOR_PACKAGE, "-c", "command -v mcp-inspector"],
                          capture_output=True, text=True, timeout=600)
    path = done.stdout.strip()
    if done.returncode != 0 or not path:
        sys.exit(f"npx could not provide {INSPECTOR_PACKAGE}: "
                 f"{(done.stderr or done.stdout).strip()}")
    return [path]


class InspectorFailed(RuntimeError):
    """The Inspector exited with an error of its own (its SDK refused the server's answer)."""


def _project(root: Path) -> Path:
    shutil.copytree(PROJECT / "sample_data" / "vault", root / "vault")
    (root / "memory").mkdir()
    config = root / "jarvis.yaml"
    config.write_text(json.dumps({
        "data_dir": "data", "vaults": {"sample": str(root / "vault"),
                                       "memory": str(root / "memory")},
        "repos": {"lumen": {"url": str(PROJECT / "sample_data" / "repos" / "lumen.bundle")}},
        "memory": {"vault": "memory"}}))
    return config


def _inspector(inspector: list[str], config: Path, *args: str) -> tuple[dict, float]:
    env = {**os.environ, "JARVIS_CONFIG": str(config), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run([*inspector, "--cli", JARVIS, "serve", *args], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S + 30)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise InspectorFailed((done.stderr or done.stdout).strip().splitlines()[0])
    return json.loads(done.stdout), seconds


def _call(inspector: list[str], config: Path, name: str,
          arguments: dict[str, str]) -> tuple[dict, float]:
    flags = [flag for key, value in arguments.items() for flag in ("--tool-arg", f"{key}={value}")]
    return _inspector(inspector, config, "--method", "tools/call", "--tool-name", name, *flags)


def _text(answer: dict) -> str:
    return answer["content"][0]["text"] if answer.get("content") else ""


def check_tools(inspector: list[str], config: Path) -> int:
    """List the tools and call each one as from the Inspector's form; the number of failures."""
    failures = 0
    listed, seconds = _inspector(inspector, config, "--method", "tools/list")
    names = sorted(tool["name"] for tool in listed["tools"])
    print(f"tools/list: {len(names)} tools in {seconds:.1f} s: {', '.join(names)}")
    called = {name for name, _ in CALLS} | {"forget"}
    if set(names) != called:
        print(f"tools not called: {sorted(set(names) - called)}; "
              f"called but not listed: {sorted(called - set(names))}")
        failures += 1
    memory = None
    for name, arguments in CALLS + [("forget", {})]:
        if name == "forget":
            arguments = {"memory": memory or "-"}
        answer, seconds = _call(inspector, config, name, arguments)
        structured = answer.get("structuredContent") or {}
        if name == "remember":
            memory = (structured.get("memory") or {}).get("path")
        ok = not answer.get("isError") and seconds < TIMEOUT_S
        failures += not ok
        text = _text(answer)
        print(f"{'ok  ' if ok else 'FAIL'} {name:20} {seconds:5.1f} s  "
              f"{text.splitlines()[0][:90] if text else ''}")
    return failures


def check_errors(inspector: list[str], config: Path) -> int:
    """Make each of FAILING_CALLS and print what the Inspector shows: Jarvis's message, or the
    Inspector's own error when it refused the answer; the number not showing Jarvis's."""
    failures = 0
    for name, arguments, expected in FAILING_CALLS:
        try:
            answer, _ = _call(inspector, config, name, arguments)
            shown = _text(answer)
            ok = answer.get("isError") is True and shown.startswith(expected)
        except InspectorFailed as exc:
            shown, ok = str(exc), False
        failures += not ok
        typed = " ".join(f"{key}={value}" for key, value in arguments.items())
        print(f"{'ok  ' if ok else 'FAIL'} {name} {typed}\n     -> {shown}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inspector", help="an installed mcp-inspector binary")
    parser.add_argument("--config", type=Path, help="an already refreshed project's jarvis.yaml")
    parser.add_argument("--errors-only", action="store_true",
                        help="make only the failing calls")
    options = parser.parse_args()
    inspector = [options.inspector] if options.inspector else _npm_inspector()
    with tempfile.TemporaryDirectory(prefix="jarvis-inspector-") as scratch:
        config = options.config
        if config is None:
            config = _project(Path(scratch))
            subprocess.run([JARVIS, "--config", str(config), "refresh", "--json"], check=True,
                           stdout=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        failures = 0 if options.errors_only else check_tools(inspector, config)
        failures += check_errors(inspector, config)
    print("all calls answered as expected" if not failures else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
