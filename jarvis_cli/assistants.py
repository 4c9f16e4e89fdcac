"""The commands for assistants: `jarvis serve` (MCP over stdio or HTTP, as a profile),
`jarvis remember`, `jarvis audit` and `jarvis token create|list|revoke`."""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from jarvis_cli.common import CliContext, emit_text

_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _since(value: str | None) -> datetime | None:
    """'30m', '12h', '7d', '2w' back from now, or an ISO date or date-time (UTC if naive)."""
    if value is None:
        return None
    relative = _RELATIVE.match(value.strip())
    if relative:
        return datetime.now(UTC) - timedelta(**{_UNITS[relative[2]]: int(relative[1])})
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(f"'{value}' is neither an ISO date nor 30m, 12h, 7d or 2w",
                                 param_hint="--since") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@click.command()
@click.option("--profile", default=None,
              help="See only this profile's sources (profiles in jarvis.yaml; default: all).")
@click.option("--http", "address", default=None, metavar="[HOST:]PORT",
              help="Serve MCP over Streamable HTTP (loopback unless HOST is given; every "
                   "request needs a token from `jarvis token create`) instead of stdio.")
@click.option("--rate-limit", default=600, show_default=True,
              help="HTTP: requests per minute per token.")
@click.option("--max-request-bytes", default=1024 * 1024, show_default=True,
              help="HTTP: the largest request body accepted.")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the server's log to this file (it always goes to stderr).")
@click.pass_obj
def serve(obj: CliContext, profile: str | None, address: str | None, rate_limit: int,
          max_request_bytes: int, log_file: Path | None) -> None:
    """Serve the knowledge base to assistants over MCP: on stdio (e.g. for Claude Desktop),
    or over HTTP with --http."""
    from jarvis_core.profiles import UnknownProfile, resolve_profile
    from jarvis_query.server_log import configure_logging

    config = obj.config()
    try:
        resolve_profile(config, profile)
    except UnknownProfile as exc:
        raise click.ClickException(str(exc)) from exc
    if address is not None:
        if profile is not None:
            raise click.ClickException("--profile applies to stdio; over HTTP each token "
                                       "carries its profile (`jarvis token create --profile "
                                       "NAME`)")
        from jarvis_query.mcp_http import HttpLimits, parse_address, serve_http

        try:
            host, port = parse_address(address)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--http") from exc
    configure_logging(log_file)
    from jarvis_query.knowledge_base import KnowledgeBase

    kb = KnowledgeBase(config)
    kb.load_in_background()  # while the MCP SDK is imported and the client connects
    if address is None:
        from jarvis_query.mcp_assistant import serve_stdio

        serve_stdio(kb, profile)
    else:
        from jarvis_query.mcp_assistant import open_audit

        serve_http(kb, open_audit(config), host, port,
                   HttpLimits(max_request_bytes=max_request_bytes, rate_per_minute=rate_limit))


@click.command()
@click.argument("text")
@click.option("--importance", type=click.FloatRange(0, 1), default=0.5, show_default=True)
@click.option("--tag", "tags", multiple=True, help="A tag for the note (repeatable).")
@click.option("--title", default=None, help="The note's title (default: the first line).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def remember(obj: CliContext, text: str, importance: float, tags: tuple[str, ...],
             title: str | None, as_json: bool) -> None:
    """Write TEXT as a new memory note in the memory vault (memory.vault in jarvis.yaml)."""
    from jarvis_core.audit import AuditEntry
    from jarvis_core.memory import MemoryNoteError, MemoryVault
    from jarvis_query.mcp_assistant import open_audit
    from jarvis_query.memory import describe
    from jarvis_query.render_assistant import render_remember

    config = obj.config()
    started = time.perf_counter()
    try:
        memory = MemoryVault.from_config(config).write(text, importance=importance, tags=tags,
                                                       title=title, client="cli")
    except MemoryNoteError as exc:
        raise click.ClickException(str(exc)) from exc
    audit = open_audit(config)
    audit.record(AuditEntry(tool="remember", arguments={"text": text, "importance": importance,
                                                        "tags": list(tags), "title": title},
                            client="cli", profile="all", transport="cli",
                            correlation_id=uuid.uuid4().hex[:16],
                            duration_ms=(time.perf_counter() - started) * 1000,
                            documents=[memory.document]))
    audit.close()
    emit_text({"memory": describe(memory),
               "searchable": f"after the next refresh of vault '{memory.vault}'"},
              as_json, render_remember)


@click.command()
@click.option("--since", default=None, help="From this ISO date or time, or 30m, 12h, 7d, 2w.")
@click.option("--client", default=None, help="Only this client's calls.")
@click.option("--tool", default=None, help="Only calls of this tool.")
@click.option("--session", default=None, help="Only this session's calls.")
@click.option("--limit", default=100, show_default=True, help="The newest calls shown.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every field).")
@click.pass_obj
def audit(obj: CliContext, since: str | None, client: str | None, tool: str | None,
          session: str | None, limit: int, as_json: bool) -> None:
    """List the access log: every tool call and query, who made it and what it returned."""
    from jarvis_query.mcp_assistant import open_audit
    from jarvis_query.render_assistant import render_audit

    log = open_audit(obj.config())
    try:
        entries = log.entries(since=_since(since), client=client, tool=tool, session=session,
                              limit=limit)
    finally:
        log.close()
    emit_text({"entries": entries}, as_json, render_audit)


@click.group()
def token() -> None:
    """Bearer tokens for `jarvis serve --http`, each naming a client and its profile."""


def _store(obj: CliContext):
    from jarvis_core.access_tokens import TokenStore, tokens_path

    return TokenStore(tokens_path(obj.config().data_dir))


@token.command("create")
@click.option("--profile", required=True, help="The profile the token sees ('all': every "
                                               "source).")
@click.option("--client", default="client", show_default=True,
              help="The client's name in the access log.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def create_token(obj: CliContext, profile: str, client: str, as_json: bool) -> None:
    """Create a token and print it once (only its digest is kept)."""
    from jarvis_core.access_tokens import TokenError
    from jarvis_core.profiles import UnknownProfile, resolve_profile

    try:
        resolve_profile(obj.config(), profile)
        secret, record = _store(obj).create(client, profile)
    except (UnknownProfile, TokenError) as exc:
        raise click.ClickException(str(exc)) from exc
    emit_text({"token": secret, **record.public()}, as_json,
              lambda data: f"{data['token']}\n(token {data['id']} for client "
                           f"'{data['client']}', profile '{data['profile']}'; shown once)")


@token.command("list")
@click.option("--profile", default=None, help="Only tokens of this profile.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def list_tokens(obj: CliContext, profile: str | None, as_json: bool) -> None:
    """List the tokens (never their secrets), revoked ones included."""
    from jarvis_query.render import table

    tokens = [record.public() for record in _store(obj).records()
              if profile in (None, record.profile)]
    emit_text({"tokens": tokens}, as_json, lambda data: table(
        data["tokens"], ["id", "client", "profile", "created_at", "revoked_at"])
        if data["tokens"] else "no tokens")


@token.command("revoke")
@click.argument("token_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def revoke_token(obj: CliContext, token_id: str, as_json: bool) -> None:
    """Revoke the token TOKEN_ID: a server refuses it from its next request on."""
    from jarvis_core.access_tokens import TokenError

    try:
        record = _store(obj).revoke(token_id)
    except TokenError as exc:
        raise click.ClickException(str(exc)) from exc
    emit_text(record.public(), as_json,
              lambda data: f"token {data['id']} revoked at {data['revoked_at']}")


ASSISTANT_COMMANDS = (serve, remember, audit, token)
