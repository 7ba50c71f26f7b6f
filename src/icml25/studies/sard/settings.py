"""Scale settings of the sard study as plain nested dicts (phase 2 turns them into the yaml + pydantic Config).

Every [R] reconstruction is a key here: the surrogate (``arms.*.loss``, ``nu``, ``rho``, ``inner``), the attack
(``attack.*``: norm ℓ∞, ε grid, steps, step size, random start, the claim ε), the threat model
(``agents_see_perturbation`` of the ``clean_l2d_agents_perturbed`` arm), the agents and costs (``digits.*``,
``diabetes.*``) and the rejector training (``train.*``). Claim thresholds are not settings: they are constants in
:mod:`.evaluate`.
"""
from __future__ import annotations

import copy

_DIGITS = {
    "split": [0.3, 0.4, 0.1, 0.2],        # [R] agents / rejector-train / validation / test, stratified by label
    "main_weak_classes": [5, 6, 7, 8, 9],  # [R] classes subsampled when fitting the main model g
    "main_weak_keep": 0.1,                # [R] fraction of those classes kept (g is weak on them)
    "main_max_iter": 1000,                # lbfgs iterations of g's logistic regression
    "expert_classes": [[5, 6, 7], [7, 8, 9]],  # [R] competence sets of experts 1 and 2
    "expert_p": 0.95,                     # [R] probability an expert is right on its competence set
    "beta": [0.05, 0.10],                 # [R] consultation fees beta_1, beta_2 of the experts
    "hidden": [128, 128],                 # [R] rejector MLP widths (64 -> 128 -> 128 -> 3)
    "epochs": 30,                         # [R] rejector training epochs
}
_DIABETES = {
    "split": [0.3, 0.4, 0.1, 0.2],        # [R] as digits, unstratified
    "main_features": ["age", "sex", "bmi"],  # [R] features of the main model g (ridge)
    "ridge_alpha": 1.0,                   # [R] ridge penalty of g and the experts
    "beta": [0.05, 0.10],                 # [R] expert fees
    "cost_scale": 4.0,                    # [R] c = min(1, (yhat - y)^2 / cost_scale) + beta, on standardised y
    "hidden": [64, 64],                   # [R] rejector MLP widths (10 -> 64 -> 64 -> 3)
    "epochs": 150,                        # [R] rejector training epochs
}

SCALES: dict[str, dict] = {
    "default": {
        "seeds": [0, 1, 2],               # evaluation seeds (split, experts, rejector init, PGD starts)
        "datasets": ["digits", "diabetes"],  # digits is the primary dataset of the claims
        "arms": ["clean_l2d", "sard", "sard_ce", "clean_l2d_agents_perturbed"],
        "arm_config": {                   # [R] loss of each arm
            "clean_l2d": {"loss": "clean", "nu": 1.0, "rho": None, "agents_see_perturbation": False},
            # rho_warmup_epochs [R, not in the paper's description]: first epochs use the comp-sum at x' (0 = off)
            "sard": {"loss": "adversarial", "nu": 1.0, "rho": 1.0, "inner": "joint", "rho_warmup_epochs": 0,
                     "agents_see_perturbation": False},
            "sard_ce": {"loss": "adversarial", "nu": 1.0, "rho": None, "inner": "joint",
                        "agents_see_perturbation": False},
            # the clean_l2d rejector (identical: same seed and loss) evaluated with g also seeing x'
            "clean_l2d_agents_perturbed": {"loss": "clean", "nu": 1.0, "rho": None, "agents_see_perturbation": True},
        },
        "train": {
            "optimizer": "adam",          # [R]
            "lr": 1e-3,                   # [R] Adam learning rate
            "batch_size": 64,             # [R]
            "eps": 0.1,                   # [R] training budget gamma (l_inf)
            "steps": 10,                  # [R] inner PGD steps during training
            "val_steps": 10,              # PGD steps of the per-epoch validation attack (budget eps)
        },
        "attack": {
            "norm": "linf",               # [R] only l_inf is implemented
            "eps_grid": [0.0, 0.05, 0.1, 0.2],  # [R] evaluation budgets
            "steps": 20,                  # [R] evaluation PGD steps
            "alpha_factor": 2.5,          # [R] step size alpha = alpha_factor * eps / steps
            "rand_init": True,            # [R] uniform start in the ball, 1 restart
            "claim_eps": 0.1,             # budget of claims 1 and 2
            "target": "costliest",        # [R] targeted attack agent: the expert with the largest fee
        },
        "bootstrap": {"n_resamples": 2000, "seed": 0},  # paired bootstrap over pooled test points (claims 1-3)
        "identities": {"n": 100_000, "seed": 0},      # claim 4: random scores and costs for the bound / Bayes checks
        "digits": dict(_DIGITS),
        "diabetes": dict(_DIABETES),
    },
}

SCALES["smoke"] = copy.deepcopy(SCALES["default"])
SCALES["smoke"].update(seeds=[0], datasets=["digits"])
SCALES["smoke"]["train"].update(steps=3, val_steps=3)
SCALES["smoke"]["attack"].update(eps_grid=[0.0, 0.1], steps=3)
SCALES["smoke"]["identities"].update(n=10_000)
SCALES["smoke"]["digits"].update(epochs=5)

SCALES["paper"] = copy.deepcopy(SCALES["default"])
SCALES["paper"].update(
    datasets=["cifar10", "california_housing", "voc2007"],  # [R] which datasets the paper used is unverified
    rejector={"cifar10": "resnet18", "california_housing": "mlp", "voc2007": "faster_rcnn_agents"},  # [R]
    device="cuda",                        # about 10 GPU-hours per CIFAR-10 seed, 50-100 GPU-hours in total [R]
)
SCALES["paper"]["multitask"] = {"lambda_reg": 1.0}  # [R] c = c_cls + lambda * c_reg (VOC)

#: arms that are trained (clean_l2d_agents_perturbed re-trains clean_l2d identically and changes the evaluation)
TRAINED_ARMS = ("clean_l2d", "sard", "sard_ce")


def get(scale: str) -> dict:
    """A deep copy of the settings of ``scale`` (smoke | default | paper)."""
    if scale not in SCALES:
        raise KeyError(f"sard settings: unknown scale {scale!r}; expected one of {sorted(SCALES)}")
    return copy.deepcopy(SCALES[scale])


def validate(settings: dict) -> None:
    """Raise ValueError naming the key when an attack, training or cost setting is outside its domain
    (ε < 0, steps < 1, fees making costs leave [0, 1], fractions not summing to 1, unknown arms or datasets)."""
    def bad(key: str, value, why: str) -> None:
        raise ValueError(f"sard settings: {key} = {value!r} {why}")

    att, tr = settings["attack"], settings["train"]
    for key, value in (("attack.eps_grid", att["eps_grid"]), ("attack.claim_eps", [att["claim_eps"]]),
                       ("train.eps", [tr["eps"]])):
        if not value or any(not (isinstance(e, (int, float)) and e >= 0 and e == e and e != float("inf"))
                            for e in value):
            bad(key, value, "must be finite budgets >= 0")
    for key, value in (("attack.steps", att["steps"]), ("train.steps", tr["steps"]),
                       ("train.val_steps", tr["val_steps"]), ("train.batch_size", tr["batch_size"])):
        if not (isinstance(value, int) and value >= 1):
            bad(key, value, "must be an integer >= 1")
    if att["norm"] != "linf":
        bad("attack.norm", att["norm"], "is not implemented (only 'linf')")
    if att["target"] != "costliest":
        bad("attack.target", att["target"], "is not implemented (only 'costliest': the expert with the largest fee)")
    if not att["alpha_factor"] > 0:
        bad("attack.alpha_factor", att["alpha_factor"], "must be > 0")
    if not tr["lr"] > 0:
        bad("train.lr", tr["lr"], "must be > 0")
    for arm in settings["arms"]:
        if arm not in settings["arm_config"]:
            bad("arms", arm, f"has no entry in arm_config ({sorted(settings['arm_config'])})")
        cfg = settings["arm_config"][arm]
        if cfg.get("rho") is not None and not cfg["rho"] > 0:
            bad(f"arm_config.{arm}.rho", cfg["rho"], "must be > 0 or null")
        if not cfg["nu"] >= 0:
            bad(f"arm_config.{arm}.nu", cfg["nu"], "must be >= 0")
        if cfg.get("inner", "joint") not in ("joint", "per_agent"):
            bad(f"arm_config.{arm}.inner", cfg["inner"], "must be 'joint' or 'per_agent'")
    for ds in settings["datasets"]:
        if ds not in ("digits", "diabetes"):
            continue  # paper-scale datasets are planned, not validated here
        cfg = settings[ds]
        if len(cfg["split"]) != 4 or any(f <= 0 for f in cfg["split"]) or abs(sum(cfg["split"]) - 1) > 1e-9:
            bad(f"{ds}.split", cfg["split"], "must be 4 positive fractions summing to 1")
        if len(cfg["beta"]) != 2 or any(b < 0 for b in cfg["beta"]):
            bad(f"{ds}.beta", cfg["beta"], "must be 2 fees >= 0 (costs are divided by 1 + max beta, staying in [0, 1])")
        if int(cfg["epochs"]) < 1:
            bad(f"{ds}.epochs", cfg["epochs"], "must be >= 1")
    if "digits" in settings["datasets"] and not 0 <= settings["digits"]["expert_p"] <= 1:
        bad("digits.expert_p", settings["digits"]["expert_p"], "must be a probability")
