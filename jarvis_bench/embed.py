"""``jarvis bench embed``: speed and fidelity of each embedding backend on this machine.

Speed is chunks per second on deterministic English-like chunks of 190-220 model tokens (the
size the chunker makes), after one warm-up batch, median of ``repeats`` runs (three), with
the cores the process kept busy and the share of the CPU's measured matmul peak that is
(jarvis_bench/embed_tuning.py, with the OpenVINO hints, streams and batch sizes compared).
Fidelity is measured against torch-fp32, the reference: the cosine between each chunk's two
embeddings, and how many of each chunk's ten nearest neighbours stay the same (what search
results would see). With a BEIR dataset (SciFact), retrieval quality too: the quality gate
``auto`` is held to (jarvis_bench/embed_quality.py).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from pathlib import Path

import numpy as np

from jarvis_bench.embed_quality import scifact_quality
from jarvis_bench.embed_tuning import flops_per_chunk, matmul_peak, openvino_settings
from jarvis_core.config import JarvisConfig
from jarvis_core.embedding_backends import (
    AUTO,
    BACKENDS,
    OPENVINO,
    OPENVINO_BACKENDS,
    TORCH_FP32,
    backend_problem,
    choose_backend,
    cpu_bf16_flags,
)
from jarvis_core.embedding_devices import user_cache_dir
from jarvis_core.text.embedder import Embedder
from jarvis_core.text.embedding_cache import CachedEmbedder, cache_file
from jarvis_core.text.tokens import token_counter

REFERENCE_BACKEND = TORCH_FP32
COSINE_BAR = 0.999
MIN_CHUNK_TOKENS = 190
MAX_CHUNK_TOKENS = 220
REPEATS = 3
NEIGHBOURS = 10
SEED = 1234

_FUNCTION_WORDS = (
    "the the the a a of of to to and and in in for with on is is was that this we it be by "
    "as from at not but or are will should our their after before when"
).split()
_CONTENT_WORDS = (
    "meeting release service database query team customer deadline budget design review note "
    "project roadmap incident latency cache index schema migration backup server client "
    "feature bug test deployment pipeline report metric document decision owner risk estimate "
    "sprint ticket vault graph search embedding model storage network request response error "
    "retry timeout config version branch commit merge issue plan goal week quarter user account "
    "invoice payment contract vendor hiring onboarding support question answer idea draft "
    "summary agenda action follow-up dashboard alert log trace API endpoint workflow task "
    "update changes slow fast stable new old critical minor important shared internal public "
    "discussed agreed decided moved fixed added removed blocked shipped tested reviewed "
    "measured improved reduced increased migrated scheduled documented assigned postponed"
).split()


def synthetic_chunks(model: str, n_chunks: int, seed: int = SEED) -> list[str]:
    """Deterministic English-like chunks of 190-220 tokens of ``model`` (specials included)."""
    counter = token_counter(model)
    specials = counter.count([""])[0]
    rng = random.Random(seed)
    chunks = []
    for _ in range(n_chunks):
        sentences, tokens = [], specials
        while True:  # sentences of at most ~25 tokens stop it within 30 tokens of the limit
            # A chunk's tokens are its sentences' (without specials) plus the specials once:
            # exact where words are tokenized apart, as WordPiece does; the whole chunk is
            # counted below. Counting each candidate whole was quadratic (1.6 s for 356 chunks).
            following = sentence(rng)
            tokens += counter.count([following])[0] - specials
            if tokens > MAX_CHUNK_TOKENS:
                break
            sentences.append(following)
        while len(sentences) > 1 and counter.count([" ".join(sentences)])[0] > MAX_CHUNK_TOKENS:
            sentences.pop()  # a tokenizer that merges across spaces
        chunks.append(" ".join(sentences))
    counts = counter.count(chunks)
    if not all(MIN_CHUNK_TOKENS <= count <= MAX_CHUNK_TOKENS for count in counts):
        raise RuntimeError(f"synthetic chunks of {min(counts)}-{max(counts)} tokens, expected "
                           f"{MIN_CHUNK_TOKENS}-{MAX_CHUNK_TOKENS}")
    return chunks


def seed_vectors(embedder: Embedder, texts: list[str], cache_dir: Path | None) -> np.ndarray:
    """The vectors of the synthetic chunks the search benchmarks draw their corpus vectors
    around. They are the same texts on every run, so they go through the embedding cache:
    only a first run embeds them (what is timed is search, not this)."""
    if cache_dir is None:
        return embedder.embed(texts)
    cache = CachedEmbedder(cache_file(cache_dir, embedder.model, embedder.precision),
                           lambda: embedder)
    try:
        return cache.embed(texts)
    finally:
        cache.close()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(_FUNCTION_WORDS if rng.random() < 0.4 else _CONTENT_WORDS)
             for _ in range(rng.randint(6, 16))]
    if len(words) > 9 and rng.random() < 0.3:
        words[rng.randint(3, len(words) - 3)] += ","
    return " ".join(words).capitalize() + "."


def run_embed_benchmark(
    model: str, n_chunks: int = 256, batch_size: int = 32, cache_dir: Path | None = None,
    *, repeats: int = REPEATS, tuning: bool = True, scifact: Path | None = None,
    config: JarvisConfig | None = None, scifact_backends: tuple[str, ...] = BACKENDS,
) -> dict:
    """Measure every embedding backend, and the one ``auto`` picks, on ``n_chunks`` chunks;
    with ``tuning``, the share of peak and OpenVINO's settings; with ``scifact`` (a BEIR
    dataset, chunked as ``config`` says), the quality gate of ``scifact_backends`` (float32
    OpenVINO, the reference, always)."""
    if n_chunks <= NEIGHBOURS:
        raise ValueError(f"n_chunks must exceed {NEIGHBOURS} to compare nearest neighbours")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if scifact is not None and config is None:
        raise ValueError("scifact needs the configuration its corpus is chunked with")
    chunks = synthetic_chunks(model, n_chunks)
    token_counts = token_counter(model).count(chunks)
    unavailable = {backend: {"available": False, "reason": problem}
                   for backend in BACKENDS if (problem := backend_problem(backend))}
    embedders = {backend: Embedder(model, backend=backend, batch_size=batch_size,
                                   cache_dir=cache_dir)
                 for backend in (*BACKENDS, AUTO) if backend not in unavailable}
    runs = _measure(embedders, chunks, batch_size, repeats)
    reference = runs[REFERENCE_BACKEND]["embeddings"]
    reports = {name: {"precision": embedders[name].precision, **_report(run, reference)}
               for name, run in runs.items()}
    backends = {backend: unavailable.get(backend) or reports[backend] for backend in BACKENDS}
    choice = choose_backend(AUTO)
    fastest = max((name for name, entry in backends.items() if entry.get("meets_cosine_bar")),
                  key=lambda name: backends[name]["chunks_per_s"])
    result = {
        "model": model,
        "n_chunks": n_chunks,
        "batch_size": batch_size,
        "repeats": repeats,
        "chunk_tokens": {"min": min(token_counts), "mean": round(statistics.mean(token_counts), 1),
                         "max": max(token_counts)},
        "machine": _machine(),
        "reference_backend": REFERENCE_BACKEND,
        "cosine_bar": COSINE_BAR,
        "backends": {**backends, AUTO: {"backend": embedders[AUTO].backend, **reports[AUTO]}},
        "default_backend": embedders[AUTO].backend,
        "auto_choice": choice.as_dict(),
        "fastest_backend": fastest,
        "default_vs_fastest": round(
            reports[AUTO]["chunks_per_s"] / backends[fastest]["chunks_per_s"], 3),
    }
    if tuning:
        result["peak"] = _share_of_peak(model, result["backends"],
                                        result["chunk_tokens"]["mean"])
        if choice.backend in OPENVINO_BACKENDS:
            result["openvino_settings"] = openvino_settings(
                model, cache_dir or user_cache_dir(), chunks, choice.precision)
    if scifact is not None:  # float32 OpenVINO is torch-fp32 within 1e-7 and 3x faster
        result["scifact"] = scifact_quality(
            scifact, config, {name: embedders[name] for name in BACKENDS if name in embedders
                              and (name in scifact_backends or name == OPENVINO)},
            OPENVINO if OPENVINO in embedders else REFERENCE_BACKEND)
    return result


def _share_of_peak(model: str, backends: dict, mean_tokens: float) -> dict:
    """The model's FLOPs per chunk, this CPU's matmul peak per precision, and each
    backend's achieved GFLOP/s as a share of the peak in its precision."""
    flops = flops_per_chunk(model, mean_tokens)
    measured = [entry for entry in backends.values() if entry.get("chunks_per_s")]
    peaks = {precision: matmul_peak(precision)
             for precision in sorted({entry["precision"] for entry in measured})}
    if flops is not None:
        for entry in measured:
            entry["gflops"] = round(entry["chunks_per_s"] * flops / 1e9, 1)
            entry["share_of_peak"] = round(entry["gflops"] / peaks[entry["precision"]], 3)
    return {"gflop_per_chunk": flops and round(flops / 1e9, 3),
            "matmul_peak_gflops": peaks}


def _measure(embedders: dict[str, Embedder], chunks: list[str], batch_size: int,
             repeats: int) -> dict:
    """Time each embedder over all chunks; the repeats take turns, so that a spell of other
    work on the machine slows every backend alike instead of one of them."""
    for embedder in embedders.values():
        embedder.embed(chunks[:batch_size])  # warm-up: first-call allocations, kernel choices
    runs = {name: {"seconds": [], "cpu_seconds": []} for name in embedders}
    for _ in range(repeats):
        for name, embedder in embedders.items():
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            runs[name]["embeddings"] = embedder.embed(chunks)
            runs[name]["seconds"].append(time.perf_counter() - wall_start)
            runs[name]["cpu_seconds"].append(time.process_time() - cpu_start)
    for run in runs.values():
        run["chunks_per_s"] = len(chunks) / statistics.median(run["seconds"])
        # Below the core count means other processes took CPU time from the measurement.
        run["cores_used"] = sum(run["cpu_seconds"]) / sum(run["seconds"])
    return runs


def _report(run: dict, reference: np.ndarray) -> dict:
    cosines = np.sum(run["embeddings"] * reference, axis=1)  # both are unit vectors
    return {
        "available": True,
        "chunks_per_s": round(run["chunks_per_s"], 2),
        "seconds": [round(value, 3) for value in run["seconds"]],
        "cores_used": round(run["cores_used"], 2),
        "mean_cosine": round(float(cosines.mean()), 7),
        "min_cosine": round(float(cosines.min()), 7),
        "top10_overlap": round(_neighbour_overlap(run["embeddings"], reference), 4),
        "meets_cosine_bar": bool(cosines.mean() >= COSINE_BAR),
    }


def _neighbour_overlap(embeddings: np.ndarray, reference: np.ndarray) -> float:
    """Mean share of each chunk's nearest neighbours under the reference that stay nearest."""
    ours, theirs = _nearest(embeddings), _nearest(reference)
    kept = [len(set(a) & set(b)) for a, b in zip(ours, theirs, strict=True)]
    return float(np.mean(kept)) / NEIGHBOURS


def _nearest(embeddings: np.ndarray) -> np.ndarray:
    similarities = embeddings @ embeddings.T
    np.fill_diagonal(similarities, -np.inf)  # a chunk is not its own neighbour
    return np.argsort(-similarities, axis=1, kind="stable")[:, :NEIGHBOURS]


def _machine() -> dict:
    import torch

    return {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "native_bf16_flags": cpu_bf16_flags()}
