"""One arm × task × seed of the kernel_adaptation study, end to end in memory.

Arms: ``nngp``, ``rescaling`` (u fitted to the adaptive train means), ``rescaling_langevin`` (u fitted to the
Langevin train means), ``adaptive_tree`` (the method) and ``langevin`` (the sampled network ensemble, ground truth).
Every arm is evaluated on the χ grid N^e (e in ``chi_exponents``) snapped to the annealing path
geomspace(1, N, n_anneal), so the adaptive theory and the ensembles are compared at identical χ.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import method as M
from .data import make_task
from .langevin import langevin_sample, langevin_sample_many

ARMS = ("nngp", "rescaling", "rescaling_langevin", "adaptive_tree", "langevin")


def settings_from_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The plain settings :func:`run` reads, from the study's validated config (plain dict, ``core.config.to_dict``):
    the same keys, with ``prior_check`` = {n_chains, n_steps} when enabled and None otherwise."""
    out = dict(config)
    pc = dict(out.get("prior_check") or {})
    out["prior_check"] = ({"n_chains": pc["n_chains"], "n_steps": pc["n_steps"]}
                          if pc.get("enabled", True) and pc else None)
    sc = dict(out.get("step_check") or {})
    out["step_check"] = {"factor": int(sc.get("factor", 2))} if sc.get("enabled", False) else None
    return out


def chi_grid(settings: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(annealing path (n_anneal,), grid indices into it (G,), grid χ values (G,)): χ = N^e snapped to the path."""
    N = settings["N"]
    path = np.geomspace(1.0, float(N), int(settings["n_anneal"]))
    idx = np.array([int(np.argmin(np.abs(np.log(path) - e * np.log(N)))) for e in settings["chi_exponents"]])
    return path, idx, path[idx]


def task_data(settings: Mapping[str, Any], task: str, seed: int) -> dict[str, np.ndarray]:
    """The task instance of one pair (deterministic in ``seed``)."""
    return make_task(task, settings["D"], settings["P"], settings["P_test"], seed, J=settings.get("ising_J", 0.5))


def _observe(data: Mapping[str, np.ndarray], f_train: np.ndarray, f_test: np.ndarray, A: np.ndarray
             ) -> dict[str, float]:
    """Train/test discrepancy of the mean predictor and spike ratios along the label and teacher directions."""
    label_dir = data["X"].T @ data["y"]
    return {"eps_train": M.discrepancy(data["y"], f_train), "eps_test": M.discrepancy(data["y_test"], f_test),
            "r_label": M.spike_ratio(A, label_dir), "r_teacher": M.spike_ratio(A, data["teacher"])}


def _hyper(settings: Mapping[str, Any]) -> dict[str, float]:
    return {"g_v": settings["g_v"], "g_w": settings["g_w"], "kappa0": settings["kappa0"]}


def run(settings: Mapping[str, Any], arm: str, task: str, seed: int,
        upstream: Mapping[str, Mapping[str, Any]] | None = None,
        data: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Run one arm on one (task, seed) pair over the χ grid.

    ``data`` (X, y, X_test, y_test, teacher) is the pair's task instance, e.g. read back from the preprocess
    stage's file; by default it is generated from ``settings`` (:func:`task_data`).

    ``upstream`` may hold finished ``adaptive_tree`` / ``langevin`` results of the same pair that the rescaling
    arms fit to (they are recomputed otherwise). Returns ``{arm, task, seed, chi (G,), f_train (G,P),
    f_test (G,P*), A (G,D,D), metrics: list of G dicts (eps_train, eps_test, r_label, r_teacher, ...),
    runtime_s}`` plus arm-specific entries (adaptive: the whole path's min_eig, iterations, fixed-point residual
    and best-rescaling error; langevin: traces, posterior-variance discrepancy and the prior-only E[A]).
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; expected one of {ARMS}")
    t0 = time.perf_counter()
    upstream = dict(upstream or {})
    data = task_data(settings, task, seed) if data is None else data
    X, y, Xs = data["X"], data["y"], data["X_test"]
    N, D = int(settings["N"]), X.shape[1]
    hp = _hyper(settings)
    path, idx, chis = chi_grid(settings)
    out: dict[str, Any] = {"arm": arm, "task": task, "seed": int(seed), "chi": chis, "N": N, "D": D}
    f_tr, f_te, As, extra = [], [], [], [{} for _ in chis]

    if arm == "nngp":
        for chi in chis:
            a, b = M.nngp_predictor(X, y, Xs, chi, **hp)
            f_tr.append(a), f_te.append(b), As.append((hp["g_w"] / D) * np.eye(D))
    elif arm == "adaptive_tree":
        sol = M.anneal(X, y, N, path, damping=settings["damping"], tol=settings["tol"],
                       max_iter=settings["max_iter"], **hp)
        rescale_err = np.empty(len(path))
        for k, chi in enumerate(path):
            _, ft = M.adaptive_mean(sol["A"][k], X, y, Xs, chi, hp["g_v"], hp["kappa0"])
            rescale_err[k] = M.best_rescaling_error(X, y, Xs, ft, chi, **hp)[0]
        for g, k in enumerate(idx):
            a, b = M.adaptive_mean(sol["A"][k], X, y, Xs, path[k], hp["g_v"], hp["kappa0"])
            f_tr.append(a), f_te.append(b), As.append(sol["A"][k])
            extra[g]["residual"] = M.saddle_residual(sol["A"][k], X, y, N, path[k], **hp)
        out.update({"chi_path": path, "min_eig": sol["min_eig"], "iters": sol["iters"],
                    "rescale_err_path": rescale_err})
    elif arm in ("rescaling", "rescaling_langevin"):
        source = "adaptive_tree" if arm == "rescaling" else "langevin"
        ref = upstream.get(source) or run(settings, source, task, seed, data=data)
        if not np.allclose(ref["chi"], chis) or ref["task"] != task or int(ref["seed"]) != int(seed):
            raise ValueError(f"{arm}: upstream {source} result is for another pair or chi grid")
        for g, chi in enumerate(chis):
            a, b, u = M.rescaling_predictor(X, y, Xs, chi, target_train=ref["f_train"][g], **hp)
            f_tr.append(a), f_te.append(b), As.append(u * (hp["g_w"] / D) * np.eye(D))
            extra[g]["u"] = u
    else:  # langevin
        lg = dict(settings["langevin"])
        traces, var_eps = [], []
        # the whole χ grid advanced together (bit-identical to one langevin_sample per χ, in fewer tensor ops)
        grid = langevin_sample_many(X, y, Xs, N, list(chis), [1000 * int(seed) + int(k) for k in idx], **hp,
                                    y_test=data["y_test"], **lg)
        for g, res in enumerate(grid):
            f_tr.append(res["f_train"]), f_te.append(res["f_test"]), As.append(res["A"])
            traces.append(res["trace"])
            extra[g]["eps_test_total"] = float(np.mean((data["y_test"] - res["f_test"]) ** 2 + res["var_test"]))
        out["trace"] = np.array(traces)
        if settings.get("prior_check"):
            prior = langevin_sample(X, y, Xs, N, float(N), **hp, seed=1000 * int(seed) + 999, likelihood=False,
                                    **{**lg, **settings["prior_check"]})
            out["prior_A"] = prior["A"]
        if settings.get("step_check"):  # the sampler's bias at chi = N: step lr/k, k x the steps (same time)
            k = int(settings["step_check"]["factor"])
            half = langevin_sample(X, y, Xs, N, float(chis[-1]), **hp, seed=1000 * int(seed) + 998,
                                   y_test=data["y_test"], **{**lg, "lr": lg["lr"] / k, "n_steps": lg["n_steps"] * k})
            out["step_check_eps_test"] = np.asarray(M.discrepancy(data["y_test"], half["f_test"]))
            out["step_check_r_label"] = np.asarray(M.spike_ratio(half["A"], data["X"].T @ data["y"]))

    out["f_train"], out["f_test"], out["A"] = np.array(f_tr), np.array(f_te), np.array(As)
    out["metrics"] = [{"chi": float(chi), **_observe(data, f_tr[g], f_te[g], As[g]), **extra[g]}
                      for g, chi in enumerate(chis)]
    out["runtime_s"] = time.perf_counter() - t0
    return out


#: Langevin seeds of the width sweep: 1000·seed + SWEEP_SEED_BASE + 2k for width k (+1: its step-halving run); the
#: χ-grid runs use 1000·seed + 0..39, the prior-only run + 999 and the step check + 998.
SWEEP_SEED_BASE = 500


def sweep_path(N: int, N_grid: int, n_anneal: int) -> np.ndarray:
    """The annealing path of width ``N`` in the sweep: geometric from χ = 1 to N with at most the χ ratio per step
    of the grid's path geomspace(1, N_grid, n_anneal), i.e. ⌈log N / log r⌉ + 1 points,
    r = N_grid^(1/(n_anneal−1)) (paper: r = 200^(1/39) ≈ 1.146, so 30 points to N = 50, 40 to N = 200 and 57 to
    N = 2000). A fixed n_anneal would take larger χ steps at larger N; the rehearsal found that such a step leaves the cone of positive-definite kernels
    (AnnealError at χ = 16 with 6 points on mnist03)."""
    if N_grid < 2 or n_anneal < 2:
        raise ValueError(f"sweep_path: need N_grid >= 2 and n_anneal >= 2, got {N_grid}, {n_anneal}")
    steps = max(1, math.ceil(math.log(N) / (math.log(N_grid) / (n_anneal - 1)) - 1e-9))
    return np.geomspace(1.0, float(N), steps + 1)


def sweep(settings: Mapping[str, Any], kind: str, seed: int, data: Mapping[str, np.ndarray],
          widths: Sequence[int]) -> dict[str, Any]:
    """One kind of the paper's width sweep on one (task, seed) pair: for every hidden width N of ``widths`` the test
    and train discrepancy at χ = N (mean-field scaling, where the tree-level theory should become exact as N grows).

    ``kind`` ``adaptive_tree``: the saddle point annealed from χ = 1 to N (Algorithm 1) with the χ step of the
    grid's anneal (:func:`sweep_path`), its mean output at χ = N; ``langevin``: an ensemble of the width-N network at χ = N with the ``langevin`` settings, and,
    when ``settings["step_check"]`` is set, the same ensemble at step lr/factor with factor × the steps (seed + 1).
    Returns ``{widths (W,), eps_test (W,), eps_train (W,), r_label (W,), runtime_s}`` plus, for Langevin with the
    step check, ``step_check_eps_test (W,)``.
    """
    if kind not in ("adaptive_tree", "langevin"):
        raise ValueError(f"sweep: kind must be adaptive_tree or langevin, got {kind!r}")
    t0 = time.perf_counter()
    X, y, Xs, ys = data["X"], data["y"], data["X_test"], data["y_test"]
    hp = _hyper(settings)
    label_dir = X.T @ y
    out: dict[str, list[float]] = {"eps_test": [], "eps_train": [], "r_label": [], "step_check_eps_test": []}
    for k, N in enumerate(int(n) for n in widths):
        if kind == "adaptive_tree":
            path = sweep_path(N, int(settings["N"]), int(settings["n_anneal"]))
            sol = M.anneal(X, y, N, path, damping=settings["damping"], tol=settings["tol"],
                           max_iter=settings["max_iter"], **hp)
            f_tr, f_te = M.adaptive_mean(sol["A"][-1], X, y, Xs, path[-1], hp["g_v"], hp["kappa0"])
            A = sol["A"][-1]
        else:
            lg = dict(settings["langevin"])
            base = 1000 * int(seed) + SWEEP_SEED_BASE + 2 * k
            res = langevin_sample(X, y, Xs, N, float(N), **hp, seed=base, y_test=ys, **lg)
            f_tr, f_te, A = res["f_train"], res["f_test"], res["A"]
            if settings.get("step_check"):
                fac = int(settings["step_check"]["factor"])
                half = langevin_sample(X, y, Xs, N, float(N), **hp, seed=base + 1, y_test=ys,
                                       **{**lg, "lr": lg["lr"] / fac, "n_steps": lg["n_steps"] * fac})
                out["step_check_eps_test"].append(M.discrepancy(ys, half["f_test"]))
        out["eps_test"].append(M.discrepancy(ys, f_te))
        out["eps_train"].append(M.discrepancy(y, f_tr))
        out["r_label"].append(M.spike_ratio(A, label_dir))
    res_out: dict[str, Any] = {k: np.asarray(v, dtype=np.float64) for k, v in out.items() if v}
    res_out["widths"] = np.asarray(list(widths), dtype=np.int64)
    res_out["runtime_s"] = time.perf_counter() - t0
    return res_out
