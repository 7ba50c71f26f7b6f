"""Configuration of the adaptive_adversary study: the single definition of every key (type, bounds, default,
meaning).

``config/studies/adaptive_adversary.yaml`` sets the values (common keys + one block per scale); the JSON schema of
that file is generated from :class:`Config`. [R] marks reconstructions: the whole simulated class is our own
illustration of the paper's theorem (Lechner, Bie & Kamath, ICML 2025, arXiv:2509.05137), not the paper's class.
``STAGE_KEYS`` declares the keys each stage reads: Snakemake reruns a stage only when one of them changes.
No numpy/torch import here (Snakemake parses this module).
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from icml25.core.config import StudyConfig

#: Adversary arms (a train job per arm and seed chunk). Keep in step with ``data.ADVERSARIES``.
Arm = Literal["none", "adaptive", "obl_decoy", "obl_code_flood", "obl_point_flood"]
#: Size of the point domain [0, 2**62) (``model.N``).
DOMAIN = 2**62


class Config(StudyConfig):
    """adaptive_adversary study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="adversaries simulated (none, adaptive and three "
                                                            "oblivious strategies); none runs once per (c, m)")
    construction: Literal["self_describing_code"] = Field(
        "self_describing_code", description="[R] the simulated class: our own 'self-describing code' illustration "
                                            "of the separation (the only one implemented), not the paper's class")
    K: int = Field(2**40, ge=2, le=DOMAIN, description="[R] size of every set A of the class (points are "
                                                       "[0, 2**62)); enters the TV formulas and Le Cam's m^2/K term")
    budget_rule: Literal["floor_eta_m", "fraction_of_output"] = Field(
        "floor_eta_m", description="[R] adaptive budget in insertions: floor_eta_m = floor(eta m); "
                                   "fraction_of_output = floor(eta m / (1 - eta)) (eta a share of the corrupted "
                                   "sample); the paper's unit is an open question")
    c: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field(min_length=1, description="code masses c of the class")
    eta_over_c: tuple[Annotated[float, Field(ge=0)], ...] = Field(
        min_length=1, description="adversary budgets as multiples of c: eta = ratio * c")
    eta_max: float = Field(0.3, ge=0, lt=1, description="cells with eta above this are skipped")
    m: tuple[Annotated[int, Field(ge=1)], ...] = Field(min_length=1, description="sample sizes m requested by "
                                                                                 "the learner")
    trials: int = Field(2000, ge=1, description="trials per cell and seed (truth p0 or q_A with probability 1/2)")

    @model_validator(mode="after")
    def _grid(self):
        for name in ("c", "eta_over_c", "m"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: duplicates")
        if not any(r * c <= self.eta_max + 1e-12 for r in self.eta_over_c for c in self.c):
            raise ValueError("eta_over_c, c, eta_max: every cell has eta > eta_max (nothing to simulate)")
        return self


#: Config keys each stage reads (dotted paths). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "prepare": ("construction", "K", "budget_rule", "c", "eta_over_c", "eta_max", "m"),
    "preprocess": (),  # reads the grid from raw/manifest.json
    "train": ("arms", "seeds", "K", "budget_rule", "c", "eta_over_c", "eta_max", "m", "trials"),
    "evaluate": (),
    "report": ("budget_rule",),
}
