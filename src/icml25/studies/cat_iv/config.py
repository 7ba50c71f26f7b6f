"""Configuration of the cat_iv study (frozen; unknown keys are errors). Keys are documented in
``config/studies/cat_iv.yaml``; [R] marks reconstructions of details the paper leaves open."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Setting = Literal["case1_sin", "case1_linear", "case1_w", "case1_sin_p8", "case1_sin_p10"]
Arm = Literal["cat_k2", "cat_linear_k2", "cat_unknown_k", "ciiv_like", "sisvive_like", "tsht_like"]


@dataclass(frozen=True)
class RealData:
    """Real-data qualitative check (Card, Mroz) [R]."""

    datasets: tuple[Literal["card", "mroz"], ...] = ("card", "mroz")
    card_rows: int | None = None  # subsample of complete Card rows (smoke); None: all 1601
    residual_method: Literal["linear", "random_forest"] = "linear"


@dataclass(frozen=True)
class Config:
    """cat_iv study configuration (merged common keys + one scale)."""

    seeds: tuple[int, ...]
    arms: tuple[Arm, ...]
    n: tuple[int, ...]
    settings: tuple[Setting, ...] = ("case1_sin",)
    seeds_per_job: int | None = None
    noise_ratio: float = 0.3
    alpha: float = 0.05
    standardize_x: bool = True
    binary_branch: bool = False  # authors' code: control function for every candidate
    residual_method: Literal["random_forest", "linear"] = "random_forest"  # covariates of case1_w [V]
    forest_trees: int = 500
    forest_residuals: Literal["oob", "in_sample"] = "oob"  # authors' code: in_sample
    unknown_k_test: Literal["t", "permutation"] = "t"  # independence test of the unknown-K rule
    permutations: int = 399  # draws of the permutation test (>= 399 to reach the Bonferroni level at p = 5)
    bootstrap_resamples: int = 2000
    real: RealData = field(default_factory=RealData)

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("seeds: at least one seed")
        if any(n < 10 for n in self.n):
            raise ValueError("n: every sample size must be >= 10")
        if self.seeds_per_job is not None and self.seeds_per_job < 1:
            raise ValueError("seeds_per_job: must be >= 1 or null")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: duplicates")
        if not self.arms:
            raise ValueError("arms: at least one arm")
        if not self.settings:
            raise ValueError("settings: at least one setting")
        if not self.n:
            raise ValueError("n: at least one sample size")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha: must be in (0, 1), got {self.alpha}")
        if self.noise_ratio < 0:
            raise ValueError(f"noise_ratio: must be >= 0, got {self.noise_ratio}")
        if self.forest_trees < 1:
            raise ValueError(f"forest_trees: must be >= 1, got {self.forest_trees}")
        if self.permutations < 1:
            raise ValueError(f"permutations: must be >= 1, got {self.permutations}")
        if self.bootstrap_resamples < 100:
            raise ValueError(f"bootstrap_resamples: must be >= 100, got {self.bootstrap_resamples}")
