"""`jarvis bench scale`: the cost of a refresh against the corpus's size."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from jarvis_cli.bench_options import sizes_of
from jarvis_cli.common import emit
from jarvis_query.render import table


@click.command(name="scale")
@click.option("--sizes", default="10000,100000", show_default=True, help="Target chunks per size.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the corpora, their data and scale.svg go (default: a temp folder).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_scale(sizes: str, work_dir: Path | None, as_json: bool) -> None:
    """First and no-op refresh of generated corpora per size, measured from outside."""
    from jarvis_bench.scale import COLUMNS, run_scale_benchmark
    work_dir = work_dir or Path(tempfile.mkdtemp(prefix="jarvis-scale-"))
    result = run_scale_benchmark(sizes_of(sizes), work_dir, work_dir / "scale.svg")
    emit(result, as_json, lambda data: click.echo(table(data["sizes"], COLUMNS)))
