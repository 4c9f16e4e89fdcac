"""`jarvis`: refresh the knowledge base, search it (jarvis_cli/queries.py), benchmark it and
open the UI.

Every command prints a readable summary, or JSON with ``--json`` for scripts (errors too:
``{"error": "…"}`` with a non-zero exit, jarvis_cli/common.py). Dagster is imported only by
the commands that run the pipeline or the UI.
"""

from __future__ import annotations

import os

import click

from jarvis_cli.assistants import ASSISTANT_COMMANDS
from jarvis_cli.bench import bench, evaluate
from jarvis_cli.common import CliContext, JarvisGroup
from jarvis_cli.pipeline import PIPELINE_COMMANDS
from jarvis_cli.queries import QUERY_COMMANDS
from jarvis_core.garbage_collection import collect_less_often


@click.group(cls=JarvisGroup)
@click.option("--config", "config_file", envvar="JARVIS_CONFIG", type=click.Path(),
              help="Configuration file (default: $JARVIS_CONFIG, else ./jarvis.yaml).")
@click.option("--debug", is_flag=True,
              help="Show the traceback of an unexpected error (otherwise one line).")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, debug: bool) -> None:
    """Jarvis: your notes, code and tickets as a searchable, linked knowledge base."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    collect_less_often()
    ctx.obj = CliContext(config_file)


for _command in (*PIPELINE_COMMANDS, *QUERY_COMMANDS, *ASSISTANT_COMMANDS, evaluate, bench):
    cli.add_command(_command)
