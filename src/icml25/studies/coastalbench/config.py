"""Configuration of the coastalbench study: the single definition of every key (type, bounds, default,
meaning). ``config/studies/coastalbench.yaml`` sets the values (common keys + one block per scale); the JSON
schema of that file is generated from :class:`Config`. [R] marks reconstructions of details the paper leaves
open. ``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only when one of them changes.

This module imports nothing heavy (no torch, xarray): Snakemake's parse loads it.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["vit", "persistence", "climatology", "vit_no_boundary"]
TRAINED_ARMS = ("vit", "vit_no_boundary")
Leads = tuple[float, ...]


class Sim(Section):
    """The mini-ROMS simulator [R]: faithful in file format, not in 3-D physics."""

    nx: int = Field(64, ge=8, description="xi_rho (grid columns)")
    ny: int = Field(48, ge=8, description="eta_rho (grid rows)")
    n_levels: int = Field(6, ge=3, description="N: s_rho levels (s_w has N + 1); >= 3: the emulator reads distinct "
                                               "bottom, mid and surface levels (13 state channels, 33 inputs)")
    days: int = Field(21, ge=1, description="simulated days (one history file each, after a 1-day spin-up)")
    start_date: str = Field("2008-01-02", pattern=r"^\d{4}-\d{2}-\d{2}$", description="first day written")
    output_interval_s: int = Field(1800, ge=1, description="seconds between history records (divides a day)")
    dt_s: float = Field(30.0, gt=0, description="barotropic time step (s); divides output_interval_s")
    dx_m: float = Field(1000.0, gt=0, description="grid spacing (m)")
    seed: int = Field(0, ge=0, description="simulator seed (atmosphere noise)")
    river_q: float = Field(200.0, ge=0, description="river discharge Q (m3 s-1)")
    tides_m: tuple[float, float, float] = Field((0.3, 0.15, 0.12), description="M2, K1, O1 amplitudes (m)")
    drag: float = Field(2.5e-3, ge=0, description="quadratic bottom drag coefficient C_d")
    vtransform: Literal[1, 2] = Field(2, description="ROMS Vtransform")
    vstretching: Literal[4] = Field(4, description="ROMS Vstretching (only 4)")
    theta_s: float = Field(5.0, description="surface stretching parameter")
    theta_b: float = Field(0.4, description="bottom stretching parameter")
    hc: float = Field(5.0, description="critical depth (m)")
    tcline: float = Field(5.0, description="Tcline (m), written for completeness")
    zlib_level: int = Field(1, ge=0, le=9, description="NETCDF4 zlib level of the history files (0: none)")
    land_value: Literal["fill", "zero"] = Field("fill", description="what land holds in the files")
    qair_units: Literal["percentage", "kg kg-1"] = Field("percentage", description="Qair units [R]")
    write_preview: bool = Field(True, description="also write the first ingest.identity_days days as preview zarr")

    @model_validator(mode="after")
    def _times(self):
        if 86400 % self.output_interval_s:
            raise ValueError("sim.output_interval_s: must divide a day")
        if self.output_interval_s % self.dt_s:
            raise ValueError("sim.dt_s: must divide output_interval_s")
        return self

    @model_validator(mode="after")
    def _hc_within_water(self):
        """Vtransform 1 needs hc <= min(h) over water: a deeper hc gives non-monotone level depths (NaN
        velocities downstream). The simulated bathymetry is fixed by the grid size, so this is checked here."""
        if self.vtransform == 1:
            import numpy as np

            from .simulator import make_grid

            grid = make_grid(self.ny, self.nx, self.dx_m)
            shallowest = float(np.asarray(grid.h)[np.asarray(grid.mask) > 0].min())
            if self.hc > shallowest:
                raise ValueError(f"sim.hc: Vtransform 1 needs hc <= min(h) over water; hc={self.hc} m but the "
                                 f"shallowest water of this grid is {shallowest:.3g} m (lower sim.hc or use "
                                 f"sim.vtransform: 2)")
        return self


class Split(Section):
    """Days of the record used for training, validation and test (consecutive, in that order)."""

    train_days: int = Field(15, ge=1, description="training days")
    val_days: int = Field(2, ge=0, description="validation days")
    test_days: int = Field(4, ge=1, description="test days")


class Ingest(Section):
    """open_roms / statistics / shards."""

    chunk_time: int = Field(1, ge=1, description="ocean_time records per dask chunk")
    identity_days: int = Field(3, ge=1, description="days of the two-pass NumPy and preview identity checks")
    identity_chunks: tuple[int, ...] = Field((1, 7, 48), min_length=1,
                                             description="ocean_time chunkings that must give the same statistics")
    mem_bound_chunks: float = Field(4.0, gt=0, description="claim 1: peak traced memory <= this x one chunk")
    level_order: Literal["bottom_up", "top_down"] = Field("bottom_up", description="preview level order [R]")
    layout: Literal["T_C_H_W", "C_T_H_W", "TC_H_W"] = Field("T_C_H_W", description="preview layout [R]")


class Model(Section):
    """CoastalViT [R] (ClimaX-like)."""

    patch: int = Field(8, ge=1, description="patch size p (the grid is padded to a multiple of p)")
    dim: int = Field(96, ge=1, description="token width")
    depth: int = Field(4, ge=1, description="transformer blocks")
    heads: int = Field(4, ge=1, description="attention heads")
    boundary_width: int = Field(4, ge=0, description="width (cells) of the boundary band of zeta(t0 + lead) [R]")
    coarsen: int = Field(1, ge=1, description="block-mean coarsening of inputs/targets (paper: 2)")


class Train(Section):
    """Training of the ViT arms."""

    epochs: int = Field(3, ge=1, description="epochs")
    batch_size: int = Field(16, ge=1, description="batch size")
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate (cosine schedule to 0)")
    weight_decay: float = Field(0.05, ge=0, description="AdamW weight decay")
    leads_h: Leads = Field((1, 3, 6, 12, 24), min_length=1, description="lead times sampled in training (h)")
    threads: int = Field(2, ge=1, description="torch CPU threads (also the train rule's threads)")
    device: Literal["cpu", "cuda", "auto"] = Field("cpu", description="torch device")


class Eval(Section):
    """Evaluation and claims."""

    leads_h: Leads = Field((1, 3, 6, 12, 24), min_length=1, description="evaluated lead times (h)")
    persistence_lead_h: float = Field(6, gt=0, description="claim 2 lead (h)")
    climatology_leads_h: Leads = Field((6, 12, 24), description="claim 3 leads (h)")
    min_gain: float = Field(0.10, description="claims 2-3: mean relative RMSE gain for reproduced")
    spearman_min: float = Field(0.9, ge=-1, le=1, description="claim 4: Spearman rho(lead, RMSE) threshold")
    bootstrap_resamples: int = Field(2000, ge=100, description="resamples of the moving-block bootstrap of the "
                                     "claims 2-3 gains over test start times")
    block_hours: float = Field(12.0, gt=0, description="block length of that bootstrap (h): about the M2 tidal "
                               "period, the error autocorrelation of neighbouring start times")
    max_t0: int | None = Field(None, ge=1, description="cap on test start times per lead (null: all)")


class Adequacy(Section):
    """Adequacy gates computed from the same run (a failed gate makes the claim inconclusive)."""

    growth_min_rho_persistence: float = Field(0.5, ge=-1, le=1, description="claim 4: Spearman rho(lead, "
                                              "persistence RMSE) must be at least this (the problem itself gets "
                                              "harder with lead)")


class Remote(Section):
    """Paper path: the real CoastalBench files listed in the study's manifest.csv, one job per month."""

    first_month: str = Field("2008-01", pattern=r"^\d{4}-\d{2}$", description="first month")
    last_month: str = Field("2017-12", pattern=r"^\d{4}-\d{2}$", description="last month")
    test_months: int = Field(12, ge=1, description="last months held out for test")
    val_months: int = Field(1, ge=0, description="months before them used for validation")


class Config(StudyConfig):
    """coastalbench study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="compared forecasts")
    data: Literal["simulate", "remote"] = Field("simulate", description="mini-ROMS (offline) or the real files")
    sim: Sim = Field(Sim(), description="mini-ROMS simulator [R]")
    split: Split = Field(Split(), description="consecutive days of the record")
    ingest: Ingest = Field(Ingest(), description="ingestion")
    model: Model = Field(Model(), description="CoastalViT [R]")
    train: Train = Field(Train(), description="training")
    eval: Eval = Field(Eval(), description="evaluation")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of the claims")
    remote: Remote = Field(Remote(), description="paper path")

    @model_validator(mode="after")
    def _split_fits(self):
        s = self.split
        if self.data == "simulate" and s.train_days + s.val_days + s.test_days != self.sim.days:
            raise ValueError(f"split: train_days + val_days + test_days must equal sim.days ({self.sim.days})")
        return self

    @property
    def trained_arms(self) -> tuple[str, ...]:
        return tuple(a for a in self.arms if a in TRAINED_ARMS)


_SPLIT = ("data", "split", "remote.test_months", "remote.val_months")  # what split_days reads

#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("data", "sim", "ingest.identity_days", "ingest.layout", "ingest.level_order"),
    "preprocess": (*_SPLIT, "ingest"),
    "stats_reduce": (*_SPLIT, "ingest"),
    "shard": (*_SPLIT, "ingest.chunk_time"),
    "train": (*_SPLIT, "arms", "seeds", "model", "train"),
    "evaluate": (*_SPLIT, "arms", "seeds", "model", "train.threads", "train.device", "eval", "adequacy",
                 "sim.output_interval_s"),
    "report": (),
}
