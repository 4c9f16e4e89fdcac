"""Jarvis configuration: one YAML file naming the sources, validated with pydantic.

Resolution order for the file: an explicit path, then ``$JARVIS_CONFIG``, then
``jarvis.yaml`` in the working directory. The data directory holding every store is
``$JARVIS_HOME`` when set, else ``data_dir`` from the file (relative to the file),
else ``.jarvis`` beside the file. ``$QDRANT_URL`` overrides ``vectors.url``.

Sources are configured by kind, one section each (``vaults:``, ``repos:``, ...): the
sections and what an entry holds come from the registered kinds
(jarvis_core/sources/registry.py); everything else is jarvis_core/settings.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import Field, SerializeAsAny, ValidationError, model_validator

from jarvis_core.assistant_settings import AssistantSections
from jarvis_core.settings import (
    CONFIG_ENV,
    DEFAULT_CONFIG_NAME,
    DEFAULT_DATA_DIR,
    HOME_ENV,
    NEO4J_PASSWORD_ENV,
    NEO4J_URI_ENV,
    NEO4J_USER_ENV,
    QDRANT_API_KEY_ENV,
    QDRANT_URL_ENV,
    WEBHOOK_ENV,
    AnalyticsSettings,
    ChunkSettings,
    ConfigError,
    EmbeddingSettings,
    EnvironmentSettings,
    GraphSettings,
    IngestSettings,
    InstanceSettings,
    ResourceSettings,
    SchedulesSettings,
    SourceName,
    SourceSettings,
    VectorSettings,
)
from jarvis_core.sources import registry
from jarvis_core.sources.kind import SourceKind

# libyaml's loader where PyYAML has it: a tenth of the pure-Python one's time, and every run
# of a refresh reads the file again.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class JarvisConfig(AssistantSections):
    """The whole validated configuration; paths are absolute. ``sources`` holds every
    configured source by name, each entry of its kind's settings type."""

    config_path: Path | None = None
    data_dir: Path
    sources: dict[SourceName, SerializeAsAny[SourceSettings]] = Field(default_factory=dict)
    ingest: IngestSettings = IngestSettings()
    chunking: ChunkSettings = ChunkSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    vectors: VectorSettings = VectorSettings()
    graph: GraphSettings = GraphSettings()
    analytics: AnalyticsSettings = AnalyticsSettings()
    schedules: SchedulesSettings = SchedulesSettings()
    instance: InstanceSettings = InstanceSettings()
    resources: ResourceSettings = ResourceSettings()
    environment: EnvironmentSettings = Field(default_factory=EnvironmentSettings, repr=False)

    @model_validator(mode="after")
    def _overlap_below_chunk_size(self) -> JarvisConfig:
        max_tokens = self.chunking.max_tokens
        if max_tokens is not None and self.chunking.overlap_tokens >= max_tokens // 2:
            raise ValueError(
                "chunking.overlap_tokens must be less than half of chunking.max_tokens")
        return self

    @property
    def source_names(self) -> list[str]:
        """Every configured source, of every kind."""
        return sorted(self.sources)

    def source_kind(self, name: str) -> str | None:
        """The kind's name (``SourceKind.name``); None for a name that is not configured."""
        settings = self.sources.get(name)
        return settings.kind if settings is not None else None

    def kind_of(self, name: str) -> SourceKind | None:
        """The descriptor of a configured source's kind; None for a name not configured."""
        kind = self.source_kind(name)
        return registry.kind(kind) if kind is not None else None

    def sources_of(self, kind: str) -> dict[str, SourceSettings]:
        """The sources of one kind, by name."""
        return {name: settings for name, settings in sorted(self.sources.items())
                if settings.kind == kind}

    @property
    def duckdb_path(self) -> Path:
        return self.data_dir / "jarvis.duckdb"

    @property
    def vectors_path(self) -> Path:
        return self.data_dir / "vectors"

    @property
    def graph_path(self) -> Path:
        return self.data_dir / "graph" / "graph.sqlite"

    @property
    def keyword_path(self) -> Path:
        return self.data_dir / "keyword"

    @property
    def cache_dir(self) -> Path:
        """Derived artefacts that can be rebuilt (models converted for OpenVINO, the query
        model exported for ONNX Runtime): $JARVIS_CACHE_DIR when set, so several data
        directories share them, else under the data directory."""
        return self.environment.cache_dir or self.data_dir / "cache"

    @property
    def notifications_path(self) -> Path:
        return self.data_dir / "notifications.sqlite"


def _absolute(base: Path, value: str | os.PathLike) -> Path:
    path = Path(os.path.expanduser(os.fspath(value)))
    return (path if path.is_absolute() else base / path).resolve()


def _sources(raw: dict, base: Path) -> dict[str, SourceSettings]:
    """Every kind's section validated into one mapping of source name to settings. An entry
    may be a bare path (``name: path``); paths are made absolute from ``base``."""
    sources: dict[str, SourceSettings] = {}
    kinds: dict[str, list[str]] = {}
    problems: list[str] = []
    for kind in registry.kinds():
        section = raw.get(kind.section)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise ConfigError(f"'{kind.section}' must be a mapping of source name to path or "
                              "settings")
        for name, spec in section.items():
            name = str(name)
            spec = {"path": spec} if isinstance(spec, (str, os.PathLike)) else spec
            if isinstance(spec, dict):
                if spec.get("path") is not None:
                    spec = {**spec, "path": _absolute(base, spec["path"])}
                spec = kind.settings.expand(spec, lambda value: _absolute(base, value))
            kinds.setdefault(name, []).append(kind.name)
            try:
                sources[name] = kind.settings.model_validate(spec)
            except ValidationError as exc:
                problems += [f"{kind.section}.{name}"
                             + "".join(f".{part}" for part in err["loc"]) + f": {err['msg']}"
                             for err in exc.errors()]
    clashes = [f"{name!r} is configured as {' and as '.join(found)}"
               for name, found in sorted(kinds.items()) if len(found) > 1]
    if clashes:
        problems.append("source names must be unique across "
                        + ", ".join(kind.section for kind in registry.kinds()) + ": "
                        + "; ".join(clashes))
    if problems:
        raise ConfigError("; ".join(problems))
    return sources


def find_config_path(explicit: str | os.PathLike | None = None) -> Path:
    candidate = explicit or os.environ.get(CONFIG_ENV) or Path.cwd() / DEFAULT_CONFIG_NAME
    path = Path(candidate).expanduser().resolve()
    if not path.is_file():
        hint = "" if explicit or os.environ.get(CONFIG_ENV) else (
            f" (set {CONFIG_ENV} or run from a directory holding {DEFAULT_CONFIG_NAME})"
        )
        raise ConfigError(f"configuration file not found: {path}{hint}")
    return path


def load_config(path: str | os.PathLike | None = None) -> JarvisConfig:
    """Read, expand and validate the configuration file; raise ConfigError on any problem."""
    config_path = find_config_path(path)
    try:
        raw = yaml.load(config_path.read_text(encoding="utf-8"), Loader=_YAML_LOADER) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{config_path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{config_path}: the top level must be a mapping")
    return config_from_mapping(raw, base_dir=config_path.parent, config_path=config_path)


def config_from_mapping(
    raw: dict, *, base_dir: Path, config_path: Path | None = None
) -> JarvisConfig:
    """Validate an already-parsed mapping; relative paths are taken from ``base_dir``."""
    where = str(config_path) if config_path else "configuration"
    home = os.environ.get(HOME_ENV)
    data_dir = _absolute(Path.cwd(), home) if home else _absolute(
        base_dir, raw.get("data_dir", DEFAULT_DATA_DIR)
    )
    if "environment" in raw:
        raise ConfigError(f"{where}: 'environment' cannot be set in the file: credentials and "
                          f"servers come from {QDRANT_API_KEY_ENV}, {NEO4J_URI_ENV}, "
                          f"{NEO4J_USER_ENV}, {NEO4J_PASSWORD_ENV} and {WEBHOOK_ENV}")
    if "sources" in raw:
        raise ConfigError(f"{where}: sources are configured by kind: "
                          + ", ".join(f"'{kind.section}:'" for kind in registry.kinds()))
    sections = {kind.section for kind in registry.kinds()}
    try:
        vectors = raw.get("vectors") or {}
        if os.environ.get(QDRANT_URL_ENV) and isinstance(vectors, dict):
            vectors = {**vectors, "url": os.environ[QDRANT_URL_ENV]}
        values = {**{key: value for key, value in raw.items() if key not in sections},
                  "data_dir": data_dir, "config_path": config_path,
                  "sources": _sources(raw, base_dir), "vectors": vectors,
                  "environment": EnvironmentSettings.from_environ()}
        return JarvisConfig.model_validate(values)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from exc
