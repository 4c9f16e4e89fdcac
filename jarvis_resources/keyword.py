"""The Tantivy keyword index (BM25) under the data directory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dagster import ConfigurableResource

if TYPE_CHECKING:
    from jarvis_core.stores.keyword import KeywordIndex

from jarvis_resources.config import JarvisConfigResource


class KeywordIndexResource(ConfigurableResource):
    """The writer's index; opened per use (Tantivy's writer lock is held only while a step
    writes, waiting up to 30 s for another run's)."""

    jarvis: JarvisConfigResource

    @contextmanager
    def open(self) -> Iterator[KeywordIndex]:
        from jarvis_core.stores.keyword import KeywordIndex

        with KeywordIndex(self.jarvis.load().keyword_path) as index:
            yield index
