"""Namespaced, canonical keys shared by every store (tables, vectors, graph)."""

import unicodedata


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def note_key(vault: str, path: str) -> str:
    """``note:<vault>/<path>``; paths keep their case (file systems are case-sensitive)."""
    return f"note:{nfc(vault)}/{nfc(path)}"


def file_key(vault: str, path: str) -> str:
    """Attachments are files of the vault, keyed like notes."""
    return f"file:{nfc(vault)}/{nfc(path)}"
