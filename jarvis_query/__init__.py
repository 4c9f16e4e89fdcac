"""The query side of Jarvis: plain Python over the materialized stores, no Dagster."""
