"""Configuration of the rip study (frozen; unknown keys are errors). Keys are documented in
``config/studies/rip.yaml``; [R] marks reconstructions of details the paper leaves open.

This module imports neither torch nor pandas: the Snakefile reads it at parse time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Arm = Literal["none", "rip", "random_same_size", "m1_only", "m2_only", "m3_only", "jaccard"]
ARMS: tuple[str, ...] = ("none", "rip", "random_same_size", "m1_only", "m2_only", "m3_only", "jaccard")


@dataclass(frozen=True)
class World:
    """The synthetic instruction world (spec "Instruction world") [R]."""

    n_sft: int = 2000
    n_pool: int = 2000
    n_val: int = 200
    n_test: int = 500
    min_args: int = 3
    max_args: int = 8
    share_garbled: float = 0.15
    share_ambiguous: float = 0.15
    share_wrong_pref: float = 0.0
    garbled_cap: float = 0.3
    sft_corrupt: float = 0.2

    def __post_init__(self) -> None:
        for name in ("n_sft", "n_pool", "n_val", "n_test"):
            if getattr(self, name) < 1:
                raise ValueError(f"world.{name}: must be >= 1")
        if not 1 <= self.min_args <= self.max_args <= 8:
            raise ValueError("world.min_args/max_args: need 1 <= min_args <= max_args <= 8 (context 24)")
        shares = (self.share_garbled, self.share_ambiguous, self.share_wrong_pref)
        if any(s < 0 for s in shares) or sum(shares) >= 1:
            raise ValueError("world.share_*: must be >= 0 and sum to < 1 (the rest is clean)")
        if not 0 <= self.garbled_cap <= 1:
            raise ValueError("world.garbled_cap: must be in [0, 1]")
        if not 0 <= self.sft_corrupt <= 1:
            raise ValueError("world.sft_corrupt: must be in [0, 1]")


@dataclass(frozen=True)
class ModelCfg:
    """The tiny seed decoder M (spec: 2 layers, d=64, 4 heads, context 24, ~70k params)."""

    n_layer: int = 2
    d_model: int = 64
    n_head: int = 4
    context: int = 24
    mlp_ratio: int = 2  # [R] ratio 2 gives the spec's ~70k parameters

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError("model.d_model: must be divisible by model.n_head")
        if self.context < 24:
            raise ValueError("model.context: must be >= 24 (11 prompt + 12 new tokens + EOS)")


@dataclass(frozen=True)
class Sft:
    """Supervised fine-tuning of the seed model on the demonstrations."""

    steps: int = 600
    batch: int = 64
    lr: float = 3e-3
    seed: int = 0  # the seed model is fixed across DPO seeds (spec "Claims")


@dataclass(frozen=True)
class Sampling:
    """Pair scoring: N samples per prompt, scored by the judge (spec "Pair scoring")."""

    n_responses: int = 16
    max_new_tokens: int = 12
    temperature: float = 0.8
    top_p: float = 0.95
    batch_size: int = 8192  # sequences decoded together (tensor batch)
    judge_noise: float = 0.05  # std of the judge's scoring noise (0 at evaluation)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_responses < 2:
            raise ValueError("sampling.n_responses: need >= 2 to form a pair")
        if self.temperature <= 0:
            raise ValueError("sampling.temperature: must be > 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("sampling.top_p: must be in (0, 1]")
        if self.judge_noise < 0:
            raise ValueError("sampling.judge_noise: must be >= 0")


@dataclass(frozen=True)
class Filter:
    """RIP quantiles q1 (rejected reward), q2 (rejected length), q3 (reward gap); null disables one."""

    q_rejected_reward: float | None = 0.5
    q_rejected_length: float | None = 0.5
    q_gap: float | None = 0.5

    def __post_init__(self) -> None:
        for name in ("q_rejected_reward", "q_rejected_length", "q_gap"):
            q = getattr(self, name)
            if q is not None and not 0 <= q <= 1:
                raise ValueError(f"filter.{name}: must be in [0, 1] or null")


@dataclass(frozen=True)
class Dpo:
    """DPO training of each arm (spec "DPO"; default hyperparameters [R])."""

    beta: float = 0.1
    lr: float = 5e-4
    batch: int = 32
    steps: int = 150
    eval_every: int = 50

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ValueError("dpo.beta: must be > 0")
        if self.steps < 1 or self.batch < 1 or self.eval_every < 1:
            raise ValueError("dpo.steps/batch/eval_every: must be >= 1")


@dataclass(frozen=True)
class Paper:
    """The paper path (cluster, GPUs): model ids and sizes. Untested here (no GPUs, no hub access)."""

    seed_model: str = "meta-llama/Llama-3.1-8B-Instruct"
    reward_model: str = "RLHFlow/ArmoRM-Llama3-8B-v0.1"
    pool_size: int = 20000
    val_size: int = 470
    released_set: str = "rip_8b"  # manifest entry of the released RIP-filtered set used as a check
    lr: float = 1e-6
    batch: int = 64
    epochs: int = 1
    gpus: int = 8
    max_new_tokens: int = 2048


@dataclass(frozen=True)
class Config:
    """rip study configuration (merged common keys + one scale)."""

    seeds: tuple[int, ...]
    arms: tuple[Arm, ...]
    seeds_per_job: int | None = None
    source: Literal["world", "wildchat"] = "world"
    data_seed: int = 0
    pairs_table: str | None = None  # a pair table scored elsewhere (same schema) replaces the sampling
    world: World = field(default_factory=World)
    model: ModelCfg = field(default_factory=ModelCfg)
    sft: Sft = field(default_factory=Sft)
    sampling: Sampling = field(default_factory=Sampling)
    filter: Filter = field(default_factory=Filter)
    dpo: Dpo = field(default_factory=Dpo)
    paper: Paper = field(default_factory=Paper)
    bootstrap_resamples: int = 2000

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("seeds: at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: duplicates")
        if not self.arms:
            raise ValueError("arms: at least one arm")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError("arms: duplicates")
        if self.seeds_per_job is not None and self.seeds_per_job < 1:
            raise ValueError("seeds_per_job: must be >= 1 or null")
        if self.bootstrap_resamples < 100:
            raise ValueError("bootstrap_resamples: must be >= 100")
