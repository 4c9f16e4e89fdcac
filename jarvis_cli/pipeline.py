"""The commands that run the pipeline: `jarvis refresh`, `jarvis ui` and `jarvis daemon`
(the only ones that import Dagster)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from jarvis_cli.common import CliContext, emit


@click.command()
@click.option("--source", "sources", multiple=True, help="Refresh only this source (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def refresh(obj: CliContext, sources: tuple[str, ...], as_json: bool) -> None:
    """Refresh the sources that changed since the published version (or those named), then
    publish; with nothing changed, nothing runs."""
    from jarvis_cli.refresh_view import render_report, shown_progress
    from jarvis_pipeline.refresh import run_refresh

    try:
        with shown_progress(plain=as_json or not sys.stdout.isatty()):
            report = run_refresh(obj.config(), list(sources) or None)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    emit(report, as_json, render_report)
    if not report["ok"]:
        sys.exit(1)


def _dagster_command(name: str) -> Path:
    """A Dagster executable next to this interpreter (not on PATH: `.venv/bin/jarvis ui` works
    without an activated virtual environment)."""
    command = Path(sys.executable).parent / name
    if not command.is_file():
        raise click.ClickException(f"{name} is not installed beside {sys.executable}: "
                                   f"{command} not found")
    return command


def _exec_dagster(obj: CliContext, name: str, *args: str) -> None:
    """Replace this process with a Dagster command on the project's instance and
    configuration (the instance `jarvis refresh` records its runs in)."""
    from jarvis_pipeline.instance import dagster_home

    config = obj.config()
    workspace = Path.cwd() / "workspace.yaml"
    if not workspace.is_file():
        raise click.ClickException(f"run `jarvis {name.split('-')[-1]}` from the project "
                                   f"folder: {workspace} not found")
    command = _dagster_command(name)
    os.environ["DAGSTER_HOME"] = str(dagster_home(config))
    if config.config_path:
        os.environ.setdefault("JARVIS_CONFIG", str(config.config_path))
    os.execv(command, [str(command), *args, "-w", str(workspace)])


@click.command()
@click.option("--port", default=3000, show_default=True)
@click.pass_obj
def ui(obj: CliContext, port: int) -> None:
    """Open the Dagster UI (webserver and daemon) on the project's instance."""
    _exec_dagster(obj, "dagster", "dev", "-p", str(port))


@click.command()
@click.pass_obj
def daemon(obj: CliContext) -> None:
    """Run Dagster's daemon alone (sensors, schedules, automation) on the project's instance:
    freshness without the UI; see the README for a user service that keeps it running."""
    _exec_dagster(obj, "dagster-daemon", "run")


PIPELINE_COMMANDS = (refresh, ui, daemon)
