"""Tests of the morphing_flow study: the Flow identities (claim 1) on random inputs with |x| >> T, gradchecks of
Flow and Morph, Morph's inner step, the forecaster's pieces, TSLib split borders and the train-only scaler, the
generator, CSV round trips and bad input, the pmdarima files, downloads through a loopback HTTP and a directory
mirror, the verdict functions (each outcome and its boundaries) and a smoke run of every arm."""
from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings as hsettings, strategies as st
from scipy import stats

from icml25.core.claims import INCONCLUSIVE, REPRODUCED, load_claims
from icml25.core.config import ConfigError, build, load_yaml, merge_scale
from icml25.core.download import DownloadError
from icml25.studies import morphing_flow as mof
from icml25.studies.morphing_flow import data as D
from icml25.studies.morphing_flow import evaluate as E
from icml25.studies.morphing_flow.__main__ import main as stage_cli
from icml25.studies.morphing_flow.config import REMOTE_DATASETS, Config
from icml25.studies.morphing_flow.evaluate import segment_mask
from icml25.studies.morphing_flow.experiment import run
from icml25.studies.morphing_flow.identities import flow_identities, morph_one_bitwise
from icml25.studies.morphing_flow.method import Morph, SplineFlow, instance_norm, nll_finetune
from icml25.studies.morphing_flow.model import (DLinearBackbone, MambaBlock, MoFForecaster, PatchMambaBackbone,
                                                selective_scan, selective_scan_sequential)

MIRROR = Path(__file__).resolve().parents[2].parent.parent / "shared" / "mirror"
if not MIRROR.is_dir():  # worktrees live one level deeper than the main checkout
    MIRROR = Path("/work/shared/mirror")
ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "config" / "studies" / "morphing_flow.yaml"
SPEC_CLAIMS = ["c1_flow_identities", "c2_tail_slimming", "c3_accuracy_synth", "c3_accuracy_msft", "c4_morph"]
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
    assert morph_one_bitwise(model, x)
    flow_only = MoFForecaster("linear", 3, 8, 4, {"morph_mode": "off"})
    with torch.no_grad():
        flow_only.flow.a.normal_()
    assert morph_one_bitwise(flow_only, x)


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
    out = flow_identities(model, torch.randn(4, 12, 2))
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


def test_dlinear_constant_input():
    torch.manual_seed(0)
    dl = DLinearBackbone(12, 5, kernel=5)
    c = torch.full((2, 3, 12), 1.5)
    torch.testing.assert_close(dl(c), dl.trend(c) + dl.season(torch.zeros_like(c)))


def _scan_inputs(N=3, Dm=5, T=42, S=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(N, Dm, T, generator=g, dtype=dtype)
    delta = torch.nn.functional.softplus(torch.randn(N, Dm, T, generator=g, dtype=dtype))  # as in the block
    A = -torch.exp(torch.log(torch.arange(1, S + 1, dtype=dtype)).repeat(Dm, 1)
                   + 0.1 * torch.randn(Dm, S, generator=g, dtype=dtype))
    Bm, Cm = torch.randn(N, S, T, generator=g, dtype=dtype), torch.randn(N, S, T, generator=g, dtype=dtype)
    return u, delta, A, Bm, Cm, torch.randn(Dm, generator=g, dtype=dtype)


@pytest.mark.parametrize("T", [1, 2, 7, 16, 42, 43])
def test_parallel_scan_equals_the_step_by_step_recurrence(T):
    args = _scan_inputs(T=T)
    y = selective_scan(*args)
    assert y.shape == (3, 5, T)
    torch.testing.assert_close(y, selective_scan_sequential(*args), rtol=1e-6, atol=1e-6)  # float32: |y| ~ 20
    args64 = _scan_inputs(T=T, dtype=torch.float64)
    torch.testing.assert_close(selective_scan(*args64), selective_scan_sequential(*args64), rtol=0, atol=1e-12)


def test_parallel_scan_gradients_equal_the_recurrence_and_known_values():
    args = [t.requires_grad_() for t in _scan_inputs(N=2, Dm=3, T=11, S=4, dtype=torch.float64)]
    g_par = torch.autograd.grad(selective_scan(*args).square().sum(), args)
    g_seq = torch.autograd.grad(selective_scan_sequential(*args).square().sum(), args)
    for gp, gs in zip(g_par, g_seq):
        torch.testing.assert_close(gp, gs, rtol=0, atol=1e-10)
    # two steps by hand for one (n, d): h_0 = d0 u0 B0; h_1 = exp(d1 A) h_0 + d1 u1 B1; y_t = C_t.h_t + D u_t
    u, delta, A, Bm, Cm, Dv = (t.detach() for t in args)
    y = selective_scan(u, delta, A, Bm, Cm, Dv)
    n, d = 1, 2
    h0 = delta[n, d, 0] * u[n, d, 0] * Bm[n, :, 0]
    h1 = torch.exp(delta[n, d, 1] * A[d]) * h0 + delta[n, d, 1] * u[n, d, 1] * Bm[n, :, 1]
    assert math.isclose(float(y[n, d, 0]), float(Cm[n, :, 0] @ h0 + Dv[d] * u[n, d, 0]), abs_tol=1e-13)
    assert math.isclose(float(y[n, d, 1]), float(Cm[n, :, 1] @ h1 + Dv[d] * u[n, d, 1]), abs_tol=1e-13)


def test_scan_and_mamba_block_are_causal():
    u, delta, A, Bm, Cm, Dv = _scan_inputs(T=20)
    y = selective_scan(u, delta, A, Bm, Cm, Dv)
    u2, d2, B2, C2 = u.clone(), delta.clone(), Bm.clone(), Cm.clone()
    for t in (u2, d2, B2, C2):
        t[..., 9:] += 5.0  # every input after step 8 changes
    y2 = selective_scan(u2, d2.abs(), A, B2, C2, Dv)
    assert torch.equal(y2[..., :9], y[..., :9]) and not torch.allclose(y2[..., 9:], y[..., 9:])
    torch.manual_seed(0)
    block = MambaBlock(8, d_state=4, d_conv=4, expand=2)
    h = torch.randn(2, 12, 8)
    h2 = h.clone()
    h2[:, 7:] = torch.randn(2, 5, 8)  # the causal conv and the scan never look ahead
    out, out2 = block(h), block(h2)
    torch.testing.assert_close(out2[:, :7], out[:, :7], rtol=0, atol=1e-6)
    assert not torch.allclose(out2[:, 7:], out[:, 7:])


def test_patch_mamba_backbone_shapes_and_scans_agree():
    torch.manual_seed(0)
    pm = PatchMambaBackbone(32, 8, patch_len=16, stride=8, d_model=16, n_layers=2)
    z = torch.randn(2, 3, 32)
    out = pm(z)
    assert out.shape == (2, 3, 8) and pm.n_patches == 4
    seq = PatchMambaBackbone(32, 8, patch_len=16, stride=8, d_model=16, n_layers=2, scan="sequential")
    seq.load_state_dict(pm.state_dict())
    torch.testing.assert_close(seq(z), out, rtol=0, atol=1e-6)
    # channel independence: a channel's forecast depends on that channel only
    z2 = z.clone()
    z2[:, 1] += 1.0
    out2 = pm(z2)
    assert torch.equal(out2[:, 0], out[:, 0]) and torch.equal(out2[:, 2], out[:, 2])
    with pytest.raises(ValueError, match="scan must be one of"):
        MambaBlock(8, scan="fused")
    # the paper-scale forecaster: MoF around the patch-Mamba backbone (L = 336: 42 patches), gradients flow
    f = MoFForecaster("patch_mamba", 2, 336, 24, {"d_model": 16})
    x = torch.randn(4, 336, 2)
    y = f(x)
    assert y.shape == (4, 24, 2) and f.backbone.n_patches == 42
    y.square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in f.backbone.parameters())


# ------------------------------------------------------------------------- normalisation wrappers (paper)


def test_dishts_levels_scales_and_round_trip():
    from icml25.studies.morphing_flow.normalizers import DishTS

    torch.manual_seed(0)
    d = DishTS(2, 8).double()
    x = torch.randn(3, 2, 8, dtype=torch.float64) * 2 + 1
    z, st = d.normalize(x)
    phi_f = torch.nn.functional.gelu((x[1, 0] * d.coef[0, :, 1].detach()).sum())  # GELU of the channel's linear map
    assert math.isclose(st["phi_f"][1, 0, 0].item(), phi_f.item(), rel_tol=1e-12)
    assert math.isclose(st["xi_f"][1, 0, 0].item(), (x[1, 0] - phi_f).square().mean().item(), rel_tol=1e-12)
    phi_b = torch.nn.functional.gelu(torch.einsum("bcl,cl->bc", x, d.coef[..., 0]))[..., None]
    torch.testing.assert_close(z, (x - phi_b) / torch.sqrt((x - phi_b).square().mean(-1, keepdim=True) + 1e-8))
    with torch.no_grad():  # equal backcast and forecast maps, L = H: denormalize inverts normalize
        d.coef[..., 1] = d.coef[..., 0]
        d.gamma.fill_(1.7)
        d.beta.fill_(-0.3)
    z, st = d.normalize(x)
    torch.testing.assert_close(d.denormalize(z, st), x, rtol=0, atol=1e-12)
    assert float(d.aux_loss(st, x)) == 0.0


def test_san_slices_statistics_and_round_trip():
    from icml25.studies.morphing_flow.normalizers import SAN, slice_stats

    x = torch.arange(24, dtype=torch.float64).reshape(1, 1, 24) ** 2
    mu, sd = slice_stats(x, 12)
    assert mu.shape == (1, 1, 2)
    assert math.isclose(float(mu[0, 0, 0]), float(np.mean(np.arange(12) ** 2)), rel_tol=1e-12)
    assert math.isclose(float(sd[0, 0, 1]), float(np.std(np.arange(12, 24) ** 2)), rel_tol=1e-12)
    torch.manual_seed(0)
    san = SAN(24, 12, period=6, hidden=8).double()
    xs = torch.randn(4, 3, 24, dtype=torch.float64) * 3 + 5
    z, st = san.normalize(xs)
    zs = z.reshape(4, 3, 4, 6)
    torch.testing.assert_close(zs.mean(-1), torch.zeros(4, 3, 4, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(zs.std(-1, unbiased=False), torch.ones(4, 3, 4, dtype=torch.float64), rtol=0,
                               atol=1e-4)  # sd / (sd + eps)
    assert st["mu_hat"].shape == (4, 3, 2) and bool((st["sd_hat"] > 0).all())
    y = torch.randn(4, 3, 12, dtype=torch.float64) * 2 - 1  # true future statistics: exact de-normalisation
    mu_y, sd_y = slice_stats(y, 6)
    true = {"mu_hat": mu_y, "sd_hat": sd_y}
    zy = (y - mu_y.repeat_interleave(6, -1)) / (sd_y.repeat_interleave(6, -1) + 1e-5)
    torch.testing.assert_close(san.denormalize(zy, true), y, rtol=0, atol=1e-12)
    assert san.aux_loss(true, y).item() == 0.0 and san.aux_loss(st, y).item() > 0
    with pytest.raises(ValueError, match="multiples of the slice length 5"):
        SAN(24, 12, period=5)


def test_fan_removes_the_dominant_frequencies():
    from icml25.studies.morphing_flow.normalizers import FAN, dominant_part

    t = torch.arange(64, dtype=torch.float64)
    x = (3 * torch.sin(2 * math.pi * 3 * t / 64) + 2 * torch.cos(2 * math.pi * 7 * t / 64) + 0.5).reshape(1, 1, 64)
    noise = 0.01 * torch.randn(1, 1, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(dominant_part(x, 3), x, rtol=0, atol=1e-12)  # exactly 3 frequencies: DC, 3, 7
    two = dominant_part(x, 2)  # the two largest: frequencies 3 and 7, not the DC level
    torch.testing.assert_close(two, x - 0.5, rtol=0, atol=1e-12)
    torch.testing.assert_close(dominant_part(x + noise, 33), x + noise, rtol=0, atol=1e-12)  # all 33 rfft bins
    fan = FAN(64, 16, top_k=3, hidden=8).double()
    z, st = fan.normalize(x + noise)
    assert float(z.abs().max()) < 0.05  # only (most of) the noise reaches the backbone
    y_hat = fan.denormalize(torch.zeros(1, 1, 16, dtype=torch.float64), st)
    torch.testing.assert_close(y_hat, st["ns_hat"])


@pytest.mark.parametrize("arm", ["dishts_linear", "san_linear", "fan_linear"])
def test_wrapper_arms_train_and_their_loss_includes_the_wrapper_term(arm):
    from icml25.studies.morphing_flow.experiment import arm_model
    from icml25.studies.morphing_flow.train import loss_terms

    torch.manual_seed(0)
    model, lam = arm_model(arm, {}, 0.01, "linear", 3, 48, 24)
    assert lam == 0.0 and model.flow is None and model.morph is None
    x, y = torch.randn(8, 48, 3), torch.randn(8, 24, 3)
    total, mse = loss_terms(model, x, y, lam)
    aux = model.aux_loss(model.parts(x), y)
    assert math.isclose(float(total), float(mse + aux), rel_tol=1e-6)
    assert (float(aux) == 0.0) == (arm == "dishts_linear")
    total.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.norm.parameters())
    with pytest.raises(ValueError, match="needs flow=False"):
        MoFForecaster("linear", 3, 48, 24, {"norm": "san"})


def test_wrapper_arms_forecast_on_the_same_windows_as_revin():
    cfg = _config("smoke", train={"windows_per_epoch": 128})
    base = run(cfg, "revin_linear", 0, "synth")
    for arm in ("dishts_linear", "san_linear", "fan_linear"):
        rec = run(cfg, arm, 0, "synth")
        # one short epoch: each wrapper forecasts sensibly (near RevIN's error), on the same windows
        assert rec["metrics"]["n_test_windows"] == base["metrics"]["n_test_windows"]
        assert 0 < rec["metrics"]["test_mse"] < 1.5 * base["metrics"]["test_mse"], arm
        assert rec["identities"] is None and rec["figure"]["flow_curve"] is None


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


PILE_COMMIT = "ea89753da2b451928436adb333c7a2e892461c7d"  # main of AutonLab/Timeseries-PILE (README, Data)


def test_manifest_pins_the_ett_commit_and_every_hash():
    entries = D.remote_manifest()
    assert set(entries) == set(REMOTE_DATASETS)
    for name in ("ETTh1", "ETTh2", "ETTm1", "ETTm2"):
        e = entries[name]
        assert "/1d16c8f4f943005d613b5bc962e9eeb06058cf07/" in e.url
        assert e.mirror_path == f"zhouhaoyi/ETDataset/ETT-small/{e.name}.csv"
        assert len(e.sha256) == 64 and int(e.sha256, 16) >= 0
    # ETTh1 and ETTh2: sha256 and size of the bytes of the ETDataset snapshot at that commit (README, Data)
    assert (entries["ETTh1"].sha256, entries["ETTh1"].size) == (ETTH1_SHA, 2_589_657)
    assert entries["ETTh2"].sha256 == "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b"
    assert entries["ETTh2"].size == 2_417_960
    assert entries["ETTm2"].sha256 == "db973ca252c6410a30d0469b13d696cf919648d0f3fd588c60f03fdbdbadd1fd"
    for name, (file, _) in D.AUTOFORMER.items():  # every URL at a commit, never at a branch
        e = entries[name]
        assert e.url == (f"https://huggingface.co/datasets/AutonLab/Timeseries-PILE/resolve/{PILE_COMMIT}/"
                         f"forecasting/autoformer/{file}")
        assert e.mirror_path == f"AutonLab/Timeseries-PILE/forecasting/autoformer/{file}"
    # Weather and Exchange pinned from two public records; Electricity and Traffic stay UNPINNED (trust_unpinned)
    assert (entries["Weather"].sha256, entries["Weather"].size) == (
        "9b2b19b13e342d9c9b9c51620d42b4be232df7fba30e7f5c4968b7c79ab138ad", 7_182_728)
    assert (entries["Exchange"].sha256, entries["Exchange"].size) == (
        "d55e7aa2641009814a18ba3279431b13f6d413b0eab195b9ff21988d8cf94e97", 630_212)
    assert entries["Electricity"].sha256 == entries["Traffic"].sha256 == ""
    for e in entries.values():  # every mirror path follows the spec's rewriting rule; every revision a commit
        assert e.mirror_path == D.mirror_path_for(e.url)
        assert re.fullmatch("[0-9a-f]{40}", D.url_revision(e.url)), e.url


def test_url_revision_and_the_data_files_record():
    assert D.url_revision("https://raw.githubusercontent.com/o/r/0123abc/a/b.csv") == "0123abc"
    assert D.url_revision("https://huggingface.co/datasets/o/r/resolve/9f8e/x/y.csv") == "9f8e"
    with pytest.raises(ValueError, match="no mirror rule for 'https://example.org/x.csv'"):
        D.url_revision("https://example.org/x.csv")
    entries = D.remote_manifest()
    rows = [{"name": "synth", "source": "make_fat_tailed_ett(...)", "bytes": "10", "sha256": "ab" * 32},
            {"name": "ETTh1", "source": entries["ETTh1"].url, "bytes": "2589657", "sha256": ETTH1_SHA},
            {"name": "Traffic", "source": entries["Traffic"].url, "bytes": "123", "sha256": "cd" * 32}]
    block = D.data_files(rows, entries)
    assert block == {
        "ETTh1": {"url": entries["ETTh1"].url, "revision": "1d16c8f4f943005d613b5bc962e9eeb06058cf07",
                  "sha256": ETTH1_SHA, "bytes": 2589657, "pin": "manifest"},
        "Traffic": {"url": entries["Traffic"].url, "revision": PILE_COMMIT, "sha256": "cd" * 32, "bytes": 123,
                    "pin": "trusted_first_download"}}
    rows[1]["source"] = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/ETTh1.csv"
    with pytest.raises(ValueError, match="ETTh1 was read from .*/main/ETT-small/ETTh1.csv'"):
        D.data_files(rows, entries)


def test_mirror_path_rewriting_rules():
    assert D.mirror_path_for("https://raw.githubusercontent.com/o/r/0123abc/a/b.csv") == "o/r/a/b.csv"
    assert D.mirror_path_for("https://huggingface.co/datasets/o/r/resolve/9f8e/x/y/z.csv") == "o/r/x/y/z.csv"
    for url in ("https://example.org/o/r/x.csv", "http://raw.githubusercontent.com/o/r/ref/x.csv",
                "https://huggingface.co/o/r/resolve/main/x.csv"):
        with pytest.raises(ValueError, match="no mirror rule"):
            D.mirror_path_for(url)


WEATHER_HEADER = ["p (mbar)", "T (degC)", "Tpot (K)", "Tdew (degC)", "rh (%)", "VPmax (mbar)", "VPact (mbar)",
                  "VPdef (mbar)", "sh (g/kg)", "H2OC (mmol/mol)", "rho (g/m**3)", "wv (m/s)", "max. wv (m/s)",
                  "wd (deg)", "rain (mm)", "raining (s)", "SWDR (W/m\xb2)", "PAR (\xb5mol/m\xb2/s)",
                  "max. PAR (\xb5mol/m\xb2/s)", "Tlog (degC)", "OT"]


def _autoformer_bytes(name: str, n_rows: int = 6, seed: int = 0) -> tuple[bytes, np.ndarray]:
    """A tiny file in the bundle's format (header, date style, latin-1 units of Weather) and its values."""
    n = D.AUTOFORMER[name][1]
    cols = WEATHER_HEADER if name == "Weather" else [*map(str, range(n - 1)), "OT"]
    values = np.round(np.random.default_rng(seed).normal(size=(n_rows, n)), 6)
    if name == "Exchange":
        dates = [f"1990/1/{d + 1} 0:00" for d in range(n_rows)]  # the bundle's exchange_rate.csv date style
    else:
        dates = pd.date_range("2016-07-01 02:00", periods=n_rows, freq="10min" if name == "Weather" else "h")
        dates = dates.strftime("%Y-%m-%d %H:%M:%S").tolist()
    lines = [",".join(["date", *cols])] + [",".join([d, *map(repr, row.tolist())]) for d, row in zip(dates, values)]
    return ("\n".join(lines) + "\n").encode("latin-1"), values


@pytest.fixture()
def autoformer_mirror(tmp_path):
    root = tmp_path / "mirror"
    folder = root / "AutonLab" / "Timeseries-PILE" / "forecasting" / "autoformer"
    folder.mkdir(parents=True)
    values = {}
    for name, (file, _) in D.AUTOFORMER.items():
        blob, values[name] = _autoformer_bytes(name)
        (folder / file).write_bytes(blob)
    return root, folder, values


def _unpinned_bundle(monkeypatch, where: Path):
    """The manifest with every Autoformer row UNPINNED (Weather and Exchange are pinned to the real files' hashes,
    which the tiny stand-ins here cannot match), read through the real parser."""
    from icml25.core.download import read_manifest

    entries = D.remote_manifest()
    text = Path(D.__file__).with_name("manifest.csv").read_text()
    for name in ("Weather", "Exchange"):
        text = text.replace(f",{entries[name].sha256},{entries[name].size},", ",UNPINNED,,")
    path = where / "unpinned_manifest.csv"
    path.write_text(text)
    unpinned = read_manifest(path, rehearsal=False)
    assert all(unpinned[n].sha256 == "" for n in D.AUTOFORMER)
    monkeypatch.setattr(D, "remote_manifest", lambda: unpinned)


def test_pinned_autoformer_rows_refuse_other_bytes(autoformer_mirror, tmp_path):
    root, folder, _ = autoformer_mirror
    for name in ("Weather", "Exchange"):  # the stand-in is not the real file: refused even with the opt-in
        with pytest.raises(DownloadError, match="size mismatch|sha256 mismatch"):
            D.fetch_remote(name, tmp_path / "raw" / f"{name}.csv", root, trust_unpinned=True)
    assert not (tmp_path / "raw").exists() or list((tmp_path / "raw").iterdir()) == []


def test_autoformer_bundle_through_loopback_http_and_directory_mirrors(autoformer_mirror, http_server, tmp_path,
                                                                       monkeypatch):
    root, folder, values = autoformer_mirror
    _unpinned_bundle(monkeypatch, tmp_path)
    base = http_server(root)
    for mirror, raw in ((base, tmp_path / "raw_http"), (root, tmp_path / "raw_dir")):
        for name, (file, n) in D.AUTOFORMER.items():
            dest = raw / f"{name}.csv"
            with pytest.raises(DownloadError, match="UNPINNED"):  # no hash pinned: refused without the opt-in
                D.fetch_remote(name, dest, mirror)
            D.fetch_remote(name, dest, mirror, trust_unpinned=True)
            assert dest.read_bytes() == (folder / file).read_bytes()
            pin = (raw / f"{name}.csv.sha256").read_text().strip()
            assert pin == hashlib.sha256(dest.read_bytes()).hexdigest()
            got = D.read_raw(name, dest, min_rows=6)
            assert got.shape == (6, n)
            np.testing.assert_array_equal(got, values[name])
    assert D.autoformer_columns(tmp_path / "raw_dir" / "Weather.csv", "Weather")[16] == "SWDR (W/m\xb2)"
    # after the first download the pin holds: a changed file on the mirror is refused and leaves nothing
    blob = bytearray((folder / "exchange_rate.csv").read_bytes())
    blob[-3] = ord("9") if blob[-3] != ord("9") else ord("8")
    (folder / "exchange_rate.csv").write_bytes(bytes(blob))
    dest = tmp_path / "raw_http" / "Exchange.csv"
    dest.unlink()
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        D.fetch_remote("Exchange", dest, base, trust_unpinned=True)
    assert not dest.exists() and not list(dest.parent.glob(".*part"))


def test_autoformer_download_rejects_a_page_that_is_not_the_csv(autoformer_mirror, http_server, tmp_path,
                                                                monkeypatch):
    root, folder, _ = autoformer_mirror
    _unpinned_bundle(monkeypatch, tmp_path)
    (folder / "traffic.csv").write_text("<!DOCTYPE html><html><body>Access denied</body></html>\n")
    (folder / "weather.csv").write_bytes(_autoformer_bytes("Weather")[0].split(b"\n")[0] + b"\n")
    raw = tmp_path / "raw"
    with pytest.raises(DownloadError, match="first column must be 'date'"):
        D.fetch_remote("Traffic", raw / "Traffic.csv", http_server(root), trust_unpinned=True)
    with pytest.raises(DownloadError, match="no data row"):
        D.fetch_remote("Weather", raw / "Weather.csv", root, trust_unpinned=True)
    assert not raw.exists() or list(raw.iterdir()) == []  # neither a file nor a pin


@pytest.mark.parametrize("name, edit, message", [
    ("Exchange", lambda t: t.replace(",OT\n", ",7\n", 1), "the last column must be 'OT', got '7'"),
    ("Exchange", lambda t: t.replace("date,0,1,", "date,0,2,", 1), "column 3 must be named '1', got '2'"),
    ("Electricity", lambda t: t.replace(",319,OT", ",OT", 1), "Electricity has 321 value columns .* header has 320"),
    ("Weather", lambda t: t.replace("date,", "time,", 1), "first column must be 'date'"),
    ("Exchange", lambda t: t.replace("1990/1/3 0:00,", "1990/1/2 0:00,", 1), "row 4: duplicated timestamp"),
    ("Traffic", lambda t: t.rsplit(",", 1)[0] + ",n/a\n", "column 'OT', row 7: non-numeric value 'n/a'"),
])
def test_bad_autoformer_csv_is_named(tmp_path, name, edit, message):
    path = tmp_path / f"{name}.csv"
    path.write_bytes(edit(_autoformer_bytes(name)[0].decode("latin-1")).encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{name}.csv: .*{message}"):
        D.read_raw(name, path, min_rows=6)
    path.write_bytes(_autoformer_bytes(name)[0])
    with pytest.raises(ValueError, match="6 rows, need at least 10"):
        D.read_raw(name, path, min_rows=10)


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


def test_unpinned_file_needs_trust_and_a_valid_header(tmp_path, monkeypatch):
    from icml25.core.download import read_manifest

    # the manifest as it would read with ETTh2's hash unknown: the explicit UNPINNED marker
    text = Path(D.__file__).with_name("manifest.csv").read_text()
    e = D.remote_manifest()["ETTh2"]
    (tmp_path / "manifest.csv").write_text(text.replace(f"{e.sha256},{e.size},", "UNPINNED,,"))
    entries = read_manifest(tmp_path / "manifest.csv")
    assert entries["ETTh2"].sha256 == "" and entries["ETTh1"].sha256 == ETTH1_SHA
    monkeypatch.setattr(D, "remote_manifest", lambda: entries)
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


def test_rel_change_intervals_values():
    b = np.ones((2, 500))
    a = np.full((2, 500), 0.9)
    s = E.rel_change_intervals(a, b, block=24, n_boot=300, seed=1)
    assert s["rel_change"] == pytest.approx(-0.1) and s["lo"] == pytest.approx(-0.1) and s["hi"] == pytest.approx(-0.1)
    assert s["mean_diff"] == pytest.approx(-0.1) and (s["n_seeds"], s["n_windows"], s["n_blocks"]) == (2, 500, 20)
    assert "block 24" in s["ci_method"] and "t 95%, n=2 seeds" in s["ci_method"]
    rng = np.random.default_rng(0)
    b = rng.exponential(size=(1, 4000))
    s = E.rel_change_intervals(b * 1.0, b, block=24, n_boot=200, seed=0)
    assert s["lo"] == s["hi"] == 0.0  # identical arms: the paired interval collapses to 0
    # the seed interval is the Student t of the per-seed relative changes
    a2, b2 = np.vstack([np.full(200, 0.9), np.full(200, 0.95), np.full(200, 1.0)]), np.ones((3, 200))
    s = E.rel_change_intervals(a2, b2, block=10, n_boot=100)
    half = stats.t.ppf(0.975, 2) * 0.05 / np.sqrt(3)
    assert s["seed_lo"] == pytest.approx(-0.05 - half) and s["seed_hi"] == pytest.approx(-0.05 + half)
    assert s["lo"] == pytest.approx(-0.05 - half) and s["per_seed"] == pytest.approx([-0.1, -0.05, 0.0])
    with pytest.raises(ValueError, match="differ in shape"):
        E.rel_change_intervals(np.ones(300), np.ones(400), block=10)
    with pytest.raises(ValueError, match="5 blocks"):
        E.rel_change_intervals(np.ones(40), np.ones(40), block=10)


def test_block_bootstrap_widens_the_interval_of_overlapping_windows():
    """Issue 31: stride-1 windows share H - 1 targets, so per-window errors are strongly autocorrelated; treating
    them as independent understates the uncertainty. A slowly varying per-window difference (an AR(1) with
    correlation 0.99, like a moving average over 96 shared steps) gets a block interval several times wider than
    the iid percentile bootstrap's."""
    rng = np.random.default_rng(3)
    n, H = 3000, 96
    e = np.zeros(n)
    for i in range(1, n):
        e[i] = 0.99 * e[i - 1] + rng.normal() * 0.01
    b = np.ones((1, n))
    a = b + e[None, :]
    block = E.rel_change_intervals(a, b, block=H, n_boot=400, seed=0)
    iid = E.rel_change_intervals(a, b, block=1, n_boot=400, seed=0)
    assert (block["block_hi"] - block["block_lo"]) > 4 * (iid["block_hi"] - iid["block_lo"])


def _pair(shift, noise, n=3000, seeds=3, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.exponential(size=(seeds, n))
    a = b * (1 + shift) + noise * rng.normal(size=(seeds, n))
    return a, b


@pytest.mark.parametrize("shift, noise, outcome", [
    (-0.05, 0.01, "reproduced"),
    (-0.005, 0.0, "not reproduced"),   # a real but tiny gain: confidently short of the 1 % floor (msft's case)
    (0.05, 0.01, "not reproduced"),
    (0.0, 3.0, "inconclusive"),        # wide CI straddling the floor
])
def test_verdict_accuracy(shift, noise, outcome):
    a, b = _pair(shift, noise)
    rep, nrep, stat = E.verdict_accuracy(a, b, block=24, n_boot=400, seed=0)
    got = "reproduced" if rep else ("not reproduced" if nrep else "inconclusive")
    assert got == outcome, stat
    assert stat["floor"] == E.MIN_REL_GAIN == 0.01


def test_verdict_accuracy_floor_boundaries():
    a, b = np.full((3, 100), 0.99), np.ones((3, 100))  # exactly -1 %: reaches the floor, CI below 0
    assert E.verdict_accuracy(a, b, block=10, n_boot=100)[:2] == (True, False)
    a = np.full((3, 100), 0.991)  # -0.9 %: short of the floor
    assert E.verdict_accuracy(a, b, block=10, n_boot=100)[:2] == (False, True)
    assert E.verdict_accuracy(a, b, block=10, n_boot=100, floor=0.0)[:2] == (True, False)


@pytest.mark.parametrize("shift, noise, outcome", [
    (-0.02, 0.01, "reproduced"),
    (0.0, 0.0, "not reproduced"),      # equal arms: no gain, confidently short of the floor
    (-0.005, 0.0, "not reproduced"),   # Morph helps by 0.5 %: below the 1 % floor
    (0.02, 0.01, "not reproduced"),
    (0.0, 3.0, "inconclusive"),        # wide CI straddling the floor
])
def test_verdict_morph(shift, noise, outcome):
    a, b = _pair(shift, noise)
    rep, nrep, stat = E.verdict_morph(a, b, block=24, n_boot=400, seed=0)
    got = "reproduced" if rep else ("not reproduced" if nrep else "inconclusive")
    assert got == outcome, stat


def test_c4_statement_and_rule_say_the_same_thing():
    """Issue 31: claim 4 states that Morph helps; its rule is a superiority test with the same floor."""
    recs = _fake_records()
    c4 = next(c for c in E.build_claims(recs, 200, 0, 200) if c.id == "c4_morph")
    assert "helps" in c4.statement and "at least 1.0% lower" in c4.statement
    assert c4.threshold.startswith("reproduced: change <= -1.0% and CI high < 0")


def _fake_records(seeds=(0, 1, 2), n=600, H=24):
    """Train records of revin_linear, mof_flow and mof_linear on synth: mof_flow 5 % and mof_linear 8 % below
    revin on every window; the last 200 rows are twice as hard."""
    rng = np.random.default_rng(0)
    base = rng.exponential(size=n)
    base[-(200 - H + 1):] *= 2
    out = []
    for s in seeds:
        for arm, f, k in (("revin_linear", 1.0, 3.0), ("mof_flow", 0.95, 1.5), ("mof_linear", 0.92, 0.5)):
            mse = base * f * (1 + 0.001 * s)
            out.append({"arm": arm, "dataset": "synth", "backbone": "linear", "pred_len": H, "seq_len": 48,
                        "seed": s, "test_mse": mse.tolist(), "test_start0": 0, "test_end": n + 48 + H - 1,
                        "metrics": {"test_mse": float(mse.mean()), "kurtosis_in": k, "epochs_run": 1,
                                    "test_mae": 0.0},
                        "identities": None})
    return out


def test_build_claims_evidence_and_gates():
    claims = {c.id: c for c in E.build_claims(_fake_records(), 200, 0, 200)}
    c3 = claims["c3_accuracy_synth"]
    assert c3.verdict == REPRODUCED and c3.evidence.paper_data is False and c3.evidence.n == 3
    assert c3.evidence.unit == "seeds (x 25 test blocks of H windows)" and "moving-block" in c3.evidence.ci_method
    assert claims["c4_morph"].verdict == REPRODUCED  # -3.2 % on the segment
    assert {g.name: g.passed for g in claims["c4_morph"].gates} == {"enough_test_blocks": True,
                                                                   "segment_high_variance": True}
    assert claims["c2_tail_slimming"].verdict == REPRODUCED and claims["c2_tail_slimming"].gates[0].passed
    msft = claims["c3_accuracy_msft"]
    assert (msft.status, msft.verdict, msft.testable_at) == ("untested", INCONCLUSIVE, "default")
    # gates: a thin-tailed baseline cannot show tail slimming; a segment no harder than the rest shows no drift
    strict = {c.id: c for c in E.build_claims(_fake_records(), 200, 0, 200, min_baseline_kurtosis=5.0,
                                              min_segment_ratio=3.0)}
    assert strict["c2_tail_slimming"].verdict == INCONCLUSIVE and "baseline_fat_tailed" in strict["c2_tail_slimming"].note
    assert strict["c4_morph"].verdict == INCONCLUSIVE and "segment_high_variance" in strict["c4_morph"].note
    # too few test blocks: the gate fails, nothing is bootstrapped
    short = {c.id: c for c in E.build_claims(_fake_records(n=100), 200, 0, 50)}
    assert short["c3_accuracy_synth"].verdict == INCONCLUSIVE and "enough_test_blocks" in short["c3_accuracy_synth"].note


def test_build_claims_decides_accuracy_on_the_paper_datasets_a_run_has():
    """Fault found by the paper-scale rehearsal: the paper scale runs only the paper's datasets, and claims.json
    held nothing about them (claims 2-4 are about synth/msft, untested there). Claim 3's rule now also decides
    each paper dataset present in the records (paper_data true), and a run without them keeps its claim list."""
    default = [c.id for c in E.build_claims(_fake_records(), 200, 0, 200)]
    assert default == SPEC_CLAIMS  # no paper dataset: the default-scale document is unchanged
    recs = [{**r, "dataset": ds} for ds in ("ETTh1", "Traffic") for r in _fake_records()]
    short = [{**r, "dataset": "Exchange"} for r in _fake_records(n=100)]
    claims = {c.id: c for c in E.build_claims(recs + short, 200, 0, 200)}
    assert [i for i in claims if i.startswith("c3_")] == ["c3_accuracy_synth", "c3_accuracy_msft", "c3_accuracy_ETTh1",
                                                          "c3_accuracy_Traffic", "c3_accuracy_Exchange"]
    for ds in ("ETTh1", "Traffic"):  # mof_linear 8 % below revin_linear on every window: reproduced on paper data
        c = claims[f"c3_accuracy_{ds}"]
        assert c.verdict == REPRODUCED and c.evidence.paper_data is True and c.evidence.n == 3
        assert c.statistic["rel_change"] == pytest.approx(-0.08, abs=1e-12)
    ex = claims["c3_accuracy_Exchange"]  # 77 windows = 3 blocks of 24 < 5: the gate fails
    assert ex.verdict == INCONCLUSIVE and "enough_test_blocks" in ex.note and ex.evidence.paper_data is True
    assert claims["c3_accuracy_synth"].status == "untested"  # synth is not among these records


# ------------------------------------------------------------------------------------------- config


def _config(scale: str, **over) -> Config:
    data = merge_scale(load_yaml(YAML), scale, over)
    return build(Config, data, "morphing_flow")


def test_config_scales_and_bad_keys():
    smoke, default, paper = (_config(s) for s in ("smoke", "default", "paper"))
    assert (smoke.data.synth.n_rows, smoke.data.synth.generator.n_channels, smoke.data.synth.seq_len) == (2000, 3, 48)
    assert default.datasets == ("synth", "msft") and default.seeds == (1000, 1001, 1002, 1003) and len(default.arms) == 4
    assert default.data.synth.generator.model_dump() == {**D.GENERATOR_DEFAULTS, "daily_amp": (1.0, 3.0),
                                                          "weekly_amp": (0.5, 1.5), "garch": (0.05, 0.10, 0.85)}
    assert paper.train.device == "cuda" and paper.pred_lens == (96, 192, 336, 720) and paper.seeds_per_job == 1
    assert set(paper.datasets) == set(REMOTE_DATASETS)
    assert paper.backbones == ("linear", "patch_mamba") and paper.model.scan == "sequential"
    assert default.model.scan == "parallel" and len(paper.arms) == 7
    with pytest.raises(ConfigError, match=r"morphing_flow\.train\.epochs: Input should be greater"):
        _config("default", train={"epochs": 0})
    with pytest.raises(ConfigError, match=r"morphing_flow\.model\.bins: unknown key"):
        _config("default", model={"bins": 8})
    with pytest.raises(ConfigError, match="datasets: duplicates"):
        _config("default", datasets=["synth", "synth"])


def _with_garch(garch, **gen) -> Config:
    return _config("default", data={"synth": {"generator": {"garch": list(garch), **gen}}})


@pytest.mark.parametrize("garch, message", [
    ((-0.05, 0.10, 0.85), r"omega must be > 0"),        # the case: it used to write an all-NaN file
    ((0.0, 0.10, 0.85), r"omega must be > 0"),
    ((0.05, -0.10, 0.85), r"alpha and beta must be >= 0"),
    ((0.05, 0.10, -0.20), r"alpha and beta must be >= 0"),
    ((0.05, 0.15, 0.85), r"alpha \+ beta must be < 1"),  # IGARCH: infinite unconditional variance
    ((0.05, 0.30, 0.85), r"alpha \+ beta must be < 1"),
    ((float("nan"), 0.10, 0.85), r"\(omega, alpha, beta\) must be finite"),
])
def test_bad_garch_parameters_fail_at_parse_time_naming_the_key(garch, message):
    """Issue 33: a non-stationary or non-positive GARCH(1,1) is refused when the config is built (the Snakefile's
    parse), naming the key, instead of at preprocess naming the CSV after an all-NaN file was written."""
    with pytest.raises(ConfigError, match=r"morphing_flow\.data\.synth\.generator\.garch: " + message):
        _with_garch(garch)
    with pytest.raises(ValueError, match="generator garch: " + message):  # the generator refuses it too
        D.make_fat_tailed_ett(50, 0, {**D.GENERATOR_DEFAULTS, "garch": garch})


def test_valid_garch_edges_parse_and_give_a_finite_series():
    """Inside the region (omega > 0, alpha, beta >= 0, alpha + beta < 1) the config builds and the series is
    finite, e.g. white-noise variance (1, 0, 0) and alpha + beta = 0.999; amplitude ranges need 0 <= lo <= hi."""
    for garch in ((1.0, 0.0, 0.0), (0.001, 0.099, 0.9)):
        assert _with_garch(garch).data.synth.generator.garch == garch
        df = D.make_fat_tailed_ett(300, 0, {**D.GENERATOR_DEFAULTS, "garch": garch})
        assert np.isfinite(df.drop(columns="date").to_numpy()).all()
    with pytest.raises(ConfigError, match=r"generator\.daily_amp: the amplitude range"):
        _with_garch((0.05, 0.10, 0.85), daily_amp=[3.0, 1.0])


def test_cuda_without_a_gpu_is_a_clear_error():
    from icml25.studies.morphing_flow.train import device_of

    assert device_of("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="train.device: cuda requested"):
            device_of("cuda")


# ------------------------------------------------------------------------------------- stages (smoke)


def _run_stages(tmp: Path, extra: list[str] | None = None) -> Path:
    """Every stage of the smoke scale through the stage CLI (what the Snakemake rules run)."""
    r = tmp / "results"
    cfg = _config("smoke")
    common = ["--scale", "smoke", "--results", str(r), "--config", str(YAML), *(extra or [])]
    raw = [str(r / f"raw/{d}.csv") for d in cfg.datasets]
    proc = [str(r / f"processed/{d}.npz") for d in cfg.datasets]
    assert stage_cli(["download", *common, "--out", *raw, str(r / "raw/manifest.csv")]) == 0
    assert stage_cli(["preprocess", *common, "--in", *raw, "--out", *proc, str(r / "processed/scaler.json")]) == 0
    records = []
    for arm in cfg.arms:
        out = [str(r / f"models/{arm}/chunk0.pt"), str(r / f"models/{arm}/chunk0.json")]
        assert stage_cli(["train", *common, "--arm", arm, "--seeds", "0", "--in", *proc, "--out", *out]) == 0
        records.append(out[1])
    assert stage_cli(["evaluate", *common, "--in", *records, "--out", str(r / "claims.json"),
                      str(r / "metrics/eval.json")]) == 0
    figs = [str(r / f"figures/{n}.png") for n in ("kurtosis", "flow_curves", "forecasts")]
    assert stage_cli(["report", *common, "--in", str(r / "metrics/eval.json"), *records, "--out", *figs,
                      str(r / "report.md")]) == 0
    return r


def test_smoke_all_stages(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    r = _run_stages(tmp_path)
    cfg = _config("smoke")
    # download: the generated series, exactly as the generator makes it; its sha256 in raw/manifest.csv
    synth = D.read_ett_csv(r / "raw/synth.csv", 3)
    expected = mof.make_fat_tailed_ett(2000, 0, cfg.data.synth.generator.model_dump())
    np.testing.assert_array_equal(synth.iloc[:, 1:].to_numpy(), expected.iloc[:, 1:].to_numpy())
    row = pd.read_csv(r / "raw/manifest.csv").iloc[0]
    assert row["name"] == "synth" and row["sha256"] == hashlib.sha256((r / "raw/synth.csv").read_bytes()).hexdigest()
    # preprocess: TSLib ratio borders and the training-rows-only scaler
    scaler = json.loads((r / "processed/scaler.json").read_text())["synth"]
    assert scaler["border1s"] == [0, 1400 - 48, 1600 - 48] and scaler["border2s"] == [1400, 1600, 2000]
    np.testing.assert_allclose(scaler["mean"], expected.iloc[:1400, 1:].to_numpy().mean(axis=0), rtol=1e-12)
    # train: the pipeline's record equals the in-memory run of the same arm and seed (CSV round trip is exact)
    rec = json.loads((r / "models/mof_flow/chunk0.json").read_text())["records"][0]
    assert rec["metrics"] == run(cfg, "mof_flow", 0)["metrics"]
    assert len(rec["test_mse"]) == 400 + 48 - 48 - 24 + 1 and rec["test_end"] == 2000
    assert E.record_segment(rec, 200).sum() == 200 - 24 + 1
    weights = torch.load(r / "models/mof_flow/chunk0.pt", weights_only=True)["state_dicts"]
    assert list(weights) == ["synth/linear/H24/seed0"] and weights["synth/linear/H24/seed0"]["flow.a"].shape == (3, 16)
    # claims: every spec claim and check; one seed, so claims are inconclusive by the evidence rule, checks hold
    doc = load_claims(r / "claims.json")
    assert [c["id"] for c in doc["claims"]] == SPEC_CLAIMS and doc["seeds"] == [0]
    by = {c["id"]: c for c in doc["claims"]}
    assert (by["c1_flow_identities"]["kind"], by["c1_flow_identities"]["verdict"]) == ("check", REPRODUCED)
    assert by["c1_flow_identities"]["holds"] is True and by["c1_flow_identities"]["evidence"]["n"] == 2
    assert by["c1_flow_identities"]["statistic"]["max_inverse_err"] <= 1e-10
    for cid in ("c2_tail_slimming", "c3_accuracy_synth", "c4_morph"):
        assert by[cid]["kind"] == "claim" and by[cid]["verdict"] == INCONCLUSIVE
        ev = by[cid]["evidence"]
        assert (ev["n"], ev["paper_data"]) == (1, False) and ev["unit"].startswith("seeds") and ev["ci_method"]
        # one seed: the evidence rule, unless a failed adequacy gate already withheld the verdict
        assert "evidence rule: 1 independent seeds" in by[cid]["note"] or "adequacy gate" in by[cid]["note"]
    # at smoke size (3 channels, 2,000 rows) the baseline's inputs are barely fat-tailed: the gate says so
    (g2,) = by["c2_tail_slimming"]["gates"]
    assert g2["name"] == "baseline_fat_tailed" and g2["passed"] is (g2["value"] >= 1.0)
    assert "moving-block bootstrap 95% over 377 stride-1 windows (block 24 = H, 15 non-overlapping blocks)" in \
        by["c3_accuracy_synth"]["evidence"]["ci_method"]
    msft = by["c3_accuracy_msft"]
    assert (msft["status"], msft["verdict"], msft["testable_at"]) == ("untested", INCONCLUSIVE, "default")
    kr = json.loads((r / "models/revin_linear/chunk0.json").read_text())["records"][0]["metrics"]["kurtosis_in"]
    assert by["c2_tail_slimming"]["statistic"]["reduction"] == [pytest.approx(1 - rec["metrics"]["kurtosis_in"] / kr)]
    evaluation = json.loads((r / "metrics/eval.json").read_text())
    assert evaluation["cells"]["synth"]["mof_flow"]["test_mse"]["mean"] == rec["metrics"]["test_mse"]
    assert all((r / f"figures/{n}.png").stat().st_size > 5000 for n in ("kurtosis", "flow_curves", "forecasts"))
    assert "c4_morph" in (r / "report.md").read_text()
    # with the download record of a remote file among its inputs (paper scale), evaluate says in claims.json which
    # revision and sha256 were read and that the hash was trusted on the first download (an UNPINNED row)
    assert "data_files" not in doc
    record = tmp_path / "downloads" / "manifest.csv"
    record.parent.mkdir()
    url = D.remote_manifest()["Electricity"].url
    pd.DataFrame([{"name": "synth", "source": "generator", "bytes": 1, "sha256": "00" * 32},
                  {"name": "Electricity", "source": url, "bytes": 5, "sha256": "ef" * 32}]).to_csv(record, index=False)
    common = ["--scale", "smoke", "--results", str(r), "--config", str(YAML)]
    records = [str(r / f"models/{arm}/chunk0.json") for arm in cfg.arms]
    assert stage_cli(["evaluate", *common, "--in", *records, str(record), "--out", str(tmp_path / "c.json"),
                      str(tmp_path / "e.json")]) == 0
    with_files = load_claims(tmp_path / "c.json")
    assert with_files["data_files"] == {"Electricity": {
        "url": url, "revision": "ea89753da2b451928436adb333c7a2e892461c7d", "sha256": "ef" * 32, "bytes": 5,
        "pin": "trusted_first_download"}}
    assert with_files["claims"] == doc["claims"]
    # MLflow: one nested run per seed with the per-epoch curves, the model, per-arm evaluate runs, verdict tags
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("icml25/morphing_flow").experiment_id])
    train = [x for x in runs if x.data.tags.get("stage") == "train" and x.data.tags.get("arm") == "mof_flow"]
    (job,) = [x for x in train if x.data.tags["run_level"] == "job"]
    # a job of one seed is that seed's run (tag seed); with more seeds it opens one nested run per seed
    assert job.data.tags["seed"] == "0" and job.data.tags["fidelity"] == "reconstructed"
    assert not [x for x in train if x.data.tags.get("mlflow.parentRunId") == job.info.run_id]
    history = client.get_metric_history(job.info.run_id, "train/synth/loss")
    assert [(m.step, m.value) for m in history] == [(0, pytest.approx(rec["curves"]["loss"][0]))]
    assert [a.path for a in client.list_artifacts(job.info.run_id, "model")] == ["model/chunk0.pt",
                                                                                  "model/config.json"]
    evals = [x for x in runs if x.data.tags.get("stage") == "evaluate" and x.data.tags["run_level"] == "nested"]
    assert {x.data.tags["arm"] for x in evals} == set(cfg.arms)
    for x in evals:
        assert x.data.metrics["eval/synth/test_mse"] == pytest.approx(
            evaluation["cells"]["synth"][x.data.tags["arm"]]["test_mse"]["mean"])
    evaluate = next(x for x in runs if x.data.tags.get("stage") == "evaluate" and x.data.tags["run_level"] == "job")
    assert evaluate.data.metrics["verdicts/checks_hold"] == 1.0
    assert evaluate.data.tags["verdict/c4_morph"] == INCONCLUSIVE


def test_stages_reject_bad_input(tmp_path):
    common = ["--scale", "smoke", "--no-track", "--config", str(YAML)]
    with pytest.raises(SystemExit, match="ETTh1 is a remote file"):  # paper data offline
        stage_cli(["download", "--scale", "paper", "--no-track", "--config", str(YAML), "--out",
                   *[str(tmp_path / f"{d}.csv") for d in REMOTE_DATASETS], str(tmp_path / "m.csv")])
    assert not list(tmp_path.iterdir())
    bad = tmp_path / "synth.csv"
    df = mof.make_fat_tailed_ett(200, 0, {"n_channels": 3}).drop(columns=["HULL"])
    df.to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"synth.csv: missing column\(s\) \['HULL'\]"):
        stage_cli(["preprocess", *common, "--in", str(bad), "--out", str(tmp_path / "synth.npz"),
                   str(tmp_path / "scaler.json")])
    with pytest.raises(SystemExit, match="--arm must be one of"):
        stage_cli(["train", *common, "--arm", "magic", "--in", str(bad), "--out", str(tmp_path / "m.pt"),
                   str(tmp_path / "m.json")])
    with pytest.raises(SystemExit, match="should be named after dataset 'synth'"):
        stage_cli(["preprocess", *common, "--in", str(tmp_path / "other.csv"), "--out", str(tmp_path / "a.npz"),
                   str(tmp_path / "scaler.json")])
    assert not (tmp_path / "synth.npz").exists() and not (tmp_path / "scaler.json").exists()


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


def test_rehearsal_miniatures_have_the_real_headers_and_read_through_the_paper_readers(tmp_path):
    """morphing_flow/rehearsal.py: every paper dataset's miniature at its manifest mirror path, read by the paper
    path's own readers (header checks, date parsing, numeric values), the same bytes on a second call; the values
    are the float32 numbers written (to float32 precision), the Exchange dates in the bundle's ``1990/1/1 0:00``
    format parse to consecutive days, Weather's header carries its latin-1 unit bytes."""
    from icml25.core.download import read_manifest
    from icml25.studies.morphing_flow import rehearsal as RH

    manifest = read_manifest(Path(RH.__file__).with_name("manifest.csv"), rehearsal=False)
    names = RH.write_miniatures(tmp_path / "a", manifest)
    assert names == list(REMOTE_DATASETS)
    RH.write_miniatures(tmp_path / "b", manifest)
    for name in names:
        path = tmp_path / "a" / manifest[name].mirror_path
        assert path.read_bytes() == (tmp_path / "b" / manifest[name].mirror_path).read_bytes(), name
        values = D.read_raw(name, path)
        expect = RH._values(len(values), values.shape[1], RH.CLOCK[name][2], RH.CLOCK[name][3])
        np.testing.assert_array_equal(values.astype(np.float32), expect)
        rows = RH.ETT_ROWS.get(name, RH.AUTOFORMER_ROWS)
        assert values.shape == (rows, 7 if name.startswith("ETT") else D.AUTOFORMER[name][1]), name
    assert D.split_borders(RH.ETT_ROWS["ETTh1"], 336, "etth")[1] == [8640, 11520, 14400]  # the real borders fit
    ex = D.read_autoformer_csv(tmp_path / "a" / manifest["Exchange"].mirror_path, "Exchange")
    assert (ex["date"].diff().iloc[1:] == pd.Timedelta(days=1)).all() and ex["date"].iloc[31] == pd.Timestamp("1990-02-01")
    raw = (tmp_path / "a" / manifest["Weather"].mirror_path).read_bytes()
    assert b"SWDR (W/m\xb2),PAR (\xb5mol/m\xb2/s)" in raw.split(b"\n")[0]
    ettm = D.read_ett_csv(tmp_path / "a" / manifest["ETTm1"].mirror_path)
    assert ettm["date"].iloc[1] - ettm["date"].iloc[0] == pd.Timedelta(minutes=15)
