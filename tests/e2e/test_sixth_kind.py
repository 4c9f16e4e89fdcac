"""A sixth source kind is its folder plus one registration line: a throw-away kind (a folder
of .txt files, tests/textfiles_kind/) registered here goes through the raw layer, chunks,
the keyword index, vectors, the graph and publishing, and is searched, listed and found by
name, with nothing else of Jarvis changed."""

import pytest

from jarvis_core.sources import registry
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase
from tests.pipeline_helpers import write_config
from tests.textfiles_kind.kind import TEXT_FILES

pytestmark = pytest.mark.slow

FILES = {
    "lighthouse.txt": "Lighthouse keeping\n\nThe keeper trims the lamp wick at dusk and logs "
                      "every passing ship in the tide book. #maritime #night-watch",
    "sourdough.txt": "Sourdough starter\n\nFeed the starter with rye flour and water every "
                     "morning; it doubles in six hours when the kitchen is warm. #baking",
}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("sixth-kind")
    folder = root / "texts"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "KINDS", (*registry.KINDS, TEXT_FILES))  # the registration
        for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
            patch.delenv(name, raising=False)
        config = write_config(root / "project", {}, textfiles={"shelf": str(folder)})
        report = run_refresh(config)
        knowledge = KnowledgeBase(config)
        yield config, report, knowledge
        knowledge.close()


def test_every_layer_runs_for_the_new_kind_and_only_its_raw_layer(published):
    _, report, _ = published
    assert report["ok"], report
    [entry] = report["sources"]
    layers = entry["layers"]
    assert set(layers) == {"raw_text_files", "chunks", "keyword_index", "knowledge_graph",
                           "vault_analytics", "embeddings"}
    assert layers["raw_text_files"]["new"] == 2
    assert layers["chunks"]["new"] == 2 and layers["chunks"]["rows"] >= 2
    assert layers["embeddings"]["embedded"] == layers["chunks"]["rows"]
    assert layers["knowledge_graph"]["edges"] == 3  # one TAGGED edge per hashtag
    assert all(check["passed"] for check in entry["checks"]), entry["checks"]
    assert report["published"]["layers"]["serving_snapshot"]["vectors_complete"] is True


def test_its_documents_are_found_by_keyword_meaning_and_hybrid_search(published):
    _, _, knowledge = published
    [hit] = knowledge.search_vault("wick", search_content=True, limit=1)
    assert (hit.vault, hit.path, hit.source_type) == ("shelf", "lighthouse.txt", "text")
    semantic = knowledge.search_semantic("bread fermentation", limit=1)
    assert semantic[0].path == "sourdough.txt"
    hybrid = knowledge.search_hybrid("ship log at night", limit=2, source_types=["text"])
    assert [result.path for result in hybrid][0] == "lighthouse.txt"


def test_its_graph_is_searched_from_a_document_named_by_its_title(published):
    _, _, knowledge = published
    graph = knowledge.search_graph("Sourdough starter")
    assert graph["available"] and graph["path"] == "sourdough.txt"
    assert graph["center"]["key"] == "text:shelf/sourdough.txt"
    [tagged] = graph["relationships"]["TAGGED"]
    assert (tagged["dst"], tagged["evidence_text"]) == ("tag:baking", FILES["sourdough.txt"]
                                                        .splitlines()[-1])
    assert tagged["evidence"]  # the chunk the tag was read in


def test_it_is_listed_with_its_own_counts(published):
    _, _, knowledge = published
    [listed] = knowledge.list_vaults()["other_sources"]
    assert (listed["name"], listed["kind"], listed["text_files"]) == ("shelf", "textfiles", 2)
    assert listed["chunks"] == {"text": 2}
