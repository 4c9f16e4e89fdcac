"""The Tantivy keyword index (BM25) under the data directory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dagster import ConfigurableResource, get_dagster_logger

if TYPE_CHECKING:
    from jarvis_core.stores.keyword import KeywordIndex

from jarvis_resources.config import JarvisConfigResource
from jarvis_resources.tables import TablesResource


class KeywordIndexResource(ConfigurableResource):
    """The writer's index; opened per use (Tantivy's writer lock is held only while a step
    writes, waiting up to 30 s for another run's). A damaged index is rebuilt from the
    chunks table when opened (``jarvis_core.stores.healing``)."""

    jarvis: JarvisConfigResource
    tables: TablesResource

    @contextmanager
    def open(self) -> Iterator[KeywordIndex]:
        from jarvis_core.stores.healing import open_keyword_index

        config = self.jarvis.load()
        with open_keyword_index(config.keyword_path, config.data_dir, self.tables.get_connection,
                                get_dagster_logger()) as index:
            yield index
