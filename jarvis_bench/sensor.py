"""``jarvis bench sensor``: the vault change sensor's tick time on a generated vault, since an
unchanged vault is what nearly every tick sees and it must stay a cheap stat walk."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import dagster as dg
import yaml

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_assets.sources import ingest_job
from jarvis_core.sources import registry
from jarvis_resources import build_resources
from sensors.source_changes import change_sensor

SOURCE = "bench"
VAULT = registry.kind("vault")
NOTES_PER_FOLDER = 50
UNCHANGED_TICKS = 5


def write_vault(root: Path, notes: int) -> None:
    """Small notes in two levels of folders, as a grown vault has."""
    for index in range(notes):
        folder = root / f"area-{index // (NOTES_PER_FOLDER * 20):02d}" / \
            f"topic-{index // NOTES_PER_FOLDER:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{index:05d}.md").write_text(
            f"# Note {index}\n\nLinks to [[note-{(index + 1) % notes:05d}]].\n")


_SENSOR = change_sensor(VAULT, ingest_job(VAULT))  # vault_changes_sensor


def timed_tick(resources: dict, instance: dg.DagsterInstance,
               cursor: str | None) -> tuple[float, dg.SensorResult]:
    """One evaluation as the daemon runs it: context and resources built, then the sensor."""
    started = time.perf_counter()
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    result = _SENSOR(context)
    return time.perf_counter() - started, result


def run_sensor_benchmark(notes: int = 10_000) -> dict:
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-sensor-") as tmp, \
            dg.DagsterInstance.ephemeral() as instance:
        vault = Path(tmp) / "vault"
        write_vault(vault, notes)
        config_path = Path(tmp) / "jarvis.yaml"
        config_path.write_text(yaml.safe_dump({"data_dir": "data", "vaults": {SOURCE: str(vault)}}))
        resources = {"jarvis": build_resources(str(config_path))["jarvis"]}
        instance.add_dynamic_partitions(source_partitions.name, [SOURCE])
        instance.add_dynamic_partitions(kind_partitions(VAULT).name, [SOURCE])

        first_seconds, first = timed_tick(resources, instance, None)
        unchanged = [timed_tick(resources, instance, first.cursor) for _ in range(UNCHANGED_TICKS)]
        if any(result.run_requests for _, result in unchanged):
            raise RuntimeError("an unchanged vault requested a run")
    seconds = sorted(elapsed for elapsed, _ in unchanged)
    return {"notes": notes, "first_tick_seconds": round(first_seconds, 3),
            "first_tick_runs": len(first.run_requests),
            "unchanged_tick_p50_seconds": round(statistics.median(seconds), 3),
            "unchanged_tick_max_seconds": round(seconds[-1], 3)}
