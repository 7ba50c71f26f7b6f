"""Tests of the roste study: quantizer, Hadamard rotations, Proposition 4.4, exact rotation invariance and norm
folding, KV quantization, the rotation search, the verdict functions, and a smoke run of every stage through
Snakemake."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from icml25.core.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, load_claims
from icml25.core.config import ConfigError, build
from icml25.studies.roste import (Model, ModelConfig, QuantConfig, fake_quant_forward, quantize, random_hadamard,
                                  search_rotation_config)
from icml25.studies.roste import data as D
from icml25.studies.roste import evaluate as E
from icml25.studies.roste.claims import CLAIM_IDS, build_claims
from icml25.studies.roste.config import Config
from icml25.studies.roste.method import (fwht, hadamard_signs, no_rotation_bound, quant_params, rotate,
                                         rotated_bound, row_errors_symmetric)
from icml25.studies.roste.model import decoder_forward, deploy
from icml25.studies.roste.search import config_errors, total_error

ROOT = Path(__file__).resolve().parents[2]
OFF = QuantConfig(None, None, None)


@pytest.fixture(scope="module")
def model64() -> Model:
    """A float64 default-size model with random (non-unit) norm gains, so folding is exercised."""
    torch.manual_seed(0)
    m = Model(ModelConfig(), seed=1).double()
    with torch.no_grad():
        for k, p in m.p.items():
            if k.endswith(("_ga", "_gm")) or k == "gf":
                p.uniform_(0.5, 1.5)
    return m.requires_grad_(False)


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    return torch.randint(0, 60, (6, 26), generator=torch.Generator().manual_seed(2))


# --------------------------------------------------------------------------------------------- quantizer


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_quantizer_on_grid_and_half_step_error(symmetric, bits):
    x = torch.randn(50, 32, dtype=torch.float64) * torch.logspace(-2, 1, 50, dtype=torch.float64)[:, None]
    q = quantize(x, bits, symmetric, ste=False)
    s, z, lo, hi = quant_params(x, bits, symmetric)
    k = q / s + z
    assert torch.allclose(k, k.round(), atol=1e-6) and k.round().min() >= lo and k.round().max() <= hi
    assert ((q - x).abs() <= s / 2 * (1 + 1e-9)).all()  # c = 1: nearest grid point, no clipping
    assert torch.allclose(quantize(q, bits, symmetric, ste=False), q, atol=1e-12)  # idempotent


def test_quantizer_4bit_values_and_symmetric_keeps_zero():
    x = torch.tensor([[0.0, 1.0, 2.0, 3.0, 15.0]], dtype=torch.float64)
    assert torch.equal(quantize(x, 4, ste=False), x)  # integers in [0, 15] are on the asymmetric grid (s = 1)
    y = torch.tensor([[-0.3, 0.0, 0.05, 0.7]], dtype=torch.float64)
    qs = quantize(y, 4, symmetric=True, ste=False)
    assert qs[0, 1] == 0.0 and qs[0, 3] == pytest.approx(0.7)  # s = 0.1: 0.05 rounds to 0 (half to even)
    assert qs[0, 0] == pytest.approx(-0.3)
    clipped = quantize(y, 4, symmetric=True, clip=0.5, ste=False)
    assert clipped.max() == pytest.approx(0.35)  # s = 0.05: 0.7 -> 7 * 0.05


def test_quantizer_groups_and_shapes():
    x = torch.randn(3, 5, 32, dtype=torch.float64)
    x[..., 0] = 100.0  # an outlier in the first group only
    q16 = quantize(x, 4, group_size=16, ste=False)
    assert q16.shape == x.shape
    err = (q16 - x).abs()
    assert err[..., 16:].max() < err[..., 1:16].max()  # the second group keeps its own, finer step
    assert torch.equal(q16[..., 16:], quantize(x[..., 16:], 4, ste=False))
    with pytest.raises(ValueError, match="group_size"):
        quantize(x, 4, group_size=5)
    assert quantize(x, None) is x


def test_ste_gradient_is_identity():
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 8, dtype=torch.float64)
    (quantize(x, 2, ste=True) * g).sum().backward()
    assert torch.equal(x.grad, g)
    assert torch.equal(quantize(x, 2, ste=True).detach(), quantize(x.detach(), 2, ste=False))


def test_asymmetric_zero_point_clips_both_ends_as_the_official_code():
    """Issue 32: z = round(-c min / s) (official quant_utils/quant_linear.py), not round(-min / s).

    Hand case: x = (-4, 0, 4, 8, 11), 4 bits, c = 0.8: s = 0.8 * 15 / 15 = 0.8, z = round(0.8 * 4 / 0.8) = 4, the
    grid is (k - 4) 0.8 for k = 0..15, i.e. [-3.2, 8.8]: -4 -> -3.2 (bottom clipped), 11 -> 8.8 (top clipped),
    4 -> 4.0, 8 -> 8.0. The old zero point round(-min / s) = 5 gave the grid [-4, 8] (only the top clipped)."""
    x = torch.tensor([[-4.0, 0.0, 4.0, 8.0, 11.0]], dtype=torch.float64)
    s, z, lo, hi = quant_params(x, 4, clip=0.8)
    assert float(s) == pytest.approx(0.8) and float(z) == 4.0 and (lo, hi) == (0, 15)
    assert torch.allclose(quantize(x, 4, clip=0.8, ste=False),
                          torch.tensor([[-3.2, 0.0, 4.0, 8.0, 8.8]], dtype=torch.float64), atol=1e-12)
    # 8 bits, c = 0.9 on Gaussian rows: the official grid clips a few % at both ends (the issue measured 1.9%),
    # the old one ~21% at the top
    g = torch.randn(400, 256, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    s, z, _, _ = quant_params(g, 8, clip=0.9)
    k = torch.round(g / s) + z
    clipped = float(((k < 0) | (k > 255)).double().mean())
    assert 0.002 < clipped < 0.05
    mn, mx = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    assert torch.allclose((0 - z) * s, 0.9 * mn, atol=float(s.max()))  # grid ends within one step of c min
    assert torch.allclose((255 - z) * s, 0.9 * mx, atol=float(s.max()))  # ... and of c max


# --------------------------------------------------------------------------------------------- Hadamard


def _sylvester(d: int) -> torch.Tensor:
    """H_d by Kronecker powers of [[1, 1], [1, -1]] (independent of method.sylvester_hadamard)."""
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]), h)
    return torch.from_numpy(h)


def test_r1_signs_come_first_and_change_the_quantization_error():
    """Issue 32: R1 = diag(r) H / sqrt(d) (official random_hadamard_matrix = matmul_hadU(diag(r))), so the merged
    weights' per-channel quantization error depends on the sign draw (Prop. 4.4's randomness); with H diag(r) it
    did not (the signs only flip whole output rows of R^T W, to which per-row quantization is blind)."""
    d = 64
    for seed in (0, 5):
        r = hadamard_signs(d, seed)
        assert torch.allclose(random_hadamard(d, seed), torch.diag(r) @ _sylvester(d) / 8.0, atol=1e-15)
        x = torch.randn(3, d, dtype=torch.float64)
        assert torch.allclose(rotate(x, r), x @ torch.diag(r) @ _sylvester(d) / 8.0, atol=1e-12)
    w = torch.randn(d, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    w[3] *= 30  # an outlier input channel
    errs = []
    for seed in range(20):
        rt_w = random_hadamard(d, seed).T @ w  # the merged R1^T W, quantized per output channel (columns)
        errs.append(float(((quantize(rt_w.T, 4, ste=False) - rt_w.T) ** 2).sum()))
    assert np.std(errs) > 1e-3 * np.mean(errs)
    old = [float(((quantize((_sylvester(d) * hadamard_signs(d, k) / 8.0).T @ w, 4, ste=False).T
                   - ((_sylvester(d) * hadamard_signs(d, k) / 8.0).T @ w).T) ** 2).sum()) for k in range(20)]
    assert np.std(old) < 1e-9 * np.mean(old)  # the old convention: the draw is inert


def test_r2_r4_carry_no_signs_and_r2_rotates_the_v_output_online(model64, tokens):
    """Issue 32: R2-R4 are plain H / sqrt(d); R2 leaves W_v unrotated (quantized as is) and rotates each head's V
    output online before the V cache quantizer (official QuantLinear_R_v), while W_o gets R2^T merged."""
    from icml25.studies.roste.model import rotation_signs

    cfg = model64.cfg
    rot = {"r1": True, **{s: s == "r2.0" for s in cfg.slots()}}
    signs = rotation_signs({**rot, "r3.1": True, "r4.1": True}, cfg, seed=9)
    for s in ("r2.0", "r3.1", "r4.1"):
        assert torch.equal(signs[s], torch.ones_like(signs[s]))
    assert not torch.equal(signs["r1"], torch.ones_like(signs["r1"]))
    p_off, _ = deploy(model64, {**rot, "r2.0": False}, seed=9)
    p_on, online = deploy(model64, rot, seed=9)
    assert torch.equal(p_on["l0_wv"], p_off["l0_wv"])  # W_v not rotated
    hd = cfg.head_dim
    h2 = _sylvester(hd) / math.sqrt(hd)
    wo_want = (h2.T @ p_off["l0_wo"].reshape(cfg.n_heads, hd, -1)).reshape(cfg.d_model, -1)
    assert torch.allclose(p_on["l0_wo"], wo_want, atol=1e-12)
    # the V cache of layer 0 under 4-bit weights only: (x Q(W_v)) per head times H / sqrt(hd), W_v unrotated
    q = QuantConfig(4, None, None)
    rec: dict[str, torch.Tensor] = {}
    decoder_forward(p_on, tokens, cfg, q, online, record=rec)
    wv = p_off["l0_wv"]
    cols = wv.T  # rows = output channels
    mn, mx = cols.amin(-1, keepdim=True), cols.amax(-1, keepdim=True)
    st = (mx - mn) / 15
    qw = ((torch.clamp(torch.round(cols / st) + torch.round(-mn / st), 0, 15) - torch.round(-mn / st)) * st).T
    v = (rec["attn_in.0"] @ qw).reshape(*tokens.shape, cfg.n_heads, hd) @ h2
    assert torch.allclose(rec["v.0"], v, atol=1e-10)
    merged = (rec["attn_in.0"] @ quantize((wv.reshape(-1, cfg.n_heads, hd) @ h2).reshape(wv.shape).T, 4,
                                          ste=False).T).reshape(*tokens.shape, cfg.n_heads, hd)
    assert float((merged - v).abs().max()) > 1e-4  # merging R2 into W_v first quantizes another weight
    # full precision: every configuration computes the same function
    assert torch.allclose(decoder_forward(p_on, tokens, cfg, None, online), model64(tokens), atol=1e-10)




@pytest.mark.parametrize("d", [1, 2, 16, 64, 128])
def test_hadamard_orthonormal_and_deterministic(d):
    r = random_hadamard(d, seed=5)
    assert r.shape == (d, d) and r.dtype == torch.float64
    assert torch.allclose(r @ r.T, torch.eye(d, dtype=torch.float64), atol=1e-12)
    assert torch.equal(r, random_hadamard(d, seed=5))
    if d >= 16:
        assert not torch.equal(r, random_hadamard(d, seed=6))
        assert torch.allclose(r.abs(), torch.full((d, d), 1 / math.sqrt(d), dtype=torch.float64))


@pytest.mark.parametrize("d", [0, 3, 48, 100])
def test_hadamard_rejects_non_power_of_two(d):
    with pytest.raises(ValueError, match="power of 2"):
        random_hadamard(d, 0)


def test_fwht_backward_is_autograds_chain_bit_for_bit():
    """fwht's one-node backward (reverse-order butterflies) gives exactly autograd's gradient through the
    butterflies, so training numbers do not depend on which is used."""
    from icml25.studies.roste.method import _butterflies, sylvester_hadamard

    g = torch.Generator().manual_seed(5)
    for d in (1, 2, 16, 128):
        for dt in (torch.float32, torch.float64):
            x = torch.randn(7, 5, d, dtype=dt, generator=g, requires_grad=True)
            gy = torch.randn(7, 5, d, dtype=dt, generator=g)
            (want,) = torch.autograd.grad(_butterflies(x), x, gy)
            (got,) = torch.autograd.grad(fwht(x), x, gy)
            assert torch.equal(fwht(x), _butterflies(x)) and torch.equal(got, want), (d, dt)
    assert torch.allclose(got, gy @ sylvester_hadamard(128), atol=1e-9)  # the gradient is g H (H symmetric)


def test_fast_transform_equals_dense():
    x = torch.randn(7, 3, 256, dtype=torch.float64)
    assert torch.allclose(rotate(x, hadamard_signs(256, 4)), x @ random_hadamard(256, 4), atol=1e-12)
    assert torch.allclose(fwht(fwht(x)), 256 * x, atol=1e-9)


# ------------------------------------------------------------------------------------ Proposition 4.4


def test_prop44_no_rotation_bound_always_holds():
    w = torch.randn(200, 64, dtype=torch.float64) ** 3
    for bits in (2, 3, 4, 8):
        assert (row_errors_symmetric(w, bits) <= no_rotation_bound(w, bits) * (1 + 1e-12)).all()


def test_prop44_rotated_bound_fails_in_at_most_delta_of_sign_draws():
    d, bits, delta = 64, 4, 0.05
    w = torch.zeros(d, dtype=torch.float64)
    w[[3, 17]] = 30.0  # an outlier row: the rotated bound is far below the no-rotation one
    w += torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    from icml25.studies.roste.method import sylvester_hadamard

    h = sylvester_hadamard(d) / math.sqrt(d)  # H / sqrt(d); signs applied per draw below
    rng = np.random.default_rng(0)
    signs = torch.from_numpy(rng.choice([-1.0, 1.0], size=(2000, d)))
    rotated = (w * signs) @ h  # R^T w with R = diag(r) H / sqrt(d) for each draw
    fails = (row_errors_symmetric(rotated, bits) > rotated_bound(w[None], bits, delta)).double().mean()
    assert float(fails) <= delta
    assert float(rotated_bound(w[None], bits, delta)[0]) < float(no_rotation_bound(w[None], bits)[0])


# ------------------------------------------------------------------------------------- invariances


def test_outlier_injection_follows_the_spec(tokens):
    """Default model: a fixed (non-trainable) vector scales embedding channels {3, 17} by α = 30 (control α = 1);
    folding moves it into the embedding; the first block input is RMSNorm(emb * scale)."""
    m = Model()
    want = torch.ones(64)
    want[[3, 17]] = 30.0
    assert m.cfg.alpha == 30.0 and m.cfg.outlier_channels == (3, 17) and torch.equal(m.scale, want)
    assert "scale" not in dict(m.named_parameters()) and "scale" in dict(m.named_buffers())
    params, _ = deploy(m, "none")
    assert torch.allclose(params["emb"], m.p["emb"].detach() * want)
    rec: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        decoder_forward(m.params(), tokens, m.cfg, record=rec)
        h = m.p["emb"][tokens] * want
        assert torch.allclose(rec["attn_in.0"], h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-5) * m.p["l0_ga"])
    raw = yaml.safe_load((ROOT / "config/studies/roste.yaml").read_text())
    raw.pop("scales")
    cfg = build(Config, raw, "roste")
    from icml25.studies.roste.experiment import model_config

    assert [model_config(cfg, cfg.arm_alpha(a)).alpha for a in ("roste", "ste", "fp_sft", "ste_a1", "roste_a1")] \
        == [30.0, 30.0, 30.0, 1.0, 1.0]
    assert Model(model_config(cfg, 1.0)).scale.eq(1.0).all()


def test_norm_folding_exact(model64, tokens):
    params, online = deploy(model64, "none")
    assert not any(k.endswith(("_ga", "_gm")) or k in ("gf", "scale") for k in params)
    assert torch.allclose(decoder_forward(params, tokens, model64.cfg), model64(tokens), atol=1e-10, rtol=0)


def test_every_rotation_configuration_gives_the_same_logits_float64(model64, tokens):
    ref = model64(tokens)
    rng = np.random.default_rng(0)
    slots = model64.cfg.slots()
    configs = ["none", "all", *({"r1": bool(rng.integers(2)), **{s: bool(rng.integers(2)) for s in slots}}
                               for _ in range(4))]
    for k, c in enumerate(configs):
        got = fake_quant_forward(model64, tokens, c, OFF, seed=k)
        assert float((got - ref).abs().max()) <= 1e-10, c
    q = fake_quant_forward(model64, tokens, "all", QuantConfig(), seed=0)
    assert float((q - ref).abs().max()) > 1e-3  # and the quantizers, when on, do change the logits


def test_rotations_change_quantized_logits_but_not_fp(model64, tokens):
    a = fake_quant_forward(model64, tokens, "none", QuantConfig(), seed=0)
    b = fake_quant_forward(model64, tokens, "all", QuantConfig(), seed=0)
    assert float((a - b).abs().max()) > 1e-3


def test_kv_quantization(model64, tokens):
    ref = fake_quant_forward(model64, tokens, "none", OFF)
    kv2 = fake_quant_forward(model64, tokens, "none", QuantConfig(None, None, 2))
    kv_none = fake_quant_forward(model64, tokens, "none", QuantConfig(None, None, None))
    assert float((kv2 - ref).abs().max()) > 1e-3
    assert torch.equal(kv_none, ref)


def test_bad_rotation_spec_and_tokens(model64, tokens):
    with pytest.raises(ValueError, match="missing slots"):
        fake_quant_forward(model64, tokens, {"r2.0": True}, OFF)
    with pytest.raises(ValueError, match="none"):
        fake_quant_forward(model64, tokens, "some", OFF)
    with pytest.raises(ValueError, match="T <= 48"):
        model64(torch.zeros(1, 49, dtype=torch.long))


# ------------------------------------------------------------------------------------------ search


def test_search_per_slot_argmin_and_sum_of_minima(model64, tokens):
    choices, errors = search_rotation_config(model64, tokens, QuantConfig(), seed=3)
    slots = model64.cfg.slots()
    assert list(choices) == slots and set(errors) == set(slots)
    for s in slots:
        assert choices[s] == (errors[s][1] < errors[s][0])
    tot = total_error(errors, choices)
    assert tot["chosen"] == pytest.approx(tot["sum_min"], rel=1e-12)
    assert tot["sum_min"] <= min(tot["all_I"], tot["all_H"])
    measured = config_errors(model64, tokens, QuantConfig(), choices, seed=3)  # its own pass: separable
    assert sum(measured[s] for s in slots) == pytest.approx(tot["sum_min"], rel=1e-9)
    all_i = config_errors(model64, tokens, QuantConfig(), {"r1": True, **{s: False for s in slots}}, seed=3)
    assert sum(all_i[s] for s in slots) == pytest.approx(tot["all_I"], rel=1e-12)


def test_search_r1_option_and_ties_choose_identity(model64, tokens):
    choices, errors = search_rotation_config(model64, tokens, QuantConfig(), seed=3, r1="search")
    assert choices["r1"] == (errors["r1"][1] < errors["r1"][0])
    off = QuantConfig(None, None, None)  # every error 0: every tie resolves to I
    choices, errors = search_rotation_config(model64, tokens, off, seed=0)
    assert not any(choices.values()) and all(e == (0.0, 0.0) for e in errors.values())


# -------------------------------------------------------------------------------------------- data


def test_markov_chain_and_sft_task():
    nxt, probs = D.markov_chain(60, 4, 0.5, 0)
    assert nxt.shape == (60, 4) and np.allclose(probs.sum(1), 1)
    assert all(len(set(r)) == 4 for r in nxt)
    x = np.array([[5, 3, 5, 3, 9, 1, 1, 7]])
    assert D.top_k_tokens(x, 4, 10).tolist() == [[1, 3, 5, 7]]  # counts 2,2,2 then ties by lower id
    ex = D.sft_examples(nxt, probs, 50, 20, 4, np.random.default_rng(0))
    assert ex.shape == (50, 26) and (ex[:, 20] == 60).all() and (ex[:, 25] == 61).all()
    for row in ex:  # the answer really is the top-4 of the input
        assert row[21:25].tolist() == D.top_k_tokens(row[None, :20], 4, 60)[0].tolist()
        assert all(nxt[a].tolist().count(b) == 1 for a, b in zip(row[:19], row[1:20]))
    d1 = D.build_data({**Config.model_fields["data"].default.model_dump(), "sft_train": 40, "sft_test": 10}, 48, 8)
    d2 = D.build_data({**Config.model_fields["data"].default.model_dump(), "sft_train": 40, "sft_test": 10}, 48, 8)
    assert all(torch.equal(d1[k], d2[k]) for k in d1)


def test_config_scales_and_bad_keys():
    import yaml

    raw = yaml.safe_load((ROOT / "config/studies/roste.yaml").read_text())
    scales = raw.pop("scales")
    for name, over in scales.items():
        merged = {**raw, **{k: ({**raw[k], **v} if isinstance(v, dict) else v) for k, v in over.items()}}
        cfg = build(Config, merged, "roste")
        assert cfg.alpha == 30.0
    assert build(Config, raw, "roste").alphas() == (30.0, 1.0)
    with pytest.raises(ConfigError, match="roste.quant.bitz"):
        build(Config, {**raw, "quant": {"bitz": 3}}, "roste")
    with pytest.raises(ConfigError, match="fp_sft"):
        build(Config, {**raw, "arms": ["rtn", "ste"]}, "roste")


# -------------------------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize("ste, roste, expected", [
    ([1.10, 1.10, 1.10], [1.00, 1.05, 1.02], (True, False)),     # mean d = 0.077, all > 0
    ([1.0, 1.0, 1.0], [0.984375, 0.984375, 0.984375], (False, False)),  # all > 0, mean d = 0.0156 <= 0.02
    ([1.0, 1.0, 1.0], [0.984375, 0.96875, 0.984375], (True, False)),    # mean d = 0.0208 > 0.02
    ([1.10, 1.10, 1.10], [1.00, 1.00, 1.11], (False, False)),    # mean > 0.02 but one d_s < 0
    ([1.00, 1.00, 1.00], [1.00, 1.00, 1.00], (False, True)),     # mean d = 0 -> not reproduced
    ([1.00, 1.00, 1.00], [1.10, 1.00, 1.00], (False, True)),
])
def test_decide_claim1(ste, roste, expected):
    rep, notrep, stat = E.decide_claim1(ste, roste)
    assert (rep, notrep) == expected
    assert stat["mean_d"] == pytest.approx(np.mean(np.subtract(ste, roste)))


@pytest.mark.parametrize("rtn, roste, fp, expected", [
    ([2.6, 2.7, 2.8], [2.0, 2.1, 2.2], [1.9, 2.0, 2.1], (True, False)),
    ([2.5, 2.7, 2.8], [2.0, 2.1, 2.2], [1.9, 2.0, 2.1], (False, True)),   # gap exactly 0.5 is not > 0.5
    ([2.6, 2.7, 2.8], [2.0, 2.1, 2.2], [2.0, 2.0, 2.1], (False, True)),   # fp_sft not below roste on seed 0
])
def test_decide_claim2(rtn, roste, fp, expected):
    assert E.decide_claim2(rtn, roste, fp)[:2] == expected


def test_decide_control_and_checks():
    assert E.decide_control([1.0, 1.0], [0.99, 0.99])[:2] == (True, False)
    assert E.decide_control([1.0, 1.0], [0.98, 0.98])[:2] == (False, True)  # |mean d| = 0.02: not < 0.02
    assert E.decide_invariance([1e-5, 1e-4])[0] and not E.decide_invariance([1e-5, 1.1e-4])[0]
    assert not E.decide_invariance([])[0]
    good = {"choices": {"r2.0": True, "r3.0": False}, "errors": {"r2.0": [2.0, 1.0], "r3.0": [1.0, 1.0]},
            "measured": 2.0}
    assert E.decide_search([good])[0]
    assert not E.decide_search([{**good, "choices": {"r2.0": False, "r3.0": False}}])[0]  # not the argmin
    assert not E.decide_search([{**good, "choices": {"r2.0": True, "r3.0": True}}])[0]   # tie must pick I
    assert not E.decide_search([{**good, "measured": 2.1}])[0]                           # not separable
    assert E.decide_bound(10, 0)[0] and not E.decide_bound(10, 1)[0] and not E.decide_bound(0, 0)[0]


def test_build_claims_kinds_and_evidence_rule():
    per_seed = {a: {s: {"test_loss": v + 0.01 * s, "token_acc": 0.5, "rougeL": 0.5} for s in range(3)}
                for a, v in {"fp_sft": 1.0, "rtn": 2.0, "roste": 1.2, "ste": 1.3}.items()}
    claims = build_claims(per_seed, [{"max_abs_diff": 1e-6}], [], {"rows": 5, "violations": 0}, {30.0: 5.0},
                          paper_data=False)
    by = {c.id: c for c in claims}
    assert list(by) == list(CLAIM_IDS)
    assert by["c1_roste_beats_ste"].verdict == REPRODUCED and by["c2_qasft_beats_ptq"].verdict == REPRODUCED
    assert by["c3a_rotation_invariance"].kind == "check" and by["c3a_rotation_invariance"].holds
    assert by["c3b_search_optimal"].holds is False  # no search records: the check cannot pass
    assert by["c4_control_and_reported"].verdict == INCONCLUSIVE  # control arms absent
    one = {a: {0: r[0]} for a, r in per_seed.items()}
    c1 = build_claims(one, [], [], {}, {}, paper_data=False)[0]
    assert c1.verdict == INCONCLUSIVE and "evidence rule" in c1.note  # one seed: never a claim verdict


def _losses(**arms):
    """per_seed of arm -> per-seed test losses (seeds 0, 1, 2)."""
    return {a: {s: {"test_loss": v, "token_acc": 0.5, "rougeL": 0.5} for s, v in enumerate(vals)}
            for a, vals in arms.items()}


def test_build_claims_verdicts_under_the_headroom_gates():
    """Every verdict of c1, c2 and c4 with the gates passing, and a failed headroom gate (the default-scale
    testbed: RTN costs 0.018 nats against the 0.5 margin) turning each into inconclusive, naming the gate."""
    def by(per_seed, paper_data=False):
        return {c.id: c for c in build_claims(per_seed, [{"max_abs_diff": 0.0}], [], {}, {}, paper_data=paper_data)}

    ok = by(_losses(fp_sft=[1.0, 1.0, 1.0], rtn=[2.0, 2.1, 2.0], ste=[1.4, 1.5, 1.4], roste=[1.2, 1.25, 1.3],
                    ste_a1=[1.1, 1.1, 1.1], roste_a1=[1.1, 1.09, 1.11]), paper_data=True)
    assert [ok[c].verdict for c in ("c1_roste_beats_ste", "c2_qasft_beats_ptq", "c4_control_and_reported")] == [
        REPRODUCED] * 3
    assert all(g.passed for c in ok.values() for g in c.gates)
    assert ok["c2_qasft_beats_ptq"].key_numbers["rtn_headroom"] == pytest.approx(1.0333333333)
    ev = ok["c1_roste_beats_ste"].evidence
    d = np.array([0.2, 0.25, 0.1])
    assert (ev.n, ev.unit, ev.paper_data, ev.ci_method) == (3, "seeds", True, "t 95%, n=3 seeds")
    assert ev.mde == pytest.approx((4.302652729911275 + 1.0606601717798212) * d.std(ddof=1) / np.sqrt(3))
    lo = ok["c1_roste_beats_ste"].statistic["t_interval"]["ci_low"]
    assert lo == pytest.approx(d.mean() - 4.302652729911275 * d.std(ddof=1) / np.sqrt(3))
    # the effect-size floor is config eval.c1_margin: a floor above mean d = 0.183 leaves claim 1 inconclusive
    strict = {c.id: c for c in build_claims(
        _losses(fp_sft=[1.0] * 3, rtn=[2.0, 2.1, 2.0], ste=[1.4, 1.5, 1.4], roste=[1.2, 1.25, 1.3]),
        [{"max_abs_diff": 0.0}], [], {}, {}, paper_data=False, c1_margin=0.3)}["c1_roste_beats_ste"]
    assert strict.verdict == INCONCLUSIVE and "mean d > 0.3" in strict.threshold
    assert strict.gates[0].threshold == ">= 0.3" and strict.gates[0].passed  # headroom 0.433
    raw = yaml.safe_load((ROOT / "config/studies/roste.yaml").read_text())
    raw.pop("scales")
    assert build(Config, raw, "roste").eval.c1_margin == 0.02
    bad = by(_losses(fp_sft=[1.0, 1.0, 1.0], rtn=[2.0, 2.1, 2.0], ste=[1.3, 1.3, 1.3], roste=[1.35, 1.8, 1.3],
                     ste_a1=[1.1, 1.1, 1.1], roste_a1=[1.0, 1.0, 1.0]))
    assert [bad[c].verdict for c in ("c1_roste_beats_ste", "c2_qasft_beats_ptq", "c4_control_and_reported")] == [
        NOT_REPRODUCED] * 3
    assert bad["c1_roste_beats_ste"].evidence.paper_data is False
    # quantization barely hurts: RTN costs 0.018, STE QAT 0.01 -> every claim inconclusive, whatever the test says
    flat = by(_losses(fp_sft=[1.0, 1.0, 1.0], rtn=[1.018] * 3, ste=[1.01] * 3, roste=[0.5, 0.5, 0.5],
                      ste_a1=[1.1] * 3, roste_a1=[1.1] * 3))
    for cid, name in (("c1_roste_beats_ste", "qat_headroom"), ("c2_qasft_beats_ptq", "rtn_headroom"),
                      ("c4_control_and_reported", "qat_headroom")):
        c = flat[cid]
        assert c.verdict == INCONCLUSIVE and f"adequacy gate {name}" in c.note, cid
        assert "the test alone gives" in c.note and [g.passed for g in c.gates] == [False]
    assert flat["c2_qasft_beats_ptq"].gates[0].value == pytest.approx(0.018)


def test_build_claims_pairs_common_seeds_and_names_a_missing_arm():
    """Claims pair arms on the seeds they share (core.claims.common_seeds); an arm that did not run gives no
    seeds, zero evidence, an inconclusive verdict and a note naming it."""
    rec = {"token_acc": 0.5, "rougeL": 0.5}
    per_seed = {"ste": {s: {**rec, "test_loss": 1.5} for s in (0, 1, 2, 3)},
                "roste": {s: {**rec, "test_loss": 1.5 - 0.1 * s} for s in (1, 2, 3)},
                "fp_sft": {s: {**rec, "test_loss": 1.0} for s in (0, 1, 2)}}
    by = {c.id: c for c in build_claims(per_seed, [{"max_abs_diff": 0.0}], [], {}, {}, paper_data=False)}
    c1 = by["c1_roste_beats_ste"]
    assert c1.statistic["seeds"] == [1, 2, 3] and c1.evidence.n == 3
    assert np.allclose(c1.statistic["d"], [0.1, 0.2, 0.3]) and c1.verdict == REPRODUCED  # seed 0 unpaired: unused
    c2 = by["c2_qasft_beats_ptq"]  # rtn absent
    assert c2.statistic["seeds"] == [] and c2.evidence.n == 0 and c2.verdict == INCONCLUSIVE
    assert "['rtn']" in c2.note and "not run" in c2.note
    c4 = by["c4_control_and_reported"]
    assert c4.statistic["seeds"] == [] and "'ste_a1', 'roste_a1'" in c4.note
    assert c4.statistic["reported"]["ste_rot_all_minus_roste"] is None


# -------------------------------------------------------------------------------------------- smoke


def test_smoke_pipeline_through_snakemake(smoke_run):
    work = smoke_run  # the session's smoke run of every study (tests/conftest.py)
    r = work / "results/smoke/roste"
    doc = load_claims(r / "claims.json")
    by = {c["id"]: c for c in doc["claims"]}
    assert list(by) == list(CLAIM_IDS) and doc["seeds"] == [0]
    assert {c["kind"] for c in doc["claims"]} == {"claim", "check"}
    for cid in ("c3a_rotation_invariance", "c3b_search_optimal", "c3c_prop44_bound"):
        assert by[cid]["holds"] is True and by[cid]["verdict"] == REPRODUCED
    assert by["c3a_rotation_invariance"]["statistic"]["max_abs_diff"] <= 1e-4
    assert by["c1_roste_beats_ste"]["verdict"] == INCONCLUSIVE and by["c1_roste_beats_ste"]["evidence"]["n"] == 1
    for cid in ("c1_roste_beats_ste", "c2_qasft_beats_ptq"):
        ev = by[cid]["evidence"]
        assert ev["unit"] == "seeds" and ev["paper_data"] is False and ev["ci_method"], cid
    assert by["c1_roste_beats_ste"]["evidence"]["ci_method"] == "none (n=1 seeds)"
    assert [g["name"] for g in by["c2_qasft_beats_ptq"]["gates"]] == ["rtn_headroom"]
    assert by["c2_qasft_beats_ptq"]["gates"][0]["passed"] is False  # rtn not run at smoke: no headroom measured
    metrics = json.loads((r / "metrics/eval.json").read_text())
    assert set(metrics["per_seed"]) == {"fp_sft", "ste", "roste"}
    for arm, runs in metrics["per_seed"].items():
        assert 0 < runs["0"]["test_loss"] < math.log(64) and 0 <= runs["0"]["rougeL"] <= 1
    curve = metrics["curves"]["roste"]["0"]
    assert len(curve["loss"]) == 40 and curve["loss"][-1] < curve["loss"][0]
    assert [s for s, _ in curve["e_w"]] == [0, 20, 40]
    rot = json.loads((work / "results/smoke/roste/processed/rotcfg_a30_seed0.json").read_text())
    assert set(rot["choices"]) == {"r2.0", "r3.0", "r4.0", "r2.1", "r3.1", "r4.1"}
    assert (r / "figures/e_w.png").stat().st_size > 1000 and "c1_roste_beats_ste" in (r / "report.md").read_text()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work}/results/mlflow.db")
    exp = client.get_experiment_by_name("icml25/roste")
    runs = client.search_runs([exp.experiment_id], max_results=500)
    train = [x for x in runs if x.data.tags.get("stage") == "train" and x.data.tags.get("arm") == "roste"]
    seed_runs = [x for x in train if x.data.tags.get("seed") == "0"]  # a one-seed job is its seed's run
    assert len(seed_runs) == 1
    hist = client.get_metric_history(seed_runs[0].info.run_id, "train/loss")
    assert [m.value for m in sorted(hist, key=lambda m: m.step)] == pytest.approx(curve["loss"], rel=1e-6)
    ev = next(x for x in runs if x.data.tags.get("stage") == "evaluate" and x.data.tags["run_level"] == "job")
    assert ev.data.metrics["verdicts/checks_hold"] == 3.0


def test_paper_prepare_names_the_outputs_it_expects(tmp_path):
    """The paper path is wired (tests/studies/test_roste_paper.py runs it); a wrong --out list fails naming the
    dataset's files, before anything is fetched."""
    from icml25.studies.roste.__main__ import main

    with pytest.raises(SystemExit, match=r"roste prepare: expected --out raw/paper/<name>.parquet for "
                                         r"\['tldr_train', 'tldr_test'\]"):
        main(["prepare", "--scale", "paper", "--no-track", "--config", str(ROOT / "config/studies/roste.yaml"),
              "--out", str(tmp_path / "x.parquet")])
    assert not list(tmp_path.iterdir())


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 8), st.booleans(), st.floats(0.5, 1.0))
def test_quantize_output_levels_bounded(bits, symmetric, clip):
    x = torch.randn(4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(bits))
    q = quantize(x, bits, symmetric, clip=clip, ste=False)
    assert all(len(torch.unique(row)) <= 2 ** bits for row in q)


# ------------------------------------------------------------------------------ paper path (transformers)


@pytest.fixture(scope="module")
def tiny_llama():
    """A tiny random Llama (GQA, q/k/v biases, tied embeddings, non-unit norm gains) in float64, built locally."""
    tf = pytest.importorskip("transformers")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only contend
    cfg = tf.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=True, attention_bias=True)
    torch.manual_seed(0)
    m = tf.LlamaForCausalLM(cfg).double().eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n:
                p.uniform_(0.5, 1.5)
            elif "bias" in n:
                p.normal_(0, 0.1)
    yield m
    torch.set_num_threads(threads)


def _prepared(m, rotations, qcfg, seed=3):
    import copy

    from icml25.studies.roste import hf

    return hf.prepare_for_roste(copy.deepcopy(m), rotations, qcfg, seed=seed)


def test_hf_llama_rotations_exact_with_quantizers_off(tiny_llama):
    """Folding + R1..R4 on a Hugging Face Llama reproduce its logits with every quantizer off (float64; HF's
    RMSNorm computes its variance in float32, so R1 is exact to ~1e-7, the other slots to 1e-12)."""
    x = torch.randint(0, 64, (3, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = tiny_llama(x).logits
        slots = [f"r{k}.{l}" for l in range(2) for k in (2, 3, 4)]
        for s in slots:
            got = _prepared(tiny_llama, {"r1": False, **{t: t == s for t in slots}}, OFF)(x).logits
            assert float((got - ref).abs().max()) < 1e-12, s
        for rot in ("none", "all", {"r1": True, **{s: i % 2 == 0 for i, s in enumerate(slots)}}):
            m = _prepared(tiny_llama, rot, OFF)
            assert float((m(x).logits - ref).abs().max()) < 1e-6
        assert m.lm_head.weight is not m.model.embed_tokens.weight  # untied before R1
        assert all(float(n.weight.sub(1).abs().max()) == 0 for n in m.modules() if type(n).__name__ == "LlamaRMSNorm")


def test_hf_llama_fake_quant_and_kv(tiny_llama):
    """W4A4KV4 changes the logits; kv_bits=2 changes them further; KV off equals no KV quantizer at all."""
    x = torch.randint(0, 64, (3, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = tiny_llama(x).logits
        q4 = _prepared(tiny_llama, "all", QuantConfig())(x).logits
        kv2 = _prepared(tiny_llama, "all", QuantConfig(kv_bits=2))(x).logits
        kv_off = _prepared(tiny_llama, "all", QuantConfig(None, None, None))(x).logits
        kv_only_off = _prepared(tiny_llama, "all", QuantConfig(None, None, 16))(x).logits
    assert float((q4 - ref).abs().max()) > 1e-3 and float((kv2 - q4).abs().max()) > 1e-3
    assert float((kv_only_off - kv_off).abs().max()) < 1e-3  # 16-bit KV: nearly lossless


def test_hf_quant_linear_is_ste():
    """QuantLinear's value is F.linear(Q(x), Q(W)) and its gradients pass straight through both quantizers."""
    from icml25.studies.roste import hf

    g = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(16, 8, dtype=torch.float64)
    ql = hf.QuantLinear(lin, QuantConfig())
    x = torch.randn(5, 16, dtype=torch.float64, generator=g, requires_grad=True)
    y = ql(x)
    qx, qw = quantize(x.detach(), ste=False), quantize(lin.weight.detach(), ste=False)
    assert torch.allclose(y, qx @ qw.T + lin.bias, atol=1e-12)
    gy = torch.randn(5, 8, dtype=torch.float64, generator=g)
    y.backward(gy)
    assert torch.allclose(lin.weight.grad, gy.T @ qx, atol=1e-12) and torch.allclose(x.grad, gy @ qw, atol=1e-12)


def test_hf_ste_fine_tuning_lowers_the_quantized_loss(tiny_llama):
    m = _prepared(tiny_llama, "all", QuantConfig())
    w0 = {n: p.detach().clone() for n, p in m.named_parameters()}
    x = torch.randint(0, 64, (8, 16), generator=torch.Generator().manual_seed(2))
    labels = x.clone()
    labels[:, :8] = -100  # prompt tokens
    from icml25.studies.roste import hf

    losses = hf.sft_steps(m, [{"input_ids": x, "labels": labels}], lr=3e-3, steps=25)
    assert len(losses) == 25 and losses[-1] < 0.6 * losses[0]
    moved = [n for n, p in m.named_parameters() if not torch.equal(p, w0[n])]
    assert any(n.endswith("down_proj.weight") for n in moved) and any(n.endswith("q_proj.weight") for n in moved)


C1 = "0123456789abcdef0123456789abcdef01234567"


class _Spy:
    """Stands in for a transformers Auto class: records ``from_pretrained``'s arguments."""

    def __init__(self, make=torch.nn.Identity):
        self.calls, self.make = [], make

    def from_pretrained(self, path, **kwargs):
        self.calls.append((path, kwargs))
        return self.make()


def test_hf_models_csv_lists_the_paper_models_unpinned():
    from icml25.core import hub
    from icml25.studies.roste import hf
    from icml25.studies.roste.paper import MODELS

    rows = hub.read_models(hf.MODELS_CSV)
    assert sorted(m.repo_id for m in rows.values()) == sorted(MODELS)
    assert {m.revision for m in rows.values()} == {hub.UNPINNED}  # the paper names none; none verifiable offline
    assert hf.hub_model("Qwen/Qwen2.5-0.5B") == rows["qwen2_5_0_5b"]
    assert hf.hub_model("Qwen/Qwen2.5-0.5B", C1).revision == C1  # paper.revision replaces the row's
    with pytest.raises(hub.HubError, match="not one of"):
        hf.hub_model("gpt2")
    with pytest.raises(hub.HubError, match="not a 40-hex commit"):
        hf.hub_model("Qwen/Qwen2.5-0.5B", "main")


def test_paper_config_validates_model_revision_and_local_dir():
    from icml25.studies.roste.config import PaperSection

    assert (PaperSection().model, PaperSection().revision, PaperSection().local_dir) == ("Qwen/Qwen2.5-0.5B", None,
                                                                                        None)
    assert PaperSection(revision=C1, local_dir="./w").revision == C1
    with pytest.raises(ValueError, match="revision"):
        PaperSection(revision="main")  # branch names move: a commit only
    with pytest.raises(ValueError, match="goes in paper.local_dir"):
        PaperSection(model="./results/tiny")


def test_hf_pinned_row_passes_its_commit_and_unpinned_needs_the_opt_in(monkeypatch):
    """A pinned revision reaches from_pretrained with trust_remote_code=False; an UNPINNED row is refused before any
    network call unless trust_unpinned, and then loads at the one commit it resolved."""
    import types

    from icml25.core import hub
    from icml25.studies.roste import hf

    spy_m, spy_t = _Spy(), _Spy(lambda: types.SimpleNamespace(pad_token_id=None, pad_token=None, eos_token="</s>"))
    monkeypatch.setattr(hf, "_transformers", lambda: types.SimpleNamespace(AutoModelForCausalLM=spy_m,
                                                                            AutoTokenizer=spy_t))
    no_net = lambda repo: pytest.fail(f"network call for {repo}")  # noqa: E731
    pinned = hf.resolve_model("Qwen/Qwen2.5-7B", C1, commit_of=no_net)
    assert (pinned.name, pinned.path, pinned.revision, pinned.source) == ("qwen2_5_7b", "Qwen/Qwen2.5-7B", C1, "pinned")
    hf.load_causal_lm(pinned, dtype=torch.float32)
    assert spy_m.calls == [("Qwen/Qwen2.5-7B", {"torch_dtype": torch.float32, "local_files_only": True,
                                                "revision": C1, "trust_remote_code": False})]
    with pytest.raises(hub.HubError, match="trust_unpinned=true"):
        hf.resolve_model("meta-llama/Llama-3.1-8B", commit_of=no_net)
    asked = []
    res = hf.resolve_model("meta-llama/Llama-3.1-8B", trust_unpinned=True, commit_of=lambda r: asked.append(r) or C1)
    assert asked == ["meta-llama/Llama-3.1-8B"] and (res.revision, res.source) == (C1, "resolved")
    assert hf.load_tokenizer(res).pad_token == "</s>"  # no pad token: it pads with EOS
    assert spy_t.calls == [("meta-llama/Llama-3.1-8B", {"local_files_only": True, "revision": C1,
                                                        "trust_remote_code": False})]


def test_hf_local_directory_loads_with_its_digest(tiny_llama, tmp_path, monkeypatch):
    import importlib
    import sys

    from icml25.core import hub
    from icml25.studies.roste import hf

    tiny_llama.save_pretrained(tmp_path / "tiny")
    res = hf.resolve_model("meta-llama/Llama-3.1-8B", local_dir=tmp_path / "tiny")
    assert (res.path, res.source) == (str(tmp_path / "tiny"), "local")
    assert res.revision == f"local:{hub.directory_digest(tmp_path / 'tiny')}" and "revision" not in res.kwargs()
    loaded = hf.load_causal_lm(res, dtype=torch.float64)
    x = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert torch.equal(loaded(x).logits, tiny_llama(x).logits)
    with pytest.raises(NotImplementedError, match="Llama layout"):
        hf.prepare_for_roste(torch.nn.Linear(2, 2), "none", OFF)
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if the extra were not installed
    reloaded = importlib.reload(hf)  # importable without transformers
    with pytest.raises(RuntimeError, match=r"roste-paper"):
        reloaded.load_causal_lm(res)


def test_hf_quantlinear_rotates_the_v_output_per_head_after_quantizing():
    """Issue 32 on the paper path (no transformers needed): hf.QuantLinear with ``out_rot`` (R2 on v_proj)
    quantizes the unrotated weight, adds the bias, then rotates each head's output by H / sqrt(hd)."""
    from icml25.studies.roste.hf import QuantLinear

    torch.manual_seed(0)
    hd, heads, d_in = 8, 3, 16
    lin = torch.nn.Linear(d_in, heads * hd, bias=True).double()
    x = torch.randn(2, 5, d_in, dtype=torch.float64)
    q = QuantConfig(4, None, None)
    ql = QuantLinear(lin, q, out_rot=torch.ones(hd, dtype=torch.float64))
    w = lin.weight.detach()
    mn, mx = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    st = (mx - mn) / 15
    z = torch.round(-mn / st)
    qw = (torch.clamp(torch.round(w / st) + z, 0, 15) - z) * st
    h = torch.from_numpy(np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]),
                                 np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]), np.array([[1.0, 1.0], [1.0, -1.0]]))))
    want = ((x @ qw.T + lin.bias.detach()).reshape(2, 5, heads, hd) @ (h / math.sqrt(hd))).reshape(2, 5, -1)
    with torch.no_grad():
        assert torch.allclose(ql(x), want, atol=1e-12)


# ------------------------------------------------------------------- speed-ups: the same numbers (issue 37)


@pytest.mark.parametrize("clip", [1.0, 0.95])
def test_quant_params_equal_the_aminmax_formulas_bit_for_bit(clip):
    x = torch.randn(7, 5, 4, 16, generator=torch.Generator().manual_seed(3)) * 3
    mn, mx = torch.aminmax(x, dim=-1, keepdim=True)
    s_ref = (clip * (mx - mn) / 15).clamp_min(1e-8)
    z_ref = torch.round(-clip * mn / s_ref)
    s, z, lo, hi = quant_params(x, 4, False, clip)
    assert torch.equal(s, s_ref) and torch.equal(z, z_ref) and (lo, hi) == (0, 15)
    xg, s4 = x.reshape(7, 5, 64), s_ref
    q_ref = ((torch.round(x / s4) + z_ref).clamp(0, 15) - z_ref) * s4
    assert torch.equal(quantize(xg, 4, False, 16, clip, ste=False), q_ref.reshape(7, 5, 64))


def test_rope_and_causal_bias_equal_the_textbook_forms_with_gradients():
    from icml25.studies.roste.model import _causal_bias, _rope_tables, rope

    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 9, 4, 16, generator=g, requires_grad=True)
    cos, sin = _rope_tables(9, 16, 10000.0, torch.float32)
    ref = x * cos + torch.cat([-x[..., 8:], x[..., :8]], -1) * sin
    got = rope(x, 10000.0)
    w = torch.randn(3, 9, 4, 16, generator=g)
    (gr,) = torch.autograd.grad((ref * w).sum(), x)
    (gg,) = torch.autograd.grad((got * w).sum(), x)
    assert torch.equal(got, ref) and torch.equal(gg, gr)
    s = torch.randn(3, 4, 9, 9, generator=g, requires_grad=True)
    mask = torch.ones(9, 9, dtype=torch.bool).triu(1)
    a_ref = torch.softmax(s.masked_fill(mask, float("-inf")), -1)
    a_got = torch.softmax(s + _causal_bias(9, torch.float32, s.device), -1)
    v = torch.randn(3, 4, 9, 9, generator=g)
    (sr,) = torch.autograd.grad((a_ref * v).sum(), s)
    (sg,) = torch.autograd.grad((a_got * v).sum(), s)
    assert torch.equal(a_got, a_ref) and torch.equal(sg, sr)


def test_greedy_answers_reading_teacher_logits_equal_the_recomputed_decode():
    cfg = ModelConfig(context=24)
    model = Model(cfg, seed=5)
    with torch.no_grad():  # a sharper model than the 0.02 init, so greedy rows follow and leave their teacher
        for v in model.p.values():
            v.mul_(20.0 if v.ndim == 2 else 1.0)
    p, online = deploy(model, "all", seed=1)
    q = QuantConfig()
    prompts = torch.randint(0, 60, (64, 10), generator=torch.Generator().manual_seed(6))
    plain = E.greedy_answers(p, online, cfg, prompts, 6, q)
    # teacher: half the rows continue with the model's own answer (followed to the end), half with random tokens
    tail = torch.randint(0, 60, (64, 6), generator=torch.Generator().manual_seed(7))
    tail[::2] = plain[::2]
    tail[1::4, :3], tail[1::4, 3:] = plain[1::4, :3], (plain[1::4, 3:] + 1) % 60  # these leave it midway
    teacher = torch.cat([prompts, tail], 1)
    with torch.no_grad():
        logits = decoder_forward(p, teacher, cfg, q, online)
    assert torch.equal(E.greedy_answers(p, online, cfg, prompts, 6, q, teacher=(teacher, logits)), plain)
