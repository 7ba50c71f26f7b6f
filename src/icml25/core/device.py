"""One device switch for every torch stage, and reproducible CUDA runs (issue 39).

The top-level ``device: auto | cpu | cuda`` of ``config/config.yaml`` (``--config device=cuda``) is resolved once,
when the Snakefile is parsed (:func:`resolve`; ``auto`` = cuda when a CUDA device is visible to the Snakemake
process), and written into each study's own device key (:data:`DEVICE_KEYS`) before the study's ``Config`` is
validated (:func:`apply_device`, called by :func:`icml25.core.workflow.resolve_study`). So the study code keeps
reading its own key, the rule params (the rerun trigger) hold the device actually used, and a study's jobs whose
stage reads the key get ``--device <resolved>`` in their shell command (:func:`job_device_arg`).

**Overrides.** A study key set *explicitly* in the user's configuration, i.e. present under
``overrides.<slug>`` of ``config/config.yaml`` or ``--config overrides=...`` (e.g.
``overrides: {lfss: {train: {device: cpu}}}``), wins over the switch. Values in the study yaml
(``config/studies/<slug>.yaml``, any scale) and in ``config/rehearsal/<slug>.yaml`` are the study's defaults and
are replaced by the switch. Without a ``device`` key in the global config (a test calling ``resolve_study`` with
an older config) the study yaml stands as written.

**Clusters.** ``auto`` is resolved where Snakemake parses the Snakefile: on a login node without a GPU it means cpu.
Pass ``--config device=cuda`` to submit GPU jobs from there; rules then request a GPU (SLURM ``gpu`` resource)
only for jobs whose device is cuda (:func:`gpu_request`).

**Jobs.** :func:`setup_job` runs in every stage job before the stage: a job whose device is cuda fails at once
when no CUDA device is visible, with an error naming the key that asked for it (``device`` or the study key), and
otherwise configures deterministic CUDA (:func:`configure_cuda_determinism`): ``CUBLAS_WORKSPACE_CONFIG=:4096:8``
before CUDA initialises, ``torch.use_deterministic_algorithms(True)`` (not warn-only), no cuDNN benchmark,
deterministic cuDNN, the math scaled-dot-product-attention backend. An op without a deterministic CUDA kernel then
raises; a study that needs such an op is listed in :data:`NONDETERMINISTIC_CUDA` (with the op, found on a GPU
host): its CUDA jobs run warn-only and are tagged ``deterministic: false`` in MLflow and in claims.json
(:func:`deterministic`), and its claims must widen their intervals by the run-to-run spread measured by repeating
one seed (:func:`widen_interval`; docs/gpu.md). Every MLflow run records tags ``device``, ``deterministic``,
``torch_version``, ``cuda_version`` and ``gpu_name`` (:func:`run_tags`).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import ConfigError

DEVICES = ("auto", "cpu", "cuda")

#: The study key each torch study reads its device from (dotted path in its Config). The top-level switch writes
#: into it; ``overrides.<slug>.<key>`` set by the user wins. Studies without a key here choose no device.
DEVICE_KEYS: dict[str, str] = {
    "action_piece": "train.device",
    "coastalbench": "train.device",
    "fedecado": "image.device",
    "kernel_adaptation": "langevin.device",
    "lfss": "train.device",
    "meta_expert": "train.device",
    "morphing_flow": "train.device",
    "ntk_dfl": "device",
    "sard": "device",
    "roste": "paper.device",
    "unisoma": "paper.device",
    "magnets": "paper.device",
}

#: Arms of a study's device stage that never use the device (numpy-only arms), as a predicate on the arm name:
#: their jobs skip the CUDA check and run as cpu jobs (mirrors the rules' per-arm GPU request).
DEVICE_FREE_ARM: dict[str, Callable[[str], bool]] = {
    "fedecado": lambda arm: arm.startswith("quad_"),  # the quadratic problem (fedecado.config.QUAD_ARMS)
    "kernel_adaptation": lambda arm: arm != "langevin",  # only the Langevin sampler runs torch on the device
}

#: Studies whose CUDA jobs use an op without a deterministic CUDA kernel: slug -> the op (measured on a GPU host).
#: Their CUDA jobs run with warn-only deterministic algorithms and are tagged ``deterministic: false``. Empty until
#: a GPU host shows one (docs/gpu.md): with the settings of :func:`configure_cuda_determinism` such an op raises.
NONDETERMINISTIC_CUDA: dict[str, str] = {}

ENV_DEVICE = "ICML25_DEVICE"  #: the job's resolved device (cpu | cuda), set by :func:`setup_job`
ENV_DETERMINISTIC = "ICML25_DETERMINISTIC"  #: "1" | "0": whether the job's runs are bit-reproducible
ENV_SOURCE = "ICML25_DEVICE_KEY"  #: the config key the job's device came from (for error messages)
CUBLAS_WORKSPACE = ":4096:8"


class DeviceError(ConfigError):
    """A job asks for a device that is not there; the message names the key that asked for it."""


# --------------------------------------------------------------------------------------------- resolution


def cuda_available() -> bool:
    """Whether a CUDA device is visible to this process. Cheap on a machine without NVIDIA driver files (torch is
    not imported there); otherwise ``torch.cuda.is_available()``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if "torch" not in sys.modules and not (Path("/proc/driver/nvidia").exists() or Path("/dev/nvidia0").exists()):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve(requested: str, *, key: str = "device") -> str:
    """``auto`` -> cuda when a CUDA device is visible, else cpu; cpu/cuda unchanged (no availability check: a
    dry run on a login node may plan cuda jobs). Anything else is a :class:`ConfigError` naming ``key``."""
    if requested not in DEVICES:
        raise ConfigError(f"{key}: must be one of {', '.join(DEVICES)}, got {requested!r}")
    if requested == "auto":
        return "cuda" if cuda_available() else "cpu"
    return requested


def _get(data: Mapping, dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def explicit(slug: str, user_overrides: Mapping | None) -> bool:
    """Whether the user set the study's device key explicitly (under ``overrides.<slug>``)."""
    key = DEVICE_KEYS.get(slug)
    return key is not None and _get(user_overrides or {}, key) is not None


def apply_device(slug: str, merged: Mapping, device: str | None, user_overrides: Mapping | None = None) -> dict:
    """The merged study config with the resolved top-level ``device`` written into the study's device key, unless
    the study has none, ``device`` is None (no switch in the global config), or the user set the key explicitly.
    ``device`` must already be resolved (cpu | cuda). Pure: returns a new mapping."""
    out = dict(merged)
    key = DEVICE_KEYS.get(slug)
    if key is None or device is None or explicit(slug, user_overrides):
        return out
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"device: resolve it first (cpu | cuda), got {device!r}")
    *parents, leaf = key.split(".")
    node = out
    for part in parents:
        child = dict(node.get(part) or {})
        node[part] = child
        node = child
    node[leaf] = device
    return out


def stage_uses_device(slug: str, stage: str, stage_keys: Mapping[str, Sequence[str]], arm: str | None = None) -> bool:
    """Whether ``stage`` of ``slug`` reads the study's device key (itself or a section above it in STAGE_KEYS),
    for ``arm`` (an arm of :data:`DEVICE_FREE_ARM` does not)."""
    key = DEVICE_KEYS.get(slug)
    if key is None:
        return False
    if arm is not None and slug in DEVICE_FREE_ARM and DEVICE_FREE_ARM[slug](arm):
        return False
    return any(key == k or key.startswith(k + ".") for k in stage_keys.get(stage, ()))


def study_device(slug: str, config: Mapping) -> str | None:
    """The device value of a study's resolved config (None for a study without a device key)."""
    key = DEVICE_KEYS.get(slug)
    return None if key is None else _get(config, key)


def job_device_arg(slug: str, stage: str, config: Mapping, stage_keys: Mapping[str, Sequence[str]],
                   global_config: Mapping) -> str:
    """``" --device <d>"`` for the shell command of a job whose stage reads the study's device key when the
    top-level switch set it (not when the user set the study key explicitly, nor without a switch), else ""."""
    user = (global_config.get("overrides") or {}).get(slug)
    if (global_config.get("device") is None or explicit(slug, user)
            or not stage_uses_device(slug, stage, stage_keys)):
        return ""
    return f" --device {study_device(slug, config)}"


def gpu_request(slug: str, stage: str, config: Mapping, stage_keys: Mapping[str, Sequence[str]],
                gpus: int = 1) -> int:
    """GPUs a job asks SLURM for (resource ``gpu``): ``gpus`` when its stage reads the study's device key and the
    device is cuda, else 0. Studies without a device key (their GPU paths are planned) get ``gpus`` unchanged."""
    if slug not in DEVICE_KEYS:
        return gpus
    return gpus if stage_uses_device(slug, stage, stage_keys) and study_device(slug, config) == "cuda" else 0


def source_key(slug: str, user_overrides: Mapping | None, global_device: str | None) -> str:
    """The config key a job's device comes from, as a user would set it (for error messages)."""
    key = DEVICE_KEYS.get(slug, "device")
    if global_device is not None and not explicit(slug, user_overrides):
        return "device"
    return f"overrides.{slug}.{key}"


# ------------------------------------------------------------------------------------------------- jobs


def configure_cuda_determinism(strict: bool = True) -> None:
    """Deterministic CUDA for this process: ``CUBLAS_WORKSPACE_CONFIG`` (must precede CUDA's initialisation:
    called before the stage imports or uses torch), ``torch.use_deterministic_algorithms(True,
    warn_only=not strict)``, ``cudnn.benchmark = False``, ``cudnn.deterministic = True``, and the math
    scaled-dot-product-attention backend only (flash / memory-efficient / cuDNN attention off)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    if os.environ["CUBLAS_WORKSPACE_CONFIG"] not in (":4096:8", ":16:8"):
        raise ConfigError(f"CUBLAS_WORKSPACE_CONFIG={os.environ['CUBLAS_WORKSPACE_CONFIG']!r}: deterministic "
                          "cuBLAS needs :4096:8 or :16:8 (unset it)")
    import torch

    torch.use_deterministic_algorithms(True, warn_only=not strict)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    cuda = torch.backends.cuda
    cuda.enable_math_sdp(True)
    cuda.enable_flash_sdp(False)
    cuda.enable_mem_efficient_sdp(False)
    if hasattr(cuda, "enable_cudnn_sdp"):
        cuda.enable_cudnn_sdp(False)


def setup_job(slug: str, device: str | None, *, key: str = "device", uses_device: bool = True) -> str:
    """Prepare a stage job for its study's device (``device``: the study key's value, after ``--device``; None
    for a study without one). A job whose stage reads the key (``uses_device``) and whose device is cuda fails at
    once without a visible CUDA device (:class:`DeviceError` naming ``key``), else gets
    :func:`configure_cuda_determinism` (warn-only for a study in :data:`NONDETERMINISTIC_CUDA`). Records in the
    environment this job's device (:data:`ENV_DEVICE`: cuda only for a job that uses it) and whether the study's
    runs are reproducible (:data:`ENV_DETERMINISTIC`; also in a job that only reads their outputs, e.g. the one
    writing claims.json), read by :func:`icml25.core.seed.seed_everything`, :func:`run_tags` and
    :func:`icml25.core.claims.write_claims`. Returns this job's device."""
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    job = device if (uses_device and device in ("cpu", "cuda")) else "cpu"
    if job == "cuda":
        if not cuda_available():
            raise DeviceError(f"{key}: cuda requested for {slug}, but no CUDA device is visible to this job "
                              f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}); set "
                              f"{key}: cpu or auto, or run on a GPU node")
        configure_cuda_determinism(strict=slug not in NONDETERMINISTIC_CUDA)
    os.environ[ENV_DEVICE] = job
    os.environ[ENV_DETERMINISTIC] = "0" if device == "cuda" and slug in NONDETERMINISTIC_CUDA else "1"
    os.environ[ENV_SOURCE] = key
    return job


def deterministic() -> bool:
    """Whether this job's runs are bit-reproducible: False only for a CUDA job of a study listed in
    :data:`NONDETERMINISTIC_CUDA` (from the environment :func:`setup_job` set; True for CPU jobs)."""
    return os.environ.get(ENV_DETERMINISTIC, "1") != "0"


def strict_determinism() -> bool:
    """Whether deterministic algorithms must raise rather than warn (a deterministic CUDA job)."""
    return os.environ.get(ENV_DEVICE) == "cuda" and deterministic()


def run_tags() -> dict[str, str]:
    """MLflow tags of a job: ``device``, ``deterministic``, ``torch_version`` (package metadata, no import), and,
    for a CUDA job (torch is imported then anyway), ``cuda_version`` and ``gpu_name``."""
    from importlib import metadata

    device = os.environ.get(ENV_DEVICE, "cpu")
    tags = {"device": device, "deterministic": str(deterministic()).lower()}
    try:
        tags["torch_version"] = metadata.version("torch")
    except metadata.PackageNotFoundError:
        tags["torch_version"] = "none"
    torch = sys.modules.get("torch")
    if device == "cuda" and torch is not None:
        tags["cuda_version"] = str(torch.version.cuda)
        tags["gpu_name"] = torch.cuda.get_device_name(0)
    return tags


def widen_interval(low: float, high: float, repeats: Sequence[float]) -> tuple[float, float]:
    """A claim's interval widened by the run-to-run spread of a non-deterministic study: ``repeats`` are the
    metric from runs of one seed repeated on the same device; the interval grows by half their range on each side
    (the spread a seed's value can move by). Deterministic runs (all repeats equal) leave it unchanged."""
    if len(repeats) < 2:
        raise ValueError("widen_interval: need at least two repeats of one seed to measure the spread")
    half = (max(repeats) - min(repeats)) / 2
    return low - half, high + half
