"""Configuration of the data_remix study: the single definition of every key (type, bounds, default, meaning).

``config/studies/data_remix.yaml`` sets the values (common keys + one block per scale); the JSON schema of that
file is generated from :class:`Config`. [V] marks a value taken from the released code, [R] a reconstruction or
a choice of ours. Accuracy-type metrics are fractions; the claim statistics convert differences to points. The
fixed thresholds of the checks are constants of :mod:`.evaluate`; the effect floor of claims 3–4 (``min_gain_pt``,
from the paper) and the adequacy gate (``adequacy.min_laziness_pt``, a choice) are keys. ``STAGE_KEYS`` declares the keys each stage reads.

No torch import here: Snakemake parses this module.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["joint", "joint_noaux", "remix", "remix_code_lr", "solo_a", "solo_v"]
Dataset = Literal["synth", "digits", "cremad", "kinetics_sounds"]
#: datasets the offline scales build (generator, and the MNIST-5k / 8x8 digits wheels); the others are the paper's
OFFLINE_DATASETS = ("synth", "digits")
Prob = Annotated[float, Field(ge=0, le=1)]


class Train(Section):
    """Optimisation and model of every arm (identical unless the arm says otherwise)."""

    epochs: int = Field(30, ge=1, description="training epochs (released: 60) [R]")
    warmup: int = Field(5, ge=0, description="joint warm-up epochs before the first assignment pass (released: 10) [R]")
    batch_size: int = Field(64, ge=1, description="batch size of joint and reassembled batches [V]")
    lr: float = Field(1e-3, gt=0, allow_inf_nan=False, description="Adam learning rate of every arm except "
                                                                   "remix_code_lr [R]")
    remix_code_lr: float = Field(5e-5, gt=0, allow_inf_nan=False,
                                 description="the released Remix learning rate, used only by remix_code_lr [V]")
    weight_decay: float = Field(1e-4, ge=0, allow_inf_nan=False, description="Adam weight decay (coupled L2) [V]")
    lr_step: int = Field(15, ge=1, description="StepLR step in epochs: half the run, as the released 30 of 60 [R]")
    lr_gamma: float = Field(0.1, gt=0, le=1, description="StepLR factor [V]")
    alpha: float = Field(0.5, ge=0, allow_inf_nan=False, description="weight of CE(h_a) in the warm-up / joint loss [V]")
    beta: float = Field(0.5, ge=0, allow_inf_nan=False, description="weight of CE(h_v) in the warm-up / joint loss [V]")
    gamma1: float = Field(1.0, ge=0, allow_inf_nan=False, description="weight of CE(h_v) in a visual batch [V]")
    gamma2: float = Field(1.0, ge=0, allow_inf_nan=False, description="weight of CE(h_a) in an audio batch [V]")
    hidden: int | None = Field(128, ge=1, description="MLP encoder hidden width d → hidden → feat; null with the "
                                                      "ResNet-18 encoders of the paper scale [R]")
    feat: int = Field(64, ge=1, description="encoder feature size F (ResNet-18: 512) [R]")
    resnet_width: int = Field(64, ge=1, description="base width of the paper-scale ResNet-18 encoders (stages of "
                                                     "width, 2·, 4·, 8·width channels; feat must equal 8·width); "
                                                     "64 = ResNet-18 [V]; the rehearsal shrinks it")
    eval_batch: int = Field(4096, ge=1, description="rows per forward pass of the assignment pass, the test "
                                                    "accuracies and the probe features (memory only, no effect on "
                                                    "values)")
    resnet_init: Literal["official", "torch"] = Field(
        "official", description="initialisation of the paper-scale ResNet-18 encoders: official = the released "
                                "code's (conv Kaiming normal fan_out, norm weights N(1, 0.02), biases 0) [V]; torch = "
                                "PyTorch's defaults")

    @model_validator(mode="after")
    def _warmup_before_end(self):
        if self.warmup >= self.epochs:
            raise ValueError(f"warmup: {self.warmup} must be < epochs ({self.epochs}): Remix needs at least one "
                             "post-warm-up epoch")
        return self


class Synth(Section):
    """synth-AV generator (exact generator; sizes per scale)."""

    n_train_per_class: int = Field(500, ge=1, description="train samples per class")
    n_test_per_class: int = Field(200, ge=1, description="test samples per class")
    C: int = Field(6, ge=2, description="classes")
    d: int = Field(32, ge=1, description="dimension of each modality")
    s_a: float = Field(1.5, ge=0, allow_inf_nan=False, description="audio class-mean scale (strong modality)")
    s_v: float = Field(0.5, ge=0, allow_inf_nan=False, description="visual class-mean scale (weak modality)")
    rho: tuple[Prob, Prob] = Field((0.1, 0.1), description="P(audio corrupted), P(visual corrupted)")

    @model_validator(mode="after")
    def _rho_sum(self):
        if sum(self.rho) > 1:
            raise ValueError(f"rho: {list(self.rho)} must sum to <= 1 (the rest are clean samples)")
        return self


class Digits(Section):
    """digit pairs [R]: MNIST-5k (audio slot, 400/100 per class by ``core.datasets.mnist5k_split``) x noisy 8x8
    scikit-learn digits (visual slot)."""

    noise_sd: float = Field(0.5, ge=0, allow_inf_nan=False,
                            description="sd of the Gaussian noise added to the /16-scaled 8x8 digits (weakens B) [R]")
    digits_train_frac: float = Field(0.8, gt=0, lt=1, description="per-class train share of the 1797 8x8 digits [R]")


class PaperData(Section):
    """A paper-scale audio-visual dataset (:mod:`.paper_data`): split lists downloaded, clips placed by hand under
    ``root``; audio front end :mod:`.audio`."""

    root: str = Field("data/manual/data_remix/cremad", min_length=1,
                      description="folder of the hand-placed clips (<audio dir>/<clip>.wav, Image-01-FPS/<clip>/"
                                  "frame_<k>.jpg), relative to the repository root or absolute")
    n_classes: int = Field(6, ge=2, description="classes")
    frames: int = Field(2, ge=1, description="video frames sampled per clip [V]")
    image_size: int = Field(224, ge=1, description="frame size (pixels, square) [V]")
    sample_rate: int = Field(22050, ge=1, description="audio sample rate of the spectrogram (Hz)")
    seconds: float = Field(3.0, gt=0, allow_inf_nan=False, description="audio length: the clip is tiled and cut to it")
    n_fft: int = Field(512, ge=2, description="STFT window (samples) [V]")
    hop: int = Field(353, ge=1, description="STFT hop (samples) [V]")
    max_missing_frac: float = Field(0.01, ge=0, le=1, description="largest share of listed clips that may be absent "
                                                                  "on disk (skipped, as released) [R]")


class Adequacy(Section):
    """Adequacy gates of claims 3–4 (issue 31): can this testbed show the paper's effect at all?"""

    min_laziness_pt: float = Field(1.0, ge=0, allow_inf_nan=False,
                                   description="weak-modality linear probe of solo_v minus that of joint (points) "
                                               "needed on every dataset: the data must leave the weak modality "
                                               "under-trained by joint training, the defect Remix removes [R]")


class Config(StudyConfig):
    """data_remix study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="arms compared (joint and remix are the claims' pair)")
    datasets: tuple[Dataset, ...] = Field(min_length=1, description="datasets every arm is trained on")
    threads: int = Field(1, ge=1, description="torch intra-op threads per train job")
    probe_max_iter: int = Field(500, ge=1, description="lbfgs iterations of the linear probe")
    min_gain_pt: float = Field(3.41, ge=0, allow_inf_nan=False,
                               description="effect floor of claims 3-4 in accuracy points: the paper's smaller "
                                           "headline gain (+3.41 on Kinetics-Sounds; +6.50 on CREMA-D; abstract, "
                                           "Table 1) [V]")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of claims 3-4")
    encoder: Literal["mlp", "resnet18"] = Field("mlp", description="MLP encoders offline; two ResNet-18 at paper "
                                                                   "scale [V]")
    train: Train = Field(Train(), description="optimisation and model")
    synth: Synth = Field(Synth(), description="synth-AV generator")
    digits: Digits = Field(Digits(), description="digit pairs [R]")
    cremad: PaperData = Field(PaperData(), description="CREMA-D (paper scale)")
    kinetics_sounds: PaperData = Field(PaperData(root="data/manual/data_remix/kinetics_sounds", n_classes=31,
                                                 sample_rate=16000, seconds=10.0, max_missing_frac=0.05),
                                       description="Kinetics-Sounds (paper scale)")
    gpus: int = Field(1, ge=0, description="GPUs per paper-scale train job")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of the train jobs (cuda at paper scale)")

    @model_validator(mode="after")
    def _claims_pair(self):
        missing = [a for a in ("joint", "remix") if a not in self.arms]
        if missing:
            raise ValueError(f"arms: must include {missing} (claims 1, 3 and 4 compare remix with joint)")
        if len(set(self.datasets)) != len(self.datasets):
            raise ValueError("datasets: duplicates")
        paper = [d for d in self.datasets if d not in OFFLINE_DATASETS]
        if paper and self.encoder != "resnet18":
            raise ValueError(f"encoder: the paper datasets {paper} need resnet18 (spectrograms and frames)")
        offline = [d for d in self.datasets if d in OFFLINE_DATASETS]
        if offline and self.encoder != "mlp":
            raise ValueError(f"encoder: the offline datasets {offline} need mlp (feature vectors)")
        if self.encoder == "resnet18" and self.train.feat != 8 * self.train.resnet_width:
            raise ValueError(f"train.feat: {self.train.feat} must be 8 * train.resnet_width "
                             f"({8 * self.train.resnet_width}) with the ResNet-18 encoders")
        return self


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("datasets",),
    "preprocess": ("seeds", "datasets", "synth", "digits", "cremad", "kinetics_sounds"),
    "train": ("arms", "seeds", "datasets", "threads", "probe_max_iter", "encoder", "train", "device"),
    "evaluate": ("arms", "seeds", "datasets", "train.warmup", "min_gain_pt", "adequacy"),
    "report": (),
}
