"""core.summary: the claims table people read (claims.md / .csv / .html / overview figure) and the summary
metrics: two tiers counted apart, untested entries apart, every claim row naming unit, n and CI method."""
from __future__ import annotations

import pandas as pd

from icml25.core.claims import (NOT_REPRODUCED, REPRODUCED, Claim, Evidence, check, gate, untested, verdict,
                                write_claims)
from icml25.core.summary import (claims_table, headline, overview_figure, run_summary, seeds_text, summary_metrics,
                                 to_html, to_markdown)

T3 = "t 95%, n=3 seeds"


def _docs(tmp_path):
    a = [Claim(id="c1", title="Method beats baseline", statement="long statement " * 30, source="paper",
               data="d", test="paired t", threshold="gain >= 0.1", verdict=verdict(True),
               statistic={"huge": list(range(200))}, key_numbers={"gain": 0.1234567, "seeds_win": "3/3"},
               evidence=Evidence(3, "seeds", True, T3, 0.05)),
         Claim(id="c2", title="Second claim", statement="s", source="paper", data="d", test="t", threshold="x",
               verdict=verdict(False, True), statistic=0.3, evidence=Evidence(3, "seeds", False, T3)),
         Claim(id="c3", title="Ours", statement="s", source="ours", data="d", test="t", threshold="x",
               verdict=verdict(True), statistic=1.0, evidence=Evidence(1, "seeds", None, "none (n=1 seeds)")),
         Claim(id="c4", title="Gated", statement="s", source="paper", data="d", test="t", threshold="x",
               verdict=verdict(True), statistic=1.0, evidence=Evidence(3, "seeds", False, T3),
               gates=[gate("above_chance", 0.17, at_least=0.2, text="baseline works")]),
         untested("c5", "robust to JPEG", scale="paper", reason="needs the GenImage test sets", title="Robustness"),
         check("k1", "symmetric", title="Score matrix symmetric", holds=True, data="d", test="t", threshold="0",
               evidence=Evidence(20, "matrices"), key_numbers={"violations": 0}),
         check("k2", "loss starts at ln 2", title="Step-0 loss", holds=False, data="d", test="t", threshold="1e-4",
               evidence=Evidence(3, "runs"), key_numbers={"max_dev": 0.2})]
    b = [Claim(id="t1", title="Table anchors", statement="s", source="paper", data="synthetic", test="t",
               threshold="exact", verdict=verdict(True), statistic=1.0,
               evidence=Evidence(115, "studies", False, "exact count"))]
    pa = write_claims(tmp_path / "a.json", study="alpha", scale="default", data_source="offline", claims=a,
                      config_hash="abc123", paper={"title": "Alpha Paper", "url": "https://x"}, seeds=[0, 1, 2])
    pb = write_claims(tmp_path / "b.json", study="beta", scale="smoke", data_source="offline (synthetic)",
                      claims=b, seeds=[0])
    return [tmp_path / "a.json", tmp_path / "b.json"], pa, pb


def test_headline_counts_tiers_apart_and_never_adds_stand_in_to_the_paper_headline(tmp_path):
    paths, _, _ = _docs(tmp_path)
    table = claims_table(paths)
    assert headline(table) == (
        "on the paper's data: paper claims 1 reproduced · 0 not · 0 inconclusive; "
        "on stand-in data: paper claims 1 reproduced · 1 not · 1 inconclusive, our claims 0 reproduced · 0 not · "
        "1 inconclusive; untested: 1; checks: 1 of 2 hold (1 FAIL)")


def test_markdown_has_tier_sections_rows_with_unit_n_and_ci_untested_and_checks(tmp_path):
    paths, _, _ = _docs(tmp_path)
    md = to_markdown(claims_table(paths), figure="claims_overview.png")
    lines = md.splitlines()
    assert lines[2] == "![studies × claims, coloured by verdict](claims_overview.png)"  # the picture opens it
    i_paper, i_stand = lines.index("## On the paper's data"), lines.index(
        "## On stand-in data (a miniature of the experiment)")
    i_unt = lines.index("## Untested at this scale (never counted)")
    assert i_paper < i_stand < i_unt
    assert "### alpha — Alpha Paper" in lines[i_paper:i_stand]
    assert "scale `default` · seeds `0–2 (3)` · data source `offline` · config hash `abc123`" in md
    c1 = next(line for line in lines if line.startswith("| c1:"))
    assert lines.index(c1) < i_stand
    assert c1 == ("| c1: Method beats baseline | paper | **reproduced** | gain = 0.1235; seeds_win = 3/3 | "
                  "gain >= 0.1 | 3 seeds; CI: t 95%, n=3 seeds; MDE 0.05 |  |")
    for cid in ("c2", "c3", "c4", "t1"):  # stand-in and ours rows sit in the stand-in section
        row = next(line for line in lines if line.startswith(f"| {cid}:"))
        assert i_stand < lines.index(row) < i_unt
    c3 = next(line for line in lines if line.startswith("| c3:"))
    assert "**inconclusive**" in c3 and "evidence rule: 1 independent seeds < 3" in c3
    c4 = next(line for line in lines if line.startswith("| c4:"))
    assert "**inconclusive**" in c4 and "adequacy gate above_chance: 0.17 (needs >= 0.2)" in c4
    assert "| alpha | c5: Robustness | paper | paper | needs the GenImage test sets |" in md
    assert "### alpha — checks: 1 of 2 hold; FAIL: k2" in md
    assert "| k1: Score matrix symmetric | hold | violations = 0 |" in md
    assert "| k2: Step-0 loss | FAIL | max_dev = 0.2 |" in md
    assert max(len(line) for line in lines if line.startswith("|")) < 800  # no flattened 200-value statistics


def test_fallback_key_numbers_are_shortened(tmp_path):
    paths, _, _ = _docs(tmp_path)
    table = claims_table(paths)
    assert table.set_index("claim").loc["c2", "key_numbers"] == "0.3"  # the statistic when no key numbers
    doc_stat = {"key_numbers": {}, "statistic": {"a": list(range(500))}}
    from icml25.core.summary import KEY_NUMBERS_MAX, key_numbers_text
    text = key_numbers_text(doc_stat)
    assert len(text) <= KEY_NUMBERS_MAX and text.endswith("…") and text.startswith("a = [0, 1, 2")


def test_seeds_text():
    assert seeds_text([2, 0, 1]) == "0–2 (3)"
    assert seeds_text([0, 2, 5]) == "0, 2, 5 (3)"
    assert seeds_text([0]) == "0 (1)"
    assert seeds_text([]) == ""


def test_csv_html_figure_and_metrics_follow_the_tiers(tmp_path):
    paths, _, _ = _docs(tmp_path)
    table = run_summary(paths, tmp_path / "claims.md", tmp_path / "claims.csv", tmp_path, track=False,
                        html_out=tmp_path / "claims.html")
    csv = pd.read_csv(tmp_path / "claims.csv", keep_default_na=False)
    assert list(csv["kind"]) == ["claim"] * 5 + ["check", "check", "claim"]
    assert list(csv["tier"]) == ["paper_data", "stand_in", "stand_in", "stand_in", "stand_in", "", "", "stand_in"]
    assert list(csv["verdict"]) == [REPRODUCED, NOT_REPRODUCED, "inconclusive", "inconclusive", "inconclusive",
                                    REPRODUCED, NOT_REPRODUCED, REPRODUCED]
    assert list(csv["status"]) == ["tested"] * 4 + ["untested"] + ["tested"] * 3
    assert list(csv["ci_method"])[:2] == [T3, T3] and csv["gates_failed"][3].startswith("above_chance = 0.17")
    png = (tmp_path / "claims_overview.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    html = (tmp_path / "claims.html").read_text()
    import html as html_lib

    assert html_lib.escape(headline(table)) in html and "<td>k2: Step-0 loss</td><td>FAIL</td>" in html
    assert html.index("data:image/png;base64,") < html.index("On the paper") < html.index("On stand-in data")
    assert "Alpha Paper" in html
    m = summary_metrics(table)
    assert m["verdicts/paper_data/paper/claims_reproduced"] == 1
    assert m["verdicts/stand_in/paper/claims_reproduced"] == 1 and m["verdicts/stand_in/paper/claims_not_reproduced"] == 1
    assert m["verdicts/untested"] == 1 and m["verdicts/checks_failed"] == 1
    assert m["verdicts/paper/claims_reproduced"] == 2  # both tiers, kept for continuity; the headline splits them


def test_overview_figure_alone(tmp_path):
    paths, _, _ = _docs(tmp_path)
    out = overview_figure(claims_table(paths), tmp_path / "o.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


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
    assert run.data.metrics["verdicts/paper_data/paper/claims_reproduced"] == 1.0
    assert run.data.tags["headline"].startswith("on the paper's data: paper claims 1 reproduced")
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"claims.md", "claims.csv", "claims_overview.png"} <= arts
