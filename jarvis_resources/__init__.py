"""Dagster resources of Jarvis: the configuration, and the stores and model built from it.

Every resource reads its settings from the one configuration resource at run time, so a
run sees one consistent configuration; the definitions carry only the file's path.
"""

from jarvis_resources.config import JarvisConfigResource
from jarvis_resources.embedder import EmbedderResource
from jarvis_resources.graph import GraphStoreResource
from jarvis_resources.keyword import KeywordIndexResource
from jarvis_resources.tables import TablesResource
from jarvis_resources.vectors import VectorStoreResource

__all__ = ["EmbedderResource", "GraphStoreResource", "JarvisConfigResource",
           "KeywordIndexResource", "TablesResource", "VectorStoreResource", "build_resources"]


def build_resources(config_file: str | None) -> dict:
    """The resources for the configuration file ``config_file`` (None: $JARVIS_CONFIG, else
    ./jarvis.yaml, resolved when a run starts)."""
    jarvis = JarvisConfigResource(config_file=config_file)
    embedder = EmbedderResource(jarvis=jarvis)
    tables = TablesResource(jarvis=jarvis)
    return {
        "jarvis": jarvis,
        "tables": tables,
        "embedder": embedder,
        "vectors": VectorStoreResource(jarvis=jarvis, embedder=embedder, tables=tables),
        "graph": GraphStoreResource(jarvis=jarvis, tables=tables),
        "keyword": KeywordIndexResource(jarvis=jarvis, tables=tables),
    }
