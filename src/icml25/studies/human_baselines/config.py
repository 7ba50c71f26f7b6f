"""Configuration of the human_baselines study (frozen; unknown keys are errors). Keys are documented in
``config/studies/human_baselines.yaml``; [R] marks our reconstructions (the simulator is ours entirely)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Arm = Literal["table_iii", "rigor_score", "power_sim"]
DETERMINISTIC_ARMS = ("table_iii", "rigor_score")


@dataclass(frozen=True)
class Sensitivity:
    """Paper-scale sensitivity grid of the simulator [R]; an empty list keeps the main value."""

    sd_ability: tuple[float, ...] = ()
    sd_difficulty: tuple[float, ...] = ()
    default_items: tuple[int, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.sd_ability or self.sd_difficulty or self.default_items)


@dataclass(frozen=True)
class PowerSim:
    """Underpowering simulator (our illustration, spec "Underpowering simulator")."""

    n_reps: int = 200
    deltas: tuple[float, ...] = (0.0, 0.05, 0.10)
    claim_delta: float = 0.05
    target_power: float = 0.8
    default_items: int = 20
    max_items: int = 200
    sd_ability: float = 1.0
    sd_difficulty: float = 1.5
    mean_difficulty: float = -1.2
    alpha: float = 0.05
    test: Literal["t", "bootstrap"] = "t"
    bootstrap_resamples: int = 1000
    calibration_baseliners: int = 20
    calibration_items: int = 20
    calibration_reps: int = 2000
    type1_range: tuple[float, float] = (0.03, 0.07)
    sensitivity: Sensitivity = field(default_factory=Sensitivity)

    def __post_init__(self) -> None:
        if self.n_reps < 1 or self.calibration_reps < 1:
            raise ValueError("power.n_reps and power.calibration_reps: must be >= 1")
        if not self.deltas or any(not -1 < d < 1 for d in self.deltas):
            raise ValueError(f"power.deltas: non-empty, each in (-1, 1); got {self.deltas}")
        if self.claim_delta not in self.deltas or 0.0 not in self.deltas:
            raise ValueError(f"power.deltas: must contain 0 and claim_delta={self.claim_delta}")
        if not 0 < self.alpha < 1 or not 0 < self.target_power < 1:
            raise ValueError("power.alpha and power.target_power: must be in (0, 1)")
        if self.default_items < 1 or self.max_items < self.default_items:
            raise ValueError("power.default_items: must be >= 1 and <= power.max_items")
        if self.sd_ability <= 0 or self.sd_difficulty <= 0:
            raise ValueError("power.sd_ability and power.sd_difficulty: must be > 0")
        if self.calibration_baseliners < 2 or self.calibration_items < 1:
            raise ValueError("power.calibration_baseliners: >= 2; power.calibration_items: >= 1")
        if not 0 <= self.type1_range[0] < self.type1_range[1] <= 1:
            raise ValueError(f"power.type1_range: [low, high] within [0, 1], got {self.type1_range}")
        if self.bootstrap_resamples < 100:
            raise ValueError("power.bootstrap_resamples: must be >= 100")


@dataclass(frozen=True)
class Config:
    """human_baselines study configuration (merged common keys + one scale)."""

    seeds: tuple[int, ...]
    arms: tuple[Arm, ...]
    seeds_per_job: int | None = None
    data_mode: Literal["real", "auto"] = "real"
    try_origin: bool = True
    synthetic_seed: int = 0
    reference_table: str | None = None
    power: PowerSim = field(default_factory=PowerSim)

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("seeds: at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: duplicates")
        if self.seeds_per_job is not None and self.seeds_per_job < 1:
            raise ValueError("seeds_per_job: must be >= 1 or null")
        if "table_iii" not in self.arms:
            raise ValueError("arms: must include table_iii (every claim about the paper rests on it)")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError("arms: duplicates")
        if self.synthetic_seed < 0:
            raise ValueError("synthetic_seed: must be >= 0")
