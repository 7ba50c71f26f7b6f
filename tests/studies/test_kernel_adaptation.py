"""Tests of the kernel_adaptation study (phase 1: predictors, sampler, generators, verdict functions, smoke grid)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml25.studies import kernel_adaptation as ka
from icml25.studies.kernel_adaptation import data as D
from icml25.studies.kernel_adaptation import evaluate as E
from icml25.studies.kernel_adaptation import experiment as X
from icml25.studies.kernel_adaptation import langevin as L
from icml25.studies.kernel_adaptation import method as M
from icml25.core.config import ConfigError, build, load_yaml, merge_scale, to_dict
from icml25.studies.kernel_adaptation.config import Config

ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "config" / "studies" / "kernel_adaptation.yaml"


def get(scale: str) -> dict:
    """The settings experiment.run reads, from the study yaml at one scale (validated by the Config model)."""
    return X.settings_from_config(to_dict(build(Config, merge_scale(load_yaml(YAML), scale), path="kernel_adaptation")))


SCALES = {scale: get(scale) for scale in ("smoke", "default", "paper")}


@pytest.fixture(scope="module")
def task():
    return D.make_task("ising", 11, 20, 200, seed=7)


# ------------------------------------------------------------------------------------------ public API


def test_public_api_names_and_defaults():
    import inspect

    sig = inspect.signature(ka.adaptive_predictor)
    assert list(sig.parameters)[:5] == ["X", "y", "X_test", "N", "chi"]
    assert {k: sig.parameters[k].default for k in ("g_v", "g_w", "kappa0", "n_anneal", "damping", "tol",
                                                      "max_iter")} == {
        "g_v": 1.0, "g_w": 1.0, "kappa0": 0.05, "n_anneal": 40, "damping": 0.02, "tol": 1e-10, "max_iter": 5000}
    sig = inspect.signature(ka.langevin_sample)
    assert {k: sig.parameters[k].default for k in ("lr", "n_steps", "n_chains", "burn_in", "thin", "seed",
                                                      "likelihood")} == {
        "lr": 2.5e-3, "n_steps": 10_000, "n_chains": 8, "burn_in": 1 / 3, "thin": 10, "seed": 0, "likelihood": True}
    sig = inspect.signature(ka.rescaling_predictor)
    assert sig.parameters["u"].default is None and sig.parameters["target_train"].default is None
    assert sorted(ka.__all__) == ["adaptive_predictor", "langevin_sample", "nngp_predictor",
                                  "rescaling_predictor", "spike_ratio"]


# ------------------------------------------------------------------------------------------------ NNGP


def test_nngp_is_ridge_with_lambda_kappa0_D_over_gvgw(task):
    Xtr, y, Xs = task["X"], task["y"], task["X_test"]
    g_v, g_w, kappa0 = 1.7, 0.6, 0.05
    lam = kappa0 * Xtr.shape[1] / (g_v * g_w)
    coef = np.linalg.solve(Xtr.T @ Xtr + lam * np.eye(Xtr.shape[1]), Xtr.T @ y)
    for chi in (1.0, 3.3, 50.0):
        f_tr, f_te = ka.nngp_predictor(Xtr, y, Xs, chi, g_v=g_v, g_w=g_w, kappa0=kappa0)
        np.testing.assert_allclose(f_tr, Xtr @ coef, atol=1e-10)
        np.testing.assert_allclose(f_te, Xs @ coef, atol=1e-10)


def test_nngp_chi_invariant_and_rescaling_u1_identical(task):
    Xtr, y, Xs = task["X"], task["y"], task["X_test"]
    ref = ka.nngp_predictor(Xtr, y, Xs, 1.0)
    for chi in np.geomspace(1, 50, 7):
        f = ka.nngp_predictor(Xtr, y, Xs, chi)
        assert np.max(np.abs(f[1] - ref[1])) < 1e-10
        g_tr, g_te, u = ka.rescaling_predictor(Xtr, y, Xs, chi, u=1.0)
        assert u == 1.0
        np.testing.assert_array_equal(g_tr, f[0])
        np.testing.assert_array_equal(g_te, f[1])


def test_rescaling_fit_recovers_known_u(task):
    Xtr, y, Xs = task["X"], task["y"], task["X_test"]
    target, target_test, _ = ka.rescaling_predictor(Xtr, y, Xs, 5.0, u=0.37)
    f_tr, f_te, u = ka.rescaling_predictor(Xtr, y, Xs, 5.0, target_train=target)
    assert u == pytest.approx(0.37, rel=1e-5)
    np.testing.assert_allclose(f_te, target_test, atol=1e-6)
    with pytest.raises(ValueError, match="exactly one"):
        ka.rescaling_predictor(Xtr, y, Xs, 5.0)
    with pytest.raises(ValueError, match="exactly one"):
        ka.rescaling_predictor(Xtr, y, Xs, 5.0, u=1.0, target_train=target)


# --------------------------------------------------------------------------------------------- adaptive


def test_adaptive_at_chi1_infinite_width_is_nngp(task):
    Xtr, y, Xs = task["X"], task["y"], task["X_test"]
    res = ka.adaptive_predictor(Xtr, y, Xs, N=10**9, chi=1.0, n_anneal=1)
    f_tr, f_te = ka.nngp_predictor(Xtr, y, Xs, 1.0)
    assert np.max(np.abs(res["f_train"] - f_tr)) < 1e-8
    assert np.max(np.abs(res["f_test"] - f_te)) < 1e-8
    np.testing.assert_allclose(res["A"], np.eye(11) / 11, atol=1e-8)


def test_adaptive_solution_spd_fixed_point_deterministic(task):
    Xtr, y, Xs = task["X"], task["y"], task["X_test"]
    N = 50
    res = ka.adaptive_predictor(Xtr, y, Xs, N=N, chi=N)
    A = res["A"]
    np.testing.assert_array_equal(A, A.T)
    assert np.linalg.eigvalsh(A)[0] > 0 and np.all(res["min_eig"] > 0)
    assert res["chi_path"].shape == (40,) and res["chi_path"][0] == 1.0 and res["chi_path"][-1] == pytest.approx(N)
    assert M.saddle_residual(A, Xtr, y, N, N) < 1e-8
    again = ka.adaptive_predictor(Xtr, y, Xs, N=N, chi=N)
    np.testing.assert_array_equal(again["f_test"], res["f_test"])
    # mean-field scaling stretches the kernel along the label direction; its mean output is a rescaled NNGP
    assert ka.spike_ratio(A, Xtr.T @ y) > 1.3
    err, u = M.best_rescaling_error(Xtr, y, Xs, res["f_test"], float(N))
    assert err < 1e-2 and u > 1.5


def test_adaptive_errors_name_chi(task):
    Xtr, y, Xs = task["X"], task["y"], task["X_test"]
    with pytest.raises(ValueError, match="chi=60.0 outside"):
        ka.adaptive_predictor(Xtr, y, Xs, N=50, chi=60.0)
    with pytest.raises(ValueError, match="chi=0.5 outside"):
        ka.adaptive_predictor(Xtr, y, Xs, N=50, chi=0.5)
    # labels 30x larger make the yy^T term dominate: A^-1 loses definiteness, the error names chi
    with pytest.raises(M.AnnealError, match=r"not positive definite at chi="):
        M.saddle_map(np.eye(11) / 11, Xtr, 30 * y, 50, 50.0)


# ------------------------------------------------------------------------------------------ spike ratio


def test_spike_ratio_identity_and_spike():
    u = np.array([1.0, 2.0, -2.0])
    assert ka.spike_ratio(np.eye(3), u) == pytest.approx(1.0, abs=1e-14)
    un = u / np.linalg.norm(u)
    assert ka.spike_ratio(np.eye(3) + 0.7 * np.outer(un, un), u) == pytest.approx(1.7, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.floats(0.0, 20.0), st.floats(0.1, 10.0), st.integers(0, 10**6))
def test_spike_ratio_property(dim, a, scale, seed):
    """r(s(I + a uuᵀ), u) = 1 + a for any unit u, scale s > 0 and dimension."""
    u = np.random.default_rng(seed).standard_normal(dim)
    un = u / np.linalg.norm(u)
    assert ka.spike_ratio(scale * (np.eye(dim) + a * np.outer(un, un)), u) == pytest.approx(1 + a, rel=1e-9)


# -------------------------------------------------------------------------------------------- Langevin


def test_potential_gradient_matches_finite_differences():
    g = torch.Generator().manual_seed(3)
    C, N, Dm, P = 2, 6, 4, 9
    Wt = torch.randn((C, N, Dm), generator=g, dtype=torch.float64)
    vt = torch.randn((C, N), generator=g, dtype=torch.float64)
    Xt = torch.randn((P, Dm), generator=g, dtype=torch.float64)
    yt = torch.sign(torch.randn(P, generator=g, dtype=torch.float64))
    c, kappa = 0.3, 0.05
    gW, gv = L.potential_grad(Wt, vt, Xt, yt, c, kappa)
    h = 1e-6
    for idx in [(0, 0, 0), (1, 3, 2), (0, 5, 3)]:
        Wp, Wm = Wt.clone(), Wt.clone()
        Wp[idx] += h
        Wm[idx] -= h
        fd = (L.potential(Wp, vt, Xt, yt, c, kappa) - L.potential(Wm, vt, Xt, yt, c, kappa))[idx[0]] / (2 * h)
        assert float(fd) == pytest.approx(float(gW[idx]), rel=1e-6, abs=1e-6)
    for idx in [(0, 1), (1, 4)]:
        vp, vm = vt.clone(), vt.clone()
        vp[idx] += h
        vm[idx] -= h
        fd = (L.potential(Wt, vp, Xt, yt, c, kappa) - L.potential(Wt, vm, Xt, yt, c, kappa))[idx[0]] / (2 * h)
        assert float(fd) == pytest.approx(float(gv[idx]), rel=1e-6, abs=1e-6)
    pW, pv = L.potential_grad(Wt, vt, Xt, yt, c, kappa, likelihood=False)
    torch.testing.assert_close(pW, Wt)
    torch.testing.assert_close(pv, vt)


def test_prior_only_moments():
    d = D.make_task("teacher", 5, 10, 50, seed=1)
    g_w = 2.0
    res = ka.langevin_sample(d["X"], d["y"], d["X_test"], N=40, chi=40.0, g_w=g_w, n_steps=6000, n_chains=32,
                             seed=5, likelihood=False)
    s = g_w / 5
    assert np.max(np.abs(np.diag(res["A"]) / s - 1)) < 0.05
    assert np.max(np.abs(res["A"] - np.diag(np.diag(res["A"])))) < 0.05 * s
    # prior mean of f is 0; its prior variance is (g_v g_w/(χD))·N·|x|²/N = g_w|x|²/(χD) per input (g_v = 1)
    var_pred = g_w * np.sum(d["X"] ** 2, axis=1) / (40.0 * 5)
    assert np.mean(res["var_train"]) == pytest.approx(np.mean(var_pred), rel=0.1)
    assert np.max(np.abs(res["f_train"])) < 0.2 * np.sqrt(np.mean(var_pred)) * 3


def test_langevin_fixed_seed_identical_and_seed_matters(task):
    kw = dict(N=20, chi=4.0, n_steps=1500, n_chains=3, y_test=task["y_test"])
    a = ka.langevin_sample(task["X"], task["y"], task["X_test"], seed=11, **kw)
    b = ka.langevin_sample(task["X"], task["y"], task["X_test"], seed=11, **kw)
    c = ka.langevin_sample(task["X"], task["y"], task["X_test"], seed=12, **kw)
    for key in ("f_train", "f_test", "A", "trace"):
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["f_test"], c["f_test"])
    assert a["trace"].shape == (1,) and a["n_samples"] == 3 * 100


def test_langevin_sample_many_is_each_chi_alone_bit_for_bit(task):
    """The batched χ groups (issue 37) neither mix chains nor change their arithmetic: entry k equals a lone run at
    chis[k] with seeds[k] exactly, also with a partial last noise block (1250 steps) and for the prior."""
    chis, seeds = [1.0, 4.0, 20.0], [5, 6, 7]
    for likelihood in (True, False):
        kw = dict(n_steps=1250, n_chains=3, thin=7, likelihood=likelihood, y_test=task["y_test"])
        many = L.langevin_sample_many(task["X"], task["y"], task["X_test"], 20, chis, seeds, **kw)
        for chi, seed, got in zip(chis, seeds, many):
            alone = ka.langevin_sample(task["X"], task["y"], task["X_test"], N=20, chi=chi, seed=seed, **kw)
            assert got["n_samples"] == alone["n_samples"]
            for key in ("f_train", "f_test", "A", "beta", "var_train", "var_test", "trace"):
                np.testing.assert_array_equal(got[key], alone[key], err_msg=f"{key} chi={chi} lik={likelihood}")
    with pytest.raises(ValueError, match="one seed per chi"):
        L.langevin_sample_many(task["X"], task["y"], task["X_test"], 20, chis, seeds[:2], n_steps=10)


def test_langevin_sample_follows_the_euler_maruyama_recursion(task):
    """Independent reference: θ ← θ − η ∇U(θ) + √(2η) ξ with ∇U from :func:`potential_grad` and the noise stream
    drawn as documented (W̃, ṽ ~ N(0, 1) float64, then float32 blocks of NOISE_BLOCK steps (C, N, D+1)); the mean
    read-out over the kept states matches the sampler's to rounding."""
    N, chi, C, T, lr, thin = 6, 3.0, 2, 450, 2.5e-3, 5
    X, y = task["X"], task["y"]
    D = X.shape[1]
    c, kappa = np.sqrt(1.0 / (chi * N * D)), 0.05 / chi
    gen = torch.Generator().manual_seed(3)
    dt = torch.float64
    Wt = torch.randn((C, N, D), generator=gen, dtype=dt)
    vt = torch.randn((C, N), generator=gen, dtype=dt)
    Xt, yt = torch.as_tensor(X, dtype=dt), torch.as_tensor(y, dtype=dt)
    start, betas, noise = int(np.ceil(T / 3)), [], None
    for t in range(T):
        if t % L.NOISE_BLOCK == 0:
            noise = torch.randn((min(L.NOISE_BLOCK, T - t), C, N, D + 1), generator=gen, dtype=torch.float32)
            noise = noise.to(dt) * np.sqrt(2 * lr)
        xi = noise[t % L.NOISE_BLOCK]
        gW, gv = L.potential_grad(Wt, vt, Xt, yt, c, kappa)
        Wt, vt = Wt - lr * gW + xi[..., :D], vt - lr * gv + xi[..., D]
        if (t + 1) % thin == 0 and t + 1 > start:
            betas.append(c * torch.einsum("cnd,cn->cd", Wt, vt))
    ref = torch.cat(betas).mean(0).numpy()
    res = ka.langevin_sample(X, y, task["X_test"], N=N, chi=chi, seed=3, lr=lr, n_steps=T, n_chains=C, thin=thin)
    np.testing.assert_allclose(res["beta"], ref, rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def ising9():
    """An ising pair (D = 11, P = 20) on which the old step 5e-3 visibly biases the ensemble at χ = N."""
    return D.make_task("ising", 11, 20, 200, seed=9)


_MF_CACHE: dict = {}


def _eps_at_mean_field(d, lr, N=30, seed=1):
    """ε_test of the Langevin posterior mean at χ = N with integrated time 25 (n_steps = 25/lr); guard off. Cached
    per (pair, lr) so the two tests below share their runs."""
    key = (d["X"].tobytes(), lr, N, seed)
    if key not in _MF_CACHE:
        _MF_CACHE[key] = _run_mean_field(d, lr, N, seed)
    return _MF_CACHE[key]


def _run_mean_field(d, lr, N, seed):
    res = ka.langevin_sample(d["X"], d["y"], d["X_test"], N=N, chi=N, lr=lr, n_steps=int(round(25 / lr)),
                             n_chains=8, seed=seed, max_step_curvature=None)
    return M.discrepancy(d["y_test"], res["f_test"]), res


def test_langevin_step_halving_bias_within_tolerance(ising9):
    """Issue 33: the sampler's bias measured by step halving (lr → lr/2, same integrated time, same noise seed) is
    within the gate's tolerance (adequacy.sampler_step_rel_tol = 1 %) at the default step, and the test sees the
    old step's bias (5e-3: 4.3 % measured on this pair; default 2.5e-3: 0.3 %)."""
    tol = Config.model_fields["adequacy"].default.sampler_step_rel_tol
    lr = SCALES["default"]["langevin"]["lr"]
    e1, _ = _eps_at_mean_field(ising9, lr)
    e2, _ = _eps_at_mean_field(ising9, lr / 2)
    assert abs(e1 - e2) / e2 <= tol
    e_old, _ = _eps_at_mean_field(ising9, 5e-3)
    assert abs(e_old - e1) / e1 > 2 * tol


def test_langevin_matches_theory_at_mean_field(ising9, task):
    """At χ = N the ensemble (default step) matches the tree-level theory within finite-N corrections: ε_test within
    2 % (measured 1.1 % and 0.5 % on these pairs; 5.4 % with the old step 5e-3), ε_train within 1 %, the label
    spike ratio within 8 % (was 25 %/20 %, too loose to see the step's bias)."""
    lr = SCALES["default"]["langevin"]["lr"]
    for d in (ising9, task):
        ad = ka.adaptive_predictor(d["X"], d["y"], d["X_test"], N=30, chi=30)
        e_L, res = _eps_at_mean_field(d, lr)
        e_AD = M.discrepancy(d["y_test"], ad["f_test"])
        assert e_L == pytest.approx(e_AD, rel=0.02)
        assert M.discrepancy(d["y"], res["f_train"]) == pytest.approx(M.discrepancy(d["y"], ad["f_train"]), rel=0.01)
        label = d["X"].T @ d["y"]
        assert ka.spike_ratio(res["A"], label) == pytest.approx(ka.spike_ratio(ad["A"], label), rel=0.08)
    e_old, _ = _eps_at_mean_field(ising9, 5e-3)
    e_AD = M.discrepancy(ising9["y_test"], ka.adaptive_predictor(ising9["X"], ising9["y"], ising9["X_test"], N=30,
                                                                 chi=30)["f_test"])
    assert abs(e_old - e_AD) / e_AD > 0.02  # the tightened tolerance sees the old step's bias


def test_curvature_estimate_matches_the_hessian_at_prior_states():
    """λ̂ = 1 + 2 g_v g_w λ_max(XᵀX)/(Dκ₀) against the top eigenvalue of the full autograd Hessian of U at prior draws
    (independent of χ: c²/κ is χ-free); the old estimate P/(Nκ₀) was off by more than 10x."""
    N, Dm, P, kappa0 = 12, 5, 15, 0.05
    d = D.make_task("ising", Dm, P, 10, seed=3)
    Xt, yt = torch.tensor(d["X"]), torch.tensor(d["y"])
    est = L.curvature_estimate(d["X"], kappa0=kappa0)
    assert est == pytest.approx(1 + 2 * np.linalg.eigvalsh(d["X"].T @ d["X"])[-1] / (Dm * kappa0))
    g = torch.Generator().manual_seed(0)
    for chi in (1.0, float(N)):
        c, kappa = np.sqrt(1 / (chi * N * Dm)), kappa0 / chi

        def U(theta):
            return L.potential(theta[:N * Dm].reshape(1, N, Dm), theta[N * Dm:].reshape(1, N), Xt, yt, c, kappa)[0]

        tops = [float(torch.linalg.eigvalsh(torch.autograd.functional.hessian(
            U, torch.randn(N * Dm + N, generator=g, dtype=torch.float64)))[-1]) for _ in range(6)]
        assert 0.6 <= est / np.mean(tops) <= 1.2
        assert P / (N * kappa0) < 0.1 * np.mean(tops)


def test_langevin_refuses_a_step_beyond_the_curvature_bound(task):
    lam = L.curvature_estimate(task["X"])
    with pytest.raises(L.LangevinStepError, match=r"langevin\.lr = 0\.005 is too large.*set langevin\.lr <= "):
        ka.langevin_sample(task["X"], task["y"], task["X_test"], N=50, chi=50.0, lr=5e-3, n_steps=10)
    ka.langevin_sample(task["X"], task["y"], task["X_test"], N=50, chi=50.0, lr=0.99 / lam, n_steps=10)
    # the prior-only run has curvature 1 and is not checked
    ka.langevin_sample(task["X"], task["y"], task["X_test"], N=50, chi=50.0, lr=5e-3, n_steps=10, likelihood=False)


def test_paper_config_shapes_run_finite_on_cpu():
    """Issue 39: the paper config fits its data (digits03: P + P_test ≤ 361) and its step is stable at N = 200, P = 100:
    500 steps at χ = 1 and χ = N on each offline paper task stay finite; lr 5e-3 (which diverged there by step 1000,
    issue 39) is refused before sampling, naming the key."""
    paper = SCALES["paper"]
    lg = {**paper["langevin"], "device": "cpu", "n_chains": 4, "n_steps": 500}
    N = paper["N"]
    for name in ("ising", "teacher", "digits03"):
        d = X.task_data(paper, name, 0)
        assert d["X"].shape == (paper["P"], {"digits03": 64}.get(name, paper["D"]))
        assert L.curvature_estimate(d["X"]) * lg["lr"] <= paper["langevin"]["max_step_curvature"]
        for chi in (1.0, float(N)):
            res = ka.langevin_sample(d["X"], d["y"], d["X_test"], N, chi, **lg)
            assert np.isfinite(res["f_test"]).all() and np.isfinite(res["A"]).all()
    d = X.task_data(paper, "digits03", 0)
    with pytest.raises(L.LangevinStepError, match="langevin.lr"):
        ka.langevin_sample(d["X"], d["y"], d["X_test"], N, 1.0, **{**lg, "lr": 5e-3})


def test_langevin_bad_input_errors(task):
    with pytest.raises(ValueError, match="chi=51.0 outside"):
        ka.langevin_sample(task["X"], task["y"], task["X_test"], N=50, chi=51.0, n_steps=10)
    with pytest.raises(L.LangevinDivergence, match=r"diverged .* chi=50.*reduce langevin\.lr"):
        ka.langevin_sample(task["X"], task["y"], task["X_test"], N=50, chi=50.0, lr=5.0, n_steps=1000,
                           n_chains=2, max_step_curvature=None)


# ------------------------------------------------------------------------------------------------- data


def test_ising_correlation_and_labels():
    J = 0.5
    Xi, y = D.ising_chain(100_000, 11, J=J, seed=0)
    assert set(np.unique(Xi)) == {-1.0, 1.0} and set(np.unique(y)) == {-1.0, 1.0}
    corr = np.mean(Xi[:, :-1] * Xi[:, 1:])
    assert abs(corr - np.tanh(J)) < 0.02
    assert abs(np.mean(Xi[:, 0])) < 0.02  # x1 uniform on ±1
    np.testing.assert_array_equal(y, np.sign(Xi.sum(axis=1)))
    with pytest.raises(ValueError, match="odd"):
        D.ising_chain(10, 10)


def test_teacher_task_and_split():
    d = D.make_task("teacher", 7, 15, 40, seed=4)
    assert d["X"].shape == (15, 7) and d["X_test"].shape == (40, 7)
    np.testing.assert_array_equal(d["y"], np.sign(d["X"] @ d["teacher"]))
    np.testing.assert_array_equal(d["y_test"], np.sign(d["X_test"] @ d["teacher"]))
    again = D.make_task("teacher", 7, 15, 40, seed=4)
    np.testing.assert_array_equal(again["X_test"], d["X_test"])
    with pytest.raises(ValueError, match="unknown task 'mnist'"):
        D.make_task("mnist", 7, 15, 40, seed=4)


def test_digits03_verified_and_standardised(tmp_path):
    d = D.digits03(100, 200, seed=0)
    assert d["X"].shape == (100, 64) and set(np.unique(d["y"])) == {-1.0, 1.0}
    assert np.mean(np.sum(d["X"] ** 2, axis=1)) == pytest.approx(64.0)
    bad = tmp_path / "digits.csv.gz"
    bad.write_bytes(b"not the file")
    with pytest.raises(ValueError, match="sha256"):
        D.verify_digits_file(bad)
    with pytest.raises(ValueError, match="exceeds the 361 images"):
        D.digits03(300, 100, seed=0)


# -------------------------------------------------------------------------------------- verdict functions


def test_claim1_verdicts_and_boundaries():
    rep, notrep, st_ = E.claim1_adaptive_beats_nngp([0.02, 0.03, 0.01, 0.04, 0.02, 0.05])
    assert rep and not notrep and st_["n_positive"] == 6 and st_["ci_low"] > 0
    # exactly 5 of 6 positive with a positive CI: reproduced; 4 of 6: inconclusive
    rep, notrep, st_ = E.claim1_adaptive_beats_nngp([0.05, 0.04, 0.06, 0.05, 0.04, -0.001])
    assert rep and not notrep and st_["n_positive"] == 5
    rep, notrep, st_ = E.claim1_adaptive_beats_nngp([0.05, 0.04, 0.06, 0.05, -0.001, -0.001])
    assert not rep and not notrep and st_["n_positive"] == 4
    # mean exactly 0: not reproduced; mean slightly positive but CI straddles 0: inconclusive
    rep, notrep, _ = E.claim1_adaptive_beats_nngp([0.1, -0.1, 0.2, -0.2, 0.05, -0.05])
    assert not rep and notrep
    rep, notrep, st_ = E.claim1_adaptive_beats_nngp([0.1, -0.09, 0.2, -0.2, 0.05, -0.05])
    assert not rep and not notrep and st_["ci_low"] < 0 < st_["mean_d"]
    with pytest.raises(ValueError):
        E.claim1_adaptive_beats_nngp([0.1, np.nan])


def test_claim2_verdicts_and_boundaries():
    ok = dict(rho_L=[0.8] * 6, r_L_N=[1.3] * 6, rho_AD=[1.0] * 6, r_AD_N=[2.0] * 6)  # thresholds are inclusive
    rep, notrep, st_ = E.claim2_directional(**ok)
    assert rep and not notrep and st_["n_pass"] == 6
    five = dict(ok, r_L_N=[1.3] * 5 + [1.29])
    assert E.claim2_directional(**five)[:2] == (True, False)
    four = dict(ok, rho_AD=[1.0] * 4 + [0.79, float("nan")])
    assert E.claim2_directional(**four)[:2] == (False, False)
    three = dict(ok, r_AD_N=[2.0] * 3 + [1.0] * 3)
    assert E.claim2_directional(**three)[:2] == (False, False)
    two = dict(ok, rho_L=[0.9] * 2 + [0.5] * 4)
    rep, notrep, st_ = E.claim2_directional(**two)
    assert not rep and notrep and st_["n_pass"] == 2
    # one pair (smoke): passes -> reproduced, fails -> not reproduced
    assert E.claim2_directional([1.0], [1.5], [1.0], [1.5])[:2] == (True, False)
    assert E.claim2_directional([1.0], [1.2], [1.0], [1.5])[:2] == (False, True)


def test_claim1_uses_a_student_t_interval_over_pairs():
    d = [0.1, 0.2, 0.3]
    _, _, st_ = E.claim1_adaptive_beats_nngp(d)
    assert st_["ci_low"] == pytest.approx(0.2 - 4.302653 * 0.1 / np.sqrt(3), abs=1e-6)  # t_{0.975, 2}
    assert st_["ci_high"] == pytest.approx(0.2 + 4.302653 * 0.1 / np.sqrt(3), abs=1e-6)
    assert st_["sign_flip_p"] == pytest.approx(1 / 8) and "t 95%, n=3 task-seed pairs" == st_["ci_method"]
    # the old percentile bootstrap of six values called this reproduced ([0.019, 0.140]); the t interval does not
    rep, notrep, st_ = E.claim1_adaptive_beats_nngp([0.114, 0.029, 0.004, 0.027, 0.226, 0.025])
    assert not rep and not notrep and st_["ci_low"] < 0 < st_["mean_d"]


def test_claim3a_verdicts_and_boundaries():
    rep, notrep, st_ = E.claim3a_rescaling_theory([1e-4, 1.5e-4, 1.2e-4])
    assert (rep, notrep) == (True, False) and st_["ci_high"] < 1e-2
    rep, notrep, st_ = E.claim3a_rescaling_theory([1e-2, 1e-2])  # constant at the tolerance: within
    assert (rep, notrep) == (True, False)
    rep, notrep, st_ = E.claim3a_rescaling_theory([1e-4, 1.01e-2])  # one pair above: not reproduced is not shown
    assert (rep, notrep) == (False, False)
    rep, notrep, st_ = E.claim3a_rescaling_theory([0.05, 0.06, 0.055])
    assert (rep, notrep) == (False, True) and st_["ci_low"] > 1e-2
    assert E.claim3a_rescaling_theory([np.nan, 1e-4])[:2] == (False, True)


def test_claim3b_and_check4_boundaries():
    rep, notrep, st_ = E.claim3b_rescaling_langevin([[0.103, 0.5]] * 3, [[0.1, 0.5]] * 3)
    assert (rep, notrep) == (True, False) and st_["n_pass"] == 3  # 3 % exactly is within
    rep, notrep, st_ = E.claim3b_rescaling_langevin([[0.103, 0.5], [0.1031, 0.5], [0.1, 0.5]], [[0.1, 0.5]] * 3)
    assert (rep, notrep) == (False, True) and st_["n_pass"] == 2 and st_["per_pair_max_rel"][1] > 0.03
    with pytest.raises(ValueError, match="claim 3b"):
        E.claim3b_rescaling_langevin([[0.1, 0.2]], [[0.1]])
    good = dict(nngp_max_diff=[1e-10, 0.0], min_eig=[0.1, 1e-6], prior_diag_rel_dev=[0.05, 0.01],
                prior_offdiag_rel=[0.05, 0.0])
    holds, st_ = E.check4_exact(**good)
    assert holds and st_["positive_definite"]
    assert not E.check4_exact(**dict(good, nngp_max_diff=[2e-10]))[0]
    assert not E.check4_exact(**dict(good, min_eig=[0.1, 0.0]))[0]
    assert not E.check4_exact(**dict(good, prior_diag_rel_dev=[0.051]))[0]
    holds, st_ = E.check4_exact(**dict(good, prior_offdiag_rel=[0.06]))
    assert not holds and not st_["prior_offdiag"] and st_["prior_diag"]
    dev = E.prior_deviation(np.array([[0.52, 0.02], [0.02, 0.5]]), g_w=1.0)
    assert dev["prior_diag_rel_dev"] == pytest.approx(0.04) and dev["prior_offdiag_rel"] == pytest.approx(0.04)


# ------------------------------------------------------------------------------------------- smoke grid


def test_chi_grid_snaps_to_annealing_path():
    path, idx, chis = X.chi_grid(SCALES["default"])
    assert len(path) == 40 and chis[0] == 1.0 and chis[-1] == pytest.approx(50.0)
    np.testing.assert_allclose(np.log(chis) / np.log(50), [0, 0.25, 0.5, 0.75, 1], atol=0.5 / 39 + 1e-12)
    np.testing.assert_array_equal(idx, [0, 10, 19, 29, 39])  # N^½ lies midway: the lower index wins


def test_smoke_grid_runs_every_arm_and_verdict_within_20s():
    s = get("smoke")
    cpu0 = time.process_time()
    res: dict = {}
    for arm in ("adaptive_tree", "langevin", "nngp", "rescaling", "rescaling_langevin"):
        res[arm] = X.run(s, arm, "ising", 0, upstream=res)
    summary = E.pair_summary(res, s["chi_exponents"], s["g_w"])
    ev = E.evaluate_pairs([summary])
    assert time.process_time() - cpu0 < 20  # spec: smoke <= 20 s (CPU time: robust to a loaded machine)
    assert set(ev) == {"claim1", "claim2", "claim3a", "claim3b", "check4", "diagnostics"}
    # the step-halving ensemble at chi = N ran and its relative change is a small finite number
    assert 0 <= summary["step_check_rel"] < 0.2 and summary["nngp_gap_N"] >= 0
    assert summary["nngp_max_diff"] < 1e-10 and summary["min_eig_min"] > 0
    # the rescaling arm reproduces the adaptive mean output it was fitted to (linear network)
    np.testing.assert_allclose(res["rescaling"]["f_test"], res["adaptive_tree"]["f_test"], rtol=0, atol=1e-2)
    assert res["langevin"]["trace"].shape == (2, 2)
    assert summary["r_AD_N"] > 1.3 and summary["rho_AD"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------- config, pipeline
SPEC_ENTRIES = {"c1_adaptive_beats_nngp": "claim", "c2_directional": "claim", "c3a_rescaling_theory": "claim",
                "c3b_rescaling_langevin": "claim", "c4_exact": "check", "c5_width_trend": "claim"}


def test_config_scales_and_cross_key_rules():
    raw = merge_scale(load_yaml(YAML), "smoke")
    assert SCALES["smoke"]["prior_check"] == {"n_chains": 64, "n_steps": 4000}
    assert SCALES["default"]["langevin"]["n_steps"] == 10_000 and SCALES["paper"]["langevin"]["device"] == "cuda"
    assert X.settings_from_config({**to_dict(build(Config, raw)), "prior_check": {"enabled": False, "n_chains": 1,
                                                                                  "n_steps": 10}})["prior_check"] is None
    for bad, match in (({"chi_exponents": [0.0, 0.5]}, "must hold 1.0"), ({"D": 6}, "odd"),
                       ({"arms": ["nngp", "adaptive_tree", "langevin", "rescaling_langevin"]}, None),
                       ({"arms": ["nngp", "rescaling"]}, "add"), ({"tasks": ["cifar"]}, "tasks"),
                       ({"tasks": ["digits03"], "P": 100, "P_test": 500}, r"P_test: digits03 has 361 images")):
        if match is None:
            build(Config, {**raw, **bad})  # valid: rescaling_langevin with its langevin source
            continue
        with pytest.raises(ConfigError, match=match):
            build(Config, {**raw, **bad}, path="kernel_adaptation")


def _fake_summaries(rels=(0.001, 0.002, 0.257), step_rel=0.001, r_ad=2.0):
    summaries = []
    for k, rel in enumerate(rels):
        eps_l = [0.5, 0.6]
        summaries.append({"task": "ising", "seed": k, "d_N": 0.05 + 0.01 * k, "rho_L": 1.0, "r_L_N": 2.0,
                          "rho_AD": 1.0, "r_AD_N": r_ad, "nngp_gap_N": 0.05, "step_check_rel": step_rel,
                          "rescale_err_max": 1e-4 * (1 + k), "nngp_max_diff": 0.0, "min_eig_min": 0.1,
                          "prior_diag_rel_dev": 0.01, "prior_offdiag_rel": 0.01, "d_N34": 0.04,
                          "rescale_langevin_rel_max": rel,
                          "eps_test": {"langevin": eps_l, "rescaling_langevin": [0.5, 0.6 * (1 + rel)],
                                       "adaptive_tree": [0.5, 0.6], "nngp": [0.5, 0.55]},
                          "r_label": {}})
    return summaries


def test_claim3b_is_a_claim_with_the_worst_pair_named():
    entries, ev = E.evaluate_claims(_fake_summaries())
    assert {e.id: e.kind for e in entries} == SPEC_ENTRIES
    by = {e.id: e for e in entries}
    assert by["c3b_rescaling_langevin"].verdict == "not reproduced"
    assert by["c3b_rescaling_langevin"].key_numbers == {"max_rel": pytest.approx(0.257), "n_pass": 2}
    assert "ising/s2: 0.257" in by["c3b_rescaling_langevin"].note
    assert by["c3a_rescaling_theory"].verdict == "reproduced" and by["c4_exact"].holds is True
    assert by["c1_adaptive_beats_nngp"].verdict == "reproduced" and by["c2_directional"].verdict == "reproduced"
    assert by["c1_adaptive_beats_nngp"].evidence.n == 3 and by["c1_adaptive_beats_nngp"].evidence.unit == "task-seed pairs"
    for c in entries:  # generated tasks: every claim is on stand-in data, with its interval's method
        if c.kind == "claim" and c.status != "untested":  # c5 (width sweep): untested without the sweep
            assert c.evidence.paper_data is False and c.evidence.ci_method and c.source == "paper"


def test_claim3a_is_a_claim_reclassified_with_its_mechanism_gate():
    """Issue 31: c3a (the paper's statement inside the theory) is a claim; an isotropic adaptive kernel (the
    rescaling then holds trivially) fails its gate."""
    by = {e.id: e for e in E.evaluate_claims(_fake_summaries())[0]}
    assert by["c3a_rescaling_theory"].kind == "claim" and by["c3a_rescaling_theory"].holds is None
    assert [g.name for g in by["c3a_rescaling_theory"].gates] == ["adaptive_kernel_anisotropic"]
    by = {e.id: e for e in E.evaluate_claims(_fake_summaries(r_ad=1.1))[0]}
    c = by["c3a_rescaling_theory"]
    assert c.verdict == "inconclusive" and "adaptive_kernel_anisotropic" in c.note and "1.1" in c.note


def test_sampler_gate_makes_the_langevin_claims_inconclusive():
    """A step-halving change of eps_L above adequacy.sampler_step_rel_tol (or no step check at all) fails the gate
    of every claim that reads the Langevin ensembles; claim 3a (theory only) is untouched."""
    for step_rel in (0.02, None):
        entries, ev = E.evaluate_claims(_fake_summaries(step_rel=step_rel), adequacy={"sampler_step_rel_tol": 0.01})
        by = {e.id: e for e in entries}
        for cid in ("c1_adaptive_beats_nngp", "c2_directional", "c3b_rescaling_langevin"):
            assert by[cid].verdict == "inconclusive" and "sampler_step_bias" in by[cid].note
        assert by["c3a_rescaling_theory"].verdict == "reproduced"
    by = {e.id: e for e in E.evaluate_claims(_fake_summaries(), adequacy={"min_nngp_gap": 0.1})[0]}
    assert by["c1_adaptive_beats_nngp"].verdict == "inconclusive" and "nngp_gap" in by["c1_adaptive_beats_nngp"].note


def test_mnist_arff_reader(tmp_path):
    rng = np.random.default_rng(0)
    header = "@relation mnist_784\n" + "".join(f"@attribute pixel{i} numeric\n" for i in range(1, 785))
    header += "@attribute class {0,1,2,3,4,5,6,7,8,9}\n\n@data\n"
    labels = [0, 3, 5, 0, 3, 0, 3, 1, 0, 3]
    rows = [",".join(str(v) for v in rng.integers(0, 256, 784)) + f",'{c}'" for c in labels]
    path = tmp_path / "mnist_784.arff"
    path.write_text(header + "\n".join(rows) + "\n")
    pix, lab = D.read_mnist_arff(path)
    assert pix.shape == (10, 784) and lab.tolist() == labels
    d = D.mnist03(path, 4, 4, seed=1)
    assert d["X"].shape == (4, 784) and d["X_test"].shape == (4, 784) and set(np.unique(d["y"])) <= {-1.0, 1.0}
    assert np.mean(np.sum(d["X"] ** 2, axis=1)) == pytest.approx(784.0)
    with pytest.raises(ValueError, match="exceeds"):
        D.mnist03(path, 5, 4, seed=1)
    path.write_text(header + "1,2,3\n")
    with pytest.raises(ValueError, match=r"mnist_784.arff:\d+: 3 values"):
        D.read_mnist_arff(path)


def test_pipeline_smoke_through_snakemake(smoke_run):
    """The smoke pipeline of this study through Snakemake (the session's shared smoke run of every study,
    tests/conftest.py): every claim and check with its kind and evidence, the checks hold, the figures, the
    per-seed train curves and the Langevin trace, and the train output read back equals a direct run."""
    from icml25.core.claims import load_claims
    from icml25.studies.kernel_adaptation.stages import load_result

    work = smoke_run
    r = work / "results" / "smoke" / "kernel_adaptation"
    doc = load_claims(r / "claims.json")
    assert {c["id"]: c["kind"] for c in doc["claims"]} == SPEC_ENTRIES and doc["seeds"] == [0]
    by = {c["id"]: c for c in doc["claims"]}
    assert all(by[k]["holds"] is True for k, kind in SPEC_ENTRIES.items() if kind == "check")
    # one pair: the claims cannot be decided (evidence rule, or a failed adequacy gate first), whatever their tests
    # give
    assert all(by[k]["verdict"] == "inconclusive" for k, kind in SPEC_ENTRIES.items() if kind == "claim")
    assert "evidence rule" in by["c2_directional"]["note"]
    assert by["c4_exact"]["key_numbers"]["nngp_max_diff"] < 1e-10
    for fig in ("eps_vs_chi.png", "r_vs_chi.png", "u_vs_chi.png"):
        assert (r / "figures" / fig).stat().st_size > 5000
    # the stored adaptive result equals a direct in-memory run on the preprocessed data
    s = get("smoke")
    tasks = np.load(r / "interim" / "tasks.npz")
    data = {k: tasks[f"ising/s0/{k}"] for k in ("X", "y", "X_test", "y_test", "teacher")}
    np.testing.assert_array_equal(data["X"], D.make_task("ising", 5, 10, 100, 0)["X"])
    stored = load_result(dict(np.load(r / "models" / "adaptive_tree" / "chunk0.npz")), "ising/s0/",
                         "adaptive_tree", "ising", 0)
    direct = X.run(s, "adaptive_tree", "ising", 0, data=data)
    np.testing.assert_allclose(stored["f_test"], direct["f_test"], rtol=0, atol=1e-12)
    assert [m["eps_test"] for m in stored["metrics"]] == pytest.approx([m["eps_test"] for m in direct["metrics"]])

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work}/results/mlflow.db")
    exp = client.get_experiment_by_name("icml25/kernel_adaptation")
    runs = client.search_runs([exp.experiment_id], max_results=200)
    (job,) = [x for x in runs if x.data.tags.get("stage") == "train" and x.data.tags.get("arm") == "langevin"
              and x.data.tags["run_level"] == "job"]
    assert job.data.tags["seed"] == "0"  # one seed in the job: the job's run is that seed's run
    eps = client.get_metric_history(job.info.run_id, "train/ising/eps_test")
    langevin = load_result(dict(np.load(r / "models" / "langevin" / "chunk0.npz")), "ising/s0/", "langevin",
                           "ising", 0)
    assert {m.step: m.value for m in eps} == pytest.approx({g: m["eps_test"] for g, m in
                                                           enumerate(langevin["metrics"])})
    trace = client.get_metric_history(job.info.run_id, "train/ising/chi_e1/test_discrepancy_running")
    assert [m.step for m in trace] == [1000, 2000]
    assert "model/chunk0.npz" in [a.path for a in client.list_artifacts(job.info.run_id, "model")]
    evaluate = next(x for x in runs if x.data.tags.get("stage") == "evaluate" and x.data.tags["run_level"] == "job")
    assert evaluate.data.metrics["verdicts/checks_hold"] == 1.0
    for c in doc["claims"]:  # issue 31: every claim names its unit, n, interval method and tier
        if c["kind"] == "claim" and c.get("status") != "untested":  # c5: untested at smoke (n = 0)
            ev = c["evidence"]
            assert ev["unit"] == "task-seed pairs" and ev["n"] == 1 and ev["paper_data"] is False
            assert ev["ci_method"]


# ------------------------------------------------------------------------------------- rehearsal (issue 34)


def test_rehearsal_arff_reads_back_pixel_exact(tmp_path):
    """The rehearsal's miniature has OpenML's mnist_784 ARFF layout: a hand-made 2-image file written by it reads
    back through the study's loader with the exact pixels and classes."""
    from icml25.studies.kernel_adaptation import rehearsal as R

    pixels = np.zeros((2, 784), dtype=np.uint8)
    pixels[0, 0], pixels[0, 783], pixels[1, 400] = 255, 7, 128
    path = tmp_path / "mnist_784.arff"
    path.write_text(R.arff_text(pixels, np.array([0, 3])))
    lines = path.read_text().splitlines()
    assert "@relation mnist_784" in lines and lines.count("@data") == 1
    assert sum(line.startswith("@attribute pixel") for line in lines) == 784
    assert lines[-1].endswith(",'3'") and lines[-1].startswith("0,")
    X, y = D.read_mnist_arff(path)
    np.testing.assert_array_equal(X, pixels.astype(float))
    np.testing.assert_array_equal(y, [0.0, 3.0])


def test_rehearsal_miniature_fits_the_rehearsal_config(tmp_path):
    """The miniature holds enough images of classes 0 and 3 for the rehearsal's P + P_test, and mnist03 splits it
    into standardised train/test sets of D = 784 (deterministic bytes on every call)."""
    from icml25.core.download import read_manifest
    from icml25.studies.kernel_adaptation import rehearsal as R

    manifest = read_manifest(ka.MANIFEST, rehearsal=False)
    assert R.write_miniatures(tmp_path / "a", manifest) == ["mnist_784_arff"]
    R.write_miniatures(tmp_path / "b", manifest)
    path = tmp_path / "a" / manifest["mnist_784_arff"].mirror_path
    assert path.read_bytes() == (tmp_path / "b" / manifest["mnist_784_arff"].mirror_path).read_bytes()
    cfg = load_yaml(Path(__file__).resolve().parents[2] / "config" / "rehearsal" / "kernel_adaptation.yaml")
    d = D.mnist03(path, cfg["P"], cfg["P_test"], seed=0)
    assert d["X"].shape == (cfg["P"], 784) and d["X_test"].shape == (cfg["P_test"], 784)
    assert np.isclose(np.mean(np.sum(d["X"] ** 2, axis=1)), 784)
    assert set(np.unique(d["y"])) <= {-1.0, 1.0}


# ------------------------------------------------------------------------------------- the width sweep (c5)


def test_width_slope_recovers_a_power_law_exactly():
    """|eps_AD - eps_L| = 0.3 N^-0.5 (either sign of the difference) has slope -0.5 on log-log axes; a zero gap has
    no slope."""
    widths = [50, 200, 1000, 2000]
    gap = 0.3 * np.asarray(widths, float) ** -0.5
    eps_L = np.array([0.9, 0.8, 0.7, 0.6])
    eps_AD = eps_L + gap * np.array([1, -1, 1, -1])
    assert E.width_slope(widths, eps_AD, eps_L) == pytest.approx(-0.5, abs=1e-12)
    # hand-computed two-point slope: log(0.1/0.4) / log(4/1) = -1
    assert E.width_slope([1, 4], [0.5, 0.6], [0.1, 0.5]) == pytest.approx(-1.0, abs=1e-12)
    assert np.isnan(E.width_slope([1, 4], [0.5, 0.6], [0.5, 0.5]))
    with pytest.raises(ValueError, match="need >= 2 widths"):
        E.width_slope([1], [0.5], [0.4])


def test_claim5_verdicts_and_boundaries():
    rep, notrep, st = E.claim5_width_trend([-0.5, -0.4, -0.6, -0.45])
    assert rep and not notrep and st["n_negative"] == 4 and st["ci_high"] < 0
    # t interval by hand: mean -0.4875, sd 0.085391, t_{0.975,3} = 3.182446 -> half-width 0.135875
    assert st["mean_slope"] == pytest.approx(-0.4875) and st["ci_high"] == pytest.approx(-0.4875 + 0.135875, abs=1e-5)
    rep, notrep, _ = E.claim5_width_trend([0.1, -0.05, 0.2])
    assert not rep and notrep  # mean slope >= 0
    rep, notrep, _ = E.claim5_width_trend([-0.5, 0.4, -0.1])
    assert not rep and not notrep  # interval straddles 0
    rep, notrep, st = E.claim5_width_trend([-0.5, float("nan"), -0.1])
    assert not rep and not notrep and "note" in st


def _sweep_records(slopes, bias=0.0):
    widths = [4, 8, 16]
    out = []
    for k, b in enumerate(slopes):
        eps_L = [0.5, 0.5, 0.5]
        gap = [0.1 * (w / 4) ** b for w in widths]
        out.append({"task": "ising", "seed": k, "widths": widths, "eps_L": eps_L,
                    "eps_AD": [e + g for e, g in zip(eps_L, gap)], "eps_L_half": [e + bias for e in eps_L]})
    return out


def test_claim5_entry_untested_without_the_sweep_and_gated_by_the_sampler():
    by = {e.id: e for e in E.evaluate_claims(_fake_summaries())[0]}
    assert by["c5_width_trend"].status == "untested" and by["c5_width_trend"].testable_at == "paper"
    by = {e.id: e for e in E.evaluate_claims(_fake_summaries(), sweep=_sweep_records([-0.5, -0.6, -0.4]))[0]}
    c5 = by["c5_width_trend"]
    assert c5.verdict == "reproduced" and c5.key_numbers["mean_slope"] == pytest.approx(-0.5)
    assert c5.evidence.n == 3 and c5.evidence.unit == "task-seed pairs" and c5.evidence.paper_data is False
    # a step-halving change of eps_L of 0.05 against gaps down to 0.1 * 4**-0.6 = 0.044: the gate fails
    c5 = {e.id: e for e in E.evaluate_claims(_fake_summaries(), sweep=_sweep_records([-0.5, -0.6, -0.4],
                                                                                    bias=0.05))[0]}["c5_width_trend"]
    assert c5.verdict == "inconclusive" and "sweep_sampler_bias" in c5.note
    c5 = {e.id: e for e in E.evaluate_claims(_fake_summaries(), sweep=_sweep_records([0.2, 0.1, 0.3]))[0]}[
        "c5_width_trend"]
    assert c5.verdict == "not reproduced"


def test_sweep_adaptive_equals_the_grid_run_at_chi_N(task):
    """The sweep's adaptive arm at width N is the grid run's adaptive arm at chi = N (the same anneal); its Langevin
    arm runs the step-halving ensemble and is deterministic in the seed."""
    base = {**SCALES["smoke"], "chi_exponents": (0.0, 1.0), "n_anneal": 8, "tol": 1e-8}
    data = D.make_task("ising", 5, 10, 40, seed=3)
    sw = X.sweep(base, "adaptive_tree", 3, data, [6, 12])
    for k, N in enumerate((6, 12)):
        points = len(X.sweep_path(N, base["N"], base["n_anneal"]))  # the grid's chi step (N_grid = 20, 8 points)
        ref = X.run({**base, "N": N, "n_anneal": points}, "adaptive_tree", "ising", 3, data=data)
        assert sw["eps_test"][k] == pytest.approx(ref["metrics"][-1]["eps_test"], rel=1e-12)
    lg = {**base, "langevin": {**base["langevin"], "n_steps": 60, "n_chains": 2}, "step_check": {"factor": 2}}
    a, b = X.sweep(lg, "langevin", 3, data, [6, 12]), X.sweep(lg, "langevin", 3, data, [6, 12])
    assert a["step_check_eps_test"].shape == (2,) and np.array_equal(a["eps_test"], b["eps_test"])
    with pytest.raises(ValueError, match="kind must be"):
        X.sweep(base, "nngp", 3, data, [6])


def test_sweep_config_rules():
    raw = merge_scale(load_yaml(YAML), "paper")
    assert build(Config, raw, path="kernel_adaptation").n_sweep.widths == (50, 200, 1000, 2000)
    assert build(Config, merge_scale(load_yaml(YAML), "default"), path="kernel_adaptation").n_sweep.widths == ()
    for bad in ([200, 50], [50], [50, 50]):
        with pytest.raises(ConfigError, match="n_sweep.widths"):
            build(Config, {**raw, "n_sweep": {"widths": bad}}, path="kernel_adaptation")
    with pytest.raises(ConfigError, match="n_sweep.tasks"):
        build(Config, {**raw, "tasks": ["ising"], "n_sweep": {"widths": [50, 200], "tasks": ["teacher"]}},
              path="kernel_adaptation")


def test_sweep_pairs_joins_the_kinds_and_names_what_is_missing():
    from icml25.studies.kernel_adaptation.stages import sweep_pairs

    w = np.array([4, 8])
    ad = {"seeds": np.array([0]), "tasks": np.array(["ising"]), "widths": w, "ising/s0/eps_test": np.array([.6, .5])}
    lg = {"seeds": np.array([0]), "tasks": np.array(["ising"]), "widths": w, "ising/s0/eps_test": np.array([.4, .45]),
          "ising/s0/step_check_eps_test": np.array([.41, .45])}
    (p,) = sweep_pairs({"adaptive_tree": ad, "langevin": lg})
    assert (p["task"], p["seed"], p["widths"]) == ("ising", 0, [4, 8])
    assert p["eps_AD"] == [.6, .5] and p["eps_L"] == [.4, .45] and p["eps_L_half"] == [.41, .45]
    with pytest.raises(ValueError, match="need the outputs of both kinds"):
        sweep_pairs({"adaptive_tree": ad})
    with pytest.raises(ValueError, match="different widths"):
        sweep_pairs({"adaptive_tree": {**ad, "widths": np.array([4, 16])}, "langevin": lg})
    with pytest.raises(KeyError, match="langevin: no result for ising seed 0"):
        sweep_pairs({"adaptive_tree": ad, "langevin": {k: v for k, v in lg.items() if "eps" not in k}})


def test_sweep_path_keeps_the_grid_step():
    """Paper: the grid anneals to N = 200 in 40 points (ratio 200^(1/39)); the sweep keeps that ratio: 30 points to
    N = 50, 40 to 200, 57 to 2000; no step exceeds the grid's ratio."""
    assert [len(X.sweep_path(n, 200, 40)) for n in (50, 200, 1000, 2000)] == [30, 40, 52, 57]
    for n in (50, 1000, 2000):
        path = X.sweep_path(n, 200, 40)
        assert path[0] == 1 and path[-1] == pytest.approx(n) and np.max(path[1:] / path[:-1]) <= 200 ** (1 / 39) + 1e-12
    np.testing.assert_allclose(X.sweep_path(200, 200, 40), np.geomspace(1, 200, 40))
