"""Query vectors from an exported model with onnxruntime and tokenizers: no torch.

A cold search process pays for the model it loads, so the query side runs the directory
that ``jarvis_core.text.export`` wrote when the vectors were made: one ONNX graph for the
whole sentence pipeline and the model's own tokenizer. Vectors are float32 and scaled to
unit length exactly as the ingest ``Embedder`` scales its own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tokenizers import Tokenizer

from jarvis_core.text.runtime_tokenizer import TOKENIZER_FIELDS, TOKENIZER_FILE, token_features

if TYPE_CHECKING:
    import onnxruntime

# Format 2 saves the graph as onnxruntime optimises it; format 1 (older published versions)
# is optimised at each load.
FORMAT_VERSION = 2
READABLE_FORMATS = (1, FORMAT_VERSION)
MANIFEST_NAME = "manifest.json"
MODEL_FILE = "model.onnx"
OUTPUT_NAME = "sentence_embedding"
# One thread is the fastest for a query on 2 shared cores (measured: a 20-token query
# 7 ms on one thread, 8-12 ms on two; busy-waiting threads doubled that under load).
DEFAULT_THREADS = 1
BATCH_SIZE = 32
MANIFEST_FIELDS = ("model", "dimension", "max_seq_length", "query_prompt", "files")


class QueryEncoderError(RuntimeError):
    """An exported query model directory is missing, incomplete or of another format."""


class QueryEncoder:
    """The exported model, loaded once. ``encode`` may be called from several threads."""

    def __init__(self, directory: Path, manifest: dict, session: onnxruntime.InferenceSession,
                 tokenizer: Tokenizer) -> None:
        self.directory = directory
        self.model: str = manifest["model"]
        self.dimension: int = manifest["dimension"]
        self.max_seq_length: int = manifest["max_seq_length"]
        self.query_prompt: str = manifest["query_prompt"]
        self._session = session
        self._inputs = [port.name for port in session.get_inputs()]
        self._tokenizer = tokenizer
        self._tokenizer_lock = threading.Lock()

    @classmethod
    def load(cls, directory: Path, *, threads: int = DEFAULT_THREADS) -> QueryEncoder:
        import onnxruntime  # imported by the processes that encode, not by those that export

        directory = Path(directory)
        manifest = _read_manifest(directory)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = (
            onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL if manifest["format"] >= 2
            else onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL)
        # Prepacked weights would save 3 ms per query and cost 40 ms per load: a cold process
        # answers one query.
        options.add_session_config_entry("session.disable_prepacking", "1")
        # Idle threads sleep rather than spin: the cores are shared with the rest of Jarvis.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: optimiser notes are not the user's concern
        try:
            session = onnxruntime.InferenceSession(
                str(directory / MODEL_FILE), options, providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
        except Exception as exc:  # onnxruntime and tokenizers raise their own exception types
            raise QueryEncoderError(
                f"query model in {directory} could not be loaded: {exc}") from exc
        unknown = [port.name for port in session.get_inputs()
                   if port.name not in TOKENIZER_FIELDS]
        if unknown:
            raise QueryEncoderError(f"query model in {directory} takes inputs no tokenizer "
                                    f"gives: {', '.join(unknown)}")
        return cls(directory, manifest, session, tokenizer)

    def tokenize(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The graph's inputs for ``texts`` (query prompt prepended, cut and padded)."""
        with self._tokenizer_lock:
            return token_features(self._tokenizer, [self.query_prompt + text for text in texts],
                                  self._inputs)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Queries to vectors: shape (len(texts), dimension), rows in input order, unit length."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts; use embed_query() for one text")
        texts = list(texts)
        embeddings = np.empty((len(texts), self.dimension), dtype=np.float32)
        # Texts of similar length batched together waste the least work on padding.
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start:start + BATCH_SIZE]
            features = self.tokenize([texts[index] for index in batch])
            embeddings[batch] = self._session.run([OUTPUT_NAME], features)[0]
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        return embeddings / np.maximum(norms, np.finfo(np.float32).tiny)

    def embed_query(self, text: str) -> np.ndarray:
        """One query's vector, as ``Embedder.embed_query`` gives it."""
        return self.encode([text])[0]


def _read_manifest(directory: Path) -> dict:
    path = directory / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise QueryEncoderError(f"{directory} holds no exported query model "
                                f"({MANIFEST_NAME} is missing)") from exc
    except (OSError, ValueError) as exc:
        raise QueryEncoderError(f"{path} could not be read: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise QueryEncoderError(f"{path}: export format {found!r}, this Jarvis reads formats "
                                f"{', '.join(map(str, READABLE_FORMATS))}; export the model "
                                "again")
    absent = [field for field in MANIFEST_FIELDS if field not in manifest]
    if absent:
        raise QueryEncoderError(f"{path} lacks {', '.join(absent)}")
    missing = [name for name, entry in manifest["files"].items()
               if not (directory / name).is_file()
               or (directory / name).stat().st_size != entry["bytes"]]
    if missing:
        raise QueryEncoderError(f"{directory}: files missing or of the wrong size: "
                                f"{', '.join(missing)}")
    return manifest
