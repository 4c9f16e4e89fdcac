"""Jarvis configuration: one YAML file naming the sources, validated with pydantic.

Resolution order for the file: an explicit path, then ``$JARVIS_CONFIG``, then
``jarvis.yaml`` in the working directory. The data directory holding every store is
``$JARVIS_HOME`` when set, else ``data_dir`` from the file (relative to the file),
else ``.jarvis`` beside the file. ``$QDRANT_URL`` overrides ``vectors.url``.

This module is the only reader of Jarvis's environment variables: credentials and
server addresses that never belong in the file (``EnvironmentSettings``) are read here
once, with the file, so every layer sees one consistent configuration.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from jarvis_core.assistant_settings import AssistantSections

CONFIG_ENV = "JARVIS_CONFIG"
HOME_ENV = "JARVIS_HOME"
QDRANT_URL_ENV = "QDRANT_URL"
QDRANT_API_KEY_ENV = "QDRANT_API_KEY"
NEO4J_URI_ENV = "NEO4J_URI"
NEO4J_USER_ENV = "NEO4J_USER"
NEO4J_PASSWORD_ENV = "NEO4J_PASSWORD"
WEBHOOK_ENV = "JARVIS_WEBHOOK_URL"
CACHE_ENV = "JARVIS_CACHE_DIR"
DEFAULT_CONFIG_NAME = "jarvis.yaml"
DEFAULT_DATA_DIR = ".jarvis"
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# scheme://… or scp-like user@host:path; anything else is a local path (a bundle, a clone).
_REMOTE_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://|[^/\s]+@[^/\s]+:)")
_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ConfigError(ValueError):
    """A configuration problem, with a message naming the file and the field."""


def _valid_source_name(name: str) -> str:
    if not _SOURCE_NAME.match(name):
        raise ValueError(
            f"source name {name!r} must be 1-64 characters of letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (it becomes a Dagster partition key)"
        )
    return name


SourceName = Annotated[str, AfterValidator(_valid_source_name)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VaultConfig(_Strict):
    """An Obsidian-style vault: a folder of markdown notes and attachments."""

    path: Path
    exclude: tuple[str, ...] = (".obsidian/**", ".trash/**", ".git/**", "**/node_modules/**")

    @field_validator("path")
    @classmethod
    def _must_be_directory(cls, path: Path) -> Path:
        # A missing folder (an unmounted drive) fails only this source's runs, not the
        # configuration, so the other sources, sensors and the query side go on.
        if path.exists() and not path.is_dir():
            raise ValueError(f"vault path is not a directory: {path}")
        return path


SOURCE_KINDS = ("vault", "repo", "tickets", "mail", "confluence")
DEFAULT_REPO_DOCS = ("README*", "docs/**/*.md")


class RepoConfig(_Strict):
    """A git repository: a local clone at ``path``, or a ``url`` cloned into the data
    directory on the first refresh (and fetched on later ones)."""

    path: Path | None = None
    url: str | None = None
    branch: str = Field(default="HEAD", min_length=1)
    docs: tuple[str, ...] = DEFAULT_REPO_DOCS
    knowledge_dir: str = ".jarvis"
    exclude: tuple[str, ...] = ()

    @field_validator("path")
    @classmethod
    def _must_be_directory(cls, path: Path | None) -> Path | None:
        if path is not None and path.exists() and not path.is_dir():  # missing: see vaults
            raise ValueError(f"repository path is not a directory: {path}")
        return path

    @model_validator(mode="after")
    def _path_or_url(self) -> RepoConfig:
        if self.path is None and self.url is None:
            raise ValueError("a repository needs a 'path' (a local clone) or a 'url' to clone")
        return self


class TicketsConfig(_Strict):
    """A ticket export: one JSON file or a folder of them (Jira REST issues or GitHub issues).
    ``repo`` is the GitHub owner/repo or short name tickets are cited by (``lumen#7``)."""

    path: Path
    format: Literal["auto", "jira", "github"] = "auto"
    repo: str | None = None


class MailConfig(_Strict):
    """Mail: an mbox file, one ``.eml`` file, or a folder read recursively for mbox files,
    Maildir folders and ``.eml`` files."""

    path: Path


class ConfluenceConfig(_Strict):
    """A Confluence export: the HTML space export (a zip or its unpacked folder) or REST
    content JSON (a file or a folder of them)."""

    path: Path


class IngestSettings(_Strict):
    """Limits that keep one bad file or item from hurting a run (README, "Limits")."""

    max_note_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    max_failed_ratio: float = Field(default=0.05, ge=0, le=1)
    max_links_per_note: int = Field(default=10_000, gt=0)  # wikilinks, embeds, links, relations
    max_ticket_chars: int = Field(default=200_000, gt=0)  # description, then comments, cut here
    max_item_seconds: float = Field(default=60.0, gt=0)  # CPU seconds to parse a note or ticket


class ChunkSettings(_Strict):
    """Chunk sizes in the embedding model's own tokens (special tokens included)."""

    max_tokens: int | None = Field(
        default=None, gt=16, description="defaults to the model's max_seq_length"
    )
    overlap_tokens: int = Field(default=32, ge=0)


class EmbeddingSettings(_Strict):
    """The sentence-transformers model: a Hugging Face id or a local directory."""

    model: str = DEFAULT_MODEL
    device: str = "cpu"
    batch_size: int = Field(default=32, gt=0)
    backend: Literal["auto", "torch-fp32", "torch-bf16", "openvino"] = "auto"
    cache: bool = Field(default=True, description="reuse vectors of texts embedded before "
                        "(a renamed note, a rebuilt store) from the cache directory")


class VectorSettings(_Strict):
    """Where vectors live: an embedded Qdrant Edge shard under the data directory, or a
    Qdrant server when ``url`` (or $QDRANT_URL) is set; its API key comes from
    $QDRANT_API_KEY only, never from this file."""

    url: str | None = None


class GraphSettings(_Strict):
    """Graph extraction; Neo4j is used instead of the embedded store when $NEO4J_URI is set
    (with $NEO4J_USER and $NEO4J_PASSWORD; credentials never live in this file)."""

    relation_fields: tuple[str, ...] = (
        "related", "up", "parent", "down", "next", "prev", "source", "author")
    max_broken_link_ratio: float = Field(default=0.2, ge=0, le=1)
    similarity_top_k: int = Field(default=0, ge=0, description="0 turns SIMILAR_TO edges off")
    similarity_threshold: float = Field(default=0.8, ge=-1, le=1)


class AnalyticsSettings(_Strict):
    """Vault analytics snapshots: what counts as stale, how communities are found, how much
    history is kept."""

    stale_after_days: int = Field(default=30, gt=0)
    stale_min_links_in: int = Field(default=3, ge=1, description="'highly linked' threshold")
    community_resolution: float = Field(default=1.0, gt=0)
    community_seed: int = 42
    top_n: int = Field(default=10, gt=0, description="rows in the hub and quality lists")
    keep_snapshots: int = Field(default=100, gt=0, description="history kept per source")


def _known_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r} (use an IANA name such as "
                         "'Europe/Berlin')") from exc
    return name


class ScheduleSettings(_Strict):
    """When a schedule fires: a cron expression in an IANA timezone (checked when the
    definitions are built)."""

    cron: str
    timezone: Annotated[str, AfterValidator(_known_timezone)] = "UTC"


class SchedulesSettings(_Strict):
    """The periodic runs behind the change sensors."""

    refresh: ScheduleSettings = ScheduleSettings(cron="0 3 * * *")
    analytics: ScheduleSettings = ScheduleSettings(cron="30 6 * * *")


class InstanceSettings(_Strict):
    """The Dagster instance `jarvis refresh` records its runs in (README, "Open the UI")."""

    fast_storage: bool = True  # false: Dagster's stock SQLite storages, no private API


class EnvironmentSettings(_Strict):
    """Secrets and server addresses, from the environment only (never from the file):
    the Qdrant API key, the Neo4j server (the graph lives there when ``neo4j_uri`` is set),
    the webhook that failure notices are POSTed to, and a cache directory shared by
    several data directories."""

    qdrant_api_key: str | None = None
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
    webhook_url: str | None = None
    cache_dir: Path | None = None

    @classmethod
    def from_environ(cls) -> EnvironmentSettings:
        return cls(qdrant_api_key=os.environ.get(QDRANT_API_KEY_ENV) or None,
                   neo4j_uri=os.environ.get(NEO4J_URI_ENV) or None,
                   neo4j_user=os.environ.get(NEO4J_USER_ENV) or "neo4j",
                   neo4j_password=os.environ.get(NEO4J_PASSWORD_ENV, ""),
                   webhook_url=os.environ.get(WEBHOOK_ENV) or None,
                   cache_dir=Path(os.environ[CACHE_ENV]).expanduser().resolve()
                   if os.environ.get(CACHE_ENV) else None)


class JarvisConfig(_Strict, AssistantSections):
    """The whole validated configuration; paths are absolute."""

    config_path: Path | None = None
    data_dir: Path
    vaults: dict[SourceName, VaultConfig] = Field(default_factory=dict)
    repos: dict[SourceName, RepoConfig] = Field(default_factory=dict)
    tickets: dict[SourceName, TicketsConfig] = Field(default_factory=dict)
    mail: dict[SourceName, MailConfig] = Field(default_factory=dict)
    confluence: dict[SourceName, ConfluenceConfig] = Field(default_factory=dict)
    ingest: IngestSettings = IngestSettings()
    chunking: ChunkSettings = ChunkSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    vectors: VectorSettings = VectorSettings()
    graph: GraphSettings = GraphSettings()
    analytics: AnalyticsSettings = AnalyticsSettings()
    schedules: SchedulesSettings = SchedulesSettings()
    instance: InstanceSettings = InstanceSettings()
    environment: EnvironmentSettings = Field(default_factory=EnvironmentSettings, repr=False)

    @model_validator(mode="after")
    def _overlap_below_chunk_size(self) -> JarvisConfig:
        max_tokens = self.chunking.max_tokens
        if max_tokens is not None and self.chunking.overlap_tokens >= max_tokens // 2:
            raise ValueError(
                "chunking.overlap_tokens must be less than half of chunking.max_tokens")
        return self

    @model_validator(mode="after")
    def _unique_source_names(self) -> JarvisConfig:
        kinds: dict[str, list[str]] = {}
        for kind, section in zip(SOURCE_KINDS, self._sections(), strict=True):
            for name in section:
                kinds.setdefault(name, []).append(kind)
        clashes = [f"{name!r} is configured as {' and as '.join(found)}"
                   for name, found in sorted(kinds.items()) if len(found) > 1]
        if clashes:
            raise ValueError("source names must be unique across vaults, repos, tickets, "
                             "mail and confluence: "
                             + "; ".join(clashes))
        return self

    def _sections(self) -> tuple[dict, ...]:
        return self.vaults, self.repos, self.tickets, self.mail, self.confluence

    @property
    def source_names(self) -> list[str]:
        """Every configured source, of every kind."""
        return sorted(name for section in self._sections() for name in section)

    def source_kind(self, name: str) -> str | None:
        """One of SOURCE_KINDS; None for a name that is not configured."""
        for kind, section in zip(SOURCE_KINDS, self._sections(), strict=True):
            if name in section:
                return kind
        return None

    def repo_checkout(self, name: str) -> Path:
        """Where a repository is read: its ``path``, else its clone under the data directory."""
        repo = self.repos[name]
        return repo.path if repo.path is not None else self.data_dir / "repos" / name

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


def _expand_sources(raw: object, base: Path, section: str) -> dict:
    """Accept ``name: path`` as shorthand for ``name: {path: path}``; make paths absolute."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"'{section}' must be a mapping of source name to path or settings")
    expanded = {}
    for name, spec in raw.items():
        spec = {"path": spec} if isinstance(spec, (str, os.PathLike)) else spec
        if isinstance(spec, dict) and spec.get("path") is not None:
            spec = {**spec, "path": _absolute(base, spec["path"])}
        if isinstance(spec, dict) and isinstance(spec.get("url"), str) \
                and not _REMOTE_URL.match(spec["url"]):
            spec = {**spec, "url": str(_absolute(base, spec["url"]))}  # a local repo or bundle
        expanded[str(name)] = spec
    return expanded


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
        raw = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
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
    try:
        vectors = raw.get("vectors") or {}
        if os.environ.get(QDRANT_URL_ENV) and isinstance(vectors, dict):
            vectors = {**vectors, "url": os.environ[QDRANT_URL_ENV]}
        values = {**raw, "data_dir": data_dir, "config_path": config_path,
                  **{section: _expand_sources(raw.get(section), base_dir, section)
                     for section in ("vaults", "repos", "tickets", "mail", "confluence")},
                  "vectors": vectors, "environment": EnvironmentSettings.from_environ()}
        return JarvisConfig.model_validate(values)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from exc
