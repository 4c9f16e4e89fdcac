"""What every `jarvis` command shares: the configuration it was given, its output (readable,
or JSON with ``--json``), and errors: one line naming the command's flags, or with ``--json``
``{"error": "…"}`` on stdout, always with a non-zero exit. An unexpected error is one line
too (its type and the start of its message); ``jarvis --debug …`` shows its traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from jarvis_core.config import JarvisConfig

_WANTS_JSON = "jarvis.wants_json"
# The query API's parameter names as the commands spell them, for error messages.
FLAGS = {"query": "QUERY", "query_note_path": "NOTE", "path": "NOTE", "limit": "--limit",
         "depth": "--depth", "alpha": "--alpha", "similarity_threshold": "--threshold",
         "max_tokens": "--max-tokens", "source_types": "--type", "tags": "--tag",
         "modified_after": "--after", "modified_before": "--before", "name": "NAME",
         "repo": "--repo"}


class _JsonError(click.ClickException):
    """An error printed as ``{"error": message}`` for a command line that asked for JSON."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(json.dumps({"error": self.message}))


class JarvisGroup(click.Group):
    """Turns every error (bad flags, a missing configuration, a bad query) into JSON when
    the command line holds ``--json``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_WANTS_JSON] = "--json" in args
        with _json_errors(ctx):
            return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        with _json_errors(ctx), _one_line_errors(ctx):
            return super().invoke(ctx)


@contextmanager
def _one_line_errors(ctx: click.Context) -> Iterator[None]:
    """Anything but click's own errors and exits becomes a one-line error, unless --debug."""
    try:
        yield
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as exc:
        if ctx.params.get("debug"):
            raise
        from jarvis_query.validation import shown

        message = shown(" ".join(str(exc).split())) or "(no message)"
        raise click.ClickException(f"{type(exc).__name__}: {message} (`jarvis --debug …` "
                                   "shows the traceback)") from exc


@contextmanager
def _json_errors(ctx: click.Context) -> Iterator[None]:
    try:
        yield
    except _JsonError:
        raise
    except click.ClickException as exc:
        if not ctx.meta.get(_WANTS_JSON):
            raise
        raise _JsonError(exc.format_message(), exc.exit_code) from exc


class CliContext:
    """The ``--config`` given to `jarvis`, read when a command needs it (the configuration
    module builds its pydantic models on import: `jarvis --help` need not pay for that)."""

    def __init__(self, config_file: str | None):
        self.config_file = config_file

    def config(self) -> JarvisConfig:
        from jarvis_core.config import ConfigError, load_config

        try:
            return load_config(self.config_file)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc

    def knowledge_base(self):
        """The knowledge base, each query recorded in the access log (client ``cli``)."""
        # A query multiplies one vector: the OpenBLAS thread pool numpy starts on import
        # would only spin (about 60 ms of CPU per cold process on two cores).
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        from jarvis_core.audit import AuditLog, audit_path
        from jarvis_query.access_log import AuditedKnowledgeBase
        from jarvis_query.knowledge_base import KnowledgeBase

        config = self.config()
        return AuditedKnowledgeBase(KnowledgeBase(config),
                                    AuditLog(audit_path(config.data_dir), config.audit))


@contextmanager
def answering() -> Iterator[None]:
    """Bad arguments and missing data become one-line errors naming the command's flags."""
    from jarvis_core.stores.serving import NotPublished
    from jarvis_query.validation import QueryError

    try:
        yield
    except QueryError as exc:
        raise click.ClickException(exc.naming(FLAGS)) from exc
    except NotPublished as exc:
        raise click.ClickException(str(exc)) from exc


def emit(data: dict, as_json: bool, render: Callable[[dict], None]) -> None:
    """``data`` as JSON (search hits as their JSON, jarvis_query/results.py), or shown by
    ``render`` (which prints)."""
    if as_json:
        from jarvis_query.results import jsonable

        click.echo(json.dumps(jsonable(data), indent=2, default=str))
    else:
        render(data)


def emit_text(data: dict, as_json: bool, text: Callable[[dict], str]) -> None:
    """``data`` as JSON, or as the readable ``text`` of it (jarvis_query/render.py)."""
    emit(data, as_json, lambda shown: click.echo(text(shown)))
