"""core.mlflow_rest and the pipeline's local server, against a real `mlflow server` on loopback."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from icml25.core import server, workflow
from icml25.core.mlflow_rest import RestError, RestTracking
from icml25.core.tracking import init_store


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A SQLite store with one experiment created locally (file artifacts), served on a free port."""
    root = tmp_path_factory.mktemp("rest")
    store = f"sqlite:///{root / 'mlflow.db'}"
    init_store(store, ["local"], root)  # experiment icml25/local with a file:// artifact location
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = server.start(backend_store_uri=store, artifacts_destination=str(root / "served"), port=port, workers=1,
                       log=root / "server.log")
    yield root, store, srv.url
    server.stop(srv.pgid)


def _read(store):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=store)


def test_rest_client_roundtrip(live, tmp_path):
    root, store, url = live
    rest = RestTracking(url)
    exp_local = rest.experiment_id("icml25/local")
    exp_served = rest.experiment_id("icml25/served")  # created by the server: mlflow-artifacts:/ location
    assert rest.experiment_id("icml25/served") == exp_served
    artifact = tmp_path / "a.txt"
    artifact.write_text("hello")
    for exp in (exp_local, exp_served):
        run_id, artifact_uri = rest.create_run(exp, "train/arm/seed0", {"stage": "train"})
        rest.log_batch(run_id, metrics=[("loss", 1.0 / (s + 1), 1000 + s, s) for s in range(50)],
                       params=[("lr", "0.1")], tags=[("seed", "0")])
        rest.log_artifact(run_id, artifact_uri, artifact, "figs")
        rest.set_terminated(run_id, "FINISHED")
        client = _read(store) if exp == exp_local else None
        if client is not None:
            run = client.get_run(run_id)
            assert run.info.status == "FINISHED" and run.info.run_name == "train/arm/seed0"
            assert run.data.params == {"lr": "0.1"} and run.data.tags["seed"] == "0"
            assert [m.step for m in client.get_metric_history(run_id, "loss")] == list(range(50))
            assert [a.path for a in client.list_artifacts(run_id, "figs")] == ["figs/a.txt"]
    served = list((root / "served").rglob("a.txt"))
    assert len(served) == 1 and served[0].read_text() == "hello"  # uploaded through the artifact proxy


def test_rest_errors_are_clear(live):
    _, _, url = live
    with pytest.raises(RestError, match="HTTP 4"):
        RestTracking(url).log_batch("no-such-run", params=[("a", "1")])
    with pytest.raises(RestError, match="HTTP 0|Connection refused"):
        RestTracking("http://127.0.0.1:9", retries=0).experiment_id("x")


@pytest.mark.slow
def test_16_concurrent_jobs_over_rest_lose_nothing(live):
    root, store, url = live
    writer = textwrap.dedent("""
        import sys
        from icml25.core.tracking import stage_run
        i = int(sys.argv[1])
        with stage_run("local", "train", arm=f"arm{i}", seed=i, config={"i": i}, results_dir=sys.argv[2]) as run:
            for step in range(300):
                run.log_metric("train/loss", 1.0 / (step + 1), step=step)
    """)
    env = {**os.environ, "MLFLOW_TRACKING_URI": url, "ICML25_INVOCATION": "rest-inv"}
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(i), str(root)], env=env, stderr=subprocess.PIPE,
                              text=True) for i in range(16)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(errs)[-3000:]
    client = _read(store)
    exp = client.get_experiment_by_name("icml25/local")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.invocation = 'rest-inv'", max_results=100)
    children = [r for r in runs if r.data.tags["stage"] == "train"]
    parents = [r for r in runs if r.data.tags["stage"] == "pipeline"]
    assert len(children) == 16 and len(parents) == 1, time.perf_counter() - t0
    for r in children:
        assert r.info.status == "FINISHED" and r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert len(client.get_metric_history(r.info.run_id, "train/loss")) == 300


def test_local_server_watchdog_stops_server_when_parent_dies(tmp_path):
    """start_local_server's watchdog ends the server once the process that started it is gone."""
    code = textwrap.dedent(f"""
        import sys, time
        from icml25.core.workflow import start_local_server
        url, pgid = start_local_server({str(tmp_path)!r}, "sqlite:///{tmp_path}/mlflow.db")
        print(pgid, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pgid = int(proc.stdout.readline())
    os.killpg(pgid, 0)  # running
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail("server still running 30 s after its parent died")


def test_rest_client_logs_inputs_logged_models_and_outputs(live, tmp_path):
    """The issue-40 endpoints over the stdlib client: runs/log-inputs (dataset + model inputs), logged-models
    (create with >100 params, tags, finalize, artifacts), runs/outputs, and a metric recorded on a model."""
    root, store, url = live
    rest = RestTracking(url)
    exp = rest.experiment_id("icml25/local")
    run_id, _ = rest.create_run(exp, "train/a", {"stage": "train"})
    params = {f"p{i:03d}": str(i) for i in range(150)}
    model_id, model_uri = rest.create_logged_model(exp, "local-a-s0", run_id, params=params,
                                                   tags={"model_sha256": "ab" * 32}, model_type="icml25/local")
    weights = tmp_path / "w.json"
    weights.write_text("[1, 2]")
    rest.log_model_artifact(model_id, model_uri, weights)
    rest.set_model_tags(model_id, {"seeds": "0"})
    rest.finalize_logged_model(model_id, "READY")
    rest.log_outputs(run_id, [model_id])
    dataset = {"name": "local/processed/x.npz", "digest": "0123456789abcdef", "source_type": "local",
               "source": '{"uri": "file:///x.npz"}', "schema": '{"mlflow_colspec": [{"name": "X", "type": "f8"}]}',
               "profile": '{"num_rows": 3}'}
    rest.log_inputs(run_id, datasets=[(dataset, {"mlflow.data.context": "training"})], models=[model_id])
    rest.log_batch(run_id, metrics=[("eval/acc", 0.5, 1000, 0, model_id), ("train/loss", 1.0, 1000, 0),
                                    ("eval/f1", 0.25, 1000, 0, model_id, dataset["name"], dataset["digest"])])
    rest.set_terminated(run_id)

    client = _read(store)
    run = client.get_run(run_id)
    [ds] = run.inputs.dataset_inputs
    assert (ds.dataset.name, ds.dataset.digest, ds.dataset.profile) == (dataset["name"], dataset["digest"],
                                                                        dataset["profile"])
    assert [(t.key, t.value) for t in ds.tags] == [("mlflow.data.context", "training")]
    assert [m.model_id for m in run.inputs.model_inputs] == [model_id]
    assert [m.model_id for m in run.outputs.model_outputs] == [model_id]
    model = client.get_logged_model(model_id)
    assert str(model.status).endswith("READY") and model.source_run_id == run_id and model.params == params
    assert model.tags["seeds"] == "0" and model.tags["model_sha256"] == "ab" * 32
    assert {m.key: m.value for m in model.metrics} == {"eval/acc": 0.5, "eval/f1": 0.25}
    assert {m.key: m.dataset_digest for m in model.metrics} == {"eval/acc": None, "eval/f1": dataset["digest"]}
    assert run.data.metrics == {"eval/acc": 0.5, "train/loss": 1.0, "eval/f1": 0.25}
    assert [a.path for a in client.list_logged_model_artifacts(model_id)] == ["w.json"]


def test_concurrent_jobs_logging_the_same_new_dataset_all_succeed(live):
    """Parallel train jobs read the same processed file: the store's check-then-insert of a dataset races (one
    insert hits the UNIQUE constraint); the client retries, every run gets its input, the dataset exists once."""
    from concurrent.futures import ThreadPoolExecutor

    root, store, url = live
    rest = RestTracking(url)
    exp = rest.experiment_id("icml25/race")
    runs = [rest.create_run(exp, f"train/a{i}", {})[0] for i in range(8)]
    dataset = {"name": "race/processed/x.npz", "digest": "feedfacefeedface", "source_type": "local",
               "source": "{}"}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda r: RestTracking(url).log_inputs(r, [(dataset, {"mlflow.data.context": "training"})]),
                      runs))
    client = _read(store)
    for r in runs:
        assert [i.dataset.digest for i in client.get_run(r).inputs.dataset_inputs] == ["feedfacefeedface"]
    found = client.search_runs([exp], filter_string="dataset.name = 'race/processed/x.npz'")
    assert len(found) == 8
