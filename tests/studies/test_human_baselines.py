"""Tests of the human_baselines study: the answer rule, the stdlib xlsx reader against openpyxl, Table III against
planted counts, the real file (skipped without the data mirror, ``$ICML25_MIRROR``; see conftest.MIRROR), the
power simulator, the download stage over a loopback HTTP mirror, the stages end to end and the checklist command."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import MIRROR, mirror_skip
from icml25.core.claims import load_claims
from icml25.core.config import ConfigError, build, load_yaml, merge_scale
from icml25.core.download import DownloadError, sha256_file
from icml25.studies import human_baselines as hb
from icml25.studies.human_baselines import checklist as CL
from icml25.studies.human_baselines import data as D
from icml25.studies.human_baselines import evaluate as E
from icml25.studies.human_baselines.__main__ import main as stage_cli
from icml25.studies.human_baselines.config import Config, PowerSim
from icml25.studies.human_baselines.power import calibrate_ai_ability, power_grid, simulate_differences
from icml25.studies.human_baselines.synthetic import write_xlsx
from icml25.studies.human_baselines.table import (ITEMS, SUBSETS, long_table, pct, recompute_test_set_equivalence,
                                                  study_design, table_from_long)
from icml25.studies.human_baselines.train import power_summary
from icml25.studies.human_baselines.workbook import STUDY_COLUMNS, WorkbookSchemaError, check_schema

ROOT = Path(__file__).resolve().parents[2]
REAL_KEY = "kevinlwei/human-baselines/data/lit_review_data.xlsx"
REAL = MIRROR / REAL_KEY
REAL_SHA = "3700439977b475b484ac084c9c52606bc9d343c657ee5d4fca95243638ce5f98"
CONFIG = ROOT / "config" / "studies" / "human_baselines.yaml"
CLAIM_IDS = ["table_iii_anchors", "table_iii_full", "row_sums", "row15_recomputed", "synthetic_planted",
             "parsers_agree", "underpowering"]

REAL_SKIP = mirror_skip(f"the paper's workbook {REAL_KEY} (sha256 {REAL_SHA[:12]}...)")
needs_real = pytest.mark.skipif(not REAL.is_file(), reason=REAL_SKIP)
needs_mirror = pytest.mark.skipif(not MIRROR.is_dir(), reason=mirror_skip("the mirror directory"))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """(path, planted counts) of the seed-0 synthetic workbook."""
    path = tmp_path_factory.mktemp("syn") / "synthetic.xlsx"
    planted = hb.make_synthetic_workbook(path, seed=0)
    return path, planted


@pytest.fixture(scope="module")
def real_sheet():
    if not REAL.is_file():
        pytest.skip(REAL_SKIP)
    return hb.read_workbook(REAL)


@pytest.fixture()
def shared_mirror_url(http_server):
    if not MIRROR.is_dir():
        pytest.skip(mirror_skip("the mirror directory"))
    return http_server(MIRROR)


# ------------------------------------------------------------------------------------------- answer rule


@pytest.mark.parametrize("value, default, expected", [
    ("Yes", None, "Yes"), ("Partial", None, "Yes"), (" yes ", None, "Yes"), ("PARTIAL", "No", "Yes"),
    (True, None, "Yes"), (1, None, "Yes"), (1.0, None, "Yes"), ("TRUE", None, "Yes"), ("1", None, "Yes"),
    ("No", "Yes", "No"), (False, None, "No"), (0, None, "No"), ("false", None, "No"), ("0", "Yes", "No"),
    ("Unknown/Unreported", None, "Unknown"), ("Unknown/Unreported", "No", "No"),
    ("unknown/unreported ", "Yes", "Yes"), ("N/A", None, "Unknown"), ("N/A", "Yes", "Yes"),
    (None, "No", "No"), (None, None, "Unknown"), ("", "Yes", "Yes"), ("   ", None, "Unknown"),
])
def test_normalize_answer_truth_table(value, default, expected):
    assert hb.normalize_answer(value, default) == expected


@pytest.mark.parametrize("value", ["Maybe", "Unknown", 2, 0.5, [1]])
def test_normalize_answer_rejects_other_codes(value):
    with pytest.raises(ValueError, match="unrecognised"):
        hb.normalize_answer(value, None)


def test_normalize_answer_rejects_bad_default():
    with pytest.raises(ValueError, match="default"):
        hb.normalize_answer("Yes", "Unknown")


def test_percent_rounding_half_up_two_decimals():
    assert pct(2, 115) == 1.74 and pct(10, 115) == 8.70 and pct(68, 115) == 59.13
    assert pct(1, 7) == 14.29 and pct(7, 7) == 100.0 and pct(0, 7) == 0.0
    assert pct(1, 800) == 0.13  # exact tie 0.125: half-up (Python's round would give 0.12)
    assert pct(1, 1600) == 0.06  # 0.0625 → 0.06 (below the tie at the 2nd decimal)
    with pytest.raises(ValueError):
        pct(1, 0)


# ------------------------------------------------------------------------------------------- xlsx reader


def test_reader_equals_openpyxl_cell_by_cell(synthetic):
    pytest.importorskip("openpyxl")
    path, _ = synthetic
    ours = hb.read_workbook(path)
    assert ours.shape == (85, 118) and list(ours.index) == list(range(1, 86))
    assert ours.columns[0] == "A" and ours.columns[-1] == "DN"
    assert E.parser_diffs(ours, E.openpyxl_cells(path)) == []


def test_reader_cell_types(synthetic):
    path, _ = synthetic
    sheet = hb.read_workbook(path)
    with zipfile.ZipFile(path) as z:
        xml = z.read("xl/worksheets/sheet1.xml").decode()
        shared = z.read("xl/sharedStrings.xml").decode()
    # a cached HYPERLINK formula string (column D), a rich-text title (two runs, column E), an inline string
    assert '<c r="D1" t="str"><f>HYPERLINK(' in xml and sheet.at[1, "D"].startswith("MMMU: synthetic study 0")
    assert "<rPr><b/></rPr>" in shared and sheet.at[1, "E"] == "GPQA: synthetic study 1"
    assert '<c r="D2" t="inlineStr">' in xml and sheet.at[2, "D"] == "dataset 0"
    # booleans stay bool (not 1/0), numbers are int, the error cell is None
    assert all(isinstance(sheet.at[15, c], bool) for c in STUDY_COLUMNS)
    assert isinstance(sheet.at[4, "D"], int) and 2019 <= sheet.at[4, "D"] <= 2025
    assert 't="e"' in xml and sheet.at[65, STUDY_COLUMNS[5]] is None
    check_schema(sheet)


def test_synthetic_workbook_is_byte_identical_per_seed(tmp_path):
    a, b, c = tmp_path / "a.xlsx", tmp_path / "b.xlsx", tmp_path / "c.xlsx"
    pa, pb, pc = hb.make_synthetic_workbook(a, 0), hb.make_synthetic_workbook(b, 0), hb.make_synthetic_workbook(c, 1)
    assert a.read_bytes() == b.read_bytes() and pa == pb
    assert a.read_bytes() != c.read_bytes()
    assert pc["power_analysis"]["all"]["Yes"] == 2 and pc["significance_test"]["all"]["Yes"] == 10


def test_wrong_sheet_name_raises(synthetic):
    with pytest.raises(WorkbookSchemaError, match=r"no sheet 'Sheet1' \(sheets: \['Final_Data'\]\)"):
        hb.read_workbook(synthetic[0], sheet="Sheet1")


def _rewrite_sheet(src: Path, dest: Path, old: str, new: str) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                assert old.encode() in data
                data = data.replace(old.encode(), new.encode(), 1)
            zout.writestr(info, data)
    return dest


def test_wrong_dimension_raises(synthetic, tmp_path):
    bad = _rewrite_sheet(synthetic[0], tmp_path / "bad.xlsx", 'ref="A1:DN85"', 'ref="A1:DO86"')
    with pytest.raises(WorkbookSchemaError, match=r"dimension 'A1:DO86', expected 'A1:DN85'"):
        hb.read_workbook(bad)
    with pytest.raises(WorkbookSchemaError, match="not an xlsx"):
        (tmp_path / "x.xlsx").write_text("not a zip")
        hb.read_workbook(tmp_path / "x.xlsx")


def test_schema_errors_name_the_cell(synthetic):
    sheet = hb.read_workbook(synthetic[0])
    broken = sheet.copy()
    broken.at[13, "K"] = "stray"
    with pytest.raises(WorkbookSchemaError, match=r"row 13 must be empty, K13"):
        check_schema(broken)
    broken = sheet.copy()
    broken.at[15, "Q"] = "TRUE"
    with pytest.raises(WorkbookSchemaError, match=r"Final_Data!Q15: boolean expected"):
        check_schema(broken)
    broken = sheet.copy()
    broken.at[24, "AB"] = "Maybe"
    with pytest.raises(ValueError, match=r"Final_Data!AB24 \(1.8 Power analysis\): unrecognised answer 'Maybe'"):
        long_table(broken)
    broken = sheet.copy()
    broken.at[18, "A"] = "moved question"
    with pytest.raises(WorkbookSchemaError, match="row 18 must hold a sub-question in column B"):
        check_schema(broken)


def test_wide_encoding_round_trips_types(synthetic):
    sheet = hb.read_workbook(synthetic[0])
    back = D.decode_wide(D.encode_wide(sheet))
    assert E.parser_diffs(sheet, back) == []


# ------------------------------------------------------------------------------------------- Table III


@pytest.mark.parametrize("seed", [0, 3])
def test_table_iii_equals_planted_counts(seed, tmp_path):
    path = tmp_path / "w.xlsx"
    planted = hb.make_synthetic_workbook(path, seed=seed)
    table = hb.table_iii(hb.read_workbook(path))
    assert list(table.index) == [it.name for it in ITEMS]
    for item in ITEMS:
        for subset in SUBSETS:
            n = 115 if subset == "all" else 7
            got = {a: table.at[item.name, (subset, f"{a.lower()}_n")] for a in ("Yes", "No", "Unknown")}
            if item.default is not None:
                assert pd.isna(got["Unknown"]) and pd.isna(table.at[item.name, (subset, "unknown_pct")])
                got["Unknown"] = 0
            assert {a: int(v) for a, v in got.items()} == planted[item.key][subset], (item.key, subset)
            assert sum(int(v) for v in got.values()) == n
            assert table.at[item.name, (subset, "yes_pct")] == pct(int(got["Yes"]), n)


def test_row15_recomputation_equals_cached_values(synthetic):
    sheet = hb.read_workbook(synthetic[0])
    recomputed = recompute_test_set_equivalence(sheet)
    assert all(recomputed[c] == sheet.at[15, c] for c in STUDY_COLUMNS)
    assert 0 < sum(recomputed.values()) < 115  # both branches occur
    flipped = sheet.copy()
    col = next(c for c in STUDY_COLUMNS if isinstance(sheet.at[11, c], int) and sheet.at[17, c] == sheet.at[11, c])
    flipped.at[17, col] = sheet.at[11, col] + 1
    assert recompute_test_set_equivalence(flipped)[col] is False


def test_rigor_scores_are_share_of_yes(synthetic):
    long = long_table(hb.read_workbook(synthetic[0]))
    scores = hb.rigor_scores(long)
    assert len(scores) == 115 and (scores["n_items"] == 16).all()
    first = long[long["study_index"] == 0]
    assert scores.loc[0, "score"] == pytest.approx((first["imputed"] == "Yes").mean())


# ------------------------------------------------------------------------------------------- real file


@needs_real
def test_real_file_sha256_pin():
    assert sha256_file(REAL) == REAL_SHA == D.manifest_entry().sha256
    assert REAL.stat().st_size == D.manifest_entry().size == 66942


def test_real_baseliner_counts(real_sheet):
    design = study_design(real_sheet)
    b = design["B"].dropna().to_numpy()
    assert len(b) == 81
    assert np.median(b) == 8 and list(np.percentile(b, [25, 75])) == [3, 50]


def test_real_table_iii_anchors_and_mechanism(real_sheet):
    check_schema(real_sheet)
    table = hb.table_iii(real_sheet)
    assert int(table.at["1.8 Power analysis", ("all", "yes_n")]) == 2
    assert table.at["1.8 Power analysis", ("all", "yes_pct")] == 1.74
    assert int(table.at["4.1 Significance test", ("all", "yes_n")]) == 10
    assert table.at["4.1 Significance test", ("all", "yes_pct")] == 8.70
    recomputed = recompute_test_set_equivalence(real_sheet)
    assert all(recomputed[c] == real_sheet.at[15, c] for c in STUDY_COLUMNS)
    claim, problems = E.row_sum_claim(table, "real")
    assert claim.verdict == "reproduced" and problems == []


def test_real_reader_equals_openpyxl(real_sheet):
    pytest.importorskip("openpyxl")
    assert E.parser_diffs(real_sheet, E.openpyxl_cells(REAL)) == []


# ------------------------------------------------------------------------------------------- power


def test_type_one_error_calibrated():
    assert 0.03 <= hb.simulate_power(20, 20, 0.0, n_reps=2000, seed=0) <= 0.07


def test_power_monotone_in_b_and_delta():
    by_b = [hb.simulate_power(b, 20, 0.10, n_reps=400, seed=1) for b in (2, 5, 10, 20, 50)]
    assert all(x <= y for x, y in zip(by_b, by_b[1:])) and by_b[-1] > 0.9
    by_delta = power_grid(20, 20, (0.0, 0.05, 0.10), n_reps=400, seed=1)
    assert by_delta[0] < by_delta[1] < by_delta[2]


def test_single_baseliner_has_no_power():
    assert hb.simulate_power(1, 50, 0.10, n_reps=50) == 0.0
    assert hb.simulate_power(0, 50, 0.10, n_reps=50) == 0.0


def test_common_random_numbers_nest_baseliners():
    small = simulate_differences(5, 10, (0.0, 0.1), n_reps=30, seed=7)
    large = simulate_differences(12, 10, (0.0, 0.1), n_reps=30, seed=7)
    np.testing.assert_array_equal(small, large[:, :, :5])
    # the AI's answers are monotone in δ draw by draw, the human's do not change: D never decreases
    assert (large[1] >= large[0]).all()


def test_calibration_hits_the_gap():
    from scipy.special import expit

    rng = np.random.default_rng(99)
    theta, d = rng.normal(0, 1, 200_000), rng.normal(-1.2, 1.5, 200_000)
    human = expit(theta - d).mean()
    ai = expit(calibrate_ai_ability(0.05) - d).mean()
    assert ai - human == pytest.approx(0.05, abs=0.005)
    with pytest.raises(ValueError, match="unreachable"):
        calibrate_ai_ability(0.9)


def test_bootstrap_test_option_runs():
    p = power_grid(10, 20, (0.0, 0.10), n_reps=30, seed=0, test="bootstrap", bootstrap_resamples=200)
    assert p.shape == (2,) and 0 <= p[0] <= p[1] <= 1
    with pytest.raises(ValueError, match="test"):
        power_grid(10, 20, (0.0,), test="z")


# ------------------------------------------------------------------------------------------- claims logic


def _fake_power(shares_pass: list[bool], type1: float) -> pd.DataFrame:
    rows = []
    for seed, ok in enumerate(shares_pass):
        for i in range(10):
            p = 0.1 if ok else 0.95
            for delta in (0.0, 0.05, 0.1):
                rows.append([seed, "main", i, f"s{i}", 10, 20, delta, p, 1, 1.5, 20, 200])
        rows.append([seed, "calibration", -1, "__calibration__", 20, 20, 0.0, type1, 1, 1.5, 20, 2000])
    from icml25.studies.human_baselines.train import POWER_COLUMNS

    return pd.DataFrame(rows, columns=POWER_COLUMNS)


def test_underpowering_claim_verdicts():
    cfg = build(Config, merge_scale(load_yaml(CONFIG), "default"), "human_baselines")
    ok = E.underpowering_claim(_fake_power([True] * 3, 0.05), cfg, True, "real")[0]
    assert ok.verdict == "reproduced"
    assert (ok.evidence.n, ok.evidence.unit, ok.evidence.paper_data) == (3, "seeds", True)
    assert ok.evidence.ci_method == "t 95%, n=3 seeds" and [g.name for g in ok.gates] == ["type1_calibrated"]
    assert E.underpowering_claim(_fake_power([False] * 3, 0.05), cfg, True, "real")[0].verdict == "not reproduced"
    assert E.underpowering_claim(_fake_power([True, False, True], 0.05), cfg, True, "r")[0].verdict == "inconclusive"
    bad_cal = E.underpowering_claim(_fake_power([True] * 3, 0.20), cfg, True, "real")[0]  # failed gate
    assert bad_cal.verdict == "inconclusive" and "adequacy gate type1_calibrated" in bad_cal.note
    assert bad_cal.gates[0].passed is False and bad_cal.gates[0].value == pytest.approx(0.20)
    synth = E.underpowering_claim(_fake_power([True] * 3, 0.05), cfg, False, "synthetic")[0]
    assert synth.status == "untested" and synth.testable_at == "default" and "synthetic" in synth.note
    assert E.underpowering_claim(None, cfg, True, "real")[0].status == "untested"
    assert power_summary(_fake_power([True], 0.05), cfg.power)[0]["median_0.05"] == 0.1


@pytest.mark.parametrize("got, expected", [
    ({"1.8 Power analysis": (2, 1.74), "4.1 Significance test": (10, 8.70)}, "reproduced"),
    ({"1.8 Power analysis": (2, 1.74), "4.1 Significance test": (10, 8.71)}, "not reproduced"),
    ({"1.8 Power analysis": (3, 1.74), "4.1 Significance test": (10, 8.70)}, "not reproduced"),
    ({"1.8 Power analysis": (2, 1.74)}, "not reproduced"),
])
def test_decide_anchors(got, expected):
    assert E.decide_anchors(got) == expected


@pytest.mark.parametrize("mismatches, expected", [(0, "reproduced"), (1, "not reproduced"),
                                                  (None, "inconclusive")])
def test_decide_full_table(mismatches, expected):
    assert E.decide_full_table(mismatches) == expected


@pytest.mark.parametrize("share, median, expected", [
    # share mean 0.2, sd 0.1: t(2) CI 0.2 ± 4.303·0.1/√3 = [-0.048, 0.448] < 0.5; median likewise
    ([0.1, 0.2, 0.3], [0.1, 0.2, 0.3], "reproduced"),
    ([0.3, 0.4, 0.5], [0.1, 0.2, 0.3], "inconclusive"),  # share CI [0.152, 0.648] spans 0.5
    ([0.6, 0.7, 0.8], [0.1, 0.2, 0.3], "inconclusive"),  # share CI [0.452, 0.948] still spans 0.5
    ([0.7, 0.7, 0.7], [0.1, 0.1, 0.1], "not reproduced"),  # share CI [0.7, 0.7] >= 0.5
    ([0.1, 0.1, 0.1], [0.5, 0.5, 0.5], "not reproduced"),  # median = 0.5 exactly: CI low >= 0.5
    ([0.1], [0.1], "inconclusive"),  # one seed: no interval
    ([], [], "inconclusive"),
])
def test_decide_underpowering(share, median, expected):
    v, st = E.decide_underpowering(share, median)
    assert v == expected
    if share == [0.1, 0.2, 0.3]:
        assert st["share_ci"] == pytest.approx([0.2 - 4.302652729911275 * 0.1 / 3 ** 0.5,
                                                0.2 + 4.302652729911275 * 0.1 / 3 ** 0.5])


def test_mechanism_entries_are_checks(synthetic):
    sheet = hb.read_workbook(synthetic[0])
    table = hb.table_iii(sheet)
    c, problems = E.row_sum_claim(table, "x")
    assert (c.kind, c.holds, problems) == ("check", True, [])
    broken = table.copy()
    broken.at["1.8 Power analysis", ("all", "no_n")] += 1
    c, problems = E.row_sum_claim(broken, "x")
    assert c.holds is False and c.verdict == "not reproduced" and len(problems) == 1
    c, _ = E.row15_claim(sheet, "x")
    assert c.kind == "check" and c.holds is True and c.key_numbers == {"equal": "115/115"}


def test_anchor_and_reference_claims(synthetic):
    table = hb.table_iii(hb.read_workbook(synthetic[0]))  # planted anchors 2 and 10
    real = E.anchors_claim(table, True, "x")
    assert real.verdict == "reproduced" and real.evidence.paper_data is True and real.evidence.n == 115
    assert real.evidence.ci_method.startswith("exact count")
    synth = E.anchors_claim(table, False, "x")  # the synthetic workbook plants the anchors: untested there
    assert synth.status == "untested" and synth.testable_at == "default" and synth.evidence.paper_data is False
    changed = table.copy()
    changed.at["4.1 Significance test", ("all", "yes_n")] = 9
    assert E.anchors_claim(changed, True, "x").verdict == "not reproduced"
    claim, mismatches = E.full_table_claim(table, table.copy(), True, "x", "ref.csv")
    assert claim.verdict == "reproduced" and mismatches == []
    claim, mismatches = E.full_table_claim(table, changed, True, "x", "ref.csv")
    assert claim.verdict == "not reproduced" and len(mismatches) == 1
    assert "4.1 Significance test all yes_n" in claim.note
    no_ref = E.full_table_claim(table, None, True, "x", None)[0]
    assert no_ref.status == "untested" and "reference_table" in no_ref.note and len(no_ref.statistic) == 16
    assert E.full_table_claim(table, table.copy(), False, "x", "ref.csv")[0].status == "untested"


def test_config_scales_build_and_bad_keys_fail():
    raw = load_yaml(CONFIG)
    for scale in ("smoke", "default", "paper"):
        cfg = build(Config, merge_scale(raw, scale), "human_baselines")
        assert "table_iii" in cfg.arms
    assert build(Config, merge_scale(raw, "paper"), "hb").power.sensitivity.active
    with pytest.raises(ConfigError, match="arms: must include table_iii"):
        build(Config, merge_scale(raw, "smoke", {"arms": ["power_sim"]}), "hb")
    with pytest.raises(ConfigError, match=r"hb.power.nreps: unknown key"):
        build(Config, merge_scale(raw, "smoke", {"power": {"nreps": 3}}), "hb")
    with pytest.raises(ConfigError, match="data_mode"):
        build(Config, merge_scale(raw, "smoke", {"data_mode": "maybe"}), "hb")
    with pytest.raises(ConfigError, match="deltas"):
        build(PowerSim, {"deltas": [0.1], "claim_delta": 0.1}, "power")


# ------------------------------------------------------------------------------------------- download


def _config_file(tmp_path: Path, **overrides) -> Path:
    raw = load_yaml(CONFIG)
    raw.update(overrides)
    import yaml

    path = tmp_path / "hb.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _download(tmp_path: Path, mirror: str | None, config: Path = CONFIG, data_source: str = "remote") -> Path:
    raw = tmp_path / "raw"
    args = ["download", "--scale", "smoke", "--no-track", "--config", str(config), "--data-source", data_source,
            "--out", str(raw / "workbook.xlsx"), str(raw / "source.json")]
    if mirror:
        args += ["--mirror", mirror]
    assert stage_cli(args) == 0
    return raw


@needs_real
def test_download_stage_over_loopback_http_mirror(tmp_path, shared_mirror_url):
    raw = _download(tmp_path, shared_mirror_url)
    source = json.loads((raw / "source.json").read_text())
    assert source["source"] == "mirror" and source["sha256"] == REAL_SHA
    assert source["mirror"].startswith("http://127.0.0.1:") and "CC BY-NC-SA 4.0" in source["licence"]
    assert (raw / "workbook.xlsx").read_bytes() == REAL.read_bytes()
    assert not list(raw.glob(".*part"))


@needs_real
def test_download_stage_from_directory_mirror(tmp_path):
    raw = _download(tmp_path, str(MIRROR))
    assert json.loads((raw / "source.json").read_text())["source"] == "mirror"
    assert sha256_file(raw / "workbook.xlsx") == REAL_SHA


@needs_real
def test_download_corrupt_copy_fails_and_leaves_nothing(tmp_path, http_server):
    srv = tmp_path / "srv" / REAL_KEY
    srv.parent.mkdir(parents=True)
    data = bytearray(REAL.read_bytes())
    data[5000] ^= 0xFF  # same size, one flipped byte
    srv.write_bytes(bytes(data))
    base = http_server(tmp_path / "srv")
    config = _config_file(tmp_path, try_origin=False)
    with pytest.raises(DownloadError, match=f"sha256 mismatch.*expected {REAL_SHA}"):
        _download(tmp_path / "out", base, config)
    raw = tmp_path / "out" / "raw"
    assert not (raw / "workbook.xlsx").exists() and not (raw / "source.json").exists()
    assert list(raw.iterdir()) == []


@needs_mirror
def test_download_404_is_an_error_unless_auto(tmp_path, http_server):
    base = http_server(tmp_path)  # an empty directory: every path is a 404
    with pytest.raises(DownloadError, match=r"HTTP 404.*data_mode: auto"):
        _download(tmp_path / "a", base, _config_file(tmp_path, try_origin=False))
    assert not (tmp_path / "a" / "raw" / "workbook.xlsx").exists()
    raw = _download(tmp_path / "b", base, _config_file(tmp_path, try_origin=False, data_mode="auto"))
    source = json.loads((raw / "source.json").read_text())
    assert source["source"] == "synthetic" and source["fallback"] is True
    assert "404" in source["attempts"][0]["error"]
    check_schema(hb.read_workbook(raw / "workbook.xlsx"))


def test_offline_download_is_synthetic(tmp_path):
    raw = _download(tmp_path, None, data_source="offline")
    source = json.loads((raw / "source.json").read_text())
    assert source["source"] == "synthetic" and source["sha256"] == sha256_file(raw / "workbook.xlsx")
    assert source["planted"]["power_analysis"]["all"]["Yes"] == 2


# ------------------------------------------------------------------------------------------- stages


def _run_stages(tmp_path: Path, data_source: str = "offline", mirror: str | None = None,
                extra: list[str] | None = None) -> Path:
    r = tmp_path / "human_baselines"
    common = ["--scale", "smoke", "--config", str(CONFIG), "--data-source", data_source,
              "--results", str(tmp_path), *(extra or [])]
    if mirror:
        common += ["--mirror", mirror]
    raw = [str(r / "raw/workbook.xlsx"), str(r / "raw/source.json")]
    proc = [str(r / "interim/wide.parquet"), str(r / "processed/long.parquet")]
    assert stage_cli(["download", *common, "--out", *raw]) == 0
    assert stage_cli(["preprocess", *common, "--in", *raw, "--out", *proc]) == 0
    models = []
    for arm in ("table_iii", "rigor_score", "power_sim"):
        out = str(r / "models" / arm / "chunk0.csv")
        seeds = ["--seeds", "0"] if arm == "power_sim" else []
        assert stage_cli(["train", *common, "--arm", arm, *seeds, "--in", *proc, "--out", out]) == 0
        models.append(out)
    assert stage_cli(["evaluate", *common, "--in", *raw, proc[1], *models, "--out", str(r / "claims.json"),
                      str(r / "metrics/eval.json"), str(r / "metrics/table_iii.csv")]) == 0
    figs = [str(r / "figures" / f) for f in ("checklist_share.png", "power_vs_baseliners.png", "rigor_by_year.png")]
    assert stage_cli(["report", *common, "--in", str(r / "metrics/eval.json"), str(r / "metrics/table_iii.csv"),
                      *models[1:], "--out", *figs, str(r / "report.md")]) == 0
    return r


def test_smoke_all_stages_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.setenv("ICML25_PROGRESS", "0")
    r = _run_stages(tmp_path)
    doc = load_claims(r / "claims.json")
    assert [c["id"] for c in doc["claims"]] == CLAIM_IDS
    claims = {c["id"]: c for c in doc["claims"]}
    for cid in ("row_sums", "row15_recomputed", "synthetic_planted", "parsers_agree"):
        assert claims[cid]["kind"] == "check" and claims[cid]["holds"] is True, cid
    for cid in ("table_iii_anchors", "table_iii_full", "underpowering"):  # statements about the real workbook
        c = claims[cid]
        assert c["kind"] == "claim" and c["status"] == "untested" and c["testable_at"] == "default", cid
        assert c["evidence"]["paper_data"] is False and "synthetic" in c["note"] and "synthetic" in c["data"], cid
    assert doc["data_source"] == "offline (synthetic)"
    assert doc["paper"]["title"].startswith("Position: Human Baselines")
    table = pd.read_csv(r / "metrics/table_iii.csv")
    assert len(table) == 16 and table.loc[table["item"] == "1.8 Power analysis", "all_yes_n"].item() == 2
    assert (r / "figures/power_vs_baseliners.png").stat().st_size > 1000
    assert "synthetic" in (r / "report.md").read_text()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("icml25/human_baselines").experiment_id])
    download = next(x for x in runs if x.data.tags.get("stage") == "download")
    assert download.data.tags["workbook_source"] == "synthetic" and download.data.tags["licence"]
    train = [x for x in runs if x.data.tags.get("arm") == "power_sim" and x.data.tags.get("stage") == "train"]
    (job,) = train  # a job of one seed is that seed's run (no nested run), tagged seed
    assert job.data.tags["seed"] == "0" and job.data.tags["run_level"] == "job"
    assert {"train/power_median", "train/type1", "train/share_power_ge_0.8"} <= set(job.data.metrics)
    steps = [m.step for m in client.get_metric_history(job.info.run_id, "train/power_median")]
    deltas = load_yaml(ROOT / "config/studies/human_baselines.yaml")["power"]["deltas"]
    assert sorted(steps) == list(range(len(deltas)))
    assert {a.path for a in client.list_artifacts(job.info.run_id, "model")} == {"model/chunk0.csv",
                                                                                  "model/config.json"}


@needs_real
def test_remote_stages_reproduce_table_iii_anchors(tmp_path, shared_mirror_url, monkeypatch):
    monkeypatch.setenv("ICML25_PROGRESS", "0")
    r = _run_stages(tmp_path, "remote", shared_mirror_url, extra=["--no-track"])
    claims = {c["id"]: c for c in load_claims(r / "claims.json")["claims"]}
    assert claims["table_iii_anchors"]["verdict"] == "reproduced"
    ev = claims["table_iii_anchors"]["evidence"]
    assert (ev["n"], ev["unit"], ev["paper_data"]) == (115, "studies", True) and ev["ci_method"].startswith("exact")
    assert claims["table_iii_full"]["status"] == "untested"  # no reference table configured
    assert claims["underpowering"]["evidence"]["paper_data"] is True
    assert claims["underpowering"]["evidence"]["ci_method"] == "none (n=1 seeds)"  # smoke: one seed
    assert claims["underpowering"]["verdict"] == "inconclusive"
    assert claims["table_iii_anchors"]["data"].startswith("real workbook kevinlwei/human-baselines@46d4b1b")
    assert claims["row15_recomputed"]["statistic"] == {"equal": 115}
    assert claims["parsers_agree"]["verdict"] == "reproduced"
    assert "CC BY-NC-SA 4.0" in (r / "report.md").read_text()


def test_stages_are_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML25_PROGRESS", "0")
    a = _run_stages(tmp_path / "a", extra=["--no-track"])
    b = _run_stages(tmp_path / "b", extra=["--no-track"])
    for rel in ("models/power_sim/chunk0.csv", "metrics/table_iii.csv", "raw/workbook.xlsx"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert json.loads((a / "claims.json").read_text()) == json.loads((b / "claims.json").read_text())


def test_train_rejects_unknown_arm(tmp_path):
    with pytest.raises(SystemExit, match="arm"):
        stage_cli(["train", "--scale", "smoke", "--no-track", "--config", str(CONFIG), "--arm", "magic",
                   "--in", "a", "b", "--out", str(tmp_path / "x.csv")])


# ------------------------------------------------------------------------------------------- checklist CLI


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icml25.studies.human_baselines.checklist", *args],
                          capture_output=True, text=True, timeout=60)


def test_checklist_help_and_template_round_trip(tmp_path):
    out = _cli("--help")
    assert out.returncode == 0 and "--min-score" in out.stdout
    template = tmp_path / "mine.yaml"
    template.write_text(CL.template("yaml"))
    assert CL.load_answers(template) == {it.key: None for it in ITEMS}
    result = CL.score_checklist(CL.load_answers(template))
    assert result["met"] == 0 and len(result["missing"]) == 16
    assert all(r["status"] == "not reported" for r in result["items"])


def test_checklist_scores_yaml_and_csv(tmp_path):
    yaml_file = tmp_path / "study.yaml"
    yaml_file.write_text("power_analysis: Yes\n'4.1': Partial\nDemographics: no\nethics_review: N/A\n"
                         "data_availability: unreported\n")
    result = CL.score_checklist(CL.load_answers(yaml_file), rigor=[0.0, 0.1, 0.2, 0.5])
    status = {r["key"]: r["status"] for r in result["items"]}
    assert status["power_analysis"] == "met" and status["significance_test"] == "partial"
    assert status["demographics"] == "not met" and status["ethics_review"] == "not reported"
    assert status["data_availability"] == "not reported"
    assert result["met"] == 2 and result["score"] == 2 / 16 and result["percentile"] == 50.0
    csv_file = tmp_path / "study.csv"
    csv_file.write_text("item,answer\n" + "".join(f"{it.key},Yes\n" for it in ITEMS))
    out = _cli(str(csv_file), "--min-score", "0.9", "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0 and "score: 16/16" in out.stdout
    assert json.loads((tmp_path / "r.json").read_text())["score"] == 1.0
    out = _cli(str(yaml_file), "--min-score", "0.5")
    assert out.returncode == 1 and "→ Give humans and the AI the same test items" in out.stdout


def test_checklist_bad_input_names_item(tmp_path):
    bad_item = tmp_path / "a.yaml"
    bad_item.write_text("power_analysiss: Yes\n")
    out = _cli(str(bad_item))
    assert out.returncode == 2 and "unknown checklist item 'power_analysiss'" in out.stderr
    bad_answer = tmp_path / "b.csv"
    bad_answer.write_text("item,answer\n1.8,Maybe\n")
    out = _cli(str(bad_answer))
    assert out.returncode == 2 and "power_analysis (1.8 Power analysis)" in out.stderr
    twice = tmp_path / "c.csv"
    twice.write_text("item,answer\n1.8,Yes\npower analysis,No\n")
    with pytest.raises(CL.ChecklistError, match="answered twice"):
        CL.load_answers(twice)
    with pytest.raises(CL.ChecklistError, match="unsupported extension"):
        (tmp_path / "d.txt").write_text("x")
        CL.load_answers(tmp_path / "d.txt")


def test_public_api_exports():
    from icml25.studies.human_baselines import checklist, power, synthetic, table, workbook

    assert hb.read_workbook is workbook.read_workbook and hb.table_iii is table.table_iii
    assert hb.normalize_answer is table.normalize_answer and hb.simulate_power is power.simulate_power
    assert hb.make_synthetic_workbook is synthetic.make_synthetic_workbook
    assert hb.score_checklist is checklist.score_checklist
    assert hb.normalize_answer(" partial ", None) == "Yes" and hb.simulate_power(1, 20, 0.1) == 0.0
    with pytest.raises(AttributeError):
        hb.not_an_export  # noqa: B018


def test_write_xlsx_rejects_nothing_silently(tmp_path):
    """A workbook holding only a header is read with None elsewhere; the schema check then names what is off."""
    path = write_xlsx(tmp_path / "tiny.xlsx", {(1, "A"): ("s", "Paper Title")})
    sheet = hb.read_workbook(path)  # dimension is declared A1:DN85 by the writer
    assert sheet.at[1, "A"] == "Paper Title" and sheet.at[85, "DN"] is None
    with pytest.raises(WorkbookSchemaError, match="A3: section header expected"):
        check_schema(sheet)
    with pytest.raises(ValueError):
        table_from_long(pd.DataFrame({"item": []}))
    shutil.rmtree(tmp_path)


def test_rehearsal_workbook_is_the_released_layout_with_planted_counts(tmp_path):
    """The paper-scale rehearsal's miniature (human_baselines/rehearsal.py) is served under the real row's mirror
    path, parses as the released workbook (A1:DN85, 115 studies) and its Table III equals the counts planted for
    its seed; the whole rehearsal runs in tests/test_rehearsal.py."""
    from icml25.core import rehearsal as R
    from icml25.core.download import read_manifest
    from icml25.studies.human_baselines import rehearsal as HR

    entries = read_manifest(R.package_dir("human_baselines") / "manifest.csv", rehearsal=False)
    assert HR.write_miniatures(tmp_path, entries) == [HR.ROW]
    path = tmp_path / entries[HR.ROW].mirror_path
    planted = hb.make_synthetic_workbook(tmp_path / "planted.xlsx", seed=HR.SEED)
    assert path.read_bytes() == (tmp_path / "planted.xlsx").read_bytes()
    table = hb.table_iii(hb.read_workbook(path))
    item = ITEMS[0]
    got = {a: table.at[item.name, ("all", f"{a.lower()}_n")] for a in ("Yes", "No")}
    assert {a: int(v) for a, v in got.items()} == {a: planted[item.key]["all"][a] for a in ("Yes", "No")}
