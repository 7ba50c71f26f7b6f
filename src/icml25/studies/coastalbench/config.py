"""Configuration of the coastalbench study (frozen; unknown keys are errors). Keys are documented in
``config/studies/coastalbench.yaml``; [R] marks reconstructions of details the paper leaves open.

This module imports nothing heavy (no torch, xarray): Snakemake's parse loads it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Arm = Literal["vit", "persistence", "climatology", "vit_no_boundary"]
TRAINED_ARMS = ("vit", "vit_no_boundary")


@dataclass(frozen=True)
class Sim:
    """The mini-ROMS simulator (spec "Simulator [R]")."""

    nx: int = 64  # xi_rho
    ny: int = 48  # eta_rho
    n_levels: int = 6  # N (s_rho)
    days: int = 21
    start_date: str = "2008-01-02"
    output_interval_s: int = 1800
    dt_s: float = 30.0
    dx_m: float = 1000.0
    seed: int = 0
    river_q: float = 200.0  # m3 s-1
    tides_m: tuple[float, float, float] = (0.3, 0.15, 0.12)  # M2, K1, O1 amplitudes
    drag: float = 2.5e-3
    vtransform: Literal[1, 2] = 2
    vstretching: Literal[4] = 4
    theta_s: float = 5.0
    theta_b: float = 0.4
    hc: float = 5.0
    tcline: float = 5.0
    zlib_level: int = 1
    land_value: Literal["fill", "zero"] = "fill"  # what land holds in the files (readers mask by mask_*)
    qair_units: Literal["percentage", "kg kg-1"] = "percentage"  # [R] the card says specific humidity
    write_preview: bool = True

    def __post_init__(self) -> None:
        if self.nx < 8 or self.ny < 8:
            raise ValueError("sim.nx, sim.ny: the grid must be at least 8 x 8")
        if self.n_levels < 3:
            raise ValueError(f"sim.n_levels: at least 3 levels (the emulator reads distinct bottom, mid and "
                             f"surface levels: 13 state channels, 33 inputs), got {self.n_levels}")
        if self.days < 1:
            raise ValueError("sim.days: at least 1 day")
        if 86400 % self.output_interval_s:
            raise ValueError("sim.output_interval_s: must divide a day")
        if self.dt_s <= 0 or self.output_interval_s % self.dt_s:
            raise ValueError("sim.dt_s: must be positive and divide output_interval_s")


@dataclass(frozen=True)
class Split:
    """Days of the record used for training, validation and test (consecutive, in that order)."""

    train_days: int = 15
    val_days: int = 2
    test_days: int = 4


@dataclass(frozen=True)
class Ingest:
    """open_roms / statistics / shards."""

    chunk_time: int = 1  # ocean_time records per dask chunk
    identity_days: int = 3  # days used for the two-pass NumPy and preview identity checks
    identity_chunks: tuple[int, ...] = (1, 7, 48)  # ocean_time chunkings that must give the same statistics
    mem_bound_chunks: float = 4.0  # claim 1: peak traced memory <= this x one chunk of the largest variable
    level_order: Literal["bottom_up", "top_down"] = "bottom_up"  # preview level order [R]
    layout: Literal["T_C_H_W", "C_T_H_W", "TC_H_W"] = "T_C_H_W"  # preview layout [R]


@dataclass(frozen=True)
class Model:
    """CoastalViT (spec "Emulator [R]")."""

    patch: int = 8
    dim: int = 96
    depth: int = 4
    heads: int = 4
    boundary_width: int = 4
    coarsen: int = 1  # paper: 2 (2x block-mean coarsening of every input/target)


@dataclass(frozen=True)
class Train:
    epochs: int = 3
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.05
    leads_h: tuple[float, ...] = (1, 3, 6, 12, 24)
    threads: int = 2
    device: Literal["cpu", "cuda", "auto"] = "cpu"


@dataclass(frozen=True)
class Eval:
    leads_h: tuple[float, ...] = (1, 3, 6, 12, 24)
    persistence_lead_h: float = 6  # claim 2
    climatology_leads_h: tuple[float, ...] = (6, 12, 24)  # claim 3
    min_gain: float = 0.10  # claims 2-3: mean relative gain needed
    spearman_min: float = 0.9  # claim 4
    bootstrap_resamples: int = 2000
    max_t0: int | None = None  # cap on test start times per lead (None: all)


@dataclass(frozen=True)
class Remote:
    """Paper path: the real CoastalBench files (OSN S3, anonymous) listed in the study's manifest.csv."""

    first_month: str = "2008-01"
    last_month: str = "2017-12"
    test_months: int = 12  # the last year is held out
    val_months: int = 1


@dataclass(frozen=True)
class Config:
    """coastalbench study configuration (merged common keys + one scale)."""

    seeds: tuple[int, ...]
    arms: tuple[Arm, ...]
    seeds_per_job: int | None = None
    data: Literal["simulate", "remote"] = "simulate"
    sim: Sim = field(default_factory=Sim)
    split: Split = field(default_factory=Split)
    ingest: Ingest = field(default_factory=Ingest)
    model: Model = field(default_factory=Model)
    train: Train = field(default_factory=Train)
    eval: Eval = field(default_factory=Eval)
    remote: Remote = field(default_factory=Remote)

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("seeds: at least one seed")
        if self.seeds_per_job is not None and self.seeds_per_job < 1:
            raise ValueError("seeds_per_job: must be >= 1 or null")
        s = self.split
        if self.data == "simulate" and s.train_days + s.val_days + s.test_days != self.sim.days:
            raise ValueError(f"split: train_days + val_days + test_days must equal sim.days ({self.sim.days})")
        if s.train_days < 1 or s.test_days < 1:
            raise ValueError("split: at least one train day and one test day")

    @property
    def trained_arms(self) -> tuple[str, ...]:
        return tuple(a for a in self.arms if a in TRAINED_ARMS)
