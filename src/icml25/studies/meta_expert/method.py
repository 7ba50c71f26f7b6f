"""The math of Meta-Expert (Hou & Jia, ICML 2025, "A Square Peg in a Square Hole: Meta-Expert for Long-Tailed
Semi-Supervised Learning", PMLR 267): logit adjustment of the three experts, interval labels, the multi-depth
feature fusion (MFF) and dynamic expert assignment (DEA) module, the aggregation of the experts, and the losses.

Section references are to the paper: §3.1 (experts with logit adjustment of increasing strength, inherited from
CPE, Ma et al. AAAI 2024), §3.2 (DEA), §3.3 (MFF), §3.4 (training objective). Where the paper is silent we follow
the released code's behaviour as described in the study README ([V]); choices of ours are config keys ([R]).

Shapes: B = batch, C = classes, K = 3 experts; logits are float tensors (B, C); intervals are 0 head, 1 medium,
2 tail (classes sorted by labelled frequency, cut points ``cut1 < cut2``).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .data import long_tail_counts  # noqa: F401  (public API here; defined torch-free in data.py)

N_EXPERTS = 3
CONSISTENT, UNIFORM, REVERSED = 0, 1, 2  #: unlabelled-profile estimate = index of the expert the fusion follows


def adjust_logits(z: Tensor, log_prior: Tensor, tau: float | Tensor) -> Tensor:
    """Logit adjustment (§3.1): ``z + tau * log_prior``; z (B, C), log_prior (C,) = log of the labelled prior π̂."""
    return z + tau * log_prior


def interval_of(labels: Tensor, cut1: int = 2, cut2: int = 4) -> Tensor:
    """Interval of each class label: 0 head (< cut1), 1 medium (cut1 ≤ y < cut2), 2 tail (≥ cut2). LongTensor."""
    if not 0 < cut1 < cut2:
        raise ValueError(f"interval_of: need 0 < cut1 < cut2, got cut1={cut1}, cut2={cut2}")
    labels = torch.as_tensor(labels)
    return (labels >= cut1).long() + (labels >= cut2).long()


def class_balanced_weights(counts: Sequence[int] | Tensor, beta: float = 0.99) -> Tensor:
    """Class-balanced loss weights from the effective number of samples (Cui et al. 2019), as the released code
    weights the DEA losses (§3.4): w_c ∝ (1 − β) / (1 − β^{n_c}), normalised to sum to the number of classes."""
    n = torch.as_tensor(counts, dtype=torch.float64)
    if (n <= 0).any():
        raise ValueError(f"class_balanced_weights: every count must be > 0, got {n.tolist()}")
    if not 0 <= beta < 1:
        raise ValueError(f"class_balanced_weights: beta must be in [0, 1), got {beta}")
    w = (1.0 - beta) / (1.0 - beta ** n)
    return (w / w.sum() * n.numel()).float()


def aggregate(expert_logits: Tensor, w: Tensor, mode: str = "test", taus: Sequence[float] | Tensor | None = None,
              log_prior: Tensor | None = None) -> Tensor:
    """Mix the experts with per-sample weights (§3.2).

    expert_logits (K, B, C), w (B, K). ``mode="test"``: Σ_k w_k z_k. ``mode="train"``: Σ_k w_k (ℓ_k − min_c ℓ_k)
    with ℓ_k = z_k + τ_k log π̂ (needs ``taus`` (K,) and ``log_prior`` (C,)); shifting each expert's logits by
    a constant leaves it unchanged. Returns (B, C).
    """
    if expert_logits.dim() != 3 or w.shape != (expert_logits.shape[1], expert_logits.shape[0]):
        raise ValueError(f"aggregate: expert_logits must be (K, B, C) and w (B, K); got {tuple(expert_logits.shape)}"
                         f" and {tuple(w.shape)}")
    if mode == "test":
        parts = expert_logits
    elif mode == "train":
        if taus is None or log_prior is None:
            raise ValueError("aggregate: mode='train' needs taus and log_prior")
        t = torch.as_tensor(taus, dtype=expert_logits.dtype).view(-1, 1, 1)
        ell = expert_logits + t * log_prior.view(1, 1, -1)
        parts = ell - ell.min(dim=2, keepdim=True).values
    else:
        raise ValueError(f"aggregate: mode must be 'test' or 'train', got {mode!r}")
    return torch.einsum("bk,kbc->bc", w, parts)


def _silu_linear(d_in: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_out), nn.SiLU())


class MembershipEstimator(nn.Module):
    """MFF (§3.3) + DEA (§3.2): estimate each sample's interval membership and the experts' weights.

    ``feat_dims = (ch0, ch1, ch2, ch3)``: widths of the pooled features f_0 (stem) … f_3 (last stage).
    MFF: l1 = σ(W1 f0) (ch1), l2 = σ(W2(f1 + l1)) (ch2), l3 = σ(W3(f2 + l2)) (ch3), l4 = σ(W4(f3 + l3)) (2ch3);
    m2 = σ(W5 l1) (ch2), m3 = σ(W6(l2 + m2)) (ch3), m4 = σ(W7(l3 + m3)) (2ch3), u = σ(W8(l4 + m4)) (2ch3); σ = SiLU.
    With ``fusion=False`` (the ablation arm) u = f3, the last-stage feature alone.
    DEA: o = MLP([u; softmax(z_k + τ_k log π̂)_{k=1..K}]) (hidden 128, 64, out K, SiLU after every layer),
    w = softmax(o), then the confidence reweighting w ← softmax(w ⊙ q) with q_1 = max_{c<cut1} softmax(z_1)_c,
    q_2 = max_{cut1≤c<cut2} softmax(z_2)_c, q_3 = max_{c≥cut2} softmax(z_3)_c.
    """

    def __init__(self, feat_dims: Sequence[int], num_classes: int, cut1: int = 2, cut2: int = 4, *,
                 fusion: bool = True, hidden: Sequence[int] = (128, 64)):
        super().__init__()
        if len(feat_dims) != 4:
            raise ValueError(f"MembershipEstimator: feat_dims needs 4 widths (ch0..ch3), got {feat_dims}")
        if not 0 < cut1 < cut2 < num_classes:
            raise ValueError(f"MembershipEstimator: need 0 < cut1 < cut2 < num_classes, got {cut1}, {cut2}, "
                             f"{num_classes}")
        c0, c1, c2, c3 = (int(d) for d in feat_dims)
        self.feat_dims, self.num_classes, self.cut1, self.cut2, self.fusion = (c0, c1, c2, c3), num_classes, \
            cut1, cut2, fusion
        if fusion:
            self.lin1, self.lin2, self.lin3, self.lin4 = (_silu_linear(c0, c1), _silu_linear(c1, c2),
                                                          _silu_linear(c2, c3), _silu_linear(c3, 2 * c3))
            self.lin5, self.lin6, self.lin7, self.lin8 = (_silu_linear(c1, c2), _silu_linear(c2, c3),
                                                          _silu_linear(c3, 2 * c3), _silu_linear(2 * c3, 2 * c3))
        d_u = 2 * c3 if fusion else c3
        layers: list[nn.Module] = []
        d = d_u + N_EXPERTS * num_classes
        for h in (*hidden, N_EXPERTS):
            layers += [nn.Linear(d, h), nn.SiLU()]
            d = h
        self.dea = nn.Sequential(*layers)

    def fuse(self, feats: Sequence[Tensor]) -> Tensor:
        """u (B, 2·ch3) from the four pooled features (B, ch_j); f3 itself without fusion."""
        f0, f1, f2, f3 = feats
        if not self.fusion:
            return f3
        l1 = self.lin1(f0)
        l2 = self.lin2(f1 + l1)
        l3 = self.lin3(f2 + l2)
        l4 = self.lin4(f3 + l3)
        m2 = self.lin5(l1)
        m3 = self.lin6(l2 + m2)
        m4 = self.lin7(l3 + m3)
        return self.lin8(l4 + m4)

    def forward(self, feats: Sequence[Tensor], expert_logits: Tensor, log_prior: Tensor,
                taus: Sequence[float] | Tensor) -> tuple[Tensor, Tensor]:
        """feats: 4 tensors (B, ch_j); expert_logits (K, B, C); log_prior (C,); taus (K,).
        Returns o (B, K) (the DEA output before softmax, trained against interval labels) and w (B, K) on the
        simplex (after reweighting)."""
        if expert_logits.shape[0] != N_EXPERTS:
            raise ValueError(f"MembershipEstimator: expected {N_EXPERTS} experts, got {expert_logits.shape[0]}")
        t = torch.as_tensor(taus, dtype=expert_logits.dtype).view(-1, 1, 1)
        adjusted = torch.softmax(expert_logits + t * log_prior.view(1, 1, -1), dim=2)  # (K, B, C)
        u = self.fuse(feats)
        o = self.dea(torch.cat([u, *adjusted.unbind(0)], dim=1))
        w = torch.softmax(o, dim=1)
        return o, reweight(w, expert_logits, self.cut1, self.cut2)


def reweight(w: Tensor, expert_logits: Tensor, cut1: int, cut2: int) -> Tensor:
    """DEA confidence reweighting: softmax(w ⊙ q), q_k = expert k's largest probability inside its own interval."""
    p = torch.softmax(expert_logits, dim=2)
    q = torch.stack([p[0, :, :cut1].amax(1), p[1, :, cut1:cut2].amax(1), p[2, :, cut2:].amax(1)], dim=1)
    return torch.softmax(w * q, dim=1)


# ------------------------------------------------------------------------------------------------------ losses


def fixmatch_loss(z_strong: Tensor, z_weak: Tensor, threshold: float = 0.95) -> tuple[Tensor, Tensor]:
    """FixMatch unlabelled loss (Sohn et al. 2020): mean over the batch of 1[max p_weak ≥ t] · CE(z_strong, ŷ),
    ŷ = argmax p_weak (no gradient through the weak view). Returns (loss, mask (B,) float)."""
    p = torch.softmax(z_weak.detach(), dim=1)
    conf, pseudo = p.max(dim=1)
    mask = (conf >= threshold).float()
    return (F.cross_entropy(z_strong, pseudo, reduction="none") * mask).mean(), mask


def expert_unsup_loss(z_strong_branches: Sequence[Tensor], z_weak: Tensor, threshold: float, cut1: int,
                      cut2: int) -> tuple[Tensor, Tensor, Tensor]:
    """One expert's unlabelled loss with head/medium/tail branches (§3.1, as in CPE's released code):
    the H branch is trained on every confident pseudo-label, M on those ≥ cut1, T on those ≥ cut2, and the loss is
    averaged over the active (sample, branch) terms. ``z_strong_branches`` = (H, M, T) logits (B, C) of the strong
    view (the same tensor three times without branch BNs). Returns (loss, mask (B,), pseudo-labels (B,))."""
    p = torch.softmax(z_weak.detach(), dim=1)
    conf, pseudo = p.max(dim=1)
    mask = (conf >= threshold).float()
    gates = (mask, mask * (pseudo >= cut1).float(), mask * (pseudo >= cut2).float())
    total = sum((F.cross_entropy(z, pseudo, reduction="none") * g).sum() for z, g in zip(z_strong_branches, gates))
    return total / (sum(g.sum() for g in gates) + 1e-12), mask, pseudo


PROFILE_COUNTS = ("frequency", "once_per_batch")
EMPTY_PROFILE = ("consistent", "equal")


def profile_count_update(pseudo: Tensor, mask: Tensor, num_classes: int, rule: str = "frequency") -> Tensor:
    """One batch's contribution to the per-class pseudo-label counts of the profile estimate (§3.4). pseudo (B,)
    labels, mask (B,) confidence mask (> 0: confident). Returns (num_classes,) float.

    ``frequency`` [R, default]: the number of confident pseudo-labels of each class (a class-frequency count, the
    paper's intent). ``once_per_batch``: the released code's line ``current_mask[pseudo_label2] += mask2``, an
    indexed write that does not accumulate repeated indices, so each class present in the batch gets +mask of one
    of its pseudo-labels: at most 1 per batch. PyTorch executes it sequentially on the CPU (the last occurrence
    wins, measured against the released line on 2000 random batches) and leaves the survivor unspecified on a GPU;
    we implement the sequential result: +1 if the class's last pseudo-label in the batch is confident."""
    if rule not in PROFILE_COUNTS:
        raise ValueError(f"profile_count: unknown rule {rule!r}; expected one of {PROFILE_COUNTS}")
    pseudo, mask = torch.as_tensor(pseudo).long(), torch.as_tensor(mask)
    if rule == "frequency":
        return torch.bincount(pseudo[mask > 0], minlength=num_classes).float()
    last = torch.full((num_classes,), -1, dtype=torch.long).scatter_reduce(
        0, pseudo, torch.arange(pseudo.numel()), reduce="amax")  # index of each class's last pseudo-label
    present = last >= 0
    out = torch.zeros(num_classes, dtype=torch.float32)
    out[present] = (mask[last[present]] > 0).float()
    return out


def unlabelled_profile(counts: Tensor) -> int:
    """Which expert the unsupervised fusion loss follows (§3.4, released code), from the per-class counts of the
    uniform expert's confident pseudo-labels over one epoch: REVERSED if max(second half)/min(first half) > 2 and
    max(first half)/min(second half) < 2; UNIFORM if max/min < 2; else CONSISTENT. counts (C,) ≥ 0; all-zero counts
    (no confident pseudo-label) give CONSISTENT (see :func:`fusion_expert_weights` for the official alternative)."""
    c = torch.as_tensor(counts, dtype=torch.float64)
    if c.sum() <= 0:
        return CONSISTENT
    d = c / c.sum()
    h = d.numel() // 2
    with torch.no_grad():
        reversed_ = bool((d[h:].max() / d[:h].min() > 2.0) & (d[:h].max() / d[h:].min() < 2.0))
        uniform = bool(d.max() / d.min() < 2.0)
    if reversed_ and not uniform:
        return REVERSED
    if uniform and not reversed_:
        return UNIFORM
    return CONSISTENT


def fusion_expert_weights(counts: Tensor, empty: str = "consistent") -> Tensor:
    """Weights (K,) of the experts' terms in the unsupervised fusion loss (§3.4): one-hot on
    :func:`unlabelled_profile`. With no confident pseudo-label (counts all 0) ``empty`` decides: ``consistent``
    [R, default] follows E1 (the consistent expert: with nothing counted, the unlabelled set is taken to follow the
    labelled prior), ``equal`` weights the three experts 1/3 each (the released code, whose weights start at 1/3
    and are only overwritten when the count is positive)."""
    if empty not in EMPTY_PROFILE:
        raise ValueError(f"empty_profile: unknown rule {empty!r}; expected one of {EMPTY_PROFILE}")
    if float(torch.as_tensor(counts, dtype=torch.float64).sum()) <= 0 and empty == "equal":
        return torch.full((N_EXPERTS,), 1.0 / N_EXPERTS)
    return F.one_hot(torch.tensor(unlabelled_profile(counts)), N_EXPERTS).float()
