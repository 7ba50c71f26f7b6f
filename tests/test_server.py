"""Tracking server mode: ``icml25 server`` (icml25.core.server) starts ``mlflow server`` as cluster runs need it,
and the pipeline's parallel jobs log to it over HTTP without losing a run."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import clean_env, copy_project, free_port, job_runs, mlflow_runs, run_names, run_snakemake, tail
from icml25.core import server as srv
from icml25.studies import STUDIES


def _get(url: str, host: str | None = None) -> int:
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def test_allowed_hosts_keep_defaults_and_add_machine_names():
    hosts = srv.allowed_hosts(["mlflow.example.org"])
    for name in ["localhost", "127.0.0.1", *srv.machine_names(), "mlflow.example.org"]:
        assert name in hosts and f"{name}:*" in hosts  # clients send Host: name:port
    assert "10.*" in hosts and "192.168.*" in hosts
    assert "*" not in hosts


def test_server_command_and_environment():
    cmd = srv.server_command(backend_store_uri="sqlite:////x/db", artifacts_destination="file:///x/a",
                             host="0.0.0.0", port=5123, workers=3)
    assert cmd[:2] == ["mlflow", "server"]
    opts = dict(zip(cmd[2::1], cmd[3::1]))
    assert opts["--backend-store-uri"] == "sqlite:////x/db"
    assert opts["--artifacts-destination"] == "file:///x/a"
    assert opts["--port"] == "5123" and opts["--host"] == "0.0.0.0" and opts["--workers"] == "3"
    assert "--serve-artifacts" in cmd
    env = srv.server_env({"MLFLOW_TRACKING_URI": "http://elsewhere", "PATH": "/bin"})
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert "MLFLOW_TRACKING_URI" not in env and env["PATH"] == "/bin"


def test_cli_detach_checks_hosts_and_stops_process_group(tmp_path):
    port = free_port()
    pid_file = tmp_path / "server.pid"
    start = subprocess.run(
        [sys.executable, "-m", "icml25.core.cli", "server", "--host", "127.0.0.1", "--port", str(port),
         "--results", str(tmp_path), "--detach", "--pid-file", str(pid_file)],
        env=clean_env(), capture_output=True, text=True, timeout=180)
    assert start.returncode == 0, start.stdout + start.stderr
    assert f"MLFLOW_TRACKING_URI=http://127.0.0.1:{port}" in start.stdout
    pgid = int(pid_file.read_text())
    try:
        url = f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=1"
        assert _get(url) == 200
        assert _get(url, host=f"{socket.gethostname()}:{port}") == 200  # compute nodes use the login node's name
        assert _get(url, host=f"attacker.example:{port}") == 403  # DNS rebinding protection stays on
        assert (tmp_path / "mlflow-server.db").exists()  # SQLite backend created before the workers started
    finally:
        stop = subprocess.run([sys.executable, "-m", "icml25.core.cli", "server", "--stop", "--pid-file",
                               str(pid_file)], capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0, stop.stderr
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)  # the whole group (uvicorn workers included) is gone
    assert not pid_file.exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5"])
def test_an_open_host_without_auth_is_refused_unless_insecure(tmp_path, capsys, monkeypatch, host):
    """Issue 36.6: ``--host 0.0.0.0`` without ``--auth`` refuses (exit 2, saying why and what to do) and starts
    nothing; ``--insecure`` lets it start (with a warning)."""
    started = []
    monkeypatch.setattr(srv, "start", lambda **kw: started.append(kw) or (_ for _ in ()).throw(RuntimeError("x")))
    rc = srv.main(["--host", host, "--port", "5999", "--results", str(tmp_path), "--detach"])
    err = capsys.readouterr().err
    assert rc == 2 and not started
    assert f"refusing --host {host} without --auth" in err and "--insecure" in err and "SSH tunnel" in err
    rc = srv.main(["--host", host, "--port", "5999", "--results", str(tmp_path), "--detach", "--insecure"])
    assert rc == 1 and len(started) == 1 and started[0]["host"] == host  # it tried to start (stubbed failure)
    rc = srv.main(["--host", "127.0.0.1", "--port", "5999", "--results", str(tmp_path), "--detach"])
    assert rc == 1 and len(started) == 2  # loopback needs neither flag


def test_start_reports_a_server_that_cannot_start(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match="mlflow server"):
            srv.start(backend_store_uri=f"sqlite:///{tmp_path / 'db'}", artifacts_destination=str(tmp_path / "a"),
                      host="127.0.0.1", port=port, log=tmp_path / "log", ready_timeout=60)


@pytest.mark.slow
def test_concurrent_jobs_lose_no_run(mlflow_server, tmp_path):
    """Eight stage processes at once (the `noop` stage: open a run, log, close) against one server."""
    slug, n = STUDIES[0], 8
    work = copy_project(tmp_path / "work")
    env = clean_env(MLFLOW_TRACKING_URI=mlflow_server.url, ICML25_INVOCATION="concurrency-test")

    def one(seed: int) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", f"icml25.studies.{slug}", "noop", "--scale", "smoke",
                               "--seeds", str(seed), "--results", "results"], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(n) as pool:
        outs = list(pool.map(one, range(n)))
    assert all(o.returncode == 0 for o in outs), [o.stderr[-2000:] for o in outs if o.returncode]
    runs = job_runs(mlflow_runs(mlflow_server.url))[f"icml25/{slug}"]
    assert sorted(r.info.run_name for r in runs) == sorted(f"noop/seed{k}" for k in range(n))
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all("job/wall_s" in r.data.metrics for r in runs)
    parents = {r.data.tags.get("mlflow.parentRunId") for r in runs}
    assert len(parents) == 1 and None not in parents  # one parent per study per invocation


@pytest.mark.slow
def test_smoke_pipeline_logs_to_server(mlflow_server, smoke_run, tmp_path):
    """One study's smoke pipeline with 2 parallel jobs, MLFLOW_TRACKING_URI pointing at the server: the same
    runs, metric keys and evaluation metrics as the local SQLite run, artifacts uploaded through the server, no
    local store. (All studies on a server: tests/test_cluster.py.)"""
    slug = STUDIES[0]
    exp = f"icml25/{slug}"
    work = copy_project(tmp_path / "work")
    out = run_snakemake(work, "--cores", "2", "--config", "scale=smoke", f"studies=[{slug}]",
                        env=clean_env(MLFLOW_TRACKING_URI=mlflow_server.url), timeout=900)
    assert out.returncode == 0, tail(out)
    assert not (work / "results" / "mlflow.db").exists()
    runs = job_runs(mlflow_runs(mlflow_server.url))
    local = job_runs(mlflow_runs(f"sqlite:///{smoke_run / 'results' / 'mlflow.db'}"))
    assert run_names({exp: runs[exp]}) == run_names({exp: local[exp]})
    assert {r.info.status for rs in runs.values() for r in rs} == {"FINISHED"}
    local_by_name = {r.info.run_name: r for r in local[exp]}
    for r in runs[exp]:
        assert r.info.artifact_uri.startswith("mlflow-artifacts:"), r.info.artifact_uri
        mine, theirs = r.data.metrics, local_by_name[r.info.run_name].data.metrics
        assert set(mine) == set(theirs), r.info.run_name
        evals = [k for k in mine if k.startswith("eval/")]  # final, deterministic values (no timings)
        assert {k: mine[k] for k in evals} == {k: theirs[k] for k in evals}, r.info.run_name
    doc = json.loads((work / "results" / "smoke" / slug / "claims.json").read_text())
    assert doc == json.loads((smoke_run / "results" / "smoke" / slug / "claims.json").read_text())
    uploaded = list(Path(mlflow_server.store, "artifacts").rglob("claims.json"))
    assert any(json.loads(p.read_text()) == doc for p in uploaded), uploaded
