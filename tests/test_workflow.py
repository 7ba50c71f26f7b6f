"""The Snakemake workflow as users run it: lint, dry runs at every scale, parse-time config errors, the whole
smoke pipeline of every implemented study (tracking, second run, report, a killed job), scales that coexist in
``results/<scale>/``, and reruns that follow the config keys a stage reads."""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, copy_project, run_snakemake

from icml25.core.claims import INCONCLUSIVE, load_claims
from icml25.studies import STUDIES

ROOT = Path(__file__).resolve().parents[1]


def smk(*args: str, cwd: Path = ROOT, timeout: int = 900) -> subprocess.CompletedProcess:
    """``snakemake ARGS`` in ``cwd`` with a clean tracking environment, killed after ``timeout`` s."""
    return run_snakemake(cwd, *args, timeout=timeout)


def test_lint_clean():
    out = smk("--lint")
    assert out.returncode == 0 and "Congratulations" in out.stdout + out.stderr, out.stdout + out.stderr


def test_snakefmt_clean():
    out = subprocess.run(["snakefmt", "--check", "Snakefile", "workflow/rules"], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("scale", ["smoke", "default", "paper"])
def test_dry_run_builds_dag(scale, tmp_path):
    out = smk("-n", "--config", f"scale={scale}", cwd=copy_project(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    for slug in STUDIES:
        assert f"{slug}__train" in text and f"{slug}__evaluate" in text
    assert "summary__claims" in text


@pytest.mark.parametrize("override, message", [
    ("scale=huge", "scale"),
    ("studies=[nope]", "studies"),
    ("data_source=ftp", "data_source"),
    ("overrides={cat_iv: {bogus: 1}}", "cat_iv.bogus: unknown key"),
    ("overrides={cat_iv: {n: [5]}}", "cat_iv"),
])
def test_bad_config_fails_at_parse_naming_the_key(override, message, tmp_path):
    out = smk("-n", "--config", override, cwd=copy_project(tmp_path))
    assert out.returncode != 0
    assert message in out.stdout + out.stderr, (out.stdout + out.stderr)[-2000:]


@pytest.fixture(scope="module")
def smoke(smoke_run):
    """The whole smoke pipeline of every implemented study (conftest's session run, shared with other tests)."""
    return smoke_run, None


@pytest.mark.slow
def test_smoke_pipeline_writes_computed_claims(smoke):
    work, _ = smoke
    md = (work / "results" / "smoke" / "claims.md").read_text()
    assert md.splitlines()[2].startswith("![studies × claims")  # the overview figure opens the table
    assert any(line.startswith("**on the paper's data: paper claims ") for line in md.splitlines())
    assert (work / "results" / "smoke" / "claims_overview.png").read_bytes()[:4] == b"\x89PNG"
    failed = []
    for slug in STUDIES:
        doc = load_claims(work / "results" / "smoke" / slug / "claims.json")
        assert doc["scale"] == "smoke" and doc["claims"] and doc["paper"]["title"]
        # smoke runs have < 3 seeds: every seed-based claim is inconclusive; checks still hold or fail
        assert all(c["verdict"] == INCONCLUSIVE for c in doc["claims"]
                   if c["kind"] == "claim" and c["evidence"]["unit"] == "seeds"), doc["claims"]
        # a claim counted in other units (functions, prompts) is decided only on >= 3 of them
        assert all(c["evidence"]["n"] >= 3 for c in doc["claims"]
                   if c["kind"] == "claim" and c["verdict"] != INCONCLUSIVE), doc["claims"]
        failed += [c["id"] for c in doc["claims"] if c["kind"] == "check" and c["holds"] is False]
        has_claims = any(c["kind"] == "claim" and c.get("status") != "untested" for c in doc["claims"])
        assert (f"### {slug} — {doc['paper']['title']}" in md) if has_claims else (f"### {slug} — checks" in md)
    assert failed == [], failed
    csv = (work / "results" / "smoke" / "claims.csv").read_text().splitlines()
    assert csv[0].startswith("study,kind,claim,source,title,verdict,status,holds,tier")
    assert len(csv) - 1 == sum(len(load_claims(work / "results" / "smoke" / s / "claims.json")["claims"])
                               for s in STUDIES)


@pytest.mark.slow
def test_smoke_pipeline_tracks_every_job_under_a_parent(smoke):
    from mlflow.tracking import MlflowClient

    work, _ = smoke
    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'results' / 'mlflow.db'}")
    for slug in STUDIES:
        exp = client.get_experiment_by_name(f"icml25/{slug}")
        assert exp.artifact_location.startswith((work / "results" / "mlartifacts").as_uri())
        runs = client.search_runs([exp.experiment_id], max_results=1000)
        parents = [r for r in runs if r.data.tags.get("stage") == "pipeline"]
        children = [r for r in runs if r.data.tags.get("run_level") == "job"]  # not the per-seed/arm runs
        assert {r.data.tags.get("run_level") for r in runs} <= {None, "job", "nested"}
        assert len(runs) == len(parents) + len(children) + sum(r.data.tags.get("run_level") == "nested"
                                                               for r in runs)
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        jobs = list((work / "results" / "smoke" / slug / "benchmarks").glob("*.tsv"))
        assert len(children) == len(jobs), (sorted(r.info.run_name for r in children), sorted(j.name for j in jobs))
        stages = {r.data.tags["stage"] for r in children}
        assert {"preprocess", "train", "evaluate"} <= stages
        for r in children:
            assert r.info.status == "FINISHED"
            assert r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
            assert r.data.tags["snakemake_rule"] == f"{slug}__{r.data.tags['stage']}"
            assert r.data.tags["scale"] == "smoke" and r.data.tags["config_hash"] and r.data.tags["git_sha"]
            assert r.data.params, f"{r.info.run_name}: no params"
            assert r.data.metrics["job/startup_cpu_s"] > 0 and r.data.metrics["job/work_cpu_s"] >= 0
        evaluate = next(r for r in children if r.data.tags["stage"] == "evaluate")
        per_arm = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == evaluate.info.run_id]
        assert any(k.startswith("eval/") for r in (evaluate, *per_arm) for k in r.data.metrics)
        artifacts = [a.path for a in client.list_artifacts(evaluate.info.run_id)]
        assert any(a.endswith("claims.json") for a in artifacts), artifacts
    summary = client.get_experiment_by_name("icml25/summary")
    assert client.search_runs([summary.experiment_id])


def test_pipeline_benchmark_splits_each_study_into_work_and_startup(smoke):
    """benchmarks/pipeline.py --read: every stage job logged its CPU split, and per study the split adds up to the
    jobs' CPU time (each job's own total from its log)."""
    work, _ = smoke
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import pipeline
    finally:
        sys.path.pop(0)
    rows = [r for r in pipeline.read_benchmarks(work / "results" / "smoke") if r["study"] != "summary"]
    missing = [r for r in rows if r["work_cpu_s"] != r["work_cpu_s"]]
    assert not missing, missing[:3]
    # each job's CPU is its own total (interpreter start to exit), which holds the work inside the stage function
    for log in (work / "results" / "smoke").glob("*/logs/*.log"):
        done, total = pipeline.job_cpu(log)
        if done == done:
            assert total == total and total >= done > -1, (log, done, total)
    table = {r["study"]: r for r in pipeline.study_table(rows)}
    assert set(table) == set(STUDIES)
    for slug, r in table.items():
        cpu = sum(x["cpu_s"] for x in rows if x["study"] == slug)
        assert r["cpu_s"] == pytest.approx(cpu) and r["work_s"] + r["startup_s"] == pytest.approx(cpu), slug
        assert 0 < r["share"] < 1, (slug, r)


@pytest.mark.slow
def test_smoke_pipeline_metrics_compare_across_seeds_and_studies(smoke):
    """The MLflow conventions of docs/DESIGN.md ("Runs and metric keys"), checked on every study's runs: keys
    are ``<stage group>/<metric>`` with no seed or arm inside; a train job looping over seeds has one nested run
    per seed tagged ``seed``, all with the same keys; evaluate has one nested run per arm; train runs carry
    their model; the experiments open in MLflow's training view; no empty Default experiment is shown."""
    import re

    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    from icml25.core.tracking import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG

    work, _ = smoke
    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'results' / 'mlflow.db'}")
    active = {e.name: e for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)}
    assert "Default" not in active, sorted(active)
    keys: dict[str, set[str]] = {}
    for slug in STUDIES:
        exp = active[f"icml25/{slug}"]
        assert exp.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
        runs = client.search_runs([exp.experiment_id], max_results=1000)
        arms = {r.data.tags["arm"] for r in runs if r.data.tags.get("arm")}
        for r in runs:
            stage = r.data.tags["stage"]
            for key in r.data.metrics:
                group, _, name = key.partition("/")
                assert name and group in {"train", "eval", "preprocess", "download", "prepare", "job", "verdicts",
                                          "claims", stage}, (slug, r.info.run_name, key)
                assert not re.search(r"(^|/|_)s(eed)?\d+(/|$)", key), (slug, r.info.run_name, key)  # no seed
                assert not any(arm in key.split("/") for arm in arms), (slug, r.info.run_name, key)  # no arm
            keys.setdefault(slug, set()).update(k for k in r.data.metrics if k.startswith("train/"))
        trains = [r for r in runs if r.data.tags["stage"] == "train" and r.data.tags["run_level"] == "job"]
        assert trains
        for job in trains:
            nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == job.info.run_id]
            if "seed" in job.data.tags:  # a one-seed job is that seed's run
                assert not nested
            elif nested:  # one run per seed, the same keys in each
                assert all(r.data.tags["arm"] == job.data.tags["arm"] for r in nested)
                assert sorted(int(r.data.tags["seed"]) for r in nested) == sorted(
                    {int(r.data.tags["seed"]) for r in nested}) and len(nested) >= 2
                assert len({frozenset(r.data.metrics) for r in nested}) == 1, job.info.run_name
            assert job.data.tags["model_sha256"] and job.data.tags["model_logged"] in ("artifact", "path") \
                or all(r.data.tags.get("model_sha256") for r in nested)
        evaluate = next(r for r in runs if r.data.tags["stage"] == "evaluate" and r.data.tags["run_level"] == "job")
        per_arm = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == evaluate.info.run_id]
        if slug != "human_baselines":  # its evaluate compares no arms
            assert len(per_arm) >= 2 and all(r.data.tags["arm"] for r in per_arm)
            assert all(any(k.startswith("eval/") for k in r.data.metrics) for r in per_arm)
    cat_iv_seeds = [r for r in client.search_runs([active["icml25/cat_iv"].experiment_id], max_results=1000)
                    if r.data.tags["stage"] == "train" and r.data.tags["run_level"] == "nested"]
    assert len({r.data.tags["seed"] for r in cat_iv_seeds}) >= 2  # smoke cat_iv loops over seeds in a job
    assert "train/loss" in keys["rip"] & keys["coastalbench"]  # one key, comparable across studies


@pytest.mark.slow
def test_second_run_has_nothing_to_do(smoke):
    work, _ = smoke
    out = smk("-n", "--config", "scale=smoke", cwd=work)
    assert out.returncode == 0
    assert "Nothing to be done" in out.stdout + out.stderr, out.stdout[-2000:]


@pytest.mark.slow
def test_report_includes_every_study_figure(smoke):
    work, _ = smoke
    out = smk("--report", "results/report.html", "--config", "scale=smoke", cwd=work, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    html = (work / "results" / "report.html").read_text(errors="replace")
    # the claims table opens the report (front page) and is a result of its own
    import html as html_lib

    headline = next(line for line in (work / "results" / "smoke" / "claims.md").read_text().splitlines()
                    if line.startswith("**on the paper's data")).strip("*")
    escaped = json.dumps(html_lib.escape(headline))[1:-1]  # HTML-escaped, then embedded as JSON strings
    assert html.count(escaped) >= 2, headline
    assert "claims_overview.png" in html  # the overview figure is a result of the report
    assert html.count("mechanism_step0_ln2: step-0 DPO loss = ln 2") >= 2
    for slug in STUDIES:
        for fig in (work / "results" / "smoke" / slug / "figures").glob("*.png"):
            assert fig.name in html, f"{fig.name} not in report"


@pytest.mark.slow
def test_killed_train_job_leaves_no_complete_looking_output(tmp_path):
    """SIGKILL the whole Snakemake process group while a (deliberately slow) train job runs: its output must not
    exist, and a rerun completes the pipeline."""
    work = copy_project(tmp_path)
    cfg = ["--config", "scale=smoke", "studies=[cat_iv]", "overrides={cat_iv: {n: [4000], arms: [cat_k2]}}"]
    target = "results/smoke/cat_iv/models/cat_k2/chunk0.json"
    out = smk("--cores", "1", *cfg, "--", "results/smoke/cat_iv/processed/synthetic.npz", cwd=work, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    env = clean_env()
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", *cfg, "--", target], cwd=work,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    log = work / "results" / "smoke" / "cat_iv" / "logs" / "train_cat_k2_chunk0.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (log.exists() and "train: arm=" in log.read_text()):
        time.sleep(0.2)
    time.sleep(2.0)  # mid-way through the first seeds
    assert proc.poll() is None, "train finished before it could be killed; make the job slower"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert not (work / target).exists()
    assert not [p for p in (work / target).parent.glob("*") if p.suffix == ".json"]
    # SIGKILL leaves Snakemake's directory lock behind: the user's documented recovery is --unlock.
    assert smk("--unlock", *cfg, cwd=work).returncode == 0
    dry = smk("-n", "--cores", "1", *cfg, "--", target, cwd=work)
    assert "cat_iv__train" in dry.stdout + dry.stderr
    out = smk("--cores", "1", *cfg, "--", target, cwd=work, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((work / target).read_text())


# ---------------------------------------------------------------------------- scales coexist, reruns follow keys

# A default-scale run of cat_iv made cheap by overrides (one seed, one arm, n=300): what matters is its scale.
CHEAP_DEFAULT = ["scale=default", "studies=[cat_iv]",
                 "overrides={cat_iv: {seeds: [0], arms: [cat_k2], n: [300], "
                 "real: {datasets: [card], card_rows: 200}}}"]
CAT_IV_SMOKE = ["scale=smoke", "studies=[cat_iv]"]


def _fingerprint(root: Path) -> dict[str, tuple[int, str]]:
    """{relative path: (mtime_ns, sha256)} of every file under ``root``."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def two_scales(tmp_path_factory):
    """A project copy where cat_iv ran at (cheap) default scale, then at smoke scale; with the default
    results' fingerprint taken between the two runs."""
    work = copy_project(tmp_path_factory.mktemp("scales"))
    out = smk("--cores", "2", "--config", *CHEAP_DEFAULT, cwd=work)
    assert out.returncode == 0, out.stderr[-3000:]
    before = _fingerprint(work / "results" / "default")
    out = smk("--cores", "2", "--config", *CAT_IV_SMOKE, cwd=work)
    assert out.returncode == 0, out.stderr[-3000:]
    return work, before


@pytest.mark.slow
def test_smoke_run_leaves_default_results_untouched(two_scales):
    work, before = two_scales
    results = work / "results"
    assert _fingerprint(results / "default") == before  # same files, same bytes, same mtimes
    assert {"claims.md", "claims.csv", "cat_iv/claims.json"} <= set(before)
    for scale in ("default", "smoke"):
        assert load_claims(results / scale / "cat_iv" / "claims.json")["scale"] == scale
        assert "cat_iv" in (results / scale / "claims.md").read_text()
    assert not (results / "cat_iv").exists() and not (results / "claims.md").exists()
    # one MLflow store for both scales, the scale as a tag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    exp = client.get_experiment_by_name("icml25/cat_iv")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    assert {r.data.tags.get("scale") for r in runs if r.data.tags.get("stage") == "evaluate"} == {"default", "smoke"}
    assert not list(results.glob("*/mlflow.db"))


def _dry_run_jobs(text: str) -> dict[str, int]:
    """``{rule: count}`` from the "Job stats" table of a dry run."""
    table = text.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, flags=re.M)}


@pytest.mark.slow
def test_evaluate_only_key_reruns_only_evaluate_and_report(two_scales):
    """Changing ``adequacy.c2_min_headroom`` (read by cat_iv's evaluate stage only) after a finished smoke run: the
    dry run schedules evaluate, report and the summary, nothing upstream, and names the changed key."""
    work, _ = two_scales
    out = smk("-n", "--config", *CAT_IV_SMOKE, "overrides={cat_iv: {adequacy: {c2_min_headroom: 0.3}}}", cwd=work)
    text = out.stdout + out.stderr
    print(text)
    assert out.returncode == 0, text[-3000:]
    assert _dry_run_jobs(text) == {"cat_iv__evaluate": 1, "cat_iv__report": 1, "summary__claims": 1, "all": 1}
    reason = next(line for line in text.splitlines() if "Params have changed" in line)
    assert ("before: 'adequacy.c2_min_headroom=0.2'" in reason
            and "now: 'adequacy.c2_min_headroom=0.3'" in reason), reason
    assert "seeds" not in reason and "forest_trees" not in reason  # only the changed key, not the whole config


@pytest.mark.slow
def test_train_key_reruns_train_not_data_stages(two_scales):
    """``alpha`` is read by train only: both train jobs rerun (and what follows), download and preprocess do not.
    ``real.card_rows`` is read by preprocess: the rerun starts there, download stays."""
    work, _ = two_scales
    out = smk("-n", "--config", *CAT_IV_SMOKE, "overrides={cat_iv: {alpha: 0.1}}", cwd=work)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert _dry_run_jobs(text) == {"cat_iv__train": 2, "cat_iv__evaluate": 1, "cat_iv__report": 1,
                                   "summary__claims": 1, "all": 1}
    assert "before: 'alpha=0.05' now: 'alpha=0.1'" in text
    out = smk("-n", "--config", *CAT_IV_SMOKE, "overrides={cat_iv: {real: {card_rows: 400}}}", cwd=work)
    jobs = _dry_run_jobs(out.stdout + out.stderr)
    assert "cat_iv__download" not in jobs and jobs["cat_iv__preprocess"] == 1 and jobs["cat_iv__train"] == 2
