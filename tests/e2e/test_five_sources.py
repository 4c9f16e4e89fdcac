"""The shipped sample configuration (jarvis.yaml: the vault, the lumen repository, its Jira and
GitHub exports, the lumen-dev mbox and the Confluence space) published in one refresh: all five
kinds of source in one graph, and the issue's "done when" - a search for a decision argued
in a mail thread finds the thread, its ticket and the commit that landed it.

Searched on the published keyword index and graph store directly (jarvis_query's
KnowledgeBase is being rewritten while this lands)."""

import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from jarvis_core.config import load_config
from jarvis_core.stores import serving
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.keyword import KeywordSearcher
from jarvis_pipeline.refresh import run_refresh
from tests.pipeline_helpers import PROJECT_ROOT, rows

pytestmark = pytest.mark.slow

DEDUPE_THREAD = "thread:lumen-mail/CAK7wq2dedupe01.1009@mail.lumen.example"
DEDUPE_COMMIT = "commit:lumen/5d2429715b4ce7089db5b534cbdbde6f9c6764ef"
INGEST_PAGE = "page:lumen-wiki/65541"


def sample_configuration(root: Path):
    """jarvis.yaml's sources as shipped, with the stores in ``root``."""
    settings = yaml.safe_load((PROJECT_ROOT / "jarvis.yaml").read_text())
    for section in ("vaults", "repos", "tickets", "mail", "confluence"):
        for name, spec in settings[section].items():
            spec = {"path": spec} if isinstance(spec, str) else spec
            settings[section][name] = {key: str(PROJECT_ROOT / value) if key in ("path", "url")
                                       else value for key, value in spec.items()}
    settings["data_dir"] = str(root / "data")
    (root / "jarvis.yaml").write_text(yaml.safe_dump(settings))
    return load_config(root / "jarvis.yaml")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    config = sample_configuration(tmp_path_factory.mktemp("five-sources"))
    started = time.perf_counter()
    report = run_refresh(config)
    seconds = {entry["source"]: entry["seconds"] for entry in report["sources"]}
    print(f"\nsample refresh: {time.perf_counter() - started:.1f} s; per source {seconds}")
    return config, report


def test_the_sample_configuration_names_all_five_kinds(sample):
    config, report = sample
    assert report["ok"], report
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


def test_a_search_for_a_decision_finds_the_thread_its_ticket_and_the_commit(sample):
    config, _ = sample
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
    assert {(DEDUPE_THREAD, "MENTIONS", "ticket:LUM-4"),
            (DEDUPE_THREAD, "MENTIONS", DEDUPE_COMMIT),
            (DEDUPE_COMMIT, "MENTIONS", "ticket:LUM-4"),
            ("person:maya.chen@lumen.example", "AUTHORED", DEDUPE_THREAD),
            ("person:sam.novak@lumen.example", "AUTHORED", DEDUPE_COMMIT),
            ("person:sam.novak@lumen.example", "AUTHORED", DEDUPE_THREAD)} <= set(found)
    landed = found[(DEDUPE_THREAD, "MENTIONS", DEDUPE_COMMIT)]
    assert landed.evidence and "The key landed in 5d24297" in landed.evidence_text
    titles = {node.key: node.title for node in around.nodes}
    assert titles["ticket:LUM-4"].startswith("LUM-4: ")
    assert titles[DEDUPE_COMMIT].startswith("[LUM-4] Dedupe key")


def test_the_wiki_page_recording_the_decision_links_to_the_same_ticket_and_commit(sample):
    config, _ = sample
    cited = {(relation, dst) for src, relation, dst in rows(
        config, "SELECT src, relation, dst FROM graph_edges WHERE src = ?", [INGEST_PAGE])}
    assert {("MENTIONS", "ticket:LUM-4"), ("MENTIONS", DEDUPE_COMMIT),
            ("PARENT", "page:lumen-wiki/65538")} <= cited
