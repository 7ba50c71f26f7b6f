"""One run end to end in memory: the long-tailed split of a seed and profile, then one arm trained and evaluated."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import data as D
from .train import train_arm


def make_split(settings: Mapping[str, Any], seed: int, profile: str) -> dict:
    """The long-tailed MNIST-5k split of ``seed`` and ``profile`` with the config's counts (``data`` section)."""
    d = settings["data"]
    return D.mnist_lt(seed, profile, d["n_max"], d["gamma_l"], d["m_max"], d["gamma_u"], d["uniform_per_class"])


def run(settings: Mapping[str, Any], arm: str, seed: int, profile: str = "consistent", split: Mapping | None = None,
        log=None) -> dict[str, Any]:
    """Train and evaluate ``arm`` with ``seed`` on the ``profile`` split (built here unless given).

    Returns ``curves`` (one dict of losses and test metrics per evaluation, key ``iteration``), ``final`` (the EMA
    model's test metrics at the end, with per-sample DEA weights ``w`` for the DEA arms), ``profile_estimate``,
    ``state_dict`` and the identifiers ``arm``, ``seed``, ``profile``."""
    split = split if split is not None else make_split(settings, seed, profile)
    out = train_arm(arm, split, settings, seed, log=log)
    return {"arm": arm, "seed": int(seed), "profile": profile, **out}
