"""The query model a published version carries: the configured embedding model exported
once for ONNX Runtime, so query processes encode without torch. It computes in float32
whatever precision the chunks were embedded in: float32 queries against bf16 chunks rank
SciFact as well as bf16 queries do (docs/benchmarks.md, ``jarvis bench embed --scifact``).
When the model cannot be exported, versions carry none and queries load the full embedder;
the reason is returned to log. Publishing places the export in the version
(jarvis_core/stores/publish.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_core.settings import EmbeddingSettings
from jarvis_core.text.export import ExportError, export_query_model


def prepare_query_model(settings: EmbeddingSettings, cache_dir: Path
                        ) -> tuple[Path | None, str | None]:
    """(the exported query model's directory, None), or (None, why there is none)."""
    if settings.backend == HASHED_NGRAMS:
        return None, (f"the {HASHED_NGRAMS} backend stands in for the model: queries are "
                      "hashed as its chunks were")
    try:
        return export_query_model(settings.model, query_model_dir(settings, cache_dir)
                                  ).directory, None
    except ExportError as exc:
        return None, f"{exc}; queries use the full embedder"


def query_model_dir(settings: EmbeddingSettings, cache_dir: Path) -> Path:
    """Where the cache keeps the configured model's export."""
    return cache_dir / "query-model" / hashlib.sha256(settings.model.encode()).hexdigest()[:12]
