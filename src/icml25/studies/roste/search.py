"""RoSTE's rotation-configuration search (paper §4.2, Algorithm 1 with K = 1).

For every searched slot ``i`` (``r2.{l}``, ``r3.{l}``, ``r4.{l}``) and ``R ∈ {I, H}`` the quantization error is

    E_i(R) = Σ_{W ∈ 𝒲_i} ||Q_w(R^T W) - R^T W||_F^2 + (1/n) Σ_j ||Q_x(X_ij R) - X_ij R||_F^2

over the slot's members [R]: ``r2`` covers W_o, the o_proj input and the V cache; ``r3`` the K cache; ``r4``
W_down and its input. The activations ``X_ij`` come from the full-precision forward of the deployed model (R1
applied) on ``n`` calibration examples, so the total error is a sum of per-slot terms: one all-I pass and one
all-H pass give every ``E_i(I)`` and ``E_i(H)``, and the argmin per slot (ties → I [R]) minimises the total.
With ``r1: search`` [R] a slot ``r1`` (members: the q/k/v/gate/up weights and the block inputs of every layer) is
decided first, the others then with R1 fixed at its choice.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import Tensor

from .method import QuantConfig, quant_error
from .model import Model, decoder_forward, deploy, resolve_rotations


def slot_errors(params: Mapping[str, Tensor], online: Mapping[str, Tensor | None], model: Model,
                calib_tokens: Tensor, qcfg: QuantConfig) -> dict[str, float]:
    """Per-slot quantization error ``E_i`` (and ``"r1"``) of one deployed configuration on the calibration set.

    ``calib_tokens`` (n, T); activations from one full-precision forward (float64), errors summed over tokens and
    divided by ``n``.
    """
    cfg, q = model.cfg, qcfg
    n = calib_tokens.shape[0]
    rec: dict[str, Tensor] = {}
    p64 = {k: v.detach().to(torch.float64) for k, v in params.items()}
    on64 = {k: (v.to(torch.float64) if v is not None else None) for k, v in online.items()}
    with torch.no_grad():
        decoder_forward(p64, calib_tokens, cfg, None, on64, record=rec)

    def werr(name: str) -> float:
        return quant_error(p64[name].T, q.w_bits, q.symmetric, None, q.clip)

    def aerr(x: Tensor) -> float:
        return quant_error(x, q.a_bits, q.symmetric, None, q.clip) / n

    def kverr(x: Tensor) -> float:
        return quant_error(x, q.kv_bits, q.symmetric, None, q.clip) / n  # x (n, T, H, hd): per token and head

    out: dict[str, float] = {"r1": 0.0}
    for i in range(cfg.n_layers):
        out[f"r2.{i}"] = werr(f"l{i}_wo") + aerr(rec[f"o_in.{i}"]) + kverr(rec[f"v.{i}"])
        out[f"r3.{i}"] = kverr(rec[f"k.{i}"])
        out[f"r4.{i}"] = werr(f"l{i}_wd") + aerr(rec[f"down_in.{i}"])
        out["r1"] += sum(werr(f"l{i}_{w}") for w in ("wq", "wk", "wv", "wg", "wu"))
        out["r1"] += aerr(rec[f"attn_in.{i}"]) + aerr(rec[f"mlp_in.{i}"])
    return out


def config_errors(model: Model, calib_tokens: Tensor, qcfg: QuantConfig, rotations: Mapping[str, bool] | str,
                  seed: int = 0, params: Mapping[str, Tensor] | None = None) -> dict[str, float]:
    """:func:`slot_errors` of ``model`` (or ``params`` of its form) deployed under ``rotations``."""
    p, online = deploy(model, rotations, seed, params)
    return slot_errors(p, online, model, calib_tokens, qcfg)


def search_rotation_config(model: Model, calib_tokens: Tensor, qcfg: QuantConfig, seed: int = 0,
                           r1: str = "always") -> tuple[dict[str, bool], dict[str, tuple[float, float]]]:
    """Choose I or H for every slot ``r2.{l}``, ``r3.{l}``, ``r4.{l}`` (True = H) by the smaller ``E_i``.

    ``calib_tokens`` LongTensor (n, T). Returns ``(choices, errors)`` with ``errors[slot] = (E_i(I), E_i(H))``.
    ``r1="always"`` (the official code) keeps R1 on; ``"search"`` [R] decides it first by ``E_r1`` and adds
    ``choices["r1"]`` and ``errors["r1"]``. Hadamard signs come from ``seed``.
    """
    if r1 not in ("always", "search"):
        raise ValueError(f"search_rotation_config: r1 must be 'always' or 'search', got {r1!r}")
    slots = model.cfg.slots()
    r1_on, errors = True, {}
    if r1 == "search":
        off = config_errors(model, calib_tokens, qcfg, "none", seed)["r1"]
        on = config_errors(model, calib_tokens, qcfg, {"r1": True, **{s: False for s in slots}}, seed)["r1"]
        r1_on = on < off
        errors["r1"] = (off, on)
    e_i = config_errors(model, calib_tokens, qcfg, {"r1": r1_on, **{s: False for s in slots}}, seed)
    e_h = config_errors(model, calib_tokens, qcfg, {"r1": r1_on, **{s: True for s in slots}}, seed)
    choices = choose(e_i, e_h, slots)
    errors.update({s: (e_i[s], e_h[s]) for s in slots})
    if r1 == "search":
        choices = {"r1": r1_on, **choices}
    return choices, errors


def choose(e_i: Mapping[str, float], e_h: Mapping[str, float], slots: Iterable[str]) -> dict[str, bool]:
    """Per-slot argmin of ``(E_i(I), E_i(H))``: True (H) iff ``E_i(H) < E_i(I)`` (ties → I [R])."""
    return {s: bool(e_h[s] < e_i[s]) for s in slots}


def total_error(errors: Mapping[str, tuple[float, float]], choices: Mapping[str, bool]) -> dict[str, float]:
    """``E(all-I)``, ``E(all-H)`` and ``E(R*) = Σ_i min`` over the searched slots (r2-r4)."""
    slots = [s for s in errors if s != "r1"]
    return {"all_I": sum(errors[s][0] for s in slots), "all_H": sum(errors[s][1] for s in slots),
            "chosen": sum(errors[s][1] if choices[s] else errors[s][0] for s in slots),
            "sum_min": sum(min(errors[s]) for s in slots)}


__all__ = ["search_rotation_config", "choose", "slot_errors", "config_errors", "total_error", "resolve_rotations"]
