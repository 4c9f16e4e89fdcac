"""Keyword search: the Tantivy index (incremental per chunk id, filters, names, highlighted
previews, published copies, writer lock), the keyword_index asset and its check, and
search_vault end to end on the sample vault."""

import sqlite3
import threading
from datetime import datetime

import dagster as dg
import polars as pl
import pytest

from jarvis_assets.jobs import refresh_sources_job
from jarvis_assets.partitions import source_partitions
from jarvis_core.stores.chunk_rows import PAYLOAD_SQL, FrameRows
from jarvis_core.stores.connections import read_only
from jarvis_core.stores.keyword import LEDGER_FILE, KeywordIndex, KeywordSearcher
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_definitions import build_definitions
from tests.keyword_helpers import chunk, chunk_rows
from tests.pipeline_helpers import checks, metadata, run

CORPUS = [
    chunk("retries", "Retried writes are made safe with an idempotency key per reading.",
          tags=["lumen"], modified_at=datetime(2026, 3, 1)),
    chunk("cafe", "Naïve café owners serve poached eggs in a spiced tomato sauce.",
          tags=["food"], modified_at=datetime(2026, 1, 15)),
    chunk("ticket", "LUM-4: duplicate readings after a retry storm", source_type="ticket",
          doc_key="ticket:v/LUM-4", path="LUM-4", title="Duplicate readings",
          modified_at=datetime(2026, 2, 1)),
]


@pytest.fixture
def published(tmp_path):
    """An index over CORPUS and a published copy of it."""
    with KeywordIndex(tmp_path / "work") as index:
        report = index.sync_source("v", chunk_rows(*CORPUS))
        index.publish_copy(tmp_path / "copy")
    return tmp_path, report


def test_index_follows_the_chunks_per_chunk_id(tmp_path):
    with KeywordIndex(tmp_path / "work") as index:
        first = index.sync_source("v", chunk_rows(*CORPUS))
        assert first.as_dict() == {"new": 3, "changed": 0, "deleted": 0, "unchanged": 0,
                                   "documents": 3}
        assert index.sync_source("v", chunk_rows(*CORPUS)).as_dict()["unchanged"] == 3
        retitled = chunk("retries", CORPUS[0]["text"], title="Safe retries", tags=["lumen"],
                         modified_at=datetime(2026, 3, 1))
        again = index.sync_source("v", chunk_rows(retitled, CORPUS[2], chunk("new", "fresh text")))
        assert again.as_dict() == {"new": 1, "changed": 1, "deleted": 1, "unchanged": 1,
                                   "documents": 3}
        assert index.chunk_ids("v") == {"retries", "ticket", "new"}
        assert index.indexed_count("v") == 3
        index.sync_source("other", chunk_rows(chunk("elsewhere", "safe retries elsewhere")))
        assert index.counts() == {"other": 1, "v": 3}
        index.sync_source("v", chunk_rows())
        assert index.indexed_count("v") == 0 and index.counts() == {"other": 1}
        index.publish_copy(tmp_path / "copy")
    searcher = KeywordSearcher(tmp_path / "copy")
    assert [hit.chunk_id for hit in searcher.search("safe retries")] == ["elsewhere"]
    assert searcher.search_names("safe retries") == []


def test_a_source_indexed_without_its_ledger_rows_is_indexed_once(tmp_path):
    """A crash between the index's commit and the ledger's write leaves a source's entries
    indexed and unrecorded: the next sync replaces them, other sources' entries stay."""
    with KeywordIndex(tmp_path / "work") as index:
        index.sync_source("v", chunk_rows(*CORPUS))
        index.sync_source("other", chunk_rows(chunk("elsewhere", "safe retries elsewhere")))
    with sqlite3.connect(tmp_path / "work" / LEDGER_FILE) as ledger:
        ledger.execute("DELETE FROM chunks WHERE source = 'v'")
        ledger.execute("DELETE FROM documents WHERE source = 'v'")
    with KeywordIndex(tmp_path / "work") as index:
        assert index.sync_source("v", chunk_rows(*CORPUS)).as_dict()["new"] == 3
        assert (index.indexed_count("v"), index.indexed_count("other")) == (3, 1)
        index.publish_copy(tmp_path / "copy")
    names = KeywordSearcher(tmp_path / "copy").search_names("duplicate readings")
    assert [name.doc_key for name in names] == ["ticket:v/LUM-4"]


def test_bm25_ranking_analyzer_and_highlighted_previews(published):
    root, _ = published
    searcher = KeywordSearcher(root / "copy")
    # stemming and stop words: "retrying" finds "Retried"/"retry", "the" alone matches nothing
    hits = searcher.search("the retrying", 10)
    assert {hit.chunk_id for hit in hits} == {"retries", "ticket"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert searcher.search("the") == []
    # ASCII folding: "naive cafe" matches "Naïve café"; highlights respect multi-byte text
    [hit] = searcher.search("naive cafe", 10, snippets=True)
    assert hit.chunk_id == "cafe" and "**Naïve** **café**" in hit.snippet
    assert searcher.search("!!! ???") == []


def test_previews_show_the_chunk_text_once_without_its_title_and_headings(tmp_path):
    # the sample's Alerting note, whose preview read "Alerting Alerting # Alerting The ..."
    alerting = chunk("alerting", "# Alerting\n\nThe alerting worker evaluates rules once a "
                     "minute.", title="Alerting", heading_path=["Alerting"])
    runbook = chunk("runbook", "Restart the ingest worker.", title="Backlog Runbook")
    with KeywordIndex(tmp_path / "work") as index:
        index.sync_source("v", chunk_rows(alerting, runbook))
        index.publish_copy(tmp_path / "copy")
    searcher = KeywordSearcher(tmp_path / "copy")
    [hit] = searcher.search("alerting", 10, snippets=True)
    assert hit.snippet == "# **Alerting** The **alerting** worker evaluates rules once a minute"
    # the title still ranks; found by it alone, the preview is left to the chunk's start
    [hit] = searcher.search("backlog", 10, snippets=True)
    assert hit.chunk_id == "runbook" and hit.snippet == ""


def test_filters_mean_what_the_vector_filters_mean(published):
    root, _ = published
    searcher = KeywordSearcher(root / "copy")

    def ids(filters):
        return {hit.chunk_id for hit in searcher.search("readings retry eggs", 10, filters)}

    assert ids(None) == {"retries", "cafe", "ticket"}
    assert ids(VectorFilter(sources=["v"])) == {"retries", "cafe", "ticket"}
    assert ids(VectorFilter(sources=["elsewhere"])) == set()
    assert ids(VectorFilter(source_types=["ticket"])) == {"ticket"}
    assert ids(VectorFilter(tags_any=["food", "lumen"])) == {"retries", "cafe"}
    assert ids(VectorFilter(tags_any=[])) == set()
    assert ids(VectorFilter(modified_from=datetime(2026, 1, 20))) == {"retries", "ticket"}
    assert ids(VectorFilter(modified_from=datetime(2026, 1, 20),
                            modified_to=datetime(2026, 2, 1))) == {"ticket"}


def test_names_match_titles_and_paths(published):
    root, _ = published
    searcher = KeywordSearcher(root / "copy")
    assert searcher.search_names("duplicate")[0].doc_key == "ticket:v/LUM-4"
    assert {hit.path for hit in searcher.search_names("folder")} == {
        "Folder/retries.md", "Folder/cafe.md"}
    assert searcher.search_names("duplicate", sources=["nope"]) == []


class WatchedIndex:
    """A Tantivy index whose writer requests are watched: ``refused`` is set once one is
    refused because another writer holds the lock (the moment a writer starts to wait)."""

    def __init__(self, index) -> None:
        self._index = index
        self.refused = threading.Event()

    def writer(self, *args):
        try:
            return self._index.writer(*args)
        except ValueError as exc:
            if "LockBusy" in str(exc):
                self.refused.set()
            raise

    def __getattr__(self, name: str):
        return getattr(self._index, name)


def test_published_copy_is_immutable_and_writers_take_turns(published):
    root, _ = published
    searcher = KeywordSearcher(root / "copy")
    with KeywordIndex(root / "work", busy_timeout=10) as index:
        index.sync_source("v", chunk_rows(chunk("later", "poached eggs again")))
    assert {hit.chunk_id for hit in searcher.search("eggs")} == {"cafe"}  # the copy stays

    order = []
    first = KeywordIndex(root / "work", busy_timeout=10)
    second = KeywordIndex(root / "work", busy_timeout=10)
    second._chunks = watched = WatchedIndex(second._chunks)
    with first._writers():
        waiting = threading.Thread(target=lambda: order.append(
            second.sync_source("v", chunk_rows(*CORPUS)).new))
        waiting.start()
        assert watched.refused.wait(20), "the second writer was never refused the lock"
        order.append("first released")  # the second writes only once this block ends
    waiting.join(timeout=20)
    assert order == ["first released", 3]
    second.busy_timeout = 0.3  # it gives up after this, not after the 10 s it waited above
    with KeywordIndex(root / "work", busy_timeout=0.3) as third, third._writers():
        with pytest.raises(ValueError, match="LockBusy"):
            second.sync_source("v", chunk_rows())
    first.close()
    second.close()


# -- pipeline and query side -----------------------------------------------------------------

@pytest.mark.slow
def test_keyword_index_asset_follows_edits_and_its_check_passes(sample_config, sample_vault):
    with dg.DagsterInstance.ephemeral() as instance:
        first = run(sample_config, "sample", instance)
        indexed = metadata(first, "keyword_index")
        assert indexed["new"] == indexed["dagster/row_count"] > 100
        assert checks(first)["keyword_index_matches_chunks"].passed
        note = sample_vault / "Personal" / "Recipes" / "Shakshuka.md"
        note.write_text(note.read_text() + "\n\n## Variation\n\nAdd zucchini ribbons.\n")
        (sample_vault / "Areas" / "Health" / "Sleep.md").unlink()
        second = run(sample_config, "sample", instance)
        changed = metadata(second, "keyword_index")
        assert changed["new"] >= 1 and changed["deleted"] >= 1
        assert changed["unchanged"] >= indexed["new"] - 20
        assert checks(second)["keyword_index_matches_chunks"].passed
    with KeywordIndex(sample_config.keyword_path) as index, index._writers() as (writer, _):
        writer.delete_documents_by_term("chunk_id", sorted(index.chunk_ids("sample"))[0])
        writer.commit()  # the index loses a chunk behind the ledger's back: damage
    with dg.DagsterInstance.ephemeral() as instance:
        healed = run(sample_config, "sample", instance)
        assert checks(healed)["keyword_index_matches_chunks"].passed  # rebuilt on open
    with KeywordIndex(sample_config.keyword_path) as index:
        rows = read_payload_rows_of(sample_config, "sample")
        index.sync_source("sample", FrameRows(rows.slice(1)))  # consistent, one chunk short
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(source_partitions.name, ["sample"])
        job = build_definitions(sample_config).resolve_job_def(refresh_sources_job.name)
        alone = job.execute_in_process(  # the check alone: the asset would re-add the chunk
            partition_key="sample", instance=instance, raise_on_error=False,
            op_selection=["keyword_index_keyword_index_matches_chunks"])
    [evaluation] = alone.get_asset_check_evaluations()
    assert not evaluation.passed
    assert evaluation.metadata["sources_wrong"].value == 1


def read_payload_rows_of(config, source: str) -> pl.DataFrame:
    with read_only(config.duckdb_path) as conn:
        return conn.execute(PAYLOAD_SQL, [source]).pl()


@pytest.mark.slow
def test_search_vault_names_and_content(kb):
    names = kb.search_vault("alerting")
    assert names[0].path == "Projects/Lumen/Architecture/Alerting.md"
    assert names[0].match == "name" and names[0].chunk_id and names[0].snippet
    assert kb.search_vault("shakshuka", vault="sample")[0].title == "Shakshuka"

    content = kb.search_vault("idempotency key duplicates", search_content=True, limit=5)
    assert content[0].path.startswith("Projects/Lumen/")
    assert all(hit.match == "content" for hit in content)
    assert any("**" in hit.snippet for hit in content)
    scores = [hit.score for hit in content]
    assert scores == sorted(scores, reverse=True) and len(content) == 5
    assert kb.search_vault("zzzzqqq", search_content=True) == []


@pytest.mark.slow
def test_cli_keyword_hybrid_and_graphrag(published_sample):
    import json

    from click.testing import CliRunner

    from jarvis_cli.main import cli

    def invoke(*args):
        return CliRunner().invoke(cli, ["--config", str(published_sample.config_path), *args])

    names = invoke("keyword", "alerting", "--limit", "2")
    assert names.exit_code == 0 and "sample/Projects/Lumen/Architecture/Alerting.md" in names.stdout
    content = json.loads(invoke("keyword", "idempotency", "--content", "--json").stdout)
    assert content["results"] and "**" in content["results"][0]["snippet"]
    hybrid = invoke("hybrid", "sleep", "--tag", "health", "--after", "2026-10-01")
    assert hybrid.exit_code == 0 and "keyword #" in hybrid.stdout
    pack = invoke("graphrag", "alerting rules", "--limit", "3")
    assert pack.exit_code == 0 and "semantic" in pack.stdout and "context:" in pack.stdout
    block = invoke("graphrag", "alerting rules", "--context", "--max-tokens", "400")
    assert block.stdout.startswith("Evidence for: alerting rules")
    assert json.loads(invoke("graphrag", "alerting rules", "--json").stdout)["sources"]
    bad = invoke("hybrid", "sleep", "--alpha", "3")
    assert bad.exit_code == 1 and "alpha must be between 0 and 1" in bad.output
