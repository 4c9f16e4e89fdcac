"""Identifiers inside a query (jarvis_query/retrievers/identifiers.py): the shapes a stored
item's names take, found in any case, in prose, with or without their brackets; titles and
paths only as the whole query."""

from jarvis_query.retrievers.identifiers import query_names


def test_identifiers_are_found_in_any_case_and_inside_a_sentence():
    names = query_names("Why is ABC-784 (and lum-4) still open? See <CAK7wq2.1@mail.example>.")
    assert {"abc-784", "lum-4", "cak7wq2.1@mail.example"} <= names.exact
    assert query_names("LUM-4").exact == {"lum-4", "lum-4.md"}


def test_github_refs_with_and_without_their_owner():
    assert {"example/lumen#7", "lumen#7"} <= query_names("fixed in example/lumen#7").exact
    assert "lumen#15" in query_names("lumen#15,").exact


def test_hash_prefixes_of_seven_digits_or_more_and_page_ids():
    names = query_names("what does 5d24297 change, and page 65541?")
    assert names.prefixes == {"5d24297"}
    assert "65541" in names.exact
    assert query_names("5d2429").prefixes == frozenset()  # six digits: too short
    assert query_names("ADR-002 deadbeefcafe").prefixes == {"deadbeefcafe"}
    assert names.found_by("5d2429715b4ce7089db5b534cbdbde6f9c6764ef") == "5d24297"
    assert names.found_by("65541") == "65541"


def test_titles_and_paths_count_only_as_the_whole_query():
    assert query_names("Roadmap").exact == {"roadmap", "roadmap.md"}
    question = query_names("how does the roadmap look")
    assert question.exact == {"how does the roadmap look", "how does the roadmap look.md"}
    assert "projects/lumen/roadmap.md" in query_names("see Projects/Lumen/Roadmap.md").exact
    assert query_names("Projects/Lumen/Roadmap").exact == {"projects/lumen/roadmap",
                                                           "projects/lumen/roadmap.md"}
