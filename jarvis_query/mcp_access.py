"""Who is calling the MCP server, what they may see, and the record of what they did.

Over stdio the caller is the client that started the server, with the profile given to
`jarvis serve --profile` (every source by default). Over HTTP the caller is the client named
by its bearer token (jarvis_query/mcp_http.py), with the token's profile, so clients with
different profiles can share one server. Each call runs with its caller in a context
variable; the tools' knowledge base (``Access.router``) answers as that caller's profile
sees the published version (jarvis_query/scoped.py). Every call is then recorded in the
access log with its documents (jarvis_query/access_log.py).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

from jarvis_core.audit import AuditEntry, AuditLog, AuditUnavailable
from jarvis_core.memory import clean_label
from jarvis_core.profiles import Profile, resolve_profile
from jarvis_query.access_log import documents_of
from jarvis_query.scoped import KNOWLEDGE_BASE, scoped_knowledge_base

log = logging.getLogger("jarvis.mcp")
PROFILE_CLAIM = "profile"
T = TypeVar("T")


@dataclass(frozen=True)
class Caller:
    client: str
    profile: Profile
    transport: str          # stdio or http
    session: str | None     # the MCP session (HTTP), or the server process's (stdio)


_caller: ContextVar[Caller | None] = ContextVar("jarvis_caller", default=None)


class Access:
    def __init__(self, kb, audit: AuditLog, profile: Profile,
                 transport: str = "stdio") -> None:
        self.kb = kb
        self.audit = audit
        self.default_profile = profile
        self.transport = transport
        self.session = uuid.uuid4().hex[:16]
        self.router = ProfileRouter(self)
        self._scoped: dict[str, object] = {}
        self._lock = threading.Lock()

    def knowledge_base(self, profile: Profile):
        """The knowledge base as ``profile`` sees it, made once per profile."""
        with self._lock:
            if profile.name not in self._scoped:
                self._scoped[profile.name] = scoped_knowledge_base(self.kb, profile)
            return self._scoped[profile.name]

    def identify(self, request_context) -> Caller:
        """The caller of a request: its bearer token's client and profile over HTTP, else
        the stdio client (by the name it gave at initialize) with the default profile."""
        request = getattr(request_context, "request", None)
        user = getattr(request, "scope", {}).get("user") if request is not None else None
        token = user.access_token if isinstance(user, AuthenticatedUser) else get_access_token()
        if token is not None:
            profile = resolve_profile(self.kb.config, (token.claims or {})[PROFILE_CLAIM])
            session = request.headers.get("mcp-session-id") if request is not None else None
            return Caller(token.client_id, profile, "http", session)
        session = getattr(request_context, "session", None)
        params = getattr(session, "client_params", None)
        name = clean_label(params.client_info.name) if params is not None else None
        return Caller(name or "stdio client", self.default_profile, self.transport,
                      self.session)

    @staticmethod
    def current_caller() -> Caller:
        caller = _caller.get()
        if caller is None:
            raise RuntimeError("no MCP call is being answered on this thread")
        return caller

    @staticmethod
    def acting_as(caller: Caller):
        """Context for one call: ``current_caller()`` is ``caller`` until ``reset``."""
        return _caller.set(caller)

    @staticmethod
    def reset(token) -> None:
        _caller.reset(token)

    def as_caller(self, caller: Caller, work: Callable[[ProfileRouter], T]) -> T:
        """``work`` on the knowledge base the tools call (``router``), answering as
        ``caller``: what resources and prompts read goes through the same door."""
        token = Access.acting_as(caller)
        try:
            return work(self.router)
        finally:
            Access.reset(token)

    def record(self, caller: Caller, tool: str, arguments: dict, *, correlation_id: str,
               duration_ms: float, data: dict | None = None, error: str | None = None,
               documents: list[str] | None = None) -> None:
        """One call in the access log; AuditUnavailable (logged) when it cannot be written,
        so that the caller withholds the answer rather than give one the log lacks."""
        entry = AuditEntry(tool=tool, arguments=arguments, client=caller.client,
                           profile=caller.profile.name, transport=caller.transport,
                           correlation_id=correlation_id, duration_ms=duration_ms,
                           outcome="error" if error else "ok", error=error,
                           documents=documents if documents is not None
                           else documents_of(data or {}), session=caller.session)
        try:
            self.audit.record(entry)
        except AuditUnavailable:
            log.exception("correlation_id=%s: the access log could not record %s",
                          correlation_id, tool)
            raise


class ProfileRouter:
    """The knowledge base the tools call: the attributes KNOWLEDGE_BASE lists as scoped or
    shared (jarvis_query/scoped.py), each the current caller's profile's knowledge base's.
    Any other attribute is refused, and so is every attribute outside a call (fails closed)
    rather than guessed."""

    def __init__(self, access: Access) -> None:
        self._access = access

    def __getattr__(self, name: str):
        if name not in KNOWLEDGE_BASE.scoped and name not in KNOWLEDGE_BASE.shared:
            raise KNOWLEDGE_BASE.refusal(name)
        return getattr(self._access.knowledge_base(Access.current_caller().profile), name)
