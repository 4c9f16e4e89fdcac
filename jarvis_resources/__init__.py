"""Dagster resources of Jarvis: the configuration and the DuckDB tables."""

from dagster import ConfigurableResource, EnvVar
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from jarvis_core.config import CONFIG_ENV, JarvisConfig, load_config


class JarvisConfigResource(ConfigurableResource):
    """The sources and settings, read from the configuration file once per process."""

    config_file: str | None = None

    _config: JarvisConfig | None = PrivateAttr(default=None)

    def setup_for_execution(self, context) -> None:
        self._config = load_config(self.config_file)

    def load(self) -> JarvisConfig:
        if self._config is None:
            self._config = load_config(self.config_file)
        return self._config


def build_resources(config: JarvisConfig) -> dict:
    """Resources for one configuration: every store lives under its data directory."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    config_file = str(config.config_path) if config.config_path else EnvVar(CONFIG_ENV)
    return {
        "jarvis": JarvisConfigResource(config_file=config_file),
        "duckdb": DuckDBResource(database=str(config.duckdb_path)),
    }
