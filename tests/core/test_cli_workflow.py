"""The uniform stage CLI (core.cli) and the helpers behind common.smk (core.workflow)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from icml25.core.cli import Stage, stage_main
from icml25.core.config import ConfigError
from icml25.core.workflow import export_job_env, resolve_study, seed_chunks

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Config:
    seeds: tuple[int, ...]
    seeds_per_job: int | None = None
    lr: float = 0.1


def test_stage_main_runs_stage_with_parsed_paths_and_config(tmp_path):
    seen = {}

    def train(stage: Stage, run) -> None:
        seen.update(cfg=stage.config, arm=stage.arm, seeds=stage.seeds, out=stage.output(0), inp=stage.inputs)
        run.log_metric("train/x", 1.0)

    rc = stage_main("toy", Config, {"train": train},
                    ["train", "--config-json", json.dumps({"seeds": [3, 4], "lr": 0.5}), "--arm", "a", "--seeds",
                     "3", "4", "--in", "x.npz", "--out", str(tmp_path / "m.json"), "--no-track"])
    assert rc == 0
    assert seen == {"cfg": Config(seeds=(3, 4), lr=0.5), "arm": "a", "seeds": (3, 4), "out": tmp_path / "m.json",
                    "inp": (Path("x.npz"),)}


def test_stage_main_config_error_exits_2_naming_key(capsys):
    rc = stage_main("toy", Config, {"train": lambda s, r: None},
                    ["train", "--config-json", json.dumps({"seeds": [0], "lr": "fast"}), "--no-track"])
    assert rc == 2
    assert "toy.lr: expected a number" in capsys.readouterr().err


def test_noop_stage_tracks_a_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    assert stage_main("toy", Config, {}, ["noop", "--config-json", '{"seeds": [0]}', "--results",
                                          str(tmp_path)]) == 0
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


def test_export_job_env(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    uri = export_job_env(tmp_path / "results", None, ROOT / "src")
    assert uri == f"sqlite:///{(tmp_path / 'results').resolve()}/mlflow.db" == os.environ["MLFLOW_TRACKING_URI"]
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str((ROOT / "src").resolve()), "/elsewhere"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert export_job_env(tmp_path, "sqlite:///x.db", None) == "http://127.0.0.1:5000"
