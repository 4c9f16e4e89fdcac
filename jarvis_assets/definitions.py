"""Definitions for one configuration; the Dagster entry point and the CLI both build them here."""

import dagster as dg

from jarvis_assets.analytics import analytics_checks, vault_analytics
from jarvis_assets.checks import asset_checks
from jarvis_assets.chunks import chunks
from jarvis_assets.cross_links import cross_source_links
from jarvis_assets.embeddings import embeddings
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.jobs import analytics_snapshot_job, publish_serving_job, refresh_sources_job
from jarvis_assets.keyword_index import keyword_index
from jarvis_assets.notes import raw_notes
from jarvis_assets.repos import raw_repository
from jarvis_assets.serving import serving_snapshot
from jarvis_assets.tickets import raw_tickets
from jarvis_core.config import JarvisConfig
from jarvis_resources import build_resources
from schedules import build_schedules
from sensors import all_sensors


def build_definitions(config: JarvisConfig) -> dg.Definitions:
    return dg.Definitions(
        assets=[raw_notes, raw_repository, raw_tickets, cross_source_links,
                chunks, keyword_index, embeddings, knowledge_graph, vault_analytics,
                serving_snapshot],
        asset_checks=[*asset_checks, *analytics_checks],
        jobs=[refresh_sources_job, publish_serving_job, analytics_snapshot_job],
        sensors=all_sensors,
        schedules=build_schedules(config),
        resources=build_resources(config),
        executor=dg.in_process_executor,
    )
