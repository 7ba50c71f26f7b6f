"""gpu-check builder of kernel_adaptation (issue 39; :mod:`icml25.core.gpucheck`): the study's own Langevin sampler
(:func:`~.langevin.langevin_sample`, float64, ``langevin.n_chains`` chains of the width-N two-layer network) on every
paper task's input dimension (ising / teacher: ``D``; digits03: 64 pixels; mnist03: 784), ``P`` train and
``P_test`` test points of synthetic data scaled so that the step guard passes. One gpu-check "step" is
:data:`BLOCK` Langevin steps of every task (the sampler's own loop, thinning and trace included); steps per run:
``langevin.n_steps / BLOCK`` per chi value; runs: seeds x chi values (the task sum is inside the step).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from icml25.core.gpucheck import Bench

from .langevin import langevin_sample

BLOCK = 1000  #: Langevin steps per timed call (the sampler's trace window)
TASK_DIMS = {"digits03": 64, "mnist03": 784}  #: input dimensions of the image tasks (8x8, 28x28 pixels)


class _Chains(torch.nn.Module):
    """The sampled state (W̃ (C,N,D), ṽ (C,N)) per task, for the parameter count only."""

    def __init__(self, shapes: list[tuple[int, int, int]]) -> None:
        super().__init__()
        self.state = torch.nn.ParameterList(torch.nn.Parameter(torch.empty(c, n, d + 1), requires_grad=False)
                                            for c, n, d in shapes)


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    lv = config.langevin
    if shapes == "paper":
        N, P, P_test, chains, block = config.N, config.P, config.P_test, lv.n_chains, BLOCK
        dims = [TASK_DIMS.get(t, config.D) for t in config.tasks]
    else:
        N, P, P_test, chains, block, dims = 8, 10, 5, 2, 50, [5]
    rng = np.random.default_rng(0)
    data = []
    for d in dims:
        X = rng.standard_normal((P + P_test, d)) / np.sqrt(d)
        data.append((X[:P], np.sign(X[:P, 0]) + 0.0, X[P:]))

    def step() -> None:
        for X, y, X_test in data:
            langevin_sample(X, y, X_test, N, float(N), g_v=config.g_v, g_w=config.g_w, kappa0=config.kappa0,
                            lr=lv.lr, n_steps=block, n_chains=chains, burn_in=lv.burn_in, thin=lv.thin, seed=0,
                            device=device.type, threads=None, max_step_curvature=lv.max_step_curvature)

    n_chi = len(config.chi_exponents)
    return Bench(model=f"Langevin 2-layer N={N}, {chains} chains, D={dims}", module=_Chains([(chains, N, d)
                                                                                            for d in dims]),
                 step=step, steps_per_run=max(1, lv.n_steps // block), runs=len(config.seeds) * n_chi,
                 count_all=True,
                 note=f"a step = {block} Langevin steps of each of {len(dims)} tasks; {lv.n_steps} steps per chi; "
                      f"{len(config.seeds)} seeds x {n_chi} chi values")
