"""Which embedding backend runs here, on which device, and why: decided from the
configuration, the CPU and the GPUs found, without loading a model, so that the vector
collection, the embedding cache and the published version know the precision of the vectors
before any is made.

``auto`` takes the fastest backend that passed the quality gate: SciFact nDCG@10, dense and
hybrid, each within 0.003 of float32 (``jarvis bench embed --scifact`` measures it, see
docs/benchmarks.md). That is OpenVINO in bf16 where the CPU multiplies bf16 natively (AMX or
AVX512-BF16), else OpenVINO in float32, else torch in float32. Vectors of another precision
are another model's vectors: they live in their own collection and cache
(``collection_name``), so switching precision embeds again instead of mixing them.

Where a GPU is found (jarvis_core/embedding_devices.py) and ``embedding.device`` is ``auto``,
``auto`` embeds on it in half precision: torch in float16 on a CUDA device, OpenVINO in f16 on
an Intel GPU. On this model float16 keeps a mean cosine of 0.999999 (min 0.999998) to
float32 over 146 paragraphs of docs/, closer than bf16 (0.99995), which passed the gate
(measured with torch on the CPU, where float16 is emulated: 117 s against bf16's 11 s, so
never used there); its vectors fill their own collection like any other precision's.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from jarvis_core.embedding_devices import (
    CPU,
    CPU_BATCH_SIZE,
    CUDA,
    OPENVINO_GPU,
    Accelerator,
    Discovery,
    choose_device,
    device_kind,
    discover,
)

AUTO = "auto"
OPENVINO = "openvino"  # float32
OPENVINO_BF16 = "openvino-bf16"
TORCH_FP32 = "torch-fp32"
TORCH_BF16 = "torch-bf16"
TORCH_FP16 = "torch-fp16"  # on a CUDA device only
OPENVINO_F16 = "openvino-f16"  # on an Intel GPU only
F32 = "f32"
BF16 = "bf16"
F16 = "f16"
MODEL_PRECISIONS = {OPENVINO: F32, OPENVINO_BF16: BF16, TORCH_FP32: F32, TORCH_BF16: BF16,
                    TORCH_FP16: F16, OPENVINO_F16: F16}
BACKENDS = tuple(MODEL_PRECISIONS)  # the model's
# Not the model: feature-hashed words for benchmarks at scale (jarvis_core/text/hashed_ngrams.py),
# never taken by auto. Its own "precision" keeps its vectors in their own collection and cache.
HASHED_NGRAMS = "hashed-ngrams"
PRECISIONS = {**MODEL_PRECISIONS, HASHED_NGRAMS: HASHED_NGRAMS}
# the precision is OpenVINO's inference hint
OPENVINO_BACKENDS = (OPENVINO, OPENVINO_BF16, OPENVINO_F16)
# The kind of accelerator each backend can run on besides the CPU (and those it needs).
ACCELERATED = {TORCH_FP32: CUDA, TORCH_BF16: CUDA, TORCH_FP16: CUDA,
               OPENVINO: OPENVINO_GPU, OPENVINO_F16: OPENVINO_GPU}
ACCELERATOR_ONLY = frozenset({TORCH_FP16, OPENVINO_F16})
# What auto takes on an accelerator: the library that drives it, in half precision.
AUTO_ON_ACCELERATOR = {CUDA: TORCH_FP16, OPENVINO_GPU: OPENVINO_F16}
# What auto takes, fastest first, each of them through the quality gate. torch-bf16 passes
# it too but is slower than OpenVINO bf16, so it is only a fallback of the same precision.
AUTO_ORDER = (OPENVINO_BF16, OPENVINO, TORCH_FP32)
# When a backend fails to load, the next one of the same precision, so the vectors keep the
# precision their collection was chosen for.
FALLBACKS = {OPENVINO_BF16: (TORCH_BF16,), OPENVINO: (TORCH_FP32,)}
NATIVE_BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
# Queries are encoded in float32 whatever the chunks' precision (the published query model
# is float32; the gate measured no loss against a bf16 corpus): a bf16 backend's float32 twin.
FLOAT32_TWIN = {OPENVINO_BF16: OPENVINO, TORCH_BF16: TORCH_FP32, TORCH_FP16: TORCH_FP32,
                OPENVINO_F16: OPENVINO}


@dataclass(frozen=True)
class BackendChoice:
    """The backend that will embed, on which device (None: the CPU), the precision of its
    vectors, and why it was taken."""

    backend: str
    reason: str
    accelerator: Accelerator | None = None

    @property
    def precision(self) -> str:
        return PRECISIONS[self.backend]

    @property
    def device(self) -> str:
        """As torch or OpenVINO name it: ``cpu``, ``cuda:0``, ``GPU.1``."""
        return self.accelerator.device if self.accelerator else CPU

    @property
    def default_batch_size(self) -> int:
        """The batch when ``embedding.batch_size`` is not set: 32 on the CPU, larger on a
        GPU from its memory."""
        return self.accelerator.batch_size if self.accelerator else CPU_BATCH_SIZE

    def as_dict(self) -> dict[str, str]:
        return {"backend": self.backend, "precision": self.precision, "device": self.device,
                "reason": self.reason}


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


def backend_problem(backend: str, device: str = CPU) -> str | None:
    """Why ``backend`` cannot run on ``device`` (``cpu``, ``cuda:0``, ``GPU.1``) here, or
    None when it can."""
    if backend == HASHED_NGRAMS:  # numpy, whatever the device
        return None
    if backend not in BACKENDS:
        return f"unknown backend, choose one of: {', '.join((AUTO, *PRECISIONS))}"
    if device != CPU:
        return None if ACCELERATED.get(backend) == device_kind(device) else (
            f"it does not run on {device!r}, it {_runs_on(backend)}")
    if backend in ACCELERATOR_ONLY:
        return f"it {_runs_on(backend)}, and none was found or named in embedding.device"
    if backend == TORCH_FP32:
        return None
    if PRECISIONS[backend] == BF16 and not cpu_has_native_bf16():
        return ("this CPU has no native bf16 (no AMX or AVX512-BF16 flag), so bf16 would be "
                "emulated, slower than float32")
    if backend in OPENVINO_BACKENDS and find_spec("openvino") is None:
        return "the openvino package is not installed"
    return None


def choose_backend(requested: str, device: str = CPU,
                   discovery: Discovery | None = None) -> BackendChoice:
    """The backend for the configured ``requested`` one and the device it embeds on, for
    ``device`` (``embedding.device``) among the accelerators found here (``discovery``,
    found when not given and needed). A pinned backend is taken as it is (an
    EmbeddingModelError-worthy problem is the caller's to raise), on an accelerator it runs
    on when ``device`` is ``auto``; ``auto`` takes the accelerator's half-precision backend,
    or on the CPU the first of AUTO_ORDER that can run, with the reasons the faster ones were
    passed over. DeviceError when ``device`` names one that is not here."""
    if requested == AUTO:
        kinds = tuple(AUTO_ON_ACCELERATOR)
    else:
        kinds = (ACCELERATED[requested],) if requested in ACCELERATED else ()
    if device == AUTO and not kinds:  # a pinned backend that runs on the CPU only
        return BackendChoice(requested, f"pinned in the configuration; {_runs_on(requested)}")
    if discovery is None:
        discovery = discover() if device != CPU else Discovery()
    accelerator = choose_device(device, discovery, kinds)
    where = _device_reason(device, accelerator, discovery)
    if requested != AUTO:
        return BackendChoice(requested, f"pinned in the configuration; {where}", accelerator)
    if accelerator is not None:
        return BackendChoice(AUTO_ON_ACCELERATOR[accelerator.kind], f"auto: {where}",
                             accelerator)
    passed_over = []
    *faster, last = AUTO_ORDER
    for backend in faster:
        problem = backend_problem(backend)
        if problem is None:
            return BackendChoice(backend, _auto_reason(backend, passed_over, where))
        passed_over.append(f"not {backend}: {problem}")
    return BackendChoice(last, _auto_reason(last, passed_over, where))  # torch-fp32 runs anywhere


def query_backend(requested: str) -> str:
    """The backend that encodes queries when a version has no exported query model: the
    configured one's float32 twin, as the exported model would encode them, on the CPU (one
    query at a time gains nothing from a GPU, and finding one costs the query its time)."""
    backend = choose_backend(requested).backend
    return FLOAT32_TWIN.get(backend, backend)


def _runs_on(backend: str) -> str:
    places = {CUDA: "a CUDA device (cuda)", OPENVINO_GPU: "an Intel GPU (GPU)"}
    where = ([] if backend in ACCELERATOR_ONLY else ["the CPU"]) + (
        [places[ACCELERATED[backend]]] if backend in ACCELERATED else [])
    return f"runs on {' or '.join(where)} only"


def _device_reason(requested: str, accelerator: Accelerator | None,
                   discovery: Discovery) -> str:
    """Where the vectors are computed, and why there."""
    if accelerator is not None:
        how = "found by auto" if requested == AUTO else "named in embedding.device"
        return f"on {accelerator.describe()}, {how}"
    if requested == CPU:
        return "on the CPU, as asked"
    return f"on the CPU, no GPU found: {discovery.describe()}"


def _auto_reason(backend: str, passed_over: list[str], where: str) -> str:
    taken = (f"auto: the CPU computes bf16 natively ({', '.join(cpu_bf16_flags())})"
             if PRECISIONS[backend] == BF16 else f"auto: {backend}")
    return "; ".join([taken, *passed_over, where])
