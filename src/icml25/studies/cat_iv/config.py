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


class Config(StudyConfig):
    """cat_iv study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="methods compared")
    n: tuple[Annotated[int, Field(ge=10)], ...] = Field(min_length=1, description="sample sizes of the synthetic datasets")
    settings: tuple[Setting, ...] = Field(("case1_sin",), min_length=1, description="generator settings")
    noise_ratio: float = Field(0.3, ge=0, description="r in the generator (case1_w uses 0.5 as in the paper)")
    alpha: float = Field(0.05, gt=0, lt=1, description="family-wise level of the unknown-K dCor t-tests [R]")
    standardize_x: bool = Field(True, description="standardise X before powers in the control-function branch [R]")
    binary_branch: bool = Field(True, description="candidates with <= 2 values use the Wald branch [R]")
    residual_method: Residual = Field("random_forest", description="residualisation of case1_w on covariates W")
    forest_trees: int = Field(500, ge=1, description="trees of the random-forest residualisation [R]")
    bootstrap_resamples: int = Field(2000, ge=100, description="resamples of the bootstrap CIs in the claims")
    real: RealData = Field(RealData(), description="real-data qualitative check [R]")


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": (),
    "preprocess": ("settings", "n", "seeds", "noise_ratio", "real.datasets", "real.card_rows"),
    "train": ("arms", "seeds", "settings", "n", "alpha", "standardize_x", "binary_branch", "residual_method",
              "forest_trees", "real.residual_method"),
    "evaluate": ("bootstrap_resamples",),
    "report": (),
}
