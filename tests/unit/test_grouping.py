"""Documents, not chunks (jarvis_query/retrievers/grouping.py): chunk hits folded to one hit per
document, and two legs fused over documents, so a document of many matching chunks (a long
mail thread) takes one place in each leg instead of crowding out the rest."""

from types import SimpleNamespace

import duckdb
import pytest

from jarvis_query.fusion import RRF_K, fuse
from jarvis_query.results import Hit
from jarvis_query.retrievers.grouping import Place, documents, fuse_documents, places

THREAD = [f"t{i}" for i in range(1, 6)]  # five chunks of one thread
PLACES = {**{chunk: Place("mail", "thread:mail/1", f"Reply {i}")
             for i, chunk in enumerate(THREAD, 1)},
          "a1": Place("notes", "note:notes/A.md", "Intro"),
          "a2": Place("notes", "note:notes/A.md", ""),
          "b1": Place("notes", "note:notes/B.md", "Usage")}


def hits(*scored: tuple[str, float]) -> list[Hit]:
    return [Hit.scored(chunk_id, score) for chunk_id, score in scored]


def test_a_document_ranks_where_its_best_chunk_does_with_its_matching_chunks():
    found = documents(hits(("t1", 0.9), ("a1", 0.8), ("t2", 0.7), ("a2", 0.6), ("gone", 0.5)),
                      PLACES)
    assert [(d.source, d.doc_key) for d in found] == [("mail", "thread:mail/1"),
                                                      ("notes", "note:notes/A.md")]
    thread, note = (document.hit(PLACES) for document in found)
    assert (thread.chunk_id, thread.score, thread.chunks, thread.headings) == (
        "t1", 0.9, 2, ("Reply 1", "Reply 2"))
    assert (note.vault, note.doc_key, note.chunks, note.headings) == (
        "notes", "note:notes/A.md", 2, ("Intro",))
    assert note.as_dict()["chunks"] == 2 and note.as_dict()["headings"] == ["Intro"]
    assert "chunks" not in Hit.scored("a1", 0.8).as_dict()


def test_fusion_over_documents_keeps_a_long_thread_to_one_place():
    keyword = [(chunk, 10.0 - i) for i, chunk in enumerate(THREAD)] + [("a1", 4.0), ("b1", 3.0)]
    dense = [("a1", 0.9), ("b1", 0.8)] + [(chunk, 0.7 - i / 100) for i, chunk in
                                          enumerate(THREAD)]
    by_chunk = [PLACES[chunk].doc_key for chunk, _ in fuse(keyword, dense)[:3]]
    assert by_chunk.count("thread:mail/1") == 2  # what grouping fixes
    fused = fuse_documents(hits(*keyword), hits(*dense), PLACES)
    assert [document.doc_key for document, _ in fused] == [
        "thread:mail/1", "note:notes/A.md", "note:notes/B.md"]
    thread, score = fused[0]
    assert thread.hit(PLACES, score).chunks == 5 and thread.hits[0].chunk_id == "t1"
    # the thread takes three places of the keyword leg, not five: A fuses at rank 4
    assert fused[1][1] == pytest.approx(1 / (RRF_K + 4) + 1 / (RRF_K + 1))


def test_a_hit_that_does_not_know_its_place_is_read_from_the_chunk_rows():
    """The leaves' hits know their place; a keyword index published before it kept them
    (FORMAT 3) gives hits that do not, and those are read from the table (a chunk with no
    row has none)."""
    tables = duckdb.connect()
    tables.execute("CREATE TABLE chunks (chunk_id VARCHAR, source VARCHAR, doc_key VARCHAR, "
                   "heading_path VARCHAR[])")
    tables.execute("INSERT INTO chunks VALUES ('a1', 'notes', 'note:notes/A.md', "
                   "['Intro', 'Why']), ('b1', 'notes', 'note:notes/B.md', [])")
    found = places(SimpleNamespace(cursor=tables.cursor),
                   [Hit.scored("a1", 0.9), Hit.placed("t1", 0.8, "mail", "thread:mail/1", "Re"),
                    Hit.scored("gone", 0.1)])
    assert found == {"a1": Place("notes", "note:notes/A.md", "Why"),
                     "t1": Place("mail", "thread:mail/1", "Re")}
