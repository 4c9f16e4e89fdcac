"""Payload filters shared by every vector back end (and the keyword index)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

KEYWORD_FIELDS = ("source", "source_type", "tags", "doc_key")


DATETIME_FIELD = "modified_at"


@dataclass(frozen=True)
class VectorFilter:
    """All given fields must match (AND); ``tags_any`` matches a point having any of the tags.
    An empty list matches nothing. Naive datetimes are taken as UTC; both bounds are inclusive."""

    sources: list[str] | None = None
    source_types: list[str] | None = None
    tags_any: list[str] | None = None
    modified_from: datetime | None = None
    modified_to: datetime | None = None


@dataclass(frozen=True)
class MatchAny:
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class _DatetimeRange:
    key: str
    gte: str | None
    lte: str | None


Condition = MatchAny | _DatetimeRange


def utc_iso(value: datetime) -> str:
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()


def filter_conditions(filters: VectorFilter | None) -> list[Condition] | None:
    """The filter as backend-neutral conditions; None when it can match nothing."""
    if filters is None:
        return []
    conditions: list[Condition] = []
    for key, values in (("source", filters.sources), ("source_type", filters.source_types),
                        ("tags", filters.tags_any)):
        if values is None:
            continue
        if not values:
            return None
        conditions.append(MatchAny(key, tuple(values)))
    if filters.modified_from is not None or filters.modified_to is not None:
        conditions.append(_DatetimeRange(
            DATETIME_FIELD,
            None if filters.modified_from is None else utc_iso(filters.modified_from),
            None if filters.modified_to is None else utc_iso(filters.modified_to),
        ))
    return conditions
