"""`jarvis bench startup`: what loading the Dagster definitions costs a fresh process,
against importing Dagster alone, measured in one run (cold processes, median of several)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 5
GOAL_RATIO = 1.5
_COMMANDS = {
    "python": "pass",
    "import_dagster": "import dagster",
    "import_definitions": "import jarvis_definitions",
    "load_definitions": "import jarvis_definitions; jarvis_definitions.defs()",
}


def _timed(code: str, cwd: Path, env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_startup_benchmark(config_file: Path, runs: int = RUNS) -> dict:
    """Median wall and CPU seconds per command, the ratios to a bare `import dagster`, and
    the files importing the definitions created in an empty working directory."""
    project = Path(__file__).resolve().parent.parent
    env = {**os.environ, "JARVIS_CONFIG": str(config_file),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(project),
                                                       os.environ.get("PYTHONPATH")]))}
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-startup-") as scratch:
        cwd = Path(scratch)
        for _ in range(runs):  # interleaved, so machine load hits every command alike
            for name, code in _COMMANDS.items():
                wall, cpu = _timed(code, cwd, env)
                figures.setdefault(name, {"wall": [], "cpu": []})
                figures[name]["wall"].append(wall)
                figures[name]["cpu"].append(cpu)
        created = sorted(path.name for path in cwd.iterdir())
    medians = {name: {f"{kind}_seconds": round(statistics.median(values), 3)
                      for kind, values in samples.items()}
               for name, samples in figures.items()}
    bare = medians["import_dagster"]
    return {
        "runs": runs, **medians,
        "import_ratio_wall": round(medians["import_definitions"]["wall_seconds"]
                                   / bare["wall_seconds"], 3),
        "import_ratio_cpu": round(medians["import_definitions"]["cpu_seconds"]
                                  / bare["cpu_seconds"], 3),
        "load_ratio_wall": round(medians["load_definitions"]["wall_seconds"]
                                 / bare["wall_seconds"], 3),
        "goal_ratio": GOAL_RATIO,
        "files_created_by_import": created,
    }
