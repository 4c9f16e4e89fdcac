"""The model files a first refresh needs, prepared in a process of its own beside it: the
model converted for OpenVINO and the query model exported for ONNX Runtime, both into the
model cache. Either takes torch and sentence-transformers, which a process that finds them
in the cache never imports; done beside the refresh, they take the second core while the
refresh ingests and chunks, and the refresh finds them ready (its conversion and export
wait for the preparation's turn, then read what it left). A first `jarvis refresh` of the
sample on 2 cores, bytecode compiled on the way as on a new install: 43-48 s -> 32 s.

Nothing depends on the preparation succeeding: what it did not leave, the refresh makes
itself, as it would without it, and reports why when it cannot."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jarvis_core.embedding_backends import HASHED_NGRAMS, OPENVINO_BACKENDS, choose_backend
from jarvis_core.settings import EmbeddingSettings
from jarvis_core.text.query_encoder import MANIFEST_NAME
from jarvis_core.text.tokens import ModelNotFoundError, resolve_model_dir


def needs_preparation(settings: EmbeddingSettings, cache_dir: Path) -> bool:
    """Whether the cache lacks the conversion (for an OpenVINO backend) or the query model
    of the configured model: a first refresh on this machine, or a new model."""
    return any(_lacking(settings, cache_dir))


def _lacking(settings: EmbeddingSettings, cache_dir: Path) -> tuple[bool, bool]:
    """(the conversion, the query model): what the cache lacks of the configured model's and
    the preparation could leave there; neither where it could not (a read-only cache, the
    hashed stand-in, a model not on this machine, which the refresh reports itself)."""
    from jarvis_core.text.openvino_backend import is_converted
    from jarvis_core.text.query_model import query_model_dir

    backend = choose_backend(settings.backend, settings.device).backend
    if backend == HASHED_NGRAMS or not _writable(cache_dir):
        return False, False
    try:
        model_dir = resolve_model_dir(settings.model)
    except ModelNotFoundError:
        return False, False
    return (backend in OPENVINO_BACKENDS and not is_converted(model_dir, cache_dir),
            not (query_model_dir(settings, cache_dir) / MANIFEST_NAME).is_file())


def _writable(directory: Path) -> bool:
    """Whether files can be made in ``directory``, or in its nearest existing parent while
    it is still to be made."""
    existing = next(path for path in (directory, *directory.parents) if path.exists())
    return os.access(existing, os.W_OK)


@contextmanager
def prepared_beside(settings: EmbeddingSettings, cache_dir: Path) -> Iterator[bool]:
    """The preparation running beside the block when the cache needs it, waited for when
    the block ends (interrupted, it is interrupted with it: one process group). Its output
    is dropped: whatever fails in it fails again, reported, in the refresh. Yields whether
    it converts the model, which the block's embeddings then wait for."""
    process, (conversion, query_model) = None, _lacking(settings, cache_dir)
    if conversion or query_model:
        process = subprocess.Popen(_command(settings, cache_dir), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield conversion
    finally:
        if process is not None:
            process.wait()


def _command(settings: EmbeddingSettings, cache_dir: Path) -> list[str]:
    return [sys.executable, "-m", __name__, settings.model_dump_json(), str(cache_dir)]


def prepare(settings: EmbeddingSettings, cache_dir: Path) -> None:
    """Convert (loading the embedder does, under the conversion's turn), then export."""
    from jarvis_core.text.embedder import Embedder
    from jarvis_core.text.query_model import prepare_query_model

    if choose_backend(settings.backend, settings.device).backend in OPENVINO_BACKENDS:
        Embedder(settings.model, backend=settings.backend, device=settings.device,
                 cache_dir=cache_dir)
    prepare_query_model(settings, cache_dir)


if __name__ == "__main__":
    prepare(EmbeddingSettings.model_validate_json(sys.argv[1]), Path(sys.argv[2]))
