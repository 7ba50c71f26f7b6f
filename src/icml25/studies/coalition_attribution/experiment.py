"""One arm x seed of the Table 4 toy experiment end to end, in memory (Sec. 5 of Zheng, Deng & Zhang, ICML 2025).

Arms: ``oracle`` (v(S) = f(1_S), gamma by LP), ``mlp`` (v(S) = f̂(1_S) of a trained MLP, gamma by LP) and
``mlp_adam`` (the same networks, gamma by the Adam ablation). Seeds index the target functions, their coalitions,
the MLP initialisation and the random gamma of the identity check.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .data import all_inputs, function_values, generate_functions, sample_coalitions
from .identities import identity_errors
from .method import banzhaf_from_interactions, faithfulness, interactions_from_gamma, l1_objective, \
    shapley_from_interactions, solve_gamma
from .train import fit_mlps

ARMS = ("oracle", "mlp", "mlp_adam")
METRICS = ("R", "R_prime", "Q")


def make_functions(settings: Mapping[str, Any], seed: int) -> tuple[list[dict], list[list[dict]]]:
    """The seed's target functions and, per function, its typed coalitions (rng ``default_rng([seed, 1])``)."""
    toy = settings["toy"]
    n = int(toy["n"])
    fns = generate_functions(seed, n, int(toy["n_functions"]), toy["m_range"], toy["order_range"],
                             toy["weight_range"])
    rng = np.random.default_rng([seed, 1])
    coals = [sample_coalitions(f, n, rng, toy["coalition_sizes"], int(toy["coalitions_per_type"])) for f in fns]
    return fns, coals


def make_games(settings: Mapping[str, Any], arm: str, seed: int, functions: list[dict]) -> dict[str, Any]:
    """Games (K, 2**n) of ``arm``: exact f for the oracle, the trained MLPs' outputs otherwise (with train info)."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; expected one of {ARMS}")
    x = all_inputs(int(settings["toy"]["n"]))
    exact = np.stack([function_values(f, x) for f in functions])
    if arm == "oracle":
        return {"values": exact}
    t0 = time.perf_counter()
    fit = fit_mlps(x, exact, settings["mlp"], seed)
    return {"values": fit["pred"], "rel_mse": fit["rel_mse"], "curve_step": fit["curve_step"],
            "curve_loss": fit["curve_loss"], "train_seconds": time.perf_counter() - t0, "model": fit["model"]}


def run(settings: Mapping[str, Any], arm: str, seed: int, games: Mapping[str, Any] | None = None,
        toy: tuple[list[dict], list[list[dict]]] | None = None) -> dict[str, Any]:
    """Run one arm x seed. ``games`` (from :func:`make_games`) may be passed to reuse trained MLPs across the mlp
    and mlp_adam arms (they are identical for a seed); ``toy`` = (functions, coalitions) of the seed (from
    :func:`make_functions`, e.g. read back from the preprocess stage's files). Returns a dict with

    * ``values`` (K, 2**n), ``gamma``, ``i_and``, ``i_or`` (K, 2**n); ``shapley``, ``banzhaf`` (K, n);
    * ``l1_objective`` (K,) at the learned gamma and ``l1_half_v`` (K,) at gamma = v/2;
    * ``identity_errors`` {"learned": {name: (K,)}, "random": {name: (K,)}} and ``vmax`` (K,) = max|v|;
    * ``coalitions``: {"function": (C,), "mask": (C,), "type": (C,) str, "R", "R_prime", "Q": (C,)};
    * for MLP arms ``rel_mse`` (K,), ``flagged`` (count above ``mlp.rel_mse_flag``), ``curve_step``, ``curve_loss``;
    * ``seconds`` per phase.
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; expected one of {ARMS}")
    gamma_cfg = settings["gamma"]
    if float(gamma_cfg.get("noise_bound", 0.0)) != 0.0:
        raise ValueError("gamma.noise_bound: only 0 (no noise term) is implemented")
    if not gamma_cfg.get("include_empty", True):
        raise ValueError("gamma.include_empty: only true (the empty set enters the objective) is implemented")
    secs: dict[str, float] = {}
    t0 = time.perf_counter()
    functions, coalitions = make_functions(settings, seed) if toy is None else toy
    if games is None:
        games = make_games(settings, arm, seed, functions)
    secs["games"] = time.perf_counter() - t0
    if "train_seconds" in games:
        secs["mlp_train"] = float(games["train_seconds"])
    v = np.asarray(games["values"], dtype=np.float64)

    t0 = time.perf_counter()
    if arm == "mlp_adam":
        gamma = solve_gamma(v, "adam", steps=int(gamma_cfg["adam_steps"]), lr_scale=float(gamma_cfg["adam_lr_scale"]))
    else:
        gamma = solve_gamma(v, gamma_cfg["solver"])
    i_and, i_or = interactions_from_gamma(v, gamma)
    secs["gamma"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, 2])
    g_rand = rng.normal(0.0, float(settings["identities"]["random_gamma_std"]), size=v.shape)
    r_and, r_or = interactions_from_gamma(v, g_rand)
    errors = {"learned": identity_errors(v, i_and, i_or), "random": identity_errors(v, r_and, r_or)}
    secs["identities"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    zero_tol = float(settings["faithfulness"]["zero_tol"])
    rows: dict[str, list] = {"function": [], "mask": [], "type": [], **{m: [] for m in METRICS}}
    for k, coal in enumerate(coalitions):
        for c in coal:
            f = faithfulness(i_and[k], i_or[k], c["mask"], zero_tol=zero_tol)
            rows["function"].append(k)
            rows["mask"].append(c["mask"])
            rows["type"].append(c["type"])
            for m in METRICS:
                rows[m].append(f[m])
    secs["faithfulness"] = time.perf_counter() - t0

    out: dict[str, Any] = {
        "arm": arm, "seed": int(seed), "functions": functions, "values": v, "gamma": gamma, "i_and": i_and,
        "i_or": i_or, "shapley": shapley_from_interactions(i_and, i_or),
        "banzhaf": banzhaf_from_interactions(i_and, i_or), "l1_objective": l1_objective(v, gamma),
        "l1_half_v": l1_objective(v, 0.5 * v), "identity_errors": errors, "vmax": np.abs(v).max(axis=-1),
        "coalitions": {"function": np.asarray(rows["function"], dtype=np.int64),
                       "mask": np.asarray(rows["mask"], dtype=np.int64), "type": np.asarray(rows["type"], dtype=str),
                       **{m: np.asarray(rows[m], dtype=np.float64) for m in METRICS}},
        "seconds": secs,
    }
    if "rel_mse" in games:
        out["rel_mse"] = np.asarray(games["rel_mse"])
        out["flagged"] = int((out["rel_mse"] > float(settings["mlp"]["rel_mse_flag"])).sum())
        out["curve_step"], out["curve_loss"] = games["curve_step"], games["curve_loss"]
    return out
