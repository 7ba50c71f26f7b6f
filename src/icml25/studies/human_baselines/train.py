"""The three arms (spec "Arms"): ``table_iii`` and ``rigor_score`` (deterministic) and ``power_sim`` (seeded).

``power_sim`` runs the underpowering simulator (our illustration [R], :mod:`.power`) for every reviewed study
that reports a numeric baseliner count, at each δ of the config, plus the type-I calibration run (B = 20, m = 20)
and, at paper scale, the sensitivity grid over σ_θ, σ_d and the fallback m.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pandas as pd
from tqdm import tqdm

from .config import PowerSim
from .power import power_grid, simulate_power
from .table import study_design, study_labels

CALIBRATION_STUDY = "__calibration__"
POWER_COLUMNS = ["seed", "setting", "study_index", "study", "B", "m", "delta", "power", "sd_ability",
                 "sd_difficulty", "default_items", "n_reps"]


def _settings(cfg: PowerSim) -> Iterator[tuple[str, float, float, int]]:
    """("main", σ_θ, σ_d, m_default) then the sensitivity grid (if configured) as ("sensitivity", …)."""
    yield "main", cfg.sd_ability, cfg.sd_difficulty, cfg.default_items
    sens = cfg.sensitivity
    if sens.active:
        grid = itertools.product(sens.sd_ability or (cfg.sd_ability,), sens.sd_difficulty or (cfg.sd_difficulty,),
                                 sens.default_items or (cfg.default_items,))
        for sa, sd, m in grid:
            yield "sensitivity", float(sa), float(sd), int(m)


def power_table(sheet: pd.DataFrame, cfg: PowerSim, seed: int, progress: bool = True) -> pd.DataFrame:
    """Power per study × δ (× sensitivity setting) for one seed, plus the calibration rows; columns
    :data:`POWER_COLUMNS`. Studies without a numeric baseliner count (row 16) are left out."""
    labels = study_labels(sheet)
    rows = []
    settings = list(_settings(cfg))
    for setting, sd_a, sd_d, m_default in settings:
        design = study_design(sheet, default_items=m_default, max_items=cfg.max_items)
        design = design[design["B"].notna()]
        desc = f"power_sim seed {seed} {setting} σθ={sd_a} σd={sd_d} m={m_default}"
        for rec in tqdm(design.itertuples(index=False), total=len(design), desc=desc, disable=not progress,
                        mininterval=2.0):
            B = int(round(rec.B))
            # Study-specific stream: the seed and the study index, so a study's draws do not depend on others.
            powers = power_grid(B, rec.m, cfg.deltas, cfg.n_reps, sd_a, sd_d, cfg.mean_difficulty, cfg.alpha,
                                seed=int(np.random.SeedSequence([seed, rec.study_index]).generate_state(1)[0]),
                                test=cfg.test, bootstrap_resamples=cfg.bootstrap_resamples)
            for delta, p in zip(cfg.deltas, powers):
                rows.append([seed, setting, rec.study_index, labels[rec.study_index], B, rec.m, delta, float(p),
                             sd_a, sd_d, m_default, cfg.n_reps])
    type1 = simulate_power(cfg.calibration_baseliners, cfg.calibration_items, 0.0, cfg.calibration_reps,
                           cfg.sd_ability, cfg.sd_difficulty, cfg.mean_difficulty, cfg.alpha, seed=seed)
    rows.append([seed, "calibration", -1, CALIBRATION_STUDY, cfg.calibration_baseliners, cfg.calibration_items, 0.0,
                 type1, cfg.sd_ability, cfg.sd_difficulty, cfg.default_items, cfg.calibration_reps])
    return pd.DataFrame(rows, columns=POWER_COLUMNS)


def power_summary(power: pd.DataFrame, cfg: PowerSim) -> dict[int, dict[str, float]]:
    """Per seed (main setting): n studies, median power and share with power ≥ target at each δ, and the
    type-I error of the calibration run. ``{seed: {"n_studies", "median_<δ>", "share_ge_<δ>", "type1"}}``."""
    out: dict[int, dict[str, float]] = {}
    for seed, part in power.groupby("seed"):
        main = part[part["setting"] == "main"]
        rec: dict[str, float] = {"n_studies": int(main["study_index"].nunique())}
        for delta in cfg.deltas:
            p = main.loc[np.isclose(main["delta"], delta), "power"].to_numpy()
            rec[f"median_{delta:g}"] = float(np.median(p)) if p.size else float("nan")
            rec[f"share_ge_{delta:g}"] = float((p >= cfg.target_power).mean()) if p.size else float("nan")
        cal = part.loc[part["setting"] == "calibration", "power"]
        rec["type1"] = float(cal.iloc[0]) if len(cal) else float("nan")
        out[int(seed)] = rec
    return out
