"""Configuration of the cat_iv study: the single definition of every key (type, bounds, default, meaning).

``config/studies/cat_iv.yaml`` sets the values (common keys + one block per scale); the JSON schema of that
file is generated from :class:`Config`. [R] marks reconstructions of details the paper leaves open.
``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only when one of them changes.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from icml25.core.config import Section, StudyConfig

Setting = Literal["case1_sin", "case1_linear", "case1_w", "case1_sin_p8", "case1_sin_p10"]
Arm = Literal["cat_k2", "cat_linear_k2", "cat_unknown_k", "ciiv_like", "sisvive_like", "tsht_like"]
Residual = Literal["random_forest", "linear"]


class RealData(Section):
    """Real-data qualitative check on Card and Mroz [R]."""

    datasets: tuple[Literal["card", "mroz"], ...] = Field(("card", "mroz"), description="real datasets run")
    card_rows: int | None = Field(None, ge=10, description="subsample of the 1601 complete Card rows; null: all")
    residual_method: Residual = Field("linear", description="residualise on covariates by OLS or random forest")


class Claims(Section):
    """Effect-size floors of the claims (spec "Claims this study checks")."""

    c2_min_diff: float = Field(0.20, gt=0, le=1, description="claim 2: superiority floor of the mean paired F1 "
                               "difference cat_k2 - best linear selector (spec claim 2: mean >= 0.20)")
    c2_ci_low_min: float = Field(0.10, ge=0, le=1, description="claim 2: the 95% CI's lower bound must exceed this "
                                 "(spec claim 2: > 0.10)")


class Adequacy(Section):
    """Adequacy gates: conditions on the same run under which the testbed can show a claim's effect."""

    c2_min_headroom: float = Field(0.20, ge=0, le=1, description="claim 2: 1 - mean F1 of the best linear "
                                   "selector must be at least this (else the linear methods leave no room for the "
                                   "claimed 0.20 gain); default = claims.c2_min_diff")


class Config(StudyConfig):
    """cat_iv study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="methods compared")
    n: tuple[Annotated[int, Field(ge=10)], ...] = Field(min_length=1, description="sample sizes of the synthetic datasets")
    settings: tuple[Setting, ...] = Field(("case1_sin",), min_length=1, description="generator settings")
    noise_ratio: float = Field(0.3, ge=0, description="r in the generator (case1_w uses 0.5 as in the paper)")
    alpha: float = Field(0.05, gt=0, lt=1, description="family-wise level of the unknown-K dCor t-tests [R]")
    standardize_x: bool = Field(True, description="standardise X before powers in the control-function branch [R]")
    binary_branch: bool = Field(False, description="candidates with <= 2 values use the Wald branch [R]; false "
                                "(the authors' code): the control function for every candidate")
    residual_method: Residual = Field("random_forest", description="residualisation of case1_w on covariates W")
    forest_trees: int = Field(500, ge=1, description="trees of the random-forest residualisation [R]")
    forest_residuals: Literal["oob", "in_sample"] = Field(
        "oob", description="forest residuals against out-of-bag or in-sample predictions (in_sample: the authors' "
                           "code) [R]")
    unknown_k_test: Literal["t", "permutation"] = Field(
        "t", description="unknown-K independence test: t (bias-corrected dCor t-test, miscalibrated on 1-D "
                         "samples) or permutation (permutation test of dCor, calibrated; both reported) [R]")
    permutations: int = Field(399, ge=1, description="permutation draws (smallest p = 1/(B+1) must reach "
                                                     "alpha / (p(p-1)))")
    real: RealData = Field(RealData(), description="real-data qualitative check [R]")
    claims: Claims = Field(Claims(), description="effect-size floors of the claims")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of the claims")


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": (),
    "preprocess": ("settings", "n", "seeds", "noise_ratio", "real.datasets", "real.card_rows"),
    "train": ("arms", "seeds", "settings", "n", "alpha", "standardize_x", "binary_branch", "residual_method",
              "forest_trees", "forest_residuals", "unknown_k_test", "permutations", "real.residual_method"),
    "evaluate": ("claims", "adequacy"),
    "report": (),
}
