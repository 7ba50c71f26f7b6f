"""core.io atomic writers and core.claims statistics and schema."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from icml25.core.claims import (INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Claim, bootstrap_ci, load_claims,
                                paired_differences, summarize, verdict, write_claims)
from icml25.core.io import atomic_path, load_npz, read_json, save_npz, write_json


def test_atomic_path_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "out.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text('{"a": 2, "trunc')
            raise RuntimeError("killed mid-write")
    assert read_json(target) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_json_converts_numpy_and_nan(tmp_path):
    path = write_json(tmp_path / "m.json", {"x": np.float32(1.5), "y": float("nan"), "z": np.arange(3)})
    assert json.loads(path.read_text()) == {"x": 1.5, "y": None, "z": [0, 1, 2]}


def test_npz_roundtrip_and_required(tmp_path):
    save_npz(tmp_path / "a.npz", X=np.ones((2, 3)), y=np.zeros(2))
    out = load_npz(tmp_path / "a.npz", required=("X",))
    assert out["X"].shape == (2, 3)
    with pytest.raises(ValueError, match=r"missing array\(s\) \['Z'\]"):
        load_npz(tmp_path / "a.npz", required=("Z",))


def test_verdict_logic():
    assert verdict(True) == REPRODUCED
    assert verdict(False) == INCONCLUSIVE
    assert verdict(False, True) == NOT_REPRODUCED
    assert verdict(True, True) == NOT_REPRODUCED


def test_bootstrap_ci_covers_mean_and_is_deterministic():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, size=200)
    lo, hi = bootstrap_ci(x, seed=3)
    assert lo < x.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 / math.sqrt(200), rel=0.25)
    assert (lo, hi) == bootstrap_ci(x, seed=3)
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([1.0, float("nan")] * 20)


def test_percentile_bootstrap_of_a_handful_of_values_is_refused():
    """With 3 seeds the percentile bootstrap is the [min, max] of the three values: never a 95% interval."""
    with pytest.raises(ValueError, match="3 values < 20.*summarize"):
        bootstrap_ci([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="< 20"):
        summarize([0.1, 0.2, 0.3], method="bootstrap")


def test_summarize_is_the_student_t_interval():
    """For [0.1, 0.2, 0.3]: mean 0.2, s = 0.1, t_{0.975, 2} = 4.302653 → 0.2 ± 0.248414 (hand computed)."""
    s = summarize([0.1, 0.2, 0.3])
    half = 4.302652729911275 * 0.1 / math.sqrt(3)
    assert s["ci_low"] == pytest.approx(0.2 - half, abs=1e-9) and s["ci_high"] == pytest.approx(0.2 + half, abs=1e-9)
    assert s["ci_low"] == pytest.approx(-0.048, abs=5e-4) and s["ci_high"] == pytest.approx(0.448, abs=5e-4)
    assert s["ci_method"] == "t 95%, n=3 seeds" and s["n"] == 3
    one = summarize([2.0])
    assert (one["ci_low"], one["ci_high"], one["ci_method"]) == (2.0, 2.0, "none (n=1 seeds)")


def test_summarize_and_paired_differences():
    s = summarize([1.0, 2.0, 3.0], n_resamples=500)
    assert s["mean"] == 2.0 and s["n"] == 3 and s["ci_low"] <= 2.0 <= s["ci_high"]
    assert paired_differences([3, 4], [1, 1]).tolist() == [2.0, 3.0]
    with pytest.raises(ValueError, match="unequal lengths"):
        paired_differences([1, 2], [1])


def test_claims_roundtrip_and_schema(tmp_path):
    from icml25.core.claims import Evidence

    c = Claim(id="c1", statement="s", source="paper", data="synthetic", test="mean >= 0.9", threshold="0.9",
              verdict=verdict(0.95 >= 0.9), statistic=0.95, metrics={"arm": summarize([0.9, 1.0])},
              evidence=Evidence(2, "seeds", False, "t 95%, n=2 seeds"))
    doc = write_claims(tmp_path / "claims.json", study="x", scale="smoke", data_source="offline", claims=[c])
    assert load_claims(tmp_path / "claims.json") == doc
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim(id="c", statement="s", source="paper", data="d", test="t", threshold="t", verdict="yes")
    bad = dict(doc, claims=[dict(doc["claims"][0], source="blog")])
    write_json(tmp_path / "bad.json", bad)
    with pytest.raises(ValueError, match=r"claims\.0\.source"):
        load_claims(tmp_path / "bad.json")


def test_collect_seed_records_and_common_seeds():
    from icml25.core.claims import collect_seed_records, common_seeds

    docs = [{"arm": "a", "records": {"0": 1, "1": 2}}, {"arm": "a", "records": {"2": 3}}, {"arm": "b", "records": {"1": 4}}]
    records = collect_seed_records(docs)
    assert records == {"a": {0: 1, 1: 2, 2: 3}, "b": {1: 4}}
    assert common_seeds(records, ["a", "b"]) == [1] and common_seeds(records, ["a", "c"]) == []
    with pytest.raises(ValueError, match="arm a seed 1 appears in two train outputs"):
        collect_seed_records([*docs, {"arm": "a", "records": {"1": 5}}])
