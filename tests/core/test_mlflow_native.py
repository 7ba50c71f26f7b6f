"""core.mlflow_native (issue 40): what the project records in MLflow's own terms — dataset descriptions checked
against the files, the claims table read back by MLflow's own ``load_table``, descriptions, model matching."""
from __future__ import annotations

import bz2
import hashlib
import json
import os

import numpy as np
import pandas as pd
import pytest

from icml25.core import mlflow_native as native
from icml25.studies import STUDIES


def test_npz_schema_from_headers_matches_the_arrays(tmp_path):
    arrays = {"X_train": np.zeros((7, 2, 3), dtype=np.float32), "y": np.arange(7), "names": np.array(["a", "bc"])}
    np.savez(tmp_path / "d.npz", **arrays)
    schema, profile = native.schema_and_profile(tmp_path / "d.npz")
    assert schema == {"mlflow_colspec": [{"name": k, "type": f"{v.dtype}{list(v.shape)}"} for k, v in arrays.items()]}
    assert profile["shapes"] == {k: list(v.shape) for k, v in arrays.items()} and "num_rows" not in profile  # 7 vs 2


def test_compressed_csv_rows_and_columns(tmp_path):
    rows = ["wage,educ,exper"] + [f"{i},{i % 12},{i % 5}" for i in range(1234)]
    path = tmp_path / "card.csv.bz2"
    path.write_bytes(bz2.compress(("\n".join(rows) + "\n").encode()))
    schema, profile = native.schema_and_profile(path)
    assert [c["name"] for c in schema["mlflow_colspec"]] == ["wage", "educ", "exper"] and profile["num_rows"] == 1234


def test_parquet_schema_from_the_footer(tmp_path):
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    df.to_parquet(tmp_path / "t.parquet")
    schema, profile = native.schema_and_profile(tmp_path / "t.parquet")
    assert [c["name"] for c in schema["mlflow_colspec"]] == ["a", "b"] and profile["num_rows"] == 3


def test_a_downloaded_file_is_named_and_sourced_by_its_manifest_row(tmp_path, monkeypatch):
    """A raw file whose sha256 is pinned in the study's manifest gets the row's name, the manifest's sha256 as digest
    and the URL as source; a generated file is named by its place in the results and sourced locally."""
    raw = tmp_path / "smoke" / "toy" / "raw" / "card.csv"
    raw.parent.mkdir(parents=True)
    raw.write_text("a\n1\n")
    sha = hashlib.sha256(raw.read_bytes()).hexdigest()
    study = tmp_path / "studies" / "toy"
    study.mkdir(parents=True)
    (study / "manifest.csv").write_text(f"name,url,sha256,size,licence,mirror_path\ncard,https://e.org/card.csv,{sha},4,"
                                        "MIT,card.csv\nother,https://e.org/o,UNPINNED,1,MIT,o\n")
    monkeypatch.setattr(native, "STUDIES_DIR", tmp_path / "studies")
    native.manifest_rows.cache_clear()
    ds, tags = native.dataset_input(raw, "toy", "preprocess", tmp_path)
    assert (ds["name"], ds["digest"], ds["source_type"]) == ("card", sha[:16], "http")
    assert json.loads(ds["source"])["url"] == "https://e.org/card.csv" and tags == {native.CONTEXT_TAG: "preprocessing"}
    gen = raw.parent.parent / "processed" / "x.csv"
    gen.parent.mkdir()
    gen.write_text("b\n2\n")
    ds, tags = native.dataset_input(gen, "toy", "train", tmp_path)
    assert ds["name"] == "toy/processed/x.csv" and ds["source_type"] == "local" and tags[native.CONTEXT_TAG] == "training"
    # cached by (path, size, mtime): a second description does not hash again, a changed file does
    cache = json.loads((tmp_path / ".tracking" / "datasets.json").read_text())
    assert len(cache) == 2
    native.manifest_rows.cache_clear()


@pytest.mark.parametrize(("arm", "seed", "expected"), [
    ("a", None, []),  # arm a has two models: its arm-level means describe neither alone
    ("b", None, ["mb"]),  # arm b's only model
    ("a", "1", ["m1"]),  # the model of seed 1 alone
    ("a", "3", []),  # seed 3 is in a chunk with seed 4
    (None, None, []),  # not one arm: nothing
])
def test_eval_metrics_go_only_to_the_model_they_describe(arm, seed, expected):
    entries = [{"model_id": "m0", "arm": "a", "seeds": [0]}, {"model_id": "m1", "arm": "a", "seeds": [1]},
               {"model_id": "m34", "arm": "a", "seeds": [3, 4]}, {"model_id": "mb", "arm": "b", "seeds": [0, 1]}]
    entries = entries if arm != "a" or seed is not None else entries[:2]
    assert native.matching_models(entries, arm, seed) == expected


@pytest.mark.parametrize("slug", STUDIES)
def test_every_study_readme_gives_a_method_line(slug):
    line = native.method_line(native.STUDIES_DIR / slug / "README.md")
    assert 40 <= len(line) <= 301 and "http" not in line, line


def test_experiment_note_has_paper_claims_per_scale_and_readme():
    doc = {"study": "s", "scale": "smoke", "data_source": "offline", "seeds": [0, 1, 2],
           "paper": {"title": "T", "ref": "ICML 2025"},
           "claims": [{"id": "c1", "kind": "claim", "title": "a | b", "statement": "st", "source": "paper",
                       "verdict": "reproduced", "threshold": "> 0", "key_numbers": {"gain": 0.123456}},
                      {"id": "k1", "kind": "check", "holds": False, "verdict": "not reproduced"}]}
    note = native.experiment_note("s", {"smoke": doc, "default": {**doc, "scale": "default"}}, "src/x/README.md")
    assert note.splitlines()[:3] == ["## T", "", "*ICML 2025*"]
    assert "### Scale `smoke`" in note and "### Scale `default`" in note and "3 seeds" in note
    assert "| c1: a \\| b | paper | **reproduced** | gain = 0.1235 | > 0 |" in note
    assert "Checks: 0 of 1 hold; FAIL: k1" in note and note.rstrip().endswith("refreshed by the evaluate stage.")


def test_summary_run_logs_the_claims_table_mlflow_reads_as_a_table(tmp_path, monkeypatch):
    """The summary run's ``claims_table.json`` is what ``MlflowClient.log_table`` writes: MLflow's own
    ``load_table`` reads it back equal to claims.csv's columns, and the run is tagged so the UI renders it."""
    from mlflow.tracking import MlflowClient
    from test_claims_summary import _docs

    from icml25.core.summary import run_summary

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    paths, _, _ = _docs(tmp_path)
    table = run_summary(paths, tmp_path / "claims.md", tmp_path / "claims.csv", tmp_path)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("icml25/summary")
    (run,) = client.search_runs([exp.experiment_id])
    assert json.loads(run.data.tags["mlflow.loggedArtifacts"]) == [{"path": "claims_table.json", "type": "table"}]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", client.tracking_uri)  # load_table searches through mlflow.search_runs
    loaded = client.load_table(exp.experiment_id, "claims_table.json", run_ids=[run.info.run_id])
    columns = [c for c in native.TABLE_COLUMNS if c in table.columns]
    assert list(loaded.columns) == columns and len(loaded) == len(table)
    assert loaded["claim"].tolist() == table["claim"].tolist()
    assert loaded["verdict"].tolist() == table["verdict"].tolist()
    assert loaded["key_numbers"].tolist() == table["key_numbers"].tolist()
    assert "claims_overview.png" in {a.path for a in client.list_artifacts(run.info.run_id)}
    assert run.data.tags["mlflow.source.name"].startswith("icml25/core/summary:summary")


def test_inputs_are_classified_by_their_place_in_the_study_results():
    assert native.kind_of("/data/raw/x/results/smoke/toy/models/a/c.json", "toy") == "model"  # not fooled by /raw/
    assert native.kind_of("results/smoke/toy/processed/x.npz", "toy") == "data"
    assert native.kind_of("results/smoke/toy/raw/card.csv.bz2", "toy") == "data"
    assert native.kind_of("/raw/results/smoke/toy/figures/f.png", "toy") is None


def test_a_rewritten_model_file_is_not_its_old_logged_model(tmp_path):
    model = tmp_path / "smoke" / "toy" / "models" / "a" / "m.json"
    model.parent.mkdir(parents=True)
    model.write_text("[1]")
    sha = hashlib.sha256(b"[1]").hexdigest()
    native.register_model(tmp_path, "store", model, {"model_id": "m-1", "arm": "a", "seeds": [0], "sha256": sha})
    os.utime(model, ns=(1, 1))  # Snakemake touches outputs: still that model
    assert [e["model_id"] for e in native.registered_models(tmp_path, "store", [model])] == ["m-1"]
    assert native.registered_models(tmp_path, "other-store", [model]) == []
    model.write_text("[2]")  # retrained (same size, other bytes): no longer that LoggedModel
    assert native.registered_models(tmp_path, "store", [model]) == []


def test_reading_the_summary_beside_a_logged_model_is_reading_that_model(tmp_path):
    """pid/meta_expert: the train job writes chunk0.json and chunk0.pt and logs the .pt; the evaluate job reads the
    .json. chunk1.json is another model; chunk10.pt is not chunk1's."""
    d = tmp_path / "smoke" / "toy" / "models" / "a"
    d.mkdir(parents=True)
    for name in ("chunk0.json", "chunk0.pt", "chunk1.json", "chunk10.pt"):
        (d / name).write_text(name)
    for name, mid in (("chunk0.pt", "m-0"), ("chunk10.pt", "m-10")):
        native.register_model(tmp_path, "s", d / name, {"model_id": mid, "arm": "a", "seeds": [0],
                                                         "sha256": hashlib.sha256(name.encode()).hexdigest()})
    found = native.registered_models(tmp_path, "s", [d / "chunk0.json", d / "chunk1.json"])
    assert [e["model_id"] for e in found] == ["m-0"]
    datasets, models = native.stage_inputs([d / "chunk0.json", d / "chunk0.pt"], "toy", "evaluate", tmp_path, "s")
    assert datasets == [] and [m["model_id"] for m in models] == ["m-0"]
