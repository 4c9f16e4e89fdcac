"""A vault's entry in jarvis.yaml (``vaults:``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import field_validator

from jarvis_core.settings import SourceSettings


class VaultConfig(SourceSettings):
    """An Obsidian-style vault: a folder of markdown notes and attachments."""

    kind: ClassVar[str] = "vault"

    path: Path
    exclude: tuple[str, ...] = (".obsidian/**", ".trash/**", ".git/**", "**/node_modules/**")

    @field_validator("path")
    @classmethod
    def _must_be_directory(cls, path: Path) -> Path:
        # A missing folder (an unmounted drive) fails only this source's runs, not the
        # configuration, so the other sources, sensors and the query side go on.
        if path.exists() and not path.is_dir():
            raise ValueError(f"vault path is not a directory: {path}")
        return path
