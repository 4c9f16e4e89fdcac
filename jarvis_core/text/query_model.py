"""The query model a published version carries: the configured embedding model exported
once for ONNX Runtime, so query processes encode without torch. When the model cannot be
exported, or chunks are embedded in bf16 (queries in float32 would land about 1e-4 away),
versions carry none and queries load the full embedder; the reason is returned to log.
Publishing places the export in the version (jarvis_core/stores/publish.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from jarvis_core.settings import EmbeddingSettings
from jarvis_core.text.export import ExportError, export_query_model

FLOAT32_BACKENDS = ("auto", "openvino", "torch-fp32")  # auto chooses among float32 only


def prepare_query_model(settings: EmbeddingSettings, cache_dir: Path
                        ) -> tuple[Path | None, str | None]:
    """(the exported query model's directory, None), or (None, why there is none)."""
    if settings.backend not in FLOAT32_BACKENDS:
        return None, (f"chunks are embedded with {settings.backend}: queries use the full "
                      "embedder so they land on the same vectors")
    slot = hashlib.sha256(settings.model.encode()).hexdigest()[:12]
    try:
        return export_query_model(settings.model, cache_dir / "query-model" / slot).directory, None
    except ExportError as exc:
        return None, f"{exc}; queries use the full embedder"
