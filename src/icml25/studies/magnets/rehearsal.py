"""Miniatures of the magnets paper inputs for the paper-scale rehearsal (``icml25.core.rehearsal``).

* ``imagenet_train_{0..4}``, ``imagenet_val``: gzip'd tars of JPEG members named as in the Hugging Face
  ``ILSVRC/imagenet-1k`` shards (``<image name>_<wnid>.JPEG``: ``n01440764_10026_n01440764.JPEG`` in the training
  shards, ``ILSVRC2012_val_00000001_n01751748.JPEG`` in the validation shard), 4 real wnids, 2 images per wnid and
  training shard, 3 per wnid in the validation shard. Baseline JPEGs of varied sizes (landscape, portrait, one
  smaller than the crop), one greyscale and one CMYK JPEG (ImageNet holds both kinds). Members at the archive root
  [R: the loader reads the base name, so a leading folder would not matter].
* ``maskgit_tokenizer``: a Flax msgpack checkpoint (``{"params": {"encoder", "decoder", "quantizer"}}``, the
  published file's tree and parameter names) of a VQGAN at the rehearsal's sizes (``paper.vqgan`` of
  config/rehearsal/magnets.yaml: filters 8, five levels, one ResBlock per level, codes of dim 8, K = 16).
* ``fid_inception``: a torch state dict (``torch.save`` container) with the FID Inception-v3 key layout at
  1/16 width (``paper.inception_width: 16``) [R: a reduced feature net, rehearsal only].

Content is synthetic (class colours and stripes plus noise; weights drawn from numpy ``default_rng``); bytes are
deterministic: fixed seeds, fixed tar mtimes/owners, gzip without name or time.
"""
from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

WNIDS = ("n01440764", "n01443537", "n01484850", "n01491361")  #: tench, goldfish, great white shark, tiger shark
PER_TRAIN_SHARD, PER_VAL = 2, 3
SIZES = ((80, 64), (64, 96), (72, 72), (48, 40), (100, 70))  #: (w, h) of the miniature JPEGs, cycled
MTIME = 1655000000  #: fixed member mtime (June 2022, the shards' era)
VQGAN_SIZES = {"filters": 8, "channel_multipliers": (1, 1, 2, 2, 4), "num_res_blocks": 1, "embedding_dim": 8,
               "groups": 4}
K = 16
INCEPTION_WIDTH = 16


def _jpeg(rng: np.random.Generator, cls: int, k: int) -> bytes:
    from PIL import Image

    w, h = SIZES[k % len(SIZES)]
    colour = np.array([60 + 50 * cls, 200 - 40 * cls, 90 + 30 * (cls % 2)], dtype=float)
    yy, xx = np.mgrid[0:h, 0:w]
    stripes = 40.0 * np.sin((xx if cls % 2 else yy) * (0.2 + 0.1 * cls))[..., None]
    img = np.clip(colour + stripes + rng.normal(0, 12, size=(h, w, 3)), 0, 255).astype(np.uint8)
    pil = Image.fromarray(img)
    if k % 7 == 3:
        pil = pil.convert("L")
    elif k % 7 == 5:
        pil = pil.convert("CMYK")
    buf = io.BytesIO()
    pil.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _tar_gz(members: list[tuple[str, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, MTIME
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def train_shard(shard: int) -> bytes:
    rng = np.random.default_rng(100 + shard)
    members, k = [], 0
    for i in range(PER_TRAIN_SHARD):
        for c, wnid in enumerate(WNIDS):
            members.append((f"{wnid}_{10026 + 1000 * shard + i}_{wnid}.JPEG", _jpeg(rng, c, k + shard)))
            k += 1
    return _tar_gz(members)


def val_shard() -> bytes:
    rng = np.random.default_rng(200)
    members = []
    for j in range(PER_VAL * len(WNIDS)):
        c = (3 * j + 1) % len(WNIDS)
        members.append((f"ILSVRC2012_val_{j + 1:08d}_{WNIDS[c]}.JPEG", _jpeg(rng, c, j)))
    return _tar_gz(members)


def _random_state(model, seed: int) -> dict:
    """Deterministic weights from numpy: convs/linears N(0, 2/fan_in), norms' scale 1 and shift 0, BatchNorm
    statistics (0, 1), the codebook N(0, 1)."""
    import torch

    rng = np.random.default_rng(seed)
    state = {}
    for key, t in model.state_dict().items():
        shape = tuple(t.shape)
        if key.endswith("num_batches_tracked"):
            continue
        if key.endswith("running_var") or (len(shape) == 1 and key.endswith("weight")):
            arr = np.ones(shape)
        elif len(shape) == 1:
            arr = np.zeros(shape)
        elif key.endswith("codebook"):
            arr = rng.normal(0, 1, size=shape)
        else:  # He scaling: feature magnitudes survive the ReLU/swish stacks (FID stays away from 0)
            arr = rng.normal(0, np.sqrt(2.0 / np.prod(shape[1:])), size=shape)
        state[key] = torch.from_numpy(arr.astype(np.float32))
    return state


def tokenizer_checkpoint() -> bytes:
    from .flaxmsgpack import dumps
    from .vqgan import VQGAN, VQGANConfig, to_flax

    state = _random_state(VQGAN(VQGANConfig(codebook_size=K, **VQGAN_SIZES)), 300)
    return dumps(to_flax(state))


def inception_weights() -> bytes:
    import torch

    from .inception import FIDInceptionV3

    buf = io.BytesIO()
    torch.save(_random_state(FIDInceptionV3(INCEPTION_WIDTH), 400), buf)
    return buf.getvalue()


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write every manifest row's miniature at ``root / mirror_path``; returns the row names."""
    payload = {"imagenet_val": val_shard, "maskgit_tokenizer": tokenizer_checkpoint,
               "fid_inception": inception_weights,
               **{f"imagenet_train_{s}": (lambda s=s: train_shard(s)) for s in range(5)}}
    unknown = sorted(set(manifest) - set(payload))
    if unknown:
        raise ValueError(f"magnets rehearsal: no miniature for manifest rows {unknown}")
    for name, entry in manifest.items():
        dest = Path(root) / entry.mirror_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(payload[name]())
    return list(manifest)
