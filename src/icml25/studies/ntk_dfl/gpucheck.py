"""gpu-check builder of ntk_dfl (issue 39; :mod:`icml25.core.gpucheck`): one synchronous NTK-DFL round of all
clients (:func:`~.method.ntk_dfl_round`: per client, the empirical NTK of the study's own :func:`~.model.mlp` on its
neighbourhood's data, the function-space evolution and the candidate weights) at the paper's sizes: ``n_clients``
clients of ``samples_per_client`` raw 784-pixel images, hidden ``hidden``, a random ``degree``-regular graph.
Steps per run: ``rounds``; runs: seeds of the ntk_dfl arm (the baselines' SGD rounds are far cheaper and not timed).
"""
from __future__ import annotations

from typing import Any

import torch

from icml25.core.gpucheck import Bench

from . import data as D
from .method import ntk_dfl_round
from .model import flat_weights, mlp

PIXELS = 784  #: raw Fashion-MNIST / MNIST inputs (data.pca_dim null at paper scale)


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    nt = config.ntk
    if shapes == "paper":
        K, n, hidden, degree = config.n_clients, config.samples_per_client or 200, config.hidden, config.degree
        d = config.data.pca_dim or PIXELS
    else:
        K, n, d, hidden, degree = 4, 5, 8, (4,), 2
    C = config.n_classes
    gen = torch.Generator().manual_seed(0)
    shards = [(torch.randn(n, d, generator=gen).to(device),
               torch.nn.functional.one_hot(torch.randint(0, C, (n,), generator=gen), C).float().to(device))
              for _ in range(K)]
    net = mlp(d, hidden, C).to(device)
    weights = flat_weights(net).to(device).unsqueeze(0).repeat(K, 1)
    graph = D.round_graph(config.topology, K, 0, 0, degree, config.er_p)

    def step() -> None:
        nonlocal weights
        weights, _ = ntk_dfl_round(weights, shards, graph, lambda: mlp(d, hidden, C).to(device), nt.lr0,
                                   nt.t_cand, nt.t_select, nt.ode, nt.chunk, nt.rtol, nt.atol)

    seeds = len(config.seeds) if "ntk_dfl" in config.arms else 0
    return Bench(model=f"NTK-DFL round, mlp {d}-{'-'.join(map(str, hidden))}-{C}, K={K} clients x {n}",
                 module=net, step=step, steps_per_run=config.rounds, runs=seeds,
                 note=f"a step = one round of all {K} clients; {config.rounds} rounds; {seeds} seeds of the ntk_dfl "
                      "arm (baselines not timed)")
