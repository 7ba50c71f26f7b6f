"""The official Unisoma datasets at paper scale: their pickle formats, the nine experiments of the official code, the
conversion of each dataset into model inputs (long-time samples or autoregressive trajectories), the ragged npz
layout preprocess writes, the normalisers and the hand-placed layout check.

**Formats** (learnt from the official data loaders, ``therontau0054/Unisoma`` at ``8f4dd83``; no code copied).
Every file ``<dataset>_dataset_<split>.pkl`` (split ``train|eval|test``) is a pickled *list of dicts*, one per
sample, whose values are float ndarrays (the per-frame ones may also be lists of per-frame arrays):

================== ======================================================================================
dataset            keys (shapes; T frames, N nodes, R rigid nodes)
================== ======================================================================================
bilateral_stamping ``init_{metal,rubber}_pos`` (N, 3), ``die_{1,2}_pos`` (R, 6) = [position, displacement],
                   ``final_{metal,rubber}_pos`` (N, 3), ``final_{metal,rubber}_{stress,peeq}`` (N,) or (N, 1)
unilateral_stamping the stamping keys with ``die_1_pos`` (R, 3) (the fixed die) and ``die_2-{1..16}_pos``
                   (R_i, 6), the 16 moving die segments
cavity_extruding   ``cavity_{1,2,3}_pos`` (T, N_c, 3), ``gripper_{1..4}_pos`` (T, R, 3); T ≥ 121
deforming_plate    ``deformable_solid_pos`` (T, N, 3), ``rigid_solid_pos`` (T, R, 3),
                   ``deformable_solid_stress`` (T, N) or (T, N, 1)
cavity_grasping    ``tissue_mesh_positions`` (T, N, 3), ``gripper_position_{1,2}`` (T, R, 3); T ≥ 105
rice_grip          ``rice_positions`` (T, N, 3), ``gripper_{1,2}_positions`` (T, R, 3); T ≥ 41
tissue_manipulation ``tissue_mesh_positions`` (T, N, 3), ``gripper_position`` (T, R, 3),
                   ``grasping_position`` (3,) (a fixed point; any shape of 3 values)
================== ======================================================================================

**Views** (official loaders). Long-time (final state from the initial one): stamping loads are [p, p + Δp] of the
moving dies and the targets [Δx, stress, PEEQ]; deforming plate takes the frame where the actuator has moved
farthest (mean node distance from frame 0), load [p₀, p_t − p₀] and targets [Δx, stress / 1000]; cavity grasping
and tissue manipulation take the last frame, loads [p₀, p_T − p₀] (tissue's grasp point: [g, 0]) and targets Δx.
Autoregressive: frame t → t + 1 for t < frames − 1, loads [p_t, p_{t+1} − p_t], targets x_{t+1} − x_t.

Pickles are read only through the restricted unpickler of :mod:`.data` (numpy array globals and nothing else);
whatever breaks a format raises :class:`~.data.DataError` naming the file, the sample and the key.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .data import MAX_PICKLE_BYTES, DataError, restricted_loads

SPLITS = ("train", "eval", "test")
LONG, AUTO = "long_time", "autoregressive"


@dataclass(frozen=True)
class Experiment:
    """One experiment of the official code (``configs/<dataset>.toml`` and ``exp_<dataset>_<task>.py``).

    Entity counts, contact pairs (over [deformables…, rigids…]), output channels per deformable node, and the
    official schedule: ``optimizer`` (``adamw`` for the stamping sets, ``adam`` elsewhere), ``epochs``, ``batch``
    (long-time: samples per step; autoregressive: consecutive frames of one trajectory per step), the cosine
    schedule to ``lr / lr_decay`` (stepped per batch long-time, per trajectory autoregressive), ``weight_decay``,
    validation every ``eval_every`` epochs (the best validation checkpoint is kept), training noise ``noise`` (σ on
    normalised positions, autoregressive) and ``frames`` per trajectory (autoregressive).
    """

    dataset: str
    task: str
    n_loads: int
    n_rigids: int
    n_deformables: int
    out_dim: int
    contact_pairs: tuple[tuple[int, int], ...]
    optimizer: str
    epochs: int
    batch: int
    lr_decay: float
    weight_decay: float
    eval_every: int
    noise: float = 0.0
    frames: int | None = None

    @property
    def name(self) -> str:
        return f"{self.dataset}/{self.task}"


def _lt(dataset, nl, nr, nd, out, pairs, opt, epochs, batch, eval_every) -> Experiment:
    return Experiment(dataset, LONG, nl, nr, nd, out, tuple(pairs), opt, epochs, batch, 10.0, 1e-5, eval_every)


def _ro(dataset, nl, nr, nd, pairs, batch, frames) -> Experiment:
    return Experiment(dataset, AUTO, nl, nr, nd, 3, tuple(pairs), "adam", 100, batch, 5.0, 0.0, 10, 1e-3, frames)


_GRIP = ((0, 1), (0, 2))
#: The nine experiments of the official repository (values from its configs/*.toml and exp_*.py).
EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    _lt("bilateral_stamping", 2, 2, 2, 5, ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3)), "adamw", 100, 1, 1),
    _lt("unilateral_stamping", 16, 17, 2, 5, tuple((0, i) for i in range(1, 19)), "adamw", 100, 1, 20),
    _ro("cavity_extruding", 4, 4, 3, ((0, 1), (1, 2), (0, 3), (0, 4), (0, 5), (0, 6)), 120, 121),
    _lt("deforming_plate", 1, 1, 1, 4, ((0, 1),), "adam", 200, 1, 10),
    _lt("cavity_grasping", 2, 2, 1, 3, _GRIP, "adam", 200, 20, 20),
    _ro("cavity_grasping", 2, 2, 1, _GRIP, 104, 105),
    _ro("rice_grip", 2, 2, 1, _GRIP, 40, 41),
    _lt("tissue_manipulation", 2, 2, 1, 3, _GRIP, "adam", 200, 20, 20),
    _ro("tissue_manipulation", 2, 2, 1, _GRIP, 104, 105),
)}
DATASETS = tuple(dict.fromkeys(e.dataset for e in EXPERIMENTS.values()))
#: Output fields of a deformable node by ``out_dim``: (name, channel slice); the loss sums relL2 over them.
FIELDS = {5: (("pos", slice(0, 3)), ("stress", slice(3, 4)), ("peeq", slice(4, 5))),
          4: (("pos", slice(0, 3)), ("stress", slice(3, 4))), 3: (("pos", slice(0, 3)),)}


def file_name(dataset: str, split: str) -> str:
    return f"{dataset}_dataset_{split}.pkl"


def manual_path(dataset: str, split: str) -> str:
    """Where a file sits under the hand-placed root (the official README's ``root_folder`` layout):
    ``<dataset>/data/input/<dataset>_dataset_<split>.pkl`` (also the manifest's ``mirror_path``)."""
    return f"{dataset}/data/input/{file_name(dataset, split)}"


def check_manual_layout(root: str | Path, datasets: Sequence[str]) -> list[Path]:
    """The hand-placed files of ``datasets`` under ``root`` (``data.manual_dir``), in dataset × split order;
    raises :class:`DataError` listing every missing file and the expected layout."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"paper.manual_dir {root} is not a directory (place the official pickles there as "
                        f"<dataset>/data/input/<dataset>_dataset_<split>.pkl, the official README's layout)")
    paths = [root / manual_path(d, s) for d in datasets for s in SPLITS]
    missing = [str(p.relative_to(root)) for p in paths if not p.is_file()]
    if missing:
        raise DataError(f"paper.manual_dir {root}: {len(missing)} file(s) missing: {missing[:6]}"
                        f"{' ...' if len(missing) > 6 else ''} (layout <dataset>/data/input/"
                        "<dataset>_dataset_<split>.pkl; PKU disk and Google Drive links in the study README)")
    return paths


# ----------------------------------------------------------------------------------------------------------------
# Reading and validating the official pickles
# ----------------------------------------------------------------------------------------------------------------
def read_official(path: str | Path, *, max_bytes: int = MAX_PICKLE_BYTES) -> list[dict]:
    """Restricted unpickling of one official file (size limit, numpy-only globals); returns the list of sample
    dicts (values not yet checked). Raises :class:`DataError` naming ``path``."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise DataError(f"{path}: {size} bytes exceeds data.max_pickle_bytes={max_bytes}")
    try:
        data = restricted_loads(path.read_bytes())
    except pickle.UnpicklingError as exc:
        raise DataError(f"{path}: refused by the restricted unpickler: {exc}") from None
    except Exception as exc:  # truncated or corrupt payloads
        raise DataError(f"{path}: not a readable data pickle ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, list) or not data:
        raise DataError(f"{path}: top level must be a non-empty list of sample dicts, got {type(data).__name__}")
    for i, s in enumerate(data):
        if not isinstance(s, dict):
            raise DataError(f"{path}: sample {i} is a {type(s).__name__}, not a dict")
    return data


class _Sample:
    """Typed access to one sample dict: every read checks presence, float dtype, finiteness and shape."""

    def __init__(self, sample: Mapping, where: str):
        self.s, self.where = sample, where

    def arr(self, key: str, shape: tuple) -> np.ndarray:
        """``sample[key]`` as float64 of the given shape (None = any size; a trailing 1 of the data is dropped
        when ``shape`` has one dimension fewer)."""
        if key not in self.s:
            raise DataError(f"{self.where}: key {key!r} missing (keys present: {sorted(map(str, self.s))[:12]})")
        raw = self.s[key]
        try:
            a = np.asarray(raw) if not isinstance(raw, list) else np.stack([np.asarray(x) for x in raw])
        except ValueError as exc:
            raise DataError(f"{self.where}: key {key!r}: frames of unequal shapes ({exc})") from None
        if a.dtype.kind != "f":
            raise DataError(f"{self.where}: key {key!r} must hold floats, got dtype {a.dtype}")
        if a.ndim == len(shape) + 1 and a.shape[-1] == 1:
            a = a[..., 0]
        if a.ndim != len(shape) or any(e is not None and e != v for e, v in zip(shape, a.shape)) \
                or 0 in a.shape:
            raise DataError(f"{self.where}: key {key!r} has shape {a.shape}, expected "
                            f"{tuple('*' if e is None else e for e in shape)}")
        if not np.all(np.isfinite(a)):
            raise DataError(f"{self.where}: key {key!r} has non-finite values")
        return a.astype(np.float64)

    def frames(self, key: str, width: int, n_frames: int | None, nodes: int | None = None) -> np.ndarray:
        """A per-frame array (T, N, width) with at least ``n_frames`` frames (then cut to them)."""
        a = self.arr(key, (None, nodes, width))
        if n_frames is not None and a.shape[0] < n_frames:
            raise DataError(f"{self.where}: key {key!r} has {a.shape[0]} frames, the experiment needs {n_frames}")
        return a[:n_frames] if n_frames is not None else a


@dataclass
class LongSample:
    """One long-time sample: loads [(R_k, 6)], rigids [(R_k, 3)], deformables [(N_m, 3)] (initial positions),
    targets [(N_m, out_dim)] (displacement first, then the fields)."""

    loads: list[np.ndarray]
    rigids: list[np.ndarray]
    deformables: list[np.ndarray]
    targets: list[np.ndarray]


@dataclass
class Trajectory:
    """One autoregressive trajectory: deformables [(T, N_m, 3)], rigids [(T, R_k, 3)] (loads derived per frame)."""

    deformables: list[np.ndarray]
    rigids: list[np.ndarray]
    meta: dict = field(default_factory=dict)

    def frame_inputs(self, t: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """(loads [(R, 6)] = [p_t, p_{t+1} − p_t], rigids [(R, 3)], deformables [(N, 3)], targets [(N, 3)])."""
        loads = [np.concatenate([r[t], r[t + 1] - r[t]], -1) for r in self.rigids]
        return loads, [r[t] for r in self.rigids], [d[t] for d in self.deformables], \
            [d[t + 1] - d[t] for d in self.deformables]


def _stamping(s: _Sample, unilateral: bool) -> LongSample:
    defs, targets = [], []
    for m in ("metal", "rubber"):
        x0 = s.arr(f"init_{m}_pos", (None, 3))
        n = x0.shape[0]
        x1 = s.arr(f"final_{m}_pos", (n, 3))
        stress, peeq = s.arr(f"final_{m}_stress", (n,)), s.arr(f"final_{m}_peeq", (n,))
        defs.append(x0)
        targets.append(np.concatenate([x1 - x0, stress[:, None], peeq[:, None]], -1))
    if unilateral:
        fixed = s.arr("die_1_pos", (None, 3))
        moving = [s.arr(f"die_2-{i}_pos", (None, 6)) for i in range(1, 17)]
        rigids = [fixed] + [d[:, :3] for d in moving]
    else:
        moving = [s.arr(f"die_{i}_pos", (None, 6)) for i in (1, 2)]
        rigids = [d[:, :3] for d in moving]
    loads = [np.concatenate([d[:, :3], d[:, :3] + d[:, 3:]], -1) for d in moving]
    return LongSample(loads, rigids, defs, targets)


def _displacement_load(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    return np.concatenate([p0, p1 - p0], -1)


def long_time_view(dataset: str, sample: Mapping, where: str) -> LongSample:
    """The long-time sample of one official sample dict (see the module docstring)."""
    s = _Sample(sample, where)
    if dataset in ("bilateral_stamping", "unilateral_stamping"):
        return _stamping(s, dataset == "unilateral_stamping")
    if dataset == "deforming_plate":
        x = s.frames("deformable_solid_pos", 3, None)
        r = s.frames("rigid_solid_pos", 3, x.shape[0])
        stress = s.arr("deformable_solid_stress", (x.shape[0], x.shape[1]))
        t = int(np.argmax(np.linalg.norm(r - r[0], axis=-1).mean(-1)))  # frame of the largest actuator travel
        target = np.concatenate([x[t] - x[0], stress[t][:, None] / 1e3], -1)
        return LongSample([_displacement_load(r[0], r[t])], [r[0]], [x[0]], [target])
    if dataset == "cavity_grasping":
        x = s.frames("tissue_mesh_positions", 3, None)
        grips = [s.frames(f"gripper_position_{i}", 3, None) for i in (1, 2)]
        return LongSample([_displacement_load(g[0], g[-1]) for g in grips], [g[0] for g in grips], [x[0]],
                          [x[-1] - x[0]])
    if dataset == "tissue_manipulation":
        x = s.frames("tissue_mesh_positions", 3, None)
        g = s.frames("gripper_position", 3, None)
        grasp = _grasp(s)
        return LongSample([_displacement_load(g[0], g[-1]), _displacement_load(grasp, grasp)], [g[0], grasp],
                          [x[0]], [x[-1] - x[0]])
    raise DataError(f"{where}: dataset {dataset!r} has no long-time experiment (known: "
                    f"{sorted(e.dataset for e in EXPERIMENTS.values() if e.task == LONG)})")


def _grasp(s: _Sample) -> np.ndarray:
    """The tissue's fixed grasp point: any array of 3 floats -> (1, 3)."""
    if "grasping_position" not in s.s:
        raise DataError(f"{s.where}: key 'grasping_position' missing")
    g = np.asarray(s.s["grasping_position"])
    if g.dtype.kind != "f" or g.size != 3 or not np.all(np.isfinite(g)):
        raise DataError(f"{s.where}: key 'grasping_position' must hold 3 finite floats, got {g.dtype} {g.shape}")
    return g.reshape(1, 3).astype(np.float64)


def trajectory_view(dataset: str, sample: Mapping, frames: int, where: str) -> Trajectory:
    """The first ``frames`` frames of one official trajectory (see the module docstring)."""
    s = _Sample(sample, where)
    if dataset == "cavity_extruding":
        defs = [s.frames(f"cavity_{i}_pos", 3, frames) for i in (1, 2, 3)]
        rigids = [s.frames(f"gripper_{i}_pos", 3, frames) for i in (1, 2, 3, 4)]
    elif dataset == "cavity_grasping":
        defs = [s.frames("tissue_mesh_positions", 3, frames)]
        rigids = [s.frames(f"gripper_position_{i}", 3, frames) for i in (1, 2)]
    elif dataset == "rice_grip":
        defs = [s.frames("rice_positions", 3, frames)]
        rigids = [s.frames(f"gripper_{i}_positions", 3, frames) for i in (1, 2)]
    elif dataset == "tissue_manipulation":
        defs = [s.frames("tissue_mesh_positions", 3, frames)]
        rigids = [s.frames("gripper_position", 3, frames), np.repeat(_grasp(s)[None], frames, 0)]
    else:
        raise DataError(f"{where}: dataset {dataset!r} has no autoregressive experiment")
    return Trajectory(defs, rigids)


def experiment_frames(exp: Experiment, override: int | None) -> int | None:
    """Frames per trajectory of an autoregressive experiment (``paper.frames`` overrides the official count)."""
    return None if exp.task != AUTO else (override or exp.frames)


def convert(dataset: str, samples: Sequence[Mapping], task: str, frames: int | None, where: str
            ) -> list[LongSample] | list[Trajectory]:
    """Every sample of one file in ``task``'s view; errors name ``where``, the sample index and the key."""
    if task == LONG:
        return [long_time_view(dataset, s, f"{where}: sample {i}") for i, s in enumerate(samples)]
    return [trajectory_view(dataset, s, frames, f"{where}: sample {i}") for i, s in enumerate(samples)]


# ----------------------------------------------------------------------------------------------------------------
# Ragged npz layout (node counts may differ between samples: the arrays are concatenated along the node axis)
# ----------------------------------------------------------------------------------------------------------------
def pack(task: str, items: Sequence[LongSample] | Sequence[Trajectory]) -> dict[str, np.ndarray]:
    """``{f"{task}/{group}{i}": concatenated float32 array, f"{task}/{group}{i}_n": (S,) node counts}``; groups
    ``loads rigids deformables targets`` (long-time, node axis 0) or ``deformables rigids`` (trajectories, (T,
    ΣN, 3), node axis 1)."""
    groups = ("loads", "rigids", "deformables", "targets") if task == LONG else ("deformables", "rigids")
    axis = 0 if task == LONG else 1
    out: dict[str, np.ndarray] = {}
    for g in groups:
        for i in range(len(getattr(items[0], g))):
            arrs = [getattr(it, g)[i] for it in items]
            out[f"{task}/{g}{i}"] = np.concatenate(arrs, axis=axis).astype(np.float32)
            out[f"{task}/{g}{i}_n"] = np.array([a.shape[axis] for a in arrs], dtype=np.int64)
    return out


def unpack(task: str, arrays: Mapping[str, np.ndarray]) -> list[LongSample] | list[Trajectory]:
    """Inverse of :func:`pack` (float32 arrays)."""
    groups = ("loads", "rigids", "deformables", "targets") if task == LONG else ("deformables", "rigids")
    axis = 0 if task == LONG else 1
    per: dict[str, list[list[np.ndarray]]] = {}
    for g in groups:
        i, lists = 0, []
        while f"{task}/{g}{i}" in arrays:
            a, n = arrays[f"{task}/{g}{i}"], arrays[f"{task}/{g}{i}_n"]
            if int(n.sum()) != a.shape[axis]:
                raise DataError(f"{task}/{g}{i}: node counts sum to {int(n.sum())}, array has {a.shape[axis]}")
            lists.append(np.split(a, np.cumsum(n)[:-1], axis=axis))
            i += 1
        per[g] = [list(x) for x in zip(*lists)]
    n = len(per[groups[0]])
    if task == LONG:
        return [LongSample(per["loads"][j], per["rigids"][j], per["deformables"][j], per["targets"][j])
                for j in range(n)]
    return [Trajectory(per["deformables"][j], per["rigids"][j]) for j in range(n)]


# ----------------------------------------------------------------------------------------------------------------
# Normalisers (per entity and channel over the training set, as the official Normalizer)
# ----------------------------------------------------------------------------------------------------------------
def _mean_std(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = rows.reshape(-1, rows.shape[-1]).astype(np.float64)
    mean, std = rows.mean(0), rows.std(0)
    return mean, np.where(std > 1e-12, std, 1.0)


def fit_normalisers(task: str, items: Sequence[LongSample] | Sequence[Trajectory],
                    edge_lengths: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Mean/std per entity and channel over every node (and frame) of the training set: keys
    ``{group}{i}_mean|std`` for loads, rigids, deformables, targets, edges, and ``targets{i}_const`` (1 where a
    target channel is constant in training: it is predicted as that constant and left out of loss and metrics).
    ``edge_lengths``: per deformable, all training kNN edge lengths (E, 1)."""
    cols: dict[str, list[list[np.ndarray]]] = {g: [] for g in ("loads", "rigids", "deformables", "targets")}
    for it in items:
        frames = ([(it.loads, it.rigids, it.deformables, it.targets)] if task == LONG else
                  [it.frame_inputs(t) for t in range(it.deformables[0].shape[0] - 1)])
        for fr in frames:
            for g, xs in zip(cols, fr):
                if not cols[g]:
                    cols[g] = [[] for _ in xs]
                for i, x in enumerate(xs):
                    cols[g][i].append(x)
    out: dict[str, np.ndarray] = {}
    for g, lists in cols.items():
        for i, xs in enumerate(lists):
            rows = np.concatenate(xs, 0)
            out[f"{g}{i}_mean"], out[f"{g}{i}_std"] = _mean_std(rows)
            if g == "targets":
                out[f"targets{i}_const"] = (rows.max(0) - rows.min(0) <= 1e-12).astype(np.float64)
    for i, e in enumerate(edge_lengths):
        out[f"edges{i}_mean"], out[f"edges{i}_std"] = _mean_std(e)
    return out


def with_prefix(prefix: str, d: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": v for k, v in d.items()}


def strip_prefix(prefix: str, d: Mapping[str, Any]) -> dict[str, Any]:
    p = f"{prefix}/"
    return {k[len(p):]: v for k, v in d.items() if k.startswith(p)}
