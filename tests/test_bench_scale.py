"""The scale benchmark: its corpus generator (the mix and its links), one tiny size through
every measure (with the hashed stand-in for the model), the per-layer sampler and the chart."""

from __future__ import annotations

import json
import mailbox
import mmap
import random
import re
import subprocess
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from jarvis_bench import scale
from jarvis_bench.scale import run_child, run_scale_benchmark
from jarvis_bench.scale_chart import MEMORY_SERIES, TIME_SERIES, chart_svg
from jarvis_bench.scale_child import PeakSampler
from jarvis_bench.scale_corpus import CHUNKS_PER_BUNDLE, bundles_for, write_corpus, write_mail
from jarvis_core.config import load_config
from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_core.settings import EmbeddingSettings
from jarvis_query.knowledge_base import KnowledgeBase


def test_the_corpus_mixes_linked_notes_issues_citing_commits_and_mail_threads(tmp_path):
    written = write_corpus(tmp_path, chunks=round(4 * CHUNKS_PER_BUNDLE))
    assert written["bundles"] == bundles_for(round(4 * CHUNKS_PER_BUNDLE)) == 4
    notes = sorted((tmp_path / "vault").rglob("*.md"))
    assert len(notes) == 4
    assert all(re.search(r"\[\[note-\d{5}\]\]", note.read_text()) for note in notes)
    issues = [issue for path in (tmp_path / "tickets").glob("*.json")
              for issue in json.loads(path.read_text())]
    assert [issue["number"] for issue in issues] == [1, 2, 3, 4]
    assert all(len(issue["comments"]) == 3 for issue in issues)
    log = subprocess.run(["git", "-C", str(tmp_path / "repo"), "log", "--format=%B%x00"],
                         capture_output=True, text=True, check=True).stdout
    commits = [message for message in log.split("\0") if message.strip()]
    assert len(commits) == 8
    cited = [int(n) for message in commits for n in re.findall(r"fixes scale#(\d+)", message)]
    assert len(cited) == 8 and set(cited) <= {1, 2, 3, 4}
    messages = list(mailbox.mbox(tmp_path / "mail" / "lists.mbox"))
    assert len(messages) == 12
    ids = {message["Message-ID"] for message in messages}
    replies = [message for message in messages if message["In-Reply-To"]]
    assert len(replies) == 8 and all(reply["In-Reply-To"] in ids for reply in replies)
    assert "repo: scale" in (tmp_path / "jarvis.yaml").read_text()


def test_mail_bodies_never_split_the_mbox(tmp_path):
    """About one generated sentence in a hundred starts with "From": quoted, it stays body."""
    write_mail(tmp_path / "many.mbox", 300, random.Random(1))
    assert len(mailbox.mbox(tmp_path / "many.mbox")) == 900


BALLAST_MB = 1536  # resident in this process while the benchmark's query child runs


@pytest.fixture(scope="module")
def tiny_scale(tmp_path_factory) -> tuple[dict, Path]:
    """One size of 20 target chunks through the whole benchmark, with the hashed stand-in;
    its query child runs beside ``BALLAST_MB`` resident here (see
    ``test_a_childs_peak_is_its_own_not_its_parents``), so no second query child is needed."""
    work_dir = tmp_path_factory.mktemp("scale")

    def beside_ballast(mode: str, *arguments: str) -> tuple[dict, dict]:
        if mode != "queries":
            return run_child(mode, *arguments)
        ballast = bytearray(BALLAST_MB * 2**20)
        ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so resident
        try:
            return run_child(mode, *arguments)
        finally:
            del ballast

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scale, "run_child", beside_ballast)
        result = run_scale_benchmark((20,), work_dir, work_dir / "scale.svg", HASHED_NGRAMS)
    return result, work_dir


def test_a_scale_row_measures_the_refreshes_and_the_queries(tiny_scale):
    result, _ = tiny_scale
    row, = result["sizes"]
    assert row["chunks"] > 0 and row["target_chunks"] == 20
    assert row["embedding"]["backend"] == HASHED_NGRAMS and HASHED_NGRAMS in result["embedder"]
    assert row["peak_rss_mb"] > 100  # a Python process with Dagster and the stores
    assert 0 < row["children_peak_rss_mb"] < row["peak_rss_mb"]  # git, here
    assert 0 < row["first_searchable_seconds"] <= row["complete_seconds"] <= row["wall_seconds"]
    assert 0 < row["noop_seconds"] < row["wall_seconds"] and row["noop_ran"] == []
    assert row["note_edit"]["sources_run"] == ["notes"] and row["note_edit_seconds"] > 0
    assert row["ticket_edit"]["sources_run"] == ["issues"] and row["ticket_edit_seconds"] > 0
    assert row["note_edit"]["layers"]["chunks"]["steps"] >= 1
    assert row["stores_mb"]["jarvis.duckdb"] > 0
    tools = row["queries"]["tools"]
    assert set(tools) == {"keyword", "semantic", "hybrid", "graph_depth_2", "graphrag"}
    assert all(0 < tool["p50_ms"] <= tool["p95_ms"] for tool in tools.values())


def test_each_layer_has_its_wall_cpu_and_peak_rss(tiny_scale):
    row, = tiny_scale[0]["sizes"]
    layers = row["layers"]
    assert {"raw_notes", "raw_tickets", "raw_mail", "raw_repository", "chunks", "keyword_index",
            "embeddings", "knowledge_graph", "cross_source_links", "vault_analytics",
            "serving_snapshot"} <= set(layers)
    for name, layer in layers.items():
        assert layer["wall_seconds"] > 0 and layer["cpu_seconds"] >= 0, name
        assert 50 < layer["peak_rss_mb"] <= row["peak_rss_mb"], name
        assert 0 < layer["peak_anon_mb"] <= layer["peak_rss_mb"], name
    assert sum(layer["wall_seconds"] for layer in layers.values()) < row["wall_seconds"]


def test_the_sampler_gives_each_span_its_own_peak():
    """The peak is reset at every tick: a later span does not inherit an earlier high."""
    with PeakSampler() as sampler:
        first = time.time()
        ballast = bytearray(300 * 2**20)
        ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so resident
        time.sleep(0.1)
        del ballast
        second = time.time()
        time.sleep(0.2)
        end = time.time()
    high, low = sampler.span(first, second), sampler.span(second + 0.1, end)
    assert high["peak_rss_mb"] > low["peak_rss_mb"] + 250
    assert sampler.peak_rss_mb >= high["peak_rss_mb"]


def test_the_sampler_tells_mapped_store_files_from_memory_the_process_owns(tmp_path):
    """Pages of a mapped file (Edge's segments) count in RSS, not in its anonymous part."""
    segment = tmp_path / "segment"
    segment.write_bytes(b"\1" * (300 * 2**20))
    with PeakSampler() as sampler:
        start = time.time()
        with open(segment, "rb") as file, mmap.mmap(file.fileno(), 0,
                                                    access=mmap.ACCESS_READ) as mapped:
            assert sum(mapped[offset] for offset in range(0, len(mapped), 4096)) == 76800
            time.sleep(0.1)
        end = time.time()
    span = sampler.span(start, end)
    assert span["peak_rss_mb"] - span["peak_anon_mb"] > 250


def test_a_childs_peak_is_its_own_not_its_parents(tiny_scale):
    """``wait4``'s ru_maxrss starts a child at its parent's high-water mark (the memory-budget
    test read 1.5 GB in a big test worker): the benchmark's query child must read as itself
    though it ran beside 1.5 GB resident here (``tiny_scale``)."""
    row, = tiny_scale[0]["sizes"]
    assert 50 < row["query_peak_rss_mb"] < 1200


def test_a_semantic_search_of_the_published_version_hashes_the_query(tiny_scale):
    """The chunks were embedded by the stand-in: a query is hashed alike, so a chunk's own
    words find it first. The version says so, whatever the reading process's configuration
    (here the model's)."""
    _, work_dir = tiny_scale
    config = load_config(work_dir / "chunks-20" / "jarvis.yaml")
    kb = KnowledgeBase(config.model_copy(update={"embedding": EmbeddingSettings()}))
    try:
        chunk_id, text = kb.snapshots.current().cursor().execute(
            "SELECT chunk_id, text FROM chunks ORDER BY chunk_id LIMIT 1").fetchone()
        first, = kb.search_semantic(" ".join(text.split()[:40]), limit=1, group="chunk")
        assert first.chunk_id == chunk_id
    finally:
        kb.close()


def test_the_chart_has_labelled_axes_with_ticks_and_a_line_per_measure(tiny_scale):
    rows = [{"chunks": chunks, "wall_seconds": chunks / 50, "first_searchable_seconds": chunks / 90,
             "note_edit_seconds": 2.0, "noop_seconds": 0.5, "peak_rss_mb": 400 + chunks / 1000,
             "noop_peak_rss_mb": 115.0, "query_peak_rss_mb": 250.0}
            for chunks in (10_000, 100_000, 1_000_000)]
    svg = ElementTree.fromstring(chart_svg(rows, "hashed-ngrams"))
    texts = [element.text for element in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert texts.count("chunks published (log scale)") == 2
    assert "wall seconds (log scale)" in texts and any(t.startswith("peak RSS (MB)") for t in texts)
    assert {"10k", "100k", "1M"} <= set(texts)  # x ticks
    assert {"first refresh, complete", "no-op refresh", "warm queries"} <= set(texts)
    lines = list(svg.iter("{http://www.w3.org/2000/svg}polyline"))
    assert len(lines) == len(TIME_SERIES) + len(MEMORY_SERIES)
    assert all(len(line.get("points").split()) == 3 for line in lines)
    written = ElementTree.parse(tiny_scale[1] / "scale.svg").getroot()
    assert "chunks published" in [element.text for element in
                                  written.iter("{http://www.w3.org/2000/svg}text")]
