"""A mail source's entry in jarvis.yaml (``mail:``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from jarvis_core.settings import SourceSettings


class MailConfig(SourceSettings):
    """Mail: an mbox file, one ``.eml`` file, or a folder read recursively for mbox files,
    Maildir folders and ``.eml`` files."""

    kind: ClassVar[str] = "mail"

    path: Path
