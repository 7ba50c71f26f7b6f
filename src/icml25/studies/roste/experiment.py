"""One arm × seed of the roste study end to end, in memory, and the pieces the pipeline stages share.

Arms (all at ``alpha`` except the ``_a1`` controls at ``control_alpha``):

* ``fp_sft`` full-precision SFT; ``rtn`` = ``fp_sft`` (same seed) quantized by round-to-nearest;
  ``quarot_lite`` = ``fp_sft`` with every rotation slot H, then RTN (no GPTQ);
* ``ste`` QAT without rotations (R1 off); ``ste_rot_all`` QAT with every slot H; ``roste`` QAT with R1 on and
  R2-R4 chosen by :func:`search_rotation_config`; ``ste_a1``/``roste_a1`` the same at α = 1.

The seed sets the SFT data order, the calibration draw and the Hadamard signs; data and pretraining are fixed.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor

from icml25.core.config import build, config_hash

from .config import CONTROL_ARMS, PTQ_ARMS, Config
from .data import build_data, calibration_draw, special_tokens
from .evaluate import test_metrics
from .method import QuantConfig
from .model import Model, ModelConfig, fold, resolve_rotations, rotation_signs
from .search import config_errors, search_rotation_config, total_error
from .train import channel_max, pretrain, sft

QAT_ROTATIONS = {"ste": "none", "ste_a1": "none", "ste_rot_all": "all", "roste": "search", "roste_a1": "search"}


def as_config(settings: Mapping[str, Any] | Config) -> Config:
    """The validated :class:`Config` of ``settings`` (a Config, a StageView of one, or a plain mapping)."""
    if isinstance(settings, Config) or type(settings).__name__ == "StageView":
        return settings  # type: ignore[return-value]
    return build(Config, dict(settings), "roste")


def model_config(cfg: Config, alpha: float) -> ModelConfig:
    m = cfg.model
    return ModelConfig(vocab=m.vocab, d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
                       context=m.context, alpha=float(alpha), outlier_channels=tuple(m.outlier_channels),
                       init_std=m.init_std)


def quant_config(cfg: Config) -> QuantConfig:
    q = cfg.quant
    return QuantConfig(q.w_bits, q.a_bits, q.kv_bits, q.symmetric, q.clip)


def out_start(cfg: Config) -> int:
    """Index of the first answer token (after the input and SEP)."""
    return cfg.data.input_len + 1


def make_data(cfg: Config) -> dict[str, Tensor]:
    return build_data(cfg.data.model_dump(), cfg.model.context, cfg.pretrain.steps * cfg.pretrain.batch)


def make_pretrained(cfg: Config, alpha: float, data: Mapping[str, Tensor]) -> dict[str, Any]:
    """Pretrain the decoder at ``alpha``: ``{"state": state dict, "loss": curve, "channel_max": (d,) list}``."""
    p = cfg.pretrain
    model, losses = pretrain(model_config(cfg, alpha), data["pretrain"], p.steps, p.batch, p.lr, p.seed)
    cmax = channel_max(model, data["sft_train"][:256])
    return {"state": model.state_dict(), "loss": losses, "channel_max": cmax.tolist(), "alpha": float(alpha)}


def load_model(cfg: Config, alpha: float, state: Mapping[str, Tensor]) -> Model:
    model = Model(model_config(cfg, alpha))
    model.load_state_dict(state)
    return model


def search_record(cfg: Config, model: Model, data: Mapping[str, Tensor], seed: int) -> dict[str, Any]:
    """The rotation search of one seed (calibration draw and signs from ``seed``), with E(R*) re-measured in a
    pass of the chosen configuration (check 3b)."""
    calib = calibration_draw(data["sft_train"], cfg.search.calib_examples, seed)
    q = quant_config(cfg)
    t0 = time.perf_counter()
    choices, errors = search_rotation_config(model, calib, q, seed=seed, r1=cfg.search.r1)
    seconds = time.perf_counter() - t0
    measured = config_errors(model, calib, q, choices, seed)
    slots = model.cfg.slots()
    return {"seed": seed, "alpha": model.cfg.alpha, "choices": choices,
            "errors": {s: list(v) for s, v in errors.items()}, "totals": total_error(errors, choices),
            "measured": sum(measured[s] for s in slots), "seconds": seconds}


def rotation_choices(arm: str, rotcfg: Mapping[str, Any] | None) -> Mapping[str, bool] | str:
    rot = QAT_ROTATIONS.get(arm, "none")
    if rot == "search":
        if rotcfg is None:
            raise ValueError(f"arm {arm}: needs the rotation configuration of its seed (preprocess output)")
        return dict(rotcfg["choices"])
    return rot


def train_arm(cfg: Config, arm: str, seed: int, model: Model, data: Mapping[str, Tensor],
              rotcfg: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fine-tune one trained arm (not rtn/quarot_lite) for ``seed``; returns sft()'s dict plus ``rotations``."""
    if arm in PTQ_ARMS:
        raise ValueError(f"arm {arm} is not trained: it quantizes fp_sft")
    rot = "none" if arm == "fp_sft" else rotation_choices(arm, rotcfg)
    choices = resolve_rotations(rot, model.cfg)
    params, online = fold(model.params(), model.cfg, rotation_signs(choices, model.cfg, seed))
    s = cfg.sft
    qat = None if arm == "fp_sft" else quant_config(cfg)
    out = sft(params, online, model.cfg, data["sft_train"], out_start(cfg), qat, s.steps, s.batch, s.lr, seed,
              s.weight_decay, s.e_every, e_qcfg=quant_config(cfg))
    out["rotations"] = choices
    return out


def deployed(cfg: Config, arm: str, seed: int, mcfg: ModelConfig, params: Mapping[str, Tensor],
             rotations: Mapping[str, bool]) -> tuple[dict[str, Tensor], dict[str, Tensor | None], QuantConfig | None]:
    """``(params, online, qcfg)`` of an arm's deployment forward. ``params``/``rotations``: the trained arm's
    (for rtn/quarot_lite: fp_sft's of the same seed)."""
    signs_all = rotation_signs(resolve_rotations("all", mcfg), mcfg, seed)
    if arm == "fp_sft":
        return dict(params), _online(rotations, mcfg, seed), None
    if arm == "rtn":
        return dict(params), _online(rotations, mcfg, seed), quant_config(cfg)
    if arm == "quarot_lite":
        p, online = fold(params, mcfg, signs_all)
        return p, online, quant_config(cfg)
    return dict(params), _online(rotations, mcfg, seed), quant_config(cfg)


def _online(rotations: Mapping[str, bool], mcfg: ModelConfig, seed: int) -> dict[str, Tensor | None]:
    signs = rotation_signs(rotations, mcfg, seed)
    return {f"r{k}.{i}": signs.get(f"r{k}.{i}") for i in range(mcfg.n_layers) for k in (2, 3, 4)}


def evaluate_arm(cfg: Config, arm: str, seed: int, mcfg: ModelConfig, params: Mapping[str, Tensor],
                 rotations: Mapping[str, bool], test_tokens: Tensor) -> dict[str, float]:
    p, online, q = deployed(cfg, arm, seed, mcfg, params, rotations)
    return test_metrics(p, online, mcfg, test_tokens, out_start(cfg), q, special_tokens(cfg.data.n_states)["eos"])


# ----------------------------------------------------------------------------------------- in memory


@lru_cache(maxsize=4)
def _cached(blob: str, kind: str, alpha: float = 0.0) -> Any:
    import json

    cfg = build(Config, json.loads(blob), "roste")
    data = _cached(blob, "data") if kind != "data" else None
    if kind == "data":
        return make_data(cfg)
    return make_pretrained(cfg, alpha, data)


def run(settings: Mapping[str, Any] | Config, arm: str, seed: int) -> dict[str, Any]:
    """Run one arm × seed end to end (data, pretraining at the arm's α, search, SFT, held-out evaluation).

    Data and pretrained models are cached in memory per config. Returns ``{"arm", "seed", "alpha", "loss"
    (per-step SFT loss), "e_w" [(step, E(W))], "test": {test_loss, token_acc, rougeL}, "rotations", "search"
    (roste arms), "seconds"}``.
    """
    import json

    cfg = as_config(settings)
    if arm not in cfg.arms and arm not in ("fp_sft",):
        raise ValueError(f"arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    t0 = time.perf_counter()
    blob = json.dumps(cfg.model_dump(mode="json"), sort_keys=True)
    alpha = cfg.arm_alpha(arm)
    data = _cached(blob, "data")
    model = load_model(cfg, alpha, _cached(blob, "pretrain", alpha)["state"])
    rec = search_record(cfg, model, data, seed) if QAT_ROTATIONS.get(arm) == "search" else None
    base = "fp_sft" if arm in PTQ_ARMS else arm
    trained = train_arm(cfg, base, seed, model, data, rec)
    test = evaluate_arm(cfg, arm, seed, model.cfg, trained["params"], trained["rotations"], data["sft_test"])
    return {"arm": arm, "seed": seed, "alpha": alpha, "loss": trained["loss"], "e_w": trained["e_w"],
            "test": test, "rotations": trained["rotations"], "search": rec, "seconds": time.perf_counter() - t0,
            "config_hash": config_hash(cfg)}


__all__ = ["run", "as_config", "make_data", "make_pretrained", "search_record", "train_arm", "evaluate_arm",
           "deployed", "CONTROL_ARMS", "PTQ_ARMS"]
