"""One person per human, however their identities are spelled across commits and tickets.

Identities (a name, an email, aliases such as a GitHub login or a Jira accountId) are
folded into one person when they share a lower-cased email, an alias, or a normalised name
of at least two words ("Dana Kim", "dana.kim" and "Kim, Dana" are all "dana kim"; a lone
first name folds nothing, there are too many Danas). A person's key is ``person:`` plus the
smallest email of the group (GitHub's no-reply addresses last), else the normalised name,
else the smallest alias, so the same identities give the same key in every source and
every run.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PERSON_PREFIX = "person:"
# GitHub's private commit emails name the login: 123456+login@users.noreply.github.com.
_GITHUB_NOREPLY = re.compile(r"^(?:\d+\+)?(?P<login>[^@]+)@users\.noreply\.github\.com$")
_SEPARATORS = re.compile(r"[._\-+\s]+")
_NOT_NAME = re.compile(r"[^\w ]+")


@dataclass(frozen=True)
class Identity:
    """One spelling of a person, as a source wrote it."""

    name: str | None = None
    email: str | None = None
    aliases: tuple[str, ...] = ()  # namespaced: "github:dkim", "jira:5b10ac8d..."


@dataclass(frozen=True)
class Person:
    key: str
    name: str                     # the most telling spelling: "Dana Kim" over "dana.kim"
    emails: tuple[str, ...]
    names: tuple[str, ...]
    aliases: tuple[str, ...]


def normal_email(email: str | None) -> str | None:
    """The email lower-cased and trimmed; None for anything without a local part and a host."""
    value = (email or "").strip().strip("<>").lower()
    local, at, host = value.rpartition("@")
    return value if at and local and host else None


def normal_name(name: str | None) -> str | None:
    """'Kim, Dana', 'dana.kim' and 'Dána  Kim' -> 'dana kim'; None when nothing is left."""
    if not name:
        return None
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    text = text.partition("@")[0] if "@" in text else text
    if text.count(",") == 1:
        last, first = text.split(",")
        text = f"{first} {last}"
    text = _NOT_NAME.sub(" ", _SEPARATORS.sub(" ", text))
    return " ".join(text.split()) or None


def _identity_aliases(identity: Identity) -> set[str]:
    aliases = {alias.strip().lower() for alias in identity.aliases if alias and alias.strip()}
    email = normal_email(identity.email)
    if email and (match := _GITHUB_NOREPLY.match(email)):
        aliases.add(f"github:{match['login']}")
    return aliases


def _spelling_rank(name: str, count: int) -> tuple:
    """Prefer a name written like a name (words, capitals), then the commonest, then A-Z."""
    return (" " in name.strip(), any(ch.isupper() for ch in name), count, "," not in name,
            [-ord(ch) for ch in name])


class PersonDirectory:
    """Folds identities into persons (union-find over emails, aliases and full names)."""

    def __init__(self, identities: Iterable[Identity] = ()) -> None:
        self._parent: dict[str, str] = {}
        self._identities: dict[Identity, None] = {}  # distinct, in the order first seen
        self._persons: dict[str, Person] | None = None
        for identity in identities:
            self.add(identity)

    @staticmethod
    def _handles(identity: Identity) -> list[str]:
        handles = [f"alias:{alias}" for alias in sorted(_identity_aliases(identity))]
        if email := normal_email(identity.email):
            handles.append(f"email:{email}")
        name = normal_name(identity.name)
        if name and " " in name:
            handles.append(f"name:{name}")
        elif name and not handles:  # a lone first name is a person only on its own
            handles.append(f"alone:{name}")
        return handles

    def _find(self, handle: str) -> str:
        self._parent.setdefault(handle, handle)
        root = handle
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[handle] != root:
            self._parent[handle], handle = root, self._parent[handle]
        return root

    def add(self, identity: Identity) -> None:
        handles = self._handles(identity)
        if not handles or identity in self._identities:
            return
        self._identities[identity] = None
        first = self._find(handles[0])
        for handle in handles[1:]:
            other = self._find(handle)
            if other != first:
                self._parent[max(first, other)] = min(first, other)
                first = min(first, other)
        self._persons = None

    def _groups(self) -> dict[str, Person]:
        if self._persons is not None:
            return self._persons
        members: dict[str, list[Identity]] = {}
        for identity in self._identities:
            members.setdefault(self._find(self._handles(identity)[0]), []).append(identity)
        persons = {}
        for root, group in members.items():
            emails = sorted({e for i in group if (e := normal_email(i.email))})
            aliases = sorted({a for i in group for a in _identity_aliases(i)})
            spelled = Counter(i.name.strip() for i in group if i.name and i.name.strip())
            full = sorted({n for i in group if (n := normal_name(i.name)) and " " in n})
            single = sorted({n for i in group if (n := normal_name(i.name))})
            real = sorted(emails, key=lambda email: (bool(_GITHUB_NOREPLY.match(email)), email))
            ident = (real or full or aliases or single)[0]
            name = max(spelled, key=lambda n: _spelling_rank(n, spelled[n])) if spelled \
                else (emails or aliases)[0]
            persons[root] = Person(key=PERSON_PREFIX + ident.replace(" ", "-"), name=name,
                                   emails=tuple(emails), names=tuple(sorted(spelled)),
                                   aliases=tuple(aliases))
        self._persons = persons
        return persons

    def person(self, identity: Identity) -> Person | None:
        """The person an identity belongs to (added first if new); None for an identity
        with no name, email or alias."""
        handles = self._handles(identity)
        if not handles:
            return None
        self.add(identity)
        return self._groups()[self._find(handles[0])]

    def persons(self) -> list[Person]:
        return sorted(self._groups().values(), key=lambda person: person.key)


def identities_of(persons: Iterable[Mapping]) -> list[Identity]:
    """The identities recorded on person nodes (``emails``, ``names``, ``aliases`` in their
    properties, a dict or its JSON), so one source's directory can be seeded with the
    people other sources already know: a GitHub login then folds into the author a commit
    named with a no-reply email."""
    identities = []
    for properties in persons:
        if isinstance(properties, str):
            properties = json.loads(properties or "{}")
        aliases = tuple(properties.get("aliases") or ())
        for email in properties.get("emails") or [None]:
            for name in properties.get("names") or [None]:
                identities.append(Identity(name, email, aliases))
    return identities
