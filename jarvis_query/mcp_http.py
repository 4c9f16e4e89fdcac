"""The MCP server over Streamable HTTP (the official SDK's transport), for remote clients
and several clients at once.

- Bearer tokens only (`jarvis token create --profile NAME`, stored hashed): a request
  without a valid, unrevoked token gets 401 with an ``invalid_token`` body and nothing else;
  a token's profile decides what its client sees, so two clients with different profiles can
  share the server. A session belongs to the token that opened it (the SDK answers another
  token's use of it with 404).
- Loopback by default (127.0.0.1, with the SDK's DNS-rebinding protection); another host
  must be asked for explicitly.
- Limits: request bodies over ``max_request_bytes`` get 413 (the SDK's check); each token
  gets ``rate_per_minute`` requests per minute with bursts of a tenth of that, each peer
  address four times as many (one machine may run several clients), then 429 with
  Retry-After.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from dataclasses import dataclass

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

from jarvis_core.access_tokens import TokenStore, tokens_path
from jarvis_core.audit import AuditLog
from jarvis_core.profiles import UnknownProfile, resolve_profile
from jarvis_query.mcp_access import PROFILE_CLAIM
from jarvis_query.mcp_assistant import build_assistant_server

log = logging.getLogger("jarvis.mcp")
LOOPBACK = "127.0.0.1"
PEER_SHARE = 4  # a peer address may send this many times a token's rate
MCP_PATH = "/mcp"


@dataclass(frozen=True)
class HttpLimits:
    max_request_bytes: int = 1024 * 1024
    rate_per_minute: int = 600
    max_sessions: int = 64


class StoredTokenVerifier:
    """The SDK's TokenVerifier over the token store: a token proves its client and
    profile; an unknown, wrong or revoked token, or one whose profile left the
    configuration, proves nothing."""

    def __init__(self, store: TokenStore, config) -> None:
        self.store = store
        self.config = config

    async def verify_token(self, token: str) -> AccessToken | None:
        record = self.store.verify(token)
        if record is None:
            return None
        try:
            resolve_profile(self.config, record.profile)
        except UnknownProfile:
            log.warning("token %s names profile '%s', which is no longer configured: refused",
                        record.id, record.profile)
            return None
        # the subject tells tokens of one client name apart (sessions belong to a token)
        return AccessToken(token=record.id, client_id=record.client, scopes=[],
                           subject=record.id, claims={PROFILE_CLAIM: record.profile})


class _Bucket:
    def __init__(self, rate: float) -> None:
        self.rate = rate                      # requests per second
        self.capacity = max(1.0, rate * 6)    # a tenth of a minute's worth
        self.tokens = self.capacity
        self.stamp = time.monotonic()


class RateLimit:
    """ASGI middleware: a token bucket per bearer token and one per peer address."""

    def __init__(self, app, per_minute: int) -> None:
        self.app = app
        self.rate = per_minute / 60.0
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def _wait(self, key: str, rate: float) -> float:
        """0 when the request may go (and is counted), else the seconds to wait."""
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.setdefault(key, _Bucket(rate))
            bucket.tokens = min(bucket.capacity,
                                bucket.tokens + (now - bucket.stamp) * bucket.rate)
            bucket.stamp = now
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return 0.0
            return (1 - bucket.tokens) / bucket.rate

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        keys = [(f"peer:{(scope.get('client') or ('?',))[0]}", self.rate * PEER_SHARE)]
        if b"authorization" in headers:
            keys.append(("token:" + hashlib.sha256(headers[b"authorization"]).hexdigest(),
                         self.rate))
        wait = max(self._wait(key, rate) for key, rate in keys)
        if wait > 0:
            body = b'{"error": "rate_limited", "error_description": "too many requests"}'
            await send({"type": "http.response.start", "status": 429,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"retry-after", str(math.ceil(wait)).encode()),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def http_app(kb, audit: AuditLog, host: str = LOOPBACK, port: int = 8765,
             limits: HttpLimits = HttpLimits()):
    """The ASGI application: the MCP endpoint at /mcp behind bearer tokens and the limits."""
    verifier = StoredTokenVerifier(TokenStore(tokens_path(kb.config.data_dir)), kb.config)
    auth = AuthSettings(issuer_url=f"http://{LOOPBACK}:{port}", resource_server_url=None)
    server = build_assistant_server(kb, audit, transport="http", token_verifier=verifier,
                                    auth=auth)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host,
                                     max_request_body_size=limits.max_request_bytes,
                                     max_sessions=limits.max_sessions)
    return RateLimit(app, limits.rate_per_minute)


def parse_address(value: str) -> tuple[str, int]:
    """'8765' or 'HOST:8765' (IPv6 as '[::1]:8765'); loopback when no host is given."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or LOOPBACK
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"'{value}' is not [HOST:]PORT (a port is 1-65535)")
    return host, int(port)


def serve_http(kb, audit: AuditLog, host: str, port: int,
               limits: HttpLimits = HttpLimits()) -> None:
    """Serve until interrupted (uvicorn); ``kb.load_in_background()`` first, as for stdio."""
    import uvicorn

    if host not in (LOOPBACK, "localhost", "::1"):
        log.warning("serving on %s: reachable beyond this machine; every request still needs "
                    "a token", host)
    log.info("serving MCP over HTTP at http://%s:%d%s (data %s)", host, port, MCP_PATH,
             kb.config.data_dir)
    config = uvicorn.Config(http_app(kb, audit, host, port, limits), host=host, port=port,
                            log_level="warning", lifespan="on")
    try:
        uvicorn.Server(config).run()
    finally:
        kb.close()
        audit.close()
