"""The study's claims.json entries: checks 1-2 (residual bound, pixelwise invariances), claim 3 (held-out-generator
generalisation, verdict by :func:`.evaluate.decide_generalisation`, unit = test image, gated on the detectors
having learned the training generator on validation pairs and on the image-level MDE resolving the effect floor) and entry 4 (the robustness report: untested, its
numbers kept), plus the summary that ``metrics/eval.json`` holds."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from icml25.core.claims import Claim, Evidence, check, gate, summarize, untested, verdict

from .evaluate import MIN_DIFF, decide_bound, decide_generalisation, decide_invariance, invariance_check
from .method import bound_check

DATA = ("real photos from the scikit-image 0.26 / scikit-learn 1.9 wheels (64x64 crops, split by source image) vs "
        "content-aligned fakes of three small autoencoders (decoder A trains the detectors; B and C held out); an "
        "offline stand-in for GenImage")
ROBUST_KEYS = ("test/acc_heldout_jpeg95", "test/acc_heldout_jpeg75", "test/acc_heldout_png_src",
               "test/acc_heldout_jpeg_src")


def _arm_table(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    by: dict[str, list[dict]] = {}
    for r in runs:
        by.setdefault(r["arm"], []).append(r)
    out = {}
    for arm, rs in sorted(by.items()):
        out[arm] = {}
        for k in rs[0]["metrics"]:
            v = np.array([x["metrics"][k] for x in rs], dtype=float)
            v = v[np.isfinite(v)]
            out[arm][k] = summarize(v) if v.size else {"mean": None, "n": 0}
    return out


def evaluate_claims(runs: Sequence[Mapping[str, Any]], test_real: np.ndarray, residual: Mapping[str, Any], *,
                    test_source: np.ndarray, test_is_jpeg: np.ndarray, min_val_auc: float = 0.75,
                    min_diff: float = MIN_DIFF, paper_data: bool = False) -> tuple[list[Claim], dict[str, Any]]:
    """``runs``: the train records (arm, seed, metrics, units); ``test_real`` (n, H, W, 3) uint8 test crops for the
    invariance check; ``residual``: colour_space, step, bound_steps, bound_random; ``test_source`` / ``test_is_jpeg``
    (n,): source image index and format of each test crop (the units of claim 3); ``min_val_auc``: the adequacy
    gate of claim 3; ``min_diff``: its effect floor; ``paper_data``: whether the run used GenImage."""
    table = _arm_table(runs)
    claims, b, inv = _checks(test_real, residual)
    units = {}
    for arm in ("pid", "rgb"):
        units[arm] = {r["seed"]: np.asarray(r["units"], float) for r in runs if r["arm"] == arm}
    claims.append(_heldout_claim(table, units, test_source, test_is_jpeg, min_val_auc, min_diff, paper_data, DATA))
    _robustness(claims, table, DATA, "a report with no pass/fail rule: the paper states no robustness threshold, "
                "and the format shortcut it guards against (GenImage's JPEG reals vs PNG fakes) exists only on "
                "GenImage (paper scale); the measured accuracies are kept in statistic and metrics/eval.json")
    return claims, _summary(table, b, inv)


def _summary(table, b, inv) -> dict[str, Any]:
    return {"arms": {arm: {k: v["mean"] for k, v in m.items()} for arm, m in table.items()},
            "arms_ci": table,
            "robustness": {arm: {k: table[arm][k]["mean"] for k in ROBUST_KEYS if k in table[arm]} for arm in table},
            "bound": b, "invariance": inv}


def _checks(test_real: np.ndarray, residual: Mapping[str, Any]) -> tuple[list[Claim], dict, dict]:
    """Checks 1-2 (the residual bound over colours, the pixelwise invariances on up to 32 real test crops)."""
    claims: list[Claim] = []
    # --- check 1: the residual bound
    b_holds, b = decide_bound(bound_check(tuple(residual["bound_steps"]), residual["colour_space"],
                                          n_random=residual["bound_random"]))
    claims.append(check(
        "residual_bound", "For every 8-bit colour and step s, |r_c| <= (s/2) sum_j |M^-1_cj| (+1e-9).",
        holds=b_holds, data=("all 256^3 colours" if b["exhaustive"] else f"{b['n_colours']} random colours"),
        test="max over colours of |r_c| - bound_c, per step " + str(b["steps"]), threshold="<= 1e-9 for every step",
        evidence=Evidence(b["n_colours"], "colours"), title="Residual bound", statistic=b,
        key_numbers={"max_excess": max(b["max_excess"]), "max_ratio": max(b["max_ratio"])}))
    # --- check 2: pixelwise invariance
    x = np.asarray(test_real[:32])
    i_holds, inv = decide_invariance(invariance_check(x, residual["step"], residual["colour_space"],
                                                      lut_red=int(x[0, 0, 0, 0])))
    claims.append(check(
        "pixelwise_invariance", "The residual is pixelwise: shuffle-equivariant, equal to a colour lookup table, "
                                "zero on greys at s = 1, commuting with crops and flips (not with resizing).",
        holds=i_holds, data=f"{len(x)} real test crops", test="bitwise equality; greys |r| <= 1e-9",
        threshold="all five hold; the change under 2x bilinear downsizing is reported",
        evidence=Evidence(len(x), "crops"), title="Pixelwise invariance", statistic=inv,
        key_numbers={"resize_max_change": inv["resize_max_change"]}))
    return claims, b, inv


def _heldout_claim(table, units, test_source, test_is_jpeg, min_val_auc, min_diff, paper_data, data,
                   unit: str = "images", auc_keys: Sequence[str] = ("test/auc_B", "test/auc_C"),
                   val_pairs: str = "real vs fake-A crops of the train images") -> Claim:
    """Claim 3: held-out generator generalisation, pid vs rgb; ``units`` {arm: {seed: (n_test,) scores}},
    ``test_source`` (n_test,) the independent unit of each score (test image; at paper scale the held-out
    GenImage subset)."""
    seeds = sorted(set(units["pid"]) & set(units["rgb"]))
    metrics = {arm: table[arm]["test/acc_heldout"] for arm in table}
    val_auc = {arm: table[arm]["val/auc_A"]["mean"] for arm in table if "val/auc_A" in table[arm]}
    auc_ho = {arm: float(np.mean([table[arm][k]["mean"] for k in auc_keys])) for arm in table
              if auc_keys and all(table[arm].get(k, {}).get("mean") is not None for k in auc_keys)}
    if seeds:
        rep, nrep, st = decide_generalisation(np.stack([units["pid"][s] for s in seeds]),
                                              np.stack([units["rgb"][s] for s in seeds]), test_source, test_is_jpeg,
                                              min_diff)
        v = verdict(rep, nrep)
    else:
        st, v = {"gate": "pid and rgb not both trained", "n_images": 0}, "inconclusive"
    learned = min(val_auc.get("pid", float("nan")), val_auc.get("rgb", float("nan")))
    g = gate("detectors_learn_training_generator", learned, at_least=min_val_auc,
             text=f"min over pid and rgb of the validation AUC on {val_pairs} (held "
                  "out from training; never test crops)")
    g_mde = gate("heldout_images_resolve_min_diff", st.get("mde"), at_most=min_diff,
                 text="minimum detectable effect of the t-test over the test images (from their spread) <= the claim's "
                      "effect floor: with few, heterogeneous images a gain carried by one or two of them is not a "
                      "held-out-generator effect the evaluation can resolve (issue 33)")
    n_img = int(st.get("n_images", 0))
    n_big = int(np.sum(np.asarray(st.get("per_image", []), float) >= min_diff))
    test = ("held-out accuracy (mean of balanced accuracies on real vs decoder-B and real vs decoder-C fakes) of "
            "pid minus rgb, per test image (mean over its crops and the detector seeds); Student-t interval over "
            "the test images") if unit == "images" else (
            "balanced accuracy of pid minus rgb on the val split of each held-out GenImage subset (mean over the "
            "detector seeds); Student-t interval over the held-out subsets")
    return Claim(
        id="heldout_generalisation", kind="claim", source="ours", title="Held-out generators: pid > rgb",
        statement="A detector on PiD residuals generalises to held-out generators better than one on RGB.",
        data=data, metrics=metrics, test=test,
        threshold=f"reproduced: mean difference >= {min_diff:.2f} and 95% CI low > 0; not reproduced: CI high < 0; "
                  "else inconclusive (and with fewer than 3 seeds)",
        verdict=v, statistic=st, gates=[g, g_mde],
        evidence=Evidence(n_img, unit, paper_data, st.get("ci_method") or f"t 95% over {unit}", st.get("mde")),
        key_numbers={"mean": st.get("mean"), "ci": [st.get("ci_low"), st.get("ci_high")],
                     "pid_acc": st.get("pid_acc"), "rgb_acc": st.get("rgb_acc"),
                     "effect_png_images": st.get("effect_png_images"),
                     "effect_jpeg_images": st.get("effect_jpeg_images"), "mde": st.get("mde"),
                     "n_images_effect_at_least_min_diff": n_big,
                     "heldout_auc_pid_minus_rgb": (auc_ho["pid"] - auc_ho["rgb"]) if {"pid", "rgb"} <= set(auc_ho)
                     else None, "val_auc_A": val_auc},
        note=("images as units (a crop shares its image's source format and content with its neighbours); the "
              "format-stratified effects (PNG-sourced vs JPEG-sourced test images) are in key_numbers")
        if unit == "images" else ("held-out generators (GenImage subsets) as units: the claim is about "
                                  "generalising across generators; images of one subset share its generator"))


def _robustness(claims: list[Claim], table, data: str, reason: str) -> None:
    """Entry 4: the robustness report, no pass/fail rule -> untested, its numbers kept in statistic."""
    c4 = untested(
        "robustness_report", "Held-out accuracy of every arm when both classes are JPEG-compressed (q 95, 75), and on "
        "PNG-sourced vs JPEG-sourced real crops (a format shortcut would show there).", scale="paper", source="ours",
        title="JPEG and source-format robustness (reported)", data=data, reason=reason)
    c4.statistic = {arm: {k: table[arm][k]["mean"] for k in ROBUST_KEYS if k in table[arm]} for arm in table}
    claims.append(c4)


GENIMAGE = ("GenImage (train: the train split of {train}; test: the val split of {test}), 256x256 windows (no "
            "resizing), ResNet-50 detectors trained from scratch [R]")


def decide_paper_accuracy(acc: np.ndarray, target: float) -> tuple[bool, bool, dict]:
    """The paper's headline: the pid arm's accuracy averaged over the test subsets, one value per detector seed
    ``acc`` (n_seeds,). Reproduced: seed mean >= ``target``; not reproduced: 95% t interval high < ``target``;
    else inconclusive (and with fewer than 3 seeds, by the evidence rule)."""
    st = summarize(np.asarray(acc, float), unit="seeds")
    st["target"], st["per_seed"] = target, [float(a) for a in acc]
    if st["n"] < 2:
        return False, False, st
    return bool(st["mean"] >= target), bool(st["ci_high"] < target), st


def evaluate_claims_paper(runs: Sequence[Mapping[str, Any]], test_real: np.ndarray, residual: Mapping[str, Any], *,
                          groups: Sequence[str], heldout: Sequence[str], train_generators: Sequence[str],
                          min_val_auc: float = 0.75, min_diff: float = MIN_DIFF, paper_acc: float = 0.98,
                          paper_tolerance: float = 0.03) -> tuple[list[Claim], dict[str, Any]]:
    """Paper scale (GenImage): checks 1-2 on real val crops; the paper's headline ``genimage_accuracy`` (pid's mean
    accuracy over the test subsets >= ``paper_acc - paper_tolerance``); claim 3 with the held-out subsets as units
    (``runs`` carry per-image ``units`` and their ``unit_group``, an index into ``groups``); entry 4 untested."""
    table = _arm_table(runs)
    claims, b, inv = _checks(test_real, residual)
    data = GENIMAGE.format(train=", ".join(train_generators), test=", ".join(groups))
    # --- the paper's headline: PiD's mean accuracy on GenImage
    target = paper_acc - paper_tolerance
    acc = np.array([r["metrics"]["test/acc_mean"] for r in runs if r["arm"] == "pid"], float)
    if acc.size:
        rep, nrep, st = decide_paper_accuracy(acc, target)
        v = verdict(rep, nrep)
    else:
        st, v = {"gate": "pid not trained", "n": 0}, "inconclusive"
    claims.append(Claim(
        id="genimage_accuracy", kind="claim", source="paper", title="PiD reaches ~98% on GenImage",
        statement="PiD achieves 98% accuracy on the GenImage benchmark (abstract).", data=data,
        metrics={"pid": table["pid"]["test/acc_mean"]} if "pid" in table else {},
        test="the pid arm's balanced accuracy averaged over the test subsets, one value per detector seed; "
             "Student-t interval over seeds",
        threshold=f"reproduced: mean >= {target:.3f} ({paper_acc:.2f} - {paper_tolerance:.2f}); not reproduced: "
                  f"95% CI high < {target:.3f}; else inconclusive",
        verdict=v, statistic=st, evidence=Evidence(int(st.get("n", 0)), "seeds", True, st.get("ci_method", "")),
        key_numbers={"mean": st.get("mean"), "ci": [st.get("ci_low"), st.get("ci_high")],
                     "per_subset": {g: table["pid"].get(f"test/acc_{g}", {}).get("mean") for g in groups}
                     if "pid" in table else {}}))
    # --- claim 3 over the held-out subsets
    units: dict[str, dict[int, np.ndarray]] = {}
    ho = [list(groups).index(g) for g in heldout]
    grp = None
    for arm in ("pid", "rgb"):
        units[arm] = {}
        for r in runs:
            if r["arm"] == arm:
                g = np.asarray(r["unit_group"])
                sel = np.isin(g, ho)
                units[arm][r["seed"]] = np.asarray(r["units"], float)[sel]
                grp = g[sel]
    claims.append(_heldout_claim(table, units, grp if grp is not None else np.zeros(0), None, min_val_auc,
                                 min_diff, True, data, unit="generators",
                                 auc_keys=tuple(f"test/auc_{g}" for g in heldout),
                                 val_pairs="the held-out validation images (ai vs nature) of the training subsets"))
    _robustness(claims, table, data, "a report with no pass/fail rule (the paper states no robustness threshold); "
                "the JPEG accuracies of the held-out subsets and each class's accuracy per subset (GenImage's "
                "reals are JPEG, its fakes mostly PNG) are kept in statistic and metrics/eval.json")
    summary = _summary(table, b, inv)
    summary["groups"], summary["heldout"] = list(groups), list(heldout)
    return claims, summary
