"""Shared fixtures: project copies, Snakemake runs under a hard timeout, the local smoke run, an MLflow tracking
server on loopback and the single-node SLURM cluster of tests/cluster/."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_DIR = ROOT / "tests" / "cluster"
CLUSTER_BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "srun", "scontrol", "munged")
#: The data mirror: a directory holding copies of the studies' remote files, each at the ``mirror_path`` of its
#: study's ``manifest.csv`` (e.g. ``kevinlwei/human-baselines/data/lit_review_data.xlsx``). Tests that exercise
#: the real download path or real files serve it on loopback; without it they skip. ``$ICML25_MIRROR`` points at
#: it; the default is ``../shared/mirror`` beside the checkout, where the project's CI and check tools keep it.
MIRROR = Path(os.environ.get("ICML25_MIRROR") or ROOT.parent / "shared" / "mirror")


def mirror_skip(what: str) -> str:
    """The skip reason of a test that needs ``what`` from the data mirror: what the mirror is and how to give it."""
    return (f"needs {what} from the data mirror (copies of the studies' remote files laid out by the manifests' "
            f"mirror_path; sha256 in each manifest.csv), not found at {MIRROR}: set ICML25_MIRROR=<dir> "
            "(default ../shared/mirror beside the checkout)")


def copy_project(dst: Path) -> Path:
    """The files a run needs (Snakefile, config, workflow, envs, src; no results) in ``dst``.

    Jobs import the installed ``icml25``; ``src`` is copied for files rules read by path (manifests)."""
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "Snakefile", dst / "Snakefile")
    for name in ("config", "workflow", "envs", "src"):
        shutil.copytree(ROOT / name, dst / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return dst


def _git_commit_copy(work: Path) -> None:
    """Make the project copy a git checkout with one commit, as a user's clone is: jobs import the copy's ``src``
    (PYTHONPATH) and record its commit (``git_sha``, ``mlflow.source.git.commit``), which the UI test reads."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "icml25 tests", "GIT_AUTHOR_EMAIL": "tests@localhost",
           "GIT_COMMITTER_NAME": "icml25 tests", "GIT_COMMITTER_EMAIL": "tests@localhost"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "smoke copy"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True, timeout=120)


def clean_env(**extra: str) -> dict[str, str]:
    """``os.environ`` without a caller's MLflow store or invocation id, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "ICML25_INVOCATION")}
    env.update(extra)
    return env


def run_snakemake(cwd: Path, *args: str, env: dict[str, str] | None = None,
                  timeout: int = 600) -> subprocess.CompletedProcess:
    """``snakemake ARGS`` in ``cwd`` under ``timeout -s KILL``: a hung run (e.g. a SLURM status command that
    never answers) fails the test instead of blocking CI."""
    cmd = ["timeout", "-s", "KILL", str(timeout), sys.executable, "-m", "snakemake", *args]
    return subprocess.run(cmd, cwd=cwd, env=env if env is not None else clean_env(), capture_output=True,
                          text=True)


def tail(out: subprocess.CompletedProcess, n: int = 6000) -> str:
    return f"exit {out.returncode}\n{(out.stdout + out.stderr)[-n:]}"


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def http_server():
    """Serve directories over http on 127.0.0.1 with `python -m http.server`: ``http_server(dir) -> base URL``;
    every server is stopped after the test."""
    import time
    import urllib.request

    procs = []

    def start(directory: Path) -> str:
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                                 "--directory", str(directory)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        procs.append(proc)
        base = f"http://127.0.0.1:{port}/"
        for _ in range(200):
            try:
                urllib.request.urlopen(base, timeout=1).close()
                return base
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("http.server did not start")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(5)


def _shared_dir(tmp_path_factory) -> Path:
    """A directory shared by all pytest-xdist workers of this session (the plain session's base temp without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke pipeline of every implemented study, run locally once per session (SQLite store in
    ``results/mlflow.db``); returns the project copy it ran in. Tests must not change its results.

    Under pytest-xdist the first worker that needs it runs it while holding a file lock; the others wait and reuse
    the finished copy (a failed run is recorded, so every worker fails with its log instead of running it again).
    ``ICML25_SMOKE_RUN=<dir>`` reuses the project copy of an earlier session's finished run (when iterating on
    tests that only read it)."""
    from filelock import FileLock

    reuse = os.environ.get("ICML25_SMOKE_RUN")
    if reuse:
        assert (Path(reuse) / "results" / "smoke" / "claims.md").exists(), f"ICML25_SMOKE_RUN={reuse}: no finished run there"
        return Path(reuse)
    shared = _shared_dir(tmp_path_factory)
    work, done, failed = shared / "smoke_local", shared / "smoke_local.done", shared / "smoke_local.failed"
    with FileLock(str(shared / "smoke_local.lock")):
        if not done.exists() and not failed.exists():
            if work.exists():
                shutil.rmtree(work)
            _git_commit_copy(copy_project(work))
            out = run_snakemake(work, "--cores", "2", "--config", "scale=smoke", timeout=2600)
            (done if out.returncode == 0 else failed).write_text(tail(out))
    assert not failed.exists(), failed.read_text()
    return work


@pytest.fixture
def mlflow_server(tmp_path) -> Iterator:
    """A real ``mlflow server`` on loopback (SQLite backend, proxied artifacts) started by
    ``icml25.core.server``; yields ``.url``, ``.pgid`` and ``.store`` (its directory) and stops its process
    group afterwards."""
    from icml25.core import server as srv

    store = tmp_path / "mlflow-server"
    handle = srv.start(backend_store_uri=f"sqlite:///{store / 'mlflow.db'}",
                       artifacts_destination=str(store / "artifacts"), host="127.0.0.1", port=free_port(),
                       log=tmp_path / "mlflow-server.log")
    try:
        yield SimpleNamespace(url=handle.url, pgid=handle.pgid, store=store)
    finally:
        srv.stop(handle.pgid)


def _missing_cluster_binaries() -> list[str]:
    return [b for b in CLUSTER_BINARIES if not (shutil.which(b) or Path("/usr/sbin", b).exists())]


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> Iterator[dict[str, str]]:
    """The single-node SLURM cluster (tests/cluster/start.sh) for this session; yields the environment its
    clients need (SLURM_CONF, PATH). Skips only when the SLURM/munge binaries are absent or without root."""
    missing = _missing_cluster_binaries()
    if missing:
        pytest.skip(f"SLURM test cluster needs {missing} (apt-get install slurmctld slurmd slurm-client munge; "
                    "see .ci/services.sh)")
    if os.geteuid() != 0:
        pytest.skip("the SLURM test cluster needs root (munged runs as user munge, slurmd launches jobs)")
    run_dir = tmp_path_factory.mktemp("cluster")
    env = clean_env(ICML25_SLURMCTLD_PORT=str(free_port()), ICML25_SLURMD_PORT=str(free_port()))
    out = subprocess.run([str(CLUSTER_DIR / "start.sh"), str(run_dir)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, f"tests/cluster/start.sh failed:\n{out.stdout}\n{out.stderr}"
    cluster_env = {"SLURM_CONF": str(run_dir / "slurm.conf"), "PATH": f"{run_dir / 'bin'}:{os.environ['PATH']}",
                   "ICML25_CLUSTER_RUN": str(run_dir)}
    try:
        yield cluster_env
    finally:
        subprocess.run([str(CLUSTER_DIR / "stop.sh"), str(run_dir)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def project_copy(tmp_path) -> Callable[[str], Path]:
    """``project_copy(name)``: a fresh copy of the workflow files under ``tmp_path/name``."""
    return lambda name: copy_project(tmp_path / name)


def mlflow_runs(uri: str) -> dict[str, list]:
    """Every run of every ``icml25/*`` experiment in the store at ``uri``: {experiment name: [Run]}."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    return {exp.name: client.search_runs([exp.experiment_id], max_results=10000)
            for exp in client.search_experiments() if exp.name.startswith("icml25/")}


def job_runs(runs: dict[str, list]) -> dict[str, list]:
    """The runs of stage jobs (no per-invocation parent runs ``pipeline/...``, no per-seed/per-arm runs nested
    under a job's run)."""
    return {name: [r for r in rs if r.data.tags.get("stage") != "pipeline" and r.data.tags.get("run_level") != "nested"]
            for name, rs in runs.items()}


def run_names(runs: dict[str, list]) -> dict[str, list[str]]:
    """{experiment: sorted run names of stage jobs}."""
    return {name: sorted(r.info.run_name for r in rs) for name, rs in job_runs(runs).items()}
