"""Configuration of the coalition_attribution study: the single definition of every key (type, bounds, default,
meaning).

``config/studies/coalition_attribution.yaml`` sets the values (common keys + one block per scale); the JSON schema
of that file is generated from :class:`Config`. [R] marks reconstructions of details the paper (Zheng, Deng &
Zhang, ICML 2025, arXiv:2309.13411) leaves open. ``STAGE_KEYS`` declares the keys each stage reads: Snakemake
reruns a stage only when one of them changes. No numpy/torch import here (Snakemake parses this module).
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["oracle", "mlp", "mlp_adam"]
#: The paper's real-data experiments (paper scale only; planned, not runnable here: see the README).
RealExperiment = Literal["sst2_bert_large", "sst2_llama", "mnist_vgg11", "cifar10_resnet20", "go_katago"]
#: Manifest rows (manifest.csv) each real-data experiment reads.
REAL_FILES: dict[str, tuple[str, ...]] = {
    "sst2_bert_large": ("sst2_train", "sst2_validation"),
    "sst2_llama": ("sst2_train", "sst2_validation"),
    "mnist_vgg11": ("mnist_train_images", "mnist_train_labels", "mnist_test_images", "mnist_test_labels"),
    "cifar10_resnet20": ("cifar10",),
    "go_katago": ("katago_g170_b40",),
}
Range = tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]]


class Toy(Section):
    """The monomial toy of Table 4 (design from the paper, details [R])."""

    n: int = Field(8, ge=2, le=12, description="[R] number of input variables (games have 2**n values)")
    n_functions: int = Field(20, ge=1, description="target functions per seed")
    m_range: Range = Field((3, 6), description="[R] number of monomials m ~ U{min..max}")
    order_range: Range = Field((2, 5), description="[R] monomial order |T_k| ~ U{min..max}, uniform support")
    weight_range: tuple[Annotated[float, Field(gt=0)], Annotated[float, Field(gt=0)]] = Field(
        (0.5, 2.0), description="[R] |w_k| ~ U(min, max), sign +-1 with probability 1/2")
    coalition_sizes: Range = Field((2, 4), description="[R] candidate coalitions: min <= |S| <= max")
    coalitions_per_type: int = Field(5, ge=1, description="[R] at most this many F / P / U coalitions per function")

    @model_validator(mode="after")
    def _ranges(self):
        for name in ("m_range", "order_range", "weight_range", "coalition_sizes"):
            lo, hi = getattr(self, name)
            if lo > hi:
                raise ValueError(f"{name}: min {lo} > max {hi}")
        if self.order_range[1] > self.n or self.coalition_sizes[1] > self.n:
            raise ValueError("order_range, coalition_sizes: max must be <= n")
        return self


class Mlp(Section):
    """The toy network, trained full batch on all 2**n inputs [R]."""

    hidden: int = Field(64, ge=1, description="[R] width of each hidden layer (the paper's 100 at paper scale)")
    layers: int = Field(3, ge=1, description="[R] hidden ReLU layers")
    lr: float = Field(3e-3, gt=0, description="[R] Adam learning rate (paper scale: 1e-3)")
    lr_decay: Literal["linear", "none"] = Field("linear", description="[R] linear decay to 0 at the last epoch, "
                                                                      "or none (paper scale)")
    epochs: int = Field(800, ge=1, description="[R] full-batch epochs (paper scale: 3000)")
    log_every: int = Field(100, ge=1, description="epochs between logged train losses")
    rel_mse_flag: float = Field(1e-3, gt=0, description="train MSE / Var(f) above this is flagged (poor fit)")
    threads: int = Field(1, ge=1, description="torch CPU threads of a train job")


class Gamma(Section):
    """The sparsity objective for gamma (Eqs. 3-4) and its solvers [R]."""

    solver: Literal["lp"] = Field("lp", description="[R] solver of arms oracle and mlp: the exact LP (scipy "
                                                    "HiGHS); arm mlp_adam always uses adam")
    include_empty: Literal[True] = Field(True, description="[R] the objective sums over every T including the "
                                                           "empty set (only this is implemented)")
    noise_bound: float = Field(0.0, ge=0, le=0, description="[R] Li & Zhang's optional noise term: off (only 0 "
                                                             "is implemented)")
    adam_steps: int = Field(5000, ge=1, description="[R] Adam ablation: subgradient steps from gamma = 0")
    adam_lr_scale: float = Field(0.01, gt=0, description="[R] Adam learning rate = scale * std(v), linear "
                                                         "decay, best iterate kept")


class Faithfulness(Section):
    """The metrics R, R', Q of Eqs. 7-9 (issue 32: a tolerance for 0/0)."""

    zero_tol: float = Field(1e-9, ge=0, lt=1, description="[R] a ratio of R, R' or Q whose denominator is <= zero_tol "
                                                          "* sum_T (|I_and(T)| + |I_or(T)|) is undefined (NaN, left "
                                                          "out of the means); 0: only an exact 0/0")


class Identities(Section):
    """Check 2: the identities of Sec. 3 as numerical identities."""

    tol: float = Field(1e-9, gt=0, description="max abs error <= tol * (1 + max|v|) per game (float64)")
    random_gamma_std: float = Field(1.0, gt=0, description="the identities are also checked at gamma ~ "
                                                           "N(0, std^2)")


class Claims(Section):
    """Thresholds of claims 1 and 3 (the study's plan) and the bootstrap."""

    bootstrap_resamples: int = Field(2000, ge=100, description="claim 1: bootstrap resamples of target functions")
    ci_level: float = Field(0.95, gt=0, lt=1, description="claim 1: level of the bootstrap CIs")
    bootstrap_seed: int = Field(0, ge=0, description="claim 1: seed of the bootstrap resampling")
    f_min: float = Field(0.80, ge=0, le=1, description="claim 1: mean_F >= f_min for R, R', Q")
    u_max: float = Field(0.15, ge=0, le=1, description="claim 1: mean_U <= u_max")
    p_range: tuple[float, float] = Field((0.2, 0.8), description="claim 1: p_min <= mean_P <= p_max")
    oracle_f_min: float = Field(0.99, ge=0, le=1, description="check 3: oracle F means of R, R', Q >= this")
    oracle_u_q_max: float = Field(0.01, ge=0, le=1, description="check 3: oracle U mean Q <= this")


class Adequacy(Section):
    """Adequacy gates of claim 1 (issue 31): a failed gate makes the claim inconclusive."""

    max_flagged_frac: float = Field(0.1, ge=0, le=1, description="largest fraction of MLPs whose train MSE / Var(f) "
                                                                 "exceeds mlp.rel_mse_flag (the coalition types are "
                                                                 "defined on f: the nets must fit it)")
    min_functions_with_f: int = Field(10, ge=1, description="fewest target functions holding a purely faithful "
                                                            "coalition (the units of the F - P difference)")


class Real(Section):
    """The paper's real-data experiments (paper scale; planned only: they raise a clear error here)."""

    experiments: tuple[RealExperiment, ...] = Field(
        (), description="real-data experiments to plan (paper scale): SST-2 (BERT-large, LLaMA), MNIST "
                        "(VGG-11), CIFAR-10 (ResNet-20), Go (KataGo); empty: toy only")
    gpus: int = Field(1, ge=0, description="GPUs per real-data job")


class Config(StudyConfig):
    """coalition_attribution study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="oracle (v from f), mlp (trained net, LP gamma), "
                                                            "mlp_adam (the same nets, Adam gamma)")
    toy: Toy = Field(Toy(), description="the monomial toy [R]")
    mlp: Mlp = Field(Mlp(), description="the toy's MLP [R]")
    gamma: Gamma = Field(Gamma(), description="gamma solvers [R]")
    faithfulness: Faithfulness = Field(Faithfulness(), description="R, R', Q: tolerance of 0/0")
    identities: Identities = Field(Identities(), description="check 2 tolerance")
    claims: Claims = Field(Claims(), description="claim thresholds")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of claim 1")
    real: Real = Field(Real(), description="paper-scale real-data experiments (planned)")

    @model_validator(mode="after")
    def _mlp_adam_needs_mlp(self):
        if "mlp_adam" in self.arms and "mlp" not in self.arms:
            raise ValueError("arms: mlp_adam reuses the mlp arm's trained networks; add mlp")
        return self


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "download": ("real.experiments",),
    "preprocess": ("seeds", "toy"),
    "train": ("arms", "seeds", "toy.n", "mlp", "gamma", "faithfulness", "identities"),
    "train_real": ("real",),
    "evaluate": ("claims", "identities.tol", "adequacy"),
    "report": (),
}
