"""The cheap stand-in for the embedding model (``hashed-ngrams``, for benchmarks at scale):
the same vectors in every process, unit length, ranking lexically; and its vectors never
mix with the model's (their own collection, cache and settings fingerprint, no query model
exported), while the query side hashes queries for a version embedded with it."""

import io
import os
import subprocess
import sys

import numpy as np

from jarvis_core.config import JarvisConfig
from jarvis_core.embedding_backends import HASHED_NGRAMS, choose_backend
from jarvis_core.pending import settings_fingerprint
from jarvis_core.settings import DEFAULT_MODEL, EmbeddingSettings
from jarvis_core.stores.serving import PublishedVersion
from jarvis_core.stores.vectors.base import collection_name
from jarvis_core.text.embedder import Embedder
from jarvis_core.text.hashed_ngrams import HashedNgrams
from jarvis_core.text.query_model import prepare_query_model
from jarvis_query.retrievers.dense import DenseRetriever

TEXTS = ["The database migration failed on the staging server.",
         "Budget review with the customer after the release meeting.",
         "Latency of the search cache went up after the deployment.",
         "---"]


def test_the_same_texts_give_the_same_vectors_in_another_process():
    """Not Python's ``hash()``, which is salted per process."""
    script = ("import sys, numpy; from jarvis_core.text.hashed_ngrams import HashedNgrams; "
              f"numpy.save(sys.stdout.buffer, HashedNgrams(384).encode({TEXTS!r}))")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345",
                                "PYTHONPATH": os.pathsep.join(sys.path)})
    assert np.array_equal(np.load(io.BytesIO(other.stdout)), HashedNgrams(384).encode(TEXTS))


def test_vectors_have_unit_length_and_the_asked_dimension():
    vectors = HashedNgrams(384).encode(TEXTS)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)  # "---" too


def test_a_query_ranks_the_text_sharing_its_words_first():
    hashed = HashedNgrams(384)
    for query, expected in (("database migration", 0), ("customer budget", 1),
                            ("search cache latency", 2)):
        scores = hashed.encode(TEXTS) @ hashed.embed_query(query)
        assert int(np.argmax(scores)) == expected, (query, scores)


def test_the_embedder_backend_keeps_the_model_dimension_and_its_own_collection(tmp_path):
    embedder = Embedder(DEFAULT_MODEL, backend=HASHED_NGRAMS)
    assert (embedder.backend, embedder.precision, embedder.dimension) == (
        HASHED_NGRAMS, HASHED_NGRAMS, 384)
    assert np.allclose(embedder.embed(TEXTS), HashedNgrams(384).encode(TEXTS), atol=1e-6)
    assert collection_name(DEFAULT_MODEL, 384, choose_backend(HASHED_NGRAMS).precision) != (
        collection_name(DEFAULT_MODEL, 384, "f32"))
    hashed = JarvisConfig(data_dir=tmp_path, embedding={"backend": HASHED_NGRAMS})
    assert settings_fingerprint(hashed) != settings_fingerprint(JarvisConfig(data_dir=tmp_path))
    assert prepare_query_model(EmbeddingSettings(backend=HASHED_NGRAMS), tmp_path)[0] is None
    assert not (tmp_path / "query-model").exists()


def test_the_query_side_hashes_queries_for_a_version_embedded_so(tmp_path):
    version = PublishedVersion(name="v1", path=tmp_path, manifest={
        "model": DEFAULT_MODEL, "dimension": 384, "encoder": None,
        "embedding": {"backend": HASHED_NGRAMS, "precision": HASHED_NGRAMS, "reason": "bench"}})
    encoder = DenseRetriever(JarvisConfig(data_dir=tmp_path)).encoder(version)
    assert np.array_equal(encoder.embed_query("database migration"),
                          HashedNgrams(384).embed_query("database migration"))
