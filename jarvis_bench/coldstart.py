"""``jarvis bench coldstart``: what a person meets first, measured on the published sample
data: cold-process wall and CPU time of the query commands and of a fresh MCP server's first
semantic answer, beside ``python -c pass``, ``python -c "import numpy"`` and the MCP SDK's
own floor: a one-tool ``MCPServer`` answering a constant, timed from spawn to that answer with
the same client.

Each command runs ``runs`` times as a new process, rounds interleaved so that a change in
the machine's load touches every command alike; figures are medians. CPU time is the child's
user + system time (``getrusage(RUSAGE_CHILDREN)`` deltas; for the server, its whole life up
to the exit that follows the first answer). A first, unmeasured round fills the page cache
and records the modules each command imported (a wrapper writes ``sorted(sys.modules)`` at
exit), so the query path can be checked for torch and Dagster.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from jarvis_core.config import JarvisConfig
from jarvis_core.stores import serving

QUERY = "how do we make retried writes safe"
NOTE = "Alerting"  # a note of the sample vault
HEAVY_MODULES = ("torch", "transformers", "sentence_transformers", "dagster")
QUERY_COMMANDS = ("jarvis_keyword", "jarvis_search", "jarvis_hybrid", "jarvis_graph",
                  "jarvis_serve_first_answer")
COLUMNS = ["command", "wall_s", "cpu_s", "modules", "heavy"]
SERVE = "jarvis_serve_first_answer"
SDK_SERVER = "mcp_sdk_first_answer"
# The reference server: importing the SDK, building a server with one tool and serving stdio,
# with nothing of Jarvis. Its tool has the name and argument the measured call uses.
_SDK_SERVER_CODE = ("from mcp.server.mcpserver import MCPServer\n"
                    "server = MCPServer(name='reference')\n"
                    "server.tool(name='search-semantic')(lambda query: 'no answer')\n"
                    "server.run('stdio')\n")
# Run as `python -c`: the command's own code, then the module list written at exit.
_DUMP_MODULES = ("import atexit, json, os, sys\n"
                 "atexit.register(lambda: open(os.environ['JARVIS_BENCH_MODULES'], 'w')"
                 ".write(json.dumps(sorted(sys.modules))))\n")


class ColdstartError(RuntimeError):
    """A measured command failed; the message holds its error output."""


def _commands(config: JarvisConfig) -> dict[str, list[str]]:
    """name -> the argument list of each measured process (the server is started apart)."""
    python = sys.executable
    jarvis = str(Path(sys.executable).parent / "jarvis")
    query = [jarvis, "--config", str(config.config_path)]
    return {"python_pass": [python, "-c", "pass"],
            "python_import_numpy": [python, "-c", "import numpy"],
            "jarvis_help": [jarvis, "--help"],
            "jarvis_keyword": [*query, "keyword", QUERY],
            "jarvis_search": [*query, "search", QUERY],
            "jarvis_hybrid": [*query, "hybrid", QUERY],
            "jarvis_graph": [*query, "graph", NOTE]}


def _servers(config: JarvisConfig) -> dict[str, list[str]]:
    """name -> the argument list of each measured MCP server."""
    return {SERVE: [str(Path(sys.executable).parent / "jarvis"), "--config",
                    str(config.config_path), "serve"],
            SDK_SERVER: [sys.executable, "-c", _SDK_SERVER_CODE]}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_process(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``command``."""
    cpu, started = _child_cpu(), time.perf_counter()
    completed = subprocess.run(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - started
    if completed.returncode != 0:
        raise ColdstartError(f"{' '.join(command)} failed: {completed.stderr.strip()[-2000:]}")
    return wall, _child_cpu() - cpu


async def _first_answer(command: list[str], env: dict[str, str]) -> dict:
    """Spawn the server, initialize, list the tools, make one semantic search: the wall
    time of each step from the spawn."""
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=300) as session:
                await session.initialize()
                initialized = time.perf_counter()
                await session.list_tools()
                listed = time.perf_counter()
                result = await session.call_tool("search-semantic", {"query": QUERY})
                answered = time.perf_counter()
    if result.is_error:
        raise ColdstartError(f"search-semantic failed: {result.content[0].text}")
    return {"initialize_s": initialized - started, "tools_list_s": listed - started,
            "wall_s": answered - started}


def _run_server(command: list[str], env: dict[str, str]) -> tuple[float, float, dict]:
    cpu = _child_cpu()
    steps = anyio.run(_first_answer, command, env)
    return steps["wall_s"], _child_cpu() - cpu, steps


def _modules(run: Callable[[dict[str, str]], object], env: dict[str, str]) -> list[str]:
    """The modules a run imported, from the list its wrapper wrote at exit."""
    with tempfile.TemporaryDirectory(prefix="jarvis-coldstart-") as scratch:
        listing = Path(scratch) / "modules.json"
        run({**env, "JARVIS_BENCH_MODULES": str(listing)})
        return json.loads(listing.read_text())


def _wrapped(command: list[str]) -> list[str]:
    """``command`` run through the module-listing wrapper (same interpreter, same code)."""
    if command[1] == "-c":
        return [sys.executable, "-c", _DUMP_MODULES + command[2]]
    return [sys.executable, "-c", _DUMP_MODULES + "from jarvis_cli.main import cli\n"
            f"cli({command[1:]!r}, prog_name='jarvis')\n"]


def _summary(walls: list[float], cpus: list[float], modules: list[str]) -> dict:
    packages = sorted({name.split(".")[0] for name in modules})
    return {"wall_s": round(statistics.median(walls), 3),
            "cpu_s": round(statistics.median(cpus), 3),
            "wall_runs": [round(w, 3) for w in walls], "cpu_runs": [round(c, 3) for c in cpus],
            "modules": len(modules), "packages": packages,
            "heavy": [name for name in HEAVY_MODULES if name in packages]}


def _ratios(commands: dict[str, dict]) -> dict[str, float]:
    def ratio(top: str, bottom: str, figure: str) -> float:
        return round(commands[top][figure] / commands[bottom][figure], 2)

    return {f"{name}_{figure.removesuffix('_s')}": ratio(top, bottom, figure)
            for name, top, bottom in (
                ("search_over_keyword", "jarvis_search", "jarvis_keyword"),
                ("search_over_numpy", "jarvis_search", "python_import_numpy"),
                ("mcp_first_answer_over_search", SERVE, "jarvis_search"),
                ("mcp_first_answer_over_sdk_server", SERVE, SDK_SERVER))
            for figure in ("wall_s", "cpu_s")}


def run_coldstart_benchmark(config: JarvisConfig, runs: int = 5) -> dict:
    """Figures of every command (medians of ``runs`` cold runs), the Done-when ratios of
    issue 13, and the heavy modules any query command imported."""
    version = serving.current_version(config.data_dir)  # NotPublished: nothing to measure
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    commands = _commands(config)
    servers = _servers(config)
    walls: dict[str, list[float]] = {name: [] for name in [*commands, *servers]}
    cpus: dict[str, list[float]] = {name: [] for name in walls}
    steps: dict[str, list[dict]] = {name: [] for name in servers}
    # round 0, not counted, fills the page cache and lists the modules each command imports
    modules = {name: _modules(lambda e, c=command: _run_process(_wrapped(c), e), env)
               for name, command in commands.items()}
    modules |= {name: _modules(lambda e, c=command: _run_server(_wrapped(c), e), env)
                for name, command in servers.items()}
    for _ in range(runs):
        for name, command in commands.items():
            wall, cpu = _run_process(command, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
        for name, command in servers.items():
            wall, cpu, server_steps = _run_server(command, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
            steps[name].append(server_steps)
    figures = {name: _summary(walls[name], cpus[name], modules[name]) for name in walls}
    for name in servers:
        for step in ("initialize_s", "tools_list_s"):
            figures[name][step] = round(statistics.median(s[step] for s in steps[name]), 3)
    return {
        "data_dir": str(config.data_dir), "version": version.name,
        "encoder": version.manifest.get("encoder"), "runs": runs,
        "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
        "commands": figures, "ratios": _ratios(figures),
        "heavy_modules_imported": sorted({name for command in QUERY_COMMANDS
                                          for name in figures[command]["heavy"]}),
    }
