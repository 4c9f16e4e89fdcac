"""The Dagster entry point (workspace.yaml) and the one place definitions are assembled.

Importing this module does nothing but import Dagster: the definitions are built when
Dagster asks for them, from the configuration in effect ($JARVIS_CONFIG, else
./jarvis.yaml). Assets, checks, jobs and sensors are found by walking their packages, so
adding one is adding its module; schedules and resources come from the configuration.
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
    from jarvis_resources import build_resources
    from schedules import build_schedules

    with warnings.catch_warnings():  # package autoloading is a preview API of Dagster 1.13
        warnings.simplefilter("ignore", dg.PreviewWarning)
        packages = [dg.load_definitions_from_package_module(package)
                    for package in (jarvis_assets, sensors)]
    config_file = str(config.config_path) if config.config_path else None
    return dg.Definitions.merge(*packages, dg.Definitions(
        schedules=build_schedules(config), resources=build_resources(config_file),
        executor=dg.in_process_executor))


@dg.definitions
def defs() -> dg.Definitions:
    from jarvis_core.config import load_config

    return build_definitions(load_config())
