"""Declarative automation: each layer follows its upstream layer per source partition, and a
failed blocking check stops the layer below it."""

import warnings

import dagster as dg
import pytest
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,  # not exported by dagster
)

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_core.sources import registry
from jarvis_definitions import build_definitions
from jarvis_pipeline.instance import instance_at
from tests.pipeline_helpers import run

PER_SOURCE_LAYERS = ("raw_notes", "chunks", "embeddings", "knowledge_graph")
VAULT = registry.kind("vault")
# A vault's raw asset is partitioned by the vaults only: the chunks of a vault follow it
# alone, although chunks depend on every kind's raw asset.
RAW_ASSET = VAULT.asset.name
OTHER_RAW_ASSETS = tuple(kind.asset.name for kind in registry.kinds() if kind is not VAULT)
CHUNK_CHECKS = ("chunk_ids_unique", "chunks_within_token_limit", "every_document_has_chunks")
# Checks of one source are partitioned like their asset; chunk id uniqueness spans sources.
UNPARTITIONED_CHECKS = ("chunk_ids_unique",)


@pytest.fixture
def instance(tmp_path):
    """The kind of instance `jarvis refresh` records its runs in (``instance_at``). Dagster's
    tester reads the dynamic partitions again for each subset it records; the ephemeral
    instance opened its in-memory storage again for each read (the module: 21-23 CPU-s on
    it, 17-18.5 on this)."""
    with instance_at(tmp_path) as instance:
        instance.add_dynamic_partitions(source_partitions.name, ["sample", "other"])
        instance.add_dynamic_partitions(kind_partitions(VAULT).name, ["sample", "other"])
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
    instance.report_runless_asset_event(dg.AssetMaterialization(RAW_ASSET, partition="sample"))
    result = evaluate(sample_config, instance, cursor)
    assert requested(result, "chunks") == {"sample"}
    # the layers below the chunks are requested with them, for the same source: one run in
    # which each step runs after its upstream and that upstream's blocking checks (a failed
    # one stops it); nothing across sources before every source has data
    assert requested(result, "embeddings") == {"sample"}
    assert requested(result, "cross_source_links") == requested(result, "serving_snapshot") == 0
    assert evaluate(sample_config, instance, result.cursor).total_requested == 0


def latest_materialization(instance, asset: str, partition: str | None):
    """What a check run in the same run as the materialization points at (Dagster records it
    for checks that run; a reported evaluation must name it)."""
    [record] = instance.fetch_materializations(dg.AssetRecordsFilter(
        asset_key=dg.AssetKey(asset),
        asset_partitions=[partition] if partition else None), limit=1).records
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp)


@pytest.mark.parametrize("failing_check", [None, "chunk_ids_unique", "every_document_has_chunks"])
def test_failed_blocking_check_stops_the_next_layer(sample_config, instance, failing_check):
    cursor = evaluate(sample_config, instance).cursor
    for asset in (RAW_ASSET, "chunks"):
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
def test_a_full_refresh_run_leaves_only_publishing_to_automation(sample_copy, instance):
    """The refresh job runs every per-source layer in one run: automation must not redo
    them, only publish — once every registered source has data, so a version is never
    published with a source missing. (The run is of a copy of the published sample: what
    automation reads is the instance's record of the run, whatever the run found to do.)"""
    sample_config = sample_copy
    cursor = evaluate(sample_config, instance).cursor
    assert run(sample_config, "sample", instance).success
    # the vault's ingestion materialized its own raw asset only: no other kind's raw asset
    # has a partition for it
    assert instance.get_materialized_partitions(dg.AssetKey(RAW_ASSET)) == {"sample"}
    for asset in OTHER_RAW_ASSETS:
        assert instance.get_materialized_partitions(dg.AssetKey(asset)) == set(), asset
    result = evaluate(sample_config, instance, cursor)
    assert requested(result, "serving_snapshot") == 0  # "other" was never ingested

    for partitions in (source_partitions.name, kind_partitions(VAULT).name):
        instance.delete_dynamic_partition(partitions, "other")
    result = evaluate(sample_config, instance, result.cursor)
    for layer in PER_SOURCE_LAYERS:
        assert requested(result, layer) == set(), layer
    # references are resolved across sources first: publishing is requested with them, one
    # run in which it waits for their blocking check
    assert requested(result, "cross_source_links") == 1
    assert requested(result, "serving_snapshot") == 1
    assert evaluate(sample_config, instance, result.cursor).total_requested == 0


@pytest.mark.parametrize("passed", [True, False])
def test_publishing_waits_for_the_cross_source_check(sample_config, instance, passed):
    """Links resolved by a run whose blocking check failed are never published by a later
    tick; once the check passes, they are."""
    for partitions in (source_partitions.name, kind_partitions(VAULT).name):
        instance.delete_dynamic_partition(partitions, "other")
    cursor = evaluate(sample_config, instance).cursor
    for asset in (RAW_ASSET, *PER_SOURCE_LAYERS[1:], "keyword_index", "vault_analytics"):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition="sample"))
    instance.report_runless_asset_event(dg.AssetMaterialization("serving_snapshot"))
    cursor = evaluate(sample_config, instance, cursor).cursor
    instance.report_runless_asset_event(dg.AssetMaterialization("cross_source_links"))
    instance.report_runless_asset_event(dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey("cross_source_links"), check_name="cross_source_edges_valid",
        passed=passed, severity=dg.AssetCheckSeverity.ERROR,
        target_materialization_data=latest_materialization(instance, "cross_source_links",
                                                           None)))
    result = evaluate(sample_config, instance, cursor)
    assert requested(result, "serving_snapshot") == (1 if passed else 0)
