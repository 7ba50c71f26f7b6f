"""Miniature MNIST ARFF for the paper-scale rehearsal of kernel_adaptation (``icml25.core.rehearsal``).

The real file is OpenML's ``mnist_784.arff`` (data id 554): ARFF text with ``%`` comment lines, ``@relation
mnist_784``, 784 ``@attribute pixelK numeric`` lines, the nominal ``@attribute class {'0',...,'9'}`` and then one
``@data`` row per image: 784 integer pixels in 0..255 and the quoted class, comma-separated. The miniature keeps
that exact layout with :data:`ROWS` images (labels cycling 0..9, so 2 x ROWS / 10 images of classes 0 and 3) whose
pixels are a class-dependent blob plus noise from a fixed seed; only the content, the sha256 and the size differ.
The generators (ising, teacher) and the bundled digits03 file need no miniature.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

ROW = "mnist_784_arff"  #: the manifest row of the ARFF file
ROWS = 150  #: images in the miniature (30 of classes 0 and 3: the rehearsal's P + P_test must fit)
SEED = 20250534


def _images(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``ROWS`` 28 x 28 uint8 images flattened to (ROWS, 784) and labels 0..9 (cycling)."""
    labels = np.arange(ROWS) % 10
    yy, xx = np.mgrid[0:28, 0:28]
    imgs = np.zeros((ROWS, 28, 28))
    for i, c in enumerate(labels):
        cy, cx = 8 + 1.2 * c + rng.normal(0, 1), 14 + rng.normal(0, 2)
        imgs[i] = 255 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * (2.0 + 0.3 * c) ** 2))
    imgs += rng.normal(0, 20, imgs.shape)
    imgs[imgs < 30] = 0  # MNIST's background is exactly 0
    return np.clip(np.round(imgs), 0, 255).astype(np.uint8).reshape(ROWS, 784), labels


def arff_text(pixels: np.ndarray, labels: np.ndarray) -> str:
    """The OpenML mnist_784 ARFF layout for ``pixels`` (n, 784) uint8 and ``labels`` (n,) in 0..9."""
    lines = ["% MNIST handwritten digits (OpenML data id 554, mnist_784) -- rehearsal miniature, synthetic pixels",
             "%", "@relation mnist_784", ""]
    lines += [f"@attribute pixel{k} numeric" for k in range(1, 785)]
    lines += ["@attribute class {'0','1','2','3','4','5','6','7','8','9'}", "", "@data"]
    lines += [",".join(map(str, row.tolist())) + f",'{int(c)}'" for row, c in zip(pixels, labels)]
    return "\n".join(lines) + "\n"


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write the ARFF at ``root / manifest[ROW].mirror_path`` (same bytes on every call); return ``[ROW]``."""
    from icml25.core.io import atomic_path

    data = arff_text(*_images(np.random.default_rng(SEED))).encode("ascii")
    path = Path(root) / manifest[ROW].mirror_path
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != data:
        with atomic_path(path) as tmp:
            Path(tmp).write_bytes(data)
    return [ROW]
