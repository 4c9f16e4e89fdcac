"""Declarative automation: each layer follows its upstream layer per source partition, and a
failed blocking check stops the layer below it."""

import warnings

import dagster as dg
import pytest
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,  # not exported by dagster
)

from jarvis_assets.partitions import source_partitions
from jarvis_definitions import build_definitions
from tests.pipeline_helpers import run

PER_SOURCE_LAYERS = ("raw_notes", "chunks", "embeddings", "knowledge_graph")
# The refresh job materializes every raw asset for a partition (those of another source kind
# as no-ops), so chunks find none of their deps missing.
RAW_ASSETS = ("raw_notes", "raw_repository", "raw_tickets", "raw_mail", "raw_pages")
CHUNK_CHECKS = ("chunk_ids_unique", "chunks_within_token_limit", "every_document_has_chunks")
# Checks of one source are partitioned like their asset; chunk id uniqueness spans sources.
UNPARTITIONED_CHECKS = ("chunk_ids_unique",)


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(source_partitions.name, ["sample", "other"])
        yield instance


def evaluate(config, instance, cursor=None) -> dg.EvaluateAutomationConditionsResult:
    with warnings.catch_warnings():  # Dagster's own tester uses a beta selection parameter
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.evaluate_automation_conditions(defs=build_definitions(config),
                                                 instance=instance, cursor=cursor)


def requested(result, asset: str) -> set[str] | int:
    key = dg.AssetKey(asset)
    if asset in ("serving_snapshot", "cross_source_links"):  # unpartitioned
        return result.get_num_requested(key)
    return result.get_requested_partitions(key)


def test_nothing_runs_before_a_source_is_ingested(sample_config, instance):
    result = evaluate(sample_config, instance)
    assert result.total_requested == 0


def test_new_notes_request_chunks_of_that_source_only_once(sample_config, instance):
    cursor = evaluate(sample_config, instance).cursor
    for asset in RAW_ASSETS:
        instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition="sample"))
    result = evaluate(sample_config, instance, cursor)
    assert requested(result, "chunks") == {"sample"}
    assert requested(result, "embeddings") == set()  # waits for the chunks to exist
    assert evaluate(sample_config, instance, result.cursor).total_requested == 0


def latest_materialization(instance, asset: str, partition: str):
    """What a check run in the same run as the materialization points at (Dagster records it
    for checks that run; a reported evaluation must name it)."""
    [record] = instance.fetch_materializations(dg.AssetRecordsFilter(
        asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1).records
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp)


@pytest.mark.parametrize("failing_check", [None, "chunk_ids_unique", "every_document_has_chunks"])
def test_failed_blocking_check_stops_the_next_layer(sample_config, instance, failing_check):
    cursor = evaluate(sample_config, instance).cursor
    for asset in (*RAW_ASSETS, "chunks"):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition="sample"))
    target = latest_materialization(instance, "chunks", "sample")
    for check in CHUNK_CHECKS:
        instance.report_runless_asset_event(dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey("chunks"), check_name=check, passed=check != failing_check,
            severity=dg.AssetCheckSeverity.ERROR, target_materialization_data=target,
            partition=None if check in UNPARTITIONED_CHECKS else "sample"))
    result = evaluate(sample_config, instance, cursor)
    assert requested(result, "embeddings") == (set() if failing_check else {"sample"})


@pytest.mark.slow
def test_a_full_refresh_run_leaves_only_publishing_to_automation(sample_config, instance):
    """The refresh job runs every per-source layer in one run: automation must not redo
    them, only publish — once every registered source has data, so a version is never
    published with a source missing."""
    cursor = evaluate(sample_config, instance).cursor
    assert run(sample_config, "sample", instance).success
    result = evaluate(sample_config, instance, cursor)
    assert requested(result, "serving_snapshot") == 0  # "other" was never ingested

    instance.delete_dynamic_partition(source_partitions.name, "other")
    result = evaluate(sample_config, instance, result.cursor)
    for layer in PER_SOURCE_LAYERS:
        assert requested(result, layer) == set(), layer
    # references are resolved across sources first; publishing waits for their check
    assert requested(result, "cross_source_links") == 1
    assert requested(result, "serving_snapshot") == 0
    instance.report_runless_asset_event(dg.AssetMaterialization("cross_source_links"))
    instance.report_runless_asset_event(dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey("cross_source_links"), check_name="cross_source_edges_valid",
        passed=True, severity=dg.AssetCheckSeverity.ERROR))
    result = evaluate(sample_config, instance, result.cursor)
    assert requested(result, "serving_snapshot") == 1
    assert evaluate(sample_config, instance, result.cursor).total_requested == 0
