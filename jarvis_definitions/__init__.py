"""The Dagster entry point (workspace.yaml) and the one place definitions are assembled.

Importing this module does nothing but import Dagster: the definitions are built when
Dagster asks for them, from the configuration in effect ($JARVIS_CONFIG, else
./jarvis.yaml). Assets, checks, jobs and sensors are found by walking their packages, so
adding one is adding its module; what each source kind has (its raw asset and checks, its
ingest job, its change sensor, the text layer's dependency on it) is made from the
registered kinds; schedules and resources come from the configuration.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from jarvis_core.config import JarvisConfig


def build_definitions(config: JarvisConfig) -> dg.Definitions:
    """Every Dagster object of Jarvis, bound to the configuration file ``config`` was read
    from (its resources read it again when a run starts)."""
    import jarvis_assets
    import sensors
    from jarvis_assets.chunks import chunks_asset
    from jarvis_assets.sources import ingest_job, raw_layer
    from jarvis_core.sources import registry
    from jarvis_resources import build_resources
    from schedules import build_schedules
    from sensors.source_changes import change_sensor
    from sensors.source_partitions import source_partitions_sensor

    with warnings.catch_warnings():  # package autoloading is a preview API of Dagster 1.13
        warnings.simplefilter("ignore", dg.PreviewWarning)
        packages = [dg.load_definitions_from_package_module(package)
                    for package in (jarvis_assets, sensors)]
        kinds = registry.kinds()  # partitioned checks are a preview API too
        raw = raw_layer(kinds)
    ingest_jobs = {kind.name: ingest_job(kind) for kind in kinds}
    config_file = str(config.config_path) if config.config_path else None
    return dg.Definitions.merge(*packages, raw, dg.Definitions(
        assets=[chunks_asset(kinds)], jobs=list(ingest_jobs.values()),
        sensors=[source_partitions_sensor(kinds, list(ingest_jobs.values())),
                 *(change_sensor(kind, ingest_jobs[kind.name]) for kind in kinds)],
        schedules=build_schedules(config, ingest_jobs), resources=build_resources(config_file),
        executor=dg.in_process_executor))


@dg.definitions
def defs() -> dg.Definitions:
    """What Dagster's processes load (the UI's, the daemon's and their runs'): they collect
    garbage as `jarvis` does."""
    from jarvis_core.config import load_config
    from jarvis_core.garbage_collection import collect_less_often

    collect_less_often()
    return build_definitions(load_config())
