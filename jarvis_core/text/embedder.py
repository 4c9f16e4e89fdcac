"""Sentence embeddings of chunks and queries with the configured sentence-transformers model.

An ``Embedder`` loads the model once and returns float32, L2-normalised vectors. The backend
(jarvis_core/embedding_backends.py) changes speed and the precision the model computes in, never
meaning: every backend keeps a mean cosine of at least 0.999 to float32 torch (``jarvis bench
embed`` measures it), and ``auto`` takes the fastest one that passed the quality gate here.
torch, sentence-transformers and OpenVINO are imported only when a model is
loaded, so importing this module (the query side, the CLI) stays cheap; with OpenVINO, torch
and sentence-transformers only by the process that converts the model
(jarvis_core/text/openvino_backend.py). The ``hashed-ngrams`` backend is not the model but a
cheap stand-in for benchmarks at scale (jarvis_core/text/hashed_ngrams.py): no weights load.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jarvis_core.embedding_backends import (
    AUTO,
    FALLBACKS,
    HASHED_NGRAMS,
    OPENVINO_BACKENDS,
    PRECISIONS,
    TORCH_BF16,
    TORCH_FP16,
    BackendChoice,
    backend_problem,
    choose_backend,
)
from jarvis_core.embedding_devices import CPU, user_cache_dir
from jarvis_core.settings import DEFAULT_MODEL
from jarvis_core.text.hashed_ngrams import HashedNgrams
from jarvis_core.text.openvino_backend import (
    BatchEncoder,
    Settings,
    conversion_turn,
    converted_encoder,
    sentence_model_encoder,
)
from jarvis_core.text.tokens import model_dimension, model_max_tokens, resolve_model_dir

logger = logging.getLogger(__name__)

QUERY_PROMPT_NAMES = ("query",)
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")



class EmbeddingModelError(RuntimeError):
    """The embedding model could not be loaded, or not with the requested backend."""


@functools.lru_cache(maxsize=4)
def shared_embedder(model: str, *, backend: str = AUTO, device: str = CPU,
                    batch_size: int | None = None, cache_dir: Path | None = None,
                    max_streams: int | None = None) -> Embedder:
    """One loaded model per process and settings: every run of a refresh (one per source)
    and every step reuse it instead of loading the weights again."""
    return Embedder(model, backend=backend, device=device, batch_size=batch_size,
                    cache_dir=cache_dir, max_streams=max_streams)


class Embedder:
    """The configured model, loaded once, with the backend that was asked for or, for
    ``auto``, the one ``choose_backend`` takes here (falling back to another backend of the
    same precision when it fails to load), on the device ``device`` names or, for ``auto``,
    a GPU found here. ``backend``, ``precision``, ``device`` and ``reason`` say what embeds
    where and why; ``batch_size``, unless given, is the device's default. Use one Embedder
    from one thread at a time: the tokenizer underneath is not thread-safe."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        backend: str = AUTO,
        device: str = CPU,
        batch_size: int | None = None,
        cache_dir: Path | str | None = None,
        max_streams: int | None = None,  # OpenVINO inference streams (the memory budget's)
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        choice = choose_backend(backend, device)
        if backend != AUTO and (problem := backend_problem(backend, choice.device)):
            raise EmbeddingModelError(
                f"embedding model {model!r}: backend {backend!r} is not available: {problem}"
            )
        self.model = model
        self.device = choice.device
        self.batch_size = batch_size or choice.default_batch_size
        self._max_streams = max_streams
        self.reason = choice.reason
        model_dir = resolve_model_dir(model)
        if choice.backend == HASHED_NGRAMS:  # the model's dimension and length, not its weights
            self._take_hashed(model, model_dir)
            return
        cache = Path(cache_dir) if cache_dir else user_cache_dir()
        if choice.backend not in OPENVINO_BACKENDS:
            self._load(model, backend, choice, model_dir, cache)
            return
        with conversion_turn(model_dir, cache):
            converted = _converted(model, model_dir, cache, choice, max_streams)
            if converted is not None:
                self._take(choice.backend, *converted)
                return
            self._load(model, backend, choice, model_dir, cache)

    def _load(self, model: str, backend: str, choice: BackendChoice, model_dir: Path,
              cache: Path) -> None:
        """Load the model itself (and convert it, for OpenVINO)."""
        # OpenVINO converts from the model loaded on the CPU; torch computes where it is
        sentence_model = _load_sentence_model(
            model, model_dir, CPU if choice.backend in OPENVINO_BACKENDS else choice.device)
        dimension = sentence_model.get_embedding_dimension()
        if not dimension:
            raise EmbeddingModelError(f"embedding model {model!r} reports no embedding dimension")
        settings = Settings(
            dimension=dimension,
            max_seq_length=sentence_model.max_seq_length or model_max_tokens(model_dir),
            query_prompt=first_prompt(sentence_model.prompts, QUERY_PROMPT_NAMES),
            document_prompt=first_prompt(sentence_model.prompts, DOCUMENT_PROMPT_NAMES))
        candidates = [choice.backend]
        if backend == AUTO:
            candidates += [fallback for fallback in FALLBACKS.get(choice.backend, ())
                           if backend_problem(fallback, choice.device) is None]
        self._take(*self._open_backend(model, candidates, sentence_model, model_dir, cache,
                                       settings if sentence_model.max_seq_length else None,
                                       _openvino_device(choice)),
                   settings)

    def _take(self, backend: str, encode: BatchEncoder, settings: Settings) -> None:
        self.backend, self._encode_batches = backend, encode
        self.precision: str = PRECISIONS[backend]
        self.dimension: int = settings.dimension
        self.max_tokens: int = settings.max_seq_length
        self._query_prompt = settings.query_prompt
        self._document_prompt = settings.document_prompt

    def _take_hashed(self, model: str, model_dir: Path) -> None:
        dimension = model_dimension(model)
        if not dimension:
            raise EmbeddingModelError(f"embedding model {model!r}: its files name no embedding "
                                      f"dimension for the {HASHED_NGRAMS} backend to take")
        self._take(HASHED_NGRAMS, HashedNgrams(dimension).encode_batches,
                   Settings(dimension=dimension, max_seq_length=model_max_tokens(model_dir),
                            query_prompt="", document_prompt=""))

    def _open_backend(self, model: str, candidates: list[str], sentence_model, model_dir: Path,
                      cache_dir: Path, settings: Settings | None, openvino_device: str
                      ) -> tuple[str, BatchEncoder]:
        """Prepare the first candidate that loads; a fallback's cause joins ``reason``."""
        *faster, last = candidates
        for candidate in faster:
            try:
                return candidate, _encoder(candidate, sentence_model, model_dir, cache_dir,
                                           settings, openvino_device, self._max_streams)
            except Exception as exc:  # conversion or compilation inside a third-party library
                logger.warning("embedding model %r: backend %r failed, trying the next one: %s",
                               model, candidate, exc)
                self.reason += f"; {candidate} failed to load: {exc}"
        try:
            return last, _encoder(last, sentence_model, model_dir, cache_dir, settings,
                                  openvino_device, self._max_streams)
        except Exception as exc:
            raise EmbeddingModelError(
                f"embedding model {model!r}: backend {last!r} failed: {exc}"
            ) from exc

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed chunks: shape (len(texts), dimension), rows in input order, unit length."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one text")
        return self._embed(list(texts), self._document_prompt)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query (cut at max_tokens, as the model reads no further)."""
        return self._embed([text], self._query_prompt)[0]

    def _embed(self, texts: list[str], prompt: str) -> np.ndarray:
        embeddings = np.empty((len(texts), self.dimension), dtype=np.float32)
        # Batching texts of similar length wastes the least work on padding.
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        batches = [order[start:start + self.batch_size]
                   for start in range(0, len(order), self.batch_size)]
        encoded = self._encode_batches([[texts[index] for index in batch] for batch in batches],
                                       prompt)
        for batch, vectors in zip(batches, encoded, strict=True):
            embeddings[batch] = vectors
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        return embeddings / np.maximum(norms, np.finfo(np.float32).tiny)


def _openvino_device(choice: BackendChoice) -> str:
    """The device as OpenVINO names it: ``CPU``, or the GPU found (``GPU.1``)."""
    return choice.device if choice.accelerator else "CPU"


def _converted(model: str, model_dir: Path, cache_dir: Path, choice: BackendChoice,
               max_streams: int | None) -> tuple[BatchEncoder, Settings] | None:
    """The OpenVINO model an earlier process converted and left its tokenizer beside, ready
    without loading torch; None when there is none or it fails to compile."""
    try:
        return converted_encoder(model_dir, cache_dir, choice.precision,
                                 _openvino_device(choice), max_streams)
    except Exception as exc:  # compiling inside OpenVINO: load the model as usual instead
        logger.warning("embedding model %r: the converted OpenVINO model could not be used, "
                       "loading the model: %s", model, exc)
        return None


def first_prompt(prompts: dict[str, str], names: Sequence[str]) -> str:
    """The model's own prompt for this kind of text, as sentence-transformers would pick it."""
    return next((prompts[name] for name in names if name in prompts), "")


def _unused_loss_warning(record: logging.LogRecord) -> bool:
    """Drops transformers' "`loss_type=None` was set in the config" warning: it concerns
    training losses, which embedding never uses, yet came on every run."""
    return not str(record.msg).startswith("`loss_type=")


def _load_sentence_model(model: str, model_dir: Path, device: str):
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # a bar per load is noise in CLI and logs
    transformers_logging.get_logger("transformers.modeling_utils").addFilter(
        _unused_loss_warning)
    try:
        return SentenceTransformer(str(model_dir), device=device, local_files_only=True)
    except Exception as exc:  # any failure inside the library means the same to the user
        raise EmbeddingModelError(
            f"embedding model {model!r} could not be loaded from {model_dir}: {exc}"
        ) from exc


def _encoder(backend: str, sentence_model, model_dir: Path, cache_dir: Path,
             settings: Settings | None, openvino_device: str, max_streams: int | None
             ) -> BatchEncoder:
    if backend in OPENVINO_BACKENDS:
        return sentence_model_encoder(sentence_model, model_dir, cache_dir, settings,
                                      PRECISIONS[backend], openvino_device, max_streams)
    return _torch_encoder(sentence_model, backend)


def _torch_encoder(sentence_model, backend: str) -> BatchEncoder:
    import torch

    half = {TORCH_BF16: torch.bfloat16, TORCH_FP16: torch.float16}.get(backend)
    if half is not None:
        sentence_model.to(half)

    def encode(batches: list[list[str]], prompt: str) -> list[np.ndarray]:
        return [sentence_model.encode(texts, prompt=prompt, batch_size=len(texts),
                                      convert_to_tensor=True, show_progress_bar=False,
                                      ).float().cpu().numpy()
                for texts in batches]

    return encode
