"""Plain-Python core of Jarvis: configuration, parsing and chunking shared by the
pipeline (Dagster assets) and the query side (which must not import Dagster)."""
