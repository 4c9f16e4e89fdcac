"""How close the OpenVINO embedder comes to this CPU's limit, for ``jarvis bench embed``.

- The settings OpenVINO runs the converted model with: the LATENCY hint (one stream, every
  core on each batch: what the embedder uses) against THROUGHPUT (several streams, batches
  in flight at once through an asynchronous queue) and explicit stream counts, at several
  batch sizes; tokenization included, as the embedder does it.
- The share of the CPU's peak: the model's matrix-multiplication FLOPs per chunk (from its
  shape, at the chunks' mean length) times chunks/s, against this machine's measured
  matmul rate in the same precision (OpenVINO multiplying two 2048x2048 matrices).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

from jarvis_core.text.openvino_backend import MODEL_FILE, conversion_key, import_openvino
from jarvis_core.text.runtime_tokenizer import TOKENIZER_FILE, token_features
from jarvis_core.text.tokens import resolve_model_dir

# (hint, streams): None leaves the stream count to the hint.
SETTINGS = (("LATENCY", None), ("THROUGHPUT", None), ("THROUGHPUT", 1), ("THROUGHPUT", 2))
BATCH_SIZES = (16, 32, 64)
PEAK_SIZE = 2048
PEAK_SECONDS = 2.0


def openvino_settings(model: str, cache_dir: Path, chunks: list[str], precision: str
                      ) -> list[dict]:
    """chunks/s of the converted model (the embedder made it) per hint, streams and batch."""
    openvino = import_openvino()
    from tokenizers import Tokenizer

    target = cache_dir / "openvino" / conversion_key(resolve_model_dir(model))
    tokenizer = Tokenizer.from_file(str(target / TOKENIZER_FILE))
    core = openvino.Core()
    rows = []
    for hint, streams in SETTINGS:
        config = {"PERFORMANCE_HINT": hint, "INFERENCE_PRECISION_HINT": precision}
        if streams:
            config["NUM_STREAMS"] = str(streams)
        compiled = core.compile_model(target / MODEL_FILE, "CPU", config)
        inputs = [port.get_any_name() for port in compiled.inputs]
        requests = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
        for batch_size in BATCH_SIZES:
            batches = [chunks[start:start + batch_size]
                       for start in range(0, len(chunks), batch_size)]
            queue = openvino.AsyncInferQueue(compiled, requests)
            _run(queue, tokenizer, inputs, batches[:requests])  # warm-up
            started = time.perf_counter()
            _run(queue, tokenizer, inputs, batches)
            rows.append({"hint": hint, "streams": compiled.get_property("NUM_STREAMS"),
                         "requests": requests, "batch_size": batch_size,
                         "chunks_per_s": round(len(chunks) / (time.perf_counter() - started),
                                               1)})
    return rows


def _run(queue, tokenizer, inputs: list[str], batches: list[list[str]]) -> None:
    for batch in batches:
        queue.start_async(token_features(tokenizer, batch, inputs))
    queue.wait_all()


def matmul_peak(precision: str) -> float:
    """GFLOP/s of OpenVINO multiplying 2048x2048 matrices in ``precision`` on every core:
    what this CPU reaches on the operation the model spends its time in."""
    openvino = import_openvino()
    from openvino import opset13

    rng = np.random.default_rng(0)
    left = opset13.parameter([PEAK_SIZE, PEAK_SIZE], openvino.Type.f32)
    right = opset13.constant(rng.standard_normal((PEAK_SIZE, PEAK_SIZE), dtype=np.float32))
    model = openvino.Model([opset13.matmul(left, right, False, False)], [left])
    request = openvino.Core().compile_model(model, "CPU", {
        "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": precision,
    }).create_infer_request()
    data = rng.standard_normal((PEAK_SIZE, PEAK_SIZE), dtype=np.float32)
    request.infer([data])  # warm-up
    rates = []
    deadline = time.perf_counter() + PEAK_SECONDS
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        request.infer([data])
        rates.append(2 * PEAK_SIZE ** 3 / (time.perf_counter() - started) / 1e9)
    return round(statistics.median(rates), 1)


def flops_per_chunk(model: str, tokens: float) -> float | None:
    """Matrix-multiplication FLOPs of one chunk of ``tokens`` tokens through a BERT-shaped
    encoder (attention projections, attention scores and values, feed-forward), from the
    model's config.json; None when it has no such shape."""
    try:
        config = json.loads((resolve_model_dir(model) / "config.json").read_text())
        layers, hidden = config["num_hidden_layers"], config["hidden_size"]
        intermediate = config["intermediate_size"]
    except (OSError, ValueError, KeyError):
        return None
    per_layer = (2 * tokens * (4 * hidden * hidden + 2 * hidden * intermediate)
                 + 4 * tokens * tokens * hidden)
    return layers * per_layer
