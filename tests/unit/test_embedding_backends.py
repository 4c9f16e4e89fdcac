"""Which embedding backend auto takes on which CPU, and that a changed precision is a changed
model: a new vector collection, a new embedding cache, every source run again. The CPU's
bf16 flags are forced on and off, so both machines are tested on any one."""

import pytest

from jarvis_core import embedding_backends as backends
from jarvis_core.embedding_backends import (
    AUTO,
    OPENVINO,
    OPENVINO_BF16,
    TORCH_BF16,
    TORCH_FP32,
    choose_backend,
    query_backend,
)
from jarvis_core.pending import settings_fingerprint
from jarvis_core.text.embedding_cache import cache_file
from jarvis_resources import build_resources
from tests.pipeline_helpers import write_config


@pytest.fixture
def native_bf16(monkeypatch):
    """Sets whether the CPU reports native bf16: ``native_bf16(True)`` or ``(False)``."""
    def force(native: bool) -> None:
        monkeypatch.setattr(backends, "cpu_bf16_flags",
                            lambda: ["amx_bf16", "avx512_bf16"] if native else [])
    return force


def test_where_the_cpu_computes_bf16_natively_auto_takes_openvino_bf16(native_bf16):
    native_bf16(True)
    choice = choose_backend(AUTO)
    assert (choice.backend, choice.precision) == (OPENVINO_BF16, "bf16")
    assert "natively (amx_bf16, avx512_bf16)" in choice.reason


def test_without_native_bf16_auto_takes_float32_and_says_why(native_bf16):
    native_bf16(False)
    choice = choose_backend(AUTO)
    assert (choice.backend, choice.precision) == (OPENVINO, "f32")
    assert "not openvino-bf16: this CPU has no native bf16" in choice.reason


def test_without_openvino_auto_takes_torch_float32_and_says_why(native_bf16, monkeypatch):
    native_bf16(True)
    monkeypatch.setattr(backends, "find_spec", lambda name: None)
    choice = choose_backend(AUTO)
    assert (choice.backend, choice.precision) == (TORCH_FP32, "f32")
    assert "not openvino: the openvino package is not installed" in choice.reason


def test_queries_are_encoded_by_the_float32_twin_of_a_bf16_backend(native_bf16):
    """Without an exported query model, queries are float32 as the exported model's are."""
    native_bf16(True)
    assert (query_backend(AUTO), query_backend(TORCH_BF16)) == (OPENVINO, TORCH_FP32)
    assert query_backend(OPENVINO) == OPENVINO


def test_a_pinned_backend_is_taken_as_it_is(native_bf16):
    native_bf16(True)
    assert choose_backend(OPENVINO).as_dict() == {
        "backend": OPENVINO, "precision": "f32", "device": "cpu",
        "reason": "pinned in the configuration; on the CPU, as asked"}


def test_a_changed_precision_is_a_new_collection_cache_and_run(tmp_path, native_bf16):
    """The same configuration (auto) on a CPU with and one without native bf16: the vectors
    go to separate collections and caches, and every source runs again."""
    config = write_config(tmp_path / "project", {"notes": tmp_path / "vault"})
    seen = {}
    for native in (True, False):
        native_bf16(native)
        resources = build_resources(str(config.config_path))
        embedder = resources["embedder"]
        seen[native] = (resources["vectors"].collection,
                        cache_file(config.cache_dir, config.embedding.model,
                                   embedder.choice.precision),
                        settings_fingerprint(config))
    assert seen[True][0] == "chunks__sentence-transformers_all-minilm-l6-v2__384__bf16"
    assert seen[False][0] == "chunks__sentence-transformers_all-minilm-l6-v2__384"
    assert all(bf16 != f32 for bf16, f32 in zip(seen[True], seen[False], strict=True))
