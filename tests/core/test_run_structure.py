"""How runs are laid out in MLflow, through both paths a job can log by (the direct store and the stdlib REST
client against ``mlflow server``): nested seed runs under a job's run with the same metric keys, the model
logged as an artifact or by path + sha256, experiments marked as model-training experiments, and no empty
``Default`` experiment left visible."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from icml25.core import server
from icml25.core.tracking import (EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, init_store, stage_run)

from conftest import free_port


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """{"direct": (log uri, read uri, results), "rest": (...)}: a SQLite store used directly, and another one
    behind a real ``mlflow server`` (jobs log over the stdlib REST client, tests read through MLflow's client)."""
    root = tmp_path_factory.mktemp("runs")
    direct = f"sqlite:///{root / 'direct' / 'mlflow.db'}"
    (root / "rest").mkdir()
    srv = server.start(backend_store_uri=f"sqlite:///{root / 'rest' / 'mlflow.db'}",
                       artifacts_destination=str(root / "rest" / "artifacts"),
                       port=free_port(), workers=1, log=root / "server.log")
    try:
        yield {"direct": (direct, direct, root / "direct"), "rest": (srv.url, srv.url, root / "rest")}
    finally:
        server.stop(srv.pgid)


@pytest.mark.parametrize("path", ["direct", "rest"])
def test_init_store_marks_experiments_and_hides_default(stores, path):
    from mlflow.entities import ViewType

    uri, read, results = stores[path]
    client = _client(read)
    if path == "rest":  # the server's start-up (server.prepare_backend) already trashed it: bring it back
        assert client.get_experiment("0").lifecycle_stage == "deleted"
        client.restore_experiment("0")
    assert client.get_experiment("0").lifecycle_stage == "active"
    ids = init_store(uri, ["alpha", "beta"], results)
    active = {e.name: e for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)}
    assert "Default" not in active
    assert client.get_experiment("0").lifecycle_stage == "deleted"  # created with the store, then trashed
    for slug in ("alpha", "beta"):
        exp = active[f"icml25/{slug}"]
        assert exp.experiment_id == ids[slug]
        assert exp.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"
    # idempotent: a second init (every pipeline start) changes nothing and does not resurrect Default
    assert init_store(uri, ["alpha", "beta"], results) == ids
    assert client.get_experiment("0").lifecycle_stage == "deleted"


def test_default_experiment_with_runs_is_kept(tmp_path):
    """A Default experiment someone logged to is theirs: only an empty one is deleted."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = _client(uri)
    client.create_run("0")
    init_store(uri, ["alpha"], tmp_path)
    assert client.get_experiment("0").lifecycle_stage == "active"


@pytest.mark.parametrize("path", ["direct", "rest"])
def test_seed_runs_nest_under_the_job_run_with_shared_keys(stores, path, tmp_path, monkeypatch):
    uri, read, results = stores[path]
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights" * 100)
    with stage_run("nest", "train", arm="a", scale="smoke", data_source="offline", config={"lr": 0.1},
                   results_dir=results, uri=uri) as run:
        for seed in (0, 1, 2):
            with run.seed_run(seed) as srun:
                for step in range(5):
                    srun.log_metric("train/loss", seed + 1.0 / (step + 1), step=step)
                srun.log_metric("eval/score", 10 * seed)
        info = run.log_model(model, config={"lr": 0.1, "arch": {"width": 8}})
        job_id = run.run_id
    client = _client(read)
    exp = client.get_experiment_by_name("icml25/nest")
    runs = {r.info.run_id: r for r in client.search_runs([exp.experiment_id])}
    job = runs[job_id]
    seeds = [r for r in runs.values() if r.data.tags.get("mlflow.parentRunId") == job_id]
    assert sorted(r.info.run_name for r in seeds) == ["train/a/seed0", "train/a/seed1", "train/a/seed2"]
    for r in seeds:
        seed = int(r.data.tags["seed"])
        assert r.info.status == "FINISHED" and r.data.tags["run_level"] == "nested"
        assert r.data.tags["study"] == "nest" and r.data.tags["stage"] == "train" and r.data.tags["arm"] == "a"
        assert r.data.tags["scale"] == "smoke" and r.data.tags["config_hash"] == job.data.tags["config_hash"]
        assert set(r.data.metrics) == {"train/loss", "eval/score"}  # the same keys in every seed's run
        history = client.get_metric_history(r.info.run_id, "train/loss")
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == \
            [(s, seed + 1.0 / (s + 1)) for s in range(5)]
        assert r.data.metrics["eval/score"] == 10 * seed
    assert job.data.tags["run_level"] == "job" and "seed" not in job.data.tags
    assert "train/loss" not in job.data.metrics
    # the model: small, so uploaded, with its config beside it, and its hash in the tags
    assert info["model_logged"] == "artifact"
    assert job.data.tags["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert job.data.tags["model_bytes"] == str(700)
    assert sorted(a.path for a in client.list_artifacts(job_id, "model")) == ["model/config.json", "model/model.pt"]
    local = client.download_artifacts(job_id, "model", str(tmp_path / "dl"))
    assert (tmp_path / "dl" / "model" / "model.pt").read_bytes() == model.read_bytes(), local
    assert json.loads((tmp_path / "dl" / "model" / "config.json").read_text()) == {"arch": {"width": 8}, "lr": 0.1}


def test_single_seed_job_is_its_own_seed_run_and_large_models_go_by_hash(tmp_path, monkeypatch):
    """``seeds_per_job: 1``: the job's run is the seed's run (no extra nesting); a model over the size limit is
    recorded by path and sha256, not uploaded; a failing seed marks its run FAILED."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    weights = tmp_path / "big"
    (weights / "sub").mkdir(parents=True)
    (weights / "a.bin").write_bytes(b"x" * 64)
    (weights / "sub" / "b.bin").write_bytes(b"y" * 64)
    with stage_run("one", "train", arm="a", seed=4, results_dir=tmp_path, uri=uri) as run:
        with run.seed_run(4) as srun:
            assert srun is run
            srun.log_metric("train/loss", 0.5, step=3)
        info = run.log_model(weights, max_bytes=100)
        with pytest.raises(ValueError):
            with run.child(seed=9) as bad:
                raise ValueError("diverged")
        job_id = run.run_id
    client = _client(uri)
    runs = client.search_runs([client.get_experiment_by_name("icml25/one").experiment_id])
    job = next(r for r in runs if r.info.run_id == job_id)
    assert job.data.tags["seed"] == "4" and job.data.metrics["train/loss"] == 0.5
    failed = next(r for r in runs if r.info.run_id == bad.run_id)
    assert failed.info.status == "FAILED" and failed.data.tags["seed"] == "9"
    manifest = "".join(f"{rel} {hashlib.sha256(data).hexdigest()}\n"
                       for rel, data in (("a.bin", b"x" * 64), ("sub/b.bin", b"y" * 64)))
    assert info == {"model_path": str(weights), "model_bytes": 128, "model_logged": "path",
                    "model_sha256": hashlib.sha256(manifest.encode()).hexdigest()}
    assert job.data.tags["model_logged"] == "path" and job.data.tags["model_path"] == str(weights)
    assert client.list_artifacts(job_id, "model") == []


# -- MLflow as its users know it (issue 40): datasets, LoggedModels, source, descriptions ------------------------

def _study_files(root):
    """A study's results tree: processed data (npz + csv), and where a train job writes its model."""
    import numpy as np

    d = root / "smoke" / "mlf"
    (d / "processed").mkdir(parents=True)
    (d / "models" / "a").mkdir(parents=True)
    np.savez(d / "processed" / "data.npz", X_train=np.zeros((12, 3)), y_train=np.ones(12))
    (d / "processed" / "table.csv").write_text("a,b\n1,2\n3,4\n5,6\n")
    return d


@pytest.mark.parametrize("path", ["direct", "rest"])
def test_datasets_models_source_and_descriptions_in_mlflow_terms(stores, path, tmp_path, monkeypatch):
    """A train job logs its data files as dataset inputs (name, sha256 digest, schema, rows, context training), its
    model as a READY LoggedModel linked as the run's output (config as params, files, its run's metrics); the
    evaluate job links that model as an input, attaches the arm's eval metric to it, and its claims.json becomes
    the experiment's Markdown description; every run carries mlflow.source.*."""
    import numpy as np

    from icml25.core import mlflow_native as native

    uri, read, results = stores[path]
    results = results / f"mlf-{tmp_path.name}"
    monkeypatch.setenv("ICML25_INVOCATION", f"inv-{path}")
    d = _study_files(results)
    npz, table = d / "processed" / "data.npz", d / "processed" / "table.csv"
    model = d / "models" / "a" / "chunk0.json"
    with stage_run("mlf", "train", arm="a", scale="smoke", config={"lr": 0.1, "net": {"width": 8}},
                   results_dir=results, uri=uri, inputs=[npz, table], seeds=[3]) as run:
        with run.seed_run(3) as srun:
            srun.log_metric("train/loss", 0.5, step=1)
        model.write_text(json.dumps({"w": [1.5, 2.5]}))
        run.log_metric("train/final_loss", 0.25)
        run.log_model(model, {"lr": 0.1, "net": {"width": 8}})
        train_id = run.run_id
    claims = d / "claims.json"
    claims.write_text(json.dumps({
        "study": "mlf", "scale": "smoke", "data_source": "offline", "seeds": [3],
        "paper": {"title": "A Paper About Widgets", "ref": "ICML 2025"},
        "claims": [{"id": "C1", "kind": "claim", "source": "paper", "verdict": "not reproduced",
                    "statement": "widgets beat gadgets", "title": "widgets win", "threshold": "diff > 0",
                    "key_numbers": {"diff": -0.125}, "holds": None}]}))
    with stage_run("mlf", "evaluate", scale="smoke", results_dir=results, uri=uri, inputs=[model],
                   outputs=[claims]) as run:
        with run.child(arm="a") as arun:
            arun.log_metric("eval/accuracy", 0.875)
        eval_id = run.run_id

    client = _client(read)
    exp = client.get_experiment_by_name("icml25/mlf")
    note = exp.tags[native.NOTE]
    assert note.startswith("## A Paper About Widgets") and "*ICML 2025*" in note
    assert "| C1: widgets win | paper | **not reproduced** | diff = -0.125 | diff > 0 |" in note
    assert "src/icml25/studies/mlf/README.md" in note

    train = client.get_run(train_id)
    sha = hashlib.sha256(npz.read_bytes()).hexdigest()
    inputs = {i.dataset.name: i for i in train.inputs.dataset_inputs}
    assert set(inputs) == {"mlf/processed/data.npz", "mlf/processed/table.csv"}
    ds = inputs["mlf/processed/data.npz"]
    assert ds.dataset.digest == sha[:16] and json.loads(ds.dataset.profile)["sha256"] == sha
    assert json.loads(ds.dataset.schema) == {"mlflow_colspec": [{"name": "X_train", "type": "float64[12, 3]"},
                                                                {"name": "y_train", "type": "float64[12]"}]}
    assert json.loads(ds.dataset.profile)["num_rows"] == 12
    assert json.loads(inputs["mlf/processed/table.csv"].dataset.profile)["num_rows"] == 3
    assert [(t.key, t.value) for t in ds.tags] == [("mlflow.data.context", "training")]
    commit = native.git_info()["commit"]
    for r in client.search_runs([exp.experiment_id]):  # every run: parent, jobs, nested
        assert r.data.tags["mlflow.source.type"] == "LOCAL"
        assert r.data.tags["mlflow.source.name"].startswith("icml25/studies/mlf:")
        if commit:
            assert r.data.tags["mlflow.source.git.commit"] == commit
            assert r.data.tags["mlflow.source.name"].endswith(f"@{commit[:7]}")
    parent = client.get_run(train.data.tags["mlflow.parentRunId"])
    assert "scale `smoke`" in parent.data.tags[native.NOTE] and "0 reproduced · 1 not reproduced" in \
        parent.data.tags[native.NOTE]
    # the search a user types in the Datasets filter finds the runs that read the file
    found = client.search_runs([exp.experiment_id], filter_string=f"dataset.digest = '{sha[:16]}'")
    assert {r.info.run_id for r in found} == {train_id, eval_id}

    [m] = client.search_logged_models([exp.experiment_id])
    assert m.status.to_int() == 2 or str(m.status).endswith("READY")
    assert m.source_run_id == train_id and m.name == "mlf-a-s3-chunk0"
    assert m.params == {"lr": "0.1", "net.width": "8"}
    assert m.tags["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest() and m.tags["seeds"] == "3"
    metrics = {x.key: (x.value, x.run_id) for x in m.metrics}
    assert metrics["train/final_loss"] == (0.25, train_id)
    evaluated = client.get_run(eval_id)
    arm_run = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("mlflow.parentRunId") == eval_id]
    assert metrics["eval/accuracy"] == (0.875, arm_run[0].info.run_id)
    on_data = {x.key: (x.dataset_name, x.dataset_digest) for x in m.metrics}
    assert on_data["train/final_loss"] == (None, None)  # the train job read two files: no one dataset
    assert on_data["eval/accuracy"] == (None, None)  # the evaluate job read the two through the model
    assert [o.model_id for o in train.outputs.model_outputs] == [m.model_id]
    assert [i.model_id for i in evaluated.inputs.model_inputs] == [m.model_id]
    assert [i.dataset.name for i in evaluated.inputs.dataset_inputs] == ["mlf/processed/data.npz",
                                                                         "mlf/processed/table.csv"]
    files = sorted(a.path for a in client.list_logged_model_artifacts(m.model_id))
    assert files == ["chunk0.json", "config.json"]
    got = client.download_artifacts(train_id, "model/chunk0.json", str(tmp_path / "dl"))
    assert json.loads(Path(got).read_text()) == {"w": [1.5, 2.5]}
    assert np.load(npz)["X_train"].shape == (12, 3)


def test_native_records_can_be_switched_off(tmp_path, monkeypatch):
    """``ICML25_MLFLOW_NATIVE=0``: the logging is what it was before (no inputs, no LoggedModel, no source tags)."""
    monkeypatch.setenv("ICML25_MLFLOW_NATIVE", "0")
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    d = _study_files(tmp_path)
    model = d / "models" / "a" / "m.json"
    model.write_text("{}")
    with stage_run("off", "train", arm="a", results_dir=tmp_path, uri=uri, inputs=[d / "processed" / "data.npz"]) \
            as run:
        run.log_model(model)
    client = _client(uri)
    r = client.get_run(run.run_id)
    assert r.inputs.dataset_inputs == [] and "mlflow.source.name" not in r.data.tags
    assert client.search_logged_models([r.info.experiment_id]) == []
