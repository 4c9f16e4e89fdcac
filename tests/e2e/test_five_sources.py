"""The shipped sample configuration (jarvis.yaml: the vault, the lumen repository, its Jira and
GitHub exports, the lumen-dev mbox and the Confluence space) published in one refresh: all five
kinds of source in one graph, and the issue's "done when" - a search for a decision argued
in a mail thread finds the thread, its ticket and the commit that landed it.

Searched on the published keyword index and graph store directly (jarvis_query's
KnowledgeBase is being rewritten while this lands)."""

from collections import Counter

import pytest

from jarvis_core.stores import serving
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.keyword import KeywordSearcher
from tests.pipeline_helpers import rows

pytestmark = pytest.mark.slow

DEDUPE_THREAD = "thread:lumen-mail/CAK7wq2dedupe01.1009@mail.lumen.example"
DEDUPE_COMMIT = "commit:lumen/5d2429715b4ce7089db5b534cbdbde6f9c6764ef"
INGEST_PAGE = "page:lumen-wiki/65541"


def test_the_sample_configuration_names_all_five_kinds(published_project):
    config = published_project
    assert {config.source_kind(name) for name in config.source_names} == {
        "vault", "repo", "tickets", "mail", "confluence"}
    assert rows(config, "SELECT count(*) FROM mail_threads") == [(3,)]
    assert rows(config, "SELECT count(*) FROM pages") == [(6,)]
    cross = rows(config, "SELECT split_part(src, ':', 1), relation, split_part(dst, ':', 1) "
                         "FROM graph_edges WHERE extractor = 'cross_reference'")
    by_kind = Counter(cross)
    print("cross-source edges by kind:", dict(sorted(by_kind.items())))
    assert by_kind[("thread", "MENTIONS", "ticket")] >= 5
    assert by_kind[("page", "MENTIONS", "commit")] >= 3


def test_a_search_for_a_decision_finds_the_thread_its_ticket_and_the_commit(published_project):
    config = published_project
    version = serving.current_version(config.data_dir)
    hits = KeywordSearcher(version.keyword_path).search(
        "dedupe key decision: boot_id instead of observed_at, no Redis dedupe window", limit=5)
    [(doc_key, source_type)] = rows(config, "SELECT doc_key, source_type FROM chunks "
                                            "WHERE chunk_id = ?", [hits[0].chunk_id])
    assert (doc_key, source_type) == (DEDUPE_THREAD, "email")
    graph = SqliteGraphStore.open_read_only(version.graph_path)
    try:
        around = graph.neighbourhood(DEDUPE_THREAD, 1)
        further = graph.neighbourhood(DEDUPE_THREAD, 2)
    finally:
        graph.close()
    assert {node.key: node.distance for node in further.nodes}[INGEST_PAGE] == 2
    found = {(edge.src, edge.relation, edge.dst): edge for edge in around.edges}
    assert {(DEDUPE_THREAD, "MENTIONS", "ticket:lumen-jira/LUM-4"),
            (DEDUPE_THREAD, "MENTIONS", DEDUPE_COMMIT),
            (DEDUPE_COMMIT, "MENTIONS", "ticket:lumen-jira/LUM-4"),
            ("person:maya.chen@lumen.example", "AUTHORED", DEDUPE_THREAD),
            ("person:sam.novak@lumen.example", "AUTHORED", DEDUPE_COMMIT),
            ("person:sam.novak@lumen.example", "AUTHORED", DEDUPE_THREAD)} <= set(found)
    landed = found[(DEDUPE_THREAD, "MENTIONS", DEDUPE_COMMIT)]
    assert landed.evidence and "The key landed in 5d24297" in landed.evidence_text
    titles = {node.key: node.title for node in around.nodes}
    assert titles["ticket:lumen-jira/LUM-4"].startswith("LUM-4: ")
    assert titles[DEDUPE_COMMIT].startswith("[LUM-4] Dedupe key")


def test_the_wiki_page_recording_the_decision_links_to_the_same_ticket_and_commit(
        published_project):
    config = published_project
    cited = {(relation, dst) for src, relation, dst in rows(
        config, "SELECT src, relation, dst FROM graph_edges WHERE src = ?", [INGEST_PAGE])}
    assert {("MENTIONS", "ticket:lumen-jira/LUM-4"), ("MENTIONS", DEDUPE_COMMIT),
            ("PARENT", "page:lumen-wiki/65538")} <= cited
