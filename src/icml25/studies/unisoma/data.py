"""Data of the unisoma study: the 2-D mass–spring bilateral-stamping simulator [R], the official pickle schema,
the restricted pickle loader, the npz conversion and the per-entity normalisers.

Official Unisoma data (ICML 2025, Sec. 5 and the official README) are pickles: a list of dicts, one per
sample, with float arrays per entity. Unpickling an untrusted file can execute code, so this module reads pickles
only through :func:`load_pickle_restricted`, whose ``find_class`` admits exactly the numpy globals an array pickle
needs. Downstream code reads ``.npz`` files with ``allow_pickle=False``.

The simulator writes the same schema (protocol 4, so arrays reduce through ``_reconstruct``):
``init_metal_pos`` (N_m, 3), ``init_rubber_pos`` (N_r, 3), ``die_{1,2}_pos`` (R_k, 6) = [position, displacement],
``final_{metal,rubber}_pos`` (N, 3), ``final_{metal,rubber}_{stress,peeq}`` (N,); float32, z = 0.
"""
from __future__ import annotations

import io
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import scipy.sparse as sp

#: Deformables and dies of the bilateral-stamping schema, in model order.
DEFORMABLES = ("metal", "rubber")
DIES = ("die_1", "die_2")
SCHEMA_KEYS = {
    "bilateral_stamping": (
        "init_metal_pos", "init_rubber_pos", "die_1_pos", "die_2_pos", "final_metal_pos", "final_rubber_pos",
        "final_metal_stress", "final_rubber_stress", "final_metal_peeq", "final_rubber_peeq"),
}
#: Globals an ndarray pickle needs (numpy 1.x and 2.x module paths); everything else is refused. ``_frombuffer``
#: is how numpy reduces an array under pickle protocol 5 (an array from bytes, dtype, shape and order: no code).
ALLOWED_GLOBALS = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"),
})
MAX_PICKLE_BYTES = 2 * 1024 ** 3


class DataError(ValueError):
    """A data file breaks the schema (the message names the file, the sample and the key)."""


# ----------------------------------------------------------------------------------------------------------------
# Restricted pickle loading
# ----------------------------------------------------------------------------------------------------------------
class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves only :data:`ALLOWED_GLOBALS`; any other global raises before it is imported."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a data pickle")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids are not allowed in a data pickle")


def restricted_loads(payload: bytes) -> Any:
    """Unpickle ``payload`` with :class:`_RestrictedUnpickler` (no schema check)."""
    return _RestrictedUnpickler(io.BytesIO(payload)).load()


def _expected_shapes(sample: Mapping[str, np.ndarray]) -> dict[str, tuple]:
    n = {m: sample[f"init_{m}_pos"].shape[0] if np.ndim(sample.get(f"init_{m}_pos")) == 2 else None
         for m in DEFORMABLES}
    shapes: dict[str, tuple] = {}
    for m in DEFORMABLES:
        shapes[f"init_{m}_pos"] = (None, 3)
        shapes[f"final_{m}_pos"] = (n[m], 3)
        shapes[f"final_{m}_stress"] = (n[m],)
        shapes[f"final_{m}_peeq"] = (n[m],)
    for d in DIES:
        shapes[f"{d}_pos"] = (None, 6)
    return shapes


def validate_samples(data: Any, schema: str = "bilateral_stamping", where: str = "data") -> list[dict]:
    """Check the schema: a non-empty list of dicts with exactly the schema's keys, every value a finite float
    ndarray of the expected rank and shape (node counts agree between initial and final arrays).

    Returns the list (values as float32 arrays); raises :class:`DataError` naming ``where``, the sample and key.
    """
    if schema not in SCHEMA_KEYS:
        raise DataError(f"{where}: unknown schema {schema!r} (known: {sorted(SCHEMA_KEYS)})")
    keys = set(SCHEMA_KEYS[schema])
    if not isinstance(data, list) or not data:
        raise DataError(f"{where}: top level must be a non-empty list of dicts, got {type(data).__name__}")
    out = []
    for i, sample in enumerate(data):
        if not isinstance(sample, dict):
            raise DataError(f"{where}: sample {i} is a {type(sample).__name__}, not a dict")
        if set(sample) != keys:
            missing, extra = sorted(keys - set(sample)), sorted(map(str, set(sample) - keys))
            raise DataError(f"{where}: sample {i} keys differ from schema {schema!r}: missing {missing}, "
                            f"unexpected {extra}")
        for key, value in sample.items():
            if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
                raise DataError(f"{where}: sample {i} key {key!r} must be a float ndarray, got "
                                f"{type(value).__name__} {getattr(value, 'dtype', '')}")
        for key, shape in _expected_shapes(sample).items():
            value = sample[key]
            if value.ndim != len(shape) or any(s is not None and s != v for s, v in zip(shape, value.shape)) \
                    or value.shape[0] == 0:
                raise DataError(f"{where}: sample {i} key {key!r} has shape {value.shape}, expected "
                                f"{tuple('N' if s is None else s for s in shape)}")
            if not np.all(np.isfinite(value)):
                raise DataError(f"{where}: sample {i} key {key!r} has non-finite values")
        out.append({k: np.asarray(v, dtype=np.float32) for k, v in sample.items()})
    return out


def load_pickle_restricted(path: str | Path, schema: str = "bilateral_stamping", *,
                           max_pickle_bytes: int = MAX_PICKLE_BYTES) -> list[dict[str, np.ndarray]]:
    """Load an official Unisoma pickle safely: size check, restricted unpickling (only the numpy array globals of
    :data:`ALLOWED_GLOBALS`), then schema validation (:func:`validate_samples`).

    Returns a list of ``{key: float32 ndarray}``; raises :class:`pickle.UnpicklingError` on a forbidden global and
    :class:`DataError` on a schema or size violation, naming ``path``.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > max_pickle_bytes:
        raise DataError(f"{path}: {size} bytes exceeds max_pickle_bytes={max_pickle_bytes}")
    try:
        data = restricted_loads(path.read_bytes())
    except pickle.UnpicklingError as exc:
        raise pickle.UnpicklingError(f"{path}: {exc}") from None
    except Exception as exc:  # truncated/corrupt payloads raise EOFError, ValueError, ...
        raise DataError(f"{path}: not a readable data pickle ({type(exc).__name__}: {exc})") from None
    return validate_samples(data, schema, where=str(path))


def dump_pickle(samples: list[dict[str, np.ndarray]], path: str | Path) -> None:
    """Write samples in the official schema (protocol 4: arrays reduce through ``_reconstruct``), atomically."""
    from icml25.core.io import atomic_path

    with atomic_path(Path(path)) as tmp, open(tmp, "wb") as fh:
        pickle.dump(samples, fh, protocol=4)


# ----------------------------------------------------------------------------------------------------------------
# npz conversion and normalisers
# ----------------------------------------------------------------------------------------------------------------
def stack_samples(samples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Stack per-sample arrays into ``{key: (S, ...)}`` (node counts must agree across samples)."""
    out = {}
    for key in samples[0]:
        shapes = {s[key].shape for s in samples}
        if len(shapes) != 1:
            raise DataError(f"{key}: node counts vary across samples {sorted(shapes)}; the npz layout needs one")
        out[key] = np.stack([s[key] for s in samples]).astype(np.float32)
    return out


def unstack_samples(arrays: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Inverse of :func:`stack_samples`."""
    n = len(next(iter(arrays.values())))
    return [{k: np.asarray(v[i]) for k, v in arrays.items()} for i in range(n)]


def model_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, list[np.ndarray]]:
    """Split stacked schema arrays into model inputs/targets.

    Returns ``loads`` [(S, R_k, 6)], ``rigids`` [(S, R_k, 3)], ``deformables`` [(S, N_m, 3)] (initial positions),
    ``targets`` [(S, N_m, 5)] = [final − initial position, stress, PEEQ], ``final_pos`` [(S, N_m, 3)].
    """
    loads, rigids, defs, targets, final = [], [], [], [], []
    for d in DIES:
        p = arrays[f"{d}_pos"]
        rigids.append(p[..., :3])
        loads.append(np.concatenate([p[..., :3], p[..., :3] + p[..., 3:6]], axis=-1))
    for m in DEFORMABLES:
        x0, x1 = arrays[f"init_{m}_pos"], arrays[f"final_{m}_pos"]
        defs.append(x0)
        final.append(x1)
        targets.append(np.concatenate([x1 - x0, arrays[f"final_{m}_stress"][..., None],
                                       arrays[f"final_{m}_peeq"][..., None]], axis=-1))
    return {"loads": loads, "rigids": rigids, "deformables": defs, "targets": targets, "final_pos": final}


def _mean_std(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
    mean, std = flat.mean(0), flat.std(0)
    return mean, np.where(std > 1e-12, std, 1.0)  # a constant channel (rubber PEEQ = 0) is centred only


def fit_normalisers(train: Mapping[str, list[np.ndarray]], edge_lengths: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-entity, per-channel mean and std over the training set of inputs, edge lengths and targets (spec
    "Method: normalisation"). Keys ``{group}{i}_mean|std`` for groups loads/rigids/deformables/targets/edges, and
    ``targets{i}_const`` (1 where a target channel is constant over the training set, e.g. the rubber's PEEQ)."""
    out: dict[str, np.ndarray] = {}
    for group in ("loads", "rigids", "deformables", "targets"):
        for i, x in enumerate(train[group]):
            out[f"{group}{i}_mean"], out[f"{group}{i}_std"] = _mean_std(x)
    for i, t in enumerate(train["targets"]):
        flat = t.reshape(-1, t.shape[-1])
        out[f"targets{i}_const"] = (flat.max(0) - flat.min(0) <= 1e-12).astype(np.float64)
    for i, e in enumerate(edge_lengths):
        out[f"edges{i}_mean"], out[f"edges{i}_std"] = _mean_std(e)
    return out


# ----------------------------------------------------------------------------------------------------------------
# The 2-D mass–spring stamping simulator [R]
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimParams:
    """Simulator constants (spec "Simulator" [R]); units are arbitrary but consistent (length, mass 1/N, time)."""

    metal_nodes: tuple[int, int] = (25, 3)       # (nx, ny) of the metal sheet
    metal_size: tuple[float, float] = (1.0, 0.04)
    rubber_nodes: tuple[int, int] = (25, 6)
    rubber_size: tuple[float, float] = (1.0, 0.15)
    die_nodes: int = 20
    k_metal: float = 50.0
    k_rubber: float = 2.0
    yield_strain: float = 0.01
    contact_k: float = 200.0
    load_steps: int = 200
    hold_steps: int = 50
    dt: float = 1e-3
    damping: float = 0.02
    gap: float = 0.005                           # initial clearance between each die and the stack


def _grid(nx: int, ny: int, w: float, h: float, y0: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (nx*ny, 2) of a triangulated rectangle and its springs (E, 2): every triangle edge once."""
    xs, ys = np.linspace(0.0, w, nx), np.linspace(y0, y0 + h, ny)
    pos = np.stack(np.meshgrid(xs, ys, indexing="xy"), -1).reshape(-1, 2)   # row-major: j * nx + i
    idx = np.arange(nx * ny).reshape(ny, nx)
    springs = [np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),       # horizontal
               np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1),       # vertical
               np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()], 1)]    # one diagonal per quad
    return pos, np.concatenate(springs)


def sample_loads(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Random die shapes and motions for ``n`` samples (spec "Dies" and "Loads")."""
    return {"amp": rng.uniform(0.02, 0.08, n), "centre": rng.uniform(0.35, 0.65, n),
            "width": rng.uniform(0.08, 0.2, n), "dx": rng.uniform(-0.02, 0.02, n),
            "d1": rng.uniform(0.04, 0.10, n), "d2": rng.uniform(0.0, 0.03, n)}


def sim_params(sim: Any) -> SimParams:
    """:class:`SimParams` from the config's ``sim`` section."""
    return SimParams(load_steps=sim.load_steps, hold_steps=sim.hold_steps, dt=sim.dt, damping=sim.damping,
                     k_metal=sim.k_metal, k_rubber=sim.k_rubber, yield_strain=sim.yield_strain,
                     contact_k=sim.contact_k)


def simulate(loads: Mapping[str, np.ndarray], params: SimParams = SimParams()) -> list[dict[str, np.ndarray]]:
    """Simulate a batch of stamping samples (vectorised over samples) and return them in the official schema.

    ``loads``: arrays (S,) ``amp, centre, width`` (die-1 Gaussian bump), ``dx, d1`` (die-1 motion (dx, −d1)),
    ``d2`` (die-2 motion (0, d2)). Dies move linearly over ``load_steps`` and hold for ``hold_steps``; the output is
    the state at the end of the hold. Damped symplectic Euler; linear springs with force k·ε; the metal is
    elastic–perfectly-plastic (rest lengths move past ``yield_strain``; node PEEQ accumulates the mean plastic
    strain increment of its incident springs); contacts are vertical penalties (``contact_k`` per unit
    penetration) of a node through a die polyline or, for the metal's bottom row, the rubber's top surface [R].
    """
    p = params
    s = len(loads["amp"])
    (mnx, mny), (rnx, rny) = p.metal_nodes, p.rubber_nodes
    rub0, rub_e = _grid(rnx, rny, *p.rubber_size, 0.0)
    met0, met_e = _grid(mnx, mny, *p.metal_size, p.rubber_size[1])
    n_r, n_m = len(rub0), len(met0)
    pos0 = np.concatenate([met0, rub0])                       # metal nodes first, then rubber
    springs = np.concatenate([met_e, rub_e + n_m])
    n, e = len(pos0), len(springs)
    is_metal_spring = np.arange(e) < len(met_e)
    k = np.where(is_metal_spring, p.k_metal, p.k_rubber)
    mass = np.concatenate([np.full(n_m, 1.0 / n_m), np.full(n_r, 1.0 / n_r)])
    rest0 = np.linalg.norm(pos0[springs[:, 1]] - pos0[springs[:, 0]], axis=1)
    omega_dt = np.max(np.sqrt(k / (rest0 * np.minimum(mass[springs[:, 0]], mass[springs[:, 1]])))) * p.dt
    assert omega_dt <= 0.6, f"simulator unstable: max sqrt(k/(L0 m)) dt = {omega_dt:.3f} > 0.6"
    # incidence (N, E): +1 at the first node, -1 at the second; node force = B @ spring force along (x1 - x0)
    rows, cols = springs.T.ravel(), np.tile(np.arange(e), 2)
    signs = np.concatenate([np.ones(e), -np.ones(e)])
    inc = sp.csr_matrix((signs, (rows, cols)), shape=(n, e))
    absinc = sp.csr_matrix((np.ones(2 * e), (rows, cols)), shape=(n, e))
    degree = np.asarray(absinc.sum(1)).ravel()
    metal_plastic_mean = sp.csr_matrix(absinc.multiply(is_metal_spring[None, :]).multiply(1.0 / degree[:, None]))

    # dies: 20-node polylines over x in [-0.1, 1.1]; die 1 (punch) above with a downward Gaussian bump
    top, bottom = p.rubber_size[1] + p.metal_size[1], 0.0
    dxs = np.linspace(-0.1, 1.1, p.die_nodes)
    amp, c, w = (loads[key][:, None] for key in ("amp", "centre", "width"))
    die1_y = top + p.gap + amp - amp * np.exp(-0.5 * ((dxs[None] - c) / w) ** 2)     # (S, R)
    die2_y = bottom - p.gap - 0.01 * (1.0 - np.cos(np.pi * (dxs[None] - 0.5))) * np.ones((s, 1))
    disp1 = np.stack([loads["dx"], -loads["d1"]], -1)          # (S, 2)
    disp2 = np.stack([np.zeros(s), loads["d2"]], -1)

    x = np.repeat(pos0[None], s, 0)                            # (S, N, 2)
    v = np.zeros_like(x)
    rest = np.repeat(rest0[None], s, 0)                        # (S, E)
    peeq = np.zeros((s, n))
    metal_bottom = np.arange(mnx)                              # metal row 0
    rubber_top = n_m + np.arange((rny - 1) * rnx, rny * rnx)   # rubber last row
    h = dxs[1] - dxs[0]
    total = p.load_steps + p.hold_steps

    def die_height(xq: np.ndarray, ys: np.ndarray, shift: np.ndarray) -> np.ndarray:
        """Height (S, Nq) of a die polyline (S, R) translated by shift (S, 2) at query x (S, Nq)."""
        u = np.clip((xq - shift[:, :1] - dxs[0]) / h, 0, p.die_nodes - 1 - 1e-9)
        i = u.astype(int)
        f = u - i
        return np.take_along_axis(ys, i, 1) * (1 - f) + np.take_along_axis(ys, i + 1, 1) * f + shift[:, 1:]

    for step in range(1, total + 1):
        frac = min(step, p.load_steps) / p.load_steps
        sh1, sh2 = disp1 * frac, disp2 * frac
        d = x[:, springs[:, 1]] - x[:, springs[:, 0]]          # (S, E, 2)
        length = np.linalg.norm(d, axis=-1)
        strain = length / rest - 1.0
        # elastic-perfectly-plastic metal: move the rest length back to the yield surface
        excess = np.where(is_metal_spring[None], np.abs(strain) - p.yield_strain, 0.0)
        plastic = np.maximum(excess, 0.0)
        if plastic.any():
            yielded = plastic > 0
            rest = np.where(yielded, length / (1.0 + np.sign(strain) * p.yield_strain), rest)
            strain = np.where(yielded, np.sign(strain) * p.yield_strain, strain)
            peeq += (metal_plastic_mean @ plastic.T).T
        fvec = (k[None] * strain / np.maximum(length, 1e-12))[..., None] * d     # pulls node 0 towards node 1
        force = np.stack([(inc @ fvec[..., j].T).T for j in range(2)], -1)      # (S, N, 2)
        # die contacts (vertical penalty): die 1 from above, die 2 from below, on every deformable node
        pen1 = x[..., 1] - die_height(x[..., 0], die1_y, sh1)
        force[..., 1] -= p.contact_k * np.maximum(pen1, 0.0)
        pen2 = die_height(x[..., 0], die2_y, sh2) - x[..., 1]
        force[..., 1] += p.contact_k * np.maximum(pen2, 0.0)
        # metal bottom row through the rubber's top surface (reaction shared by the segment's two nodes)
        rx, ry = x[:, rubber_top, 0], x[:, rubber_top, 1]       # (S, 25)
        mx, my = x[:, metal_bottom, 0], x[:, metal_bottom, 1]
        seg = np.clip((mx[..., None] >= rx[:, None, :]).sum(-1) - 1, 0, rnx - 2)   # (S, 25)
        x0s, x1s = np.take_along_axis(rx, seg, 1), np.take_along_axis(rx, seg + 1, 1)
        t = np.clip((mx - x0s) / np.maximum(x1s - x0s, 1e-12), 0.0, 1.0)
        surf = np.take_along_axis(ry, seg, 1) * (1 - t) + np.take_along_axis(ry, seg + 1, 1) * t
        fc = p.contact_k * np.maximum(surf - my, 0.0)          # (S, 25) upward on metal
        force[:, metal_bottom, 1] += fc
        flat = (np.arange(s)[:, None] * rnx + seg).ravel()
        reac = (np.bincount(flat, -(fc * (1 - t)).ravel(), s * rnx)
                + np.bincount(flat + 1, -(fc * t).ravel(), s * rnx)).reshape(s, rnx)
        force[:, rubber_top, 1] += reac
        v = (v + p.dt * force / mass[None, :, None]) * (1.0 - p.damping)
        x = x + p.dt * v

    d = x[:, springs[:, 1]] - x[:, springs[:, 0]]
    strain = np.linalg.norm(d, axis=-1) / rest - 1.0
    stress = (absinc @ (k[None] * np.abs(strain)).T).T / degree[None]

    die_disp1, die_disp2 = disp1, disp2
    out = []
    for j in range(s):
        def pad(a: np.ndarray) -> np.ndarray:
            return np.concatenate([a, np.zeros((len(a), 1))], 1).astype(np.float32)

        d1 = np.stack([dxs, die1_y[j]], 1)
        d2 = np.stack([dxs, die2_y[j]], 1)
        out.append({
            "init_metal_pos": pad(pos0[:n_m]), "init_rubber_pos": pad(pos0[n_m:]),
            "die_1_pos": np.concatenate([pad(d1), pad(np.repeat(die_disp1[j][None], len(dxs), 0))], 1),
            "die_2_pos": np.concatenate([pad(d2), pad(np.repeat(die_disp2[j][None], len(dxs), 0))], 1),
            "final_metal_pos": pad(x[j, :n_m]), "final_rubber_pos": pad(x[j, n_m:]),
            "final_metal_stress": stress[j, :n_m].astype(np.float32),
            "final_rubber_stress": stress[j, n_m:].astype(np.float32),
            "final_metal_peeq": peeq[j, :n_m].astype(np.float32),
            "final_rubber_peeq": peeq[j, n_m:].astype(np.float32),
        })
    return out


def generate_split(seed: int, n: int, params: SimParams = SimParams()) -> list[dict[str, np.ndarray]]:
    """``n`` simulated samples whose loads are drawn from ``numpy.random.default_rng(seed)``."""
    return simulate(sample_loads(np.random.default_rng(seed), n), params)


def generate_dataset(seed: int, sizes: Mapping[str, int], params: SimParams = SimParams()
                     ) -> dict[str, list[dict[str, np.ndarray]]]:
    """Train/eval/test splits from independent streams of one data seed (the same data for every model seed)."""
    seqs = np.random.SeedSequence(seed).spawn(len(sizes))
    return {split: simulate(sample_loads(np.random.default_rng(sq), n), params)
            for (split, n), sq in zip(sizes.items(), seqs)}


def node_counts(samples: Iterable[Mapping[str, np.ndarray]]) -> dict[str, int]:
    """Node counts of the first sample per entity (logged by the download stage)."""
    first = next(iter(samples))
    return {**{m: int(first[f"init_{m}_pos"].shape[0]) for m in DEFORMABLES},
            **{d: int(first[f"{d}_pos"].shape[0]) for d in DIES}}


def file_size(path: str | Path) -> int:
    return os.path.getsize(path)
