"""Keeping ingestion inside a source's folder, and file names the tables can store.

A symlink inside a vault or an export may lead anywhere (``Bad/passwd.md`` -> /etc/passwd);
its text would then be chunked, indexed and shown in search snippets. Every reader resolves
a symlink's real path and refuses it, as a reported failure, when that leaves the source's
own real folder. File names that are not UTF-8 (bytes Python keeps as surrogates) cannot
be stored as text: they are reported under a printable form of the name instead."""

from __future__ import annotations

import os
from pathlib import Path

OUTSIDE_SOURCE = ("symlink leads outside the source folder: refused (Jarvis never reads "
                  "files outside a source)")
NOT_UTF8_NAME = "file name is not valid UTF-8: rename the file to ingest it"


def real_root(root: Path | str) -> str:
    """The real path of a source's folder (the folder a file of its export is in, for a
    single-file source), the boundary its files must stay within."""
    real = os.path.realpath(root)
    return os.path.dirname(real) if os.path.isfile(real) else real


def leaves(root_real: str, path: Path | str) -> bool:
    """Whether ``path``'s real path (every symlink resolved) is outside ``root_real``."""
    real = os.path.realpath(path)
    return real != root_real and not real.startswith(root_real.rstrip(os.sep) + os.sep)


def is_utf8_name(name: str) -> bool:
    """False for a name holding undecodable bytes (``os.fsdecode`` surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_name(name: str) -> str:
    """A name as storable text: undecodable bytes written as ``\\xff``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
