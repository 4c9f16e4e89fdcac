"""Which device embeds: the accelerators torch and OpenVINO see here, found without loading a
model, and the one ``embedding.device`` asks for.

Finding them must stay cheap, because the refresh decides the vectors' precision (and so
their collection) in every process, a no-op refresh included: a library is asked only where a
driver for its kind of GPU is present (an NVIDIA or ROCm driver for torch's CUDA, an Intel
render node for OpenVINO's GPU plugin), so a machine without one imports neither torch nor
OpenVINO to learn it (0.2 ms, against 1.4 s to import torch and 0.23 s to import OpenVINO
and list its devices); where one is, the answer is kept per boot in the user's cache, so
only the first process after a boot or a driver or library change pays for asking. The query
side never asks: it encodes queries on the CPU.

``choose_device`` is a pure function of what ``discover`` found, so the choice is tested on
a machine without a GPU.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import sys
from dataclasses import asdict, dataclass
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
RENDER_NODE_VENDORS = "/sys/class/drm/renderD*/device/vendor"
INTEL_VENDOR = "0x8086"
NO_GPU_DRIVER = "no GPU driver (NVIDIA, ROCm) and no Intel GPU render node"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
VISIBLE_DEVICES_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES",
                       "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")
DISCOVERY_FILE = "devices.json"
LISTING_FAILED = "listing the devices failed"  # perhaps for a moment: never kept


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
        return device_kind(self.device)

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


def device_kind(device: str) -> str:
    """``cpu``, ``cuda`` or ``GPU``: what drives ``device`` (``cuda:1`` is torch's CUDA,
    ``GPU.1`` OpenVINO's GPU plugin)."""
    if device == CPU:
        return CPU
    return CUDA if device.startswith(CUDA) else OPENVINO_GPU


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
    """The accelerators torch and OpenVINO see here, once per process. Where a GPU driver is
    present asking costs seconds (importing torch, starting CUDA), so the answer is kept in
    the user's cache for as long as the boot, the drivers, the library versions and the
    visible devices stay the same."""
    machine = _gpu_machine()
    if machine is None:
        return Discovery(notes=(NO_GPU_DRIVER,))
    memo = user_cache_dir() / DISCOVERY_FILE
    try:
        saved = json.loads(memo.read_text())
        if saved["machine"] == machine:
            return Discovery(tuple(Accelerator(**found) for found in saved["accelerators"]),
                             tuple(saved["notes"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none kept yet, or kept by another release: ask again
    cuda, cuda_note = _cuda_devices(machine)
    gpus, gpu_note = _openvino_gpus(machine)
    found = Discovery(accelerators=(*cuda, *gpus),
                      notes=tuple(note for note in (cuda_note, gpu_note) if note))
    failed = any(LISTING_FAILED in note for note in found.notes)
    if machine.get("boot") and not failed:  # without a boot id a new GPU could not be told
        _keep(memo, {"machine": machine, "notes": list(found.notes),
                     "accelerators": [asdict(accelerator) for accelerator in found.accelerators]})
    return found


def user_cache_dir() -> Path:
    """The user's cache of Jarvis (``$XDG_CACHE_HOME/jarvis``): converted models when the
    caller names no directory, the devices found."""
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "jarvis"


def _gpu_machine() -> dict | None:
    """What decides the devices found, read without asking a library: the drivers, the boot,
    the library versions, the devices made visible; None where no GPU driver is present."""
    nvidia = NVIDIA_DRIVER.read_text() if NVIDIA_DRIVER.exists() else ""
    intel = [vendor for vendor in sorted(glob.glob(RENDER_NODE_VENDORS))
             if Path(vendor).read_text().strip() == INTEL_VENDOR]
    if not (nvidia or ROCM_DRIVER.exists() or intel or sys.platform == "win32"):
        return None
    return {"boot": BOOT_ID.read_text().strip() if BOOT_ID.exists() else None,
            "nvidia": nvidia, "rocm": ROCM_DRIVER.exists(), "intel": intel,
            "visible": {name: os.environ.get(name) for name in VISIBLE_DEVICES_ENV},
            "torch": _installed("torch"), "openvino": _installed("openvino")}


def _installed(package: str) -> str | None:
    """Where ``package`` is and when it was written there, which every install changes
    (0.1 ms, where importlib.metadata takes 20 to 100 ms to import); None if it is not."""
    spec = find_spec(package)
    if spec is None or not spec.origin:
        return None
    return f"{spec.origin}@{os.stat(spec.origin).st_mtime_ns}"


def _keep(memo: Path, found: dict) -> None:
    """Write the devices found for the next process; a cache that cannot be written only
    costs the next process the asking."""
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        partial = memo.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(found))
        partial.replace(memo)
    except OSError:
        pass


def _cuda_devices(machine: dict) -> tuple[list[Accelerator], str | None]:
    """CUDA devices as torch sees them (ROCm's too: torch names them cuda), asked only where
    their driver is present and torch is a build that could use them."""
    if not (machine["nvidia"] or machine["rocm"] or sys.platform == "win32"):
        return [], "CUDA: no NVIDIA or ROCm driver"
    if machine["torch"] is None:
        return [], "CUDA: torch is not installed"
    from importlib.metadata import version

    if version("torch").endswith("+cpu"):
        return [], f"CUDA: torch {version('torch')} is a CPU-only build"
    try:
        import torch

        if not torch.cuda.is_available():
            return [], f"CUDA: torch {torch.__version__} sees no CUDA device"
        return [Accelerator(f"{CUDA}:{index}", properties.name, properties.total_memory)
                for index in range(torch.cuda.device_count())
                for properties in (torch.cuda.get_device_properties(index),)], None
    except Exception as exc:  # a driver and torch that do not agree: embed on the CPU
        return [], f"CUDA: {LISTING_FAILED} by torch: {exc}"


def _openvino_gpus(machine: dict) -> tuple[list[Accelerator], str | None]:
    """Intel GPUs as OpenVINO's GPU plugin sees them, asked only where an Intel render node
    is present (the plugin drives Intel GPUs only)."""
    if not (machine["intel"] or sys.platform == "win32"):
        return [], "OpenVINO GPU: no Intel GPU render node"
    if machine["openvino"] is None:
        return [], "OpenVINO GPU: the openvino package is not installed"
    try:
        core = import_openvino().Core()
        gpus = [(core.get_property(device, "DEVICE_TYPE"),
                 Accelerator(device, core.get_property(device, "FULL_DEVICE_NAME"),
                             core.get_property(device, "GPU_DEVICE_TOTAL_MEM_SIZE")))
                for device in core.available_devices if device.startswith(OPENVINO_GPU)]
    except Exception as exc:  # the GPU plugin or its driver failed: embed on the CPU
        return [], f"OpenVINO GPU: {LISTING_FAILED} by OpenVINO: {exc}"
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
