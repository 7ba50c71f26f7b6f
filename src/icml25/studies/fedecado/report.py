"""Figures of the fedecado study, drawn from ``metrics/eval.json`` (mean curves over seeds per arm).

* :func:`quadratic_figure` — relative error ‖x − x*‖/‖x*‖ per round on the quadratic problem (log scale): FedAvg and
  FedNova level off at their biased fixed points, FedECADO-R falls to rounding error (full and partial participation).
* :func:`accuracy_figure` — test accuracy per round of every image arm.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

QUAD_LINES = (("quad_fedavg", "rel_err", "FedAvg"), ("quad_fednova", "rel_err", "FedNova"),
              ("quad_fedecado", "rel_err", "FedECADO-R, full participation"),
              ("quad_fedecado", "rel_err_partial", "FedECADO-R, partial participation, tau redrawn"))
IMAGE_LABELS = {"fedavg": "FedAvg", "fedprox": "FedProx", "fednova": "FedNova", "fedexp": "FedExp",
                "fedecado": "FedECADO-R", "fedecado_lte": "FedECADO-R + client LTE",
                "fedecado_noflow": "FedECADO-R without currents"}


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)


def quadratic_figure(doc: Mapping[str, Any]) -> Any:
    """Relative error per round (mean over seeds) of the quadratic arms present in ``doc``."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    curves = doc.get("curves", {})
    drawn = 0
    for arm, name, label in QUAD_LINES:
        values = curves.get(arm, {}).get(name)
        if values:
            ax.semilogy(range(1, len(values) + 1), [max(v, 1e-17) for v in values], label=label)
            drawn += 1
    if drawn:
        ax.set_xscale("log")
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no quadratic arm in this run")
    ax.set_xlabel("round")
    ax.set_ylabel("relative error |x - x*| / |x*|  (mean over seeds)")
    ax.set_title("Quadratic consensus problem (FedECADO-R is our reconstruction)", fontsize=9)
    return fig


def accuracy_figure(doc: Mapping[str, Any]) -> Any:
    """Test accuracy (%) per round (mean over seeds) of the image arms present in ``doc``."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    curves = doc.get("curves", {})
    drawn = 0
    for arm, label in IMAGE_LABELS.items():
        values = curves.get(arm, {}).get("test_acc")
        if values:
            style = "-" if arm in ("fedecado", "fedavg") else "--"
            n = len(doc.get("seeds", {}).get(arm, []))
            ax.plot(range(1, len(values) + 1), [100 * v for v in values], style, label=f"{label} ({n} seeds)")
            drawn += 1
    if drawn:
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no image arm in this run")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{doc.get('dataset', '')}: Dirichlet label skew, heterogeneous local work", fontsize=9)
    return fig
