"""core.config: pydantic study models (strict, key paths in errors), generated schemas, stage keys and the
stage view, scale merging, hashing."""
from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field, model_validator

from icml25.core.config import (ConfigError, Section, StageView, StudyConfig, UndeclaredKeyError, build,
                                check_stage_keys, config_hash, deep_merge, flatten, load_yaml, merge_scale,
                                stage_params, stage_subset, study_schema, to_dict, validate_schema)


class Inner(Section):
    rows: int | None = Field(None, ge=1)
    method: Literal["linear", "forest"] = "linear"

    @property
    def wide(self) -> bool:
        return self.rows is not None and self.rows > 10


class Cfg(StudyConfig):
    arms: tuple[Literal["a", "b"], ...] = Field(("a",), min_length=1)
    lr: float = Field(0.1, gt=0)
    flag: bool = False
    names: tuple[str, ...] = ("a",)
    inner: Inner = Inner()

    @model_validator(mode="after")
    def _check(self):
        if self.flag and self.lr > 1:
            raise ValueError("lr: must be <= 1 when flag is set")
        return self


def test_build_nested_and_coerces_lists_and_ints():
    cfg = build(Cfg, {"seeds": [0, 1], "lr": 1, "inner": {"rows": 5}})
    assert cfg == Cfg(seeds=(0, 1), lr=1.0, inner=Inner(rows=5))
    assert isinstance(cfg.lr, float) and cfg.seeds == (0, 1) and cfg.seeds_per_job is None
    with pytest.raises(Exception):
        cfg.lr = 2.0  # frozen


@pytest.mark.parametrize("data, message", [
    ({"seeds": [0], "bogus": 1}, r"^study\.bogus: unknown key \(allowed: arms, flag, inner, lr, names, seeds"),
    ({"seeds": [0], "inner": {"rowz": 1}}, r"^study\.inner\.rowz: unknown key \(allowed: method, rows\)"),
    ({}, r"^study\.seeds: required key missing"),
    ({"seeds": [0, "x"]}, r"^study\.seeds\[1\]: Input should be a valid integer, got 'x'"),
    ({"seeds": [0, -1]}, r"^study\.seeds\[1\]: Input should be greater than or equal to 0"),
    ({"seeds": [0, 0]}, r"^study: seeds: duplicates"),
    ({"seeds": [0], "arms": ["a", "a"]}, r"^study: arms: duplicates"),
    ({"seeds": [0], "arms": ["c"]}, r"^study\.arms\[0\]: Input should be 'a' or 'b'"),
    ({"seeds": [0], "flag": 1}, r"^study\.flag: Input should be a valid boolean"),
    ({"seeds": [0], "lr": True}, r"^study\.lr: Input should be a valid number"),
    ({"seeds": [0], "lr": "0.5"}, r"^study\.lr: Input should be a valid number"),
    ({"seeds": [0], "lr": 0}, r"^study\.lr: Input should be greater than 0"),
    ({"seeds": [0], "inner": {"method": "svm"}}, r"^study\.inner\.method: Input should be 'linear' or 'forest'"),
    ({"seeds": [0], "lr": 2, "flag": True}, r"^study: lr: must be <= 1 when flag is set"),
    ({"seeds": 3}, r"^study\.seeds: Input should be a valid array"),
    ({"seeds": [0], "seeds_per_job": 0}, r"^study\.seeds_per_job: Input should be greater than or equal to 1"),
])
def test_build_errors_name_the_key(data, message):
    with pytest.raises(ConfigError, match=message):
        build(Cfg, data, path="study")


def test_every_error_is_reported_one_per_line():
    with pytest.raises(ConfigError) as err:
        build(Cfg, {"seeds": [0], "bogus": 1, "inner": {"rows": 0}}, path="s")
    assert str(err.value).splitlines()[0].startswith("s.bogus: unknown key")
    assert str(err.value).splitlines()[1].startswith("s.inner.rows: Input should be greater than or equal to 1")


def test_generated_schema_checks_the_yaml_and_its_scales():
    schema = study_schema(Cfg, "study.yaml")
    ok = {"seeds": [0], "inner": {"rows": 2}, "scales": {"smoke": {"inner": {"rows": 3}}, "default": None,
                                                           "paper": {}}}
    validate_schema(ok, schema)
    assert schema["properties"]["lr"]["exclusiveMinimum"] == 0 and schema["required"] == ["seeds", "scales"]
    with pytest.raises(ConfigError, match=r"scales\.smoke\.inner\.rowz|rowz"):
        validate_schema({**ok, "scales": {**ok["scales"], "smoke": {"inner": {"rowz": 3}}}}, schema)
    with pytest.raises(ConfigError, match=r"scales\.paper\.lr"):
        validate_schema({**ok, "scales": {**ok["scales"], "paper": {"lr": -1}}}, schema)
    with pytest.raises(ConfigError, match="scales"):
        validate_schema({**ok, "scales": {"smoke": {}, "default": {}}}, schema)  # a scale missing


def test_stage_keys_subset_params_and_view():
    cfg = build(Cfg, {"seeds": [0, 1], "lr": 0.5, "inner": {"rows": 20}})
    plain = to_dict(cfg)
    keys = ("lr", "inner.rows")
    check_stage_keys(Cfg, {"train": keys})
    with pytest.raises(ConfigError, match="'inner.rowz' is not a key"):
        check_stage_keys(Cfg, {"train": ("inner.rowz",)})
    with pytest.raises(ConfigError, match="'lr.x' is not a key"):
        check_stage_keys(Cfg, {"train": ("lr.x",)})
    assert stage_subset(plain, keys) == {"inner": {"rows": 20}, "lr": 0.5}
    assert sorted(stage_params(plain, keys).values()) == ["inner.rows=20", "lr=0.5"]
    assert sorted(stage_params(plain, ("inner",)).values()) == ['inner.method="linear"', "inner.rows=20"]
    assert stage_params(plain, ()) == {}
    view = StageView(cfg, keys, who="study train")
    assert view.lr == 0.5 and view.inner.rows == 20 and view.inner.wide is True  # property read through the view
    with pytest.raises(UndeclaredKeyError, match="study train reads config key 'seeds'"):
        view.seeds
    with pytest.raises(UndeclaredKeyError, match="'inner.method'"):
        view.inner.method
    with pytest.raises(AttributeError):
        view.model_dump
    with pytest.raises(AttributeError):
        view.lr = 1.0
    assert StageView(cfg, ("inner",)).inner == cfg.inner  # a declared section is handed out whole
    assert config_hash(view) == config_hash(cfg)


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
    assert config_hash(cfg) == config_hash(to_dict(cfg)) == config_hash({"seeds": [0], "seeds_per_job": None,
                                                                          "arms": ["a"], "lr": 0.1, "flag": False,
                                                                          "names": ["a"],
                                                                          "inner": {"rows": None,
                                                                                    "method": "linear"}})
    assert config_hash(cfg) != config_hash(build(Cfg, {"seeds": [1]}))
    assert flatten({"a": {"b": 1, "c": {"d": 2}}, "e": [1]}) == {"a.b": 1, "a.c.d": 2, "e": [1]}


def test_every_study_yaml_matches_its_model_at_every_scale_and_comments_every_key():
    import re
    from pathlib import Path

    from icml25.studies import STUDIES, study_config_class, study_stage_keys

    root = Path(__file__).resolve().parents[2]
    for slug in STUDIES:
        cls = study_config_class(slug)
        assert issubclass(cls, StudyConfig) and cls.model_config["frozen"] and cls.model_config["extra"] == "forbid"
        check_stage_keys(cls, study_stage_keys(slug))
        path = root / "config" / "studies" / f"{slug}.yaml"
        raw = load_yaml(path)
        validate_schema(raw, study_schema(cls, slug), what=slug)
        for scale in ("smoke", "default", "paper"):
            build(cls, merge_scale(raw, scale), path=slug)
        # every key of the model is set (and so documented) in the yaml's common part
        assert set(flatten({k: v for k, v in raw.items() if k != "scales"})) >= set(flatten(to_dict(
            build(cls, merge_scale(raw, "default"))))), slug
        # every key line of the common part carries a comment, on it or on the line above
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines[: lines.index("scales:")]):
            if re.match(r"^\s*[a-z_0-9]+:", line):
                assert "#" in line or lines[i - 1].lstrip().startswith("#"), f"{slug}.yaml: {line!r} uncommented"


def test_retype_strings_restores_cli_types():
    from icml25.core.config import retype_strings

    cli = {"n": ["4000", "300"], "flag": "true", "rate": "0.5", "none": "null", "url": "http://127.0.0.1:8000/",
           "name": "cat_k2", "nested": {"k": "2"}}
    assert retype_strings(cli) == {"n": [4000, 300], "flag": True, "rate": 0.5, "none": None,
                                   "url": "http://127.0.0.1:8000/", "name": "cat_k2", "nested": {"k": 2}}


def test_errors_are_sorted_by_key_path_whatever_order_pydantic_reports():
    """Issue 36.11: the order of reported errors is the project's (sorted by key path, a key after the keys under
    it), the same for every order the installed pydantic may report them in."""
    import itertools

    from icml25.core.config import ordered_errors

    want = [("arms", 0), ("arms",), ("bogus",), ("inner", "rows"), ("seeds", 1), ("seeds", 10), ("z",)]
    for perm in itertools.permutations(want):
        got = ordered_errors([{"loc": loc, "type": "x", "msg": "m"} for loc in perm])
        assert [e["loc"] for e in got] == want


def test_install_commands_use_the_constraints_file():
    """Issue 36.11: the README's install and CI install with constraints.txt, which pins every package of the
    dependency closure exactly (pyproject keeps its ranges)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme, ci = (root / "README.md").read_text(), (root / ".ci/run").read_text()
    assert 'pip install -e ".[test]" -c constraints.txt' in readme and '-e ".[test]" -c constraints.txt' in ci
    # the README's two test commands (suite without the rehearsals, then the rehearsals) are what CI runs
    for marker in ('-m "not rehearsal"', "-m rehearsal --dist load"):
        assert marker in readme and marker in ci, marker
    pins = [ln for ln in (root / "constraints.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][^\s,;]*", ln) for ln in pins)
    names = {ln.split("==")[0] for ln in pins}
    assert {"pydantic", "pydantic-core", "mlflow", "snakemake", "torch", "numpy", "pytest"} <= names
    assert '"pydantic>=2.7"' in (root / "pyproject.toml").read_text()  # the ranges stay in pyproject
