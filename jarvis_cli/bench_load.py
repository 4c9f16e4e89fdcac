"""`jarvis bench load`: serving replicas under concurrent MCP clients during refreshes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from jarvis_cli.common import CliContext, emit
from jarvis_query.render import table

SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data"


def _at_least(minimum: int):
    def check(context, parameter, value: int) -> int:
        if value < minimum:
            raise click.BadParameter(f"must be at least {minimum}, got {value}")
        return value
    return check


@click.command(name="load")
@click.option("--servers", default=3, show_default=True, callback=_at_least(1),
              help="`jarvis serve --http` processes on one data directory.")
@click.option("--clients", default=32, show_default=True, callback=_at_least(1),
              help="Concurrent MCP clients, spread over the servers and the four tokens.")
@click.option("--calls", default=10_000, show_default=True, callback=_at_least(20),
              help="Calls in total (tools, resource reads, prompts).")
@click.option("--refreshes", default=2, show_default=True, callback=_at_least(0),
              help="Edit-and-refresh rounds run while the clients call.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the sample copy, its data and the server logs go (default: a temp "
                   "folder).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_load(obj: CliContext, servers: int, clients: int, calls: int, refreshes: int,
               work_dir: Path | None, as_json: bool) -> None:
    """Replicas on loopback: failed calls, profile leaks, audit rows against calls and
    latency per tool while refreshes publish new versions. The embedding model and its
    cache come from the configuration; nothing is written to its data directory."""
    from jarvis_bench.load import LoadError, measure_load, prepare_sample

    if not SAMPLE_DATA.is_dir():
        raise click.ClickException(f"the sample data the benchmark copies is missing: "
                                   f"{SAMPLE_DATA}")
    config = obj.config()
    work_dir = work_dir or Path(tempfile.mkdtemp(prefix="jarvis-load-"))
    embedding = config.embedding.model_dump(mode="json", include={"model", "device",
                                                                  "batch_size", "backend"})
    try:
        config_path, env = prepare_sample(work_dir, SAMPLE_DATA, embedding, config.cache_dir)
        result = measure_load(config_path, env, work_dir, servers=servers, clients=clients,
                              calls=calls, refreshes=refreshes)
    except LoadError as exc:
        raise click.ClickException(str(exc)) from exc
    emit(result, as_json, _render)


def _render(data: dict) -> None:
    click.echo(f"{data['calls']} calls by {data['clients']} clients on {data['servers']} "
               f"servers in {data['wall_seconds']} s: {data['failed_calls']} failed, "
               f"{data['profile_leaks']} leaks, {data['audit_rows']} audit rows, every server "
               f"switched: {data['every_server_switched']}")
    click.echo(table([{"tool": tool, **figures} for tool, figures in data["tools"].items()],
                     ["tool", "calls", "p50_ms", "p95_ms", "p99_ms", "max_ms"]))
