"""`jarvis bench scale`: the cost of a refresh and of queries against the corpus's size."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from jarvis_cli.bench_options import sizes_of
from jarvis_cli.common import emit
from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_query.render import table


def _render(data: dict) -> None:
    from jarvis_bench.scale import COLUMNS

    click.echo(f"embedder: {data['embedder']}")
    click.echo(table(data["sizes"], COLUMNS))
    for row in data["sizes"]:
        click.echo(f"\nfirst refresh of {row['chunks']} chunks, per layer:")
        click.echo(table([{"layer": name, **cost} for name, cost in row["layers"].items()],
                         ["layer", "wall_seconds", "cpu_seconds", "peak_rss_mb", "steps"]))
        click.echo(table([{"tool": name, **timing} for name, timing in
                          row["queries"]["tools"].items()],
                         ["tool", "p50_ms", "p95_ms", "goal_p50_ms"]))
    click.echo(f"chart: {data['chart']}")


@click.command(name="scale")
@click.option("--sizes", default="10000,100000", show_default=True, help="Target chunks per size.")
@click.option("--embedder", type=click.Choice(("model", HASHED_NGRAMS)), default="model",
              show_default=True,
              help="model: the configured model at full cost; hashed-ngrams: a cheap "
                   "deterministic stand-in (feature-hashed words) for the largest sizes.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the corpora, their data and scale.svg go (default: a temp folder).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_scale(sizes: str, embedder: str, work_dir: Path | None, as_json: bool) -> None:
    """Refreshes (first, no-op, one note and one ticket edited) and warm queries of generated
    corpora per size, each in a child process measured from outside, per layer within."""
    from jarvis_bench.scale import run_scale_benchmark

    work_dir = work_dir or Path(tempfile.mkdtemp(prefix="jarvis-scale-"))
    result = run_scale_benchmark(sizes_of(sizes), work_dir, work_dir / "scale.svg", embedder)
    emit(result, as_json, _render)
