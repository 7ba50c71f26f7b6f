"""Configuration of the sard study: the single definition of every key (type, bounds, default, meaning).

``config/studies/sard.yaml`` sets the values (common keys + one block per scale); the JSON schema of that file is
generated from :class:`Config`. [R] marks a reconstruction: the paper's method section was not read, so every loss,
attack, agent and dataset choice is ours and each is a key here. Claim thresholds are not keys: they are constants
of :mod:`.evaluate`, fixed before any result was seen. ``STAGE_KEYS`` declares the keys each stage reads.

No torch import here: Snakemake parses this module.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

TrainedArm = Literal["clean_l2d", "sard", "sard_ce"]
Arm = Literal["clean_l2d", "sard", "sard_ce", "clean_l2d_agents_perturbed"]
Dataset = Literal["digits", "diabetes", "cifar10", "california_housing", "voc2007"]
#: datasets the offline scales run (read from the scikit-learn wheel); the others are the paper scale's
OFFLINE_DATASETS = ("digits", "diabetes")
#: arms that evaluate another arm's rejector instead of training one: {arm: the arm whose rejector it uses}.
#: ``clean_l2d_agents_perturbed`` is the clean_l2d rejector scored with the main model also seeing x′ (threat model).
EVALUATION_ARMS: dict[str, str] = {"clean_l2d_agents_perturbed": "clean_l2d"}

Budget = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, lt=1)]
Fee = Annotated[float, Field(ge=0, allow_inf_nan=False)]


#: Defaults of the ``sard`` arm, shared with the public ``sard_loss`` (its keyword defaults are these, so the
#: function called without options computes the pipeline's loss). Why these values: README "Tuning".
SARD_INNER = "per_agent"          # the supremum of eq. (12) is per agent
SARD_SURROGATE = "smooth"         # the smooth upper bound (the ramp reading cannot be trained: README)
SARD_PENALTY_NORM = "l1"          # l1 (the direct Lipschitz bound) or l2 (Cauchy-Schwarz, coefficient sqrt(J))
SARD_PENALTY_WEIGHT = 0.03        # w; 1 = the upper bound; chosen on tuning seeds (README "Tuning")


def trained_arms(arms: tuple[str, ...] | list[str]) -> list[str]:
    """The arms of ``arms`` that train a rejector (one train job each), in order."""
    return [a for a in arms if a not in EVALUATION_ARMS]


def evaluation_arms_of(arm: str, arms: tuple[str, ...] | list[str]) -> list[str]:
    """The evaluation-only arms of ``arms`` that score ``arm``'s rejector (evaluated in ``arm``'s train job)."""
    return [a for a in arms if EVALUATION_ARMS.get(a) == arm]


class ArmConfig(Section):
    """Loss of one trained arm [R] (the SARD surrogate is reconstructed from the comp-sum and ρ-margin losses)."""

    loss: Literal["clean", "adversarial"] = Field(
        "clean", description="clean: two-stage comp-sum surrogate at x; adversarial: the surrogate at a PGD point "
                             "x′ of the training budget [R]")
    nu: float = Field(1.0, ge=0, allow_inf_nan=False, description="comp-sum exponent ν (1 = cross-entropy) [R]")
    rho: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        None, description="ρ of the ramp Φ_ρ in the ρ-margin loss; null: the smooth comp-sum Φ_ν [R]")
    surrogate: Literal["smooth", "ramp"] = Field(
        "smooth", description="with a float rho, what an adversarial arm minimises: ramp = the rho-margin comp-sum "
                              "at the PGD point (the literal reading; flat outside (0, rho), so no gradient towards "
                              "an agent ranked above, and it collapses to a constant allocation); smooth = its upper "
                              "bound Phi_nu(r(x)/rho) + (1/rho)||Delta_j(x') - Delta_j(x)||_1 with x' from PGD on the "
                              "penalty (the smooth adversarial comp-sum of Mao, Mohri & Zhong 2023) [R]")
    penalty_weight: float = Field(
        1.0, ge=0, allow_inf_nan=False, description="surrogate smooth: weight w of the robustness penalty "
                                                    "kappa ||Delta_j(x') - Delta_j(x)||; 1 = the value that makes "
                                                    "it an upper bound of the rho-margin loss; an extra "
                                                    "hyper-parameter below 1 [R]")
    penalty_norm: Literal["l1", "l2"] = Field(
        "l1", description="surrogate smooth: norm of the penalty; l1 with kappa = 1/rho (the direct Lipschitz "
                          "bound, the tighter one) or l2 with kappa = sqrt(J)/rho (via Cauchy-Schwarz; the form "
                          "of Mao, Mohri & Zhong 2023) [R]")
    inner: Literal["joint", "per_agent"] = Field(
        "per_agent", description="inner maximisation: one PGD point per agent (per_agent: the supremum of eq. "
                                 "(12) is inside the sum over agents) or one point for all agents (joint) [R]")
    rho_warmup_epochs: int = Field(
        0, ge=0, description="first epochs of an adversarial arm with the comp-sum at x′ instead of the ramp "
                             "(an exploration switch, not part of the method; 0 = off) [R]")
    agents_see_perturbation: bool = Field(
        False, description="the main model g is also evaluated at x′ when the rejector is attacked (threat "
                           "model); the simulated experts depend on (x, y) only [R]")


class Arms(Section):
    """Per-arm losses of the three trained arms [R]."""

    clean_l2d: ArmConfig = Field(ArmConfig(), description="baseline: clean two-stage surrogate, ν = 1")
    sard: ArmConfig = Field(ArmConfig(loss="adversarial", rho=1.0, surrogate=SARD_SURROGATE,
                                      penalty_weight=SARD_PENALTY_WEIGHT, penalty_norm=SARD_PENALTY_NORM,
                                      inner=SARD_INNER),
                            description="SARD: smooth upper bound of the adversarial ρ-margin comp-sum, ρ = 1, ν = 1, "
                                        "per-agent inner PGD [R]")
    sard_ce: ArmConfig = Field(ArmConfig(loss="adversarial"),
                               description="SARD with the comp-sum Φ_ν at x′ (convex in the scores) [R]")


class Train(Section):
    """Rejector training (only the rejector is learned; the agents are fixed)."""

    optimizer: Literal["adam"] = Field("adam", description="optimiser [R]")
    lr: float = Field(1e-3, gt=0, allow_inf_nan=False, description="Adam learning rate [R]")
    batch_size: int = Field(64, ge=1, description="minibatch size [R]")
    eps: Budget = Field(0.1, description="training budget γ of the adversarial arms (ℓ∞) [R]")
    steps: int = Field(10, ge=1, description="inner PGD steps during training [R]")
    val_steps: int = Field(10, ge=1, description="PGD steps of the per-epoch validation attack (budget eps)")
    val_batch_size: int | None = Field(None, ge=1, description="validation attack in chunks of this many points "
                                                               "(GPU memory); null = the whole split at once")


class Attack(Section):
    """Evaluation attacks [R]: ℓ∞ PGD, untargeted (expected cost) and targeted (log softmax_t)."""

    norm: Literal["linf"] = Field("linf", description="attack norm (only ℓ∞ is implemented) [R]")
    eps_grid: tuple[Budget, ...] = Field((0.0, 0.05, 0.1, 0.2), min_length=1,
                                         description="evaluation budgets ε [R]")
    steps: int = Field(20, ge=1, description="evaluation PGD steps [R]")
    alpha_factor: float = Field(2.5, gt=0, allow_inf_nan=False,
                                description="PGD step size α = alpha_factor · ε / steps [R]")
    rand_init: bool = Field(True, description="uniform random start in the ball (1 restart) [R]")
    claim_eps: Budget = Field(0.1, description="budget of claims 1 and 2")
    target: Literal["costliest"] = Field("costliest",
                                         description="targeted agent: the expert with the largest fee [R]")
    batch_size: int | None = Field(None, ge=1, description="test attacks in chunks of this many points (GPU "
                                                           "memory); null = the whole test split at once")


class Adequacy(Section):
    """Adequacy gate of claims 1–3 (ours: the spec and the paper state none)."""

    collapse_share: float = Field(
        0.99, gt=0.5, le=1, description="a seed's rejector has collapsed when one agent gets at least this share of "
                                        "its clean test allocations while the cost-optimal allocation gives no agent "
                                        "that share; claims comparing a collapsed rejector are inconclusive (ours)")


class Identities(Section):
    """Claim 4: random scores and costs for the surrogate-bound and Bayes-allocation checks (float64)."""

    n: int = Field(100_000, ge=100, description="random (scores, costs) rows")
    seed: int = Field(0, ge=0, description="rng seed of the rows")


class Split(Section):
    """Shared validators of a dataset section."""

    @model_validator(mode="after")
    def _split_sums_to_one(self):
        split = getattr(self, "split")
        if not math.isclose(sum(split), 1.0, abs_tol=1e-9):
            raise ValueError(f"split: fractions {list(split)} must sum to 1 (agents/train/val/test)")
        return self


class Digits(Split):
    """digits (scikit-learn wheel): agents, costs and rejector [R]."""

    split: tuple[Fraction, Fraction, Fraction, Fraction] = Field(
        (0.3, 0.4, 0.1, 0.2), description="agents / rejector-train / validation / test, stratified by label [R]")
    main_weak_classes: tuple[Annotated[int, Field(ge=0, le=9)], ...] = Field(
        (5, 6, 7, 8, 9), description="classes subsampled when fitting the main model g [R]")
    main_weak_keep: float = Field(0.1, ge=0, le=1, description="fraction of those classes kept (g is weak on them) [R]")
    main_max_iter: int = Field(1000, ge=1, description="lbfgs iterations of g's logistic regression")
    expert_classes: tuple[tuple[Annotated[int, Field(ge=0, le=9)], ...],
                          tuple[Annotated[int, Field(ge=0, le=9)], ...]] = Field(
        ((5, 6, 7), (7, 8, 9)), description="competence sets of experts 1 and 2 [R]")
    expert_p: float = Field(0.95, ge=0, le=1, description="probability an expert is right on its competence set [R]")
    beta: tuple[Fee, Fee] = Field((0.05, 0.10), description="consultation fees β₁, β₂ of the experts; costs are "
                                                            "divided by 1 + max β so they stay in [0, 1] [R]")
    hidden: tuple[Annotated[int, Field(ge=1)], ...] = Field((128, 128), description="rejector MLP widths [R]")
    epochs: int = Field(30, ge=1, description="rejector training epochs [R]")


class Diabetes(Split):
    """diabetes (scikit-learn wheel): agents, costs and rejector [R]."""

    split: tuple[Fraction, Fraction, Fraction, Fraction] = Field(
        (0.3, 0.4, 0.1, 0.2), description="agents / rejector-train / validation / test, unstratified [R]")
    main_features: tuple[Literal["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"], ...] = Field(
        ("age", "sex", "bmi"), min_length=1, description="features of the main model g (ridge) [R]")
    ridge_alpha: float = Field(1.0, ge=0, allow_inf_nan=False, description="ridge penalty of g and the experts [R]")
    beta: tuple[Fee, Fee] = Field((0.05, 0.10), description="expert fees, as digits.beta [R]")
    cost_scale: float = Field(4.0, gt=0, allow_inf_nan=False,
                              description="c = min(1, (ŷ − y)² / cost_scale) + β on the standardised target [R]")
    hidden: tuple[Annotated[int, Field(ge=1)], ...] = Field((64, 64), description="rejector MLP widths [R]")
    epochs: int = Field(150, ge=1, description="rejector training epochs [R]")


class Cifar10(Split):
    """CIFAR-10 (paper scale): ResNet-18 main model g, simulated experts, ResNet-18 rejector [R]."""

    split: tuple[Fraction, Fraction, Fraction, Fraction] = Field(
        (0.3, 0.4, 0.1, 0.2), description="agents / rejector-train / validation / test of the 60,000 pooled images, "
                                          "stratified by label [R]")
    main_weak_classes: tuple[Annotated[int, Field(ge=0, le=9)], ...] = Field(
        (5, 6, 7, 8, 9), description="classes subsampled when training g [R]")
    main_weak_keep: float = Field(0.1, ge=0, le=1, description="fraction of those classes kept (g is weak there) [R]")
    main_width: int = Field(64, ge=1, description="ResNet-18 base width of g (64 = the standard network)")
    main_epochs: int = Field(30, ge=1, description="g's training epochs (SGD 0.9, cosine, crop + flip) [R]")
    main_lr: float = Field(0.1, gt=0, allow_inf_nan=False, description="g's initial SGD learning rate [R]")
    main_batch_size: int = Field(128, ge=2, description="g's minibatch size")
    expert_classes: tuple[tuple[Annotated[int, Field(ge=0, le=9)], ...],
                          tuple[Annotated[int, Field(ge=0, le=9)], ...]] = Field(
        ((5, 6, 7), (7, 8, 9)), description="competence sets of experts 1 and 2 [R]")
    expert_p: float = Field(0.95, ge=0, le=1, description="probability an expert is right on its set [R]")
    beta: tuple[Fee, Fee] = Field((0.05, 0.10), description="expert fees, as digits.beta [R]")
    rejector: Literal["resnet18"] = Field("resnet18", description="rejector architecture [R]")
    width: int = Field(64, ge=1, description="ResNet-18 base width of the rejector (64 = standard)")
    epochs: int = Field(100, ge=1, description="rejector training epochs [R]")


class CaliforniaHousing(Split):
    """California Housing (paper scale): ridge agents, MLP rejector [R] (the diabetes construction)."""

    split: tuple[Fraction, Fraction, Fraction, Fraction] = Field(
        (0.3, 0.4, 0.1, 0.2), description="agents / rejector-train / validation / test, unstratified [R]")
    main_features: tuple[Literal["MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup",
                                 "Latitude", "Longitude"], ...] = Field(
        ("MedInc", "HouseAge", "AveRooms"), min_length=1, description="features of g (ridge) [R]")
    ridge_alpha: float = Field(1.0, ge=0, allow_inf_nan=False, description="ridge penalty of g and the experts [R]")
    beta: tuple[Fee, Fee] = Field((0.05, 0.10), description="expert fees [R]")
    cost_scale: float = Field(4.0, gt=0, allow_inf_nan=False,
                              description="c = min(1, (ŷ − y)² / cost_scale) + β on the standardised target [R]")
    hidden: tuple[Annotated[int, Field(ge=1)], ...] = Field((128, 128), description="rejector MLP widths [R]")
    epochs: int = Field(100, ge=1, description="rejector training epochs [R]")


class Voc2007(Split):
    """Pascal VOC 2007 (paper scale), multi-task: class + box of each image's largest object [R]."""

    split: tuple[Fraction, Fraction, Fraction, Fraction] = Field(
        (0.3, 0.4, 0.1, 0.2), description="agents / rejector-train / validation / test of the 9,963 pooled "
                                          "trainval + test images, unstratified [R]")
    image_size: int = Field(128, ge=8, description="images resized to image_size² (rejector and g input) [R]")
    main_width: int = Field(64, ge=1, description="ResNet-18 base width of g (class + box heads; stands in for "
                                                  "the paper's Faster R-CNN, README) [R]")
    main_epochs: int = Field(30, ge=1, description="g's training epochs [R]")
    main_lr: float = Field(0.05, gt=0, allow_inf_nan=False, description="g's initial SGD learning rate [R]")
    main_batch_size: int = Field(64, ge=2, description="g's minibatch size")
    box_weight: float = Field(1.0, ge=0, allow_inf_nan=False, description="weight of g's smooth-l1 box loss [R]")
    expert_classes: tuple[tuple[Annotated[int, Field(ge=0, le=19)], ...],
                          tuple[Annotated[int, Field(ge=0, le=19)], ...]] = Field(
        ((2, 7, 9, 11, 12, 16), (0, 1, 3, 5, 6, 13, 18)),
        description="competence sets of experts 1 (animals) and 2 (vehicles), VOC class indices [R]")
    expert_p: float = Field(0.9, ge=0, le=1, description="probability an expert is right on its set [R]")
    expert_box_noise: float = Field(0.05, ge=0, allow_inf_nan=False,
                                    description="a right expert's box corners jittered by N(0, noise × box size) [R]")
    beta: tuple[Fee, Fee] = Field((0.05, 0.10), description="expert fees [R]")
    lambda_reg: float = Field(1.0, ge=0, allow_inf_nan=False,
                              description="multi-task cost c = c_cls + λ·c_reg, c_reg = 1 − IoU [R]")
    rejector: Literal["resnet18"] = Field("resnet18", description="rejector architecture [R]")
    width: int = Field(64, ge=1, description="ResNet-18 base width of the rejector")
    epochs: int = Field(60, ge=1, description="rejector training epochs [R]")


class Paper(Section):
    """Paper scale: cluster resources."""

    gpus: int = Field(1, ge=0, description="GPUs per paper-scale preprocess and train job")


class Config(StudyConfig):
    """sard study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(
        min_length=1, description="arms compared; clean_l2d_agents_perturbed reuses clean_l2d's rejector")
    datasets: tuple[Dataset, ...] = Field(min_length=1, description="datasets; digits is the claims' primary one")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of the rejector (cuda: paper scale)")
    arm_config: Arms = Field(Arms(), description="loss of each trained arm [R]")
    train: Train = Field(Train(), description="rejector training [R]")
    attack: Attack = Field(Attack(), description="evaluation attacks [R]")
    adequacy: Adequacy = Field(Adequacy(), description="collapse gate of claims 1-3 (ours)")
    identities: Identities = Field(Identities(), description="claim-4 random inputs")
    digits: Digits = Field(Digits(), description="digits agents, costs and rejector [R]")
    diabetes: Diabetes = Field(Diabetes(), description="diabetes agents, costs and rejector [R]")
    cifar10: Cifar10 = Field(Cifar10(), description="CIFAR-10 agents, costs and rejector (paper scale) [R]")
    california_housing: CaliforniaHousing = Field(CaliforniaHousing(), description="California Housing agents, "
                                                  "costs and rejector (paper scale) [R]")
    voc2007: Voc2007 = Field(Voc2007(), description="VOC 2007 multi-task agents, costs and rejector (paper scale) [R]")
    paper: Paper = Field(Paper(), description="paper-scale cluster resources")

    @model_validator(mode="after")
    def _arms_and_datasets(self):
        if "clean_l2d" not in self.arms:
            raise ValueError("arms: must include clean_l2d (the baseline every claim compares with)")
        if len(set(self.datasets)) != len(self.datasets):
            raise ValueError("datasets: duplicates")
        if 0.0 not in self.attack.eps_grid:
            raise ValueError("attack.eps_grid: must include 0 (the clean point of the ε curve and the ε = 0 check)")
        return self


#: keys of each dataset section the preprocess stage passes to the preparation (the rest configure the rejector)
PREP_KEYS: dict[str, tuple[str, ...]] = {
    "digits": ("split", "main_weak_classes", "main_weak_keep", "main_max_iter", "expert_classes", "expert_p",
               "beta"),
    "diabetes": ("split", "main_features", "ridge_alpha", "beta", "cost_scale"),
    "cifar10": ("split", "main_weak_classes", "main_weak_keep", "main_width", "main_epochs", "main_lr",
                "main_batch_size", "expert_classes", "expert_p", "beta"),
    "california_housing": ("split", "main_features", "ridge_alpha", "beta", "cost_scale"),
    "voc2007": ("split", "image_size", "main_width", "main_epochs", "main_lr", "main_batch_size", "box_weight",
                "expert_classes", "expert_p", "expert_box_noise", "beta", "lambda_reg"),
}


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("datasets",),
    "preprocess": ("seeds", "datasets", "device", "digits.split", "digits.main_weak_classes", "digits.main_weak_keep",
                   "digits.main_max_iter", "digits.expert_classes", "digits.expert_p", "digits.beta",
                   "diabetes.split", "diabetes.main_features", "diabetes.ridge_alpha", "diabetes.beta",
                   "diabetes.cost_scale",
                   *(f"{ds}.{k}" for ds in ("cifar10", "california_housing", "voc2007") for k in PREP_KEYS[ds])),
    "train": ("arms", "seeds", "datasets", "device", "arm_config", "train", "attack", "digits.hidden",
              "digits.epochs", "diabetes.hidden", "diabetes.epochs", "cifar10.rejector", "cifar10.width",
              "cifar10.epochs", "california_housing.hidden", "california_housing.epochs", "voc2007.rejector",
              "voc2007.width", "voc2007.epochs", "voc2007.image_size"),
    "evaluate": ("arms", "seeds", "datasets", "attack.eps_grid", "attack.claim_eps", "adequacy",
                 "identities"),
    "report": (),
}
