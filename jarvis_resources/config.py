"""The configuration file, read once per run process."""

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from jarvis_core.config import JarvisConfig, load_config


class JarvisConfigResource(ConfigurableResource):
    """The sources and settings from ``config_file`` ($JARVIS_CONFIG, else ./jarvis.yaml,
    when unset); every other resource takes its settings from here."""

    config_file: str | None = None

    _config: JarvisConfig | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._config = load_config(self.config_file)

    def load(self) -> JarvisConfig:
        if self._config is None:
            self._config = load_config(self.config_file)
        return self._config
