"""End to end: a note edited on disk becomes searchable through the sensor's run and the
automation that publishes it, with nobody pressing a button."""

import warnings

import dagster as dg
import pytest

from jarvis_assets.jobs import publish_serving_job, refresh_sources_job
from jarvis_definitions import build_definitions
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_resources import build_resources
from sensors.vault_changes import vault_changes_sensor
from tests.pipeline_helpers import run

NOTE = "Inbox/Quick Capture.md"
NEW_TEXT = ("Idea: the greenhouse humidity logger should wake on a reed switch and "
            "sample every ninety seconds while the vents are open.")


def tick(config, instance, cursor):
    resources = {"jarvis": build_resources(str(config.config_path))["jarvis"]}
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    return vault_changes_sensor(context)


def evaluate(definitions, instance, cursor=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.evaluate_automation_conditions(defs=definitions, instance=instance,
                                                 cursor=cursor)


@pytest.mark.slow
def test_edited_note_is_searchable_after_the_sensor_run(sample_config, sample_vault):
    definitions = build_definitions(sample_config)
    knowledge_base = KnowledgeBase(sample_config)
    with dg.DagsterInstance.ephemeral() as instance:
        assert run(sample_config, "sample", instance).success
        definitions.resolve_job_def(publish_serving_job.name).execute_in_process(
            instance=instance)
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

        job = definitions.resolve_job_def(refresh_sources_job.name)
        result = job.execute_in_process(partition_key=request.partition_key,
                                        tags=request.tags, instance=instance)
        assert result.success
        assert result.dagster_run.tags["jarvis/changed_paths"] == NOTE

        # What the automation sensor then does: resolve cross-source links and publish, since
        # every per-source layer is fresh; the publish job holds exactly those two.
        automation = evaluate(definitions, instance, automation_cursor)
        for asset in ("cross_source_links", "serving_snapshot"):
            assert automation.get_num_requested(dg.AssetKey(asset)) == 1, asset
        assert automation.total_requested == 2
        definitions.resolve_job_def(publish_serving_job.name).execute_in_process(
            instance=instance)

        [hit] = knowledge_base.search_semantic("greenhouse humidity logger reed switch",
                                               limit=1)
        assert hit.path == NOTE
        assert "reed switch" in knowledge_base.snapshots.current().cursor().execute(
            "SELECT text FROM chunks WHERE chunk_id = ?", [hit.chunk_id]).fetchone()[0]
        assert not tick(sample_config, instance, changed.cursor).run_requests
    knowledge_base.close()
