"""core.summary: the claims table people read (claims.md / .csv / .html) and the summary metrics."""
from __future__ import annotations

import pandas as pd

from icml25.core.claims import NOT_REPRODUCED, REPRODUCED, Claim, Evidence, check, verdict, write_claims
from icml25.core.summary import (claims_table, headline, run_summary, seeds_text, summary_metrics, to_html,
                                 to_markdown)


def _docs(tmp_path):
    a = [Claim(id="c1", title="Method beats baseline", statement="long statement " * 30, source="paper",
               data="d", test="paired t", threshold="gain >= 0.1", verdict=verdict(True),
               statistic={"huge": list(range(200))}, key_numbers={"gain": 0.1234567, "seeds_win": "3/3"},
               evidence=Evidence(3, "seeds")),
         Claim(id="c2", title="Second claim", statement="s", source="paper", data="d", test="t", threshold="x",
               verdict=verdict(False, True), evidence=Evidence(3, "seeds")),
         Claim(id="c3", title="Ours", statement="s", source="ours", data="d", test="t", threshold="x",
               verdict=verdict(True), evidence=Evidence(1, "seeds")),
         check("k1", "symmetric", title="Score matrix symmetric", holds=True, data="d", test="t", threshold="0",
               evidence=Evidence(20, "matrices"), key_numbers={"violations": 0}),
         check("k2", "loss starts at ln 2", title="Step-0 loss", holds=False, data="d", test="t", threshold="1e-4",
               evidence=Evidence(3, "runs"), key_numbers={"max_dev": 0.2})]
    b = [Claim(id="t1", title="Table anchors", statement="s", source="paper", data="synthetic", test="t",
               threshold="exact", verdict=verdict(True), evidence=Evidence(115, "studies", paper_data=False))]
    pa = write_claims(tmp_path / "a.json", study="alpha", scale="default", data_source="offline", claims=a,
                      config_hash="abc123", paper={"title": "Alpha Paper", "url": "https://x"}, seeds=[0, 1, 2])
    pb = write_claims(tmp_path / "b.json", study="beta", scale="smoke", data_source="offline (synthetic)",
                      claims=b, seeds=[0])
    return [tmp_path / "a.json", tmp_path / "b.json"], pa, pb


def test_headline_counts_paper_ours_and_checks_separately(tmp_path):
    paths, _, _ = _docs(tmp_path)
    table = claims_table(paths)
    assert headline(table) == ("paper claims: 1 reproduced · 1 not · 1 inconclusive; our claims: 0 reproduced · "
                               "0 not · 1 inconclusive; checks: 1 of 2 hold (1 FAIL)")


def test_markdown_has_study_header_claim_rows_and_compact_checks(tmp_path):
    paths, _, _ = _docs(tmp_path)
    md = to_markdown(claims_table(paths))
    assert "## alpha — Alpha Paper" in md
    assert "scale `default` · seeds `0–2 (3)` · data source `offline` · config hash `abc123`" in md
    row = next(line for line in md.splitlines() if line.startswith("| c1:"))
    assert row == ("| c1: Method beats baseline | paper | **reproduced** | gain = 0.1235; seeds_win = 3/3 | "
                   "gain >= 0.1 | 3 seeds |  |")
    assert "**checks: 1 of 2 hold; FAIL: k2**" in md
    assert "| k1: Score matrix symmetric | hold | violations = 0 |" in md
    assert "| k2: Step-0 loss | FAIL | max_dev = 0.2 |" in md
    # a gated claim shows the rule; stand-in data is named
    c3 = next(line for line in md.splitlines() if line.startswith("| c3:"))
    assert "**inconclusive**" in c3 and "evidence rule: 1 independent seeds < 3" in c3
    t1 = next(line for line in md.splitlines() if line.startswith("| t1:"))
    assert "115 studies, stand-in data" in t1 and "**inconclusive**" in t1
    assert max(len(line) for line in md.splitlines()) < 800  # no flattened 200-value statistics


def test_fallback_key_numbers_are_shortened(tmp_path):
    paths, _, _ = _docs(tmp_path)
    table = claims_table(paths)
    c2 = table.set_index("claim").loc["c2", "key_numbers"]
    assert c2 == ""  # no statistic, no key numbers
    doc_stat = {"key_numbers": {}, "statistic": {"a": list(range(500))}}
    from icml25.core.summary import KEY_NUMBERS_MAX, key_numbers_text
    text = key_numbers_text(doc_stat)
    assert len(text) <= KEY_NUMBERS_MAX and text.endswith("…") and text.startswith("a = [0, 1, 2")


def test_seeds_text():
    assert seeds_text([2, 0, 1]) == "0–2 (3)"
    assert seeds_text([0, 2, 5]) == "0, 2, 5 (3)"
    assert seeds_text([0]) == "0 (1)"
    assert seeds_text([]) == ""


def test_csv_html_and_metrics_follow_the_split(tmp_path):
    paths, _, _ = _docs(tmp_path)
    table = run_summary(paths, tmp_path / "claims.md", tmp_path / "claims.csv", tmp_path, track=False,
                        html_out=tmp_path / "claims.html")
    csv = pd.read_csv(tmp_path / "claims.csv", keep_default_na=False)
    assert list(csv["kind"]) == ["claim", "claim", "claim", "check", "check", "claim"]
    assert list(csv["holds"]) == ["", "", "", "True", "False", ""]
    assert list(csv["verdict"]) == [REPRODUCED, NOT_REPRODUCED, "inconclusive", REPRODUCED, NOT_REPRODUCED,
                                    "inconclusive"]
    html = (tmp_path / "claims.html").read_text()
    assert headline(table) in html and "<td>k2: Step-0 loss</td><td>FAIL</td>" in html
    assert "Alpha Paper" in html and to_html(table) == html
    assert summary_metrics(table) == {
        "verdicts/claims_reproduced": 1, "verdicts/claims_not_reproduced": 1, "verdicts/claims_inconclusive": 2,
        "verdicts/checks_hold": 1, "verdicts/checks_failed": 1,
        "verdicts/paper/claims_reproduced": 1, "verdicts/paper/claims_not_reproduced": 1,
        "verdicts/paper/claims_inconclusive": 1, "verdicts/ours/claims_reproduced": 0,
        "verdicts/ours/claims_not_reproduced": 0, "verdicts/ours/claims_inconclusive": 1}


def test_summary_logs_metrics_to_the_summary_experiment(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("ICML25_INVOCATION", raising=False)
    paths, _, _ = _docs(tmp_path)
    run_summary(paths, tmp_path / "claims.md", tmp_path / "claims.csv", tmp_path, html_out=tmp_path / "c.html")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("icml25/summary")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.metrics["verdicts/checks_failed"] == 1.0
    assert run.data.metrics["verdicts/paper/claims_reproduced"] == 1.0
    assert run.data.tags["headline"].startswith("paper claims: 1 reproduced")
