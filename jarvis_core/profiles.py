"""Profiles: the sources one client may see. A profile is a name from the configuration's
``profiles`` section (or ``all``, every source); the query side narrows every store to a
profile's sources (jarvis_query/scoped.py), and a restricted configuration holds only them,
so every check that names a source ("Unknown vault") treats the others as absent."""

from __future__ import annotations

from dataclasses import dataclass, replace

from jarvis_core.assistant_settings import ALL_SOURCES
from jarvis_core.config import JarvisConfig
from jarvis_core.stores.vectors.filters import VectorFilter


class UnknownProfile(ValueError):
    """The profile named is not in the configuration; the message lists the known ones."""


@dataclass(frozen=True)
class Profile:
    name: str
    sources: frozenset[str]
    restricted: bool  # False: every configured source (the profile 'all')

    def allows(self, source: str | None) -> bool:
        return source is not None and source in self.sources

    def restrict(self, filters: VectorFilter | None) -> VectorFilter | None:
        """``filters`` narrowed to the profile's sources (an empty list matches nothing)."""
        if not self.restricted:
            return filters
        filters = filters or VectorFilter()
        return replace(filters, sources=self.restrict_sources(filters.sources))

    def restrict_sources(self, sources: list[str] | None) -> list[str] | None:
        if not self.restricted:
            return sources
        wanted = self.sources if sources is None else self.sources & set(sources)
        return sorted(wanted)

    def configuration(self, config: JarvisConfig) -> JarvisConfig:
        """``config`` holding only the profile's sources (memory settings unchanged)."""
        if not self.restricted:
            return config
        return config.model_copy(update={"sources": {
            name: settings for name, settings in config.sources.items()
            if name in self.sources}})


def resolve_profile(config: JarvisConfig, name: str | None) -> Profile:
    """The profile ``name`` (None or 'all': every configured source)."""
    if name is None or name == ALL_SOURCES:
        return Profile(ALL_SOURCES, frozenset(config.source_names), restricted=False)
    if name not in config.profiles:
        known = ", ".join([ALL_SOURCES, *sorted(config.profiles)])
        raise UnknownProfile(f"unknown profile '{name}' (configured: {known})")
    return Profile(name, frozenset(config.profiles[name]), restricted=True)
