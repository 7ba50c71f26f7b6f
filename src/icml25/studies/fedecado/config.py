"""Configuration of the fedecado study: the single definition of every key (type, bounds, default, meaning).

``config/studies/fedecado.yaml`` sets the values (common keys + one block per scale); the JSON schema of that file
is generated from :class:`Config`. [R] marks reconstructions (FedECADO-R is a reconstruction of the paper's method:
see the study README); [V] what the paper states. Claim thresholds are not keys: they are the constants of
:mod:`.evaluate`. ``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only when one of them
changes. No torch import here (the Snakefile parses this module).
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig
from icml25.core.speed import Fast

QuadArm = Literal["quad_fedavg", "quad_fednova", "quad_fedecado"]
ImageArm = Literal["fedavg", "fedprox", "fednova", "fedexp", "feddecorr", "fedrs", "fednova_matched", "fedecado",
                   "fedecado_lte", "fedecado_noflow"]
Arm = Literal["quad_fedavg", "quad_fednova", "quad_fedecado", "fedavg", "fedprox", "fednova", "fedexp", "feddecorr",
              "fedrs", "fednova_matched", "fedecado", "fedecado_lte", "fedecado_noflow"]
QUAD_ARMS: tuple[str, ...] = ("quad_fedavg", "quad_fednova", "quad_fedecado")
IMAGE_ARMS: tuple[str, ...] = ("fedavg", "fedprox", "fednova", "fedexp", "feddecorr", "fedrs", "fednova_matched",
                               "fedecado", "fedecado_lte", "fedecado_noflow")
Dataset = Literal["mnist5k", "cifar10", "cifar100"]
#: file written by the prepare stage for each dataset (the CIFAR archives keep their published names)
RAW_FILES: dict[str, str] = {"mnist5k": "mnist5k.npz", "cifar10": "cifar-10-python.tar.gz",
                             "cifar100": "cifar-100-python.tar.gz"}
Pos = Annotated[float, Field(gt=0)]


class Quad(Section):
    """The quadratic consensus problem of claims 1-2 (numpy float64; its seeds are the study's ``seeds``)."""

    K: int = Field(10, ge=2, description="clients")
    d: int = Field(20, ge=1, description="dimension")
    eig_range: tuple[Pos, Pos] = Field((1.0, 10.0), description="eigenvalues of A_i ~ U[lo, hi]")
    c_scale: float = Field(3.0, gt=0, description="c_i ~ c_scale * N(0, I)")
    n_range: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = Field(
        (50, 500), description="client data sizes n_i, log-uniform in [lo, hi]")
    eta: float = Field(0.01, gt=0, description="local full-batch GD learning rate")
    tau_range: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = Field(
        (1, 10), description="local steps tau_i ~ U{lo..hi} (default_rng(seed+100))")
    rounds_fixed_point: int = Field(2000, ge=1, description="FedAvg / FedNova rounds (claim 1)")
    rounds_full: int = Field(500, ge=1, description="FedECADO-R rounds, full participation, fixed tau_i (claim 2)")
    rounds_partial: int = Field(800, ge=1, description="FedECADO-R rounds, partial participation, tau_i redrawn "
                                                        "every round (claim 2)")
    participation: float = Field(0.5, gt=0, le=1, description="active fraction of the partial-participation run")

    @model_validator(mode="after")
    def _ranges(self):
        for key in ("eig_range", "n_range", "tau_range"):
            lo, hi = getattr(self, key)
            if lo > hi:
                raise ValueError(f"quad.{key}: need lo <= hi, got {[lo, hi]}")
        return self


class ServerLr(Section):
    """Server learning rate η_s of each baseline, x⁺ = x + η_s (x_agg − x) (1 = the method as published). FedECADO-R
    moves the server further per round than the plain average, so the baselines get this knob, tuned with a grid on
    tuning seeds (``tuning/fedecado.jsonl``, issue 31). FedExp's server step is adaptive and has none."""

    fedavg: float = Field(1.0, gt=0, description="FedAvg server learning rate")
    fedprox: float = Field(1.0, gt=0, description="FedProx server learning rate")
    fednova: float = Field(1.0, gt=0, description="FedNova server learning rate (multiplies T_eff)")
    feddecorr: float = Field(1.0, gt=0, description="FedDecorr server learning rate (FedAvg's server)")
    fedrs: float = Field(1.0, gt=0, description="FedRS server learning rate (FedAvg's server)")


class Image(Section):
    """The image experiment of claim 3: Dirichlet label skew + heterogeneous local work."""

    seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field(
        (0, 1, 2), min_length=1, description="seeds of the image arms (a subset of the study's seeds)")
    dataset: Dataset = Field("mnist5k", description="mnist5k (offline, CPU) | cifar10 | cifar100 (paper, GPU)")
    model: Literal["mlp", "vgg11", "resnet34"] = Field(
        "mlp", description="mlp (PCA features -> hidden -> 10; MNIST-5k) | vgg11 (CIFAR-10) | resnet34 (CIFAR-100) [V]")
    width: float = Field(1.0, gt=0, le=1, description="channel multiplier of vgg11 / resnet34 (1: the paper's "
                                                      "architecture; the rehearsal runs a fraction on CPU)")
    n_train: int | None = Field(None, ge=10, description="training images used (seeded subsample); null: all")
    pca_dim: int = Field(64, ge=1, le=784, description="PCA components of the MNIST features (input of the MLP)")
    hidden: int = Field(128, ge=1, description="hidden width of the MLP")
    n_clients: int = Field(20, ge=2, description="clients")
    alpha: float = Field(0.1, gt=0, description="Dirichlet concentration of the label split (.inf: IID) [R]")
    min_size: int = Field(10, ge=1, description="smallest client of the Dirichlet partition")
    participation: float = Field(0.5, gt=0, le=1, description="active fraction of clients per round [R]")
    rounds: int = Field(40, ge=1, description="communication rounds")
    batch_size: int = Field(20, ge=1, description="client minibatch size")
    lr_range: tuple[Pos, Pos] = Field((0.01, 0.1), description="client learning rate lr_i ~ U[lo, hi], fixed per "
                                                               "client (default_rng(seed+1000)) [R]")
    epoch_range: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = Field(
        (1, 5), description="local epochs e_i ~ U{lo..hi}, fixed per client [R]")
    prox_mu: float = Field(0.01, ge=0, description="FedProx proximal weight mu")
    fedexp_eps: float = Field(1e-3, gt=0, description="FedExp epsilon of the server step size [R]")
    feddecorr_beta: float = Field(0.1, ge=0, description="FedDecorr: weight beta of the decorrelation loss "
                                                         "(1/d^2)||K||_F^2 (FedDecorr paper's value 0.1)")
    fedrs_alpha: float = Field(0.5, ge=0, le=1, description="FedRS: logit scale alpha of the classes a client lacks "
                                                           "(FedRS paper's value 0.5)")
    server_lr: ServerLr = Field(ServerLr(), description="server learning rates of the baselines (issue 31: "
                                                        "symmetric tuning; tuned on tuning seeds)")
    augment: bool = Field(False, description="CIFAR only: random crop (pad 4) + horizontal flip of client "
                                             "minibatches [R]")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of the image arms (cuda: paper scale)")
    fast: Fast = Field(default_factory=Fast, description="CNN step speed switches, CUDA only (core.speed)")

    @model_validator(mode="after")
    def _consistent(self):
        for key in ("lr_range", "epoch_range"):
            lo, hi = getattr(self, key)
            if lo > hi:
                raise ValueError(f"image.{key}: need lo <= hi, got {[lo, hi]}")
        if (self.dataset == "mnist5k") != (self.model == "mlp"):
            raise ValueError(f"image.model: {self.model!r} does not fit image.dataset {self.dataset!r} (mnist5k "
                             "uses the mlp, the CIFAR sets vgg11 or resnet34)")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("image.seeds: duplicates")
        return self


class FedEcado(Section):
    """The server of FedECADO-R: the reconstruction's free constants [R]."""

    kappa: float = Field(2.0, gt=0, description="branch inductance L = kappa * T_max^2 (explicit coupling needs "
                                                "h / sqrt(L_i p_i) <~ 1) [R]")
    h_bar: float = Field(1.0, ge=0, description="scalar Hessian surrogate in the sensitivity G_i = w_i (1/h + "
                                                "h_bar) [R]")
    sensitivity: Literal["data", "data_x_time"] = Field(
        "data", description="weight w_i: p_i (data; the paper: relative data size [V]) or p_i T_i / T_max [R]")
    lte_tol: float = Field(1e-2, gt=0, description="central backward-Euler LTE tolerance: reject above, double "
                                                   "below lte_tol/4 [R]")
    sync: Literal["linear", "hold"] = Field(
        "linear", description="client trajectory beyond T_i: linear extrapolation or held at x_i^end [R]")
    h_min_frac: float = Field(1 / 256, gt=0, le=1, description="smallest central sub-step, fraction of T_max [R]")


class ClientLte(Section):
    """Client step-size control of the ``fedecado_lte`` arm (the rule of the authors' ECCO-DNN optimiser) [R]."""

    tol: float = Field(1e-3, gt=0, description="accept a step if (dt/2) ||F(x1) - F(x0)||_inf <= tol")
    dt_min: float = Field(1e-6, gt=0, description="floor of a halved step")
    dt_max_factor: float = Field(1.0, gt=0, description="cap of a doubled step, times the client's learning rate")


class Adequacy(Section):
    """Effect-size floor and adequacy gates of claims 3-4 (issue 31); a failed gate makes a claim inconclusive."""

    min_gain_pt: float = Field(1.0, ge=0, description="effect-size floor of the superiority claims (points): "
                                                      "reproduced needs mean gain >= this, not reproduced an "
                                                      "interval below it. The spec quotes no margin of the paper; "
                                                      "1 pt is ours (the spec's 'not reproduced' band)")
    min_baseline_acc: float = Field(0.5, ge=0, le=1, description="gate: the baseline's mean final test accuracy "
                                                                 "(chance 0.1) at least this")
    min_headroom_pt: float = Field(2.0, ge=0, description="gate: 100 - the baseline's accuracy (points) at least "
                                                          "this (room for twice the floor)")


class Config(StudyConfig):
    """fedecado study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="arms: quad_* on the quadratic problem (claims 1-2), "
                                                            "the others on the image data (claim 3)")
    quad: Quad = Field(Quad(), description="quadratic consensus problem (claims 1-2)")
    image: Image = Field(Image(), description="image experiment (claim 3)")
    fedecado: FedEcado = Field(FedEcado(), description="FedECADO-R server [R]")
    client_lte: ClientLte = Field(ClientLte(), description="client LTE step control (fedecado_lte arm) [R]")
    adequacy: Adequacy = Field(Adequacy(), description="effect-size floor and adequacy gates of claims 3-4")
    bootstrap_resamples: int = Field(2000, ge=100, description="unused since issue 31 (Student-t intervals over "
                                                               "seeds); kept for old configs")

    @model_validator(mode="after")
    def _image_seeds_subset(self):
        extra = sorted(set(self.image.seeds) - set(self.seeds))
        if extra and any(a in IMAGE_ARMS for a in self.arms):
            raise ValueError(f"image.seeds: {extra} are not in seeds {list(self.seeds)} (train jobs run the "
                             "study's seeds)")
        return self


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "prepare": ("image.dataset",),
    "preprocess": ("image.seeds", "image.dataset", "image.n_train", "image.pca_dim", "image.n_clients",
                   "image.alpha", "image.min_size", "image.lr_range", "image.epoch_range"),
    "train": ("arms", "seeds", "quad", "fedecado", "client_lte", "image.seeds", "image.dataset", "image.model",
              "image.pca_dim", "image.hidden", "image.n_clients", "image.participation", "image.rounds",
              "image.batch_size", "image.prox_mu", "image.fedexp_eps", "image.server_lr", "image.feddecorr_beta",
              "image.fedrs_alpha", "image.augment", "image.width",
              "image.device", "image.fast"),
    "evaluate": ("image.dataset", "image.server_lr", "bootstrap_resamples", "adequacy"),
    "report": (),
}
