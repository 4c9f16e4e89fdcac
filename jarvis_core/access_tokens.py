"""Bearer tokens for the MCP server over HTTP, each naming a client and the profile it sees.

Only a SHA-256 digest of each token is stored (``<data_dir>/tokens.json``, mode 0600): a
token is 32 random bytes, so a fast hash is as good as a slow one and keeps verification
cheap; comparisons are constant-time. A token reads ``jv_<id>_<secret>``; the id finds the
entry, the digest proves the secret. Revoking marks the entry (the list keeps it); a server
rereads the file when it changes, so a revocation holds at the next request.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

TOKENS_FILE = "tokens.json"
_TOKEN = re.compile(r"^jv_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$")
_CLIENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


class TokenError(ValueError):
    """A token operation that cannot be done; the message says why."""


@dataclass(frozen=True)
class TokenRecord:
    id: str
    client: str
    profile: str
    sha256: str
    created_at: str
    revoked_at: str | None = None

    def public(self) -> dict:
        """What `jarvis token list` shows: everything but the digest."""
        return {key: value for key, value in asdict(self).items() if key != "sha256"}


def tokens_path(data_dir: Path) -> Path:
    return data_dir / TOKENS_FILE


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._records: dict[str, TokenRecord] = {}

    def records(self) -> list[TokenRecord]:
        """Every token ever created, oldest first (revoked ones included)."""
        with self._lock:
            return sorted(self._current().values(), key=lambda r: (r.created_at, r.id))

    def create(self, client: str, profile: str, now: datetime | None = None
               ) -> tuple[str, TokenRecord]:
        """A new token for ``client`` seeing ``profile``: (the token, shown once; its
        record)."""
        if not _CLIENT_NAME.match(client):
            raise TokenError(f"client name {client!r} must be 1-64 letters, digits, '_', '.', "
                             "'@' or '-'")
        with self._writing() as records:
            token_id = secrets.token_hex(4)
            while token_id in records:
                token_id = secrets.token_hex(4)
            token = f"jv_{token_id}_{secrets.token_urlsafe(32)}"
            record = TokenRecord(token_id, client, profile, _digest(token),
                                 (now or datetime.now(UTC)).isoformat())
            records[token_id] = record
        return token, record

    def revoke(self, token_id: str, now: datetime | None = None) -> TokenRecord:
        with self._writing() as records:
            record = records.get(token_id)
            if record is None:
                raise TokenError(f"no token with id '{token_id}' (see `jarvis token list`)")
            if record.revoked_at is None:
                record = TokenRecord(**{**asdict(record),
                                        "revoked_at": (now or datetime.now(UTC)).isoformat()})
                records[token_id] = record
        return record

    def verify(self, token: str) -> TokenRecord | None:
        """The live record ``token`` proves, or None (malformed, unknown, wrong or revoked)."""
        match = _TOKEN.match(token.strip()) if isinstance(token, str) else None
        if match is None:
            return None
        with self._lock:
            record = self._current().get(match.group(1))
        if record is None or record.revoked_at is not None:
            return None
        return record if hmac.compare_digest(record.sha256, _digest(token.strip())) else None

    def _current(self) -> dict[str, TokenRecord]:
        """The records as on disk, reread only when the file changed."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._seen, self._records = None, {}
            return self._records
        seen = (info.st_mtime_ns, info.st_size)
        if seen != self._seen:
            self._records = self._read()
            self._seen = seen
        return self._records

    def _read(self) -> dict[str, TokenRecord]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {entry["id"]: TokenRecord(**entry) for entry in data["tokens"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TokenError(f"{self.path}: unreadable token file ({exc}); move it aside and "
                             "create the tokens again") from exc

    @contextmanager
    def _writing(self):
        """The records under an exclusive lock across processes, written back atomically
        (a temporary file renamed over the old one) when the block succeeds."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(TOKENS_FILE + ".lock"), "a") as lock, self._lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._seen = None
            records = dict(self._current())
            yield records
            temporary = self.path.with_name(f".{TOKENS_FILE}.{os.getpid()}.tmp")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                json.dump({"tokens": [asdict(r) for r in records.values()]}, file, indent=1)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
            self._seen = None
