"""Export a sentence-transformers model once, so that queries are encoded without torch.

The whole sentence pipeline (transformer, pooling, any dense layers, normalisation) becomes
one ONNX graph that returns the sentence embedding, next to the model's fast tokenizer set
up with the model's own truncation and padding, its query prompt and a manifest. The
directory is all that ``jarvis_core.text.query_encoder.QueryEncoder`` needs (onnxruntime and
tokenizers, no torch). An export is kept only after it has been checked against the model
itself: identical token ids and a cosine of at least ``MIN_COSINE`` on probe texts.

Exporting imports torch and sentence-transformers (it runs where the vectors are made);
checking whether ``dest`` already holds the export of an unchanged model imports neither.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np

from jarvis_core.stores.locks import shared_work_turn
from jarvis_core.text.embedder import QUERY_PROMPT_NAMES, first_prompt
from jarvis_core.text.query_encoder import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    MODEL_FILE,
    OUTPUT_NAME,
    QueryEncoder,
)
from jarvis_core.text.runtime_tokenizer import (
    TOKENIZER_FILE,
    TokenizerUnsupported,
    check_tokenizable,
    differing_feature,
    probe_batches,
    runtime_tokenizer,
)
from jarvis_core.text.sentence_pipeline import sentence_pipeline
from jarvis_core.text.tokens import cache_key, model_file_stats, resolve_model_dir

logger = logging.getLogger(__name__)

# A query vector must point where the model's own would, far within what changes a ranking.
MIN_COSINE = 0.99999
# As long as an export can take on a slow machine: a process waiting for another's export
# then exports itself.
EXPORT_WAIT = 600.0
OPSET = 18
# The weights sit beside the graph: onnxruntime maps them instead of parsing them out of the
# protobuf (session load 0.16 -> 0.07 s CPU for all-MiniLM-L6-v2), and no 2 GiB limit.
WEIGHTS_FILE = "model.onnx.data"
# Versions that change what an export holds; a new one gives a new cache key.
EXPORT_PACKAGES = ("torch", "transformers", "sentence-transformers", "onnx", "onnxscript",
                   "onnxruntime", "tokenizers")
TORCHSCRIPT = "torchscript"
DYNAMO = "dynamo"


class ExportError(RuntimeError):
    """The model cannot be exported for the light query path (the reason is in the message);
    queries then need the full embedder."""


@dataclass(frozen=True)
class ExportResult:
    directory: Path
    model: str
    key: str  # from the model's files and the exporter versions: equal keys, equal exports
    dimension: int
    max_seq_length: int
    exporter: str  # TORCHSCRIPT or DYNAMO
    reused: bool  # True when ``directory`` already held this export and nothing was done
    seconds: float
    size_bytes: int


def export_query_model(model: str | Path, dest: Path) -> ExportResult:
    """Export ``model`` (a name, a Hugging Face id in the local cache, or a directory) into
    ``dest``, unless ``dest`` already holds the export of the same model files made with the
    same library versions. ``dest`` is replaced atomically, never left half-written.

    Raises ExportError with the reason when the model cannot be exported (queries then need
    the full embedder), and ModelNotFoundError when it is not on this machine at all."""
    started = time.perf_counter()
    name = str(model)
    model_dir = resolve_model_dir(name)
    dest = Path(dest)
    key, signature = _current_key(dest, name, model_dir)
    manifest = _manifest_if_current(dest, key)
    reused = manifest is not None
    if manifest is None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with shared_work_turn(dest, f"the export of {name}", EXPORT_WAIT):
            manifest = _manifest_if_current(dest, key)  # exported by the holder waited for
            reused = manifest is not None
            if manifest is None:
                manifest = _export_into(dest, name, model_dir, key, signature)
                logger.info("query model %r exported with the %s exporter into %s in %.1f s",
                            name, manifest["exporter"]["method"], dest,
                            time.perf_counter() - started)
    if reused and manifest.get("source_signature") != signature:  # of an older Jarvis
        _record_signature(dest, manifest, signature)
    return ExportResult(
        directory=dest, model=name, key=key, dimension=manifest["dimension"],
        max_seq_length=manifest["max_seq_length"], exporter=manifest["exporter"]["method"],
        reused=reused, seconds=time.perf_counter() - started,
        size_bytes=sum(entry["bytes"] for entry in manifest["files"].values()),
    )


def _export_into(dest: Path, model: str, model_dir: Path, key: str, signature: str) -> dict:
    """Export into a staging folder beside ``dest``, then put it in ``dest``'s place."""
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.exporting-", dir=dest.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the published copy from other users
    try:
        manifest = _export(model, model_dir, key, signature, staging)
        _replace_directory(staging, dest, key)
        return manifest
    except ExportError:
        raise
    except Exception as exc:  # torch, sentence-transformers, onnx or the disk: no export
        raise ExportError(f"model {model!r} could not be exported into {dest}: "
                          f"{type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def export_key(model: str, model_dir: Path) -> str:
    """Names the export of ``model`` as it is on disk: the content of every file of the
    model (hidden ones, such as download metadata, aside) and the exporting libraries."""
    digest = _versions_digest(model)
    for relative, path in _model_files(model_dir):
        digest.update(f"\0{relative}\0{_file_sha256(path)}".encode())
    return cache_key(Path(model).name, digest)


def _current_key(dest: Path, model: str, model_dir: Path) -> tuple[str, str]:
    """``export_key`` and the signature of the files it was computed from (names, sizes and
    modification times): read back from ``dest``'s manifest while the signature is the
    same, as hashing the weights (90 MB for all-MiniLM-L6-v2) costs 0.2 s per publish."""
    digest = _versions_digest(model)
    digest.update(json.dumps(model_file_stats(model_dir)).encode())
    signature = digest.hexdigest()
    try:
        manifest = json.loads((dest / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        manifest = None
    if (isinstance(manifest, dict) and manifest.get("source_signature") == signature
            and isinstance(manifest.get("key"), str)):
        return manifest["key"], signature
    return export_key(model, model_dir), signature


def _versions_digest(model: str):
    digest = hashlib.sha256(f"jarvis-query-model-{FORMAT_VERSION}\0{model}".encode())
    for package in EXPORT_PACKAGES:
        digest.update(f"\0{package}={_installed_version(package)}".encode())
    return digest


def _model_files(model_dir: Path) -> list[tuple[str, Path]]:
    """The model's files by relative path, hidden ones (download metadata) aside."""
    return [(path.relative_to(model_dir).as_posix(), path)
            for path in sorted(model_dir.rglob("*"))
            if path.is_file() and not any(part.startswith(".")
                                          for part in path.relative_to(model_dir).parts)]


def _installed_version(package: str) -> str:
    try:
        return package_version(package)
    except PackageNotFoundError:
        return "absent"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _manifest_if_current(dest: Path, key: str) -> dict | None:
    """The manifest of ``dest`` when it is a complete export with ``key``, else None."""
    try:
        manifest = json.loads((dest / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("key") != key or manifest.get("format") != FORMAT_VERSION:
        return None
    for file_name, entry in manifest.get("files", {}).items():
        path = dest / file_name
        if not path.is_file() or path.stat().st_size != entry["bytes"]:
            return None
    return manifest


def _record_signature(dest: Path, manifest: dict, signature: str) -> None:
    """Note the files' signature in the manifest, so the next publish need not hash them.
    A new file, not a rewrite: published versions hard-link the old one."""
    staged = dest / f".{MANIFEST_NAME}.{os.getpid()}"
    try:
        staged.write_text(json.dumps(manifest | {"source_signature": signature}, indent=2,
                                     sort_keys=True) + "\n")
        os.replace(staged, dest / MANIFEST_NAME)
    except OSError as exc:  # a read-only cache: hashed again next time
        logger.debug("could not note the model files' signature in %s: %s", dest, exc)
        staged.unlink(missing_ok=True)


def _replace_directory(staging: Path, dest: Path, key: str) -> None:
    """Put the finished export in place of whatever ``dest`` held."""
    if dest.exists():
        retired = Path(tempfile.mkdtemp(prefix=f".{dest.name}.retired-", dir=dest.parent))
        try:
            os.replace(dest, retired / dest.name)
        except FileNotFoundError:  # a concurrent export moved it first
            pass
        shutil.rmtree(retired, ignore_errors=True)
    try:
        os.replace(staging, dest)
    except OSError:
        if _manifest_if_current(dest, key) is None:  # else a concurrent export got there first
            raise


def _export(model: str, model_dir: Path, key: str, signature: str, target: Path) -> dict:
    sentence_model = _load_sentence_model(model, model_dir)
    query_prompt = first_prompt(sentence_model.prompts, QUERY_PROMPT_NAMES)
    max_seq_length = sentence_model.max_seq_length
    dimension = sentence_model.get_embedding_dimension()
    if not max_seq_length or not dimension:
        raise ExportError(f"model {model!r} reports no max_seq_length or no embedding dimension")
    try:
        check_tokenizable(sentence_model, [query_prompt])
        tokenizer = runtime_tokenizer(sentence_model, max_seq_length)
    except TokenizerUnsupported as exc:
        raise ExportError(f"model {model!r} {exc}") from exc
    tokenizer.save(str(target / TOKENIZER_FILE), pretty=False)

    problems = []
    for method in (TORCHSCRIPT, DYNAMO):
        try:
            _export_graph(method, sentence_model, target)
            _write_manifest(target, model, (key, signature), method, dimension, max_seq_length,
                            query_prompt)
            min_cosine = _check_against_model(model, sentence_model, query_prompt, target)
        except ExportError as exc:
            problems.append(f"{method} exporter: {exc}")
        except Exception as exc:  # any failure inside torch's exporters means the same here
            problems.append(f"{method} exporter: {type(exc).__name__}: {exc}")
        else:
            logger.info("query model %r: the %s export matches the model (min cosine %.7f)",
                        model, method, min_cosine)
            return json.loads((target / MANIFEST_NAME).read_text())
        for path in target.iterdir():
            if path.is_dir():
                shutil.rmtree(path)
            elif path.name != TOKENIZER_FILE:
                path.unlink()
    raise ExportError(f"model {model!r} could not be exported: " + "; ".join(problems))


def _load_sentence_model(model: str, model_dir: Path):
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    try:
        return SentenceTransformer(str(model_dir), device="cpu", local_files_only=True).eval()
    except Exception as exc:  # any failure inside the library means the same to the user
        raise ExportError(f"model {model!r} could not be loaded from {model_dir}: {exc}") from exc


def _export_graph(method: str, sentence_model, target: Path) -> None:
    """Write the graph from token features to the sentence embedding, for any batch size and
    sequence length, as MODEL_FILE with its weights in WEIGHTS_FILE."""
    import torch

    module, names, arguments = sentence_pipeline(sentence_model)
    scratch = target / "exporter-output"  # each exporter lays out large weights its own way
    scratch.mkdir()
    with torch.no_grad(), warnings.catch_warnings(), _quiet_logger("torch.onnx"):
        warnings.simplefilter("ignore")  # deprecation and tracer notes on frozen branches
        if method == TORCHSCRIPT:
            torch.onnx.export(
                module, arguments, str(scratch / MODEL_FILE), dynamo=False,
                input_names=names, output_names=[OUTPUT_NAME], opset_version=OPSET,
                dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in names},
                              OUTPUT_NAME: {0: "batch"}},
            )
        else:
            dynamic = {0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC}
            torch.onnx.export(
                module, arguments, str(scratch / MODEL_FILE), dynamo=True,
                verbose=False, input_names=names, output_names=[OUTPUT_NAME],
                opset_version=OPSET, dynamic_shapes={"tensors": tuple(dynamic for _ in names)},
                external_data=True,
            )
    _write_optimized(scratch / MODEL_FILE, target / MODEL_FILE)
    (target / WEIGHTS_FILE).chmod(0o644)  # written private
    shutil.rmtree(scratch)


def _write_optimized(exported: Path, dest: Path) -> None:
    """Save the graph as onnxruntime optimises it (operators fused, constants folded), so a
    query process loads it without optimising it again: session load 75 -> 11 ms with
    prepacking off. Only hardware-independent optimisations (EXTENDED) are saved."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(dest)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", WEIGHTS_FILE)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    options.log_severity_level = 3
    onnxruntime.InferenceSession(str(exported), options, providers=["CPUExecutionProvider"])


@contextmanager
def _quiet_logger(name: str):
    """Silence a library's warnings for a moment (the dynamo exporter lists the torchvision
    operators it skips on every export)."""
    library_logger = logging.getLogger(name)
    level = library_logger.level
    library_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        library_logger.setLevel(level)


def _write_manifest(target: Path, model: str, keys: tuple[str, str], method: str, dimension: int,
                    max_seq_length: int, query_prompt: str) -> None:
    files = {
        path.name: {"bytes": path.stat().st_size, "sha256": _file_sha256(path)}
        for path in sorted(target.iterdir()) if path.name != MANIFEST_NAME
    }
    manifest = {
        "format": FORMAT_VERSION,
        "model": model,
        "key": keys[0],
        "source_signature": keys[1],
        "dimension": dimension,
        "max_seq_length": max_seq_length,
        "query_prompt": query_prompt,
        "output": OUTPUT_NAME,
        "files": files,
        "exporter": {"method": method, "opset": OPSET,
                     **{package: _installed_version(package) for package in EXPORT_PACKAGES}},
    }
    (target / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _check_against_model(model: str, sentence_model, query_prompt: str, target: Path) -> float:
    """Load the export as queries will and compare it with the model itself: token features
    identical, and every vector within MIN_COSINE, one text at a time and batched."""
    import torch

    encoder = QueryEncoder.load(target)
    problem = differing_feature(encoder.tokenize, sentence_model, query_prompt,
                                encoder.max_seq_length)
    if problem:
        raise ExportError(problem)
    batches = probe_batches(encoder.max_seq_length)
    min_cosine = 1.0
    with torch.no_grad():
        for batch in batches:
            reference = sentence_model.encode(batch, prompt=query_prompt, batch_size=len(batch),
                                              convert_to_numpy=True, normalize_embeddings=True,
                                              show_progress_bar=False)
            cosines = np.sum(encoder.encode(batch) * reference, axis=1)
            min_cosine = min(min_cosine, float(cosines.min()))
    if not min_cosine >= MIN_COSINE:
        raise ExportError(f"the exported graph's vectors differ from the model's "
                          f"(min cosine {min_cosine:.6f} < {MIN_COSINE})")
    return min_cosine
