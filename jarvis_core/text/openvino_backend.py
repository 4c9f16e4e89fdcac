"""The OpenVINO backend of the ``Embedder``: the whole sentence pipeline converted once to
OpenVINO IR and kept in the cache, keyed by the model's files and the converting libraries.

Beside the IR, the process that converts it (or first finds it without them) saves the
model's fast tokenizer, cutting and padding as sentence-transformers does, and the facts an
embedder needs (dimension, max_seq_length, prompts); only after checking that the tokenizer
gives the model's own token ids on probe texts with each prompt. A later process that finds
all three embeds without importing torch, transformers or sentence-transformers: about 5 s
of CPU less for every refresh that embeds anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np

from jarvis_core.embedding_devices import import_openvino
from jarvis_core.stores.locks import shared_work_turn
from jarvis_core.text.runtime_tokenizer import (
    TOKENIZER_FILE,
    TokenizerUnsupported,
    check_tokenizable,
    differing_feature,
    runtime_tokenizer,
    token_features,
)
from jarvis_core.text.sentence_pipeline import sentence_pipeline
from jarvis_core.text.tokens import cache_key, model_file_stats

logger = logging.getLogger(__name__)

MODEL_FILE = "model.xml"
# THROUGHPUT: OpenVINO sets the streams per machine (2 on 2 cores, each batch on one core).
# Measured on 2 shared cores, bf16, ~213-token chunks (`jarvis bench embed`, 2026-11-27):
# 27-30 chunks/s against 21-22 with LATENCY (one stream, both cores on each batch).
PERFORMANCE_HINT = "THROUGHPUT"
SETTINGS_FILE = "embedder.json"
# OpenVINO's cache of the model compiled for this machine, beside the IR it was compiled from.
COMPILED_DIR = "compiled"
SETTINGS_FORMAT = 1
# Loading torch and converting took 8-20 s of CPU here; a slow disk or machine takes longer.
CONVERSION_WAIT = 600.0

# Embeds batches of texts, each text prefixed with the prompt, into raw float32 vectors: one
# array per batch, in order. All batches at once, so a backend may keep several in flight.
BatchEncoder = Callable[[list[list[str]], str], list[np.ndarray]]


@dataclass(frozen=True)
class Settings:
    """What an embedder knows of its model without loading it."""

    dimension: int
    max_seq_length: int
    query_prompt: str
    document_prompt: str


def converted_encoder(model_dir: Path, cache_dir: Path, precision: str, device: str = "CPU",
                      max_streams: int | None = None) -> tuple[BatchEncoder, Settings] | None:
    """The converted model, compiled for OpenVINO's ``device`` to compute in ``precision``
    ("f32", "bf16", "f16"), with its saved tokenizer and settings; None when an earlier
    process did not leave all three (the caller then loads the model). ``max_streams``: see
    ``_encoder``."""
    target = _conversion_dir(model_dir, cache_dir)
    if not (target / MODEL_FILE).is_file():
        return None
    try:
        saved = json.loads((target / SETTINGS_FILE).read_text())
        if saved.pop("format") != SETTINGS_FORMAT:
            return None
        settings = Settings(**saved)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(target / TOKENIZER_FILE))
    except Exception:  # tokenizers raises its own exception type for a damaged file
        return None

    def tokenize(texts: list[str], prompt: str, inputs: list[str]) -> dict[str, np.ndarray]:
        return token_features(tokenizer, [prompt + text for text in texts], inputs)

    return _encoder(target / MODEL_FILE, tokenize, precision, device, max_streams)[0], settings


@contextlib.contextmanager
def conversion_turn(model_dir: Path, cache_dir: Path) -> Iterator[None]:
    """Held from looking for the converted model until it is converted, when it is not yet:
    processes that start together on a fresh cache (a first refresh of several sources at
    once, or a refresh and the preparation beside it) wait for the first one's conversion,
    then embed without torch, instead of each loading torch and converting (four runs at
    once spent 21 s of CPU more than one after another). Not held once the model is
    converted, nor where the cache is read-only."""
    if is_converted(model_dir, cache_dir):
        yield
        return
    with shared_work_turn(_conversion_dir(model_dir, cache_dir),
                          f"the conversion of {model_dir.name} to OpenVINO", CONVERSION_WAIT):
        yield


def is_converted(model_dir: Path, cache_dir: Path) -> bool:
    """Whether an earlier process left the converted model in the cache."""
    return (_conversion_dir(model_dir, cache_dir) / MODEL_FILE).is_file()


def sentence_model_encoder(sentence_model, model_dir: Path, cache_dir: Path,
                           settings: Settings | None, precision: str, device: str = "CPU",
                           max_streams: int | None = None) -> BatchEncoder:
    """The encoder for a loaded model, computing in ``precision`` on OpenVINO's ``device``:
    converted on first use (the IR is float32 whatever the precision), tokenized by the model
    itself; its tokenizer and ``settings`` saved for later processes when they can be (None:
    they cannot, the model's max_seq_length is unknown)."""
    model_file = _model_file(sentence_model, model_dir, cache_dir)

    def tokenize(texts: list[str], prompt: str, inputs: list[str]) -> dict[str, np.ndarray]:
        features = sentence_model.preprocess(texts, prompt=prompt)
        return {name: features[name].numpy() for name in inputs}

    encode, inputs = _encoder(model_file, tokenize, precision, device, max_streams)
    if settings is not None and not (model_file.parent / SETTINGS_FILE).is_file():
        _save_tokenizer(sentence_model, model_file.parent, settings, inputs)
    return encode


def _encoder(model_file: Path, tokenize, precision: str, device: str,
             max_streams: int | None) -> tuple[BatchEncoder, list[str]]:
    """The compiled model's encoder, and the features it is fed. The precision is always
    given: OpenVINO would otherwise pick bf16 on its own where the CPU has it. Batches go
    through an asynchronous queue of as many requests as the performance hint makes streams
    on this machine, at most ``max_streams`` (each holds its own buffers: about 150 MB at 32
    chunks a batch, measured), the next batch tokenized while the others compute."""
    openvino = import_openvino()
    hints = {"PERFORMANCE_HINT": PERFORMANCE_HINT, "INFERENCE_PRECISION_HINT": precision,
             **_compiled_cache(model_file)}
    if max_streams is not None:
        hints["PERFORMANCE_HINT_NUM_REQUESTS"] = str(max_streams)
    compiled = openvino.Core().compile_model(model_file, device, hints)
    inputs = [port.get_any_name() for port in compiled.inputs]
    queue = openvino.AsyncInferQueue(compiled,
                                     compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))

    def encode(batches: list[list[str]], prompt: str) -> list[np.ndarray]:
        outputs: list[np.ndarray] = [np.empty(0, np.float32)] * len(batches)

        def keep(request, index: int) -> None:  # the request's buffer is reused: copy it
            outputs[index] = request.get_output_tensor(0).data.copy()

        queue.set_callback(keep)
        for index, batch in enumerate(batches):
            queue.start_async(tokenize(batch, prompt, inputs), index)  # waits for a free one
        queue.wait_all()
        return outputs

    return encode, inputs


def _compiled_cache(model_file: Path) -> dict[str, str]:
    """OpenVINO's settings that keep the compiled model beside the IR: later processes
    import it instead of compiling it again (CPU, 2 cores: 0.42 -> 0.16 CPU-s, 0.3-0.46 ->
    0.11 s, for every process that embeds), in any precision. Kept without its weights,
    which stay in the IR (OPTIMIZE_SIZE: 0.4 MB against 87). OpenVINO compiles as before
    when it cannot write there, and again over a damaged entry; it refuses only a folder it
    cannot make, which is left out (a read-only cache)."""
    folder = model_file.parent / COMPILED_DIR
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return {}
    return {"CACHE_DIR": str(folder), "CACHE_MODE": "OPTIMIZE_SIZE"}


def _save_tokenizer(sentence_model, target: Path, settings: Settings, inputs: list[str]) -> None:
    """Save the tokenizer and settings beside the IR when the tokenizer feeds the model what
    sentence-transformers feeds it, for every prompt; else say why later processes keep
    loading the model."""
    prompts = sorted({settings.query_prompt, settings.document_prompt})
    try:
        check_tokenizable(sentence_model, prompts)
        tokenizer = runtime_tokenizer(sentence_model, settings.max_seq_length)
        for prompt in prompts:
            problem = differing_feature(
                lambda batch, prompt=prompt: token_features(
                    tokenizer, [prompt + text for text in batch], inputs),
                sentence_model, prompt, settings.max_seq_length)
            if problem:
                raise TokenizerUnsupported(problem)
    except TokenizerUnsupported as exc:
        logger.info("OpenVINO model in %s: the model %s, so every process loads it to "
                    "tokenize", target, exc)
        return
    staged = {name: target / f".{name}.{os.getpid()}" for name in (TOKENIZER_FILE, SETTINGS_FILE)}
    try:
        tokenizer.save(str(staged[TOKENIZER_FILE]), pretty=False)
        staged[SETTINGS_FILE].write_text(
            json.dumps({"format": SETTINGS_FORMAT, **settings.__dict__}))
        # The tokenizer first: readers take the settings file as the sign both are whole.
        for name in (TOKENIZER_FILE, SETTINGS_FILE):
            os.replace(staged[name], target / name)
    except OSError as exc:  # a read-only cache: later processes load the model, as before
        logger.info("OpenVINO model in %s: its tokenizer could not be saved: %s", target, exc)
    finally:
        for path in staged.values():
            path.unlink(missing_ok=True)


def _model_file(sentence_model, model_dir: Path, cache_dir: Path) -> Path:
    """The model as OpenVINO IR, converted from the local weights on first use and kept in
    the cache; a new model version or library version gets a new directory."""
    target = _conversion_dir(model_dir, cache_dir)
    model_file = target / MODEL_FILE
    if model_file.is_file():
        return model_file
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        import_openvino().save_model(
            _convert(sentence_model), staging / MODEL_FILE, compress_to_fp16=False
        )
        if target.is_dir():  # what is left of an entry whose model was deleted
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(staging, target)  # atomic, so readers never see a half-written model
        except OSError:
            if not model_file.is_file():  # else a concurrent conversion got there first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model_file


def _conversion_dir(model_dir: Path, cache_dir: Path) -> Path:
    """Where the converted model, its tokenizer and settings are kept in the cache."""
    return cache_dir / "openvino" / conversion_key(model_dir)


def conversion_key(model_dir: Path) -> str:
    digest = hashlib.sha256(str(model_dir).encode())
    for package in ("openvino", "torch", "transformers", "sentence-transformers"):
        digest.update(f"\0{package_version(package)}".encode())
    for relative, size, mtime_ns in model_file_stats(model_dir):
        digest.update(f"\0{relative}\0{size}\0{mtime_ns}".encode())
    return cache_key(model_dir.name, digest)


def _convert(sentence_model):
    """The whole sentence pipeline as IR that returns the sentence embedding directly."""
    import torch

    module, names, example = sentence_pipeline(sentence_model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python branches it froze
        converted = import_openvino().convert_model(
            module, example_input=example,
            input=[[-1, -1]] * len(names),  # any batch size and sequence length
        )
    for port, name in zip(converted.inputs, names, strict=True):
        port.get_tensor().set_names({name})  # fed by feature name at inference
    return converted
