"""Configuration of the rip study: the single definition of every key (type, bounds, default, meaning).

``config/studies/rip.yaml`` sets the values (common keys + one block per scale); the JSON schema of that file is
generated from :class:`Config`. [R] marks reconstructions of details the paper leaves open. ``STAGE_KEYS``
declares the keys each stage reads: Snakemake reruns a stage only when one of them changes.

This module imports neither torch nor pandas: the Snakefile reads it at parse time.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["none", "rip", "random_same_size", "m1_only", "m2_only", "m3_only", "jaccard"]
ARMS: tuple[str, ...] = ("none", "rip", "random_same_size", "m1_only", "m2_only", "m3_only", "jaccard")


class World(Section):
    """The synthetic instruction world [R]."""

    n_sft: int = Field(2000, ge=1, description="SFT demonstrations of the seed model")
    n_pool: int = Field(2000, ge=1, description="pool prompts that RIP scores and filters")
    n_val: int = Field(200, ge=1, description="clean validation prompts (DPO checkpoint choice)")
    n_test: int = Field(500, ge=1, description="clean test prompts (claims)")
    min_args: int = Field(3, ge=1, le=8, description="k ~ U{min_args..max_args} digit arguments")
    max_args: int = Field(8, ge=1, le=8, description="upper end of the argument count (context 24)")
    share_garbled: float = Field(0.15, ge=0, le=1, description="share of garbled prompts (reward capped)")
    share_ambiguous: float = Field(0.15, ge=0, le=1, description="share of ambiguous prompts (hidden intent)")
    share_wrong_pref: float = Field(0.0, ge=0, le=1, description="share judged by another op than the one shown")
    garbled_cap: float = Field(0.3, ge=0, le=1, description="cap of the judge's reward on garbled prompts")
    sft_corrupt: float = Field(0.2, ge=0, le=1, description="share of SFT demonstrations with 1-2 edits [R]")

    @model_validator(mode="after")
    def _ranges(self):
        if self.min_args > self.max_args:
            raise ValueError("world.min_args/max_args: need min_args <= max_args")
        if self.share_garbled + self.share_ambiguous + self.share_wrong_pref >= 1:
            raise ValueError("world.share_*: must sum to < 1 (the rest is clean)")
        return self


class ModelCfg(Section):
    """The tiny seed decoder M (2 layers, d=64, 4 heads, context 24, ~70k parameters)."""

    n_layer: int = Field(2, ge=1, description="transformer blocks")
    d_model: int = Field(64, ge=1, description="width (divisible by n_head)")
    n_head: int = Field(4, ge=1, description="attention heads")
    context: int = Field(24, ge=24, description="tokens: 11 prompt + 12 new + EOS")
    mlp_ratio: int = Field(2, ge=1, description="MLP width ratio; 2 gives ~70k parameters [R]")

    @model_validator(mode="after")
    def _heads(self):
        if self.d_model % self.n_head:
            raise ValueError("model.d_model: must be divisible by model.n_head")
        return self


class Sft(Section):
    """Supervised fine-tuning of the seed model on the demonstrations."""

    steps: int = Field(600, ge=1, description="SFT minibatches")
    batch: int = Field(64, ge=1, description="demonstrations per minibatch")
    lr: float = Field(3e-3, gt=0, description="AdamW learning rate")
    seed: int = Field(0, ge=0, description="seed of the SFT run (fixed across DPO seeds)")


class Sampling(Section):
    """Pair scoring: N samples per prompt, scored by the judge."""

    n_responses: int = Field(16, ge=2, description="N samples per prompt (paper 64) [R]")
    max_new_tokens: int = Field(12, ge=1, description="response token limit [R]")
    temperature: float = Field(0.8, gt=0, description="sampling temperature (as the paper)")
    top_p: float = Field(0.95, gt=0, le=1, description="nucleus sampling mass (as the paper)")
    batch_size: int = Field(8192, ge=1, description="sequences decoded together as one tensor batch")
    judge_noise: float = Field(0.05, ge=0, description="std of the judge's scoring noise (0 at evaluation)")
    seed: int = Field(0, ge=0, description="sampling and judge-noise seed")




class Filter(Section):
    """RIP quantiles q1 (rejected reward), q2 (rejected length), q3 (reward gap); null disables one."""

    q_rejected_reward: float | None = Field(0.5, ge=0, le=1, description="keep m1 >= its q-quantile")
    q_rejected_length: float | None = Field(0.5, ge=0, le=1, description="keep m2 >= its q-quantile")
    q_gap: float | None = Field(0.5, ge=0, le=1, description="keep m3 <= its q-quantile")


class Dpo(Section):
    """DPO training of each arm (tiny-model hyperparameters [R])."""

    beta: float = Field(0.1, gt=0, description="DPO temperature")
    lr: float = Field(5e-4, gt=0, description="AdamW learning rate")
    batch: int = Field(32, ge=1, description="pairs per step")
    steps: int = Field(150, ge=1, description="optimiser steps")
    eval_every: int = Field(50, ge=1, description="validation reward check; the best checkpoint is kept")


class Paper(Section):
    """The paper path (cluster, GPUs). Models are rows of ``models.csv`` (``icml25.core.hub``: a pinned commit,
    never remote code). Proven on CPU by the rehearsal (tiny local models, ``sampler: hf``, ``dpo_backend: torch``)."""

    seed_model: str = Field("seed", description="models.csv row of the seed model M (policy start and reference)")
    reward_model: str = Field("reward", description="models.csv row of the pair-scoring reward model (ArmoRM)")
    judge_model: str = Field("judge", description="models.csv row of the local judge of the evaluation (an open "
                             "reward model other than ArmoRM) [R: stands in for the hosted GPT-4 judges]")
    model_dirs: dict[str, str] = Field({}, description="local directories replacing models.csv rows by name "
                                       "(the rehearsal's tiny models; weights placed by hand)")
    sampler: Literal["vllm", "hf"] = Field("vllm", description="sampling and greedy answers: vLLM (cluster) or "
                                           "transformers generate (CPU / one device)")
    dpo_backend: Literal["trl", "torch"] = Field("trl", description="DPO: TRL DPOTrainer (cluster) or the "
                                                 "transformers-only loop of hfpolicy.dpo_native")
    device: str = Field("cuda", description="torch device of the transformers models (reward models, judge, "
                        "reference log-probs, hf sampler, torch DPO)")
    dtype: Literal["bfloat16", "float16", "float32"] = Field("bfloat16", description="weights dtype of those models")
    gen_batch: int = Field(32, ge=1, description="prompts per transformers generate call (sampler hf)")
    score_batch: int = Field(16, ge=1, description="sequences per reward-model / log-prob forward pass")
    pool_size: int = Field(20000, ge=1, description="WildChat prompts scored")
    val_size: int = Field(470, ge=1, description="validation prompts (early stopping by mean reward); the held-out "
                          "test prompts of the local-judge evaluation are another split of the same size")
    released_set: str = Field("rip_8b", description="manifest entry of the released RIP set used as a check")
    lr: float = Field(1e-6, gt=0, description="DPO learning rate")
    batch: int = Field(64, ge=1, description="DPO batch size")
    epochs: int = Field(1, ge=1, description="DPO epochs")
    eval_every: int = Field(20, ge=1, description="checkpoint and validation-reward interval in optimiser steps; "
                            "the best checkpoint is kept (early stopping) [R]")
    max_length: int | None = Field(4096, ge=1, description="DPO token limit of prompt + answer; longer pairs lose "
                                   "the prompt's start (null: no limit) [R]")
    gpus: int = Field(8, ge=0, description="GPUs of the sampling, scoring and DPO jobs")
    max_new_tokens: int = Field(2048, ge=1, description="response token limit (sampling, validation and test answers)")

    @model_validator(mode="after")
    def _global_batch(self):
        if self.batch % max(1, self.gpus):
            raise ValueError("paper.batch: must be a multiple of paper.gpus (global batch = gpus x accumulation)")
        return self


class Claims(Section):
    """Effect-size floors of the claims (spec "Claims this study checks")."""

    min_effect: float = Field(0.01, ge=0, description="claims 1 and 4: mean paired test-reward gain that counts as "
                              "a win (spec claim 1: mean d > 0.01, noise-free judge reward in [0, 1])")


class Adequacy(Section):
    """Adequacy gates computed from the same run (a failed gate makes the claim inconclusive)."""

    dpo_min_gain: float = Field(0.0, description="claims 1 and 4: DPO on the whole pool (arm none) must raise the "
                                "seed model's mean test reward by at least this; else DPO itself degrades the policy "
                                "and no filter can show a better DPO model")
    min_pool_low_quality: float = Field(0.10, ge=0, le=1, description="claim 2: the pool's low-quality share must "
                                        "be at least this (else there is nothing for the filter to remove)")


class Config(StudyConfig):
    """rip study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="filter arms")
    source: Literal["world", "wildchat"] = Field("world", description="offline world [R] or the paper's data")
    data_seed: int = Field(0, ge=0, description="world generator seed")
    pairs_table: str | None = Field(None, description="pair table scored elsewhere (same schema); replaces scoring")
    world: World = Field(World(), description="the synthetic instruction world [R]")
    model: ModelCfg = Field(ModelCfg(), description="seed decoder M")
    sft: Sft = Field(Sft(), description="SFT of the seed model")
    sampling: Sampling = Field(Sampling(), description="pair scoring")
    filter: Filter = Field(Filter(), description="RIP quantiles")
    dpo: Dpo = Field(Dpo(), description="DPO of each arm")
    paper: Paper = Field(Paper(), description="paper path (GPUs)")
    claims: Claims = Field(Claims(), description="effect-size floors of the claims")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of the claims")


_PAPER_MODELS = ("paper.seed_model", "paper.reward_model", "paper.model_dirs", "paper.sampler", "paper.device",
                 "paper.dtype", "paper.gen_batch", "paper.score_batch", "paper.max_new_tokens", "paper.gpus")
_PAPER_SCORING = (*_PAPER_MODELS, "paper.pool_size", "paper.val_size")

#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "prepare": ("source", "world", "data_seed", "sft", "model"),
    "download": (),
    "preprocess": ("pairs_table", "source", "data_seed", "sampling", "model", *_PAPER_SCORING),
    "train": ("arms", "seeds", "source", "model", "filter", "dpo", "sampling.max_new_tokens", *_PAPER_MODELS,
              "paper.dpo_backend", "paper.lr", "paper.batch", "paper.epochs", "paper.eval_every",
              "paper.max_length"),
    "evaluate": ("source", "model", "filter", "sampling.max_new_tokens", "claims", "adequacy", *_PAPER_MODELS,
                 "paper.judge_model"),
}
