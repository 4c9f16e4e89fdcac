"""End to end: a note edited on disk becomes searchable through the sensor's run (its
ingestion) and the automation that runs the later layers and publishes them, with nobody
pressing a button."""

import warnings

import dagster as dg
import pytest

from jarvis_definitions import build_definitions
from jarvis_pipeline.instance import project_instance
from jarvis_query.knowledge_base import KnowledgeBase
from tests.dagster.sensor_helpers import CHANGE_SENSORS
from tests.dagster.sensor_helpers import tick as sensor_tick

NOTE = "Inbox/Quick Capture.md"
NEW_TEXT = ("Idea: the greenhouse humidity logger should wake on a reed switch and "
            "sample every ninety seconds while the vents are open.")


PER_SOURCE = {"chunks", "embeddings", "keyword_index", "knowledge_graph", "vault_analytics"}
vault_changes_sensor = CHANGE_SENSORS["vault"]


def tick(config, instance, cursor):
    return sensor_tick(vault_changes_sensor, config, instance, cursor)


def evaluate(definitions, instance, cursor=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.evaluate_automation_conditions(defs=definitions, instance=instance,
                                                 cursor=cursor)


def automate(definitions, instance, cursor) -> list[dict]:
    """What the automation sensor does until nothing is left to do: each tick's requests,
    run as the daemon launches them (one run per partition, one for the unpartitioned
    assets); what each tick requested (asset -> partitions, or a count when unpartitioned)."""
    graph = definitions.resolve_asset_graph()
    ticks = []
    while True:
        result = evaluate(definitions, instance, cursor)
        cursor = result.cursor
        requested = {}
        for key in graph.get_all_asset_keys():
            if not graph.get(key).is_materializable:
                continue
            found = (result.get_requested_partitions(key) if graph.get(key).partitions_def
                     else result.get_num_requested(key))
            if found:
                requested[key.to_user_string()] = found
        if not requested:
            return ticks
        ticks.append(requested)
        assert len(ticks) < 5, ticks
        runs: dict[str | None, list[dg.AssetKey]] = {}
        for asset, found in requested.items():
            for partition in found if isinstance(found, set) else [None]:
                runs.setdefault(partition, []).append(dg.AssetKey(asset))
        for partition, keys in runs.items():
            job = definitions.resolve_implicit_job_def_def_for_assets(keys)
            assert job.execute_in_process(instance=instance, partition_key=partition,
                                          asset_selection=keys).success


@pytest.mark.slow
def test_edited_note_is_searchable_after_the_sensor_run(sample_copy):
    """From the sample as `jarvis refresh` leaves it (a copy of the published one: its stores
    and the project's Dagster instance, whose records the sensors and the automation read),
    not from a refresh of its own."""
    sample_config, sample_vault = sample_copy, sample_copy.sources["sample"].path
    definitions = build_definitions(sample_config)
    knowledge_base = KnowledgeBase(sample_config)
    with project_instance(sample_config) as instance:
        automation_cursor = evaluate(definitions, instance).cursor
        before = knowledge_base.search_semantic("greenhouse humidity logger reed switch",
                                                limit=3)
        assert NOTE not in [hit.path for hit in before[:1]]

        baseline = tick(sample_config, instance, None)
        assert not baseline.run_requests  # nothing changed since the refresh

        note = sample_vault / NOTE
        note.write_text(note.read_text(encoding="utf-8") + f"\n{NEW_TEXT}\n", encoding="utf-8")
        changed = tick(sample_config, instance, baseline.cursor)
        [request] = changed.run_requests
        assert request.partition_key == "sample"
        assert request.tags["jarvis/changed_paths"] == NOTE
        assert request.tags["jarvis/reason"] == "notes 1 changed"

        job = definitions.resolve_job_def(vault_changes_sensor.job_name)  # ingest_vault
        result = job.execute_in_process(partition_key=request.partition_key,
                                        tags=request.tags, instance=instance)
        assert result.success
        assert result.dagster_run.tags["jarvis/changed_paths"] == NOTE

        # What the automation sensor then does: every later layer of that source (one run),
        # then resolve cross-source links and publish (one run, what the publish job holds)
        assert automate(definitions, instance, automation_cursor) == [
            dict.fromkeys(PER_SOURCE, {"sample"}),
            {"cross_source_links": 1, "serving_snapshot": 1}]

        [hit] = knowledge_base.search_semantic("greenhouse humidity logger reed switch",
                                               limit=1)
        assert hit.path == NOTE
        assert "reed switch" in knowledge_base.snapshots.current().cursor().execute(
            "SELECT text FROM chunks WHERE chunk_id = ?", [hit.chunk_id]).fetchone()[0]
        assert not tick(sample_config, instance, changed.cursor).run_requests
        assert not knowledge_base.get_vault_context("sample")["is_stale"]  # its snapshot too
    knowledge_base.close()
