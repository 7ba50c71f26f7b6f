"""Issue 11, "nothing lost, nobody let in": each finding of the issue reproduced with real components (a real
``mlflow server`` on loopback, real HTTP, real Snakemake runs killed with SIGKILL) and checked fixed."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, copy_project, free_port, run_snakemake, tail
from icml25.core import server as srv
from icml25.core import spool
from icml25.core.mlflow_rest import RestError, RestTracking, redact
from icml25.core.tracking import init_store, stage_run


def _server_groups(marker: str) -> set[int]:
    """Process groups of running ``mlflow server`` processes whose command line contains ``marker``."""
    out = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            if b"server" in cmd and any(b"mlflow" in c for c in cmd[:2]) and marker.encode() in b" ".join(cmd):
                out.add(os.getpgid(int(proc.name)))
        except OSError:
            continue
    return out


def _gone(pgid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def _runs(uri: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exps = [e.experiment_id for e in client.search_experiments() if e.name.startswith("icml25/")]
    return client.search_runs(exps, max_results=10000) if exps else []


# -- 1. a server start that knows its own process ------------------------------------------------------------

def test_server_cli_fails_on_a_port_another_server_answers(tmp_path, http_server):
    """Finding 1: another server answering ``/health`` on the port is not "mlflow server up"."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("OK")  # http.server answers GET /health with 200
    base = http_server(tmp_path / "www")
    port = int(base.rstrip("/").rsplit(":", 1)[1])
    out = subprocess.run([sys.executable, "-m", "icml25.core.cli", "server", "--port", str(port), "--results",
                          str(tmp_path / "r"), "--detach", "--pid-file", str(tmp_path / "pid")],
                         env=clean_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "mlflow server up" not in out.stdout and "export MLFLOW_TRACKING_URI" not in out.stdout
    assert f"127.0.0.1:{port}" in out.stderr and "Address already in use" in out.stderr
    assert not (tmp_path / "pid").exists()


def test_readiness_requires_the_listener_in_the_servers_own_process_group(tmp_path, http_server):
    """Finding 1, the race: the port was free when checked, another process bound it first. ``/health`` answers,
    but from a socket outside the server's process group: not ready; the server's exit is the error."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("OK")
    base = http_server(tmp_path / "www")
    port = int(base.rstrip("/").rsplit(":", 1)[1])
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"], start_new_session=True)
    try:
        assert srv.serves_port(ours.pid, port) is False
        assert srv.port_owners(port) and os.getpid() not in srv.port_owners(port)
        with pytest.raises(RuntimeError, match="another process"):
            srv.wait_ready(base.rstrip("/"), timeout=20, proc=ours, pgid=ours.pid, port=port)
    finally:
        ours.kill()
        ours.wait()


def test_icml25_server_binds_loopback_unless_told():
    """Finding 7: the default interface is 127.0.0.1."""
    args = srv._parser().parse_args([])
    assert args.host == "127.0.0.1"
    cmd = srv.server_command(backend_store_uri="sqlite:////x", artifacts_destination="file:///a", auth=True)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--app-name") + 1] == "basic-auth"


# -- 2. the tie to the parent exists from the moment the server exists -------------------------------------

@pytest.mark.slow
def test_sigkill_of_snakemake_during_server_start_leaves_no_server(tmp_path):
    """Finding 2: SIGKILL Snakemake while its local server is starting; the server is gone within seconds."""
    work = copy_project(tmp_path / "work")
    snake = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--config", "scale=smoke",
                              "studies=[cat_iv]"], cwd=work, env=clean_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    groups: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while not groups and time.monotonic() < deadline and snake.poll() is None:
            groups = _server_groups(str(work))
            time.sleep(0.05)
        assert groups, "no mlflow server was started"
        log = work / "results" / "logs" / "mlflow-server.log"
        os.killpg(snake.pid, signal.SIGKILL)  # Snakemake and everything in its group
        snake.wait()
        for pgid in groups:
            assert _gone(pgid, 20), f"mlflow server (group {pgid}) still running after Snakemake died: {log}"
    finally:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


# -- 3. tracking that loses nothing ------------------------------------------------------------------------

def test_store_killed_mid_job_loses_nothing_and_replays(mlflow_server, tmp_path, monkeypatch):
    """Finding 3: the tracking server dies in the middle of a stage job. The job finishes normally, what it
    logged after the outage is spooled under results/.tracking/spool, and the replay puts every metric, the
    artifact and the FINISHED status into the store."""
    results = tmp_path / "results"
    store = f"sqlite:///{mlflow_server.store / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    monkeypatch.setenv(spool.ENV_STORE, store)
    monkeypatch.setenv("ICML25_TRACKING_RETRIES", "1")
    monkeypatch.setenv("ICML25_INVOCATION", "outage-test")
    artifact = tmp_path / "fig.txt"
    artifact.write_text("figure")
    with stage_run("outage", "train", arm="a", seed=0, config={"lr": 0.1}, results_dir=results) as run:
        for step in range(5):
            run.log_metric("train/loss", 1.0 / (step + 1), step=step)
        run.flush()
        srv.stop(mlflow_server.pgid)  # the store goes away mid-job
        for step in range(5, 10):
            run.log_metric("train/loss", 1.0 / (step + 1), step=step)
        run.log_artifact(artifact, "figures")
    journals = spool.pending(results)
    assert len(journals) == 1
    assert spool.replay(results) == (1, 0)  # into the SQLite store the server served
    assert spool.pending(results) == [] and not list((results / ".tracking" / "spool").glob("*.files"))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    runs = [r for r in _runs(store) if r.data.tags.get("stage") == "train"]
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    history = client.get_metric_history(runs[0].info.run_id, "train/loss")
    assert sorted(m.step for m in history) == list(range(10))
    assert runs[0].data.params == {"lr": "0.1"}
    # proxied artifact of a server-made run, replayed beside the SQLite store (where the local server keeps them)
    uploaded = list((mlflow_server.store / "mlartifacts").rglob("fig.txt"))
    assert [p.read_text() for p in uploaded] == ["figure"]
    assert runs[0].info.run_id in str(uploaded[0]) and uploaded[0].parent.name == "figures"


def test_store_unreachable_from_the_start_spools_whole_run_with_its_parent(tmp_path, monkeypatch):
    """Finding 3: no store at all during a job (its parent run created while away too): the job succeeds; the
    replay creates the parent and the child with the link between them."""
    results = tmp_path / "results"
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")  # nobody listens
    monkeypatch.setenv(spool.ENV_STORE, store)
    monkeypatch.setenv("ICML25_TRACKING_RETRIES", "0")
    monkeypatch.setenv("ICML25_INVOCATION", "away-test")
    with stage_run("away", "evaluate", config={"k": 1}, results_dir=results) as run:
        run.log_metrics({"eval/acc": 0.75})
    with pytest.raises(ValueError):
        with stage_run("away", "train", seed=1, results_dir=results):
            raise ValueError("the job's own error")  # still raised: tracking never hides the science
    parents = json.loads((results / ".tracking" / "parents.json").read_text())
    assert all(v.startswith(spool.PLACEHOLDER) for v in parents.values())
    init_store(store, [], results)
    assert spool.replay(results) == (2, 0)
    runs = _runs(store)
    by_stage = {r.data.tags["stage"]: r for r in runs}
    assert set(by_stage) == {"pipeline", "evaluate", "train"}
    assert by_stage["evaluate"].info.status == "FINISHED" and by_stage["train"].info.status == "FAILED"
    assert by_stage["evaluate"].data.metrics == {"eval/acc": 0.75}
    parent = by_stage["pipeline"].info.run_id
    assert by_stage["evaluate"].data.tags["mlflow.parentRunId"] == parent == by_stage["train"].data.tags[
        "mlflow.parentRunId"]
    assert list(json.loads((results / ".tracking" / "parents.json").read_text()).values()) == [parent]


def test_request_errors_are_not_outages(mlflow_server, tmp_path, monkeypatch):
    """A wrong request (4xx) is a bug, not an outage: it is raised, not spooled."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    from icml25.core.tracking import tracking_client

    client = tracking_client(mlflow_server.url, tmp_path / "results")
    with pytest.raises(RestError, match="HTTP 4"):
        client.log_batch("no-such-run", params=[("a", "1")])
    assert not client.offline and spool.pending(tmp_path / "results") == []


def _find_server(work: Path, timeout: float = 240) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        groups = _server_groups(str(work))
        if groups:
            return groups.pop()
        time.sleep(0.1)
    raise AssertionError("no local mlflow server")


@pytest.mark.slow
def test_pipeline_survives_its_server_killed_mid_run(tmp_path):
    """Finding 3: the local tracking server is SIGKILLed while the pipeline runs. No job fails; at the end the
    spool is replayed into results/mlflow.db: every job's run FINISHED under a FINISHED parent, none RUNNING."""
    work = copy_project(tmp_path / "work")
    env = clean_env(ICML25_TRACKING_RETRIES="1", PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    snake = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", "--config", "scale=smoke",
                              "studies=[cat_iv]"], cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    pgid = _find_server(work)
    logs = work / "results" / "smoke" / "cat_iv" / "logs"
    deadline = time.monotonic() + 300
    while not (logs.is_dir() and any(logs.glob("*.log"))) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(pgid, signal.SIGKILL)
    out, _ = snake.communicate(timeout=900)
    assert snake.returncode == 0, out[-6000:]
    assert (work / "results" / "smoke" / "cat_iv" / "claims.json").exists()
    assert spool.pending(work / "results") == []
    runs = _runs(f"sqlite:///{work / 'results' / 'mlflow.db'}")
    jobs = [r for r in runs if r.data.tags.get("stage") != "pipeline"]
    parents = [r for r in runs if r.data.tags.get("stage") == "pipeline"]
    assert len(jobs) >= 5 and {r.info.status for r in jobs} == {"FINISHED"}, [(r.info.run_name, r.info.status)
                                                                             for r in jobs]
    assert {r.info.status for r in parents} == {"FINISHED"}
    # job runs hang under the study's parent; nested (per seed / per arm) runs under their job's run
    job_ids = {r.info.run_id for r in jobs if r.data.tags.get("run_level") == "job"}
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs
            if r.data.tags["study"] == "cat_iv" and r.data.tags.get("run_level") == "job"} == {
        r.info.run_id for r in parents if r.data.tags["study"] == "cat_iv"}
    assert all(r.data.tags["mlflow.parentRunId"] in job_ids for r in jobs if r.data.tags.get("run_level") == "nested")


@pytest.mark.slow
def test_killed_pipeline_recovers_with_the_readme_commands(tmp_path):
    """Finding 3: SIGKILL the whole Snakemake process group during a job. The README's recovery commands
    (`snakemake --unlock`, then the run command with `--rerun-incomplete`) finish the pipeline, and the runs the
    killed invocation left RUNNING are marked KILLED; nothing is RUNNING afterwards."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "snakemake --unlock" in readme and "--rerun-incomplete" in readme
    work = copy_project(tmp_path / "work")
    args = ["--config", "scale=smoke", "studies=[cat_iv]"]
    first_log = open(tmp_path / "first.log", "w")  # noqa: SIM115
    snake = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=work,
                             env=clean_env(), stdout=first_log, stderr=subprocess.STDOUT, start_new_session=True)
    db = work / "results" / "mlflow.db"
    deadline = time.monotonic() + 400
    first: list = []
    logs = work / "results" / "smoke" / "cat_iv" / "logs"
    while time.monotonic() < deadline and snake.poll() is None:
        # open the store only once jobs run: a reader creating the schema during onstart would race init_store
        if logs.is_dir() and any(logs.glob("*.log")):
            try:
                first = [r for r in _runs(f"sqlite:///{db}") if r.data.tags.get("stage") not in (None, "pipeline")]
            except Exception:  # noqa: BLE001 - the store is being written
                first = []
            if first:
                break
        time.sleep(1)
    first_log.close()
    assert first, (tmp_path / "first.log").read_text()[-4000:]
    os.killpg(snake.pid, signal.SIGKILL)
    snake.wait()
    killed_inv = first[0].data.tags["invocation"]
    unlock = run_snakemake(work, "--unlock", *args)
    assert unlock.returncode == 0, tail(unlock)
    again = run_snakemake(work, "--cores", "2", "--rerun-incomplete", *args, timeout=900)
    assert again.returncode == 0, tail(again)
    runs = _runs(f"sqlite:///{db}")
    assert "RUNNING" not in {r.info.status for r in runs}
    old = [r for r in runs if r.data.tags.get("invocation") == killed_inv]
    assert "KILLED" in {r.info.status for r in old}  # the parent at least, and the jobs that were cut off
    assert {r.info.status for r in old if r.data.tags["stage"] == "pipeline"} == {"KILLED"}


def _hb_remote(mirror: str, *extra: str) -> list[str]:
    return ["--cores", "1", "--show-failed-logs", "--config", "scale=smoke", "studies=[human_baselines]",
            "data_source=remote", f"mirror={mirror}", "overrides={human_baselines: {try_origin: false}}", *extra]


def test_onerror_keeps_the_job_error_last_and_closes_parents_through_the_spool(tmp_path):
    """Finding 3: a job fails while the tracking store is down. Snakemake's output ends with the job's own error
    (no RestError, no traceback of the handler), and the FAILED status of the job's run and of the parent run are
    spooled; once a server answers on that address, the replay writes them."""
    work = copy_project(tmp_path / "work")
    (tmp_path / "empty").mkdir()
    port = free_port()
    env = clean_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{port}", ICML25_TRACKING_RETRIES="0")
    out = run_snakemake(work, *_hb_remote(str(tmp_path / "empty"), "--until", "human_baselines__download"),
                        env=env, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "not found in the directory mirror" in text
    assert "RestError" not in text and "Traceback" not in text.split("not found in the directory mirror")[-1]
    results = work / "results"
    ops = [json.loads(line) for j in spool.pending(results) for line in j.read_text().splitlines()]
    assert [o["status"] for o in ops if o["op"] == "set_terminated"] == ["FAILED", "FAILED"]  # job, parent
    handle = srv.start(backend_store_uri=f"sqlite:///{tmp_path / 'late' / 'mlflow.db'}",
                       artifacts_destination=str(tmp_path / "late" / "art"), port=port, workers=1,
                       log=tmp_path / "late.log")
    try:
        n = len(spool.pending(results))
        assert n >= 1 and spool.replay(results) == (n, 0)
        runs = _runs(handle.url)
    finally:
        srv.stop(handle.pgid)
    assert {(r.data.tags["stage"], r.info.status) for r in runs} == {("download", "FAILED"),
                                                                     ("pipeline", "FAILED")}


# -- 7. credentials ---------------------------------------------------------------------------------------

def test_rest_client_sends_standard_credentials_and_never_prints_them(tmp_path, monkeypatch):
    """Finding 7: MLFLOW_TRACKING_USERNAME/PASSWORD (basic) or MLFLOW_TRACKING_TOKEN (bearer) are sent, and
    credentials in a tracking URI never reach a message."""
    import http.server
    import threading

    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b'{"error_code": "UNAUTHENTICATED"}')

        def log_message(self, *a):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
        with pytest.raises(RestError) as err:
            RestTracking(f"http://127.0.0.1:{port}", retries=0).experiment_id("x")
        assert seen[-1] == "Basic YWxpY2U6czNjcmV0" and err.value.status == 401 and not err.value.outage
        monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
        monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok123")
        with pytest.raises(RestError):
            RestTracking(f"http://127.0.0.1:{port}", retries=0).experiment_id("x")
        assert seen[-1] == "Bearer tok123"
        monkeypatch.delenv("MLFLOW_TRACKING_TOKEN")
        with pytest.raises(RestError) as err:
            RestTracking(f"http://bob:hunter2@127.0.0.1:{port}", retries=0).experiment_id("x")
        assert seen[-1] == "Basic Ym9iOmh1bnRlcjI=" and "hunter2" not in str(err.value)
    finally:
        httpd.shutdown()
    dead = f"http://bob:hunter2@127.0.0.1:{free_port()}"
    with pytest.raises(RestError) as err:
        RestTracking(dead, retries=0).experiment_id("x")
    assert "hunter2" not in str(err.value) and err.value.outage
    assert redact(f"uri {dead}/api and https://u:p@h/x") == f"uri http://***@127.0.0.1:{dead.rsplit(':', 1)[1]}/api " \
                                                            "and https://***@h/x"


def test_pipeline_never_prints_credentials_of_the_tracking_uri(tmp_path):
    """Finding 7: a tracking URI with a password, unreachable: neither Snakemake's output nor any job log
    contains the password."""
    work = copy_project(tmp_path / "work")
    (tmp_path / "empty").mkdir()
    env = clean_env(MLFLOW_TRACKING_URI=f"http://bob:hunter2@127.0.0.1:{free_port()}", ICML25_TRACKING_RETRIES="0")
    out = run_snakemake(work, *_hb_remote(str(tmp_path / "empty"), "--until", "human_baselines__download"),
                        env=env, timeout=300)
    logs = "".join(p.read_text(errors="replace") for p in (work / "results").rglob("*.log"))
    assert "unreachable" in out.stdout + out.stderr + logs  # the outage was met and reported
    assert "hunter2" not in out.stdout + out.stderr + logs


# -- 8. quoting -------------------------------------------------------------------------------------------

def test_mirror_value_cannot_inject_a_shell_command(tmp_path):
    """Finding 8: ``mirror=<dir>; touch <tmp>/PWNED #`` stays one argument of the stage command."""
    work = copy_project(tmp_path / "work")
    pwned = tmp_path / "PWNED"
    mirror = f"{tmp_path}/x; touch {pwned} #"
    out = run_snakemake(work, *_hb_remote(mirror, "--until", "human_baselines__download"), timeout=300)
    assert out.returncode != 0  # the mirror does not exist
    assert not pwned.exists()
    log = (work / "results" / "smoke" / "human_baselines" / "logs" / "download.log").read_text()
    assert "not found in the directory mirror" in log and "touch" in log  # the whole value reached the job


# -- 6. ROMS files changed or corrupt after download --------------------------------------------------------

@pytest.fixture(scope="module")
def roms_smoke(tmp_path_factory):
    """Two smoke-scale ROMS history files written by the coastalbench download stage (with raw/manifest.csv)."""
    from icml25.core.cli import stage_main
    from icml25.studies.coastalbench.__main__ import STAGES
    from icml25.studies.coastalbench.config import Config

    r = tmp_path_factory.mktemp("roms") / "coastalbench"
    his = [r / "raw" / f"ocean_his_2008010{d}.nc" for d in (2, 3)]
    assert stage_main("coastalbench", Config, STAGES, ["download", "--out", str(r / "raw/manifest.csv"),
                      str(r / "raw/preview"), *map(str, his), "--scale", "smoke", "--no-track"]) == 0
    return r, his


def _preprocess(r: Path, his: list[Path], work: Path) -> tuple[int, str, Path]:
    """The preprocess stage in a subprocess (as a job runs it) on copies of the raw files under ``work``."""
    import shutil

    raw = work / "raw"
    shutil.copytree(r / "raw", raw)
    p = work / "processed"
    outs = [p / "channels.json", p / "stats.json", p / "grid.npz", p / "ingest_checks.json",
            *(p / "shards" / f"{h.stem.rsplit('_', 1)[1]}.npy" for h in his)]
    out = subprocess.run([sys.executable, "-m", "icml25.studies.coastalbench", "preprocess", "--scale", "smoke",
                          "--no-track", "--in", str(raw / "manifest.csv"), str(raw / "preview"),
                          *(str(raw / h.name) for h in his), "--out", *map(str, outs)],
                         capture_output=True, text=True, timeout=300, env=clean_env())
    return out.returncode, out.stderr, p


def test_roms_file_changed_after_download_fails_on_its_recorded_hash(roms_smoke, tmp_path):
    """Finding 6: ``pm`` multiplied by 10 after download (the grid spacing silently 10x smaller): preprocess
    re-checks the hashes recorded at download and fails naming the file; nothing is written."""
    import netCDF4

    import shutil

    r, his = roms_smoke
    base = tmp_path / "base"
    shutil.copytree(r / "raw", base / "raw")
    with netCDF4.Dataset(base / "raw" / his[1].name, "a") as ds:
        ds.variables["pm"][:] = ds.variables["pm"][:] * 10
    rc, err, processed = _preprocess(base, his, tmp_path / "w")
    assert rc != 0
    last = err.strip().splitlines()[-1]
    assert f"{his[1].name}: sha256" in last and "recorded at download" in last, err[-2000:]
    assert not processed.exists() or not any(processed.rglob("*.npy"))


def test_roms_corrupt_compressed_chunk_fails_naming_file_and_variable(roms_smoke, tmp_path):
    """Finding 6: bytes flipped inside a compressed chunk of ``temp`` (corrupt at the source, so its recorded hash
    matches): the bare ``NetCDF: HDF error`` becomes an error naming the file and the variable, and no shard is
    left behind."""
    import hashlib
    import shutil

    import h5py

    r, his = roms_smoke
    base = tmp_path / "base"
    shutil.copytree(r / "raw", base / "raw")
    victim = base / "raw" / his[1].name
    with h5py.File(victim, "r") as f:
        info = f["temp"].id.get_chunk_info(0)
    with open(victim, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        chunk = fh.read(16)
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(bytes(b ^ 0xFF for b in chunk))
    listing = base / "raw" / "manifest.csv"
    lines = listing.read_text().splitlines()
    digest = hashlib.sha256(victim.read_bytes()).hexdigest()
    listing.write_text("\n".join(
        f"{victim.name},{digest},{victim.stat().st_size}" if ln.startswith(victim.name + ",") else ln
        for ln in lines) + "\n")
    rc, err, processed = _preprocess(base, his, tmp_path / "w")
    assert rc != 0
    last = err.strip().splitlines()[-1]
    # one line naming the file and the variable: the direct record reader (RomsRecords) says
    # "<file> record k: reading 'temp' failed", the lazy dataset path "<file>: variable 'temp' cannot be read"
    assert re.search(rf"{re.escape(victim.name)}(: variable| record \d+: reading) 'temp'", last), err[-3000:]
    assert not processed.exists() or not any(processed.rglob("*.npy"))


# -- 9. human_baselines inputs --------------------------------------------------------------------------------

def _xlsx_with(tmp_path: Path, name: str, parts: dict[str, bytes]) -> Path:
    import zipfile

    path = tmp_path / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for part, data in parts.items():
            z.writestr(part, data)
    return path


def test_workbook_zip_bomb_is_capped(tmp_path):
    """Finding 9: a workbook whose part inflates to 200 MB (a few hundred KB zipped) is refused at the cap;
    the reading process stays far below the inflated size."""
    import zipfile

    bomb = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("xl/workbook.xml", "w", force_zip64=True) as fh:
            for _ in range(200):
                fh.write(b" " * (1 << 20))
    assert bomb.stat().st_size < 2_000_000
    code = ("import sys\nfrom icml25.studies.human_baselines.workbook import read_workbook\n"
            "try:\n    read_workbook(sys.argv[1])\nexcept ValueError as e:\n    print(e)\n"
            "print(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')))")
    # VmHWM (peak RSS of this process image, kB); ru_maxrss would include the forking pytest process
    out = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True, timeout=120)
    message, peak_kb = out.stdout.strip().splitlines()
    assert "bomb.xlsx: part 'xl/workbook.xml' declares 209715200 bytes unzipped" in message, out.stderr
    assert int(peak_kb) < 200_000  # KB: well under the 200 MB the part would inflate to


def test_workbook_bad_xml_and_corrupt_entry_name_the_file_and_part(tmp_path):
    """Finding 9: malformed XML and a corrupt compressed entry raise WorkbookSchemaError naming file and part."""
    import zipfile

    from icml25.studies.human_baselines.synthetic import make_synthetic_workbook
    from icml25.studies.human_baselines.workbook import WorkbookSchemaError, read_workbook

    bad = _xlsx_with(tmp_path, "bad.xlsx", {"xl/workbook.xml": b"<workbook><sheets>"})
    with pytest.raises(WorkbookSchemaError, match=r"bad.xlsx: part 'xl/workbook.xml' is not well-formed XML"):
        read_workbook(bad)
    dtd = _xlsx_with(tmp_path, "dtd.xlsx", {"xl/workbook.xml": b'<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>'})
    with pytest.raises(WorkbookSchemaError, match=r"dtd.xlsx: part 'xl/workbook.xml' declares a DTD"):
        read_workbook(dtd)
    good = tmp_path / "corrupt.xlsx"
    make_synthetic_workbook(good, seed=0)
    with zipfile.ZipFile(good) as z:
        info = z.getinfo("xl/worksheets/sheet1.xml")
    with open(good, "r+b") as fh:  # flip bytes in the middle of the sheet's compressed data
        fh.seek(info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2)
        fh.write(b"\x00\xff\x00\xff\x00\xff\x00\xff")
    with pytest.raises(WorkbookSchemaError, match=r"corrupt.xlsx: part 'xl/worksheets/sheet1.xml' is corrupt"):
        read_workbook(good)


def _checklist(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icml25.studies.human_baselines.checklist", *argv],
                          capture_output=True, text=True, timeout=120, env=clean_env())


def test_checklist_cli_bad_inputs_give_one_error_line(tmp_path):
    """Finding 9: binary CSV, a 4,300-digit integer, ``--literature abc`` (missing file and non-numeric file), an
    unwritable ``--json`` path, a 50 MB answer and a YAML alias bomb each give one ``error:`` line, exit 2,
    no traceback, and messages stay short."""
    good = tmp_path / "ok.yaml"
    good.write_text("power_analysis: Yes\n")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"item,answer\n\x00\x01\x02\xff\xfe")
    digits = tmp_path / "digits.yaml"
    digits.write_text("power_analysis: " + "9" * 4300 + "\n")
    more_digits = tmp_path / "more_digits.yaml"
    more_digits.write_text("power_analysis: " + "9" * 5000 + "\n")
    huge = tmp_path / "huge.csv"
    huge.write_text("item,answer\npower_analysis," + "x" * 50_000_000 + "\n")
    long_answer = tmp_path / "long.yaml"
    long_answer.write_text("power_analysis: " + "x" * 500_000 + "\n")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                    "power_analysis: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n")
    words = tmp_path / "words.csv"
    words.write_text("item,all_yes_pct\nPower analysis,abc\n")
    cases = {
        "binary": ([str(binary)], "bin.csv: not UTF-8 text"),
        "4300 digits": ([str(digits)], "digits.yaml: item power_analysis (1.8 Power analysis): answer 9999"),
        "5000 digits": ([str(more_digits)], "more_digits.yaml: unreadable value"),
        "50 MB answer": ([str(huge)], "huge.csv: 50000028 bytes, more than a checklist can be"),
        "long answer": ([str(long_answer)], "answer 'xxxxx"),
        "alias bomb": ([str(bomb)], "bomb.yaml: YAML aliases"),
        "--literature abc": ([str(good), "--literature", "abc"], "abc: no such file"),
        "--literature words": ([str(good), "--literature", str(words)], "words.csv:2: column all_yes_pct: not a "
                                                                          "number: 'abc'"),
        "--json unwritable": ([str(good), "--json", str(tmp_path / "no" / "such" / "dir" / "x.json")
                               if os.geteuid() != 0 else "/proc/version/x.json"], "--json"),
    }
    for name, (argv, expected) in cases.items():
        out = _checklist(*argv)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2, (name, out.stderr[-500:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (name, lines[:3])
        assert "Traceback" not in out.stderr and len(out.stderr) < 600, name
    nan = _checklist(str(good), "--min-score", "nan")
    assert nan.returncode == 2 and "--min-score: must be a share in [0, 1], got 'nan'" in nan.stderr
    assert _checklist(str(good), "--min-score", "0.05").returncode == 0  # 1/16 items met passes 0.05
    assert _checklist(str(good), "--min-score", "0.5").returncode == 1


# -- 10. coastalbench configuration the maths cannot honour -----------------------------------------------------

def test_vtransform1_with_hc_deeper_than_the_shallowest_water_fails_at_parse_naming_the_key():
    """Finding 10: Vtransform 1 with hc (5 m) below the shallowest water (1.9 m on the smoke grid) fails when
    the config is resolved (as the Snakefile does at parse time), naming sim.hc; hc = 1 m is accepted."""
    from icml25.core.config import ConfigError
    from icml25.core.workflow import resolve_study
    from icml25.studies.coastalbench.config import Config

    root = Path(__file__).resolve().parents[1]
    bad = {"scale": "smoke", "overrides": {"coastalbench": {"sim": {"vtransform": 1}}}}
    with pytest.raises((ConfigError, ValueError), match=r"sim.hc: Vtransform 1 needs hc <= min\(h\).*shallowest water of this grid is 1.9 m"):
        resolve_study("coastalbench", Config, bad, root)
    ok = {"scale": "smoke", "overrides": {"coastalbench": {"sim": {"vtransform": 1, "hc": 1.0}}}}
    assert resolve_study("coastalbench", Config, ok, root)["sim"]["hc"] == 1.0


def test_his_writer_checks_arguments_before_creating_the_file(tmp_path):
    """Finding 10: HisWriter rejects Vstretching 2, Vtransform 3 and (Vtransform 1, hc > min h) without leaving a
    file behind."""
    from icml25.studies.coastalbench.config import Sim
    from icml25.studies.coastalbench.roms import HisWriter
    from icml25.studies.coastalbench.simulator import make_sim_grid

    grid = make_sim_grid(Sim(nx=16, ny=16, n_levels=3))
    cases = {"Vstretching": ({"Vstretching": 2}, "Vstretching=2 is not supported"),
             "Vtransform": ({"Vtransform": 3}, "Vtransform=3 is not supported"),
             "hc": ({"Vtransform": 1, "hc": 50.0}, r"Vtransform 1 needs hc <= min\(h\)")}
    for name, (change, message) in cases.items():
        path = tmp_path / f"{name}.nc"
        with pytest.raises(ValueError, match=message):
            HisWriter(path, {**grid, **change}, ["zeta"])
        assert not path.exists(), name
    with HisWriter(tmp_path / "ok.nc", grid, ["zeta"]):
        pass
    assert (tmp_path / "ok.nc").exists()


def test_literal_config_fields_checked_at_run_time():
    """Finding 10: Literal-typed fields are checked when the config objects are built in code, not only from yaml
    (the pydantic models of main do it; this pins the behaviour)."""
    from icml25.studies.coastalbench.config import Config, Sim, Train

    with pytest.raises(ValueError, match=r"land_value\n.*Input should be 'fill' or 'zero'"):
        Sim(land_value="none")
    with pytest.raises(ValueError, match=r"vtransform\n.*Input should be 1 or 2"):
        Sim(vtransform=3)
    with pytest.raises(ValueError, match=r"arms.1\n.*Input should be 'vit', 'persistence'"):
        Config(seeds=(0,), arms=("vit", "vit_xl"))
    with pytest.raises(ValueError, match=r"device\n.*Input should be 'cpu', 'cuda' or 'auto'"):
        Config(seeds=(0,), arms=("vit",), train=Train(device="tpu"))
    assert Config(seeds=(0,), arms=("vit", "persistence")).sim.vtransform == 2


# -- 4. two clones on one store ------------------------------------------------------------------------------

def test_two_clones_on_one_store_keep_artifacts_beside_the_store(tmp_path):
    """Finding 4: clone A creates the experiment, clone B logs to the same SQLite store; both clones' artifacts
    land in ``<store dir>/mlartifacts``, none in either clone's results/ (B's used to go into A's)."""
    store_dir = tmp_path / "shared_store"
    uri = f"sqlite:///{store_dir / 'mlflow.db'}"
    code = ("import sys\nfrom pathlib import Path\nfrom icml25.core.tracking import stage_run\n"
            "Path('fig.txt').write_text(sys.argv[1])\n"
            "with stage_run('twoclones', 'report', results_dir='results') as run:\n"
            "    run.log_artifact('fig.txt', 'figures')\n")
    for clone in ("A", "B"):
        (tmp_path / clone).mkdir()
        out = subprocess.run([sys.executable, "-c", code, f"from {clone}"], cwd=tmp_path / clone,
                             env=clean_env(MLFLOW_TRACKING_URI=uri), capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
    figs = sorted(p.read_text() for p in (store_dir / "mlartifacts" / "twoclones").rglob("fig.txt"))
    assert figs == ["from A", "from B"]
    for clone in ("A", "B"):
        assert not list((tmp_path / clone).rglob("mlartifacts")), clone
    runs = _runs(uri)
    assert len(runs) == 2 and all(r.info.artifact_uri.startswith((store_dir / "mlartifacts").as_uri())
                                  for r in runs)


def test_deleting_a_studys_results_rebuilds_it_and_the_claims_table(tmp_path):
    """Issue 36.7: after ``rm -rf results/smoke/<slug>`` a plain ``snakemake`` rebuilds the study and then
    claims.md (each study's claims.json is a target of ``rule all``), instead of "Nothing to be done" with the
    stale rows of the deleted study left in claims.md."""
    proj = copy_project(tmp_path / "proj")
    scale_dir = proj / "results" / "smoke"
    scale_dir.mkdir(parents=True)
    for name in ("claims.md", "claims.csv", "claims.html", "claims_overview.png"):  # a finished earlier run
        (scale_dir / name).write_text("stale\n")
    out = run_snakemake(proj, "-n", "--cores", "1", "--config", "studies=[lfss]", "scale=smoke", timeout=300)
    assert out.returncode == 0, tail(out)
    text = out.stdout + out.stderr
    assert "Nothing to be done" not in text
    for rule in ("lfss__evaluate", "summary__claims"):
        assert re.search(rf"^rule {rule}:", text, re.M), tail(out)


_SLOW_STAGE = '''
import sys, time
from pathlib import Path
from icml25.core.cli import stage_main
from icml25.core.config import StudyConfig

class Config(StudyConfig):
    pass

def train(stage, run):
    time.sleep(6)  # the job is mid-way when its Snakemake is killed
    stage.output(0).write_text("complete-looking output")

sys.exit(stage_main("toy", Config, {"train": train}, sys.argv[1:], stage_keys={"train": ()}))
'''


def test_a_job_stops_quickly_without_outputs_when_its_snakemake_is_killed(tmp_path):
    """Issue 36.9: ``kill -9`` of Snakemake's own process. Before, the running job stalled ~20 s on the dead
    pipeline server, spooled, then wrote outputs as if complete. Now a job started by a Snakemake on this host
    ($ICML25_PARENT, exported by the Snakefile) stops within a second with one line and exit 75, writing nothing."""
    from icml25.core.cli import PARENT_EXIT, parent_alive, parent_token

    assert 'os.environ["ICML25_PARENT"] = parent_token()' in (Path(__file__).resolve().parents[1] /
                                                               "Snakefile").read_text()
    script = tmp_path / "toy.py"
    script.write_text(_SLOW_STAGE)
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    token = parent_token(parent.pid)
    assert parent_alive(token)
    out = tmp_path / "out.json"
    job = subprocess.Popen([sys.executable, str(script), "train", "--config-json", '{"seeds": [0]}', "--no-track",
                            "--out", str(out)], env=clean_env(ICML25_PARENT=token), stderr=subprocess.PIPE,
                           text=True)
    time.sleep(2.0)
    parent.kill()  # SIGKILL
    parent.wait()
    t0 = time.monotonic()
    _, err = job.communicate(timeout=30)
    assert job.returncode == PARENT_EXIT and time.monotonic() - t0 < 3.0
    assert not out.exists()
    assert "the Snakemake process that started this job" in err and "--rerun-incomplete" in err
    assert not parent_alive(token)
    # a job whose parent lives (or that no Snakemake started) runs to the end
    ok = subprocess.run([sys.executable, str(script), "train", "--config-json", '{"seeds": [0]}', "--no-track",
                         "--out", str(out)], env=clean_env(ICML25_PARENT=parent_token()), capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert out.read_text() == "complete-looking output"
