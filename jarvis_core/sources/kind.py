"""What a source kind is, said once: the ``SourceKind`` descriptor.

A kind (vault, repository, ticket set, mail, Confluence export) is one folder under
``jarvis_core/sources/`` and one line in ``jarvis_core/sources/registry.py``. Its folder
reads the source into its raw tables and describes them here; every layer after ingestion
is the same for every kind and reads the descriptor: the configuration its settings,
chunking and the keyword index its documents, the graph its extractor, publishing its
tables, `jarvis status` its counts, refresh and the sensors its change watch, and the
Dagster layer makes its raw asset, partitions and checks from it.

Describing a kind imports nothing a cold query does not need: the parts that bring parsers
and table schemas are found by convention in the kind's package (``tables.TABLES``,
``ingest.ingest``, ``graph.EXTRACTOR``), as Django finds an app's models, and imported when
the pipeline first needs them (``SourceKind.pipeline``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jarvis_core.settings import IngestSettings, ResourceSettings, SourceSettings

if TYPE_CHECKING:
    from jarvis_core.sources.extraction import GraphExtractor
    from jarvis_core.stores.tables import Connect, Table

# The columns every document select gives ($1 is the source): what chunking, the keyword
# index, vectors, GraphRAG's recency and lookup know of a document, whatever its kind.
DOCUMENT_COLUMNS = ("source", "source_type", "doc_key", "path", "title", "text", "doc_hash",
                    "modified_at", "tags", "names")


@dataclass(frozen=True)
class Details:
    """What opening a document shows beside its text (read-note), read from the kind's
    serving tables with ``$1`` the source and ``$2`` the document's path: ``facts`` gives one
    row whose columns are the details (``created_at`` and ``warnings`` are the document's
    own fields), each of ``lists`` gives rows (a ticket's links, a commit's files with their
    +/- lines, a thread's messages), its first column naming the row."""

    facts: str | None = None
    lists: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DocumentType:
    """One type of document a kind holds (a repository holds commits and docs): its name,
    which is its chunks' ``source_type``, and one SELECT over the kind's raw tables giving
    ``DOCUMENT_COLUMNS`` for the source ``$1``. ``tags`` are the labels a search filters
    on; ``names`` the lower-cased identifiers a person names it by (a ticket key, a commit
    hash, a page title), which lookup matches. Opening one shows its ``details`` and its
    text as it was indexed (rebuilt from the published chunks), or, ``from_file``, its file
    as it is now under the source's folder (a note, with the frontmatter the index drops).
    A ``code`` document is chunked along its statements (jarvis_core/text/code_chunking.py),
    not as markdown."""

    name: str
    select: str
    details: Details = Details()
    from_file: bool = False
    code: bool = False


def person(column: str) -> str:
    """SQL showing a person struct (name, email) as 'Name <email>', or whichever it has."""
    return (f"CASE WHEN {column}.name IS NOT NULL AND {column}.email IS NOT NULL "
            f"THEN {column}.name || ' <' || {column}.email || '>' "
            f"ELSE coalesce({column}.name, {column}.email) END")


@dataclass(frozen=True)
class RowsCheck:
    """A warning check of a raw asset: it passes when ``sql`` returns no row for the source
    (``$1``; ``$2``, when the SQL uses it, is ``ingest.max_failed_ratio``), and shows the rows
    it returned."""

    name: str
    description: str
    sql: str


@dataclass(frozen=True)
class RawAsset:
    """How a raw layer of the kind shows in Dagster: the asset's name, its description and the
    kinds (technologies) the UI shows on it; ``module``, the module of the kind's package
    whose ``ingest(run)`` fills it; its ``checks``."""

    name: str
    description: str
    tags: tuple[str, ...]
    module: str = "ingest"
    checks: tuple[RowsCheck, ...] = ()


@dataclass(frozen=True)
class FailedRatio:
    """The warning check on the share of items that could not be read: its name and what
    the items are, in words."""

    check: str
    items: str


class SourceUnreachable(Exception):
    """The whole source cannot be read (a missing folder, clone or export); what earlier runs
    stored stays."""


@dataclass(frozen=True)
class IngestRun:
    """One raw run of one source. ``settings`` is None when the source is no longer
    configured: its rows are removed."""

    source: str
    settings: Any
    connect: Connect
    limits: IngestSettings
    data_dir: Path
    now: datetime
    warn: Callable[[str], None]
    # items parsed, then written, at a time (``resources.batch_documents``)
    batch_items: int = ResourceSettings().batch_documents


@dataclass
class Ingested:
    """What a raw run did, for its asset's metadata: item counts, the rows the source holds,
    where it was read, failed items, a preview, figures (numbers, flags, names), counts
    tables and seconds per phase."""

    counts: Mapping[str, int]
    rows: int
    location: str | None
    failures: list[dict] = field(default_factory=list)
    preview: list[dict] = field(default_factory=list)
    preview_columns: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Mapping[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Look:
    """A cheap look at a source: a digest small enough for a sensor's cursor (it moves when
    the source may have changed) and what ``ChangeWatch.compare`` needs."""

    digest: str
    state: Any


@dataclass(frozen=True)
class Change:
    """Why a source needs a run: a reason in words and run tags. ``first``: nothing of the
    source is published yet."""

    reason: str
    tags: Mapping[str, str] = field(default_factory=dict)
    first: bool = False


@dataclass(frozen=True)
class ChangeWatch:
    """How a change to a source is noticed, in two steps: ``look`` (a stat walk, a remote
    head; raises SourceUnreachable) and, when its digest moved, ``compare`` with the
    published version by content (None: nothing changed)."""

    look: Callable[[str, Any], Look]
    compare: Callable[[str, Look, Path], Change | None]
    interval_seconds: int = 30


@dataclass(frozen=True)
class KindPipeline:
    """What the pipeline runs for a kind, imported when it runs: its raw tables
    (``<package>.tables.TABLES``), the ingest of each raw asset by name
    (``<package>.<module>.ingest``) and its graph extractor (``<package>.graph.EXTRACTOR``)."""

    tables: Sequence[Table]
    ingest: Mapping[str, Callable[[IngestRun], Ingested]]
    graph: GraphExtractor


@dataclass(frozen=True, eq=False)
class SourceKind:
    """A source kind, described once (see the module's docstring).

    ``package`` is the kind's folder as a module path; ``section`` is its part of jarvis.yaml,
    each entry validated by ``settings``. ``asset`` is its raw asset; ``layers`` the raw
    assets that read the source after it (a repository's code), in order. ``serving`` maps
    each table the query side reads of it to the SELECT that fills the published copy;
    ``counts`` the layers `jarvis status` shows to the tables counted; ``ingested`` is the
    table whose rows a source has (and whose ``ingested_at`` says when)."""

    name: str
    package: str
    section: str
    label: str
    settings: type[SourceSettings]
    asset: RawAsset
    documents: tuple[DocumentType, ...]
    serving: Mapping[str, str]
    counts: Mapping[str, str]
    ingested: str
    watch: ChangeWatch
    failed_ratio: FailedRatio | None = None
    layers: tuple[RawAsset, ...] = ()

    @property
    def raw_assets(self) -> tuple[RawAsset, ...]:
        """Every raw asset of the kind, the first one first."""
        return (self.asset, *self.layers)

    @cached_property
    def pipeline(self) -> KindPipeline:
        def part(module: str):
            return importlib.import_module(f"{self.package}.{module}")

        return KindPipeline(part("tables").TABLES,
                            {asset.name: part(asset.module).ingest for asset in self.raw_assets},
                            part("graph").EXTRACTOR)

    @property
    def partitions(self) -> str:
        """The name of the Dagster partitions holding this kind's sources."""
        return f"{self.name}_sources"

    @property
    def ingest_job(self) -> str:
        """The name of the Dagster job that ingests one source of this kind."""
        return f"ingest_{self.name}"
