"""Configuration of the unisoma study: the single definition of every key (type, bounds, default, meaning).

``config/studies/unisoma.yaml`` sets the values (common keys + one block per scale); its JSON schema is generated
from :class:`Config`. [R] marks reconstructions of details the paper leaves open. ``STAGE_KEYS`` declares the
keys each stage reads. No torch import here (Snakemake parses it).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["unisoma", "unisoma_noedge", "implicit"]
ExperimentName = Literal[
    "bilateral_stamping/long_time", "unilateral_stamping/long_time", "cavity_extruding/autoregressive",
    "deforming_plate/long_time", "cavity_grasping/long_time", "cavity_grasping/autoregressive",
    "rice_grip/autoregressive", "tissue_manipulation/long_time", "tissue_manipulation/autoregressive"]
EXPERIMENT_NAMES: tuple[str, ...] = ExperimentName.__args__  # the official code's nine (paper_data.EXPERIMENTS)


class SimSection(Section):
    """2-D mass–spring bilateral-stamping simulator standing in for the official FEM data [R]."""

    load_steps: int = Field(200, ge=1, description="steps over which the dies move linearly [R]")
    hold_steps: int = Field(50, ge=0, description="steps the dies are then held; the output is the final state [R]")
    dt: float = Field(1e-3, gt=0, description="time step of the damped symplectic Euler integrator [R]")
    damping: float = Field(0.02, ge=0, lt=1, description="velocity damping per step [R]")
    k_metal: float = Field(50.0, gt=0, description="spring constant of the metal sheet (force = k strain) [R]")
    k_rubber: float = Field(2.0, gt=0, description="spring constant of the rubber pad [R]")
    yield_strain: float = Field(0.01, gt=0, description="yield strain of the elastic-perfectly-plastic metal [R]")
    contact_k: float = Field(200.0, gt=0, description="contact penalty per unit penetration [R]")


class DataSection(Section):
    """Data: simulated splits (offline) and the restricted pickle loader."""

    data_seed: int = Field(0, ge=0, description="seed of the simulated loads (the same data for every model seed)")
    n_train: int = Field(300, ge=2, description="training samples")
    n_eval: int = Field(50, ge=1, description="validation samples (logged per epoch, never used for verdicts)")
    n_test: int = Field(50, ge=2, description="held-out test samples (the claims' metric)")
    max_pickle_bytes: int = Field(2 * 1024 ** 3, ge=1, description="largest pickle the restricted loader opens")


class ModelSection(Section):
    """Architecture shared by the arms (width, slices, depth of Unisoma; the implicit baseline's depth is matched
    to Unisoma's parameter count)."""

    width: int = Field(64, ge=8, description="token width C (paper 128)")
    n_slices: int = Field(16, ge=2, description="slice tokens M per entity (paper 32)")
    n_layers: int = Field(2, ge=1, description="processor layers P of Unisoma (paper 2)")
    n_heads: int = Field(8, ge=1, description="attention heads (paper 8)")
    mlp_ratio: int = Field(4, ge=1, description="FFN hidden ratio")
    knn_k: int = Field(3, ge=1, description="neighbours of the kNN edge graph on initial deformable positions")
    contact_pairs: tuple[tuple[int, int], ...] = Field(
        ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3)),
        description="contact pairs over [metal, rubber, die_1, die_2] (official bilateral-stamping list)")
    implicit_max_layers: int = Field(32, ge=1, description="deepest implicit baseline tried when matching the "
                                                           "parameter count (within 10% of Unisoma) [R]")


class TrainSection(Section):
    """Optimisation (official: AdamW 3e-4, wd 1e-5, cosine to lr/10 per step, 100 epochs, batch 1)."""

    epochs: int = Field(40, ge=1, description="epochs")
    batch: int = Field(8, ge=1, description="samples per step")
    lr: float = Field(3e-4, gt=0, description="AdamW peak learning rate")
    weight_decay: float = Field(1e-5, ge=0, description="AdamW decoupled weight decay")
    final_lr_factor: float = Field(0.1, gt=0, le=1, description="cosine schedule ends at lr * final_lr_factor")


class EvalSection(Section):
    """Claims and checks."""

    min_gain: float = Field(0.0, ge=0, description="effect-size floor of claim 1 (rel-L2 units): the paper's numbers "
                                                   "are not checked here (no paper table for this testbed), so 0")
    equivariance_tol: float = Field(1e-5, gt=0, description="max |Δ| allowed in the float64 permutation check")


class AdequacySection(Section):
    """Adequacy gates of claim 1 (a failed gate makes it inconclusive)."""

    max_baseline_rel_l2_disp: float = Field(
        0.9, gt=0, description="the implicit baseline's mean relative L2 of the displacement must be at most this "
                               "(1 = predicting no displacement): the baseline has learnt the deformation")


class PaperSection(Section):
    """Paper scale: the official datasets (placed by hand) and the nine experiments of the official code, one GPU job
    per experiment x seed chunk training every arm. Schedules per experiment are the official ones
    (``paper_data.EXPERIMENTS``); ``epochs``/``eval_every``/``frames`` override them (the rehearsal)."""

    experiments: tuple[ExperimentName, ...] = Field(
        EXPERIMENT_NAMES, min_length=1, description="<dataset>/<task> experiments run (official: all nine)")
    manual_dir: str | None = Field(None, description="directory holding the hand-placed official pickles as "
                                                     "<dataset>/data/input/<dataset>_dataset_<split>.pkl (the "
                                                     "official README's root_folder layout); null: --mirror")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of the paper train/evaluate jobs "
                                                              "(paper: cuda)")
    epochs: int | None = Field(None, ge=1, description="epochs of every experiment (null: the official 100/200)")
    eval_every: int | None = Field(None, ge=1, description="validation interval in epochs (null: official)")
    frames: int | None = Field(None, ge=3, description="frames per autoregressive trajectory (null: official "
                                                       "121/105/41/105)")
    gpu_hours: float = Field(20.0, gt=0, description="runtime budget of one experiment x seed job (2 arms x 2-10 GPU-h) [R]")


class Config(StudyConfig):
    """unisoma study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="arms compared")
    sim: SimSection = Field(SimSection(), description="simulator [R]")
    data: DataSection = Field(DataSection(), description="data")
    model: ModelSection = Field(ModelSection(), description="architecture")
    train: TrainSection = Field(TrainSection(), description="training")
    eval: EvalSection = Field(EvalSection(), description="evaluation")
    adequacy: AdequacySection = Field(AdequacySection(), description="adequacy gates of claim 1")
    paper: PaperSection = Field(PaperSection(), description="paper-scale setting")
    threads: int = Field(1, ge=1, description="torch threads per job (2 shared cores: more threads spin-wait)")

    @model_validator(mode="after")
    def _consistent(self):
        if self.model.width % self.model.n_heads:
            raise ValueError(f"model.n_heads: width {self.model.width} is not divisible by {self.model.n_heads}")
        for a, b in self.model.contact_pairs:
            if not (0 <= a < 4 and 0 <= b < 4 and a != b and min(a, b) < 2):
                raise ValueError(f"model.contact_pairs: ({a}, {b}) must join two distinct solids of "
                                 "[metal, rubber, die_1, die_2], one of them deformable")
        if "implicit" in self.arms and "unisoma" not in self.arms:
            raise ValueError("arms: the implicit baseline's depth is matched to unisoma, which must be an arm too")
        return self


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("sim", "data.data_seed", "data.n_train", "data.n_eval", "data.n_test", "data.max_pickle_bytes",
                 "paper.experiments", "paper.manual_dir", "paper.frames"),
    "preprocess": ("data.max_pickle_bytes", "model.knn_k", "paper.experiments", "paper.frames"),
    "train": ("arms", "seeds", "model", "train", "threads", "paper.experiments", "paper.device", "paper.epochs",
              "paper.eval_every", "paper.frames"),
    "evaluate": ("arms", "seeds", "model", "data.max_pickle_bytes", "eval", "adequacy", "threads",
                 "paper.experiments", "paper.device", "paper.frames"),
    "report": (),
}
