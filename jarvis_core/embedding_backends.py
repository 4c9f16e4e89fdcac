"""Which embedding backend runs here, and why: decided from the configuration and the CPU
alone, without loading a model, so that the vector collection, the embedding cache and the
published version know the precision of the vectors before any is made.

``auto`` takes the fastest backend that passed the quality gate: SciFact nDCG@10, dense and
hybrid, each within 0.003 of float32 (``jarvis bench embed --scifact`` measures it, see
docs/benchmarks.md). That is OpenVINO in bf16 where the CPU multiplies bf16 natively (AMX or
AVX512-BF16), else OpenVINO in float32, else torch in float32. Vectors of another precision
are another model's vectors: they live in their own collection and cache
(``collection_name``), so switching precision embeds again instead of mixing them.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

AUTO = "auto"
OPENVINO = "openvino"  # float32
OPENVINO_BF16 = "openvino-bf16"
TORCH_FP32 = "torch-fp32"
TORCH_BF16 = "torch-bf16"
F32 = "f32"
BF16 = "bf16"
MODEL_PRECISIONS = {OPENVINO: F32, OPENVINO_BF16: BF16, TORCH_FP32: F32, TORCH_BF16: BF16}
BACKENDS = tuple(MODEL_PRECISIONS)  # the model's
# Not the model: feature-hashed words for benchmarks at scale (jarvis_core/text/hashed_ngrams.py),
# never taken by auto. Its own "precision" keeps its vectors in their own collection and cache.
HASHED_NGRAMS = "hashed-ngrams"
PRECISIONS = {**MODEL_PRECISIONS, HASHED_NGRAMS: HASHED_NGRAMS}
OPENVINO_BACKENDS = (OPENVINO, OPENVINO_BF16)  # the precision is OpenVINO's inference hint
# What auto takes, fastest first, each of them through the quality gate. torch-bf16 passes
# it too but is slower than OpenVINO bf16, so it is only a fallback of the same precision.
AUTO_ORDER = (OPENVINO_BF16, OPENVINO, TORCH_FP32)
# When a backend fails to load, the next one of the same precision, so the vectors keep the
# precision their collection was chosen for.
FALLBACKS = {OPENVINO_BF16: (TORCH_BF16,), OPENVINO: (TORCH_FP32,)}
NATIVE_BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
# Queries are encoded in float32 whatever the chunks' precision (the published query model
# is float32; the gate measured no loss against a bf16 corpus): a bf16 backend's float32 twin.
FLOAT32_TWIN = {OPENVINO_BF16: OPENVINO, TORCH_BF16: TORCH_FP32}


@dataclass(frozen=True)
class BackendChoice:
    """The backend that will embed, the precision of its vectors, and why it was taken."""

    backend: str
    reason: str

    @property
    def precision(self) -> str:
        return PRECISIONS[self.backend]

    def as_dict(self) -> dict[str, str]:
        return {"backend": self.backend, "precision": self.precision, "reason": self.reason}


def cpu_bf16_flags() -> list[str]:
    """The CPU flags that say it computes bf16 natively (AMX or AVX512-BF16); elsewhere bf16
    is emulated and slower than float32. Empty where /proc/cpuinfo cannot be read."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = {flag for line in cpuinfo.splitlines() if line.startswith("flags")
             for flag in line.partition(":")[2].split()}
    return sorted(flags & NATIVE_BF16_CPU_FLAGS)


def cpu_has_native_bf16() -> bool:
    return bool(cpu_bf16_flags())


def backend_problem(backend: str, device: str = "cpu") -> str | None:
    """Why ``backend`` cannot run on ``device`` here, or None when it can."""
    if backend == HASHED_NGRAMS:  # numpy, whatever the device
        return None
    if backend not in BACKENDS:
        return f"unknown backend, choose one of: {', '.join((AUTO, *PRECISIONS))}"
    if backend == TORCH_FP32:
        return None
    if device != "cpu":
        return f"it runs on the CPU only, not on {device!r}"
    if PRECISIONS[backend] == BF16 and not cpu_has_native_bf16():
        return ("this CPU has no native bf16 (no AMX or AVX512-BF16 flag), so bf16 would be "
                "emulated, slower than float32")
    if backend in OPENVINO_BACKENDS and find_spec("openvino") is None:
        return "the openvino package is not installed"
    return None


def choose_backend(requested: str, device: str = "cpu") -> BackendChoice:
    """The backend for the configured ``requested`` one: itself when it can run here (an
    EmbeddingModelError-worthy problem is the caller's to raise), or for ``auto`` the first of
    AUTO_ORDER that can, with the reasons the faster ones were passed over."""
    if requested != AUTO:
        return BackendChoice(requested, "pinned in the configuration")
    passed_over = []
    *faster, last = AUTO_ORDER
    for backend in faster:
        problem = backend_problem(backend, device)
        if problem is None:
            return BackendChoice(backend, _auto_reason(backend, passed_over))
        passed_over.append(f"not {backend}: {problem}")
    return BackendChoice(last, _auto_reason(last, passed_over))  # torch-fp32 runs anywhere


def query_backend(requested: str, device: str = "cpu") -> str:
    """The backend that encodes queries when a version has no exported query model: the
    configured one's float32 twin, as the exported model would encode them."""
    backend = choose_backend(requested, device).backend
    return FLOAT32_TWIN.get(backend, backend)


def _auto_reason(backend: str, passed_over: list[str]) -> str:
    taken = (f"auto: the CPU computes bf16 natively ({', '.join(cpu_bf16_flags())})"
             if PRECISIONS[backend] == BF16 else f"auto: {backend}")
    return "; ".join([taken, *passed_over])
