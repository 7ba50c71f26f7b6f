"""The studies: one self-contained package per paper. ``STUDIES`` lists the implemented ones, in README order.

Adding a study touches its own files plus one entry here and one ``include:`` in the Snakefile.
"""
from __future__ import annotations

import importlib

#: Implemented studies (slugs). Every slug names its package, rules, yaml, schema, results dir and experiment.
STUDIES: tuple[str, ...] = ("cat_iv", "rip", "human_baselines", "coastalbench", "roste", "adaptive_adversary",
                            "coalition_attribution", "kernel_adaptation", "morphing_flow", "lfss",
                            "meta_expert", "action_piece", "fedecado", "ntk_dfl", "unisoma",
                            "magnets", "sard", "data_remix", "pid")

#: All 19 planned studies, in the order of the README table.
ALL_SLUGS: tuple[str, ...] = (
    "cat_iv", "kernel_adaptation", "rip", "data_remix", "ntk_dfl", "coalition_attribution", "magnets", "sard",
    "coastalbench", "roste", "action_piece", "adaptive_adversary", "meta_expert", "pid", "unisoma",
    "morphing_flow", "human_baselines", "fedecado", "lfss",
)


def study_config_module(slug: str):
    """A study's light ``config`` module (no torch): ``Config`` (pydantic model) and ``STAGE_KEYS``."""
    if slug not in STUDIES:
        raise KeyError(f"unknown or unimplemented study {slug!r}; implemented: {STUDIES}")
    return importlib.import_module(f"icml25.studies.{slug}.config")


def study_config_class(slug: str) -> type:
    """The pydantic model ``Config`` of a study."""
    return study_config_module(slug).Config


def study_stage_keys(slug: str) -> dict[str, tuple[str, ...]]:
    """``STAGE_KEYS`` of a study: the config keys each of its stages reads."""
    return study_config_module(slug).STAGE_KEYS
