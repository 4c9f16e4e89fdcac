"""The Dagster entry point, loaded by workspace.yaml, for the configuration in effect
($JARVIS_CONFIG, else ./jarvis.yaml)."""

from jarvis_assets.definitions import build_definitions
from jarvis_core.config import load_config

defs = build_definitions(load_config())
