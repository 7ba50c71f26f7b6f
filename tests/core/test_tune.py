"""icml25 tune: refuses evaluation seeds naming them, validates --set against the study's model before anything
runs, and appends one well-formed record per run."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from icml25.core import tune
from icml25.core.claims import Claim, Evidence, write_claims


def test_help_runs():
    out = subprocess.run([sys.executable, "-m", "icml25.core.cli", "tune", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--seeds" in out.stdout and "tuning/<slug>.jsonl" in out.stdout


def test_evaluation_seeds_are_refused_naming_them(capsys):
    rc = tune.main(["cat_iv", "--seeds", "1", "100", "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2 and "seeds [1] are evaluation seeds of cat_iv" in err and "config/studies/cat_iv.yaml" in err


def test_evaluation_seeds_of_every_scale():
    y = {"seeds": [0, 1], "scales": {"default": {"seeds": [5, 6]}, "paper": {}}}
    assert tune.evaluation_seeds(y) == {"smoke": [0, 1], "default": [5, 6], "paper": [0, 1]}
    with pytest.raises(tune.TuneError, match=r"seeds \[5\] .*default: \[5\]"):
        tune.refuse_evaluation_seeds("x", [5, 100], tune.evaluation_seeds(y))
    tune.refuse_evaluation_seeds("x", [100, 101], tune.evaluation_seeds(y))


def test_unknown_key_fails_before_running(capsys):
    rc = tune.main(["cat_iv", "--seeds", "100", "--set", "bogus.key=3", "--dry-run"])
    assert rc == 2 and "cat_iv.bogus: unknown key" in capsys.readouterr().err


def test_parse_sets():
    assert tune.parse_sets(["a.b=1", "a.c=[1, 2]", "d=true"]) == {"a": {"b": 1, "c": [1, 2]}, "d": True}
    assert tune.flat_sets(["a.b=0.5"]) == {"a.b": 0.5}
    with pytest.raises(tune.TuneError, match="expected key.path=value"):
        tune.parse_sets(["novalue"])


def test_record_from_claims_and_append(tmp_path):
    c = Claim(id="c1", statement="s", source="paper", data="d", test="t", threshold="x", verdict="reproduced",
              metrics={"method": {"mean": 0.9}, "baseline": {"mean": 0.8}}, key_numbers={"gain": 0.1},
              evidence=Evidence(3, "seeds", False, "t 95%, n=3 seeds"))
    doc = write_claims(tmp_path / "c.json", study="x", scale="default", data_source="offline", claims=[c])
    rec = tune.record_from_claims(doc, seeds=[100, 101, 102], sets={"lr": 0.1}, scale="default", git_sha="abc",
                                  note="lr sweep")
    assert rec["metrics"] == {"c1": {"method": 0.9, "baseline": 0.8}} and rec["verdicts"] == {"c1": "reproduced"}
    assert rec["seeds"] == [100, 101, 102] and rec["set"] == {"lr": 0.1} and rec["git_sha"] == "abc"
    path = tmp_path / "tuning" / "x.jsonl"
    tune.append_record(path, rec)
    tune.append_record(path, dict(rec, note="second"))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["note"] == "second"
    assert [r["note"] for r in tune.read_records(path)] == ["lr sweep", "second"]
    path.write_text(path.read_text() + "{half\n")
    with pytest.raises(ValueError, match=r"x\.jsonl:3: not a JSON line"):
        tune.read_records(path)
