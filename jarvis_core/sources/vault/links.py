"""Link targets resolved the way Obsidian resolves them, and URLs in canonical form."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from jarvis_core.stores.keys import file_key, nfc, note_key

_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def _normal(text: str) -> str:
    """A link target or path in the form Obsidian compares them."""
    return " ".join(nfc(text).split()).lower()


class LinkResolver:
    """Obsidian's link resolution within one vault, over its notes and attachments."""

    def __init__(self, vault: str, note_paths: Iterable[str],
                 aliases: Mapping[str, Iterable[str]], attachments: Iterable[str] = ()) -> None:
        self._by_file_name: dict[str, list[tuple[str, str]]] = {}  # name -> [(path, key)]
        self._by_alias: dict[str, set[str]] = {}
        self.paths: dict[str, str] = {}  # key -> vault path as stored
        for path in note_paths:
            self._add_file(path, note_key(vault, path))
        for path in attachments:
            self._add_file(path, file_key(vault, path))
        for path, names in aliases.items():
            for alias in names:
                self._by_alias.setdefault(_normal(alias), set()).add(note_key(vault, path))

    def _add_file(self, path: str, key: str) -> None:
        self.paths[key] = path
        normal = _normal(path)
        self._by_file_name.setdefault(normal.rpartition("/")[2], []).append((normal, key))

    def resolve(self, target: str, from_note: str = "") -> tuple[str, ...]:
        """The keys ``target`` can mean in the note at ``from_note``: none if it is
        unresolved, else the one Obsidian opens first, then any other it could mean (a name
        several notes share), in the same order.

        A target with a '/' or a '.md' suffix is first taken as an exact vault path; then
        as a path suffix (a bare name is the suffix of every file so named); a note wins
        over an attachment of the same name ('Diagram' is 'Diagram.md' before 'Diagram');
        aliases come last. Among several, Obsidian's ``getFirstLinkpathDest`` picks the
        exact vault path (``[[Note]]`` is a root ``Note.md``), else one in the linking
        note's own folder, else the shortest path; ties go by path.
        """
        wanted = _normal(target).lstrip("/")
        if not wanted:
            return ()
        path_like = "/" in wanted or wanted.endswith(".md")
        forms = (wanted,) if wanted.endswith(".md") else (wanted + ".md", wanted)
        for form in forms:
            files = self._by_file_name.get(form.rpartition("/")[2], [])
            exact = [key for path, key in files if path == form]
            if path_like and exact:
                return tuple(sorted(exact))
            if suffix := [key for path, key in files if path.endswith("/" + form)] + exact:
                return self._obsidian_order(set(suffix), form, from_note)
        return self._obsidian_order(self._by_alias.get(wanted, set()), wanted, from_note)

    def _obsidian_order(self, keys: set[str], form: str, from_note: str) -> tuple[str, ...]:
        folder = posixpath.dirname(_normal(from_note))

        def rank(key: str) -> tuple[bool, bool, int, str]:
            path = _normal(self.paths[key])
            return path != form, posixpath.dirname(path) != folder, len(path), path
        return tuple(sorted(keys, key=rank))

    def resolve_relative(self, path: str, from_note: str) -> tuple[str, ...]:
        """A markdown link's decoded path: relative to the note's folder first (where
        '../' works), then as any wikilink target (vault root, suffix, name)."""
        folder = posixpath.dirname(from_note)
        beside = posixpath.normpath(posixpath.join(folder, path)) if folder else path
        return self.resolve(beside, from_note) or self.resolve(path, from_note)


def canonical_url(url: str) -> str | None:
    """One key per web page: scheme and host lowercased, default port, fragment and the
    root path's '/' dropped. None for anything but an http(s) URL with a host."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        return None
    user, at, host = parts.netloc.rpartition("@")
    host = host.lower().removesuffix(_DEFAULT_PORTS[scheme])
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((scheme, f"{user}{at}{host}", path, parts.query, ""))


def relative_link_path(url: str) -> str | None:
    """The percent-decoded vault path a markdown link points at, or None for URLs with
    a scheme, protocol-relative URLs and same-note '#heading' links."""
    if not url or url.startswith(("#", "//")) or _URL_SCHEME.match(url):
        return None
    path = unquote(url.split("#", 1)[0].split("?", 1)[0])
    return path or None
