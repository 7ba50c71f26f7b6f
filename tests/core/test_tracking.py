"""core.tracking against real MLflow stores: run naming, tags, parents, and 16 concurrent writers."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from icml25.core.tracking import finish_invocation, init_store, run_name, stage_run

WRITER = textwrap.dedent("""
    import sys
    from icml25.core.tracking import stage_run
    i, results = int(sys.argv[1]), sys.argv[2]
    with stage_run("conc", "train", arm=f"arm{i}", seed=i, scale="smoke", data_source="offline",
                   config={"i": i, "nested": {"k": 1}}, results_dir=results) as run:
        for step in range(300):
            run.log_metric("train/loss", 1.0 / (step + 1), step=step)
        run.log_metrics({"eval/a": i, "eval/b": 2 * i})
""")


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_run_name():
    assert run_name("train", "cat_k2", 3) == "train/cat_k2/seed3"
    assert run_name("evaluate") == "evaluate"


@pytest.mark.slow
@pytest.mark.parametrize("pre_init", [False, True], ids=["fresh-store", "onstart-store"])
def test_16_concurrent_writers_lose_nothing(tmp_path, monkeypatch, pre_init):
    results = tmp_path / "results"
    uri = f"sqlite:///{results / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "ICML25_INVOCATION": "inv-test"}
    if pre_init:
        init_store(uri, ["conc"], results)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(i), str(results)], env=env,
                              stderr=subprocess.PIPE, text=True) for i in range(16)]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(errors)[-3000:]

    client = _client(uri)
    exp = client.get_experiment_by_name("icml25/conc")
    assert exp.artifact_location.startswith((results / "mlartifacts").as_uri())
    runs = client.search_runs([exp.experiment_id], max_results=100)
    children = [r for r in runs if r.data.tags.get("stage") == "train"]
    parents = [r for r in runs if r.data.tags.get("stage") == "pipeline"]
    assert len(children) == 16 and len(parents) == 1
    assert {r.info.run_name for r in children} == {f"train/arm{i}/seed{i}" for i in range(16)}
    for r in children:
        i = int(r.data.tags["seed"])
        assert r.info.status == "FINISHED"
        assert r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert r.data.tags["study"] == "conc" and r.data.tags["scale"] == "smoke" and r.data.tags["config_hash"]
        assert r.data.params["i"] == str(i) and r.data.params["nested.k"] == "1"
        history = client.get_metric_history(r.info.run_id, "train/loss")
        assert sorted(m.step for m in history) == list(range(300))
        assert r.data.metrics["eval/b"] == 2 * i

    monkeypatch.setenv("ICML25_INVOCATION", "inv-test")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert finish_invocation("FINISHED", results) == 1
    assert client.get_run(parents[0].info.run_id).info.status == "FINISHED"


def test_failed_stage_marks_run_failed_and_reraises(tmp_path, monkeypatch):
    results = tmp_path / "results"
    uri = f"sqlite:///{results / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    with pytest.raises(ZeroDivisionError):
        with stage_run("fail", "train", arm="a", results_dir=results) as run:
            run.log_metric("train/x", 1.0)
            1 / 0
    (r,) = _client(uri).search_runs([_client(uri).get_experiment_by_name("icml25/fail").experiment_id])
    assert r.info.status == "FAILED" and r.data.metrics["train/x"] == 1.0
    assert "mlflow.parentRunId" not in r.data.tags  # hand-run stage: no invocation, no parent


def test_parent_tags_and_metrics_reach_the_invocation_parent(tmp_path, monkeypatch):
    results = tmp_path / "results"
    uri = f"sqlite:///{results / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("ICML25_INVOCATION", "inv-parent")
    with stage_run("ptags", "evaluate", results_dir=results) as run:
        run.set_parent_tags({"construction": "own_illustration", "skip": None})
        run.log_parent_metrics({"verdicts/checks_hold": 3})
    client = _client(uri)
    runs = client.search_runs([client.get_experiment_by_name("icml25/ptags").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("stage") == "pipeline"]
    (job,) = [r for r in runs if r.data.tags.get("stage") == "evaluate"]
    assert job.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert parent.data.tags["construction"] == "own_illustration" and "skip" not in parent.data.tags
    assert parent.data.metrics["verdicts/checks_hold"] == 3.0 and "construction" not in job.data.tags
