"""Tests of the morphing_flow study: the Flow identities (claim 1) on random inputs with |x| >> T, gradchecks of
Flow and Morph, Morph's inner step, the forecaster's pieces, TSLib split borders and the train-only scaler, the
generator, CSV round trips and bad input, the pmdarima files, downloads through a loopback HTTP and a directory
mirror, the verdict functions (each outcome and its boundaries) and a smoke run of every arm."""
from __future__ import annotations

import hashlib
import io
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings as hsettings, strategies as st
from scipy import stats

from icml25.core.download import DownloadError
from icml25.studies import morphing_flow as mof
from icml25.studies.morphing_flow import data as D
from icml25.studies.morphing_flow import evaluate as E
from icml25.studies.morphing_flow import settings as S
from icml25.studies.morphing_flow.experiment import run, segment_mask
from icml25.studies.morphing_flow.method import Morph, SplineFlow, instance_norm, nll_finetune
from icml25.studies.morphing_flow.model import DLinearBackbone, MoFForecaster, PatchMambaBackbone, selective_scan

MIRROR = Path(__file__).resolve().parents[2].parent.parent / "shared" / "mirror"
if not MIRROR.is_dir():  # worktrees live one level deeper than the main checkout
    MIRROR = Path("/work/shared/mirror")
ETTH1_SHA = "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066"


def _random_flow(C=3, K=16, tails="linear", spline="linear", seed=0, scale=2.0) -> SplineFlow:
    torch.manual_seed(seed)
    f = SplineFlow(C, K, 3.0, tails, spline).double()
    with torch.no_grad():
        f.a.normal_(0, scale)
        f.b.normal_(0, scale)
        if f.c is not None:
            f.c.normal_(0, 1.0)
    return f


# ------------------------------------------------------------------------------------ claim-1 identities


@pytest.mark.parametrize("spline", ["linear", "rq"])
@pytest.mark.parametrize("tails", ["linear", "identity"])
def test_flow_inverse_monotone_logdet_with_far_tails(spline, tails):
    f = _random_flow(tails=tails, spline=spline)
    x = torch.linspace(-50, 50, 4001, dtype=torch.float64).expand(4, 3, -1).contiguous().requires_grad_(True)
    mod = torch.tensor([[1.0, 1.0], [0.2, 1.7], [1.9, 0.4], [0.01, 1.99]], dtype=torch.float64)
    z, logdet = f(x, mod)
    dz, = torch.autograd.grad(z.sum(), x)
    tol = 1e-10 if spline == "linear" else 1e-9  # the rq inverse solves a quadratic
    assert (f.inverse(z, mod) - x).abs().max() <= tol
    assert bool((z.diff(dim=-1) > 0).all())
    assert (logdet - dz.log()).abs().max() <= 1e-8
    if tails == "identity":  # extremes preserved exactly
        far = x.abs() > 3.0
        assert torch.equal(z[far], x[far].detach()) and torch.equal(logdet[far], torch.zeros_like(logdet[far]))


@hsettings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=30), st.integers(0, 10_000))
def test_flow_roundtrip_property(values, seed):
    f = _random_flow(C=1, seed=seed, scale=3.0)
    x = torch.tensor(values, dtype=torch.float64).view(1, 1, -1)
    z, _ = f(x)
    assert torch.allclose(f.inverse(z), x, rtol=0, atol=1e-10 * max(1.0, float(x.abs().max()) / 50))


@pytest.mark.parametrize("spline", ["linear", "rq"])
def test_zero_logits_give_the_identity(spline):
    f = SplineFlow(2, spline=spline).double()
    x = torch.linspace(-50, 50, 1001, dtype=torch.float64).expand(3, 2, -1).contiguous()
    z, logdet = f(x)
    if spline == "linear":  # bit for bit
        assert torch.equal(z, x) and torch.equal(logdet, torch.zeros_like(x))
        assert torch.equal(f.inverse(x), x)
    else:
        assert (z - x).abs().max() <= 1e-12 and logdet.abs().max() <= 1e-12


def test_piecewise_linear_spline_known_values():
    """K = 2, T = 1: a = (log 3, 0) gives widths 2(d + (1-2d) (3/4, 1/4)), b = 0 heights 1 each."""
    f = SplineFlow(1, n_bins=2, bound=1.0).double()
    with torch.no_grad():
        f.a.copy_(torch.tensor([[math.log(3.0), 0.0]], dtype=torch.float64))
    d = 1e-3
    w1 = 2 * (d + (1 - 2 * d) * 0.75)
    x1 = -1 + w1  # interior knot
    s1, s2 = 1.0 / w1, 1.0 / (2 - w1)
    x = torch.tensor([[[-2.0, -0.5, 0.9, 4.0]]], dtype=torch.float64)
    with torch.no_grad():
        z, logdet = f(x)
    expected = [-1 + s1 * (-1.0), -1 + s1 * 0.5, 0 + s2 * (0.9 - x1), 1 + s2 * 3.0]  # linear tails
    np.testing.assert_allclose(z.numpy().ravel(), expected, rtol=0, atol=1e-14)
    np.testing.assert_allclose(logdet.numpy().ravel(), np.log([s1, s1, s2, s2]), rtol=0, atol=1e-14)


def test_gradcheck_flow_and_morph():
    f = _random_flow(C=2, K=4, seed=3, scale=1.0)
    f.a.requires_grad_(True)
    x = (torch.rand(2, 2, 5, dtype=torch.float64) * 8 - 4).requires_grad_(True)
    mod = (torch.rand(2, 2, dtype=torch.float64) + 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x, m: f(x, m)[0], (x, mod))
    assert torch.autograd.gradcheck(lambda x, m: f.inverse(x, m), (x, mod))
    assert torch.autograd.gradcheck(lambda x, m: f(x, m)[1], (x, mod))
    torch.manual_seed(0)
    morph = Morph(2, 5, rank=4, inner_steps=2).double()
    with torch.no_grad():
        morph.G.normal_()
    z = torch.randn(3, 2, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(morph, (z,))


def test_zero_G_gives_m_one_and_morph_one_is_bitwise_flow_only():
    torch.manual_seed(1)
    morph = Morph(3, 8)
    assert torch.equal(morph(torch.randn(5, 3, 8)), torch.ones(5, 2))
    model = MoFForecaster("linear", 3, 8, 4, {"morph_mode": "ttt_layer"})
    with torch.no_grad():
        model.flow.a.normal_()
        model.flow.b.normal_()
        model.morph.G.normal_()  # the check zeroes G itself
    x = torch.randn(6, 8, 3)
    assert E.morph_one_bitwise(model, x)
    flow_only = MoFForecaster("linear", 3, 8, 4, {"morph_mode": "off"})
    with torch.no_grad():
        flow_only.flow.a.normal_()
    assert E.morph_one_bitwise(flow_only, x)


def test_morph_inner_step_is_the_gradient_of_the_inner_loss():
    torch.manual_seed(2)
    morph = Morph(2, 6, rank=5, inner_steps=1, inner_lr=0.1).double()
    with torch.no_grad():
        morph.W0.add_(0.3 * torch.randn(5, 5, dtype=torch.float64))
    z = torch.randn(4, 2, 6, dtype=torch.float64)
    W1, q = morph.adapt(z)
    u = z.reshape(4, -1)
    k = morph.theta_k(u)
    W = morph.W0.detach().expand(4, -1, -1).clone().requires_grad_(True)
    g, = torch.autograd.grad(morph.inner_loss(W, q.detach(), k.detach()).sum(), W)
    torch.testing.assert_close(W1.detach(), W.detach() - 0.1 * g, rtol=0, atol=1e-13)
    # the inner step lowers the inner loss of every instance
    assert bool((morph.inner_loss(W1, q, k) < morph.inner_loss(W.detach(), q, k)).all())
    assert sorted(set(morph.mask.tolist())) <= [0.0, 1.0]


def test_flow_identities_on_a_trained_style_model():
    torch.manual_seed(4)
    model = MoFForecaster("linear", 2, 12, 6, {})
    with torch.no_grad():
        model.flow.a.normal_(0, 2)
        model.flow.b.normal_(0, 2)
        model.morph.G.normal_()
    out = E.flow_identities(model, torch.randn(4, 12, 2))
    holds, stat = E.check_flow_identities([out["inverse_err"]], [out["logdet_err"]], [out["monotone"]],
                                          [out["zero_identity_err"]], [out["m1_bitwise"]])
    assert holds, stat
    assert out["inverse_err"] <= 1e-10 and out["zero_identity_err"] == 0.0


# ------------------------------------------------------------------------------ method pieces and model


def test_excess_kurtosis_matches_scipy_and_known_values():
    rng = np.random.default_rng(0)
    x = rng.standard_t(5, size=(3, 2000))
    np.testing.assert_allclose(mof.excess_kurtosis(x, axis=-1), stats.kurtosis(x, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(mof.excess_kurtosis(x.T, axis=0), stats.kurtosis(x, axis=-1), rtol=1e-12)
    assert mof.excess_kurtosis(np.array([-1.0, 1.0, -1.0, 1.0])) == pytest.approx(-2.0, abs=1e-15)
    assert np.isnan(mof.excess_kurtosis(np.ones(5)))


def test_revin_forecaster_is_instance_norm_plus_linear():
    torch.manual_seed(0)
    model = MoFForecaster("linear", 3, 10, 4, {"flow": False, "morph_mode": "off"})
    x = torch.randn(5, 10, 3) * 4 + 2
    xt = x.transpose(1, 2)
    mu, sd = xt.mean(-1, keepdim=True), xt.std(-1, keepdim=True, unbiased=False) + 1e-5
    expected = (mu + sd * model.backbone.proj((xt - mu) / sd)).transpose(1, 2)
    torch.testing.assert_close(model(x), expected)
    assert model.flow is None and model.morph is None
    xn, _, _ = instance_norm(xt)
    torch.testing.assert_close(xn.mean(-1), torch.zeros(5, 3), atol=1e-6, rtol=0)


def test_nll_finetune_lowers_the_window_nll_and_is_per_instance():
    torch.manual_seed(0)
    flow = SplineFlow(2, n_bins=8).double()
    x = torch.distributions.StudentT(2.5).sample((3, 2, 48)).double()
    a, b = nll_finetune(flow, x, steps=5, lr=1e-2, rho=1.0)
    nll = lambda z, ld: (0.5 * z ** 2 - ld).mean(dim=(1, 2))  # noqa: E731
    before = nll(*flow(x))
    after = nll(*flow.transform(x, a.detach(), b.detach()))
    assert bool((after < before).all())
    a0, _ = nll_finetune(flow, x[:1])
    torch.testing.assert_close(a0.detach()[0], a.detach()[0], rtol=0, atol=1e-12)
    assert flow.a.grad is None  # the test-time steps leave the outer gradients alone


def test_dlinear_constant_input_and_mamba_causality():
    torch.manual_seed(0)
    dl = DLinearBackbone(12, 5, kernel=5)
    c = torch.full((2, 3, 12), 1.5)
    torch.testing.assert_close(dl(c), dl.trend(c) + dl.season(torch.zeros_like(c)))
    N, Dm, T, S_ = 2, 3, 7, 4
    u, delta = torch.randn(N, Dm, T), torch.rand(N, Dm, T)
    A, Bm, Cm, Dv = -torch.rand(Dm, S_), torch.randn(N, S_, T), torch.randn(N, S_, T), torch.randn(Dm)
    y = selective_scan(u, delta, A, Bm, Cm, Dv)
    u2 = u.clone()
    u2[..., 4:] += 10.0  # later inputs do not change earlier outputs
    torch.testing.assert_close(selective_scan(u2, delta, A, Bm, Cm, Dv)[..., :4], y[..., :4])
    # one step by hand: h_0 = dB u_0, y_0 = C h_0 + D u_0
    h0 = (delta[..., 0] * u[..., 0]).unsqueeze(-1) * Bm[:, None, :, 0]
    torch.testing.assert_close(y[..., 0], (h0 * Cm[:, None, :, 0]).sum(-1) + Dv * u[..., 0])
    pm = PatchMambaBackbone(32, 8, patch_len=16, stride=8, d_model=16, n_layers=1)
    assert pm(torch.randn(2, 3, 32)).shape == (2, 3, 8) and pm.n_patches == 4


# ----------------------------------------------------------------------------------- splits and scaler


def test_split_borders_follow_tslib():
    assert D.split_borders(17420, 336, "etth") == ([0, 8640 - 336, 11520 - 336], [8640, 11520, 14400])
    assert D.split_borders(69680, 96, "ettm") == ([0, 34560 - 96, 46080 - 96], [34560, 46080, 57600])
    n = 7588
    b1, b2 = D.split_borders(n, 96, "ratio")
    assert b2 == [5311, 5311 + (n - 5311 - 1517), n] and b1 == [0, 5311 - 96, n - 1517 - 96]
    with pytest.raises(ValueError, match="needs at least 14400 rows"):
        D.split_borders(14000, 96, "etth")


def test_scaler_sees_training_rows_only_and_windows_do_not_leak():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(1000, 2))
    b1, b2 = D.split_borders(1000, 24, "ratio")
    s1 = D.fit_scaler(v, b1, b2)
    v2 = v.copy()
    v2[b2[0]:] += 1e6  # changing val/test rows does not move the scaler
    s2 = D.fit_scaler(v2, b1, b2)
    np.testing.assert_array_equal(s1["mean"], s2["mean"])
    np.testing.assert_allclose(s1["mean"], v[:700].mean(0))
    np.testing.assert_allclose(s1["std"], v[:700].std(0))
    starts = D.window_starts(b1[0], b2[0], 24, 12)
    assert starts[-1] + 24 + 12 == b2[0]  # the last training target ends at the train border
    tst = D.window_starts(b1[2], b2[2], 24, 12)
    assert tst[0] + 24 == b2[1] and tst[-1] + 36 == 1000  # test targets start where validation ends
    x, y = D.windows(np.arange(100.0)[:, None], np.array([0, 5]), 4, 2)
    np.testing.assert_array_equal(x[1, :, 0], [5, 6, 7, 8])
    np.testing.assert_array_equal(y[1, :, 0], [9, 10])


def test_segment_mask_selects_targets_in_the_last_hours():
    starts = np.arange(100, 110)
    m = segment_mask(starts, seq_len=5, test_end=120, hours=12)  # s + 5 >= 108
    np.testing.assert_array_equal(np.flatnonzero(m), [3, 4, 5, 6, 7, 8, 9])


# ------------------------------------------------------------------------------------------- generator


def test_generator_is_deterministic_ett_formatted_and_fat_tailed():
    a = mof.make_fat_tailed_ett(3000, 7, None)
    b = mof.make_fat_tailed_ett(3000, 7, {})
    c = mof.make_fat_tailed_ett(3000, 8, None)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["OT"], c["OT"])
    assert list(a.columns) == ["date", "HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]
    dates = pd.to_datetime(a["date"])
    assert a["date"].iloc[0] == "2016-07-01 00:00:00" and a["date"].iloc[25] == "2016-07-02 01:00:00"
    assert (dates.diff().iloc[1:] == pd.Timedelta(hours=1)).all()
    k = mof.excess_kurtosis(a.iloc[:, 1:].to_numpy(), axis=0)
    assert np.all(k > 3), k
    small = mof.make_fat_tailed_ett(500, 0, {"n_channels": 3})
    assert list(small.columns) == ["date", "HUFL", "HULL", "OT"]
    with pytest.raises(KeyError, match="unknown generator key"):
        mof.make_fat_tailed_ett(10, 0, {"bogus": 1})


def test_generator_forces_the_high_regime_at_the_end():
    cfg = {"forced_hours": 500, "garch": (1.0, 0.0, 0.0), "nu": 50.0, "jump_rate": 0.0, "level_sd": 0.0,
           "daily_amp": (0.0, 0.0), "weekly_amp": (0.0, 0.0), "regime_mean_hours": 1e9}
    x = mof.make_fat_tailed_ett(4000, 0, cfg).iloc[:, 1:-1].to_numpy()
    # constant sigma = 1, no regime switch before the forced tail: sd ratio = 2.5
    ratio = x[-500:].std() / x[:3000].std()
    assert 2.2 < ratio < 2.8


# --------------------------------------------------------------------------------------- CSV and files


def test_csv_round_trip_is_exact(tmp_path):
    df = mof.make_fat_tailed_ett(300, 1, {"n_channels": 4})
    path = D.write_csv(df, tmp_path / "synth.csv")
    back = D.read_ett_csv(path, n_channels=4)
    np.testing.assert_array_equal(back.iloc[:, 1:].to_numpy(), df.iloc[:, 1:].to_numpy())
    assert (back["date"].dt.strftime("%Y-%m-%d %H:%M:%S") == df["date"]).all()


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.drop(columns=["HUFL"]), r"missing column\(s\) \['HUFL'\]"),
    (lambda d: d.assign(extra=1.0), r"unexpected column\(s\) \['extra'\]"),
    (lambda d: d.assign(OT=d["OT"].astype(object).where(d.index != 4, "n/a")), r"column 'OT', row 6: non-numeric"),
    (lambda d: d.iloc[[0, 2, 1, 3, 4, 5, 6, 7, 8, 9]], r"column 'date', row 4: timestamps not sorted"),
    (lambda d: d.iloc[[0, 1, 1, 2, 3, 4, 5, 6, 7, 8]], r"column 'date', row 4: duplicated timestamp"),
    (lambda d: d.iloc[:5], r"5 rows, need at least 8"),
])
def test_bad_csv_is_named(tmp_path, mutate, message):
    df = mof.make_fat_tailed_ett(10, 0, {"n_channels": 2})
    path = tmp_path / "bad.csv"
    mutate(df).to_csv(path, index=False)
    with pytest.raises(ValueError, match=message) as err:
        D.read_ett_csv(path, n_channels=2, min_rows=8)
    assert str(path) in str(err.value)


def test_msft_extracted_from_installed_pmdarima(tmp_path):
    pytest.importorskip("pmdarima", reason="pip install 'icml25[morphing_flow]'")
    path = D.extract_msft(tmp_path / "raw" / "msft.csv")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == D.packaged()["msft"]["sha256"]
    df = D.read_msft_csv(path)
    assert len(df) == 7983 and df["Date"].iloc[0] == pd.Timestamp("1986-03-13")
    assert df["Date"].iloc[-1] == pd.Timestamp("2017-11-10")
    feats = D.msft_features(df)
    assert list(feats.columns) == ["date", *D.MSFT_FEATURES] and len(feats) == 7982
    assert feats["r_close"].iloc[0] == pytest.approx(np.log(0.07533 / 0.07533))
    assert feats["r_open"].iloc[0] == pytest.approx(np.log(0.07533 / 0.0672), rel=1e-12)
    assert feats["d_log_volume"].iloc[0] == pytest.approx(np.log(409569463 + 1) - np.log(1371330506 + 1), rel=1e-12)
    assert mof.excess_kurtosis(feats["r_close"].to_numpy()) > 5  # fat-tailed daily returns
    taylor = D.load_taylor()
    assert taylor.shape == (4032,) and taylor[:3].tolist() == [22262.0, 21756.0, 22247.0]


def test_packaged_file_with_wrong_hash_is_rejected(monkeypatch):
    rows = D.packaged()
    rows["msft"] = {**rows["msft"], "sha256": "0" * 64}
    monkeypatch.setattr(D, "packaged", lambda: rows)
    pytest.importorskip("pmdarima")
    with pytest.raises(ValueError, match="msft: .*packaged.csv pins 0000"):
        D.msft_csv_bytes()


# ------------------------------------------------------------------------------------------- downloads


@pytest.fixture()
def ett_mirror():
    if not (MIRROR / "zhouhaoyi" / "ETDataset" / "ETT-small" / "ETTh1.csv").is_file():
        pytest.skip("the shared ETTh1 mirror is absent")
    return MIRROR


def test_manifest_pins_the_ett_commit():
    entries = D.remote_manifest()
    assert set(entries) == {"ETTh1", "ETTh2", "ETTm1", "ETTm2"}
    for e in entries.values():
        assert "/1d16c8f4f943005d613b5bc962e9eeb06058cf07/" in e.url
        assert e.mirror_path == f"zhouhaoyi/ETDataset/ETT-small/{e.name}.csv"
    assert entries["ETTh1"].sha256 == ETTH1_SHA
    assert all(not entries[n].sha256 for n in ("ETTh2", "ETTm1", "ETTm2"))  # UNPINNED: pinned on first download


def test_download_through_loopback_http_mirror(ett_mirror, http_server, tmp_path):
    base = http_server(ett_mirror)
    dest = D.fetch_remote("ETTh1", tmp_path / "raw" / "ETTh1.csv", base)
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == ETTH1_SHA
    df = D.read_ett_csv(dest)
    assert len(df) == 17420
    assert D.split_borders(len(df), 96, "etth")[1] == [8640, 11520, 14400]


def test_download_through_directory_mirror(ett_mirror, tmp_path):
    dest = D.fetch_remote("ETTh1", tmp_path / "ETTh1.csv", ett_mirror)
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == ETTH1_SHA


def test_checksum_mismatch_raises_and_leaves_no_file(ett_mirror, http_server, tmp_path):
    bad = tmp_path / "mirror" / "zhouhaoyi" / "ETDataset" / "ETT-small"
    bad.mkdir(parents=True)
    blob = bytearray((ett_mirror / "zhouhaoyi" / "ETDataset" / "ETT-small" / "ETTh1.csv").read_bytes())
    blob[200] ^= 1
    (bad / "ETTh1.csv").write_bytes(bytes(blob))
    raw = tmp_path / "raw"
    for mirror in (http_server(tmp_path / "mirror"), tmp_path / "mirror"):
        with pytest.raises(DownloadError, match="sha256 mismatch"):
            D.fetch_remote("ETTh1", raw / "ETTh1.csv", mirror)
        assert not raw.exists() or list(raw.iterdir()) == []


def test_unpinned_file_needs_trust_and_a_valid_header(tmp_path):
    mirror = tmp_path / "mirror" / "zhouhaoyi" / "ETDataset" / "ETT-small"
    mirror.mkdir(parents=True)
    (mirror / "ETTh2.csv").write_text("date,a,b\n2016-07-01 00:00:00,1,2\n")
    dest = tmp_path / "raw" / "ETTh2.csv"
    with pytest.raises(DownloadError, match="UNPINNED"):
        D.fetch_remote("ETTh2", dest, tmp_path / "mirror")
    with pytest.raises(DownloadError, match=r"CSV header lacks column\(s\) \['HUFL'"):
        D.fetch_remote("ETTh2", dest, tmp_path / "mirror", trust_unpinned=True)
    assert list(dest.parent.iterdir()) == []  # neither the file nor a pin
    (mirror / "ETTh2.csv").write_text("date,HUFL,HULL,MUFL,MULL,LUFL,LULL,OT\n2016-07-01 00:00:00,1,2,3,4,5,6,7\n")
    D.fetch_remote("ETTh2", dest, tmp_path / "mirror", trust_unpinned=True)
    pin = (tmp_path / "raw" / "ETTh2.csv.sha256").read_text().strip()
    assert pin == hashlib.sha256(dest.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------ verdicts


def _ids(n=4, **over):
    base = {"inverse_err": [1e-14] * n, "logdet_err": [0.0] * n, "monotone": [True] * n,
            "zero_identity_err": [0.0] * n, "m1_bitwise": [True] * n}
    base.update(over)
    return base


@pytest.mark.parametrize("over, holds", [
    ({}, True),
    ({"inverse_err": [1e-10] * 4}, True),                     # boundary: <= 1e-10
    ({"inverse_err": [1e-14, 1e-14, 1.01e-10, 0.0]}, False),
    ({"logdet_err": [1e-8] * 4}, True),
    ({"logdet_err": [0, 0, 0, 1.1e-8]}, False),
    ({"monotone": [True, True, False, True]}, False),
    ({"zero_identity_err": [0, 0, 0, 1e-300]}, False),        # "exact" means 0
    ({"m1_bitwise": [True, False, True, True]}, False),
    ({"inverse_err": [np.nan] * 4}, False),
])
def test_check_flow_identities(over, holds):
    got, stat = E.check_flow_identities(**_ids(**over))
    assert got is holds
    assert stat["n"] == 4


def test_check_flow_identities_rejects_ragged_input():
    with pytest.raises(ValueError, match="differ in length"):
        E.check_flow_identities(**_ids(m1_bitwise=[True]))


@pytest.mark.parametrize("kf, kr, outcome", [
    ([81.5, 815.0, 8.15e3], [100.0, 1e3, 1e4], "reproduced"),  # exactly 18.5 % each (boundary)
    ([81.6, 815.0, 8.15e3], [100.0, 1e3, 1e4], "inconclusive"),  # one seed at 18.4 %
    ([10.0, 5.0, 1.0], [10.0, 5.0, 1.0], "not reproduced"),    # mean reduction exactly 0
    ([11.0, 4.0, 1.0], [10.0, 5.0, 1.0], "inconclusive"),      # mean reduction +3.3 %
    ([12.0, 6.0, 1.0], [10.0, 5.0, 1.0], "not reproduced"),
    ([1.0, 1.0, 1.0], [10.0, -1.0, 1.0], "inconclusive"),      # undefined relative reduction
])
def test_verdict_tail_slimming(kf, kr, outcome):
    rep, nrep, stat = E.verdict_tail_slimming(kf, kr)
    got = "reproduced" if rep else ("not reproduced" if nrep else "inconclusive")
    assert got == outcome, stat


def test_paired_bootstrap_values():
    b = np.ones(500)
    a = np.full(500, 0.9)
    s = E.paired_bootstrap(a, b, n_boot=300, seed=1)
    assert s["rel_change"] == pytest.approx(-0.1) and s["lo"] == pytest.approx(-0.1) and s["hi"] == pytest.approx(-0.1)
    assert s["mean_diff"] == pytest.approx(-0.1) and s["n"] == 500
    rng = np.random.default_rng(0)
    b = rng.exponential(size=4000)
    s = E.paired_bootstrap(b * 1.0, b, n_boot=500, seed=0)
    assert s["lo"] == s["hi"] == 0.0  # identical arms: the paired CI collapses to 0
    with pytest.raises(ValueError, match="differ in length"):
        E.paired_bootstrap(np.ones(3), np.ones(4))


def _pair(shift, noise, n=3000, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.exponential(size=n)
    a = b * (1 + shift) + noise * rng.normal(size=n)
    return a, b


@pytest.mark.parametrize("shift, noise, outcome", [
    (-0.05, 0.01, "reproduced"),
    (0.05, 0.01, "not reproduced"),
    (0.0, 0.5, "inconclusive"),
])
def test_verdict_accuracy(shift, noise, outcome):
    a, b = _pair(shift, noise)
    rep, nrep, stat = E.verdict_accuracy(a, b, n_boot=400, seed=0)
    got = "reproduced" if rep else ("not reproduced" if nrep else "inconclusive")
    assert got == outcome, stat


def test_verdict_accuracy_boundary_is_strict():
    a, b = np.ones(100), np.ones(100)  # CI exactly [0, 0]: neither entirely below nor above 0
    rep, nrep, stat = E.verdict_accuracy(a, b, n_boot=100)
    assert (rep, nrep) == (False, False) and stat["hi"] == 0.0


@pytest.mark.parametrize("shift, noise, outcome", [
    (-0.02, 0.01, "reproduced"),
    (0.0, 0.0, "reproduced"),          # equal arms: mean diff 0 and upper bound 0 < +1 %
    (0.005, 0.0, "not reproduced"),    # +0.5 % everywhere: lower bound > 0 even though < +1 %
    (0.02, 0.01, "not reproduced"),
    (0.0, 0.8, "inconclusive"),        # wide CI straddling 0 with upper bound > +1 %
])
def test_verdict_morph(shift, noise, outcome):
    a, b = _pair(shift, noise)
    rep, nrep, stat = E.verdict_morph(a, b, n_boot=400, seed=0)
    got = "reproduced" if rep else ("not reproduced" if nrep else "inconclusive")
    assert got == outcome, stat


def test_verdict_morph_needs_non_positive_mean_difference():
    b = np.ones(1000)
    a = b.copy()
    a[0] += 1e-3  # tiny positive mean difference, CI upper bound far below +1 %
    rep, nrep, stat = E.verdict_morph(a, b, n_boot=200)
    assert stat["hi"] < 0.01 and stat["mean_diff"] > 0 and not rep


# ------------------------------------------------------------------------------------------- smoke


def test_smoke_run_every_arm_is_deterministic_and_identities_hold():
    torch.set_num_threads(1)
    st_ = S.get("smoke")
    st_["train"]["windows_per_epoch"] = 256
    outs = {arm: run(st_, arm, 0) for arm in st_["arms"]}
    again = run(st_, "mof_linear", 0)
    assert again["metrics"] == outs["mof_linear"]["metrics"]
    for arm, out in outs.items():
        m = out["metrics"]
        assert m["n_test_windows"] == 400 + 48 - 48 - 24 + 1  # int(0.2 * 2000) rows + lookback overlap
        assert np.isfinite(m["test_mse"]) and len(out["curves"]["val/mse"]) == 1
        assert m["n_segment_windows"] == 200 - 24 + 1
        if arm == "revin_linear":
            assert out["identities"] is None
        else:
            i = out["identities"]
            assert i["inverse_err"] <= 1e-10 and i["logdet_err"] <= 1e-8 and i["monotone"]
            assert i["zero_identity_err"] == 0.0 and i["m1_bitwise"]
    # the MoF arms' backbone inputs are slimmer than RevIN's on the fat-tailed series
    assert outs["mof_flow"]["metrics"]["kurtosis_in"] < outs["revin_linear"]["metrics"]["kurtosis_in"]


def test_public_api_names_and_defaults():
    import inspect

    assert inspect.signature(mof.SplineFlow).parameters["n_bins"].default == 16
    assert inspect.signature(mof.SplineFlow).parameters["tails"].default == "linear"
    assert list(inspect.signature(mof.Morph).parameters)[:5] == ["n_channels", "seq_len", "rank", "inner_steps",
                                                                  "inner_lr"]
    assert list(inspect.signature(mof.MoFForecaster).parameters) == ["backbone", "n_channels", "seq_len", "pred_len",
                                                                     "cfg"]
    assert list(inspect.signature(mof.make_fat_tailed_ett).parameters) == ["n_rows", "seed", "cfg"]
    assert inspect.signature(mof.excess_kurtosis).parameters["axis"].default == -1
