"""On the shipped sample (all five kinds of source, ``published_project``): a query that names
an item finds it first in keyword, semantic and hybrid search and GraphRAG packs it first,
within the caller's profile and the search's filters; and searches answer one hit per
document unless asked for chunks."""

import pytest

from jarvis_core.profiles import Profile
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.scoped import scoped_knowledge_base

pytestmark = pytest.mark.slow

LUM_4 = ("lumen-jira", "tickets/LUM-4")
DEDUPE_COMMIT = ("lumen", "commits/5d2429715b4ce7089db5b534cbdbde6f9c6764ef")
DEDUPE_THREAD = ("lumen-mail", "threads/CAK7wq2dedupe01.1009@mail.lumen.example")


@pytest.fixture(scope="module")
def project_kb(published_project):
    knowledge_base = KnowledgeBase(published_project)
    yield knowledge_base
    knowledge_base.close()


def searches(kb):
    return {"keyword": kb.search_vault,
            "keyword_content": lambda query, **kw: kb.search_vault(query, search_content=True,
                                                                    **kw),
            "semantic": kb.search_semantic,
            "hybrid": kb.search_hybrid}


def first(hits) -> tuple[str, str]:
    return hits[0].vault, hits[0].path


@pytest.mark.parametrize("query, named", [
    ("LUM-4", LUM_4), ("lum-4", LUM_4), ("what still blocks LUM-4?", LUM_4),
    ("5d24297", DEDUPE_COMMIT), ("<CAK7wq2dedupe01.1009@mail.lumen.example>", DEDUPE_THREAD),
    ("lumen#7", ("lumen-github", "tickets/lumen#7")), ("example/lumen#7",
                                                       ("lumen-github", "tickets/lumen#7")),
    ("65541", ("lumen-wiki", "pages/65541")), ("Roadmap", ("sample", "Projects/Lumen/Roadmap.md")),
])
def test_a_query_naming_an_item_finds_it_first_in_every_search(project_kb, query, named):
    for name, search in searches(project_kb).items():
        hits = search(query)
        assert first(hits) == named, (name, [(h.vault, h.path) for h in hits[:3]])
        assert hits[0].identifier is not None
        assert hits[0].score == max(hit.score for hit in hits)


def test_graphrag_starts_from_the_item_a_query_names(project_kb):
    for query, named in (("LUM-4", LUM_4), ("what does 5d24297 change?", DEDUPE_COMMIT)):
        pack = project_kb.search_graphrag(query, limit=5)
        assert (pack["sources"][0]["vault"], pack["sources"][0]["path"]) == named


def test_a_named_item_outside_the_profile_or_the_filters_is_not_found(project_kb):
    notes_only = scoped_knowledge_base(project_kb, Profile("notes", frozenset({"sample"}), True))
    for name, search in searches(notes_only).items():
        hits = search("LUM-4")
        assert {hit.vault for hit in hits} == ({"sample"} if name != "keyword" else set()), name
        assert all(hit.identifier is None for hit in hits), name
    assert notes_only.search_graphrag("LUM-4")["sources"][0]["vault"] == "sample"
    kb = project_kb
    assert all(hit.identifier is None for hit in kb.search_hybrid("LUM-4", source_types=["note"]))
    assert all(hit.identifier is None for hit in kb.search_semantic("LUM-4", vault="sample"))
    assert all(hit.identifier is None
               for hit in kb.search_hybrid("LUM-4", modified_before="2000-01-01"))
    assert first(kb.search_hybrid("LUM-4", source_types=["ticket"],
                                  modified_after="2026-01-01")) == LUM_4


def test_searches_answer_one_hit_per_document_unless_asked_for_chunks(project_kb):
    for name, search in searches(project_kb).items():
        if name == "keyword":
            continue  # a name search finds documents already
        documents = search("dedupe key boot_id", limit=5)
        places = [(hit.vault, hit.path) for hit in documents]
        assert len(documents) == 5 and len(set(places)) == 5, (name, places)
        assert all(hit.chunks >= 1 and len(hit.headings) <= hit.chunks for hit in documents)
        chunks = search("dedupe key boot_id", limit=5, group="chunk")
        assert len({(hit.vault, hit.path) for hit in chunks}) < 5, name
        assert all(hit.chunks is None for hit in chunks)
    thread = next(hit for hit in project_kb.search_hybrid("dedupe key boot_id", limit=5)
                  if (hit.vault, hit.path) == DEDUPE_THREAD)
    assert thread.chunks > 1 and thread.as_dict()["chunks"] == thread.chunks
