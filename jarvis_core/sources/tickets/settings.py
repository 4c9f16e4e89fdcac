"""A ticket set's entry in jarvis.yaml (``tickets:``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from jarvis_core.settings import SourceSettings


class TicketsConfig(SourceSettings):
    """A ticket export: one JSON file or a folder of them (Jira REST issues or GitHub issues).
    ``repo`` is the GitHub owner/repo or short name tickets are cited by (``lumen#7``)."""

    kind: ClassVar[str] = "tickets"

    path: Path
    format: Literal["auto", "jira", "github"] = "auto"
    repo: str | None = None
