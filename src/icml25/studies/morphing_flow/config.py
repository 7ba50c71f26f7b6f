"""Configuration of the morphing_flow study: the single definition of every key (type, bounds, default, meaning).

``config/studies/morphing_flow.yaml`` sets the values (common keys + one block per scale); the JSON schema of that
file is generated from :class:`Config`. The paper publishes no code, so most method details are reconstructions,
marked [R] in the descriptions (the study README lists them). Claim thresholds are not keys: they are the
constants of :mod:`.evaluate`. ``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only
when one of them changes.

This module imports neither torch nor pandas: the Snakefile reads it at parse time.
"""
from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["revin_linear", "mof_flow", "mof_linear", "mof_linear_nonll", "dishts_linear", "san_linear",
              "fan_linear"]
DatasetName = Literal["synth", "msft", "taylor", "ETTh1", "ETTh2", "ETTm1", "ETTm2", "Electricity", "Traffic",
                      "Weather", "Exchange"]
Backbone = Literal["linear", "dlinear", "patch_mamba"]
Split = Literal["ratio", "etth", "ettm"]

#: Every dataset the study knows, in a fixed order (``data.<name>`` holds its window settings).
DATASETS: tuple[str, ...] = ("synth", "msft", "taylor", "ETTh1", "ETTh2", "ETTm1", "ETTm2", "Electricity", "Traffic",
                             "Weather", "Exchange")
#: Remote datasets (paper scale): fetched through ``manifest.csv`` (every URL at a commit), never available offline.
#: Electricity and Traffic have no sha256 knowable offline: their rows are UNPINNED (downloads need trust_unpinned).
REMOTE_DATASETS: tuple[str, ...] = ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "Electricity", "Traffic", "Weather",
                                    "Exchange")


def garch_problem(garch: tuple[float, float, float]) -> str | None:
    """Why ``(omega, alpha, beta)`` is not a stationary GARCH(1,1) with a positive variance, or None.

    ``sigma_t^2 = omega + alpha (sigma_{t-1} eta_{t-1})^2 + beta sigma_{t-1}^2`` needs ``omega > 0`` and
    ``alpha, beta >= 0`` (a positive variance at every step) and ``alpha + beta < 1`` (a finite unconditional
    variance ``omega / (1 - alpha - beta)``, where the generator starts). Otherwise the variance goes negative or
    diverges and the series comes out NaN.
    """
    omega, alpha, beta = (float(v) for v in garch)
    if not all(math.isfinite(v) for v in (omega, alpha, beta)):
        return f"(omega, alpha, beta) must be finite, got {garch!r}"
    if omega <= 0:
        return f"omega must be > 0 (the variance's floor), got omega = {omega!r}"
    if alpha < 0 or beta < 0:
        return f"alpha and beta must be >= 0 (a positive variance), got alpha = {alpha!r}, beta = {beta!r}"
    if alpha + beta >= 1:
        return (f"alpha + beta must be < 1 (a stationary GARCH with a finite unconditional variance), got "
                f"alpha + beta = {alpha + beta!r}")
    return None


class Generator(Section):
    """The fat-tailed ETT-format generator of ``synth`` [R] (the paper publishes none)."""

    n_channels: int = Field(7, ge=2, le=7, description="channels: the first n-1 ETT loads and OT [R]")
    start: str = Field("2016-07-01", description="first hourly timestamp")
    daily_amp: tuple[float, float] = Field((1.0, 3.0), description="A_d ~ U(lo, hi) [R]")
    weekly_amp: tuple[float, float] = Field((0.5, 1.5), description="A_w ~ U(lo, hi) [R]")
    ar: float = Field(0.7, gt=-1, lt=1, description="AR(1) coefficient of the noise e_t [R]")
    nu: float = Field(3.0, gt=2, description="Student-t degrees of freedom of the unit-variance shocks [R]")
    garch: tuple[float, float, float] = Field((0.05, 0.10, 0.85), description="GARCH(1,1) (omega, alpha, beta) [R]; "
                                              "checked at parse time: omega > 0, alpha, beta >= 0, alpha + beta < 1")
    jump_rate: float = Field(0.002, ge=0, description="Poisson jump arrivals per hour (1/500) [R]")
    jump_scale: float = Field(3.0, ge=0, description="Laplace(0, scale) jump sizes [R]")
    jump_half_life: float = Field(12.0, gt=0, description="half-life of a jump's decay, hours [R]")
    regime_high: float = Field(2.5, gt=0, description="high-regime multiplier r_t (low regime: 1) [R]")
    regime_mean_hours: float = Field(2000.0, ge=1, description="mean of the geometric regime durations [R]")
    forced_hours: int = Field(1000, ge=0, description="the last rows forced into the high regime [R]")
    level_sd: float = Field(0.02, ge=0, description="sd of the random-walk steps of the level [R]")
    ot_weight: float = Field(0.5, description="OT = ot_weight * mean(loads) + its own noise [R]")

    @field_validator("garch")
    @classmethod
    def _stationary_garch(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if (problem := garch_problem(v)) is not None:
            raise ValueError(problem)
        return v

    @field_validator("daily_amp", "weekly_amp")
    @classmethod
    def _ordered_range(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 <= v[0] <= v[1]:
            raise ValueError(f"the amplitude range (lo, hi) needs 0 <= lo <= hi, got {v!r}")
        return v


class Synth(Section):
    """The synthetic fat-tailed series (smoke, default)."""

    n_rows: int = Field(17420, ge=2, description="hourly rows (ETTh size)")
    data_seed: int = Field(0, ge=0, description="seed of the one fixed series; training seeds vary init and "
                                                "batches only [R]")
    generator: Generator = Field(Generator(), description="generator parameters [R]")
    split: Split = Field("ratio", description="70/10/20 by time, so the test period ends in the forced regime [R]")
    seq_len: int = Field(96, ge=2, description="lookback L")
    pred_len: int = Field(96, ge=1, description="horizon H")


class Series(Section):
    """Window settings of a dataset read from a file (msft, taylor, ETT)."""

    split: Split = Field("ratio", description="TSLib borders: etth, ettm (x4) or 70/10/20 by time (ratio)")
    seq_len: int = Field(96, ge=2, description="lookback L")
    pred_len: int = Field(24, ge=1, description="horizon H (replaced by pred_lens when that is set)")


def _ett(split: str) -> Series:
    return Series(split=split, seq_len=336, pred_len=96)


def _autoformer() -> Series:
    return Series(split="ratio", seq_len=336, pred_len=96)


class Data(Section):
    """Per-dataset settings; ``datasets`` selects the ones a run uses."""

    synth: Synth = Field(Synth(), description="the fat-tailed ETT-format generator")
    msft: Series = Field(Series(), description="daily MSFT returns from the pmdarima wheel (5 channels)")
    taylor: Series = Field(Series(pred_len=48), description="half-hourly demand from the pmdarima wheel (1 channel)")
    ETTh1: Series = Field(_ett("etth"), description="ETTh1 (paper; remote)")
    ETTh2: Series = Field(_ett("etth"), description="ETTh2 (paper; remote)")
    ETTm1: Series = Field(_ett("ettm"), description="ETTm1 (paper; remote)")
    ETTm2: Series = Field(_ett("ettm"), description="ETTm2 (paper; remote)")
    Electricity: Series = Field(_autoformer(), description="Autoformer bundle, 321 clients (paper; remote)")
    Traffic: Series = Field(_autoformer(), description="Autoformer bundle, 862 sensors (paper; remote)")
    Weather: Series = Field(_autoformer(), description="Autoformer bundle, 21 weather quantities (paper; remote)")
    Exchange: Series = Field(_autoformer(), description="Autoformer bundle, 8 exchange rates (paper; remote)")


class Model(Section):
    """The forecaster (Flow, Morph, backbone); every key is a reconstruction [R]."""

    n_bins: int = Field(16, ge=2, description="K spline bins [R]")
    bound: float = Field(3.0, gt=0, description="T: the spline acts on [-T, T] [R]")
    tails: Literal["linear", "identity"] = Field("linear", description="outside [-T, T]: boundary-bin slope "
                                                                        "(linear) or slope 1 (identity) [R]")
    spline: Literal["linear", "rq"] = Field("linear", description="piecewise linear or rational quadratic "
                                                                   "(Durkan et al. 2019) [R]")
    morph_mode: Literal["ttt_layer", "nll_finetune", "off"] = Field(
        "ttt_layer", description="Morph of the mof_linear arms: TTT layer, per-window NLL fine-tuning, or off [R]")
    rank: int = Field(16, ge=1, description="d of Morph's low-rank projections [R]")
    inner_steps: int = Field(1, ge=1, le=5, description="Morph test-time gradient steps [R]")
    inner_lr: float = Field(0.1, gt=0, description="Morph inner step size eta [R]")
    mask_seed: int = Field(0, ge=0, description="seed of Morph's fixed Bernoulli(0.5) mask [R]")
    finetune_steps: int = Field(5, ge=1, description="nll_finetune: Adam steps per window [R]")
    finetune_lr: float = Field(1e-2, gt=0, description="nll_finetune: Adam learning rate [R]")
    finetune_rho: float = Field(1.0, ge=0, description="nll_finetune: proximal weight rho [R]")
    eps: float = Field(1e-5, gt=0, description="instance norm: x~ = (x - mu) / (sigma + eps) [R]")
    moving_avg: int = Field(25, ge=1, description="dlinear: kernel of the trend moving average")
    patch_len: int = Field(16, ge=1, description="patch_mamba: patch length [R]")
    patch_stride: int = Field(8, ge=1, description="patch_mamba: patch stride [R]")
    d_model: int = Field(128, ge=1, description="patch_mamba: width [R]")
    n_layers: int = Field(2, ge=1, description="patch_mamba: Mamba blocks [R]")
    d_state: int = Field(16, ge=1, description="patch_mamba: SSM state size [R]")
    d_conv: int = Field(4, ge=1, description="patch_mamba: causal conv width [R]")
    expand: int = Field(2, ge=1, description="patch_mamba: inner expansion [R]")
    san_period: int = Field(12, ge=1, description="san_linear arm: SAN slice length, dividing L and H [R]")
    fan_top_k: int = Field(4, ge=1, description="fan_linear arm: FAN's number of dominant frequencies removed [R]")
    norm_hidden: int = Field(64, ge=1, description="san_linear, fan_linear: hidden width of the SAN statistics and "
                                                   "FAN non-stationary-part MLPs [R]")
    scan: Literal["parallel", "sequential"] = Field(
        "parallel", description="patch_mamba: selective scan in plain PyTorch, log-depth parallel or step by step "
                                "(equal up to rounding)")


class Train(Section):
    """Optimisation (TSLib conventions unless marked [R])."""

    lr: float = Field(1e-3, gt=0, description="Adam learning rate")
    batch_size: int = Field(32, ge=1, description="windows per step")
    epochs: int = Field(10, ge=1, description="at most this many epochs (early stopping on validation MSE)")
    patience: int = Field(3, ge=1, description="early-stopping patience, epochs")
    windows_per_epoch: int | None = Field(
        None, ge=1, description="null: every training window each epoch; else a fresh random subset of this many "
                                "per epoch (a compute budget) [R]")
    lam: float = Field(0.01, ge=0, description="weight of the Gaussianisation loss mean(z^2/2 - log|dz/dx|) [R]")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of training and prediction")
    threads: int = Field(1, ge=1, description="torch CPU threads (and the train rule's threads)")


class Eval(Section):
    """Claims 3-4: moving-block bootstrap over test windows, the effect-size floor and the forced-regime segment."""

    n_boot: int = Field(2000, ge=100, description="moving-block bootstrap resamples over test windows (block = H)")
    boot_seed: int = Field(0, ge=0, description="seed of the bootstrap resampling")
    segment_hours: int = Field(1000, ge=1, description="claim 4: windows whose whole target lies in the last this "
                                                       "many rows of the synth test period [R]")
    min_rel_gain: float = Field(
        0.01, ge=0, lt=1, description="effect-size floor of claims 3-4: the smallest relative MSE reduction counted "
                                      "as a gain (1 %, a sixth of the paper's 6.3 % average gain over its closest "
                                      "competitor, abstract; the paper gives no Linear-backbone figure)")


class Adequacy(Section):
    """Adequacy gates (computed from the same run; a failed gate makes the claim inconclusive)."""

    min_baseline_kurtosis: float = Field(
        1.0, description="claim 2: revin_linear's backbone inputs must have mean excess kurtosis >= this (a fat "
                         "tail to slim; a Gaussian has 0)")
    min_segment_mse_ratio: float = Field(
        1.0, gt=0, description="claim 4: mof_flow's MSE on the forced segment / on the whole test period must be "
                               ">= this (the segment is harder: the testbed shows drift)")


class Config(StudyConfig):
    """morphing_flow study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="revin_linear (baseline), mof_flow (Flow), mof_linear "
                                                            "(Flow + Morph), mof_linear_nonll (lambda = 0); "
                                                            "dishts_linear, san_linear, fan_linear (the normalisation "
                                                            "wrappers the paper compares with)")
    datasets: tuple[DatasetName, ...] = Field(min_length=1, description="datasets of the run")
    backbones: tuple[Backbone, ...] = Field(("linear",), min_length=1, description="backbones crossed with arms")
    pred_lens: tuple[int, ...] | None = Field(
        None, description="horizons crossed with datasets; null: each dataset's data.<name>.pred_len")
    data: Data = Field(Data(), description="per-dataset settings")
    model: Model = Field(Model(), description="the forecaster [R]")
    train: Train = Field(Train(), description="optimisation")
    eval: Eval = Field(Eval(), description="claims 3-4")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of claims 2 and 4")

    @model_validator(mode="after")
    def _distinct(self):
        for key in ("datasets", "backbones", "pred_lens"):
            values = getattr(self, key) or ()
            if len(set(values)) != len(values):
                raise ValueError(f"{key}: duplicates")
            if key == "pred_lens" and any(v < 1 for v in values):
                raise ValueError("pred_lens: horizons must be >= 1")
        return self


_WINDOW_KEYS = tuple(f"data.{d}.{k}" for d in DATASETS for k in ("split", "seq_len", "pred_len"))

#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("datasets", "data.synth.n_rows", "data.synth.data_seed", "data.synth.generator"),
    "preprocess": ("datasets", "pred_lens", "data.synth.generator.n_channels", *_WINDOW_KEYS),
    "train": ("arms", "seeds", "datasets", "backbones", "pred_lens", "model", "train"),
    "evaluate": ("eval", "adequacy"),
    "report": (),
}
