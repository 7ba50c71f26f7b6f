"""Unisoma ("Unisoma: A Unified Transformer-based Solver for Multi-Solid Systems", ICML 2025, Sec. 3)
and the implicit single-stream baseline [R].

Unisoma models loads, rigid solids and deformable solids explicitly. Every entity's nodes are embedded and
softly partitioned into M slice tokens (:class:`SliceBlock`, Sec. 3.2). A processor of P layers (Sec. 3.3) then
(i) encodes each configured contact pair of solids (:class:`ContactBlock`), (ii) mixes, for each deformable, all
contacts and all loads by adaptive allocation (:func:`allocate`, :class:`AllocationBlock`), and (iii) updates
each deformable from its (load, contact, self) triplet (:class:`TripletBlock`). Only deformable tokens change.
Tokens are finally sliced back onto the nodes (deslice) and a head predicts 5 channels per node:
[Δx, Δy, Δz, stress, PEEQ]. Structure, initialisation and parameter count follow the official code
(therontau0054/Unisoma @ 8f4dd83; compared on identical weights in float64, README "Agreement with the authors'
code").

Shapes: B batch, N nodes of an entity, E edges, M slices, C width.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import Tensor, nn
import torch.nn.functional as F


def relative_l2(pred: Tensor, target: Tensor) -> Tensor:
    """Mean over the batch of ‖pred − target‖₂ / ‖target‖₂, norms over all non-batch dims (spec "Loss").

    ``pred``, ``target``: (B, ...) -> scalar tensor.
    """
    diff = (pred - target).flatten(1).norm(dim=1)
    return (diff / target.flatten(1).norm(dim=1)).mean()


def knn_edges(pos: Tensor, k: int = 3) -> tuple[Tensor, Tensor]:
    """kNN graph on node positions (a ``torch.cdist`` top-k excluding self [R]; replaces torch_geometric).

    ``pos``: (B, N, 3). Returns ``length`` (B, E, 1) Euclidean edge lengths and ``index`` (B, E, 2) int64
    (src = node, dst = one of its k nearest other nodes), E = N·k, edges of node n at rows n·k … n·k + k − 1.
    """
    b, n, _ = pos.shape
    if not 0 < k < n:
        raise ValueError(f"knn_edges: need 0 < k < N, got k={k}, N={n}")
    dist = torch.cdist(pos, pos)
    dist = dist + torch.diag(torch.full((n,), float("inf"), dtype=pos.dtype, device=pos.device))
    length, dst = dist.topk(k, dim=-1, largest=False)                     # (B, N, k)
    src = torch.arange(n, device=pos.device).view(1, n, 1).expand(b, n, k)
    index = torch.stack([src, dst], -1).reshape(b, n * k, 2)
    return length.reshape(b, n * k, 1), index


class FFN(nn.Module):
    """Linear(C → rC) – GELU – Linear(rC → C)."""

    def __init__(self, dim: int, ratio: int = 4, out: int | None = None):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, ratio * dim), nn.GELU(), nn.Linear(ratio * dim, out or dim))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class MHSA(nn.Module):
    """Multi-head self-attention over tokens; scale 1/√C over the full width (spec "Contact" [V])."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"width {dim} is not divisible by {heads} heads")
        self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.scale = dim ** -0.5

    def forward(self, x: Tensor) -> Tensor:
        b, m, c = x.shape
        q, k, v = self.qkv(x).view(b, m, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1)
        return self.out((att @ v).transpose(1, 2).reshape(b, m, c))


class Attention(nn.Module):
    """Unisoma's pre-norm self-attention (official ``AttentionLayer`` math, spec "Attention"): separate LayerNorms
    before q, k and v, q/k/v projections without bias, a biased output projection, scale 1/√C over the full width.

    ``forward(x (B, M, C)) -> (B, M, C)`` = ``W_o softmax(q kᵀ/√C) v`` with ``q = W_q LN_q x``, ``k = W_k LN_k x``,
    ``v = W_v LN_v x`` per head (the residual is added by the caller).
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"width {dim} is not divisible by {heads} heads")
        self.heads, self.scale = heads, dim ** -0.5
        self.nq, self.nk, self.nv = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.out = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, m, c = x.shape
        split = lambda t: t.view(b, m, self.heads, c // self.heads).transpose(1, 2)   # (B, H, M, C/H)
        q, k, v = split(self.q(self.nq(x))), split(self.k(self.nk(x))), split(self.v(self.nv(x)))
        att = torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1)
        return self.out((att @ v).transpose(1, 2).reshape(b, m, c))


def init_weights(module: nn.Module) -> None:
    """Official initialisation (spec "Attention"): every Linear weight trunc-normal(std 0.02, cut at ±2), biases 0;
    LayerNorm weight 1, bias 0. Placeholders are drawn U(0, 1)/C where they are created. Use ``model.apply``."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def _placeholder(dim: int) -> nn.Parameter:
    """A learned offset of width ``dim`` initialised U(0, 1)/dim (official)."""
    return nn.Parameter(torch.rand(dim) / dim)


class SliceBlock(nn.Module):
    """Soft partition of N nodes into M slice tokens (Transolver-style physics attention, Sec. 3.2).

    ``f̃ = W_x f + e``; ``w = softmax_M(W_s f̃ / clamp(τ, 0.01, 5))``; ``Z = wᵀ(W_f f) / (Σ_n w + 1e-5)``.
    With ``use_edge``, edges (length, index) contribute tokens ``Σ_e w_e g_e`` with
    ``w_e = softmax_M(W_e((w_src + w_dst) / clamp(τ_e)))`` (temperature inside the Linear, as the official code) and ``g_e = Linear(1 → C)(length) + placeholder``; the edge
    sum and its normaliser are scaled by N/E and added to the node terms.

    ``forward(f (B, N, C), edges=None) -> (tokens (B, M, C), weights (B, N, M))``.
    """

    def __init__(self, dim: int, n_slices: int, use_edge: bool = False):
        super().__init__()
        self.use_edge = use_edge
        self.in_x, self.in_f = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.placeholder = _placeholder(dim)
        self.to_w = nn.Linear(dim, n_slices)
        self.tau = nn.Parameter(torch.full((n_slices,), 0.5))
        if use_edge:
            self.edge_in = nn.Linear(1, dim)
            self.edge_placeholder = _placeholder(dim)
            self.edge_w = nn.Linear(n_slices, n_slices)
            self.tau_e = nn.Parameter(torch.full((n_slices,), 0.5))

    def forward(self, f: Tensor, edges: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        w = torch.softmax(self.to_w(self.in_x(f) + self.placeholder) / self.tau.clamp(0.01, 5.0), dim=-1)
        num = w.transpose(1, 2) @ self.in_f(f)                                 # (B, M, C)
        den = w.sum(1)                                                         # (B, M)
        if self.use_edge:
            if edges is None:
                raise ValueError("SliceBlock(use_edge=True) needs edges=(length, index)")
            length, index = edges
            n, e = f.shape[1], index.shape[1]
            gather = lambda col: torch.gather(w, 1, index[..., col:col + 1].expand(-1, -1, w.shape[-1]))
            we = torch.softmax(self.edge_w((gather(0) + gather(1)) / self.tau_e.clamp(0.01, 5.0)), dim=-1)
            g = self.edge_in(length) + self.edge_placeholder                   # (B, E, C)
            num = num + (n / e) * (we.transpose(1, 2) @ g)
            den = den + (n / e) * we.sum(1)
        return num / (den[..., None] + 1e-5), w


def allocate(items: list[Tensor], proj: nn.Linear) -> Tensor:
    """Adaptive allocation (Sec. 3.3): ``α = softmax_k(proj(X_k))`` elementwise, returns ``Σ_k α_k ⊙ X_k``.

    ``items``: K tensors (B, M, C); ``proj``: Linear(C → C). With K = 1 the input is returned as is.
    """
    if len(items) == 1:
        return items[0]
    x = torch.stack(items, 0)                                                  # (K, B, M, C)
    return (torch.softmax(proj(x), dim=0) * x).sum(0)


def allocation_weights(items: list[Tensor], proj: nn.Linear) -> Tensor:
    """The weights α (K, B, M, C) of :func:`allocate` (for the mechanism check: they sum to 1 over K)."""
    return torch.softmax(proj(torch.stack(items, 0)), dim=0)


class AllocationBlock(nn.Module):
    """Allocation over K items; for contacts an FFN residual follows. Bypassed (input returned) when K = 1."""

    def __init__(self, dim: int, ffn: bool):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.norm, self.ffn = (nn.LayerNorm(dim), FFN(dim)) if ffn else (None, None)

    def forward(self, items: list[Tensor]) -> Tensor:
        if len(items) == 1:
            return items[0]
        x = allocate(items, self.proj)
        return x + self.ffn(self.norm(x)) if self.ffn is not None else x


class ContactBlock(nn.Module):
    """Contact of solids a and b: ``s = LN z_a + LN z_b``; ``c = s + Attention(s)`` (no FFN; :class:`Attention`
    normalises q, k, v separately)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.na, self.nb, self.att = nn.LayerNorm(dim), nn.LayerNorm(dim), Attention(dim, heads)

    def forward(self, za: Tensor, zb: Tensor) -> Tensor:
        s = self.na(za) + self.nb(zb)
        return s + self.att(s)


class TripletBlock(nn.Module):
    """Deformable update from (load, contact, self): ``s = LN l + LN c + LN z``; ``t = s + Attention(s)``;
    ``z ← t + FFN(LN t)``."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.nl, self.nc, self.nz = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.att = Attention(dim, heads)
        self.nt, self.ffn = nn.LayerNorm(dim), FFN(dim, mlp_ratio)

    def forward(self, load: Tensor, contact: Tensor, z: Tensor) -> Tensor:
        s = self.nl(load) + self.nc(contact) + self.nz(z)
        t = s + self.att(s)
        return t + self.ffn(self.nt(t))


def default_pairs(n_deformables: int, n_rigids: int) -> tuple[tuple[int, int], ...]:
    """All solid pairs (i < j) over [deformables…, rigids…] that involve at least one deformable. For 2 + 2 this
    is the official bilateral-stamping list [[0,1],[0,2],[0,3],[1,2],[1,3]]."""
    n = n_deformables + n_rigids
    return tuple((i, j) for i in range(n) for j in range(i + 1, n) if i < n_deformables)


@dataclass(frozen=True)
class UnisomaConfig:
    """Architecture of :class:`Unisoma` (defaults: the study's default scale; entity counts of bilateral stamping).

    ``contact_pairs`` index solids ordered [deformables…, rigids…]; None = :func:`default_pairs`.
    """

    n_loads: int = 2
    n_rigids: int = 2
    n_deformables: int = 2
    width: int = 64
    n_slices: int = 16
    n_layers: int = 2
    n_heads: int = 8
    mlp_ratio: int = 4
    out_dim: int = 5
    use_edge: bool = True
    contact_pairs: tuple[tuple[int, int], ...] | None = None

    def pairs(self) -> tuple[tuple[int, int], ...]:
        pairs = self.contact_pairs if self.contact_pairs is not None else default_pairs(self.n_deformables,
                                                                                          self.n_rigids)
        n = self.n_deformables + self.n_rigids
        for a, b in pairs:
            if not (0 <= a < n and 0 <= b < n and a != b and min(a, b) < self.n_deformables):
                raise ValueError(f"contact_pairs: ({a}, {b}) must join two distinct solids of {n}, one deformable")
        return tuple(pairs)


class Unisoma(nn.Module):
    """The explicit multi-solid solver (Sec. 3). ``forward(loads, rigids, deformables, edges=None)``:

    ``loads``: list of (B, R_k, 6) [position, position + displacement]; ``rigids``: list of (B, R_k, 3);
    ``deformables``: list of (B, N_m, 3); ``edges``: one :func:`knn_edges` pair per deformable (needed when
    ``cfg.use_edge``). Returns a list of (B, N_m, ``out_dim``).
    """

    def __init__(self, cfg: UnisomaConfig = UnisomaConfig()):
        super().__init__()
        self.cfg, c = cfg, cfg.width
        self.pairs = cfg.pairs()
        self.load_embed = nn.ModuleList(nn.Linear(6, c) for _ in range(cfg.n_loads))
        self.rigid_embed = nn.ModuleList(nn.Linear(3, c) for _ in range(cfg.n_rigids))
        self.def_embed = nn.ModuleList(nn.Sequential(nn.Linear(3, 2 * c), nn.GELU(), nn.Linear(2 * c, c))
                                       for _ in range(cfg.n_deformables))
        self.load_slice = nn.ModuleList(SliceBlock(c, cfg.n_slices) for _ in range(cfg.n_loads))
        self.rigid_slice = nn.ModuleList(SliceBlock(c, cfg.n_slices) for _ in range(cfg.n_rigids))
        self.def_slice = nn.ModuleList(SliceBlock(c, cfg.n_slices, cfg.use_edge) for _ in range(cfg.n_deformables))
        self.layers = nn.ModuleList()
        for _ in range(cfg.n_layers):
            layer = {"contact": nn.ModuleList(ContactBlock(c, cfg.n_heads) for _ in self.pairs),
                     "triplet": nn.ModuleList(TripletBlock(c, cfg.n_heads, cfg.mlp_ratio)
                                              for _ in range(cfg.n_deformables))}
            # allocation modules exist only where there is something to allocate (K > 1), as in the official code
            if len(self.pairs) > 1:
                layer["contact_alloc"] = nn.ModuleList(AllocationBlock(c, ffn=True)
                                                       for _ in range(cfg.n_deformables))
            if cfg.n_loads > 1:
                layer["load_alloc"] = nn.ModuleList(AllocationBlock(c, ffn=False) for _ in range(cfg.n_deformables))
            self.layers.append(nn.ModuleDict(layer))
        self.deslice_placeholder = nn.ParameterList(_placeholder(c) for _ in range(cfg.n_deformables))
        self.deslice_ffn = nn.ModuleList(FFN(c, cfg.mlp_ratio) for _ in range(cfg.n_deformables))
        hidden = cfg.mlp_ratio * c                                             # official head C -> 4C -> 5
        self.head = nn.ModuleList(nn.Sequential(nn.Linear(c, hidden), nn.GELU(), nn.Linear(hidden, cfg.out_dim))
                                  for _ in range(cfg.n_deformables))
        self.apply(init_weights)

    def _check(self, loads, rigids, deformables, edges) -> None:
        cfg = self.cfg
        counts = (len(loads), len(rigids), len(deformables))
        if counts != (cfg.n_loads, cfg.n_rigids, cfg.n_deformables):
            raise ValueError(f"Unisoma: got loads/rigids/deformables {counts}, configured "
                             f"{(cfg.n_loads, cfg.n_rigids, cfg.n_deformables)}")
        if cfg.use_edge and (edges is None or len(edges) != cfg.n_deformables):
            raise ValueError("Unisoma(use_edge=True): edges must hold one knn_edges pair per deformable")

    def tokens(self, loads, rigids, deformables, edges=None):
        """Embedding and slicing: ``(load_tokens, rigid_tokens, def_tokens, def_features, def_weights)``."""
        self._check(loads, rigids, deformables, edges)
        lz = [sl(emb(x))[0] for emb, sl, x in zip(self.load_embed, self.load_slice, loads)]
        rz = [sl(emb(x))[0] for emb, sl, x in zip(self.rigid_embed, self.rigid_slice, rigids)]
        feats = [emb(x) for emb, x in zip(self.def_embed, deformables)]
        dz, dw = [], []
        for i, (sl, f) in enumerate(zip(self.def_slice, feats)):
            z, w = sl(f, edges[i] if self.cfg.use_edge else None)
            dz.append(z)
            dw.append(w)
        return lz, rz, dz, feats, dw

    def process(self, lz: list[Tensor], rz: list[Tensor], dz: list[Tensor]) -> list[Tensor]:
        """P processor layers; returns the updated deformable tokens (loads and rigids stay fixed)."""
        nd = self.cfg.n_deformables
        for layer in self.layers:
            solids = [*dz, *rz]
            contacts = [blk(solids[a], solids[b]) for blk, (a, b) in zip(layer["contact"], self.pairs)]
            new = []
            for m in range(nd):
                # every deformable allocates over ALL contact pairs (official), not only the pairs containing it
                if len(contacts) > 1:
                    c_agg = layer["contact_alloc"][m](contacts)
                else:
                    c_agg = contacts[0] if contacts else torch.zeros_like(dz[m])
                l_agg = layer["load_alloc"][m](lz) if len(lz) > 1 else (lz[0] if lz else torch.zeros_like(dz[m]))
                new.append(layer["triplet"][m](l_agg, c_agg, dz[m]))
            dz = new
        assert len(dz) == nd
        return dz

    def forward(self, loads: Sequence[Tensor], rigids: Sequence[Tensor], deformables: Sequence[Tensor],
                edges: Sequence[tuple[Tensor, Tensor]] | None = None) -> list[Tensor]:
        lz, rz, dz, feats, dw = self.tokens(list(loads), list(rigids), list(deformables), edges)
        dz = self.process(lz, rz, dz)
        out = []
        for m, (z, w, f) in enumerate(zip(dz, dw, feats)):
            h = w @ z + self.deslice_placeholder[m] + f
            h = h + self.deslice_ffn[m](h)
            out.append(self.head[m](h + f))
        return out


# ------------------------------------------------------------------------------------------------------------------
# Implicit baseline [R]
# ------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImplicitConfig:
    """The implicit single-stream baseline: one node cloud, Transolver-style blocks [R]."""

    n_entities: int = 6
    width: int = 64
    n_slices: int = 16
    n_layers: int = 4
    n_heads: int = 8
    mlp_ratio: int = 4
    out_dim: int = 5


class TransolverBlock(nn.Module):
    """``x ← x + deslice(MHSA(slice(LN x)))``; ``x ← x + FFN(LN x)``."""

    def __init__(self, dim: int, n_slices: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.n1, self.slice, self.att = nn.LayerNorm(dim), SliceBlock(dim, n_slices), MHSA(dim, heads)
        self.n2, self.ffn = nn.LayerNorm(dim), FFN(dim, mlp_ratio)

    def forward(self, x: Tensor) -> Tensor:
        z, w = self.slice(self.n1(x))
        x = x + w @ self.att(z)
        return x + self.ffn(self.n2(x))


class Implicit(nn.Module):
    """All nodes of all entities in one cloud: 6-d features (positions zero-padded, or [p, p + Δp] for loads)
    plus a one-hot entity id, a shared MLP embedding, Transolver blocks and a per-node 5-d head. Same call and
    return convention as :class:`Unisoma` (edges are ignored)."""

    def __init__(self, cfg: ImplicitConfig = ImplicitConfig()):
        super().__init__()
        self.cfg, c = cfg, cfg.width
        self.embed = nn.Sequential(nn.Linear(6 + cfg.n_entities, 2 * c), nn.GELU(), nn.Linear(2 * c, c))
        self.blocks = nn.ModuleList(TransolverBlock(c, cfg.n_slices, cfg.n_heads, cfg.mlp_ratio)
                                    for _ in range(cfg.n_layers))
        self.head = nn.Sequential(nn.LayerNorm(c), nn.Linear(c, c), nn.GELU(), nn.Linear(c, cfg.out_dim))
        self.apply(init_weights)                       # the same initialisation as Unisoma (and Transolver's)

    def forward(self, loads, rigids, deformables, edges=None) -> list[Tensor]:
        ents = [*loads, *[F.pad(r, (0, 3)) for r in rigids], *[F.pad(d, (0, 3)) for d in deformables]]
        if len(ents) != self.cfg.n_entities:
            raise ValueError(f"Implicit: {len(ents)} entities, configured {self.cfg.n_entities}")
        eye = torch.eye(len(ents), dtype=ents[0].dtype, device=ents[0].device)
        x = torch.cat([torch.cat([e, eye[i].expand(*e.shape[:2], -1)], -1) for i, e in enumerate(ents)], 1)
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h)
        out = self.head(h)
        sizes = [e.shape[1] for e in ents]
        parts = list(torch.split(out, sizes, dim=1))
        return parts[len(loads) + len(rigids):]


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matched_implicit(ucfg: UnisomaConfig, width: int | None = None, max_layers: int = 32) -> ImplicitConfig:
    """The implicit baseline whose depth brings its parameter count closest to ``Unisoma(ucfg)`` (spec: within
    ±10%; :func:`param_count` of both is logged and checked by the study)."""
    target = param_count(Unisoma(ucfg))
    base = dict(n_entities=ucfg.n_loads + ucfg.n_rigids + ucfg.n_deformables, width=width or ucfg.width,
                n_slices=ucfg.n_slices, n_heads=ucfg.n_heads, mlp_ratio=ucfg.mlp_ratio, out_dim=ucfg.out_dim)
    best = min(range(1, max_layers + 1),
               key=lambda d: abs(param_count(Implicit(ImplicitConfig(n_layers=d, **base))) - target))
    return ImplicitConfig(n_layers=best, **base)
