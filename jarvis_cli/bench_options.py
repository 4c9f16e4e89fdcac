"""What several `jarvis bench` commands take alike: a list of sizes, the configured embedder."""

from __future__ import annotations

import click


def sizes_of(sizes: str) -> tuple[int, ...]:
    try:
        parsed = tuple(int(size) for size in sizes.split(","))
    except ValueError as exc:
        raise click.ClickException(f"--sizes: not a list of integers: {sizes}") from exc
    if min(parsed) < 1:
        raise click.ClickException(f"--sizes: every size must be at least 1: {sizes}")
    return parsed


def embedder_of(config):
    """The configured embedder, as the pipeline makes it."""
    from jarvis_core.text.embedder import Embedder

    settings = config.embedding
    return Embedder(settings.model, device=settings.device, batch_size=settings.batch_size,
                    backend=settings.backend, cache_dir=config.cache_dir)
