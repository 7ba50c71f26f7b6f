"""One dataset × arm × seed of the sard study end to end in memory: :func:`run` (what the train stage does per
seed, and what a tuning run loops over); the claim-4 identities: :func:`run_identities`.

``settings`` is the plain dict of a validated :class:`.config.Config` (``Config.model_dump(mode="json")``).

Arms: ``clean_l2d`` (clean two-stage surrogate), ``sard`` (adversarial ρ-margin comp-sum, by default its smooth bound),
``sard_ce`` (adversarial comp-sum, convex in the scores), ``clean_l2d_agents_perturbed`` (the clean_l2d rejector,
re-trained identically, evaluated with the main model also seeing x′).

Randomness, shared by every arm of a seed (so arms are paired): data split, g's subsample and expert draws
(:mod:`.data`), rejector initialisation ``torch.manual_seed(seed)``, minibatches ``Generator(seed)``, training PGD
starts ``Generator(seed + 1)``, validation attack ``Generator(seed + 2)``, test attacks ``Generator(seed + 3)``.
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .config import EVALUATION_ARMS
from .data import prepare
from .identities import bayes_allocation, surrogate_bound_gaps
from .metrics import evaluate_rejector
from .model import build_rejector
from .train import train_rejector

ARMS = ("clean_l2d", "sard", "sard_ce", "clean_l2d_agents_perturbed")
_PREP_CACHE: dict[tuple[str, int, str], dict[str, Any]] = {}
_MODEL_CACHE: dict[str, tuple[dict, dict]] = {}
#: arm keys that change training (agents_see_perturbation only changes the evaluation)
_TRAIN_KEYS = ("loss", "nu", "rho", "surrogate", "penalty_weight", "penalty_norm", "inner", "rho_warmup_epochs")


def prepared(settings: Mapping[str, Any], dataset: str, seed: int) -> dict[str, Any]:
    """:func:`.data.prepare`, cached per (dataset, seed, dataset settings) within the process (arms share it)."""
    key = (dataset, seed, json.dumps(settings[dataset], sort_keys=True))
    if key not in _PREP_CACHE:
        _PREP_CACHE.clear()  # one dataset × seed at a time: arms of a seed run together
        _PREP_CACHE[key] = prepare(dataset, seed, settings)
    return _PREP_CACHE[key]


def arm_settings(settings: Mapping[str, Any], arm: str) -> dict[str, Any]:
    """The loss settings of ``arm``: its ``arm_config`` entry, or for an evaluation-only arm
    (:data:`.config.EVALUATION_ARMS`) those of the arm whose rejector it reuses, with ``agents_see_perturbation``
    true."""
    if arm in EVALUATION_ARMS:
        return {**settings["arm_config"][EVALUATION_ARMS[arm]], "agents_see_perturbation": True}
    return dict(settings["arm_config"][arm])


def train_and_evaluate(settings: Mapping[str, Any], arm: str, seed: int, prep: Mapping[str, Any],
                       also: tuple[str, ...] = (), device: str = "cpu") -> dict[str, Any]:
    """Train ``arm``'s rejector on ``prep`` (one dataset and seed, from :func:`.data.prepare`) and evaluate it on
    the test split; then evaluate the same rejector for each evaluation-only arm in ``also``.

    Returns ``model`` (the trained network), ``curves`` (per epoch: ``epoch``, ``train_surrogate``,
    ``val_def_loss_clean``, ``val_def_loss_adv``), ``train_seconds`` and ``evals`` {arm: output of
    :func:`.metrics.evaluate_rejector` plus ``eval_seconds``}. ``device``: where the rejector, the data and the
    attacks live (``cuda`` at paper scale; random streams stay on CPU generators, so they do not depend on it)."""
    arm_cfg = arm_settings(settings, arm)
    ds = settings[prep["name"]]
    idx = prep["idx"]
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("sard: device 'cuda' requested but torch sees no CUDA device (set device: cpu)")
    x_t = {s: torch.from_numpy(prep["x"][idx[s]]).to(dev) for s in ("train", "val")}
    c_t = {s: torch.from_numpy(prep["costs"][idx[s]]).to(dev) for s in ("train", "val")}
    model = build_rejector(ds, prep["x"].shape[1], prep["costs"].shape[1], seed).to(dev)
    t1 = time.perf_counter()
    curves = train_rejector(model, x_t["train"], c_t["train"], x_t["val"], c_t["val"], arm_cfg, settings["train"],
                            int(ds["epochs"]), seed, prep["clip"])
    t2 = time.perf_counter()
    evals = {}
    for name in (arm, *also):
        t3 = time.perf_counter()
        ev = evaluate_rejector(model, prep, settings["attack"], seed,
                               agents_see_perturbation=bool(arm_settings(settings, name)["agents_see_perturbation"]),
                               device=dev)
        evals[name] = {**ev, "eval_seconds": time.perf_counter() - t3}
    return {"model": model, "curves": curves, "train_seconds": t2 - t1, "evals": evals}


def run(settings: Mapping[str, Any], arm: str, seed: int, dataset: str = "digits") -> dict[str, Any]:
    """Train the rejector of ``arm`` on ``dataset`` for ``seed`` and evaluate it on the test split.

    Returns ``curves`` (per epoch: ``epoch``, ``train_surrogate``, ``val_def_loss_clean``, ``val_def_loss_adv``),
    ``metrics`` (test metrics of :func:`.metrics.evaluate_rejector`, the agents' quality and oracle deferral loss
    ``info`` with prefix ``agents/``, ``train_seconds``), ``points`` (per-test-point arrays, reduced to
    per-seed paired effects by the verdicts), ``seconds``. A rejector whose training inputs (dataset, seed, dataset and training settings, the
    arm's loss keys) equal those of an earlier run in this process is reused, not re-trained (identical result:
    training is deterministic), so ``clean_l2d_agents_perturbed`` after ``clean_l2d`` costs only its evaluation."""
    if arm not in ARMS:
        raise ValueError(f"sard: unknown arm {arm!r}; expected one of {ARMS}")
    if dataset not in settings["datasets"]:
        raise ValueError(f"sard: dataset {dataset!r} is not in settings['datasets'] = {settings['datasets']}")
    t0 = time.perf_counter()
    prep = prepared(settings, dataset, seed)
    arm_cfg = arm_settings(settings, arm)
    ds = settings[dataset]
    idx = prep["idx"]
    x_t = {s: torch.from_numpy(prep["x"][idx[s]]) for s in ("train", "val")}
    c_t = {s: torch.from_numpy(prep["costs"][idx[s]]) for s in ("train", "val")}
    model = build_rejector(ds, prep["x"].shape[1], prep["costs"].shape[1], seed)
    t1 = time.perf_counter()
    key = json.dumps([dataset, seed, ds, settings["train"], {k: arm_cfg.get(k) for k in _TRAIN_KEYS}],
                     sort_keys=True)
    if key in _MODEL_CACHE:  # an arm that differs only in evaluation (clean_l2d_agents_perturbed): same network
        state, curves = _MODEL_CACHE[key]
        model.load_state_dict(state)
        model.eval()
    else:
        curves = train_rejector(model, x_t["train"], c_t["train"], x_t["val"], c_t["val"], arm_cfg,
                                settings["train"], int(ds["epochs"]), seed, prep["clip"])
        while len(_MODEL_CACHE) >= 16:
            _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
        _MODEL_CACHE[key] = ({k: v.clone() for k, v in model.state_dict().items()}, curves)
    t2 = time.perf_counter()
    ev = evaluate_rejector(model, prep, settings["attack"], seed,
                           agents_see_perturbation=bool(arm_cfg["agents_see_perturbation"]))
    metrics = {**ev["metrics"], **{f"agents/{k}": v for k, v in prep["info"].items()},
               "train_seconds": t2 - t1, "eval_seconds": time.perf_counter() - t2}
    return {"dataset": dataset, "arm": arm, "seed": seed, "curves": curves, "metrics": metrics,
            "points": ev["points"], "seconds": time.perf_counter() - t0}


def run_identities(settings: Mapping[str, Any], n_agents: int = 3) -> dict[str, float]:
    """The exact parts of claim 4 on ``settings["identities"]["n"]`` random inputs: surrogate-bound gaps
    (comp-sum and ρ-margin) and the Bayes-allocation quantities."""
    n, s = int(settings["identities"]["n"]), int(settings["identities"]["seed"])
    return {**surrogate_bound_gaps(n, n_agents, s), **{f"bayes_{k}": v for k, v in
                                                       bayes_allocation(n, n_agents, s).items()}}


def stack_points(results: list[Mapping[str, Any]], key: str) -> list[np.ndarray]:
    """Per-seed arrays of ``points[key]`` from a list of runs of one arm (in seed order)."""
    return [np.asarray(r["points"][key]) for r in sorted(results, key=lambda r: r["seed"])]
