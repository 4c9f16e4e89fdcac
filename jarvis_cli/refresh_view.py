"""What `jarvis refresh` shows: progress while it runs (bars on a terminal, plain lines
otherwise) and the report when it is done."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from jarvis_core import progress
from jarvis_query.render import table

COUNT_KEYS = ("new", "changed", "unchanged", "deleted", "failed")
_PUBLISH_KEYS = ("references", "edges", "origins_rewritten", "unresolved", "version", "chunks",
                 "vectors", "vectors_complete")
LINE_EVERY_SECONDS = 10.0


@contextmanager
def shown_progress(plain: bool) -> Iterator[None]:
    """Bars per source and layer (with an ETA for embedding) while the block runs; with
    ``plain`` (not a terminal, or --json), lines on stderr: a layer's start, its first
    progress, every LINE_EVERY_SECONDS while it runs, and its end."""
    listener = _line_listener() if plain else None
    bars = None
    if listener is None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        bars = Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                        TimeRemainingColumn(), transient=False)
        tasks: dict[tuple[str, str], int] = {}

        def listener(event: progress.Progress) -> None:
            key = (event.source, event.layer)
            if key not in tasks:
                if not event.total:  # nothing to do in this layer: no bar
                    return
                tasks[key] = bars.add_task(f"{event.source}: {event.layer}", total=event.total)
            bars.update(tasks[key], completed=event.done, total=event.total)

        bars.start()
    progress.add_listener(listener)
    try:
        yield
    finally:
        progress.remove_listener(listener)
        if bars is not None:
            bars.stop()


def _line_listener():
    last: dict[tuple[str, str], tuple[float, int]] = {}

    def listener(event: progress.Progress) -> None:
        key, now = (event.source, event.layer), time.monotonic()
        when, done = last.get(key, (0.0, 0))
        if (event.done == event.total or (done == 0 and event.done > 0)
                or now - when >= LINE_EVERY_SECONDS):
            last[key] = (now, event.done)
            print(f"{event.source}: {event.layer} {event.done:,} of {event.total:,}",
                  file=sys.stderr, flush=True)

    return listener


def render_report(data: dict) -> None:
    if data["ok"] and not data["sources"]:
        click.echo(f"nothing changed since serving version {data['version']}: no source ran")
        return
    for source in data["sources"]:
        click.echo(f"\n{source['source']} ({data['reasons'].get(source['source'], 'asked')}): "
                   f"{'ok' if source['ok'] else 'FAILED'} in {source['seconds']} s")
        rows = [{"layer": layer, **counts} for layer, counts in source["layers"].items()]
        click.echo(table(rows, ["layer", *COUNT_KEYS, "embedded", "reused", "rows"]))
        for check in source["checks"]:
            if not check["passed"]:
                click.echo(f"  check {check['check']} on {check['asset']}: "
                           f"FAILED ({check['severity']})")
        for step in source["failed_steps"]:
            click.echo(f"  step {step} failed: see the run's logs")
    if data["partial"] and data["partial"]["ok"]:
        version = data["partial"]["layers"]["serving_snapshot"]["version"]
        click.echo(f"\npublished {version} before embedding: keyword, graph, read and "
                   "analytics answered from it while the embeddings were made")
    published = data["published"]
    if published is None:
        click.echo("\nnot published: the query side keeps answering from the last "
                   "complete version")
    elif published["ok"]:
        rows = [{"layer": layer, **{k: v for k, v in counts.items() if k in _PUBLISH_KEYS}}
                for layer, counts in published["layers"].items()]
        click.echo("\n" + table(rows, ["layer", *_PUBLISH_KEYS]))
        click.echo(f"\npublished serving version {data['version']}")
    else:
        click.echo("\npublishing FAILED: see the run's logs")
