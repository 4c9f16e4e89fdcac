"""The files of every file-based source kind, listed the same way for the readers that open
them and the sensors and refresh checks that stat and hash them: sorted, hidden entries
skipped, and never a file whose real path leaves the source's folder. Standard library
only, so a check that nothing changed stays cheap."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from jarvis_core.sources.confinement import (
    NOT_UTF8_NAME,
    OUTSIDE_SOURCE,
    is_utf8_name,
    leaves,
    printable_name,
    real_root,
)

MBOX, MAILDIR, EML = "mbox", "maildir", "eml"
_MBOX_SUFFIXES = (".mbox", ".mbx")
CONFLUENCE_INDEX = "index.html"
EXPORT_ASSET_DIRS = {"attachments", "images", "styles"}


def ticket_listing(root: Path) -> tuple[list[tuple[Path, str]], list[tuple[str, str]]]:
    """(file, path relative to the ticket set) of every JSON file, sorted, hidden skipped;
    and (relative path, reason) of the files refused: a symlink whose real path leaves the
    export's folder, a name that is not UTF-8."""
    if root.is_file():
        return [(root, root.name)], []
    inside = real_root(root)
    files, refused = [], []
    for file in sorted(root.rglob("*.json")):
        relative = file.relative_to(root).as_posix()
        if any(part.startswith(".") for part in relative.split("/")) or not file.is_file():
            continue
        if not is_utf8_name(relative):
            refused.append((printable_name(relative), NOT_UTF8_NAME))
        elif leaves(inside, file):
            refused.append((relative, OUTSIDE_SOURCE))
        else:
            files.append((file, relative))
    return files, refused


def ticket_files(root: Path) -> Iterator[tuple[Path, str]]:
    """(file, path relative to the ticket set) of every JSON file that may be read."""
    yield from ticket_listing(root)[0]


def _is_maildir(folder: Path) -> bool:
    return (folder / "cur").is_dir() and (folder / "new").is_dir()


def _starts_like_mbox(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(5) == b"From "
    except OSError:
        return False


def mail_files(root: Path) -> Iterator[tuple[Path, str, str]]:
    """(file, path relative to the source, kind) of every mail file, sorted; a symlink whose
    real path leaves the source's folder is skipped, never read."""
    if root.is_file():
        yield root, root.name, EML if root.suffix.lower() == ".eml" else MBOX
        return
    inside = real_root(root)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") or _is_maildir(here / d))
        if _is_maildir(here):
            for sub in ("cur", "new"):
                for name in sorted(os.listdir(here / sub)):
                    if not name.startswith(".") and (here / sub / name).is_file() \
                            and not leaves(inside, here / sub / name):
                        yield (here / sub / name,
                               (here / sub / name).relative_to(root).as_posix(), MAILDIR)
            dirs[:] = [d for d in dirs if d not in ("cur", "new", "tmp")]
        for name in sorted(files):
            path = here / name
            if name.startswith(".") or leaves(inside, path):
                continue
            relative = path.relative_to(root).as_posix()
            if path.suffix.lower() == ".eml":
                yield path, relative, EML
            elif path.suffix.lower() in _MBOX_SUFFIXES or _starts_like_mbox(path):
                yield path, relative, MBOX


def confluence_export_files(root: Path) -> Iterator[Path]:
    """Every file the export is read from (pages, REST files, zips, and the index.html the
    pages of an HTML export need), sorted; what a sensor stats to notice a change."""
    if not root.is_dir():
        yield root
        return
    inside = real_root(root)  # a symlink out of the export is never read
    for folder, dirs, files in os.walk(root):
        exported = CONFLUENCE_INDEX in files
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and not (exported and d in EXPORT_ASSET_DIRS))
        for name in sorted(files):
            suffix = Path(name).suffix.lower()
            if not name.startswith(".") and (suffix in (".zip", ".json")
                                             or (suffix == ".html" and exported)) \
                    and not leaves(inside, Path(folder) / name):
                yield Path(folder) / name


def confluence_files(root: Path) -> Iterator[tuple[Path, str]]:
    """(file, path relative to the export) of every file the export is read from: what the
    sensor stats and hashes."""
    for path in confluence_export_files(root):
        yield path, path.relative_to(root).as_posix() if root.is_dir() else path.name
