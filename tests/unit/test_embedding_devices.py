"""Which device embeds and in which precision, decided from what torch and OpenVINO found:
the decision is a pure function of the discovery, so the GPU machines are tested with the
discovery they would make (CUDA present or not, an Intel GPU, a named device missing); that
this machine finds no GPU without importing torch or OpenVINO is tested for real."""

import json
import os
import subprocess
import sys

import pytest

from jarvis_core import embedding_backends as backends
from jarvis_core import embedding_devices as devices
from jarvis_core.embedding_backends import (
    AUTO,
    OPENVINO,
    OPENVINO_BF16,
    OPENVINO_F16,
    TORCH_FP16,
    TORCH_FP32,
    backend_problem,
    choose_backend,
    query_backend,
)
from jarvis_core.embedding_devices import Accelerator, DeviceError, Discovery
from jarvis_core.pending import settings_fingerprint
from jarvis_core.settings import ConfigError
from jarvis_pipeline.refresh import run_refresh
from jarvis_resources import build_resources
from tests.pipeline_helpers import write_config

GIB = 2**30
A100 = Accelerator("cuda:0", "NVIDIA A100-SXM4-40GB", 40 * GIB)
ARC = Accelerator("GPU.0", "Intel(R) Arc(TM) A770 Graphics (dGPU)", 16 * GIB)
NONE_FOUND = Discovery(notes=("CUDA: no NVIDIA or ROCm driver",
                              "OpenVINO GPU: no Intel GPU render node"))


def test_auto_embeds_on_a_cuda_device_in_float16():
    choice = choose_backend(AUTO, AUTO, Discovery((A100,)))
    assert (choice.backend, choice.precision, choice.device) == (TORCH_FP16, "f16", "cuda:0")
    assert choice.reason == "auto: on cuda:0 (NVIDIA A100-SXM4-40GB, 40 GiB), found by auto"
    assert backend_problem(choice.backend, choice.device) is None


def test_auto_embeds_on_an_intel_gpu_with_openvino_in_f16():
    choice = choose_backend(AUTO, AUTO, Discovery((ARC,)))
    assert (choice.backend, choice.precision, choice.device) == (OPENVINO_F16, "f16", "GPU.0")
    assert backend_problem(choice.backend, choice.device) is None


def test_auto_takes_the_first_accelerator_found():
    assert choose_backend(AUTO, AUTO, Discovery((A100, ARC))).device == "cuda:0"


def test_without_a_gpu_auto_stays_on_the_cpu_and_says_why():
    choice = choose_backend(AUTO, AUTO, NONE_FOUND)
    assert choice.device == "cpu" and choice.backend in (OPENVINO_BF16, OPENVINO, TORCH_FP32)
    assert choice.reason.endswith("on the CPU, no GPU found: CUDA: no NVIDIA or ROCm driver; "
                                  "OpenVINO GPU: no Intel GPU render node")


def test_device_cpu_keeps_the_cpu_where_a_gpu_is_found():
    cpu = choose_backend(AUTO, "cpu", Discovery((A100, ARC)))
    assert cpu.device == "cpu" and cpu.precision != "f16"
    assert cpu.backend == choose_backend(AUTO, AUTO, NONE_FOUND).backend


def test_a_named_device_is_taken_and_one_that_is_not_here_is_an_error_naming_the_setting():
    assert choose_backend(AUTO, "GPU", Discovery((A100, ARC))).backend == OPENVINO_F16
    assert choose_backend(AUTO, "cuda", Discovery((A100, ARC))).device == "cuda:0"
    with pytest.raises(DeviceError, match=r"embedding.device: 'cuda:1' is not a device here "
                                          r"\(found: cuda:0 \(NVIDIA A100"):
        choose_backend(AUTO, "cuda:1", Discovery((A100,)))
    with pytest.raises(DeviceError, match="embedding.device: 'cuda' .* no NVIDIA or ROCm"):
        choose_backend(AUTO, "cuda", NONE_FOUND)


def test_a_device_that_is_no_device_name_fails_the_configuration(tmp_path):
    with pytest.raises(ConfigError, match=r"embedding.device: Value error, 'gpu0' is not a "
                                          r"device: use auto, cpu, cuda"):
        write_config(tmp_path, {"notes": tmp_path / "vault"}, embedding={"device": "gpu0"})


def test_a_pinned_backend_embeds_on_a_gpu_it_runs_on_and_only_there():
    cuda = Discovery((A100,))
    assert choose_backend(TORCH_FP32, AUTO, cuda).device == "cuda:0"
    assert choose_backend(OPENVINO_BF16, AUTO, cuda).device == "cpu"  # runs on the CPU only
    assert choose_backend(OPENVINO, AUTO, Discovery((A100, ARC))).device == "GPU.0"
    assert "runs on a CUDA device (cuda) only" in backend_problem(TORCH_FP16, "cpu")
    assert "does not run on 'GPU.0'" in backend_problem(OPENVINO_BF16, "GPU.0")


def test_queries_are_encoded_on_the_cpu_by_the_float32_twin_of_a_half_precision_backend():
    assert (query_backend(TORCH_FP16), query_backend(OPENVINO_F16)) == (TORCH_FP32, OPENVINO)


@pytest.mark.parametrize(("memory_gib", "batch_size"),
                         [(None, 64), (2, 64), (8, 128), (24, 256), (40, 512), (80, 512)])
def test_the_batch_grows_with_the_gpu_memory(memory_gib, batch_size):
    gpu = Accelerator("cuda:0", "a GPU", memory_gib and memory_gib * GIB)
    assert choose_backend(AUTO, AUTO, Discovery((gpu,))).default_batch_size == batch_size
    assert choose_backend(AUTO, AUTO, NONE_FOUND).default_batch_size == 32


def test_a_gpu_fills_its_own_collection_and_a_configured_batch_size_is_kept(
        tmp_path, monkeypatch):
    """The same configuration with and without a CUDA device: the vectors' precision, and so
    their collection and the settings fingerprint, follow the device; ``batch_size`` set in
    the configuration wins over the device's default and changes neither."""
    seen = {}
    for found, batch_size in ((Discovery((A100,)), None), (NONE_FOUND, None),
                              (Discovery((A100,)), 48)):
        monkeypatch.setattr(backends, "discover", lambda found=found: found)
        embedding = {"batch_size": batch_size} if batch_size else {}
        config = write_config(tmp_path / "project", {"notes": tmp_path / "vault"},
                              embedding=embedding)
        resources = build_resources(str(config.config_path))
        seen[len(seen)] = (resources["vectors"].collection, resources["embedder"].batch_size,
                           settings_fingerprint(config))
    (gpu_collection, gpu_batch, gpu_settings), (cpu_collection, cpu_batch, cpu_settings), \
        (pinned_collection, pinned_batch, pinned_settings) = seen.values()
    assert gpu_collection == "chunks__sentence-transformers_all-minilm-l6-v2__384__f16"
    assert cpu_collection != gpu_collection and cpu_settings != gpu_settings
    assert (gpu_batch, cpu_batch, pinned_batch) == (512, 32, 48)
    assert (pinned_collection, pinned_settings) == (gpu_collection, gpu_settings)


@pytest.mark.parametrize(("found", "max_memory_mb", "configured", "batch_size"),
                         [(NONE_FOUND, 2048, None, 32), (NONE_FOUND, 950, None, 14),
                          (NONE_FOUND, 256, None, 8), (NONE_FOUND, 950, 48, 48),
                          (Discovery((A100,)), 950, None, 512)])
def test_a_cpu_batch_follows_the_memory_budget(tmp_path, monkeypatch, found, max_memory_mb,
                                               configured, batch_size):
    """On the CPU a small budget takes smaller batches (a stream's buffers grow with its
    batch); a configured ``batch_size`` and a GPU's batch (its own memory) are kept."""
    monkeypatch.setattr(backends, "discover", lambda: found)
    config = write_config(tmp_path / "project", {"notes": tmp_path / "vault"},
                          resources={"max_memory_mb": max_memory_mb},
                          embedding={"batch_size": configured} if configured else {})
    assert build_resources(str(config.config_path))["embedder"].batch_size == batch_size


def test_on_this_machine_auto_finds_no_gpu_without_importing_torch_or_openvino(tmp_path):
    """This machine has no GPU: auto embeds on the CPU, and learning that imported neither
    library (a no-op refresh decides the precision in every process), with no devices kept
    from an earlier process to answer instead."""
    probe = ("import json, sys; from jarvis_core.embedding_backends import choose_backend; "
             "choice = choose_backend('auto', 'auto'); "
             "print(json.dumps([choice.device, choice.default_batch_size, "
             "[name for name in ('torch', 'openvino') if name in sys.modules]]))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    assert json.loads(result.stdout) == ["cpu", 32, []]


@pytest.fixture
def nvidia_machine(tmp_path, monkeypatch):
    """An NVIDIA driver and a boot id (files of the test's), the user's cache under
    tmp_path, and torch's answer (a probe that counts how often it is asked) in place of
    importing torch: returns the driver file, the boot file and the list of askings."""
    driver, boot = tmp_path / "nvidia-version", tmp_path / "boot_id"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14\n")
    boot.write_text("boot-1\n")
    monkeypatch.setattr(devices, "NVIDIA_DRIVER", driver)
    monkeypatch.setattr(devices, "BOOT_ID", boot)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    asked = []
    monkeypatch.setattr(devices, "_cuda_devices",
                        lambda machine: asked.append(machine) or ([A100], None))
    yield driver, boot, asked
    devices.discover.cache_clear()


def test_where_a_gpu_driver_is_present_the_devices_found_are_kept_until_the_machine_changes(
        nvidia_machine, monkeypatch):
    """Asking torch costs seconds, in every refresh process: the answer is kept in the
    user's cache, and asked again after a reboot, a driver change or other visible devices."""
    driver, boot, asked = nvidia_machine

    def found_by_a_new_process() -> Discovery:
        devices.discover.cache_clear()
        return devices.discover()

    assert found_by_a_new_process().accelerators == (A100,)
    assert found_by_a_new_process().accelerators == (A100,) and len(asked) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    found_by_a_new_process()
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  555.42.02\n")
    found_by_a_new_process()
    boot.write_text("boot-2\n")
    found_by_a_new_process()
    assert found_by_a_new_process().accelerators == (A100,) and len(asked) == 4


def test_a_listing_that_failed_is_not_kept(nvidia_machine, monkeypatch):
    """A driver that failed for a moment must not leave the machine on the CPU until reboot."""
    asked = nvidia_machine[2]
    monkeypatch.setattr(devices, "_cuda_devices", lambda machine: asked.append(machine) or (
        [], f"CUDA: {devices.LISTING_FAILED} by torch: CUDA driver initialization failed"))
    for _ in range(2):
        devices.discover.cache_clear()
        assert devices.discover().accelerators == ()
    assert len(asked) == 2


def test_a_refresh_with_a_device_that_is_not_here_stops_before_any_run(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "note.md").write_text("# A note\n\nEmbedded on a GPU that is not there.\n")
    config = write_config(tmp_path / "project", {"notes": vault},
                          embedding={"device": "cuda:99"})
    with pytest.raises(DeviceError, match="embedding.device: 'cuda:99' is not a device here"):
        run_refresh(config)
    assert not config.duckdb_path.exists()
