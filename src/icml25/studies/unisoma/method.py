"""Mechanism checks of Unisoma (spec claims 2–4): permutation equivariance per entity (Sec. 3.2: slicing is a
weighted sum over nodes, deslicing is per node), adaptive allocation (Sec. 3.3: softmax weights over K items; K = 1
bypassed), variable entity counts with one class, and the restricted pickle loader's safety and round trip.
"""
from __future__ import annotations

import copy
import os
import pickle
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from .data import DataError, dump_pickle, load_pickle_restricted
from .model import AllocationBlock, Unisoma, UnisomaConfig, allocate, allocation_weights, knn_edges


def _edges(cfg: UnisomaConfig, defs, k: int):
    return [knn_edges(d, k) for d in defs] if cfg.use_edge else None


@torch.no_grad()
def equivariance_deviation(model: Unisoma, loads, rigids, defs, *, k: int = 3, seed: int = 0
                           ) -> dict[str, float]:
    """Permute the nodes of every entity in turn (loads, rigids, deformables) in float64 and measure:
    ``self``: max |out_perm[m] − out[m][perm]| for a permuted deformable m; ``others``: max |Δ| of every other
    deformable's output; ``tokens``: max |Δ| of the permuted entity's slice tokens. Edges are rebuilt from the
    permuted positions, as the pipeline does. Inputs are lists of (B, R, 6), (B, R, 3), (B, N, 3) tensors."""
    model = copy.deepcopy(model).double().eval()
    loads, rigids, defs = ([x.double() for x in xs] for xs in (loads, rigids, defs))
    cfg, gen = model.cfg, torch.Generator().manual_seed(seed)
    base = model(loads, rigids, defs, _edges(cfg, defs, k))
    base_tok = model.tokens(loads, rigids, defs, _edges(cfg, defs, k))
    dev = {"self": 0.0, "others": 0.0, "tokens": 0.0}
    groups = (("loads", loads, 0), ("rigids", rigids, 1), ("deformables", defs, 2))
    for gname, group, tok_i in groups:
        for j, x in enumerate(group):
            perm = torch.randperm(x.shape[1], generator=gen)
            new = {g: list(v) for g, v, _ in groups}
            new[gname][j] = x[:, perm]
            out = model(new["loads"], new["rigids"], new["deformables"], _edges(cfg, new["deformables"], k))
            tok = model.tokens(new["loads"], new["rigids"], new["deformables"],
                               _edges(cfg, new["deformables"], k))
            dev["tokens"] = max(dev["tokens"], float((tok[tok_i][j] - base_tok[tok_i][j]).abs().max()))
            for m, (o, b) in enumerate(zip(out, base)):
                if gname == "deformables" and m == j:
                    dev["self"] = max(dev["self"], float((o - b[:, perm]).abs().max()))
                else:
                    dev["others"] = max(dev["others"], float((o - b).abs().max()))
    return dev


def random_inputs(cfg: UnisomaConfig, nodes: Mapping[str, list[int]], batch: int = 2, seed: int = 0,
                  dtype: torch.dtype = torch.float64):
    """Random (loads, rigids, deformables) for entity node counts ``nodes = {"loads": [...], "rigids": [...],
    "deformables": [...]}``."""
    g = torch.Generator().manual_seed(seed)
    loads = [torch.randn(batch, n, 6, generator=g, dtype=dtype) for n in nodes["loads"]]
    rigids = [torch.randn(batch, n, 3, generator=g, dtype=dtype) for n in nodes["rigids"]]
    defs = [torch.randn(batch, n, 3, generator=g, dtype=dtype) for n in nodes["deformables"]]
    return loads, rigids, defs


@torch.no_grad()
def allocation_check(proj: torch.nn.Linear, width: int, seed: int = 0) -> dict:
    """Max |Σ_k α_k − 1| over tokens and channels for K = 2..5 random items through ``proj``; whether K = 1 returns
    its input bitwise (both :func:`allocate` and :class:`AllocationBlock`); and which entity-count configurations
    1/1/1, 2/2/2, 4/4/3 (random node counts) run through one :class:`Unisoma` class with the right output shapes."""
    g = torch.Generator().manual_seed(seed)
    dev = 0.0
    for k in range(2, 6):
        items = [torch.randn(3, 7, width, generator=g, dtype=proj.weight.dtype) for _ in range(k)]
        dev = max(dev, float((allocation_weights(items, proj).sum(0) - 1).abs().max()))
    x = torch.randn(3, 7, width, generator=g)
    block = AllocationBlock(width, ffn=True)
    bypass = allocate([x], proj) is x and torch.equal(block([x]), x)
    counts = {}
    for nl, nr, nd in ((1, 1, 1), (2, 2, 2), (4, 4, 3)):
        cfg = UnisomaConfig(n_loads=nl, n_rigids=nr, n_deformables=nd, width=16, n_slices=4, n_layers=1, n_heads=2)
        sizes = torch.randint(5, 30, (nl + nr + nd,), generator=g).tolist()
        nodes = {"loads": sizes[:nl], "rigids": sizes[nl:nl + nr], "deformables": sizes[nl + nr:]}
        loads, rigids, defs = random_inputs(cfg, nodes, dtype=torch.float32, seed=seed)
        out = Unisoma(cfg)(loads, rigids, defs, [knn_edges(d) for d in defs])
        counts[f"{nl}/{nr}/{nd}"] = (len(out) == nd and all(o.shape == (2, n, 5) and bool(torch.isfinite(o).all())
                                                            for o, n in zip(out, nodes["deformables"])))
    return {"sum_dev": dev, "bypass_bitwise": bool(bypass), "counts_run": counts}


class _Sentinel:
    """Pickles into a call that creates a file: the proof a loader executed code."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def malicious_pickle(sentinel: str | Path) -> bytes:
    """A pickle whose loading (by plain ``pickle.load``) would create the directory ``sentinel``."""
    return pickle.dumps([{"init_metal_pos": _Sentinel(str(sentinel))}], protocol=4)


def ordered_dict_pickle() -> bytes:
    """A pickle of a valid-looking sample held in an ``OrderedDict`` (a global outside the allow-list)."""
    return pickle.dumps([OrderedDict(a=np.zeros((2, 3), np.float32))], protocol=4)


def data_safety_check(samples: list[dict[str, np.ndarray]], stacked: Mapping[str, np.ndarray] | None = None
                      ) -> dict[str, bool]:
    """Write ``samples`` as a pickle, load it through the restricted loader and compare (and with ``stacked``,
    the npz arrays made from the pickle by preprocess); feed a malicious and an OrderedDict pickle and confirm they
    are rejected without side effects."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "roundtrip.pkl")
        dump_pickle(samples, path)
        back = load_pickle_restricted(path)
        equal = len(back) == len(samples) and all(
            set(a) == set(b) and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
            for a, b in zip(samples, back))
        if stacked is not None:
            equal = equal and all(np.array_equal(stacked[k][i], s[k]) for i, s in enumerate(back) for k in s)
        sentinel = Path(tmp, "pwned")
        bad = Path(tmp, "bad.pkl")
        bad.write_bytes(malicious_pickle(sentinel))
        try:
            load_pickle_restricted(bad)
            rejected = False
        except (pickle.UnpicklingError, DataError):
            rejected = True
        bad.write_bytes(ordered_dict_pickle())
        try:
            load_pickle_restricted(bad)
            od_rejected = False
        except pickle.UnpicklingError:
            od_rejected = True
        return {"roundtrip_equal": bool(equal), "malicious_rejected": rejected,
                "side_effect_absent": not sentinel.exists(), "ordered_dict_rejected": od_rejected}
