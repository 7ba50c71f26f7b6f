"""core.tracking against real MLflow stores: run naming, tags, parents, and 16 concurrent writers."""
from __future__ import annotations

import json
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


# -- issue 40: dataset inputs, LoggedModels, outputs and descriptions spool and replay like everything else -------

def _train_and_evaluate(results, stop_store=None):
    """A train job (data inputs, a LoggedModel) and an evaluate job (model input, arm metric, claims.json) of study
    ``spooled``; ``stop_store()`` is called inside the train job before the model is logged."""
    import json

    import numpy as np

    d = results / "smoke" / "spooled"
    (d / "processed").mkdir(parents=True)
    (d / "models" / "a").mkdir(parents=True)
    np.savez(d / "processed" / "data.npz", X=np.arange(6.0).reshape(3, 2))
    model = d / "models" / "a" / "chunk0.json"
    with stage_run("spooled", "train", arm="a", scale="smoke", config={"lr": 0.5}, results_dir=results,
                   inputs=[d / "processed" / "data.npz"], seeds=[0]) as run:
        run.log_metric("train/loss", 0.5)
        run.flush()
        if stop_store is not None:
            stop_store()
        model.write_text(json.dumps({"w": 1}))
        run.log_model(model, {"lr": 0.5})
    claims = d / "claims.json"
    claims.write_text(json.dumps({"study": "spooled", "scale": "smoke", "data_source": "offline", "seeds": [0],
                                  "paper": {"title": "Spooled Paper", "ref": "ICML 2025"},
                                  "claims": [{"id": "C1", "kind": "claim", "source": "paper",
                                              "verdict": "reproduced", "statement": "s", "threshold": "t",
                                              "holds": None, "key_numbers": {"x": 1.5}}]}))
    with stage_run("spooled", "evaluate", scale="smoke", results_dir=results, inputs=[model],
                   outputs=[claims]) as run:
        with run.child(arm="a") as arun:
            arun.log_metric("eval/acc", 0.75)


def _check_replayed(store, proxied_root=None):
    """Everything of :func:`_train_and_evaluate` is in ``store``; ``proxied_root``: where the replay put the
    artifacts of a server-made experiment (``mlflow-artifacts:`` locations, read from disk)."""
    client = _client(store)
    exp = client.get_experiment_by_name("icml25/spooled")
    assert exp.tags["mlflow.note.content"].startswith("## Spooled Paper")
    runs = {r.data.tags["stage"] + r.data.tags.get("arm", ""): r for r in client.search_runs([exp.experiment_id])}
    assert {"pipeline", "traina", "evaluate", "evaluatea"} <= set(runs)
    assert all(r.info.status == "FINISHED" for k, r in runs.items() if k != "pipeline")
    train = client.get_run(runs["traina"].info.run_id)
    assert [i.dataset.name for i in train.inputs.dataset_inputs] == ["spooled/processed/data.npz"]
    [m] = client.search_logged_models([exp.experiment_id])
    assert str(m.status).endswith("READY") and m.source_run_id == train.info.run_id and m.params == {"lr": "0.5"}
    assert [o.model_id for o in train.outputs.model_outputs] == [m.model_id]
    if proxied_root is None:
        files = [a.path for a in client.list_logged_model_artifacts(m.model_id)]
    else:
        files = [p.name for p in proxied_root.rglob(f"models/{m.model_id}/artifacts/*")]
    assert sorted(files) == ["chunk0.json", "config.json"]
    assert {x.key: x.value for x in m.metrics} == {"train/loss": 0.5, "eval/acc": 0.75}
    evaluate = client.get_run(runs["evaluate"].info.run_id)
    assert [i.model_id for i in evaluate.inputs.model_inputs] == [m.model_id]
    assert "Verdicts: 1 reproduced" in client.get_run(runs["pipeline"].info.run_id).data.tags["mlflow.note.content"]


def test_new_calls_spool_when_the_store_is_away_from_the_start_and_replay(tmp_path, monkeypatch):
    """No store during the jobs: inputs, LoggedModel (placeholder id), its artifacts, outputs, model metrics and
    the experiment description are journaled; the replay writes them with the placeholders resolved."""
    import socket

    from icml25.core import spool

    results = tmp_path / "results"
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")  # nobody listens
    monkeypatch.setenv(spool.ENV_STORE, store)
    monkeypatch.setenv("ICML25_TRACKING_RETRIES", "0")
    monkeypatch.setenv("ICML25_INVOCATION", "away-40")
    _train_and_evaluate(results)
    ops = {json.loads(line)["op"] for j in spool.pending(results) for line in j.read_text().splitlines()}
    assert {"log_inputs", "create_logged_model", "log_model_artifact", "finalize_logged_model", "log_outputs",
            "set_experiment_tag"} <= ops
    init_store(store, [], results)
    assert spool.replay(results) == (2, 0)
    _check_replayed(store)


def test_new_calls_spool_when_the_server_dies_mid_job_and_replay(mlflow_server, tmp_path, monkeypatch):
    """The server dies inside the train job, before the model is logged: the LoggedModel of a run the server made
    is journaled and replayed into the SQLite store it served, and nothing is lost."""
    from icml25.core import server as srv
    from icml25.core import spool

    results = tmp_path / "results"
    store = f"sqlite:///{mlflow_server.store / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    monkeypatch.setenv(spool.ENV_STORE, store)
    monkeypatch.setenv("ICML25_TRACKING_RETRIES", "1")
    monkeypatch.setenv("ICML25_INVOCATION", "mid-40")
    _train_and_evaluate(results, stop_store=lambda: srv.stop(mlflow_server.pgid))
    assert len(spool.pending(results)) == 2
    assert spool.replay(results) == (2, 0)
    _check_replayed(store, proxied_root=mlflow_server.store / "mlartifacts")
