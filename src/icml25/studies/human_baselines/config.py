"""Configuration of the human_baselines study: the single definition of every key (type, bounds, default,
meaning). ``config/studies/human_baselines.yaml`` sets the values (common keys + one block per scale); the JSON
schema of that file is generated from :class:`Config`. [R] marks our reconstructions (the power simulator is ours
entirely). ``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only when one changes."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["table_iii", "rigor_score", "power_sim"]
DETERMINISTIC_ARMS = ("table_iii", "rigor_score")


class Sensitivity(Section):
    """Paper-scale sensitivity grid of the simulator [R]; an empty list keeps the main value."""

    sd_ability: tuple[float, ...] = Field((), description="values of power.sd_ability to run")
    sd_difficulty: tuple[float, ...] = Field((), description="values of power.sd_difficulty to run")
    default_items: tuple[int, ...] = Field((), description="values of power.default_items to run")

    @property
    def active(self) -> bool:
        return bool(self.sd_ability or self.sd_difficulty or self.default_items)


class PowerSim(Section):
    """Underpowering simulator: our illustration [R], the paper has no power computation."""

    n_reps: int = Field(200, ge=1, description="replicates R per study and delta")
    deltas: tuple[float, ...] = Field((0.0, 0.05, 0.10), min_length=1,
                                      description="human-AI accuracy gaps simulated, each in (-1, 1); must contain "
                                                  "0 and claim_delta")
    claim_delta: float = Field(0.05, description="the gap of claim 4 (5 points)")
    target_power: float = Field(0.8, gt=0, lt=1, description='"adequately powered" threshold of claim 4')
    default_items: int = Field(20, ge=1, description="items per baseliner m when the workbook gives none [R]")
    max_items: int = Field(200, ge=1, description="cap on m [R]")
    sd_ability: float = Field(1.0, gt=0, description="sigma_theta of baseliner ability [R]")
    sd_difficulty: float = Field(1.5, gt=0, description="sigma_d of item difficulty [R]")
    mean_difficulty: float = Field(-1.2, description="mean item difficulty [R]")
    alpha: float = Field(0.05, gt=0, lt=1, description="two-sided level of the paired t-test")
    test: Literal["t", "bootstrap"] = Field("t", description="paired t-test or cluster bootstrap over baseliners")
    bootstrap_resamples: int = Field(1000, ge=100, description="resamples of the cluster bootstrap")
    calibration_baseliners: int = Field(20, ge=2, description="type-I calibration run: B")
    calibration_items: int = Field(20, ge=1, description="type-I calibration run: m")
    calibration_reps: int = Field(2000, ge=1, description="type-I calibration run: replicates")
    type1_range: tuple[float, float] = Field((0.03, 0.07), description="accepted type-I error at delta = 0")
    sensitivity: Sensitivity = Field(Sensitivity(), description="sensitivity grid (paper scale)")

    @model_validator(mode="after")
    def _consistent(self):
        if any(not -1 < d < 1 for d in self.deltas):
            raise ValueError(f"power.deltas: each in (-1, 1); got {self.deltas}")
        if self.claim_delta not in self.deltas or 0.0 not in self.deltas:
            raise ValueError(f"power.deltas: must contain 0 and claim_delta={self.claim_delta}")
        if self.max_items < self.default_items:
            raise ValueError("power.default_items: must be <= power.max_items")
        if not 0 <= self.type1_range[0] < self.type1_range[1] <= 1:
            raise ValueError(f"power.type1_range: [low, high] within [0, 1], got {self.type1_range}")
        return self


class Config(StudyConfig):
    """human_baselines study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="table_iii (required), rigor_score [R], power_sim [R]")
    data_mode: Literal["real", "auto"] = Field(
        "real", description="remote workbook: real (a failed download is an error) or auto (synthetic fallback)")
    try_origin: bool = Field(True, description="remote: after a failed mirror, also try the origin URL")
    synthetic_seed: int = Field(0, ge=0, description="seed of the synthetic workbook [R]")
    reference_table: str | None = Field(None, description="CSV shaped like metrics/table_iii.csv to compare with")
    power: PowerSim = Field(PowerSim(), description="underpowering simulator [R]")

    @model_validator(mode="after")
    def _table_iii(self):
        if "table_iii" not in self.arms:
            raise ValueError("arms: must include table_iii (every claim about the paper rests on it)")
        return self


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("data_mode", "try_origin", "synthetic_seed"),
    "preprocess": (),
    "train": ("arms", "power"),
    "evaluate": ("reference_table", "synthetic_seed", "power.target_power", "power.claim_delta", "power.deltas",
                 "power.type1_range", "power.n_reps", "power.alpha"),
    "report": ("power.target_power",),
}
