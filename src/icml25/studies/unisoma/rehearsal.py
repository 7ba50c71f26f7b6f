"""Miniature official Unisoma datasets for the paper-scale rehearsal (``icml25.core.rehearsal``).

The official pickles are placed by hand (PKU disk and Google Drive folders, no file URL): ``<root>/<dataset>/data/
input/<dataset>_dataset_<split>.pkl`` (the official README's ``root_folder`` layout, ``paper_data.manual_path``).
:func:`write_manual` writes that tree with all seven datasets x three splits in their exact structure (a pickled
list of per-sample dicts of float ndarrays, protocol 4, the keys, ranks and dtypes of :mod:`.paper_data`): the
stamping sets' per-node arrays (stress and PEEQ as (N,)), unilateral stamping's fixed ``die_1_pos`` (R, 3) and
16 moving ``die_2-<i>_pos`` (R, 6), the trajectory sets' (T, N, 3) frames, deforming plate's per-frame stress and
node counts that differ between samples (the ragged, one-sample-per-step path), rice grip in float64 and
tissue manipulation's fixed ``grasping_position`` (3,). Contents are small synthetic motions (seeded), so the
models have something to fit; only the structure is real. :func:`write_miniatures` writes the same bytes at each
manifest row's ``mirror_path`` (the same relative path), from which the rehearsal manifest takes sha256 and size,
so the download stage verifies the hand-placed files against pinned hashes as it will once the real ones are
pinned. Deterministic: fixed seeds; pickles of plain lists/dicts/arrays carry no timestamps.
"""
from __future__ import annotations

import pickle
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .paper_data import DATASETS, SPLITS, manual_path

COUNTS = {"train": 4, "eval": 2, "test": 3}  #: samples per split (3 test items: the claims' per-sample means)
FRAMES = 5  #: frames per miniature trajectory (the rehearsal reads 4: paper.frames)


def _grid(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    """(n, 3) jittered points in a box (no two equidistant neighbours: kNN has no ties)."""
    return rng.uniform(lo, hi, size=(n, 3))


def _stamping(rng: np.random.Generator, unilateral: bool) -> dict[str, np.ndarray]:
    f32 = np.float32
    metal, rubber = _grid(rng, 12, 0.0, 1.0), _grid(rng, 10, -1.0, 0.0)
    push = rng.uniform(0.02, 0.1)
    s: dict[str, np.ndarray] = {"init_metal_pos": metal.astype(f32), "init_rubber_pos": rubber.astype(f32)}
    if unilateral:
        s["die_1_pos"] = _grid(rng, 5, -2.0, -1.0).astype(f32)
        for i in range(1, 17):
            p = _grid(rng, 3, 1.0, 2.0)
            s[f"die_2-{i}_pos"] = np.concatenate([p, np.tile([0.0, 0.0, -push * i / 16], (3, 1))], 1).astype(f32)
    else:
        for i, (lo, d) in enumerate(((1.0, -push), (-2.0, push / 3)), 1):
            p = _grid(rng, 6, lo, lo + 1.0)
            s[f"die_{i}_pos"] = np.concatenate([p, np.tile([0.0, 0.0, d], (6, 1))], 1).astype(f32)
    for name, x in (("metal", metal), ("rubber", rubber)):
        disp = -push * np.exp(-x[:, 2:3] ** 2) * np.array([0.2, 0.1, 1.0]) + rng.normal(0, 1e-3, x.shape)
        s[f"final_{name}_pos"] = (x + disp).astype(f32)
        s[f"final_{name}_stress"] = (1e2 * np.abs(disp).sum(1) + rng.uniform(0, 1, len(x))).astype(f32)
        s[f"final_{name}_peeq"] = (np.abs(disp[:, 2]) * rng.uniform(0.5, 1.5, len(x))).astype(f32)
    return dict(sorted(s.items()))


def _path(rng: np.random.Generator, x0: np.ndarray, velocity: np.ndarray, frames: int) -> np.ndarray:
    """(T, N, 3): x0 moved by a per-node fraction of ``velocity`` per frame, plus small noise."""
    gain = rng.uniform(0.5, 1.0, (1, len(x0), 1))
    t = np.arange(frames)[:, None, None]
    return x0[None] + t * gain * velocity[None, None] + rng.normal(0, 1e-3, (frames, *x0.shape))


def _trajectory(rng: np.random.Generator, dataset: str, n_nodes: int) -> dict[str, object]:
    v = rng.uniform(-0.05, 0.05, 3)
    body = _path(rng, _grid(rng, n_nodes, 0.0, 1.0), v, FRAMES)
    grip = lambda lo, r: np.asarray(_path(rng, _grid(rng, r, lo, lo + 0.5), v * 1.5, FRAMES))
    f32 = np.float32
    if dataset == "cavity_extruding":
        s = {f"cavity_{i}_pos": _path(rng, _grid(rng, 8, i, i + 1.0), v, FRAMES).astype(f32) for i in (1, 2, 3)}
        s.update({f"gripper_{i}_pos": grip(-i, 4).astype(f32) for i in (1, 2, 3, 4)})
    elif dataset == "deforming_plate":
        s = {"deformable_solid_pos": body.astype(f32), "rigid_solid_pos": grip(1.0, 5).astype(f32),
             "deformable_solid_stress": (1e3 * np.linalg.norm(body - body[:1], axis=-1)).astype(f32)}
    elif dataset == "cavity_grasping":
        s = {"tissue_mesh_positions": body.astype(f32), "gripper_position_1": grip(1.0, 4).astype(f32),
             "gripper_position_2": grip(-1.5, 4).astype(f32)}
    elif dataset == "rice_grip":  # float64, as DPI-Net's particle data
        s = {"rice_positions": body, "gripper_1_positions": grip(1.0, 3), "gripper_2_positions": grip(-1.5, 3)}
    elif dataset == "tissue_manipulation":
        s = {"tissue_mesh_positions": body.astype(f32), "gripper_position": grip(1.0, 2).astype(f32),
             "grasping_position": rng.uniform(0, 1, 3).astype(f32)}
    else:
        raise ValueError(f"no miniature for dataset {dataset!r}")
    return s


def miniature(dataset: str, split: str) -> bytes:
    """The miniature pickle of one dataset x split (deterministic bytes)."""
    rng = np.random.default_rng(zlib.crc32(f"unisoma/{dataset}/{split}".encode()))
    samples = []
    for i in range(COUNTS[split]):
        if dataset in ("bilateral_stamping", "unilateral_stamping"):
            samples.append(_stamping(rng, dataset == "unilateral_stamping"))
        else:  # deforming plate: node counts differ between samples, as its remeshed trajectories
            samples.append(_trajectory(rng, dataset, 9 + (i % 2 if dataset == "deforming_plate" else 0)))
    return pickle.dumps(samples, protocol=4)


def _write(root: Path, rel: str, payload: bytes) -> None:
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != payload:
        path.write_bytes(payload)


def write_manual(root: Path) -> None:
    """The hand-placed tree: every dataset x split at ``<root>/<dataset>/data/input/<dataset>_dataset_<split>.pkl``."""
    for d in DATASETS:
        for s in SPLITS:
            _write(root, manual_path(d, s), miniature(d, s))


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """The same bytes at every manifest row's ``mirror_path`` (the rehearsal manifest pins their hashes)."""
    names = []
    for name, entry in manifest.items():
        dataset, split = name.rsplit("_", 1)
        _write(root, entry.mirror_path, miniature(dataset, split))
        names.append(name)
    return names
