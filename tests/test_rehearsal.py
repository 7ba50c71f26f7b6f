"""The paper-scale rehearsal (icml25.core.rehearsal): miniature real-format files written deterministically, a
rehearsal manifest that differs from the real one only in the miniatures' hashes and sizes, the paper DAG planned
and run through claims.json on CPU for every study that has a rehearsal.

The per-study tests carry the ``rehearsal`` marker: the README's test command leaves them out (``-m "not
rehearsal"``) and CI runs them as a second command (``pytest -m rehearsal``), each study's DAG on a worker of its
own."""
from __future__ import annotations

import csv
import json

import pytest

from conftest import ROOT, copy_project, run_snakemake, tail
from icml25.core import rehearsal as R
from icml25.core.claims import load_claims
from icml25.core.download import read_manifest
from icml25.studies import STUDIES

REHEARSED = [s for s in STUDIES if R.has_rehearsal(s, ROOT)]


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_at_least_one_study_has_a_rehearsal():
    assert "cat_iv" in REHEARSED


@pytest.mark.rehearsal
@pytest.mark.parametrize("slug", REHEARSED)
def test_mirror_is_deterministic_and_manifest_differs_only_in_hashes(slug, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    names = R.build_mirror([slug], a)[slug]
    assert R.build_mirror([slug], b)[slug] == names
    if not (R.package_dir(slug) / "manifest.csv").is_file():  # a study that generates its data downloads nothing
        assert names == [] and not (a / "manifests" / slug).exists()
        return
    assert names
    real = _rows(R.package_dir(slug) / "manifest.csv")
    rehearsed = _rows(a / "manifests" / slug / "manifest.csv")
    assert [r["name"] for r in rehearsed] == [r["name"] for r in real]
    for r_real, r_reh in zip(real, rehearsed):
        same = {k for k in r_real if r_real[k] == r_reh[k]}
        if r_real["name"] in names:
            assert same >= set(r_real) - {"sha256", "size", "md5"}, r_real["name"]
            assert r_reh["sha256"] != r_real["sha256"]
            path = R.files_dir(a, slug) / r_reh["mirror_path"]
            assert (R.files_dir(b, slug) / r_reh["mirror_path"]).read_bytes() == path.read_bytes()  # same bytes on every call
            assert int(r_reh["size"]) == path.stat().st_size
        else:
            assert r_reh == r_real  # rows the rehearsal does not use keep their real hashes


@pytest.mark.rehearsal
def test_studies_rehearsing_one_url_keep_their_own_miniatures(tmp_path):
    """CIFAR-10 and MNIST are rehearsed by several studies with different miniatures: each study has its own mirror
    (files/<slug>/), so a rehearsal of several studies at once verifies every file against its own study's hash."""
    from icml25.core.download import sha256_file

    both = [s for s in ("ntk_dfl", "coalition_attribution") if s in REHEARSED]
    if len(both) < 2:
        pytest.skip("needs the ntk_dfl and coalition_attribution rehearsals")
    written = R.build_mirror(both, tmp_path)
    urls = {s: {r["name"]: r for r in _rows(tmp_path / "manifests" / s / "manifest.csv")} for s in both}
    paths = {s: {urls[s][n]["mirror_path"] for n in written[s]} for s in both}
    common = paths["ntk_dfl"] & paths["coalition_attribution"]
    assert common, "the two studies no longer rehearse a common file"
    assert any((R.files_dir(tmp_path, "ntk_dfl") / m).read_bytes() != (R.files_dir(tmp_path, "coalition_attribution")
                                                                      / m).read_bytes() for m in common)
    for slug in both:
        for name in written[slug]:
            row = urls[slug][name]
            assert sha256_file(R.files_dir(tmp_path, slug) / row["mirror_path"]) == row["sha256"], (slug, name)


def test_manifest_override_only_in_a_rehearsal_job(tmp_path, monkeypatch):
    R.build_mirror(["cat_iv"], tmp_path)
    real = R.package_dir("cat_iv") / "manifest.csv"
    monkeypatch.delenv(R.ENV, raising=False)
    assert read_manifest(real)["card"].sha256 == _rows(real)[0]["sha256"]
    monkeypatch.setenv(R.ENV, str(tmp_path))
    assert read_manifest(real)["card"].sha256 == _rows(tmp_path / "manifests" / "cat_iv" / "manifest.csv")[0]["sha256"]
    assert read_manifest(real, rehearsal=False)["card"].sha256 == _rows(real)[0]["sha256"]
    monkeypatch.setenv(R.ENV, str(tmp_path / "elsewhere"))
    with pytest.raises(R.RehearsalError, match="manifests/cat_iv/manifest.csv missing"):
        read_manifest(real)


def test_rehearsal_needs_paper_scale_and_a_rehearsal(tmp_path):
    work = copy_project(tmp_path / "p")
    out = run_snakemake(work, "-n", "--config", "scale=default", "rehearsal=true", "studies=[cat_iv]", timeout=300)
    assert out.returncode != 0 and "rehearsal: true needs scale=paper" in out.stdout + out.stderr
    lacking = next((s for s in STUDIES if s not in REHEARSED), None)
    if lacking:
        out = run_snakemake(work, "-n", "--config", "scale=paper", "rehearsal=true", f"studies=[{lacking}]",
                            timeout=300)
        assert out.returncode != 0 and f"no rehearsal for ['{lacking}'] yet" in out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.rehearsal
@pytest.mark.parametrize("slug", REHEARSED)
def test_rehearsal_runs_the_paper_dag_through_claims(slug, tmp_path):
    """`snakemake --config scale=paper rehearsal=true studies=[<slug>]`: every paper rule runs on the miniatures
    (downloaded through the mirror and hash-checked), and the claims document validates with every claim."""
    work = copy_project(tmp_path / "p")
    plan = run_snakemake(work, "-n", "--config", "scale=paper", "rehearsal=true", f"studies=[{slug}]", timeout=300)
    assert plan.returncode == 0, tail(plan)
    out = run_snakemake(work, "--cores", "2", "--config", "scale=paper", "rehearsal=true", f"studies=[{slug}]",
                        timeout=1200)
    assert out.returncode == 0, tail(out)
    doc = load_claims(work / "results" / "rehearsal" / slug / "claims.json")
    assert doc["scale"] == "paper" and doc["claims"]
    raw = work / "results" / "rehearsal" / slug / "raw"
    pins = sorted(p.name for p in raw.rglob("*.sha256"))
    if (R.package_dir(slug) / "manifest.csv").is_file():
        assert pins, "the rehearsal downloaded nothing through the mirror"
    assert not (work / "results" / "paper").exists()  # never mixed with a real paper run
    assert json.loads(json.dumps(doc))["study"] == slug


def test_rehearsal_claims_are_never_paper_data(tmp_path, monkeypatch):
    """In a rehearsal job the study's code reads the miniatures through the real manifest's rows and may believe
    they are the paper's data; write_claims marks the document and turns every paper_data True into False."""
    from icml25.core.claims import REPRODUCED, Claim, Evidence, write_claims

    c = Claim("c1", "x beats y", "paper", "the real workbook", "t", "> 0", REPRODUCED, statistic={"mean": 0.3},
              metrics={"gain": {"mean": 0.3}}, evidence=Evidence(3, "seeds", True, "t 95%, n=3 seeds"))
    monkeypatch.delenv(R.ENV, raising=False)
    plain = write_claims(tmp_path / "a.json", study="s", scale="paper", data_source="remote", claims=[c])
    assert plain["claims"][0]["evidence"]["paper_data"] is True and "rehearsal" not in plain
    monkeypatch.setenv(R.ENV, str(tmp_path))
    doc = write_claims(tmp_path / "b.json", study="s", scale="paper", data_source="remote", claims=[c])
    assert doc["rehearsal"] is True
    assert doc["claims"][0]["evidence"]["paper_data"] is False
    assert doc["claims"][0]["data"].startswith("[rehearsal miniature]") and "rehearsal" in doc["claims"][0]["note"]
    assert load_claims(tmp_path / "b.json")["claims"][0]["evidence"]["paper_data"] is False
