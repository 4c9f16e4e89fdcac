"""A first refresh holds a small memory budget (``resources.max_memory_mb``), measured in the
refreshing child process itself (its own VmHWM and anonymous RSS; see jarvis_bench/scale.py
for why not ``os.wait4``'s), never estimated.

The budget has to clear the process's own floor: Python, Dagster and the embedding model
take about 600 MB here before the first chunk is embedded. Part of that floor is the pages
of shared libraries mapped from the page cache, which a budget does not govern and which
vary with the cache (a freshly written library maps in larger runs: the same refresh once
peaked at 761-768 MB in a long-used install and 854-900 MB in a fresh one). So the whole
peak is held under a 950 MB budget, and what the budget does reach is checked on the
memory the process owns. The model embeds in float32 (``openvino``) on every machine: in
bf16, auto's pick where the CPU computes it natively, the activations take half the memory,
and batches no longer following the budget stayed under ``OWNED_MB`` (437 MB at 313
chunks, 421-441 MB at 105). At 105 generated chunks (the realistic mix of notes, issues,
commits and mail; the peak is a batch's, about as high as at 313 chunks) the anonymous
peak is 410-424 MB (739-753 MB in all); with the embedder's batches no longer following
the budget (32 chunks instead of 14) it was 523-552 MB, and with its inference streams
uncapped as well (two on two cores) 718 MB, both over ``OWNED_MB``. So the test fails when
the budget stops reaching the layers."""

from __future__ import annotations

from jarvis_bench.scale import measured_refresh
from jarvis_bench.scale_corpus import write_corpus
from jarvis_core.embedding_backends import OPENVINO

BUDGET_MB = 950
OWNED_MB = 480  # anonymous RSS: 410-424 MB with the budget reaching the layers, 523+ without
CORPUS_CHUNKS = 100


def test_a_first_refresh_stays_under_a_small_budget(tmp_path):
    write_corpus(tmp_path, CORPUS_CHUNKS)
    config = tmp_path / "jarvis.yaml"
    # every chunk embedded by the model (no vector cache shared with other tests' corpora)
    config.write_text(config.read_text() + f"resources:\n  max_memory_mb: {BUDGET_MB}\n"
                                           f"embedding:\n  cache: false\n  backend: {OPENVINO}\n")
    refresh = measured_refresh(config)
    report = refresh.pop("report")
    assert report["published"]["layers"]["serving_snapshot"]["chunks"] >= CORPUS_CHUNKS
    assert 0 < refresh["peak_rss_mb"] < BUDGET_MB, refresh
    assert 0 < refresh["peak_anon_mb"] < OWNED_MB, refresh
