"""The uniform stage CLI (core.cli) and the helpers behind common.smk (core.workflow)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

from icml25.core.cli import Stage, stage_main
from icml25.core.config import ConfigError, StudyConfig, UndeclaredKeyError
from icml25.core.workflow import export_job_env, resolve_study, rule_params, seed_chunks

ROOT = Path(__file__).resolve().parents[2]


class Config(StudyConfig):
    lr: float = Field(0.1, gt=0)
    steps: int = 10


STAGE_KEYS = {"train": ("lr",), "evaluate": ()}


def test_stage_main_runs_stage_with_parsed_paths_and_its_keys(tmp_path):
    seen = {}

    def train(stage: Stage, run) -> None:
        seen.update(lr=stage.config.lr, arm=stage.arm, seeds=stage.seeds, out=stage.output(0), inp=stage.inputs)
        run.log_metric("train/x", 1.0)
        stage.config.steps  # undeclared: raises

    argv = ["train", "--config-json", json.dumps({"seeds": [3, 4], "lr": 0.5}), "--arm", "a", "--seeds",
            "3", "4", "--in", "x.npz", "--out", str(tmp_path / "m.json"), "--no-track"]
    with pytest.raises(UndeclaredKeyError, match="toy train reads config key 'steps'"):
        stage_main("toy", Config, {"train": train}, argv, stage_keys=STAGE_KEYS)
    assert seen == {"lr": 0.5, "arm": "a", "seeds": (3, 4), "out": tmp_path / "m.json", "inp": (Path("x.npz"),)}


def test_stage_main_config_error_exits_2_naming_key(capsys):
    rc = stage_main("toy", Config, {"train": lambda s, r: None},
                    ["train", "--config-json", json.dumps({"seeds": [0], "lr": "fast"}), "--no-track"],
                    stage_keys=STAGE_KEYS)
    assert rc == 2
    assert "toy.lr: Input should be a valid number" in capsys.readouterr().err
    rc = stage_main("toy", Config, {"report": lambda s, r: None},
                    ["report", "--config-json", json.dumps({"seeds": [0]}), "--no-track"], stage_keys=STAGE_KEYS)
    assert rc == 2
    assert "stage 'report' has no STAGE_KEYS entry" in capsys.readouterr().err


def test_rule_params_one_string_per_declared_key():
    cfg = {"seeds": [0, 1], "lr": 0.5, "steps": 10}
    assert rule_params(cfg, STAGE_KEYS, "toy", "train") == {"k0": "lr=0.5"}
    assert rule_params(cfg, STAGE_KEYS, "toy", "evaluate") == {}
    with pytest.raises(KeyError, match="stage 'report' has no STAGE_KEYS entry"):
        rule_params(cfg, STAGE_KEYS, "toy", "report")


def test_noop_stage_tracks_a_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    assert stage_main("toy", Config, {}, ["noop", "--config-json", '{"seeds": [0]}', "--results",
                                          str(tmp_path)], stage_keys=STAGE_KEYS) == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    (run,) = client.search_runs([client.get_experiment_by_name("icml25/toy").experiment_id])
    assert run.info.run_name == "noop" and run.info.status == "FINISHED" and "job/wall_s" in run.data.metrics


def test_every_study_cli_has_help():
    from icml25.studies import STUDIES

    for slug in STUDIES:
        out = subprocess.run([sys.executable, "-m", f"icml25.studies.{slug}", "--help"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0 and "--config-json" in out.stdout and "stage" in out.stdout, out.stderr


def test_project_cli_help():
    out = subprocess.run([sys.executable, "-m", "icml25.core.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "init-tracking" in out.stdout and "summary" in out.stdout


def test_seed_chunks():
    assert seed_chunks([0, 1, 2, 3, 4], None) == {0: [0, 1, 2, 3, 4]}
    assert seed_chunks([0, 1, 2, 3, 4], 2) == {0: [0, 1], 1: [2, 3], 2: [4]}
    assert seed_chunks([7], 1) == {0: [7]}


def test_resolve_study_merges_scale_overrides_and_seeds():
    from icml25.studies import STUDIES, study_config_class

    slug = STUDIES[0]
    cls = study_config_class(slug)
    base = resolve_study(slug, cls, {"scale": "smoke"}, ROOT)
    assert resolve_study(slug, cls, {"scale": "smoke", "seeds": [41, 42]}, ROOT)["seeds"] == [41, 42]
    assert resolve_study(slug, cls, {"scale": "smoke", "overrides": {slug: {"seeds_per_job": 1}}},
                         ROOT)["seeds_per_job"] == 1
    assert base != resolve_study(slug, cls, {"scale": "default"}, ROOT)
    with pytest.raises(ConfigError, match=rf"{slug}\.no_such_key: unknown key"):
        resolve_study(slug, cls, {"scale": "smoke", "overrides": {slug: {"no_such_key": 1}}}, ROOT)


def test_resolve_study_checks_every_scale_of_the_yaml(tmp_path):
    """A bad value under another scale than the selected one fails a smoke parse, naming file, scale and key."""
    import shutil

    import yaml

    from icml25.studies import study_config_class

    (tmp_path / "config" / "studies").mkdir(parents=True)
    raw = yaml.safe_load((ROOT / "config" / "studies" / "cat_iv.yaml").read_text())
    raw["scales"]["paper"]["alpha"] = 2.0
    (tmp_path / "config" / "studies" / "cat_iv.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"config/studies/cat_iv.yaml: scales\.paper\.alpha"):
        resolve_study("cat_iv", study_config_class("cat_iv"), {"scale": "smoke"}, tmp_path)
    raw["scales"]["paper"] = {"n": [300], "real": {"card_rows": 5}}
    (tmp_path / "config" / "studies" / "cat_iv.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"scales\.paper\.real\.card_rows"):
        resolve_study("cat_iv", study_config_class("cat_iv"), {"scale": "smoke"}, tmp_path)
    shutil.rmtree(tmp_path / "config")


def test_export_job_env(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    uri = export_job_env(tmp_path / "results", None, ROOT / "src")
    assert uri == f"sqlite:///{(tmp_path / 'results').resolve()}/mlflow.db" == os.environ["MLFLOW_TRACKING_URI"]
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str((ROOT / "src").resolve()), "/elsewhere"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert export_job_env(tmp_path, "sqlite:///x.db", None) == "http://127.0.0.1:5000"


def test_job_cpu_split_counts_lazy_imports_as_startup(tmp_path, monkeypatch):
    """core.cli._timed: a module imported inside the stage function is start-up, the function's own loop is work
    (CPU seconds; the module burns about 0.3 s on import, the function about 0.15 s: generous bounds)."""
    import time as _time

    from icml25.core.cli import _timed

    (tmp_path / "slow_to_import_mod.py").write_text(
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def stage():
        import slow_to_import_mod  # noqa: F401

        t = _time.process_time()
        while _time.process_time() - t < 0.15:
            pass

    before = _time.process_time()
    startup, work = _timed(stage)
    assert startup - before >= 0.29
    assert 0.14 <= work < 0.29
