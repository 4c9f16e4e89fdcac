"""`jarvis bench parallel`: four sources refreshed as concurrent runs against one after
another."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from jarvis_cli.common import emit

_SHOWN = ("max_concurrent_runs", "wall_seconds", "cpu_seconds", "peak_rss_mb",
          "peak_process_rss_mb", "phases_seconds", "vectors")


def _render(result: dict) -> None:
    embedder = result["embedder"]
    click.echo(f"embedder: {embedder['model']} ({embedder.get('backend')}, "
               f"{embedder.get('precision')}); {result['chunks_per_source']} chunks a source, "
               f"{result['published_chunks']} published; vectors {result['vectors']}")
    for mode in ("sequential", "parallel"):
        click.echo(f"{mode:>10}: " + ", ".join(f"{key} {result[mode][key]}" for key in _SHOWN))
    click.echo(f"speedup {result['speedup']}, identical {result['identical']} "
               f"{result['differences']['differing'] or ''}")


@click.command(name="parallel")
@click.option("--chunks", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Target chunks per source.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the corpus and each mode's data go (default: a temp folder).")
@click.option("--warm", is_flag=True,
              help="Fill the vector cache first, so both modes measure the layers around the "
                   "embeddings (a refresh that embeds little).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_parallel(chunks: int, work_dir: Path | None, warm: bool, as_json: bool) -> None:
    """Four generated sources as four concurrent Dagster runs (QueuedRunCoordinator,
    dagster-daemon) against one after another; wall, CPU, peak RSS, speed-up, and whether
    both publish identical content."""
    from jarvis_bench.parallel import run_parallel_benchmark

    work_dir = work_dir or Path(tempfile.mkdtemp(prefix="jarvis-parallel-"))
    emit(run_parallel_benchmark(chunks, work_dir, warm), as_json, _render)
