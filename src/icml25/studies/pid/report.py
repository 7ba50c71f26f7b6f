"""Figures of the pid study (matplotlib, Agg)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .method import npr_residual, pid_residual


def residual_examples_figure(data: Mapping[str, np.ndarray], step: float = 1.0, colour_space: str = "yuv601"):
    """Rows: a real test crop and its held-out fake (decoder B; paper scale: a generated test image, key
    ``test_fake``); columns: image, PiD residual r/s (luma-like mean of the 3 channels), NPR residual."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(7.5, 5))
    fake = ("fake B", data["test_fakeB"][0]) if "test_fakeB" in data else ("generated", data["test_fake"][0])
    for row, (name, x) in enumerate((("real", data["test_real"][0]), fake)):
        r = pid_residual(x[None], step, colour_space)[0] / step
        n = npr_residual(x[None])[0]
        for ax, img, title, kw in ((axes[row, 0], x, f"{name}: image", {}),
                                   (axes[row, 1], r.mean(-1), "PiD residual (mean of r/s)", {"cmap": "RdBu", "vmin": -1.5, "vmax": 1.5}),
                                   (axes[row, 2], n.mean(-1), "NPR residual", {"cmap": "RdBu"})):
            ax.imshow(img, **kw)
            ax.set_title(title, fontsize=8)
            ax.axis("off")
    fig.tight_layout()
    return fig


def acc_by_generator_figure(doc: Mapping[str, Any]):
    """Grouped bars: mean test accuracy per arm on decoder A (seen), B and C (held out), and JPEG-75 held-out;
    paper scale (``doc["groups"]``): per GenImage test subset, and JPEG-75 on the held-out ones."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    arms = list(doc["arms"])
    if doc.get("groups"):
        keys = [(f"test/acc_{g}", g + ("" if g in doc.get("heldout", ()) else " (train gen.)"))
                for g in doc["groups"]] + [("test/acc_heldout_jpeg75", "held out, JPEG 75")]
    else:
        keys = [("test/acc_A", "A (train gen.)"), ("test/acc_B", "B (held out)"), ("test/acc_C", "C (held out)"),
                ("test/acc_heldout_jpeg75", "B+C, JPEG 75")]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = 0.8 / len(keys)
    for j, (k, label) in enumerate(keys):
        vals = [doc["arms"][a].get(k) or np.nan for a in arms]
        ax.bar(np.arange(len(arms)) + j * w, vals, w, label=label)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(arms)) + w * (len(keys) - 1) / 2, arms)
    ax.set_ylabel("test accuracy (mean over seeds)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, ncol=2 if len(keys) <= 4 else 3)
    fig.tight_layout()
    return fig
