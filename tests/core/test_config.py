"""core.config: strict dataclass building, scale merging, schema validation, hashing."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from icml25.core.config import (ConfigError, build, config_hash, deep_merge, flatten, load_yaml, merge_scale,
                                to_dict, validate_schema)


@dataclass(frozen=True)
class Inner:
    rows: int | None = None
    method: Literal["linear", "forest"] = "linear"


@dataclass(frozen=True)
class Cfg:
    seeds: tuple[int, ...]
    lr: float = 0.1
    flag: bool = False
    names: tuple[str, ...] = ("a",)
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self):
        if self.lr <= 0:
            raise ValueError("lr: must be positive")


def test_build_nested_and_coerces_lists_and_ints():
    cfg = build(Cfg, {"seeds": [0, 1], "lr": 1, "inner": {"rows": 5}})
    assert cfg == Cfg(seeds=(0, 1), lr=1.0, inner=Inner(rows=5))
    assert isinstance(cfg.lr, float)


@pytest.mark.parametrize("data, message", [
    ({"seeds": [0], "bogus": 1}, r"^study\.bogus: unknown key"),
    ({"seeds": [0], "inner": {"rowz": 1}}, r"^study\.inner\.rowz: unknown key"),
    ({}, r"^study\.seeds: required key missing"),
    ({"seeds": [0, "x"]}, r"^study\.seeds\[1\]: expected an integer"),
    ({"seeds": [0], "flag": 1}, r"^study\.flag: expected true/false"),
    ({"seeds": [0], "lr": True}, r"^study\.lr: expected a number"),
    ({"seeds": [0], "inner": {"method": "svm"}}, r"^study\.inner\.method: 'svm' is not one of"),
    ({"seeds": [0], "lr": -1}, r"^study: lr: must be positive"),
    ({"seeds": 3}, r"^study\.seeds: expected a list"),
])
def test_build_errors_name_the_key(data, message):
    with pytest.raises(ConfigError, match=message):
        build(Cfg, data, path="study")


def test_merge_scale_and_deep_merge():
    study = {"seeds": [0, 1], "inner": {"rows": 1, "method": "linear"},
             "scales": {"smoke": {"inner": {"rows": 2}}, "default": None, "paper": {}}}
    assert merge_scale(study, "smoke") == {"seeds": [0, 1], "inner": {"rows": 2, "method": "linear"}}
    assert merge_scale(study, "default")["inner"]["rows"] == 1
    assert merge_scale(study, "smoke", {"seeds": [5]})["seeds"] == [5]
    with pytest.raises(ConfigError, match="scales.huge: missing"):
        merge_scale(study, "huge")
    assert deep_merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}


def test_schema_errors_name_the_path(tmp_path):
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"n": {"type": "array", "items": {"type": "integer"}}}}
    validate_schema({"n": [1, 2]}, schema)
    with pytest.raises(ConfigError, match=r"n\.1: 'x' is not of type 'integer'"):
        validate_schema({"n": [1, "x"]}, schema)
    with pytest.raises(ConfigError, match="Additional properties"):
        validate_schema({"m": 1}, schema)


def test_load_yaml_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid yaml"):
        load_yaml(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_yaml(bad)


def test_hash_flatten_to_dict():
    cfg = build(Cfg, {"seeds": [0]})
    assert config_hash(cfg) == config_hash(to_dict(cfg)) == config_hash({"seeds": [0], "lr": 0.1, "flag": False,
                                                                          "names": ["a"],
                                                                          "inner": {"rows": None,
                                                                                    "method": "linear"}})
    assert config_hash(cfg) != config_hash(build(Cfg, {"seeds": [1]}))
    assert flatten({"a": {"b": 1, "c": {"d": 2}}, "e": [1]}) == {"a.b": 1, "a.c.d": 2, "e": [1]}


def test_every_study_yaml_matches_schema_and_dataclass_at_every_scale():
    from pathlib import Path

    from icml25.studies import STUDIES, study_config_class

    root = Path(__file__).resolve().parents[2]
    for slug in STUDIES:
        raw = load_yaml(root / "config" / "studies" / f"{slug}.yaml")
        validate_schema(raw, root / "workflow" / "schemas" / f"{slug}.schema.yaml", what=slug)
        for scale in ("smoke", "default", "paper"):
            build(study_config_class(slug), merge_scale(raw, scale), path=slug)


def test_retype_strings_restores_cli_types():
    from icml25.core.config import retype_strings

    cli = {"n": ["4000", "300"], "flag": "true", "rate": "0.5", "none": "null", "url": "http://127.0.0.1:8000/",
           "name": "cat_k2", "nested": {"k": "2"}}
    assert retype_strings(cli) == {"n": [4000, 300], "flag": True, "rate": 0.5, "none": None,
                                   "url": "http://127.0.0.1:8000/", "name": "cat_k2", "nested": {"k": 2}}
