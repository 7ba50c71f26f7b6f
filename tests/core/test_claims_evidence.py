"""core.claims: claim/check kinds, the evidence rules, adequacy gates, tiers, untested entries, verdict counts, MLflow
logging of the counts."""
from __future__ import annotations

import pytest

from dataclasses import asdict

from icml25.core.claims import (INCONCLUSIVE, MIN_UNITS, NOT_REPRODUCED, REPRODUCED, UNTESTED, Claim, Evidence,
                                Gate, check, gate, load_claims, log_verdicts, tier, untested, validate_claims,
                                verdict, verdict_counts, write_claims)
from icml25.core.io import write_json


def _claim(v: str, n: int, paper_data=False, source="paper", note="", gates=()) -> Claim:
    return Claim(id="c", statement="s", source=source, data="d", test="t", threshold="x", verdict=v,
                 metrics={"arm": {"mean": 0.5}}, evidence=Evidence(n, "seeds", paper_data, "t 95%, n seeds"),
                 note=note, gates=list(gates))


@pytest.mark.parametrize("v", [REPRODUCED, NOT_REPRODUCED])
def test_claim_below_min_units_is_inconclusive_with_rule_in_note(v):
    c = _claim(v, MIN_UNITS - 1, note="own note")
    assert c.verdict == INCONCLUSIVE and c.holds is None
    assert c.note.startswith("own note; evidence rule: ") and f"2 independent seeds < {MIN_UNITS}" in c.note
    assert _claim(v, 1, note="own note.").note.startswith("own note; evidence rule: ")  # one separator
    assert repr(v) in c.note  # says what the test alone gave


@pytest.mark.parametrize("v", [REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE])
def test_claim_at_min_units_keeps_its_verdict(v):
    c = _claim(v, MIN_UNITS)
    assert c.verdict == v and c.note == ""


def test_one_seed_claim_is_inconclusive_and_document_cannot_say_otherwise(tmp_path):
    assert _claim(REPRODUCED, 1).verdict == INCONCLUSIVE
    assert _claim(REPRODUCED, 0).verdict == INCONCLUSIVE
    doc = write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline",
                       claims=[_claim(REPRODUCED, 5)])
    forged = dict(doc, claims=[dict(doc["claims"][0], evidence={"n": 1, "unit": "seeds", "paper_data": False,
                                                                "ci_method": "t"})])
    write_json(tmp_path / "forged.json", forged)
    with pytest.raises(ValueError, match=r"claims\.0 \(c\): verdict 'reproduced' breaks the evidence rule: 1 "):
        load_claims(tmp_path / "forged.json")


def test_stand_in_claims_keep_their_verdict_in_their_own_tier():
    """paper_data no longer turns a verdict inconclusive: it decides the tier the verdict is counted in."""
    stand_in, paper = _claim(REPRODUCED, 10, paper_data=False), _claim(REPRODUCED, 10, paper_data=True)
    assert stand_in.verdict == paper.verdict == REPRODUCED
    assert tier(asdict(stand_in)) == "stand_in" and tier(asdict(paper)) == "paper_data"
    doc = {"claims": [asdict(stand_in), asdict(paper), asdict(_claim(NOT_REPRODUCED, 5, paper_data=False))]}
    assert verdict_counts(doc, tier="paper_data")["claims_reproduced"] == 1
    assert verdict_counts(doc, tier="stand_in") | {} == {
        "claims_reproduced": 1, "claims_not_reproduced": 1, "claims_inconclusive": 0, "checks_hold": 0,
        "checks_failed": 0, "untested": 0}


@pytest.mark.parametrize("field, value, message", [
    ("paper_data", None, "needs evidence.paper_data true"),
    ("ci_method", "", "needs ci_method"),
])
def test_validate_refuses_paper_claim_without_paper_data_or_ci_method(tmp_path, field, value, message):
    doc = write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline",
                       claims=[_claim(REPRODUCED, 5)])
    entry = doc["claims"][0]
    assert entry["ci_method"] == entry["evidence"]["ci_method"] == "t 95%, n seeds"  # copied to the top level
    planted = dict(doc, claims=[dict(entry, evidence=dict(entry["evidence"], **{field: value}),
                                     **({"ci_method": value} if field == "ci_method" else {}))])
    with pytest.raises(ValueError, match=rf"claims\.0 \(c\): .*{message}"):
        validate_claims(planted)


def test_validate_refuses_a_verdict_fixed_in_code(tmp_path):
    """A claim with nothing measured (no metric, statistic or key number) carries a verdict written in code."""
    fixed = Claim(id="c5", statement="robust to JPEG", source="paper", data="d", test="t", threshold="x",
                  verdict=INCONCLUSIVE, evidence=Evidence(3, "seeds", False, "t 95%"))
    with pytest.raises(ValueError, match=r"c5\): verdict 'inconclusive' with nothing measured .* untested"):
        write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline", claims=[fixed])
    ok = untested("c5", "robust to JPEG", scale="paper", reason="needs GenImage")
    doc = write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline", claims=[ok])
    assert doc["claims"][0]["status"] == UNTESTED and doc["claims"][0]["testable_at"] == "paper"
    assert doc["claims"][0]["verdict"] == INCONCLUSIVE  # untested is a status: the verdict stays one of three
    counts = verdict_counts(doc)
    assert counts["untested"] == 1 and counts["claims_inconclusive"] == 0  # never counted among claims
    with pytest.raises(ValueError, match="scale must be one of"):
        untested("c5", "s", scale="cluster", reason="r")
    with pytest.raises(ValueError, match="an untested entry must be a claim, verdict inconclusive"):
        validate_claims(dict(doc, claims=[dict(doc["claims"][0], verdict=REPRODUCED)]))


def test_failed_gate_makes_the_claim_inconclusive_naming_gate_and_numbers(tmp_path):
    g = gate("class_acc_above_chance", 0.17, at_least=0.2, text="generator works")
    assert g == Gate("class_acc_above_chance", False, 0.17, ">= 0.2", "generator works")
    assert gate("x", float("nan"), at_least=0.0).passed is False
    assert gate("x", 0.5, at_least=0.2, at_most=0.5).passed is True
    c = _claim(REPRODUCED, 5, gates=[g, gate("ok", 1.0, at_least=0.5)])
    assert c.verdict == INCONCLUSIVE
    assert "adequacy gate class_acc_above_chance: 0.17 (needs >= 0.2)" in c.note and "'reproduced'" in c.note
    assert "adequacy gate ok" not in c.note
    assert _claim(NOT_REPRODUCED, 5, gates=[gate("ok", 1.0, at_least=0.5)]).verdict == NOT_REPRODUCED
    doc = write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline", claims=[c])
    forged = dict(doc, claims=[dict(doc["claims"][0], verdict=REPRODUCED)])
    with pytest.raises(ValueError, match=r"despite failed adequacy gate\(s\) \['class_acc_above_chance'\]"):
        validate_claims(forged)


def test_checks_are_not_gated_and_carry_holds():
    ok = check("k", "identity", holds=True, data="d", test="t", threshold="0", evidence=Evidence(1, "runs"))
    bad = check("k", "identity", holds=False, data="d", test="t", threshold="0", evidence=Evidence(0, "runs"))
    unknown = check("k", "identity", holds=None, data="d", test="t", threshold="0", evidence=Evidence(0, "runs"))
    assert (ok.verdict, ok.holds, ok.kind) == (REPRODUCED, True, "check")
    assert (bad.verdict, bad.holds) == (NOT_REPRODUCED, False)
    assert (unknown.verdict, unknown.holds) == (INCONCLUSIVE, None)
    assert ok.note == bad.note == ""


def test_check_holds_must_match_verdict(tmp_path):
    ok = check("k", "identity", holds=True, data="d", test="t", threshold="0", evidence=Evidence(1, "runs"))
    doc = write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline", claims=[ok])
    assert doc["claims"][0]["holds"] is True and doc["claims"][0]["kind"] == "check"
    with pytest.raises(ValueError, match="holds=False disagrees"):
        validate_claims(dict(doc, claims=[dict(doc["claims"][0], holds=False)]))
    with pytest.raises(ValueError, match=r"claims\.0: 'kind' is a required property"):
        validate_claims(dict(doc, claims=[{k: v for k, v in doc["claims"][0].items() if k != "kind"}]))


def test_invalid_kind_rejected():
    with pytest.raises(ValueError, match="kind must be one of"):
        Claim(id="c", statement="s", source="paper", data="d", test="t", threshold="x", verdict=verdict(True),
              kind="identity")


def test_verdict_counts_split_claims_from_checks():
    entries = [_claim(REPRODUCED, 3), _claim(REPRODUCED, 3, source="ours"), _claim(NOT_REPRODUCED, 3),
               _claim(REPRODUCED, 1),  # gated -> inconclusive
               check("a", "s", holds=True, data="d", test="t", threshold="0", evidence=Evidence(1, "runs")),
               check("b", "s", holds=True, data="d", test="t", threshold="0", evidence=Evidence(1, "runs")),
               check("c", "s", holds=False, data="d", test="t", threshold="0", evidence=Evidence(1, "runs")),
               check("d", "s", holds=None, data="d", test="t", threshold="0", evidence=Evidence(0, "runs"))]
    doc = {"claims": [asdict(c) for c in entries]}
    assert verdict_counts(doc) == {"claims_reproduced": 2, "claims_not_reproduced": 1, "claims_inconclusive": 1,
                                   "checks_hold": 2, "checks_failed": 1, "untested": 0}
    assert verdict_counts(doc, source="paper") == {"claims_reproduced": 1, "claims_not_reproduced": 1,
                                                   "claims_inconclusive": 1, "checks_hold": 2, "checks_failed": 1,
                                                   "untested": 0}


class _Run:
    def __init__(self):
        self.tags, self.metrics, self.parent = {}, {}, {}

    def set_tags(self, tags):
        self.tags.update(tags)

    def log_metrics(self, metrics, step=0):
        self.metrics.update(metrics)

    def log_parent_metrics(self, metrics, step=0):
        self.parent.update(metrics)


def test_log_verdicts_on_run_and_parent(tmp_path):
    ok = check("ident", "s", holds=True, data="d", test="t", threshold="0", evidence=Evidence(1, "runs"))
    doc = write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline",
                       claims=[_claim(REPRODUCED, 4), ok])
    run = _Run()
    log_verdicts(run, doc)
    assert run.tags == {"verdict/c": REPRODUCED, "verdict/ident": REPRODUCED}
    expected = {"verdicts/claims_reproduced": 1, "verdicts/claims_not_reproduced": 0,
                "verdicts/claims_inconclusive": 0, "verdicts/checks_hold": 1, "verdicts/checks_failed": 0,
                "verdicts/untested": 0}
    assert run.metrics == expected and run.parent == expected


def test_log_verdicts_reaches_the_parent_run_in_mlflow(tmp_path, monkeypatch):
    """The StageRun hook writes verdicts/<key> on the study's parent run of the invocation."""
    from mlflow.tracking import MlflowClient

    from icml25.core.tracking import stage_run

    monkeypatch.setenv("ICML25_INVOCATION", "inv1")
    doc = write_claims(tmp_path / "c.json", study="x", scale="smoke", data_source="offline",
                       claims=[_claim(NOT_REPRODUCED, 3)])
    with stage_run("cat_iv", "evaluate", results_dir=tmp_path) as run:
        log_verdicts(run, doc)
        parent = run.parent_run_id
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert parent and client.get_run(parent).data.metrics["verdicts/claims_not_reproduced"] == 1.0
    assert client.get_run(run.run_id).data.metrics["verdicts/claims_reproduced"] == 0.0
    assert client.get_run(run.run_id).data.tags["verdict/c"] == NOT_REPRODUCED
