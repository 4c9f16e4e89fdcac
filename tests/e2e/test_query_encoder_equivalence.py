"""The exported query model against the ingest embedder on real chunks (token ids on the
first 1,000 of the SciFact corpus, vectors on the first 32), each document (title + text)
chunked as the ingest side chunks a note, embedded with the text the vectors are made from
(``Chunk.embed_text``)."""

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from jarvis_core.embedding_backends import OPENVINO, OPENVINO_BF16, TORCH_FP32, backend_problem
from jarvis_core.settings import CACHE_ENV
from jarvis_core.text.chunking import chunk_document
from jarvis_core.text.embedder import Embedder
from jarvis_core.text.export import export_query_model
from jarvis_core.text.query_encoder import QueryEncoder
from jarvis_core.text.tokens import resolve_model_dir, token_counter
from tests.query_helpers import exported_encoder

pytestmark = pytest.mark.slow

MODEL = "all-MiniLM-L6-v2"
CHUNKS = 1000  # tokenizing is cheap
ENCODED = 32  # one batch: a float32 encoding of a chunk takes 90 ms on 2 cores (1,000 took
# a third of CI)
MIN_COSINE = 0.9999
SCIFACT_CORPUS = (Path(__file__).resolve().parents[3] / "shared" / "eval" / "scifact"
                  / "corpus.jsonl.gz")


@pytest.fixture(scope="module")
def exported() -> Path:
    """The export the pipeline publishes (the session's model cache holds it)."""
    return exported_encoder()


@pytest.fixture(scope="module")
def chunks() -> list[str]:
    if not SCIFACT_CORPUS.is_file():
        pytest.skip(f"the SciFact corpus is not at {SCIFACT_CORPUS}")
    counter = token_counter(MODEL)
    texts: list[str] = []
    with gzip.open(SCIFACT_CORPUS, "rt", encoding="utf-8") as corpus:
        for document in map(json.loads, corpus):
            texts += [chunk.embed_text for chunk in chunk_document(
                document["text"], title=document["title"], doc_key=document["_id"],
                counter=counter)]
            if len(texts) >= CHUNKS:
                return texts[:CHUNKS]
    raise AssertionError(f"{SCIFACT_CORPUS} gives fewer than {CHUNKS} chunks")


@pytest.fixture(scope="module")
def query_vectors(exported, chunks) -> np.ndarray:
    return QueryEncoder.load(exported, threads=2).encode(chunks[:ENCODED])


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)  # both sides are unit length


def test_token_ids_are_those_sentence_transformers_feeds_the_model(exported, chunks):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(resolve_model_dir(MODEL)), device="cpu",
                                local_files_only=True)
    encoder = QueryEncoder.load(exported)
    for start in range(0, len(chunks), 32):
        batch = chunks[start:start + 32]
        expected = model.preprocess(batch)
        for name, values in encoder.tokenize(batch).items():
            np.testing.assert_array_equal(values, expected[name].numpy(), err_msg=name)


# OpenVINO (float32): all 32 encoded chunks (one batch); torch float32, three times slower
# on 2 cores, confirms on the first 16; OpenVINO bf16 (auto's pick where the CPU has native
# bf16, whose chunks meet float32 queries) on 32.
@pytest.mark.parametrize(("backend", "count"), [
    (OPENVINO, ENCODED), (TORCH_FP32, 16),
    pytest.param(OPENVINO_BF16, ENCODED, marks=pytest.mark.skipif(
        bool(backend_problem(OPENVINO_BF16)), reason=str(backend_problem(OPENVINO_BF16))))])
def test_query_vectors_are_the_ingest_embedders(backend, count, chunks, query_vectors):
    """all-MiniLM-L6-v2 has no prompts, so a chunk's stored vector is also what the embedder
    gives for the same text as a query; both are checked. The query model computes in
    float32 whatever the chunks' precision."""
    embedder = Embedder(MODEL, backend=backend,  # OpenVINO: the session's converted model
                        cache_dir=Path(os.environ[CACHE_ENV]))
    assert embedder.backend == backend
    stored = cosines(query_vectors[:count], embedder.embed(chunks[:count]))
    as_queries = cosines(query_vectors[:20], np.stack([embedder.embed_query(text)
                                                      for text in chunks[:20]]))
    print(f"{backend}: cosine over {count} chunks min {stored.min():.7f} "
          f"mean {stored.mean():.7f}; as queries min {as_queries.min():.7f}")
    assert stored.min() >= MIN_COSINE and as_queries.min() >= MIN_COSINE


def test_a_models_query_prompt_is_exported_and_prepended(tmp_path):
    source = resolve_model_dir(MODEL)
    model_dir = tmp_path / "prompted"
    for path in source.rglob("*"):
        if path.is_file():
            target = model_dir / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    (model_dir / "config_sentence_transformers.json").unlink()
    (model_dir / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "document": "passage: "}}))
    result = export_query_model(model_dir, tmp_path / "export")
    encoder = QueryEncoder.load(result.directory)
    assert encoder.query_prompt == "query: "
    texts = ["How are failed uploads retried?", "Who owns the ingest pipeline?"]
    embedder = Embedder(str(model_dir), backend=TORCH_FP32)
    expected = np.stack([embedder.embed_query(text) for text in texts])
    assert cosines(encoder.encode(texts), expected).min() >= MIN_COSINE
    assert cosines(encoder.encode(texts), embedder.embed(texts)).max() < MIN_COSINE
