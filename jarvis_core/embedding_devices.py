"""Which device embeds: the accelerators torch and OpenVINO see here, found without loading a
model, and the one ``embedding.device`` asks for.

Finding them must stay cheap, because the refresh decides the vectors' precision (and so
their collection) in every process, a no-op refresh included: a library is asked only where a
driver for its kind of GPU is present (an NVIDIA or ROCm driver for torch's CUDA, an Intel
render node for OpenVINO's GPU plugin), so a machine without one imports neither torch nor
OpenVINO to learn it (about 40 microseconds, against 1.4 s to import torch and 0.23 s to
import OpenVINO and list its devices). The query side never asks: it encodes queries on the
CPU.

``choose_device`` is a pure function of what ``discover`` found, so the choice is tested on
a machine without a GPU.
"""

from __future__ import annotations

import functools
import glob
import re
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

AUTO = "auto"
CPU = "cpu"
CUDA = "cuda"  # torch's name, ``cuda`` or ``cuda:<index>``
OPENVINO_GPU = "GPU"  # OpenVINO's name, ``GPU`` or ``GPU.<index>``
# What ``embedding.device`` takes; whether the device exists is known only at run time.
DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?|GPU(\.\d+)?")
CPU_BATCH_SIZE = 32
# A GPU's default batch: 16 texts per GiB of its memory, rounded down to a power of two,
# within these bounds (64 at 4 GiB, 128 at 8, 256 at 16, 512 from 32 GiB): sized for a
# sentence-transformers model of up to 512 tokens in half precision, not measured here.
GPU_BATCH_BOUNDS = (64, 512)
GPU_BATCH_PER_GIB = 16
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")
ROCM_DRIVER = Path("/dev/kfd")
INTEL_VENDOR = "0x8086"


class DeviceError(ValueError):
    """``embedding.device`` names a device that is not here."""


@dataclass(frozen=True)
class Accelerator:
    """A GPU a library can embed on, named as that library and ``embedding.device`` name
    it (``cuda:0``, ``GPU.1``)."""

    device: str
    name: str
    memory_bytes: int | None = None

    @property
    def kind(self) -> str:
        return CUDA if self.device.startswith(CUDA) else OPENVINO_GPU

    @property
    def batch_size(self) -> int:
        """The default batch on this device, from its memory (the smallest when unknown)."""
        low, high = GPU_BATCH_BOUNDS
        if not self.memory_bytes:
            return low
        texts = int(GPU_BATCH_PER_GIB * self.memory_bytes / 2**30)
        return max(low, min(high, 2 ** texts.bit_length() // 2))  # a power of two <= texts

    def describe(self) -> str:
        memory = f", {self.memory_bytes / 2**30:.0f} GiB" if self.memory_bytes else ""
        return f"{self.device} ({self.name}{memory})"


@dataclass(frozen=True)
class Discovery:
    """The accelerators found, best first (CUDA devices in torch's order, then OpenVINO's
    discrete GPUs, then its integrated ones), and why each library offered none."""

    accelerators: tuple[Accelerator, ...] = ()
    notes: tuple[str, ...] = ()

    def find(self, device: str) -> Accelerator | None:
        """The accelerator ``device`` names: exactly, or the first of its kind for a bare
        ``cuda`` or ``GPU``."""
        return next((found for found in self.accelerators
                     if found.device == device or device == found.kind), None)

    def describe(self) -> str:
        found = [accelerator.describe() for accelerator in self.accelerators]
        return "; ".join([*found, *self.notes]) or "no accelerator"


def valid_device(device: str) -> str:
    """``device`` when ``embedding.device`` can take it, else ValueError naming the forms."""
    if not DEVICE_PATTERN.fullmatch(device):
        raise ValueError(f"{device!r} is not a device: use auto, cpu, cuda, cuda:<index> "
                         "(torch) or GPU, GPU.<index> (OpenVINO)")
    return device


def choose_device(requested: str, discovery: Discovery,
                  kinds: tuple[str, ...] = (CUDA, OPENVINO_GPU)) -> Accelerator | None:
    """The accelerator to embed on, or None for the CPU: for ``auto`` the first one found of
    ``kinds`` (those the backend runs on); a named one must have been found, else
    DeviceError naming the setting and what was found."""
    if requested == CPU:
        return None
    if requested == AUTO:
        return next((found for found in discovery.accelerators if found.kind in kinds), None)
    accelerator = discovery.find(valid_device(requested))
    if accelerator is None:
        raise DeviceError(f"embedding.device: {requested!r} is not a device here "
                          f"(found: {discovery.describe()}); use auto or cpu")
    return accelerator


@functools.lru_cache(maxsize=1)
def discover() -> Discovery:
    """The accelerators torch and OpenVINO see here, once per process."""
    cuda, cuda_note = _cuda_devices()
    gpus, gpu_note = _openvino_gpus()
    return Discovery(accelerators=(*cuda, *gpus),
                     notes=tuple(note for note in (cuda_note, gpu_note) if note))


def _cuda_devices() -> tuple[list[Accelerator], str | None]:
    """CUDA devices as torch sees them (ROCm's too: torch names them cuda), asked only where
    a GPU driver is present and torch is a build that could use it."""
    if not (NVIDIA_DRIVER.exists() or ROCM_DRIVER.exists() or sys.platform == "win32"):
        return [], "CUDA: no NVIDIA or ROCm driver"
    if find_spec("torch") is None:
        return [], "CUDA: torch is not installed"
    from importlib.metadata import PackageNotFoundError, version  # 23 ms: only here

    try:
        build = version("torch")
    except PackageNotFoundError:
        build = ""
    if build.endswith("+cpu"):
        return [], f"CUDA: torch {build} is a CPU-only build"
    try:
        import torch

        if not torch.cuda.is_available():
            return [], f"CUDA: torch {torch.__version__} sees no CUDA device"
        return [Accelerator(f"{CUDA}:{index}", properties.name, properties.total_memory)
                for index in range(torch.cuda.device_count())
                for properties in (torch.cuda.get_device_properties(index),)], None
    except Exception as exc:  # a driver and torch that do not agree: embed on the CPU
        return [], f"CUDA: torch failed to list devices: {exc}"


def _openvino_gpus() -> tuple[list[Accelerator], str | None]:
    """Intel GPUs as OpenVINO's GPU plugin sees them, asked only where an Intel render node
    is present (OpenVINO's GPU plugin drives Intel GPUs only)."""
    intel = any(Path(vendor).read_text().strip() == INTEL_VENDOR
                for vendor in glob.glob("/sys/class/drm/renderD*/device/vendor"))
    if not (intel or sys.platform == "win32"):
        return [], "OpenVINO GPU: no Intel GPU render node"
    if find_spec("openvino") is None:
        return [], "OpenVINO GPU: the openvino package is not installed"
    try:
        core = import_openvino().Core()
        gpus = [(core.get_property(device, "DEVICE_TYPE"),
                 Accelerator(device, core.get_property(device, "FULL_DEVICE_NAME"),
                             core.get_property(device, "GPU_DEVICE_TOTAL_MEM_SIZE")))
                for device in core.available_devices if device.startswith(OPENVINO_GPU)]
    except Exception as exc:  # the GPU plugin or its driver failed: embed on the CPU
        return [], f"OpenVINO GPU: listing devices failed: {exc}"
    if not gpus:
        return [], "OpenVINO GPU: OpenVINO sees no GPU"
    discrete_first = sorted(gpus, key=lambda gpu: "DISCRETE" not in str(gpu[0]))
    return [accelerator for _, accelerator in discrete_first], None


def import_openvino():
    """OpenVINO's model converter sends usage telemetry unless the user opted out; Jarvis
    promises that nothing leaves the machine, so the telemetry module is made unimportable,
    which OpenVINO handles by using its built-in stub."""
    sys.modules.setdefault("openvino_telemetry", None)
    import openvino

    return openvino
