"""The configuration sections for assistants: ``memory`` (where remembered notes go and when
they fade), ``audit`` (how long the access log keeps calls and what it hides) and
``profiles`` (named lists of sources a client may see).

``JarvisConfig`` inherits them from ``AssistantSections`` so that the sections, their
cross-checks against the configured sources and their defaults live together here.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from jarvis_core.settings import Strict, Timezone

ALL_SOURCES = "all"  # the profile that sees every source; no configured profile may take it
DEFAULT_REDACTIONS = (
    r"(?i)\b(?:api[_-]?key|token|secret|password|passwd)\b\s*[:=]\s*\S+",
    r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}",
    r"\bjv_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}",
)
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _folder(value: str) -> str:
    """A vault-relative folder: no leading or trailing '/', no '..', nothing hidden."""
    parts = [part for part in value.strip().split("/") if part]
    if not parts or any(part in (".", "..") or part.startswith(".") for part in parts):
        raise ValueError(f"{value!r} must be a vault-relative folder (no '..', no hidden "
                         "parts)")
    return "/".join(parts)


def _pattern(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a regular expression: {exc}") from exc
    return value


class MemorySettings(Strict):
    """Memories are ordinary notes in a vault of the configuration (``vault``), one file per
    memory under ``folder``; the decay schedule moves memories older than
    ``decay_after_days`` that were never returned or read into ``archive_folder``."""

    vault: str | None = Field(default=None, description="the vault memories are written to; "
                              "none: the memory tools answer that memory is not configured")
    folder: Annotated[str, AfterValidator(_folder)] = "Memories"
    archive_folder: Annotated[str, AfterValidator(_folder)] = "Memories/Archive"
    decay_after_days: int = Field(default=90, gt=0)
    recency_half_life_days: float = Field(default=30.0, gt=0)
    token_budget: int = Field(default=1500, ge=100, le=100_000)
    max_chars: int = Field(default=20_000, gt=0, description="longest memory text accepted")
    decay_cron: str = "15 4 * * *"
    decay_timezone: Timezone = "UTC"


class AuditSettings(Strict):
    """The access log: every tool call and CLI query, kept ``retention_days``. Matches of
    ``redact_patterns`` in any argument are replaced by ``[redacted]``; the arguments named in
    ``redact_arguments`` are never stored."""

    retention_days: int = Field(default=180, gt=0)
    redact_patterns: tuple[Annotated[str, AfterValidator(_pattern)], ...] = DEFAULT_REDACTIONS
    redact_arguments: tuple[str, ...] = ()


class AssistantSections(Strict):
    """``memory``, ``audit`` and ``profiles`` of ``JarvisConfig``, checked against its
    sources."""

    memory: MemorySettings = MemorySettings()
    audit: AuditSettings = AuditSettings()
    profiles: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _assistant_sections_name_sources(self):
        known = set(self.source_names)  # JarvisConfig's
        for name, sources in self.profiles.items():
            if name == ALL_SOURCES or not _PROFILE_NAME.match(name):
                raise ValueError(f"profiles.{name}: a profile name is 1-64 letters, digits, "
                                 f"'_', '-' or '.', and '{ALL_SOURCES}' is reserved for every "
                                 "source")
            unknown = sorted(set(sources) - known)
            if unknown:
                raise ValueError(f"profiles.{name}: unknown source(s) {', '.join(unknown)} "
                                 f"(configured: {', '.join(sorted(known)) or 'none'})")
        memory = self.memory
        if memory.vault is not None and memory.vault not in self.sources_of("vault"):
            raise ValueError(f"memory.vault: '{memory.vault}' is not a configured vault")
        if memory.archive_folder == memory.folder:
            raise ValueError("memory.archive_folder must differ from memory.folder")
        if self.audit.retention_days < memory.decay_after_days:
            raise ValueError("audit.retention_days must be at least memory.decay_after_days: "
                             "the decay counts a memory's uses in the access log")
        return self
