"""Langevin ensembles of the linear two-layer network: the empirical ground truth of the kernel_adaptation study.

The paper (Rubin et al., ICML 2025, Sec. 4 / Fig. 2) compares its theory with networks trained by Langevin
dynamics, whose stationary distribution is the Bayesian posterior. Our sampler [R] runs the unadjusted Langevin
algorithm in standardised coordinates w̃ = w √(D/g_w), ṽ = v √(χN/g_v) (prior N(0, I)):

    U(W̃, ṽ) = ½‖W̃‖² + ½‖ṽ‖² + Σ_μ (y_μ − f_μ)²/(2κ),   f_μ = c Σ_i ṽ_i w̃_iᵀx_μ,   c = √(g_v g_w/(χ N D)),
    θ ← θ − η ∇U(θ) + √(2η) ξ,   ξ ~ N(0, I).

Step size (issue 33). The stiffest direction of U sets the step: the Gauss–Newton part of ∇²U is (c²/κ) JᵀJ with
JJᵀ = ‖ṽ‖² XXᵀ + X W̃ᵀW̃ Xᵀ (P,P), and c²/κ = g_v g_w/(N D κ₀) does not depend on χ. At the prior's typical state
(‖ṽ‖² ≈ N, W̃ᵀW̃ ≈ N I) its top eigenvalue is λ̂ = 1 + 2 g_v g_w λ_max(XᵀX)/(D κ₀) (:func:`curvature_estimate`),
independent of χ and N: ≈ 140–300 for the default tasks (D = 11, P = 20), ≈ 600–1200 at paper sizes (P = 100).
(An earlier docstring gave P/(N κ₀) ≈ 8, 25–35× too small, which let a step of 5e-3 look safe.) In the mean-field
posterior (χ = N) the measured top eigenvalue is up to ≈ 2.3 λ̂, and the unadjusted sampler is unstable where
η λ ≥ 2, so a step with η λ̂ > ``max_step_curvature`` (1 by default) is refused before sampling. Inside that bound
the step's bias is measured by step halving (``step_check`` in the config; benchmarks/kernel_adaptation_step.py).
The network is linear, f(x) = xᵀβ with β = c W̃ᵀṽ (D,), so posterior means of f on any input follow from the
running mean of β; E[A] = (g_w/D) E[W̃ᵀW̃]/N. All chains advance together as one (C, N, D) tensor;
:func:`langevin_sample_many` advances several χ (one generator each) as one (G·C, N, D) tensor, bit for bit as G lone runs.
"""
from __future__ import annotations

import math

import numpy as np
import torch

TRACE_EVERY = 1000  #: steps per window of the running test-discrepancy trace
NOISE_BLOCK = 200  #: Langevin steps whose noise is drawn at once


MAX_STEP_CURVATURE = 1.0  #: default bound on η·λ̂ (λ̂ = curvature_estimate); the sampler refuses larger steps


class LangevinDivergence(FloatingPointError):
    """A chain produced non-finite weights; the message names the chains, the step, χ and the key to change."""


class LangevinStepError(ValueError):
    """The step is too large for the data's curvature; the message names the key ``langevin.lr`` and a bound."""


def curvature_estimate(X: np.ndarray, g_v: float = 1.0, g_w: float = 1.0, kappa0: float = 0.05) -> float:
    """λ̂ = 1 + 2 g_v g_w λ_max(XᵀX)/(D κ₀): the top eigenvalue of ∇²U (standardised coordinates) at the prior's
    typical state, for X (P,D). The 1 is the prior's curvature; the rest is the Gauss–Newton likelihood term with
    ‖ṽ‖² = N and W̃ᵀW̃ = N I (module docstring). Independent of χ and N; unit: 1/(step size)."""
    X = np.asarray(X, dtype=np.float64)
    return 1.0 + 2.0 * g_v * g_w * float(np.linalg.eigvalsh(X.T @ X)[-1]) / (X.shape[1] * kappa0)


def potential(Wt: torch.Tensor, vt: torch.Tensor, X: torch.Tensor, y: torch.Tensor, c: float, kappa: float,
              likelihood: bool = True) -> torch.Tensor:
    """U per chain: Wt (C,N,D), vt (C,N), X (P,D), y (P,) → (C,)."""
    u = 0.5 * (Wt**2).sum(dim=(1, 2)) + 0.5 * (vt**2).sum(dim=1)
    if likelihood:
        beta = c * torch.einsum("cnd,cn->cd", Wt, vt)
        u = u + ((beta @ X.T - y) ** 2).sum(dim=1) / (2 * kappa)
    return u


def potential_grad(Wt: torch.Tensor, vt: torch.Tensor, X: torch.Tensor, y: torch.Tensor, c: float, kappa: float,
                   likelihood: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Analytic ∇U: (∂U/∂W̃ (C,N,D), ∂U/∂ṽ (C,N)). With r = (f − y)/κ and g = c Xᵀr (C,D):
    ∂U/∂w̃_i = w̃_i + ṽ_i g, ∂U/∂ṽ_i = ṽ_i + w̃_iᵀg."""
    if not likelihood:
        return Wt.clone(), vt.clone()
    beta = c * torch.einsum("cnd,cn->cd", Wt, vt)
    g = (c / kappa) * ((beta @ X.T - y) @ X)
    return Wt + vt[:, :, None] * g[:, None, :], vt + torch.einsum("cnd,cd->cn", Wt, g)


def langevin_sample(X, y, X_test, N, chi, g_v=1.0, g_w=1.0, kappa0=0.05, lr=2.5e-3, n_steps=10_000, n_chains=8,
                    burn_in=1 / 3, thin=10, seed=0, likelihood=True, *, y_test=None, device: str = "cpu",
                    threads: int | None = 1, max_step_curvature: float | None = MAX_STEP_CURVATURE
                    ) -> dict[str, np.ndarray]:
    """Sample the network posterior (or its prior if ``likelihood`` is False) with ``n_chains`` Langevin chains.

    Samples are kept every ``thin`` steps after ``burn_in``·n_steps steps. Returns float64 numpy arrays:
    ``f_train (P,)`` and ``f_test (P*,)`` posterior means, ``A (D,D)`` = E[WᵀW/N], ``var_train (P,)`` and
    ``var_test (P*,)`` posterior variances of f, ``beta (D,)`` the mean read-out, ``n_samples`` and
    ``trace (n_steps//1000,)``: the discrepancy of the mean prediction over the chains and the thinned states of
    each 1000-step window (every window, burn-in included, so it shows the relaxation), on the test points if the
    keyword ``y_test`` (P*,) is given, else on the train points. The same ``seed`` gives identical output on
    one device; ``device`` selects the torch device (``"cuda"`` at paper scale); ``threads`` sets torch's CPU
    threads for the call (restored afterwards; None keeps the current setting): the tensors are tiny, so one
    thread is fastest and avoids oversubscribing shared cores. ``max_step_curvature`` bounds lr·λ̂
    (:func:`curvature_estimate`); None switches the check off (used only to measure the bias of too-large steps).

    Raises ValueError for χ outside [1, N], LangevinStepError (naming ``langevin.lr``) if lr·λ̂ exceeds
    ``max_step_curvature`` with the likelihood on, and LangevinDivergence if any chain becomes non-finite.
    """
    return langevin_sample_many(X, y, X_test, N, [float(chi)], [seed], g_v, g_w, kappa0, lr, n_steps, n_chains, burn_in,
                                thin, likelihood, y_test=y_test, device=device, threads=threads,
                                max_step_curvature=max_step_curvature)[0]


def langevin_sample_many(X, y, X_test, N, chis, seeds, g_v=1.0, g_w=1.0, kappa0=0.05, lr=2.5e-3, n_steps=10_000,
                         n_chains=8, burn_in=1 / 3, thin=10, likelihood=True, *, y_test=None, device: str = "cpu",
                         threads: int | None = 1, max_step_curvature: float | None = MAX_STEP_CURVATURE
                         ) -> list[dict[str, np.ndarray]]:
    """:func:`langevin_sample` at several χ at once: entry k of the returned list is exactly (bit for bit)
    ``langevin_sample(..., chi=chis[k], seed=seeds[k], ...)`` with the other arguments shared.

    The G ensembles are advanced together as one (G·C, N, D) tensor, so each Langevin step costs a few tensor
    operations for all of them instead of per χ (the tensors are tiny and the per-operation overhead dominates on
    CPU). Every chain's arithmetic is the same as alone: each group keeps its own generator and noise stream, its
    own c and κ enter through per-group matrices of a batched product, and the running sums are formed per group.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    X_test = np.asarray(X_test, dtype=np.float64)
    P, D = X.shape
    if y.shape != (P,) or X_test.ndim != 2 or X_test.shape[1] != D:
        raise ValueError(f"expected X (P,D), y (P,), X_test (P*,D); got {X.shape}, {y.shape}, {X_test.shape}")
    N = int(N)
    chis = [float(c) for c in chis]
    seeds = [int(s) for s in seeds]
    if not chis or len(chis) != len(seeds):
        raise ValueError(f"langevin_sample_many: need one seed per chi, got {len(chis)} chi and {len(seeds)} seeds")
    for chi in chis:
        if not 1.0 <= chi <= N * (1 + 1e-12):
            raise ValueError(f"langevin_sample: chi={chi} outside [1, N={N}]")
    if not (0 <= burn_in < 1 and thin >= 1 and n_steps >= 1 and n_chains >= 1 and lr > 0):
        raise ValueError("langevin_sample: need 0 <= burn_in < 1, thin >= 1, n_steps >= 1, n_chains >= 1, lr > 0")
    if likelihood and max_step_curvature is not None:
        lam = curvature_estimate(X, g_v, g_w, kappa0)
        if lr * lam > max_step_curvature:
            raise LangevinStepError(
                f"langevin.lr = {lr:g} is too large for this data: lr x curvature estimate {lam:.4g} = {lr * lam:.3g} "
                f"> langevin.max_step_curvature = {max_step_curvature:g} (P={P}, D={D}); set langevin.lr <= "
                f"{max_step_curvature / lam:.3g}")
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        return _sample(X, y, X_test, N, chis, seeds, g_v, g_w, kappa0, lr, n_steps, n_chains, burn_in, thin,
                       likelihood, y_test, device)
    finally:
        torch.set_num_threads(previous)


def _sample(X, y, X_test, N, chis, seeds, g_v, g_w, kappa0, lr, n_steps, n_chains, burn_in, thin, likelihood,
            y_test, device) -> list[dict[str, np.ndarray]]:
    P, D = X.shape
    G, C = len(chis), n_chains
    cs = [math.sqrt(g_v * g_w / (chi * N * D)) for chi in chis]
    kappas = [kappa0 / chi for chi in chis]
    dev = torch.device(device)
    dt = torch.float64
    gens = [torch.Generator(device=dev).manual_seed(s) for s in seeds]
    Xt, yt = torch.as_tensor(X, dtype=dt, device=dev), torch.as_tensor(y, dtype=dt, device=dev)
    Wt = torch.empty((G * C, N, D), dtype=dt, device=dev)
    vt = torch.empty((G * C, N), dtype=dt, device=dev)
    for k, gen in enumerate(gens):  # per group: W̃ then ṽ from its generator, as a lone run draws them
        Wt[k * C:(k + 1) * C] = torch.randn((C, N, D), generator=gen, dtype=dt, device=dev)
        vt[k * C:(k + 1) * C] = torch.randn((C, N), generator=gen, dtype=dt, device=dev)
    cXT = torch.stack([c * Xt.T for c in cs])  # (G,D,P): residual r = c (ṽW̃) Xᵀ − y
    gX = torch.stack([(c / kap) * Xt for c, kap in zip(cs, kappas)])  # (G,P,D): g = (c/κ) r X
    neg_y = -yt
    noise_scale = math.sqrt(2.0 * lr)
    start = int(math.ceil(burn_in * n_steps))
    sum_beta = torch.zeros((G, D), dtype=dt, device=dev)
    sum_bb = torch.zeros((G, D, D), dtype=dt, device=dev)
    sum_ww = torch.zeros((G, D, D), dtype=dt, device=dev)
    n_kept = 0
    win_beta = torch.zeros((G, D), dtype=dt, device=dev)
    win_n = 0
    trace_beta: list[torch.Tensor] = []
    # work buffers and fixed views (the state is updated in place, so the views stay valid)
    v_row = vt.unsqueeze(1)  # (GC,1,N)
    v_col = vt.unsqueeze(2)  # (GC,N,1)
    vw = torch.empty((G * C, 1, D), dtype=dt, device=dev)  # β/c per chain
    vw_g = vw.view(G, C, D)
    r = torch.empty((G, C, P), dtype=dt, device=dev)
    g = torch.empty((G, C, D), dtype=dt, device=dev)
    g_row = g.view(G * C, 1, D)
    g_col = g.view(G * C, D, 1)
    gv = torch.empty((G * C, N, 1), dtype=dt, device=dev)  # W̃ g
    gv_flat = gv.view(G * C, N)
    neg_y_b = neg_y.expand(G, C, P)
    Wt_g, vt_g = Wt.view(G, C, N, D), vt.view(G, C, N)  # grouped views for the noise of shape (G, C, ...)
    v_col_g, g_row_g, gv_g = v_col.view(G, C, N, 1), g.view(G, C, 1, D), gv.view(G, C, N)
    nb = min(NOISE_BLOCK, n_steps)  # noise buffers, allocated once (fresh large allocations cost page faults)
    raw_buf = torch.empty((G, nb, C, N, D + 1), dtype=torch.float32, device=dev)
    w_buf = torch.empty((G, nb, C, N, D), dtype=dt, device=dev)
    v_buf = torch.empty((G, nb, C, N), dtype=dt, device=dev)
    block = first = 0
    for t in range(1, n_steps + 1):
        if block == 0:  # noise drawn in blocks of NOISE_BLOCK steps, in float32 (4x cheaper on CPU; its 1e-7
            # rounding is far below the sampling error), then used in float64 like the rest of the dynamics
            block = first = min(NOISE_BLOCK, n_steps - t + 1)
            for k, gen in enumerate(gens):  # group k's stream: randn((block, C, N, D+1)) as a lone run draws it
                raw_buf[k, :block].normal_(generator=gen)
            # exact float32 -> float64 copies, then × √(2η) in float64; step i of group k is w_noise[k, i]
            w_noise = w_buf[:, :block].copy_(raw_buf[:, :block, ..., :D]).mul_(noise_scale)
            v_noise = v_buf[:, :block].copy_(raw_buf[:, :block, ..., D]).mul_(noise_scale)
        i = first - block
        block -= 1
        # θ ← θ − η∇U(θ) + √(2η)ξ with ∇U = θ + likelihood part (potential_grad), both parts from the old θ
        if likelihood:
            torch.bmm(v_row, Wt, out=vw)  # (GC,1,D) = β/c
            torch.baddbmm(neg_y_b, vw_g, cXT, out=r)  # (G,C,P)
            torch.bmm(r, gX, out=g)  # (G,C,D)
            torch.bmm(Wt, g_col, out=gv)  # (GC,N,1) = W̃ g
            Wt_g.mul_(1.0 - lr).addcmul_(v_col_g, g_row_g, value=-lr).add_(w_noise[:, i])
            vt_g.mul_(1.0 - lr).add_(gv_g, alpha=-lr).add_(v_noise[:, i])
        else:
            Wt_g.mul_(1.0 - lr).add_(w_noise[:, i])
            vt_g.mul_(1.0 - lr).add_(v_noise[:, i])
        if t % thin == 0:
            for k, c in enumerate(cs):  # per group, as a lone run forms its sums
                Wk, vk = Wt[k * C:(k + 1) * C], vt[k * C:(k + 1) * C]
                beta = c * torch.einsum("cnd,cn->cd", Wk, vk)  # (C,D)
                win_beta[k] += beta.sum(dim=0)
                if t > start:
                    sum_beta[k] += beta.sum(dim=0)
                    sum_bb[k] += beta.T @ beta
                    flat = Wk.reshape(-1, D)
                    sum_ww[k] += flat.T @ flat
            win_n += C
            if t > start:
                n_kept += C
        if t % TRACE_EVERY == 0 or t == n_steps:
            for k, chi in enumerate(chis):
                Wk, vk = Wt[k * C:(k + 1) * C], vt[k * C:(k + 1) * C]
                bad = ~torch.isfinite(Wk).all(dim=(1, 2)) | ~torch.isfinite(vk).all(dim=1)
                if bool(bad.any()):
                    raise LangevinDivergence(
                        f"Langevin chains {torch.nonzero(bad).flatten().tolist()} diverged (non-finite weights) by "
                        f"step {t} at chi={chi:.6g}, lr={lr:g}; reduce langevin.lr (curvature estimate "
                        f"{curvature_estimate(Xt.cpu().numpy(), g_v, g_w, kappa0):.4g})")
            if t % TRACE_EVERY == 0:
                trace_beta.append(win_beta / max(win_n, 1))
                win_beta = torch.zeros((G, D), dtype=dt, device=dev)
                win_n = 0
    if n_kept == 0:
        raise ValueError(f"langevin_sample: no samples kept (n_steps={n_steps}, burn_in={burn_in}, thin={thin})")
    out = []
    all_betas = torch.stack(trace_beta).cpu().numpy() if trace_beta else np.zeros((0, G, D))
    for k in range(G):
        mean_beta = (sum_beta[k] / n_kept).cpu().numpy()
        cov_beta = (sum_bb[k] / n_kept).cpu().numpy() - np.outer(mean_beta, mean_beta)
        A = (g_w / D) * (sum_ww[k] / (n_kept * N)).cpu().numpy()
        betas = np.ascontiguousarray(all_betas[:, k])
        if y_test is None:
            trace = np.mean((betas @ X.T - y) ** 2, axis=1)
        else:
            trace = np.mean((betas @ X_test.T - np.asarray(y_test, dtype=np.float64)) ** 2, axis=1)
        out.append({"f_train": X @ mean_beta, "f_test": X_test @ mean_beta, "A": 0.5 * (A + A.T), "beta": mean_beta,
                    "var_train": np.einsum("pd,de,pe->p", X, cov_beta, X),
                    "var_test": np.einsum("pd,de,pe->p", X_test, cov_beta, X_test),
                    "trace": trace, "n_samples": n_kept})
    return out
