"""The pipeline on a real (single-node) SLURM cluster: tests/cluster/start.sh, the slurm-local profile, the SLURM
executor plugin, jobs logging to an MLflow tracking server, and results equal to a local run's.

What a single node cannot show (several nodes, a shared network file system, slurmdbd accounting, real GPUs)
is listed in docs/slurm.md.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import CLUSTER_DIR, ROOT, clean_env, free_port, job_runs, mlflow_runs, run_names, run_snakemake, tail
from icml25.studies import STUDIES

cluster = pytest.mark.cluster

PROFILE = "workflow/profiles/slurm-local"
GPU_RULE = "summary__claims"  # gets the fake GPU (`gpu: 1` -> sbatch --gpus=1) to prove GPU rules schedule
# The SLURM path is proven on a representative set rather than all 19 studies twice (the local smoke run covers
# every study): cat_iv (a download stage: packaged files hash-checked and written with their pins), fedecado (many
# arms and seed-chunked train jobs: the most jobs of any study) and kernel_adaptation (torch training jobs, a
# paper-scale GPU request in its rules). Local-vs-SLURM equality is checked on these.
SLURM_STUDIES = ("cat_iv", "fedecado", "kernel_adaptation")


def _scontrol_job(job_id: str, env: dict[str, str]) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("scale", ["smoke", "paper"])
def test_slurm_profile_builds_submittable_jobs(scale, tmp_path):
    """With the cluster profile the DAG builds offline (no cluster needed), and every job's resources are ones
    the SLURM executor plugin can submit: no `slurm_extra` options it manages itself (it refuses --gres, --mem,
    --time, ...; GPUs are `gpu: N`) and no quoted empty string (which sbatch would take for a script name)."""
    from snakemake_executor_plugin_slurm.validation import get_forbidden_slurm_options

    from conftest import copy_project

    work = copy_project(tmp_path / "work")
    out = run_snakemake(work, "-n", "--profile", "workflow/profiles/slurm", "--config", f"scale={scale}",
                        timeout=300)
    assert out.returncode == 0, tail(out)
    text = out.stdout + out.stderr
    assert "Using profile workflow/profiles/slurm" in text
    assert all(f"{slug}__train" in text for slug in STUDIES)
    bad = []
    for rule, resources in re.findall(r"^rule (\S+):\n(?:    .*\n)*?    resources: (.*)$", text, re.M):
        extra = re.search(r"slurm_extra=(.*?)(?:, \w+=|$)", resources)
        if not extra:
            continue
        value = extra.group(1).strip()
        if value in ("''", '""'):
            bad.append(f"{rule}: slurm_extra={value} (leave the resource out instead)")
        bad += [f"{rule}: slurm_extra={value} sets {what}" for pattern, what in get_forbidden_slurm_options().items()
                if re.search(pattern, value)]
    assert not bad, sorted(set(bad))


@pytest.mark.parametrize("name", ["default", "slurm", "slurm-local"])
def test_profiles_are_valid(name):
    settings = yaml.safe_load((ROOT / "workflow" / "profiles" / name / "config.yaml").read_text())
    assert isinstance(settings, dict) and settings
    assert "cpus_per_task" not in settings.get("default-resources", {})  # would override every rule's threads
    if name.startswith("slurm"):
        assert settings["executor"] == "slurm"
    if name == "slurm-local":  # no slurmdbd on the test cluster: squeue, with a first check well below MinJobAge
        assert settings["slurm-status-command"] == "squeue"
        conf = (CLUSTER_DIR / "slurm.conf.in").read_text()
        min_job_age = int(re.search(r"^MinJobAge=(\d+)", conf, re.M).group(1))
        assert min_job_age >= 3 * settings["slurm-init-seconds-before-status-checks"]


@pytest.fixture(scope="module")
def slurm_smoke(slurm_cluster, tmp_path_factory):
    """The smoke pipeline submitted to the test cluster with the slurm-local profile, logging to a real MLflow
    server on loopback; returns (project copy, snakemake output, server url, cluster env)."""
    from icml25.core import server as srv

    from conftest import copy_project

    work = copy_project(tmp_path_factory.mktemp("smoke_slurm"))
    store = work / "server"
    server = srv.start(backend_store_uri=f"sqlite:///{store / 'mlflow.db'}",
                       artifacts_destination=str(store / "artifacts"), host="127.0.0.1", port=free_port(),
                       log=store.parent / "mlflow-server.log")
    env = clean_env(MLFLOW_TRACKING_URI=server.url, **slurm_cluster)
    try:
        out = run_snakemake(work, "--profile", PROFILE, "--config", "scale=smoke",
                            f"studies=[{','.join(SLURM_STUDIES)}]", "--set-resources", f"{GPU_RULE}:gpu=1",
                            env=env, timeout=1500)
        runs = mlflow_runs(server.url)
    finally:
        srv.stop(server.pgid)
    return work, out, runs, env


@cluster
@pytest.mark.slow
def test_smoke_pipeline_runs_on_slurm(slurm_smoke):
    work, out, runs, env = slurm_smoke
    assert out.returncode == 0, tail(out)
    for slug in SLURM_STUDIES:
        assert (work / "results" / "smoke" / slug / "claims.json").exists()
    # Nothing fell back to a local store: the jobs logged to the server only.
    assert not (work / "results" / "mlflow.db").exists()


@cluster
@pytest.mark.slow
def test_every_job_ran_under_slurm(slurm_smoke):
    """One MLflow run per submitted SLURM job, each tagged with its job id, and SLURM saw them all complete."""
    work, out, runs, env = slurm_smoke
    assert out.returncode == 0, tail(out)
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", out.stdout + out.stderr)
    assert submitted, tail(out)
    jobs = [r for rs in job_runs(runs).values() for r in rs]
    tagged = [r.data.tags.get("slurm_job_id") for r in jobs]
    assert None not in tagged, [r.info.run_name for r in jobs if "slurm_job_id" not in r.data.tags]
    assert sorted(tagged, key=int) == sorted(submitted, key=int)
    assert {r.info.status for r in jobs} == {"FINISHED"}
    assert {f"icml25/{slug}" for slug in SLURM_STUDIES} | {"icml25/summary"} <= set(runs)
    squeue = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%T"], env=env,
                            capture_output=True, text=True, timeout=30)
    states = dict(line.split("|") for line in squeue.stdout.split())
    assert all(states.get(j) == "COMPLETED" for j in submitted), states


@cluster
@pytest.mark.slow
def test_gpu_rule_got_the_fake_gpu(slurm_smoke):
    """`gpu: 1` became `sbatch --gpus=1` and the job was scheduled on the node's (fake) GPU."""
    work, out, runs, env = slurm_smoke
    assert out.returncode == 0, tail(out)
    (summary,) = [r for r in job_runs(runs)["icml25/summary"]]
    info = _scontrol_job(summary.data.tags["slurm_job_id"], env)
    assert re.search(r"TresPerJob=gres[:/]gpu[:=]1", info), info
    assert "JobState=COMPLETED" in info


_MEASURED = ("memory", "memory_ratio", "runtime_s", "seconds", "peak_traced_bytes", "ratio",
             "wall_ratio")  # traced memory, run times, wall-clock ratios


def _computed(doc):
    """A claims document without the fields that measure the run itself (traced memory, run times), which differ
    between any two runs; everything computed from the data must be identical."""
    if isinstance(doc, dict):
        return {k: _computed(v) for k, v in doc.items() if k not in _MEASURED}
    if isinstance(doc, list):
        return [_computed(v) for v in doc]
    return doc


@cluster
@pytest.mark.slow
def test_slurm_results_equal_local_results(slurm_smoke, smoke_run):
    """Same claims (verdicts and metrics) and the same MLflow runs as the local smoke run, study by study."""
    work, out, runs, env = slurm_smoke
    assert out.returncode == 0, tail(out)
    for slug in SLURM_STUDIES:
        slurm_doc = json.loads((work / "results" / "smoke" / slug / "claims.json").read_text())
        local_doc = json.loads((smoke_run / "results" / "smoke" / slug / "claims.json").read_text())
        assert [c["verdict"] for c in slurm_doc["claims"]] == [c["verdict"] for c in local_doc["claims"]]
        assert _computed(slurm_doc) == _computed(local_doc)

    def verdicts(csv: Path) -> list[list[str]]:  # rows of these studies, in a fixed order (the two runs select
        return sorted(line.split(",")[:6] for line in csv.read_text().splitlines()  # the studies differently)
                      if line.split(",")[0] in ("study", *SLURM_STUDIES))

    assert verdicts(work / "results" / "smoke" / "claims.csv") == verdicts(
        smoke_run / "results" / "smoke" / "claims.csv")
    local_runs = mlflow_runs(f"sqlite:///{smoke_run / 'results' / 'mlflow.db'}")
    wanted = {f"icml25/{slug}" for slug in SLURM_STUDIES}
    assert {k: v for k, v in run_names(runs).items() if k in wanted} == {
        k: v for k, v in run_names(local_runs).items() if k in wanted}


@cluster
@pytest.mark.slow
def test_start_stop_leaves_nothing_running(tmp_path):
    """stop.sh ends, by pid, every daemon start.sh started (a second cluster beside the session's one)."""
    from conftest import _missing_cluster_binaries

    if _missing_cluster_binaries() or os.geteuid() != 0:
        pytest.skip("SLURM/munge binaries absent or not root (see .ci/services.sh)")
    env = clean_env(ICML25_SLURMCTLD_PORT=str(free_port()), ICML25_SLURMD_PORT=str(free_port()))
    start = subprocess.run([str(CLUSTER_DIR / "start.sh"), str(tmp_path)], env=env, capture_output=True,
                           text=True, timeout=120)
    pids = {p.stem: int(p.read_text()) for p in (tmp_path / "pids").glob("*.pid")}
    try:
        assert start.returncode == 0, start.stderr
        assert {"slurmctld", "slurmd"} <= set(pids)
        assert all(_alive(pid) for pid in pids.values()), pids
        sinfo = subprocess.run([str(tmp_path / "bin" / "sinfo"), "-h", "-o", "%n %t"], capture_output=True,
                               text=True, timeout=30)
        assert sinfo.stdout.split() == ["localhost", "idle"]
    finally:
        stop = subprocess.run([str(CLUSTER_DIR / "stop.sh"), str(tmp_path)], capture_output=True, text=True,
                              timeout=120)
    assert stop.returncode == 0, stop.stderr
    for name, pid in pids.items():
        assert not _alive(pid), f"{name} ({pid}) still running after stop.sh"


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a container's init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
