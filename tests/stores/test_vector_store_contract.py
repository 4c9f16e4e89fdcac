"""One contract for every vector store backend: Qdrant Edge always, a Qdrant server when
QDRANT_URL names one (QDRANT_API_KEY optional). Small vectors keep the suite fast; the Edge
locking and publishing tests run real second processes, as the pipeline and readers do."""

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from jarvis_core.stores.vectors import edge, edge_files
from jarvis_core.stores.vectors.base import (
    VECTOR_NAME,
    VectorPoint,
    VectorStoreBusy,
    VectorStoreError,
    VectorStoreMismatch,
    collection_name,
    point_id,
)
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_core.stores.vectors.server import QdrantServerVectorStore

DIM = 8
MODEL = "test/model-a"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Edge keeps vectors in float16 (11 significant bits): scores and vectors agree to this.
VECTOR_ROUNDING = 1e-3


def cid(number: int) -> str:
    return f"{number:032x}"


def vec(*head: float) -> np.ndarray:
    """A DIM-long vector starting with ``head``: easy to reason about cosine scores."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[:len(head)] = head
    return vector


def start_python(code: str) -> subprocess.Popen:
    """A fresh interpreter, as a second pipeline run or a query process would be."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})


# "edge-parts": parts of two points, so every contract holds across parts as well
@pytest.fixture(params=["edge", "edge-parts", "server"])
def backend(request) -> str:
    if request.param == "server" and not os.environ.get("QDRANT_URL"):
        pytest.skip("QDRANT_URL not set: no Qdrant server to test against")
    return request.param


@pytest.fixture
def open_store(backend, tmp_path):
    """Opens the test's one collection (again) for a model and dimension; closes everything
    it opened and, on a server, drops the collection afterwards."""
    with _stores(backend, tmp_path / "vectors") as factory:
        yield factory


@contextlib.contextmanager
def _stores(backend: str, path: Path):
    """``open_store``'s factory over one new collection of ``backend`` (Edge's under
    ``path``); everything it opened is closed, and a server's collection dropped, after."""
    name = f"jarvis_test_{uuid.uuid4().hex}"
    opened = []

    def factory(model: str = MODEL, dimension: int = DIM):
        if backend.startswith("edge"):
            store = EdgeVectorStore(path, name, dimension, model,
                                    part_points=2 if backend == "edge-parts" else None)
        else:
            store = QdrantServerVectorStore(os.environ["QDRANT_URL"],
                                            os.environ.get("QDRANT_API_KEY"), name, dimension,
                                            model)
        opened.append(store)
        return store

    try:
        yield factory
    finally:
        for store in opened:
            store.close()
        if backend == "server":
            from qdrant_client import QdrantClient

            client = QdrantClient(url=os.environ["QDRANT_URL"],
                                  api_key=os.environ.get("QDRANT_API_KEY"))
            if client.collection_exists(name):
                client.delete_collection(name)
            client.close()


@pytest.fixture
def store(open_store):
    return open_store()


def ids(hits) -> list[str]:
    return [hit.chunk_id for hit in hits]


# -- writing and searching -------------------------------------------------------------------


def test_search_returns_nearest_first_with_payload(store):
    store.upsert([
        VectorPoint(cid(1), vec(1, 0), {"source": "work", "title": "exact"}),
        VectorPoint(cid(2), vec(1, 1), {"source": "work", "title": "diagonal"}),
        VectorPoint(cid(3), vec(0, 1), {"source": "home", "title": "orthogonal"}),
    ])
    hits = store.search(vec(2, 0), limit=3)
    assert ids(hits) == [cid(1), cid(2), cid(3)]
    assert hits[0].score == pytest.approx(1.0, abs=VECTOR_ROUNDING)
    assert hits[1].score == pytest.approx(2 ** -0.5, abs=VECTOR_ROUNDING)
    assert hits[0].payload == {"source": "work", "title": "exact", "chunk_id": cid(1)}
    # only the fields asked for (the chunk id always), where the search found them
    assert [hit.payload for hit in store.search(vec(2, 0), limit=2, payload=["title"])] == [
        {"title": "exact", "chunk_id": cid(1)}, {"title": "diagonal", "chunk_id": cid(2)}]
    assert store.search(vec(2, 0), limit=1, payload=["tags"])[0].payload == {
        "chunk_id": cid(1)}


def test_equal_scores_are_ordered_by_chunk_id_even_across_the_limit(store):
    tied = [9, 3, 7, 1, 5, 2]
    store.upsert([VectorPoint(cid(n), vec(1, 1), {}) for n in tied])
    store.upsert([VectorPoint(cid(40), vec(1, 0.9), {})])
    assert ids(store.search(vec(1, 1), limit=4)) == [cid(1), cid(2), cid(3), cid(5)]
    assert ids(store.search(vec(1, 0.9), limit=3)) == [cid(40), cid(1), cid(2)]


def test_a_tie_just_past_the_limit_is_settled_by_the_first_query(store, monkeypatch):
    """A search fetches up to twice its limit (within the beam it walks anyway), so a tie
    across the cut short of that needs no second query: at a million hashed-vector chunks a
    third of hybrid searches asked again."""
    store.upsert([VectorPoint(cid(n), vec(1, 1), {}) for n in (1, 2, 3)])
    store.upsert([VectorPoint(cid(4), vec(1, 0.5), {}), VectorPoint(cid(5), vec(1, 0), {})])
    queried = []
    query = type(store)._query
    monkeypatch.setattr(type(store), "_query",
                        lambda self, *args: queried.append(args[1]) or query(self, *args))
    assert ids(store.search(vec(1, 1), limit=2)) == [cid(1), cid(2)]
    assert queried == [4]


def test_upsert_of_the_same_chunk_replaces_it(store):
    store.upsert([VectorPoint(cid(1), vec(1, 0), {"title": "old"})])
    store.upsert([VectorPoint(cid(1), vec(0, 1), {"title": "new"})])
    store.upsert([VectorPoint(cid(2), vec(1, 0), {"title": "first"}),
                  VectorPoint(cid(2), vec(1, 0), {"title": "last in the batch wins"})])
    assert store.count() == 2
    hits = store.search(vec(0, 1), limit=10)
    assert [(hit.chunk_id, hit.payload["title"]) for hit in hits] == [
        (cid(1), "new"), (cid(2), "last in the batch wins")]
    np.testing.assert_allclose(store.vectors([cid(1)])[cid(1)], vec(0, 1), atol=VECTOR_ROUNDING)


def test_delete_removes_points_and_ignores_missing_ids(store):
    store.upsert([VectorPoint(cid(n), vec(1, n), {"source": "work"}) for n in range(1, 5)])
    store.delete([cid(2), cid(3), cid(99)])
    store.delete([])
    assert store.chunk_ids() == {cid(1), cid(4)}
    assert cid(2) not in ids(store.search(vec(1, 2), limit=10))


def test_chunk_ids_and_count_with_and_without_source(store):
    store.upsert([VectorPoint(cid(n), vec(1, n), {"source": "work" if n % 3 else "home"})
                  for n in range(1, 10)])
    assert store.chunk_ids() == {cid(n) for n in range(1, 10)}
    assert store.chunk_ids("home") == {cid(3), cid(6), cid(9)}
    assert store.chunk_ids("nowhere") == set()
    assert (store.count(), store.count("work"), store.count("nowhere")) == (9, 6, 0)


def test_chunk_ids_pages_through_more_than_one_scroll_page(store, monkeypatch):
    """Pages of one point: every part of "edge-parts" is paged through as well."""
    for module in ("edge_files", "server"):
        monkeypatch.setattr(f"jarvis_core.stores.vectors.{module}.SCROLL_PAGE", 1)
    store.upsert([VectorPoint(cid(n), vec(1, n), {"source": "work"}) for n in range(1, 8)])
    assert store.chunk_ids("work") == {cid(n) for n in range(1, 8)}


def test_counts_by_source(store):
    assert store.counts_by_source() == {}
    store.upsert([VectorPoint(cid(n), vec(1, n), {"source": ["a", "b", "b", "c"][n % 4]})
                  for n in range(8)])
    store.upsert([VectorPoint(cid(100), vec(1, 0), {})])
    assert store.counts_by_source() == {"a": 2, "b": 4, "c": 2}


def test_vectors_are_returned_unit_length_by_chunk_id(store):
    store.upsert([VectorPoint(cid(1), vec(3, 4), {}), VectorPoint(cid(2), vec(0, 2), {})])
    found = store.vectors([cid(1), cid(2), cid(99)])
    assert set(found) == {cid(1), cid(2)}
    np.testing.assert_allclose(found[cid(1)], vec(0.6, 0.8), atol=VECTOR_ROUNDING)
    assert store.vectors([]) == {}


# -- filters -------------------------------------------------------------------------------

FILTER_ROWS = [  # (n, source, source_type, tags, modified_at)
    (1, "work", "note", ["python", "ml"], "2024-01-01T00:00:00+00:00"),
    (2, "work", "note", ["python"], "2024-02-01T12:00:00+00:00"),
    (3, "work", "code", [], "2024-03-01T00:00:00+00:00"),
    (4, "home", "note", ["ml", "garden"], "2024-02-15T00:00:00+00:00"),
    (5, "home", "ticket", ["garden"], None),
    (6, "archive", "note", ["python"], "2023-12-31T23:59:59+00:00"),
    (7, "home", "code", ["ml"], "2024-02-01T13:00:00+01:00"),  # = 12:00 UTC
]


def _matches(row, *, sources=None, source_types=None, tags_any=None, start=None, end=None):
    """The filter semantics spelled out in Python: the oracle for the stores' answers."""
    _, source, source_type, tags, modified = row
    when = modified and datetime.fromisoformat(modified)
    start, end = (bound and (bound if bound.tzinfo else bound.replace(tzinfo=UTC))
                  for bound in (start, end))
    return ((sources is None or source in sources)
            and (source_types is None or source_type in source_types)
            and (tags_any is None or bool(set(tags) & set(tags_any)))
            and (start is None or (when is not None and when >= start))
            and (end is None or (when is not None and when <= end)))


FILTER_CASES = {
    "sources": dict(sources=["home", "archive"]),
    "source_types": dict(source_types=["code"]),
    "tags_any": dict(tags_any=["ml", "garden"]),
    "modified_from": dict(start=datetime(2024, 2, 1, 12, tzinfo=UTC)),
    "modified_to": dict(end=datetime(2024, 2, 1, 12, tzinfo=UTC)),
    "modified_range": dict(start=datetime(2024, 1, 1, tzinfo=UTC),
                           end=datetime(2024, 2, 15, tzinfo=UTC)),
    "naive_is_utc_and_aware_converted": dict(
        start=datetime(2024, 2, 1, 12),
        end=datetime(2024, 2, 1, 15, tzinfo=timezone(timedelta(hours=3)))),
    "all_combined": dict(sources=["work", "home"], source_types=["note", "code"],
                         tags_any=["ml", "python"], start=datetime(2024, 1, 15, tzinfo=UTC),
                         end=datetime(2024, 3, 1, tzinfo=UTC)),
}


@pytest.fixture(scope="module", params=["edge", "edge-parts", "server"])
def filter_rows_store(request, tmp_path_factory):
    """FILTER_ROWS in a store of each back end, written once for all the filter cases (which
    only search it: a store of four parts per case was a quarter of this file's CPU), and the
    query vector each case searches with."""
    backend = request.param
    if backend == "server" and not os.environ.get("QDRANT_URL"):
        pytest.skip("QDRANT_URL not set: no Qdrant server to test against")
    with _stores(backend, tmp_path_factory.mktemp("filter-rows") / "vectors") as open_store:
        store = open_store()
        rng = np.random.default_rng(7)
        store.upsert([VectorPoint(cid(n), rng.standard_normal(DIM), {
            "source": source, "source_type": source_type, "tags": tags,
            "modified_at": modified})
            for n, source, source_type, tags, modified in FILTER_ROWS])
        yield store, rng.standard_normal(DIM)


@pytest.mark.parametrize("case", FILTER_CASES)
def test_filters_and_their_combination(filter_rows_store, case):
    store, query = filter_rows_store
    spec = FILTER_CASES[case]
    filters = VectorFilter(sources=spec.get("sources"), source_types=spec.get("source_types"),
                           tags_any=spec.get("tags_any"), modified_from=spec.get("start"),
                           modified_to=spec.get("end"))
    expected = {cid(row[0]) for row in FILTER_ROWS if _matches(row, **spec)}
    assert expected, "each case should select something"
    assert set(ids(store.search(query, limit=100, filters=filters))) == expected


def test_an_empty_filter_list_matches_nothing(store):
    store.upsert([VectorPoint(cid(1), vec(1), {"source": "work", "tags": ["a"]})])
    assert store.search(vec(1), filters=VectorFilter(sources=[])) == []
    assert store.search(vec(1), filters=VectorFilter(tags_any=[])) == []
    assert ids(store.search(vec(1), filters=VectorFilter())) == [cid(1)]


def test_modified_at_is_stored_as_utc_and_must_be_iso(store):
    store.upsert([VectorPoint(cid(1), vec(1), {"modified_at": "2024-05-01T10:00:00+02:00"}),
                  VectorPoint(cid(2), vec(1, 1), {"modified_at": None})])
    payloads = {hit.chunk_id: hit.payload for hit in store.search(vec(1), limit=2)}
    assert payloads[cid(1)]["modified_at"] == "2024-05-01T08:00:00+00:00"
    assert payloads[cid(2)]["modified_at"] is None
    with pytest.raises(ValueError, match="modified_at"):
        store.upsert([VectorPoint(cid(3), vec(1), {"modified_at": "last tuesday"})])


# -- thresholds, limits, validation -------------------------------------------------------


def test_score_threshold_keeps_scores_at_or_above_it(store):
    store.upsert([VectorPoint(cid(1), vec(1, 0), {}), VectorPoint(cid(2), vec(1, 1), {}),
                  VectorPoint(cid(3), vec(0, 1), {})])
    middle = store.search(vec(1, 0), limit=3)[1]
    assert middle.chunk_id == cid(2)
    assert ids(store.search(vec(1, 0), limit=3, score_threshold=middle.score)) == [cid(1), cid(2)]
    assert ids(store.search(vec(1, 0), limit=3, score_threshold=0.9)) == [cid(1)]
    assert store.search(vec(0, 0, 1), limit=3, score_threshold=0.5) == []


def test_limit_bounds(store):
    store.upsert([VectorPoint(cid(n), vec(1, n), {}) for n in range(5)])
    assert len(store.search(vec(1), limit=1)) == 1
    assert len(store.search(vec(1), limit=1000)) == 5
    for bad in (0, -3):
        with pytest.raises(ValueError, match="limit"):
            store.search(vec(1), limit=bad)


def test_wrong_vector_length_names_the_expected_dimension(store):
    with pytest.raises(ValueError, match=f"expected dimension {DIM}"):
        store.upsert([VectorPoint(cid(1), np.ones(DIM - 1), {})])
    with pytest.raises(ValueError, match=f"expected dimension {DIM}"):
        store.search(np.ones(DIM + 1))
    assert store.count() == 0


@pytest.mark.parametrize("point, problem", [
    (VectorPoint("not-a-chunk-id", vec(1), {}), "chunk id"),
    (VectorPoint(cid(0xABC).upper(), vec(1), {}), "chunk id"),
    (VectorPoint(cid(1), vec(), {}), "all zeros"),
    (VectorPoint(cid(1), vec(np.nan), {}), "NaN"),
    (VectorPoint(cid(1), vec(1), {"nested": {"a": 1}}), "payload 'nested'"),
    (VectorPoint(cid(1), vec(1), {"tags": ["ok", 3]}), "payload 'tags'"),
    (VectorPoint(cid(1), vec(1), {"chunk_id": cid(2)}), "payload chunk_id"),
])
def test_invalid_points_are_rejected_before_anything_is_written(store, point, problem):
    with pytest.raises(ValueError, match=problem):
        store.upsert([VectorPoint(cid(5), vec(1), {}), point])
    assert store.count() == 0


# -- lifecycle -----------------------------------------------------------------------------


def test_reopening_keeps_the_data(open_store):
    with open_store() as first:
        first.upsert([VectorPoint(cid(n), vec(1, n), {"source": "work"}) for n in range(1, 4)])
        first.flush()
    reopened = open_store()
    assert reopened.chunk_ids("work") == {cid(1), cid(2), cid(3)}
    assert ids(reopened.search(vec(1, 2), limit=1)) == [cid(2)]


def test_another_model_or_dimension_is_refused(open_store):
    open_store().close()
    with pytest.raises(VectorStoreMismatch, match="model-b"):
        open_store(model="test/model-b")
    with pytest.raises(VectorStoreMismatch, match="dimension 16"):
        open_store(dimension=16)


def test_close_is_idempotent_and_later_calls_fail_clearly(open_store):
    with open_store() as store:
        store.upsert([VectorPoint(cid(1), vec(1), {})])
    store.close()
    with pytest.raises(VectorStoreError, match="closed"):
        store.search(vec(1))


def test_drop_deletes_the_collection(open_store):
    store = open_store()
    store.upsert([VectorPoint(cid(1), vec(1), {})])
    store.drop()
    store.close()
    assert open_store().count() == 0


def test_collection_name_is_safe_deterministic_and_per_model_and_precision():
    name = collection_name("sentence-transformers/all-MiniLM-L6-v2", 384, "f32")
    assert name == "chunks__sentence-transformers_all-minilm-l6-v2__384"  # as ever for f32
    assert name == collection_name("sentence-transformers/all-MiniLM-L6-v2", 384, "f32")
    assert collection_name("BAAI/bge-small-en-v1.5", 384, "f32") != name
    assert collection_name("sentence-transformers/all-MiniLM-L6-v2", 768, "f32") != name
    assert collection_name("sentence-transformers/all-MiniLM-L6-v2", 384, "bf16") == \
        f"{name}__bf16"
    assert point_id(cid(1)) == point_id(cid(1)) != point_id(cid(2))
    assert uuid.UUID(point_id(cid(1))).version == 5


# -- Edge only: one process per directory, shared through published copies -----------------


@pytest.fixture
def edge_store(tmp_path):
    with EdgeVectorStore(tmp_path / "vectors", "chunks", DIM, MODEL) as store:
        yield store


def _stored_datatype(directory: Path) -> str | None:
    return json.loads((directory / "edge_config.json").read_text())["vectors"][VECTOR_NAME].get(
        "datatype")


def test_edge_keeps_new_vectors_in_float16_and_older_shards_as_they_were(tmp_path, monkeypatch):
    """float16 halves what the index build at publish holds; a shard made in float32 before
    opens and keeps float32 (no rewrite, no refused load)."""
    points = [VectorPoint(cid(n), vec(1, n), {"source": "work"}) for n in range(1, 4)]
    with EdgeVectorStore(tmp_path, "new", DIM, MODEL) as new:
        new.upsert(points)
    assert _stored_datatype(tmp_path / "new" / "part-0000") == "float16"
    monkeypatch.setattr(edge, "VECTOR_DATATYPE", qe.VectorStorageDatatype.Float32)
    with EdgeVectorStore(tmp_path, "older", DIM, MODEL) as older:
        older.upsert(points)
    monkeypatch.undo()
    with EdgeVectorStore(tmp_path, "older", DIM, MODEL) as reopened:
        reopened.upsert([VectorPoint(cid(4), vec(1, 4), {"source": "work"})])
        reopened.optimize()
        assert ids(reopened.search(vec(1, 2), limit=1)) == [cid(2)]
        assert reopened.count() == 4
    assert _stored_datatype(tmp_path / "older" / "part-0000") in (None, "float32")  # Edge's


def test_edge_second_process_gets_busy_with_the_path(edge_store):
    process = start_python(f"""
        from pathlib import Path
        from jarvis_core.stores.vectors.base import VectorStoreBusy
        from jarvis_core.stores.vectors.edge import EdgeVectorStore
        try:
            EdgeVectorStore(Path({str(edge_store.path)!r}), "chunks", {DIM}, {MODEL!r},
                            busy_timeout=0.5)
        except VectorStoreBusy as exc:
            print("busy:", exc)
    """)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert stdout.startswith("busy:")
    assert str(edge_store.directory) in stdout


def test_edge_second_store_in_one_process_is_busy_too(edge_store):
    with pytest.raises(VectorStoreBusy, match="gave up after 0.2 s"):
        EdgeVectorStore(edge_store.path, "chunks", DIM, MODEL, busy_timeout=0.2)


def test_edge_published_copy_serves_a_reader_process_while_the_writer_writes(edge_store,
                                                                             tmp_path):
    rng = np.random.default_rng(3)
    edge_store.upsert([VectorPoint(cid(n), rng.standard_normal(DIM), {"source": f"s{n % 3}"})
                       for n in range(200)])
    queries = rng.standard_normal((5, DIM))
    source_filter = VectorFilter(sources=["s1"])
    expected = {"plain": [ids(edge_store.search(q, limit=5)) for q in queries],
                "filtered": [ids(edge_store.search(q, limit=5, filters=source_filter))
                             for q in queries],
                "count": 200}
    published = tmp_path / "published" / "v1"
    edge_store.publish_copy(published)
    with pytest.raises(FileExistsError):
        edge_store.publish_copy(published)

    reader = start_python(f"""
        import json
        from pathlib import Path
        import numpy as np
        from jarvis_core.stores.vectors.edge import EdgeVectorStore
        from jarvis_core.stores.vectors.filters import VectorFilter
        queries = np.array({queries.tolist()!r})
        with EdgeVectorStore.open_read_copy(Path({str(published)!r}),
                                            Path({str(tmp_path / "reader")!r}),
                                            model={MODEL!r}) as store:
            print(json.dumps({{
                "plain": [[h.chunk_id for h in store.search(q, limit=5)] for q in queries],
                "filtered": [[h.chunk_id for h in store.search(
                    q, limit=5, filters=VectorFilter(sources=["s1"]))] for q in queries],
                "count": store.count()}}))
    """)
    written = 200
    while True:  # at least one write lands while the reader copies and searches
        edge_store.upsert([VectorPoint(cid(written + k), rng.standard_normal(DIM), {})
                           for k in range(20)])
        edge_store.delete([cid(written - 150)])
        written += 20
        if reader.poll() is not None or written >= 2000:
            break
    stdout, stderr = reader.communicate(timeout=60)
    assert reader.returncode == 0, stderr
    assert json.loads(stdout) == expected
    assert edge_store.count() == written - (written - 200) // 20


def test_edge_read_copy_checks_the_model_and_needs_an_empty_workdir(edge_store, tmp_path):
    edge_store.upsert([VectorPoint(cid(1), vec(1), {})])
    edge_store.publish_copy(tmp_path / "published")
    with pytest.raises(VectorStoreMismatch, match="test/model-b"):
        EdgeVectorStore.open_read_copy(tmp_path / "published", tmp_path / "r1",
                                       model="test/model-b")
    assert not (tmp_path / "r1").exists()
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "stray").write_text("x")
    with pytest.raises(FileExistsError):
        EdgeVectorStore.open_read_copy(tmp_path / "published", tmp_path / "r2")
    with EdgeVectorStore.open_read_copy(tmp_path / "published", tmp_path / "r3") as reader:
        assert (reader.model, reader.dimension, reader.count()) == (MODEL, DIM, 1)


def _parts(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("part-*"))


def _recorded_ids(part: Path) -> set[str]:
    return {str(uuid.UUID(bytes=raw.ljust(16, b"\0")))
            for raw in np.load(part / edge_files.PART_IDS).tolist()}


def test_edge_parts_fill_in_turn_and_full_ones_record_their_points(tmp_path):
    """A full part lists its points, so a replaced or deleted point leaves the part that
    holds it and no other part is opened for it."""
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=3) as store:
        store.upsert([VectorPoint(cid(n), vec(1, n), {"source": "work"}) for n in range(1, 9)])
        directory = store.directory
        assert _parts(directory) == ["part-0000", "part-0001", "part-0002"]
        assert _recorded_ids(directory / "part-0000") == {point_id(cid(n)) for n in (1, 2, 3)}
        assert not (directory / "part-0002" / edge_files.PART_IDS).exists()  # still taking points
        store.upsert([VectorPoint(cid(1), vec(0, 1), {"source": "home"})])
        store.delete([cid(5)])
        assert point_id(cid(1)) not in _recorded_ids(directory / "part-0000")
        assert _recorded_ids(directory / "part-0001") == {point_id(cid(n)) for n in (4, 6)}
        assert store.counts_by_source() == {"work": 6, "home": 1}
        assert ids(store.search(vec(0, 1), limit=1)) == [cid(1)]
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=3) as reopened:
        reopened.upsert([VectorPoint(cid(20), vec(1, 20), {"source": "work"})])
        assert _parts(directory) == ["part-0000", "part-0001", "part-0002", "part-0003"]
        assert _recorded_ids(directory / "part-0002") == {point_id(cid(n)) for n in (7, 8, 1)}
        assert reopened.count() == 8


def test_edge_publish_builds_and_copies_one_part_at_a_time(tmp_path, monkeypatch):
    """What bounds the memory of a publish: no two parts are open at once."""
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=4) as store:
        store.upsert([VectorPoint(cid(n), vec(1, n / 10), {"source": f"s{n % 2}"})
                      for n in range(1, 15)])
    opened, shard = [], EdgeVectorStore._shard

    def counted(self, part):
        found = shard(self, part)
        opened.append(len(self._shards))
        return found

    monkeypatch.setattr(EdgeVectorStore, "_shard", counted)
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=4) as store:
        store.publish_copy(tmp_path / "published")
        assert len(opened) >= 4 and max(opened) == 1
    monkeypatch.undo()
    with EdgeVectorStore.open_read_copy(tmp_path / "published", tmp_path / "reader") as reader:
        assert _parts(reader.directory) == ["part-0000", "part-0001", "part-0002", "part-0003"]
        assert reader.counts_by_source() == {"s0": 7, "s1": 7}
        assert ids(reader.search(vec(1, 0.9), limit=1, filters=VectorFilter(sources=["s1"]))) \
            == [cid(9)]


def test_edge_a_store_made_before_parts_stays_one_part(tmp_path):
    with EdgeVectorStore(tmp_path, "old", DIM, MODEL) as store:
        store.upsert([VectorPoint(cid(n), vec(1, n), {"source": "work"}) for n in range(1, 4)])
    directory = tmp_path / "old"
    for path in (directory / "part-0000").iterdir():  # the layout before parts
        path.rename(directory / path.name)
    (directory / "part-0000").rmdir()
    with EdgeVectorStore(tmp_path, "old", DIM, MODEL, part_points=1) as store:
        store.upsert([VectorPoint(cid(4), vec(1, 4), {"source": "work"})])
        assert _parts(directory) == [] and store.count() == 4
        store.publish_copy(tmp_path / "published")
    with EdgeVectorStore.open_read_copy(tmp_path / "published", tmp_path / "reader") as reader:
        assert reader.chunk_ids("work") == {cid(n) for n in range(1, 5)}
        assert ids(reader.search(vec(1, 4), limit=1)) == [cid(4)]


def test_edge_a_read_copy_of_parts_answers_threads_at_once(tmp_path):
    """An MCP server answers calls on several threads: searches and counts arriving together
    on a copy whose parts are not open yet each get their answer (a part is opened once, and
    never closed under a search)."""
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=2) as store:
        store.upsert([VectorPoint(cid(n), vec(1, n / 10), {"source": f"s{n % 2}"})
                      for n in range(1, 9)])
        store.publish_copy(tmp_path / "published")
    for attempt in range(3):
        with EdgeVectorStore.open_read_copy(tmp_path / "published",
                                            tmp_path / f"reader-{attempt}") as reader:
            barrier = threading.Barrier(8)

            def call(number: int, start: threading.Barrier = barrier):
                start.wait()
                if number % 2:
                    return reader.counts_by_source()
                return ids(reader.search(vec(1, 0.7), limit=1))

            with ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(call, range(8)))
        assert answers == [[cid(7)], {"s0": 4, "s1": 4}] * 4


class _RecordingShard:
    """An Edge shard that records what its searches ask for."""

    def __init__(self, shard, asked: list) -> None:
        self._shard = shard
        self._asked = asked

    def query(self, request):
        self._asked.append(("query", request.with_payload))
        return self._shard.query(request)

    def retrieve(self, point_ids, with_payload, with_vector):
        self._asked.append(("retrieve", len(point_ids)))
        return self._shard.retrieve(point_ids, with_payload, with_vector)

    def close(self) -> None:
        self._shard.close()


def test_edge_a_search_reads_the_payloads_of_the_points_it_keeps_only(tmp_path):
    """Parts answer ids and scores; payloads are read for the points the search fetches
    (twice the limit, to tell a tie at the cut), not for every part's best."""
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=2) as store:
        store.upsert([VectorPoint(cid(n), vec(1, n / 10), {"source": f"s{n % 2}"})
                      for n in range(1, 9)])
        asked: list = []
        store._shards = {part: _RecordingShard(store._shard(part), asked)
                         for part in store._parts}
        hits = store.search(vec(1, 0.8), limit=2, payload=["source"])
    assert ids(hits) == [cid(8), cid(7)] and [hit.payload["source"] for hit in hits] == \
        ["s0", "s1"]
    assert [payload for call, payload in asked if call == "query"] == [False] * 4
    assert sum(count for call, count in asked if call == "retrieve") == 4


def test_edge_a_reader_loads_every_part_and_reads_its_payloads_ahead(tmp_path, monkeypatch):
    """``load`` opens every part before the first search; a query process's copy asks the
    kernel for each part's payload files as it opens the part (Edge drops their cached
    pages when a shard closes); the pipeline's store does not. A reader's parts search on
    the calling thread (max_search_threads 1)."""
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=2) as store:
        store.upsert([VectorPoint(cid(n), vec(1, n / 10), {"source": "s"}) for n in range(1, 6)])
        store.publish_copy(tmp_path / "published")
    advised: list[tuple[str, int]] = []

    def recorded(part: Path) -> int:
        advised.append((part.name, edge_files.read_ahead_payloads(part)))
        return advised[-1][1]

    monkeypatch.setattr(edge, "read_ahead_payloads", recorded)
    with EdgeVectorStore(tmp_path, "c", DIM, MODEL, part_points=2) as writer:
        writer.search(vec(1), limit=1)
    assert advised == []
    with EdgeVectorStore.open_read_copy(tmp_path / "published", tmp_path / "reader") as reader:
        reader.load()
        for thread in threading.enumerate():
            if thread.name == "jarvis-read-ahead":
                thread.join()
        assert len(advised) == 3
        assert ids(reader.search(vec(1, 0.5), limit=1)) == [cid(5)]
        configs = [json.loads((part / "edge_config.json").read_text())
                   for part in reader._parts]
    assert sorted(name for name, _ in advised) == ["part-0000", "part-0001", "part-0002"]
    assert all(files > 0 for _, files in advised)  # Edge's payload files where we look
    assert [config.get("max_search_threads") for config in configs] == [1, 1, 1]


def test_read_ahead_advises_a_file_a_readahead_window_at_a_time(tmp_path, monkeypatch):
    """Linux reads at most one readahead window per advice: a larger file is advised in
    steps that cover all of it."""
    payloads = tmp_path / "part-0000" / "segments" / "a" / "payload_storage"
    payloads.mkdir(parents=True)
    (payloads / "page_0.dat").write_bytes(b"\0" * (3 * edge_files.READ_AHEAD_STEP + 1))
    (payloads / "tracker.dat").write_bytes(b"\0" * 10)
    advice: list[tuple[int, int]] = []
    monkeypatch.setattr(edge_files.os, "posix_fadvise",
                        lambda _fd, offset, length, _how: advice.append((offset, length)),
                        raising=False)
    assert edge_files.read_ahead_payloads(tmp_path / "part-0000") == 2
    step = edge_files.READ_AHEAD_STEP
    assert sorted(advice) == [(0, step), (0, step), (step, step), (2 * step, step),
                              (3 * step, step)]


def test_read_ahead_passes_over_a_file_gone_since_the_listing(tmp_path, monkeypatch):
    """A copy removed or a segment merged while the read-ahead thread lists the files: the
    others are still advised, and nothing is raised on the thread."""
    payloads = tmp_path / "part-0000" / "segments" / "a" / "payload_storage"
    payloads.mkdir(parents=True)
    for name in ("page_0.dat", "tracker.dat"):
        (payloads / name).write_bytes(b"\0" * 10)
    opened = edge_files.os.open

    def open_but_the_page(path, flags):
        if Path(path).name == "page_0.dat":
            Path(path).unlink()
        return opened(path, flags)

    monkeypatch.setattr(edge_files.os, "open", open_but_the_page)
    monkeypatch.setattr(edge_files.os, "posix_fadvise", lambda *_: None, raising=False)
    assert edge_files.read_ahead_payloads(tmp_path / "part-0000") == 1

    def folder_gone_while_listed(_part, _pattern):
        raise FileNotFoundError("a segment folder removed during the walk")

    monkeypatch.setattr(Path, "glob", folder_gone_while_listed)
    assert edge_files.read_ahead_payloads(tmp_path / "part-0000") == 0
