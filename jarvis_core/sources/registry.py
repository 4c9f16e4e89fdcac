"""The source kinds Jarvis reads. Adding a kind is its folder under jarvis_core/sources/
(settings, reader, tables, graph extractor and its ``SourceKind``) and one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis_core.sources.confluence.kind import CONFLUENCE
from jarvis_core.sources.kind import SourceKind
from jarvis_core.sources.mail.kind import MAIL
from jarvis_core.sources.repo.kind import REPO
from jarvis_core.sources.tickets.kind import TICKETS
from jarvis_core.sources.vault.kind import VAULT

if TYPE_CHECKING:
    from jarvis_core.stores.tables import Table

KINDS: tuple[SourceKind, ...] = (VAULT, REPO, TICKETS, MAIL, CONFLUENCE)


def kinds() -> tuple[SourceKind, ...]:
    """Every registered kind, read when asked (so a kind registered later is seen)."""
    return KINDS


def kind(name: str) -> SourceKind:
    for registered in KINDS:
        if registered.name == name:
            return registered
    raise KeyError(f"no source kind {name!r} (registered: "
                   f"{', '.join(k.name for k in KINDS)})")


def declared_tables() -> list[Table]:
    """Every table of the working database: the shared ones and each kind's raw tables."""
    from jarvis_core.stores.tables import SHARED_TABLES

    return [*SHARED_TABLES, *(table for kind in KINDS for table in kind.pipeline.tables)]


def published_tables() -> dict[str, str]:
    """Every table a serving version holds, with the query that fills its copy."""
    from jarvis_core.stores.serving import SERVING_TABLES

    return {**SERVING_TABLES, **{name: sql for kind in KINDS
                                 for name, sql in kind.serving.items()}}


def table(name: str) -> Table:
    """A declared table by name."""
    for declared in declared_tables():
        if declared.name == name:
            return declared
    raise KeyError(f"no table {name!r}")
