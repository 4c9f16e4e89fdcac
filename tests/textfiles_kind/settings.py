"""A text folder's entry in jarvis.yaml (``textfiles:``)."""

from pathlib import Path
from typing import ClassVar

from jarvis_core.settings import SourceSettings


class TextFilesConfig(SourceSettings):
    """A folder of ``.txt`` files."""

    kind: ClassVar[str] = "textfiles"

    path: Path
