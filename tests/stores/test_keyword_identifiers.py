"""The keyword index finds identifiers by their whole and by their parts: camelCase,
snake_case, dotted names, acronyms and digits, in any case; a query typed as an identifier
puts the chunks holding it whole first; previews show the chunk's text, never the
expansions; an index of the previous format is indexed again once, and a version published
before it is still searched."""

import shutil
import sqlite3

import pytest
import tantivy

from jarvis_core.stores.keyword import CHUNKS_DIR, LEDGER_FILE, KeywordIndex, KeywordSearcher
from jarvis_core.stores.keyword_fields import (
    ANALYZER,
    FORMAT,
    analyzer,
    identifier_terms,
    query_identifiers,
)
from tests.keyword_helpers import chunk, chunk_rows


def untitled(chunk_id: str, text: str) -> dict:
    """A chunk of ``text`` alone (a title is indexed with the text)."""
    return chunk(chunk_id, text, title="")


CORPUS = [
    untitled("camel", "The signup handler calls createUser once the form is valid."),
    untitled("dotted", "Validation lives in UserService.createUser and nowhere else."),
    untitled("snake", "The accounts module's create_user inserts the row."),
    untitled("snake_dotted", "The admin script goes through user_service.create_user too."),
    untitled("acronym", "A failed upstream raises HTTPServerError to the caller."),
    untitled("digits", "Meshes are read by parse2D before they are drawn."),
    # prose with the same words, shorter: it outranks the identifiers on those words alone
    untitled("prose", "Create user, then user service."),
    untitled("prose_http", "HTTP server error."),
    untitled("prose_parse", "Parse it."),
]


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    root = tmp_path_factory.mktemp("identifiers")
    with KeywordIndex(root / "work") as index:
        index.sync_source("v", chunk_rows(*CORPUS))
        index.publish_copy(root / "copy")
    return KeywordSearcher(root / "copy")


def ids(searcher: KeywordSearcher, query: str) -> list[str]:
    return [hit.chunk_id for hit in searcher.search(query, 20)]


def test_identifier_terms_add_what_the_body_words_miss():
    assert identifier_terms("createUser") == ["create", "user"]
    assert identifier_terms("create_user") == ["create_user"]
    assert identifier_terms("UserService.createUser") == [
        "userservice.createuser", "user", "service", "create"]
    assert identifier_terms("user_service.create_user") == [
        "user_service.create_user", "user_service", "create_user"]
    assert identifier_terms("HTTPServerError") == ["http", "server", "error"]
    assert identifier_terms("parse2D") == ["parse"]  # one letter, digits: dropped
    assert identifier_terms("os.path.join()") == ["os.path.join"]
    assert identifier_terms("Plain words, UPPER and Capitalised: none. 42 5d24297") == []


def test_a_query_identifier_has_names_and_parts():
    assert query_identifiers("where is create_user?") == (["create_user"], ["create", "user"])
    assert query_identifiers("os.path") == (["os.path", "os", "path"], [])
    assert query_identifiers("retry storms") == ([], [])


def test_camel_case_is_found_whole_in_any_case_and_by_its_parts(searcher):
    assert "camel" in ids(searcher, "create")
    assert "camel" in ids(searcher, "user") and "dotted" in ids(searcher, "user")
    for query in ("createUser", "CREATEUSER", "createuser()"):
        assert set(ids(searcher, query)[:2]) == {"camel", "dotted"}, query


def test_snake_case_whole_first_then_its_parts(searcher):
    found = ids(searcher, "create_user")
    assert set(found[:2]) == {"snake", "snake_dotted"}
    assert {"camel", "dotted", "prose"} <= set(found[2:])


def test_dotted_names_whole_and_by_their_components(searcher):
    assert ids(searcher, "UserService.createUser")[0] == "dotted"
    assert ids(searcher, "user_service.create_user")[0] == "snake_dotted"
    assert {"dotted", "prose"} <= set(ids(searcher, "service"))
    assert ids(searcher, "user_service")[0] == "snake_dotted"


def test_acronyms_split_before_the_next_word(searcher):
    for part in ("http", "server", "error"):
        assert set(ids(searcher, part)) == {"acronym", "prose_http"}, part
    assert ids(searcher, "HTTPServerError")[0] == "acronym"
    assert ids(searcher, "httpservererror") == ["acronym"]  # no case, no parts: the whole


def test_digits_end_a_part(searcher):
    assert set(ids(searcher, "parse")) == {"digits", "prose_parse"}
    assert ids(searcher, "PARSE2D")[0] == "digits"


def test_previews_show_the_text_not_the_expansions(searcher):
    [hit, *_] = searcher.search("UserService.createUser", 5, snippets=True)
    assert hit.snippet == "Validation lives in **UserService**.**createUser** and nowhere else"
    # found by a part alone, the chunk's text has no word to mark: the caller shows its start
    [hit] = [hit for hit in searcher.search("service", 5, snippets=True)
             if hit.chunk_id == "dotted"]
    assert hit.snippet == ""


def _body_only_index(directory) -> None:
    """A chunk index as FORMAT 1 made it: no identifiers field, one chunk, its ledger
    unversioned."""
    builder = tantivy.SchemaBuilder()
    for field in ("chunk_id", "source", "source_type", "tags"):
        builder.add_text_field(field, stored=field == "chunk_id", tokenizer_name="raw")
    builder.add_date_field("modified_at", indexed=True, fast=True)
    builder.add_text_field("body", stored=True, tokenizer_name=ANALYZER)
    (directory / CHUNKS_DIR).mkdir(parents=True)
    index = tantivy.Index(builder.build(), path=str(directory / CHUNKS_DIR))
    index.register_tokenizer(ANALYZER, analyzer())
    writer = index.writer(15_000_000, 1)
    writer.add_document(tantivy.Document(chunk_id="camel", source="v", source_type="note",
                                         body="calls createUser"))
    writer.commit()
    writer.wait_merging_threads()
    with sqlite3.connect(directory / LEDGER_FILE) as ledger:
        ledger.execute("CREATE TABLE chunks (chunk_id TEXT PRIMARY KEY, source TEXT NOT NULL,"
                       " fingerprint TEXT NOT NULL)")
        ledger.execute("INSERT INTO chunks VALUES ('camel', 'v', 'old')")


def test_an_index_of_the_previous_format_is_indexed_again_once(tmp_path, caplog):
    _body_only_index(tmp_path / "work")
    with KeywordIndex(tmp_path / "work") as index:
        assert f"is of format 0, not {FORMAT}: emptied" in caplog.text
        assert index.counts() == {}
        assert index.sync_source("v", chunk_rows(*CORPUS[:1])).as_dict()["new"] == 1
        index.publish_copy(tmp_path / "copy")
    caplog.clear()
    with KeywordIndex(tmp_path / "work") as index:  # now of this format: kept
        assert index.sync_source("v", chunk_rows(*CORPUS[:1])).as_dict()["unchanged"] == 1
    assert caplog.text == ""
    assert ids(KeywordSearcher(tmp_path / "copy"), "create") == ["camel"]


def test_a_version_published_before_the_identifiers_field_is_searched_by_its_body(tmp_path):
    with KeywordIndex(tmp_path / "work") as index:
        index.publish_copy(tmp_path / "published")
    shutil.rmtree(tmp_path / "published" / CHUNKS_DIR)
    _body_only_index(tmp_path / "old")
    (tmp_path / "old" / CHUNKS_DIR).rename(tmp_path / "published" / CHUNKS_DIR)
    assert ids(KeywordSearcher(tmp_path / "published"), "createUser") == ["camel"]
