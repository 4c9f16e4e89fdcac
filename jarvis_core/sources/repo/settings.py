"""A repository's entry in jarvis.yaml (``repos:``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from jarvis_core.settings import SourceSettings, Strict

DEFAULT_REPO_DOCS = ("README*", "docs/**/*.md")
# scheme://… or scp-like user@host:path; anything else is a local path (a bundle, a clone).
_REMOTE_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://|[^/\s]+@[^/\s]+:)")
# Vendored, built and minified files: someone else's code, or ours in another form.
DEFAULT_CODE_EXCLUDE = ("**/vendor/**", "**/node_modules/**", "**/dist/**", "**/third_party/**",
                        "**/*.min.js", "**/*.bundle.js")


class CodeSettings(Strict):
    """How a repository's source code is read (``code:``): files over a limit, minified,
    binary, generated or matching ``exclude`` (as well as the repository's own) are skipped
    and reported; a file is given ``time_budget_seconds`` and ``max_depth`` syntax levels.
    Of the commits an ingest reads, the newest ``history_commits`` have the symbols they
    modified found (all of a later run's new commits, up to that many; code/modifies.py)."""

    enabled: bool = True
    max_file_bytes: int = Field(default=1_000_000, gt=0)
    max_line_length: int = Field(default=10_000, gt=0)
    max_mean_line_length: int = Field(default=300, gt=0)
    time_budget_seconds: float = Field(default=5.0, gt=0)
    max_depth: int = Field(default=500, gt=0)
    exclude: tuple[str, ...] = DEFAULT_CODE_EXCLUDE
    history_commits: int = Field(default=1000, ge=0)


class RepoConfig(SourceSettings):
    """A git repository: a local clone at ``path``, or a ``url`` cloned into the data
    directory on the first refresh (and fetched on later ones)."""

    kind: ClassVar[str] = "repo"

    path: Path | None = None
    url: str | None = None
    branch: str = Field(default="HEAD", min_length=1)
    docs: tuple[str, ...] = DEFAULT_REPO_DOCS
    knowledge_dir: str = ".jarvis"
    exclude: tuple[str, ...] = ()
    code: CodeSettings = CodeSettings()

    @field_validator("path")
    @classmethod
    def _must_be_directory(cls, path: Path | None) -> Path | None:
        if path is not None and path.exists() and not path.is_dir():  # missing: see vaults
            raise ValueError(f"repository path is not a directory: {path}")
        return path

    @model_validator(mode="after")
    def _path_or_url(self) -> RepoConfig:
        if self.path is None and self.url is None:
            raise ValueError("a repository needs a 'path' (a local clone) or a 'url' to clone")
        return self

    @property
    def location(self) -> str:
        return str(self.path if self.path is not None else self.url)

    def checkout(self, data_dir: Path, name: str) -> Path:
        """Where the repository is read: its ``path``, else its clone under the data
        directory."""
        return self.path if self.path is not None else data_dir / "repos" / name

    @classmethod
    def expand(cls, spec: dict, absolute: Callable[[str], Path]) -> dict:
        """A ``url`` that is a local path (a bundle, a clone) is made absolute too."""
        url = spec.get("url")
        if isinstance(url, str) and not _REMOTE_URL.match(url):
            return {**spec, "url": str(absolute(url))}
        return spec
