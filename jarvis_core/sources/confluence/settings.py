"""A Confluence export's entry in jarvis.yaml (``confluence:``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from jarvis_core.settings import SourceSettings


class ConfluenceConfig(SourceSettings):
    """A Confluence export: the HTML space export (a zip or its unpacked folder) or REST
    content JSON (a file or a folder of them)."""

    kind: ClassVar[str] = "confluence"

    path: Path
