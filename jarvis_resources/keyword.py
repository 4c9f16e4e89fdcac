"""The Tantivy keyword index (BM25) under the data directory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dagster import ConfigurableResource, get_dagster_logger

if TYPE_CHECKING:
    from jarvis_core.stores.keyword import KeywordIndex

from jarvis_core.stores.locks import lock_path, write_turn
from jarvis_resources.config import JarvisConfigResource
from jarvis_resources.tables import TablesResource


class KeywordIndexResource(ConfigurableResource):
    """The writer's index; opened per use, in a write turn (``jarvis_core.stores.locks``)
    while it is opened and whenever it writes, so runs of other sources write it in between.
    A damaged index is rebuilt from the chunks table when opened
    (``jarvis_core.stores.healing``)."""

    jarvis: JarvisConfigResource
    tables: TablesResource

    @contextmanager
    def open(self) -> Iterator[KeywordIndex]:
        from jarvis_core.stores.healing import open_keyword_index

        config = self.jarvis.load()
        with write_turn(lock_path(config.keyword_path), f"keyword index {config.keyword_path}"):
            index = open_keyword_index(config.keyword_path, config.data_dir,
                                       self.tables.get_connection, get_dagster_logger())
        with index:
            yield index
