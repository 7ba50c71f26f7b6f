"""Configuration of the coalition_attribution study: the single definition of every key (type, bounds, default,
meaning).

``config/studies/coalition_attribution.yaml`` sets the values (common keys + one block per scale); the JSON schema
of that file is generated from :class:`Config`. [R] marks reconstructions of details the paper (Zheng, Deng &
Zhang, ICML 2025, arXiv:2309.13411) leaves open. ``STAGE_KEYS`` declares the keys each stage reads: Snakemake
reruns a stage only when one of them changes. No numpy/torch import here (Snakemake parses this module).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["oracle", "mlp", "mlp_adam"]
#: The paper's real-data experiments (paper scale, one GPU job each: realexp.py). The Go experiment (KataGo) is not
#: among them: claims.json carries an explicit untested entry saying why (see the README).
RealExperiment = Literal["sst2_bert_large", "sst2_llama", "mnist_vgg11", "cifar10_resnet20"]
#: Manifest rows (manifest.csv) each real-data experiment reads.
REAL_FILES: dict[str, tuple[str, ...]] = {
    "sst2_bert_large": ("sst2",),
    "sst2_llama": ("sst2",),
    "mnist_vgg11": ("mnist_train_images", "mnist_train_labels", "mnist_test_images", "mnist_test_labels"),
    "cifar10_resnet20": ("cifar10",),
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


class TextModel(Section):
    """A pretrained Hugging Face sequence classifier fine-tuned on SST-2 (realtext.py) [R: the schedule]."""

    model: str = Field(description="hub model id: a repo_id of coalition_attribution/models.csv, loaded at its "
                                   "commit there with trust_remote_code=False (icml25.core.hub)")
    revision: str | None = Field(None, pattern=r"^[0-9a-f]{40}$",
                                 description="hub commit (40 hex) replacing the models.csv row's; null: the row's "
                                             "(an UNPINNED row needs trust_unpinned: true, which resolves the hub's "
                                             "commit once and records it in MLflow and claims.json)")
    local_dir: str | None = Field(None, description="a local save_pretrained directory standing in for the hub "
                                                    "weights of model (the rehearsal's tiny model of the same class, "
                                                    "or weights placed by hand), recorded as local:<sha256>; null: "
                                                    "the hub")
    trainable: Literal["all", "head"] = Field("all", description="[R] fine-tune every weight, or only the "
                                                                 "classification head on the frozen model")
    epochs: int = Field(3, ge=1, description="[R] fine-tuning epochs")
    lr: float = Field(2e-5, gt=0, description="[R] AdamW peak learning rate (10 % warm-up, linear decay)")
    batch_size: int = Field(32, ge=1, description="[R] sentences per step")
    max_length: int = Field(128, ge=8, description="tokens per sentence when fine-tuning (longer ones truncated)")

    @model_validator(mode="after")
    def _listed(self):
        from icml25.core.hub import require_listed

        require_listed(Path(__file__).with_name("models.csv"), self.model, key="model", local_key="local_dir")
        return self


class ImageModel(Section):
    """The paper's image classifier trained from scratch (realnets.py) [R: the schedule]."""

    width: int = Field(description="channels of the first stage (ResNet-20: 16; VGG-11: 64 = the paper's width)")
    epochs: int = Field(description="[R] training epochs")
    lr: float = Field(0.1, gt=0, description="[R] SGD peak learning rate (momentum 0.9, cosine per step)")
    weight_decay: float = Field(1e-4, ge=0, description="[R] SGD weight decay")
    batch_size: int = Field(128, ge=1, description="[R] images per step")
    augment: bool = Field(False, description="[R] random 4-pixel-padded crops and horizontal flips")


class Real(Section):
    """The paper's real-data experiments (paper scale; one GPU job each)."""

    experiments: tuple[RealExperiment, ...] = Field(
        (), description="real-data experiments to run (paper scale): SST-2 (BERT-large, LLaMA), MNIST (VGG-11), "
                        "CIFAR-10 (ResNet-20); empty: toy only. Go (KataGo) is an untested entry (README)")
    gpus: int = Field(1, ge=0, description="GPUs per real-data job")
    device: Literal["cpu", "cuda", "auto"] = Field("cuda", description="torch device of a real-data job (auto: cuda "
                                                                       "when available)")
    threads: int = Field(8, ge=1, description="torch CPU threads of a real-data job")
    seed: int = Field(0, ge=0, description="seed of the network's initialisation, data order and subsamples")
    n_variables: int = Field(10, ge=2, le=12, description="input variables per explained input (the paper's 10)")
    n_inputs: int = Field(20, ge=1, description="[R] explained inputs per experiment (the first test inputs)")
    max_words: int = Field(25, ge=2, description="[R] SST-2: explain dev sentences of n_variables..max_words words")
    coalition_sizes: Range = Field((2, 4), description="[R] R, R', Q of every coalition with min <= |S| <= max")
    zero_tol: float = Field(1e-9, ge=0, lt=1, description="[R] 0/0 tolerance of R, R', Q (as faithfulness.zero_tol)")
    max_train: int | None = Field(None, ge=1, description="training examples (a seeded subsample); null: all")
    max_test: int | None = Field(None, ge=1, description="test examples for the accuracy; null: all")
    sst2_bert_large: TextModel = Field(TextModel(model="google-bert/bert-large-uncased"),
                                       description="SST-2 with BERT-large (Devlin et al. 2019), fine-tuned")
    sst2_llama: TextModel = Field(TextModel(model="meta-llama/Llama-2-7b-hf", trainable="head", epochs=1, lr=1e-3),
                                  description="SST-2 with LLaMA [R: the version; the head on the frozen model]")
    mnist_vgg11: ImageModel = Field(ImageModel(width=64, epochs=20, lr=0.05, weight_decay=5e-4),
                                    description="MNIST with VGG-11 (batch norm), zero-padded to 32 x 32")
    cifar10_resnet20: ImageModel = Field(ImageModel(width=16, epochs=182, augment=True),
                                         description="CIFAR-10 with ResNet-20 (He et al. 2016: 64k steps of 128 "
                                                     "= 182 epochs, here with a cosine schedule [R])")

    @model_validator(mode="after")
    def _sizes(self):
        lo, hi = self.coalition_sizes
        if lo > hi or hi > self.n_variables:
            raise ValueError(f"real.coalition_sizes {self.coalition_sizes}: need min <= max <= n_variables")
        return self


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
    real: Real = Field(Real(), description="paper-scale real-data experiments (GPU jobs)")

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
