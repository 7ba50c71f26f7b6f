"""Scale settings of the adaptive_adversary study as plain nested dicts (phase 2 turns them into the yaml and
the pydantic ``Config``). ``COMMON`` holds keys shared by every scale; ``SCALES[scale]`` overrides them.
Every reconstruction [R] of the study is a key here.
"""
from __future__ import annotations

from typing import Any

from .data import ADVERSARIES

COMMON: dict[str, Any] = {
    # [R] the simulated class: our own "self-describing code" construction (the only one implemented); it
    # illustrates the paper's separation, it is not the paper's class.
    "construction": "self_describing_code",
    # [R] size K of every set A of the class (the point domain is [0, 2**62)); enters the TV formulas and the
    # Le Cam bound's m²/K collision term.
    "K": 2**40,
    # [R] adaptive budget in insertions: "floor_eta_m" = ⌊ηm⌋; "fraction_of_output" = ⌊ηm/(1−η)⌋ (η as a
    # fraction of the corrupted sample). The paper's exact unit is an open question.
    "budget_rule": "floor_eta_m",
    # code masses c of the class
    "c": [0.05, 0.1, 0.2],
    # adversary budgets as multiples of c: η = ratio·c
    "eta_over_c": [0.0, 0.5, 1.0, 1.5, 2.0, 3.0],
    # cells with η above this are skipped
    "eta_max": 0.3,
    # sample sizes m requested by the learner
    "m": [50, 200, 500, 2000],
    # trials per cell and seed (truth p₀ or q_A with probability ½ each)
    "trials": 200,
    # adversary arms (train jobs: adversary × seed); "none" runs once per (c, m)
    "adversaries": list(ADVERSARIES),
    # evaluation seeds (tuning, if any, only on seeds ≥ 100)
    "seeds": [0, 1, 2],
}

SCALES: dict[str, dict[str, Any]] = {
    # ≤ 20 s: one c, η ∈ {0.05, 0.2}, two sample sizes, two arms
    "smoke": {**COMMON, "c": [0.1], "eta_over_c": [0.5, 2.0], "m": [50, 500], "trials": 40,
              "adversaries": ["adaptive", "obl_decoy"]},
    # the claims grid: 3 c × 6 η/c (η ≤ 0.3) × 4 m, 200 trials per cell and seed, seeds 0–2 (≈ 1–2 min)
    "default": {**COMMON},
    # m up to 10⁵, η/c on a 0.05 grid, 10⁴ trials per cell and seed; no GPU. The plan said ≈ 10 CPU-hours, but a
    # trial at m = 10⁵ costs 0.1–0.2 s here (points are materialised), i.e. hundreds of CPU-hours for the m = 10⁵
    # column alone: a SLURM array over (arm, seed, m), or fewer trials at large m, is needed.
    "paper": {**COMMON, "eta_over_c": [round(0.05 * i, 2) for i in range(61)],
              "m": [50, 200, 500, 2000, 10_000, 100_000], "trials": 10_000, "seeds": [0, 1, 2]},
}
