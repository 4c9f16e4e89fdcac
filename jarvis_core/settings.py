"""The settings every layer shares, below the source kinds: limits, chunking, the model,
stores, graph, analytics, schedules and the environment's secrets. A source kind's own
settings (a vault's folder, a repository's branch) live in its folder and build on
``Strict``; ``jarvis_core.config`` assembles the whole configuration from both.

This module and ``jarvis_core.config`` are the only readers of Jarvis's environment
variables: credentials and server addresses that never belong in the file
(``EnvironmentSettings``) are read once, with the file, so every layer sees one
consistent configuration.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ClassVar, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from jarvis_core.embedding_devices import valid_device

CONFIG_ENV = "JARVIS_CONFIG"
HOME_ENV = "JARVIS_HOME"
QDRANT_URL_ENV = "QDRANT_URL"
QDRANT_API_KEY_ENV = "QDRANT_API_KEY"
NEO4J_URI_ENV = "NEO4J_URI"
NEO4J_USER_ENV = "NEO4J_USER"
NEO4J_PASSWORD_ENV = "NEO4J_PASSWORD"
WEBHOOK_ENV = "JARVIS_WEBHOOK_URL"
CACHE_ENV = "JARVIS_CACHE_DIR"
# What a cache directory holds: converted models, exported query models, vectors by text
# (another cache can start as a copy of them: the tests' and the load benchmark's do).
MODEL_CACHE_PARTS = ("openvino", "query-model", "embeddings")
DEFAULT_CONFIG_NAME = "jarvis.yaml"
DEFAULT_DATA_DIR = ".jarvis"
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
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


class Strict(BaseModel):
    """A configuration section: unknown keys are errors, values never change after loading."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceSettings(Strict):
    """One source's entry in its kind's section of jarvis.yaml; ``kind`` names the kind
    (jarvis_core/sources/registry.py). Most kinds read a ``path``."""

    kind: ClassVar[str]

    @property
    def location(self) -> str:
        """Where the source is read, for listings."""
        return str(self.path)

    @classmethod
    def expand(cls, spec: dict, absolute: Callable[[str], Path]) -> dict:
        """The entry with its paths made absolute (``path`` is already); a kind with other
        paths overrides this."""
        return spec


class IngestSettings(Strict):
    """Limits that keep one bad file or item from hurting a run (README, "Limits")."""

    max_note_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    max_failed_ratio: float = Field(default=0.05, ge=0, le=1)
    max_links_per_note: int = Field(default=10_000, gt=0)  # wikilinks, embeds, links, relations
    max_ticket_chars: int = Field(default=200_000, gt=0)  # description, then comments, cut here
    max_item_seconds: float = Field(default=60.0, gt=0)  # CPU seconds to parse a note or ticket


class ChunkSettings(Strict):
    """Chunk sizes in the embedding model's own tokens (special tokens included)."""

    max_tokens: int | None = Field(
        default=None, gt=16, description="defaults to the model's max_seq_length"
    )
    overlap_tokens: int = Field(default=32, ge=0)


class EmbeddingSettings(Strict):
    """The sentence-transformers model: a Hugging Face id or a local directory."""

    model: str = DEFAULT_MODEL
    # jarvis_core/embedding_devices.py: auto takes a GPU torch or OpenVINO finds, else the CPU
    device: Annotated[str, AfterValidator(valid_device)] = "auto"
    batch_size: int | None = Field(default=None, gt=0, description="defaults to 32 on the "
                                   "CPU, more on a GPU from its memory")
    # jarvis_core/embedding_backends.py: what each is, and what auto takes on which CPU
    backend: Literal["auto", "openvino", "openvino-bf16", "torch-fp32", "torch-bf16",
                     "torch-fp16", "openvino-f16", "hashed-ngrams"] = "auto"
    cache: bool = Field(default=True, description="reuse vectors of texts embedded before "
                        "(a renamed note, a rebuilt store) from the cache directory")


class VectorSettings(Strict):
    """Where vectors live: an embedded Qdrant Edge shard under the data directory, or a
    Qdrant server when ``url`` (or $QDRANT_URL) is set; its API key comes from
    $QDRANT_API_KEY only, never from this file."""

    url: str | None = None


class GraphSettings(Strict):
    """Graph extraction; Neo4j is used instead of the embedded store when $NEO4J_URI is set
    (with $NEO4J_USER and $NEO4J_PASSWORD; credentials never live in this file)."""

    relation_fields: tuple[str, ...] = (
        "related", "up", "parent", "down", "next", "prev", "source", "author")
    max_broken_link_ratio: float = Field(default=0.2, ge=0, le=1)
    similarity_top_k: int = Field(default=0, ge=0, description="0 turns SIMILAR_TO edges off")
    similarity_threshold: float = Field(default=0.8, ge=-1, le=1)


class AnalyticsSettings(Strict):
    """Vault analytics snapshots: what counts as stale, how communities are found, how much
    history is kept."""

    stale_after_days: int = Field(default=30, gt=0)
    stale_min_links_in: int = Field(default=3, ge=1, description="'highly linked' threshold")
    community_resolution: float = Field(default=1.0, gt=0)
    community_seed: int = 42
    top_n: int = Field(default=10, gt=0, description="rows in the hub and quality lists")
    keep_snapshots: int = Field(default=100, gt=0, description="history kept per source")


MIN_MEMORY_MB = 256  # below this the process's own floor (Python, Dagster) leaves nothing


class ResourceSettings(Strict):
    """How much memory a refresh process may take (docs/configuration.md, "resources").
    DuckDB gets a quarter of it as its ``memory_limit`` and spills to a temporary directory
    under the data directory beyond that, instead of growing; the embedder's inference
    streams and their batches and the rows the graph layer reads at a time follow it."""

    max_memory_mb: int = Field(default=2048, ge=MIN_MEMORY_MB)

    @property
    def duckdb_memory_mb(self) -> int:
        return self.max_memory_mb // 4

    @property
    def inference_streams(self) -> int:
        """OpenVINO inference streams the embedder may run at once: one per GB of the budget
        (each holds about 150 MB of buffers at 32 chunks a batch, measured; the machine's
        own choice is one per core), at least one."""
        return max(1, self.max_memory_mb // 1024)

    @property
    def embedding_batch(self) -> int:
        """Chunks a CPU inference stream embeds at once: one per 64 MB of the budget, from 8
        to 32 (32 at the default). A stream's buffers grow with it: embedding 300 chunks of up
        to 256 tokens on one stream took a process to 330 MB of anonymous memory in batches
        of 32, 254 MB in 16, 209 MB in 8 (measured)."""
        return min(32, max(8, self.max_memory_mb // 64))

    @property
    def batch_documents(self) -> int:
        """Documents chunked at a time: 2 per MB of the budget (4,096 at the default), about
        5 chunks each, a batch's texts and chunk rows some tens of MB."""
        return self.max_memory_mb * 2

    @property
    def vector_part_points(self) -> int:
        """Points in one part of the vector store (131,072 at the default): the publish
        builds one part's index at a time (100k points' build alone peaked at 633 MB; a 1M
        publish in parts of this size at 2.0 GB, measured)."""
        return self.max_memory_mb * 64

    @property
    def batch_rows(self) -> int:
        """Rows read from the tables at a time: 16 per MB of the budget (32,768 at the
        default), a few MB of Python objects a batch."""
        return self.max_memory_mb * 16


def _known_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r} (use an IANA name such as "
                         "'Europe/Berlin')") from exc
    return name


Timezone = Annotated[str, AfterValidator(_known_timezone)]


class ScheduleSettings(Strict):
    """When a schedule fires: a cron expression in an IANA timezone (checked when the
    definitions are built)."""

    cron: str
    timezone: Timezone = "UTC"


class SchedulesSettings(Strict):
    """The periodic runs behind the change sensors."""

    refresh: ScheduleSettings = ScheduleSettings(cron="0 3 * * *")
    analytics: ScheduleSettings = ScheduleSettings(cron="30 6 * * *")


def _postgres_url(url: str) -> str:
    """A PostgreSQL URL as SQLAlchemy takes it, on the driver dagster-postgres installs
    (psycopg2) unless it names one; the message never repeats the password."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres") and not parts.scheme.startswith(
            "postgresql+"):
        raise ValueError(f"not a PostgreSQL URL (scheme {parts.scheme or 'missing'!r}): use "
                         "postgresql://user:password@host:5432/database, or "
                         "postgresql://user@/database?host=/socket/folder")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"bad port in the PostgreSQL URL ({exc})") from None
    if not parts.path.strip("/"):
        raise ValueError("the PostgreSQL URL names no database (postgresql://.../database)")
    if "+" not in parts.scheme:
        return parts._replace(scheme="postgresql+psycopg2").geturl()
    return url


class InstanceSettings(Strict):
    """The Dagster instance `jarvis refresh` records its runs in (docs/operations.md)."""

    fast_storage: bool = True  # false: Dagster's stock SQLite storages, no private API
    # Dagster's stock PostgreSQL storages for runs, events and schedules, shared by every
    # Dagster process of the project (SQLite files in the data directory when unset).
    postgres_url: Annotated[str, AfterValidator(_postgres_url)] | None = None


class EnvironmentSettings(Strict):
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


