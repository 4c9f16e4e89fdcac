"""Every check of a query argument, with the messages the CLI, the MCP tools and the README
share. A check raises ``QueryError`` naming the parameter it is about, so that a front end
can speak of its own flag (``--after``) instead of the API's name (``modified_after``).

Sizes are checked first, before any work: a 10 MB query is refused in microseconds, and no
message echoes more than ``SHOWN_CHARS`` of what it was sent."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time

from jarvis_core.config import JarvisConfig
from jarvis_core.sources import registry
from jarvis_core.stores.vectors.filters import VectorFilter

MAX_LIMIT = 50
MIN_DEPTH, MAX_DEPTH = 1, 3
MIN_TOKENS, MAX_TOKENS = 200, 100_000
# Input caps. A query longer than a few paragraphs is cut by the encoder anyway (256 word
# pieces); a note path has at most 4,096 bytes on Linux, a name 255.
MAX_QUERY_CHARS = 4_000
MAX_PATH_CHARS = 1_024
MAX_NAME_BYTES = 255  # one path component (NAME_MAX)
MAX_NAME_CHARS = 128  # a source name (64 at most when configured), a tag, a source type, a date
MAX_LIST_ITEMS = 20
SHOWN_CHARS = 100
# The chunks' source types (jarvis_core.text.documents.DOCUMENT_SELECTS, not imported here:
# it pulls polars into every query process).


def source_types() -> tuple[str, ...]:
    """The document types of the registered kinds (each chunk's ``source_type``)."""
    return tuple(document.name for kind in registry.kinds() for document in kind.documents)


SOURCE_TYPES = source_types()  # what the MCP tools' schemas list


class QueryError(ValueError):
    """A bad argument; the message is meant for the person or assistant who sent it.
    ``parameters`` are the API names the message mentions."""

    def __init__(self, message: str, *parameters: str) -> None:
        super().__init__(message)
        self.parameters = parameters

    def naming(self, names: Mapping[str, str]) -> str:
        """The message with each parameter it mentions called by ``names`` (e.g. flags)."""
        message = str(self)
        for parameter in self.parameters:
            if parameter in names:
                message = re.sub(rf"\b{parameter}\b", names[parameter], message)
        return message


def shown(value: str) -> str:
    """``value`` as an error message may echo it: its first ``SHOWN_CHARS`` characters."""
    return value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "…"


def too_long(name: str, length: int, limit: int, unit: str = "characters") -> QueryError:
    return QueryError(f"{name} is too long: {length:,} {unit} (at most {limit:,})", name)


def check_length(value: object, name: str, limit: int) -> None:
    """Refuse a string or list over ``limit`` before anything else looks at it."""
    if isinstance(value, str) and len(value) > limit:
        raise too_long(name, len(value), limit)
    if isinstance(value, list | tuple) and len(value) > limit:
        raise too_long(name, len(value), limit, "items")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def require_text(value: object, name: str, limit: int = MAX_QUERY_CHARS) -> str:
    check_length(value, name, limit)
    if not isinstance(value, str) or not value.strip():
        raise QueryError(f"{name} parameter is required", name)
    return value


def check_limit(limit: object) -> None:
    if not _is_int(limit) or not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}", "limit")


def check_source(config: JarvisConfig, source: str | None) -> None:
    """Searches filter by any configured source: a vault, a repository or a ticket set."""
    if source is not None and source not in config.source_names:
        raise QueryError(f"Unknown vault '{shown(str(source))}'", "vault")


def check_vault(config: JarvisConfig, vault: str | None) -> None:
    """Notes are read from vaults only."""
    if vault is not None and vault not in config.sources_of("vault"):
        raise QueryError(f"Unknown vault '{shown(str(vault))}'", "vault")


def check_search(config: JarvisConfig, query: object, limit: object,
                 vault: str | None) -> None:
    """The checks every search makes; ``vault`` may name any configured source."""
    require_text(query, "query")
    check_limit(limit)
    check_source(config, vault)


def check_depth(depth: object) -> None:
    if not _is_int(depth) or not MIN_DEPTH <= depth <= MAX_DEPTH:
        raise QueryError(f"depth must be between {MIN_DEPTH} and {MAX_DEPTH}", "depth")


def check_alpha(alpha: object) -> None:
    if alpha is not None and (not _is_number(alpha) or not 0 <= alpha <= 1):
        raise QueryError("alpha must be between 0 and 1", "alpha")


def check_similarity_threshold(threshold: object) -> None:
    if threshold is not None and (not _is_number(threshold) or not -1 <= threshold <= 1):
        raise QueryError("similarity_threshold must be between -1 and 1", "similarity_threshold")


def check_max_tokens(max_tokens: object) -> None:
    if not _is_int(max_tokens) or not MIN_TOKENS <= max_tokens <= MAX_TOKENS:
        raise QueryError(f"max_tokens must be between {MIN_TOKENS} and {MAX_TOKENS}",
                         "max_tokens")


def date_bound(value: str | date | datetime | None, name: str, end_of_day: bool
               ) -> datetime | None:
    """A bound from a datetime, a date or an ISO string; a bare date means the start of the
    day, or its end for an upper bound."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str):
        check_length(value, name, MAX_NAME_CHARS)
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise QueryError(f"{name} must be an ISO date or date-time, got '{value}'",
                             name) from None
        if "T" in value or " " in value.strip():
            return parsed
        value = parsed.date()
    if isinstance(value, date):
        return datetime.combine(value, time.max if end_of_day else time.min)
    raise QueryError(f"{name} must be an ISO date or date-time, got '{shown(str(value))}'",
                     name)


def _names(values: str | Sequence[str] | None, name: str) -> list[str] | None:
    if values is None:
        return None
    values = [values] if isinstance(values, str) else list(values)
    check_length(values, name, MAX_LIST_ITEMS)
    if not all(isinstance(v, str) and v.strip() for v in values):
        raise QueryError(f"{name} must be a list of non-empty strings", name)
    if any(len(value) > MAX_NAME_CHARS for value in values):
        raise QueryError(f"each of {name} must be at most {MAX_NAME_CHARS} characters", name)
    return values


def _source_types(values: str | Sequence[str] | None) -> list[str] | None:
    types = _names(values, "source_types")
    known = source_types()
    unknown = [value for value in types or () if value not in known]
    if unknown:
        raise QueryError(f"unknown source type '{shown(unknown[0])}': source_types are "
                         f"{', '.join(known)}", "source_types")
    return types


def _utc_naive(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def search_filter(vault: str | None = None, source_types: str | Sequence[str] | None = None,
                  tags: str | Sequence[str] | None = None,
                  modified_after: str | date | datetime | None = None,
                  modified_before: str | date | datetime | None = None) -> VectorFilter | None:
    """The filter both search legs apply (bounds inclusive, naive times UTC); None when
    empty."""
    start = date_bound(modified_after, "modified_after", end_of_day=False)
    end = date_bound(modified_before, "modified_before", end_of_day=True)
    if start and end and _utc_naive(start) > _utc_naive(end):
        raise QueryError("modified_after must not be later than modified_before",
                         "modified_after", "modified_before")
    tag_list = _names(tags, "tags")
    filters = VectorFilter(sources=[vault] if vault else None,
                           source_types=_source_types(source_types),
                           tags_any=[t.lstrip("#") for t in tag_list] if tag_list else tag_list,
                           modified_from=start, modified_to=end)
    return None if filters == VectorFilter() else filters
