"""Issue 36.1 per study, at the reader: each study's stage that reads raw downloaded files calls
core.download.verified itself (not only the stage CLI's check), so a tarball with flipped bytes is refused by the
stage function naming the file, before any of its bytes are parsed."""
from __future__ import annotations

import hashlib
import io
import tarfile
from types import SimpleNamespace as NS

import pytest

from icml25.core.cli import Stage
from icml25.core.download import IntegrityError, write_record


class _Run:
    def __getattr__(self, name):
        return lambda *a, **k: None


def _flipped(path, n=4096):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        payload = hashlib.sha256(b"x").digest() * (n // 32)
        info = tarfile.TarInfo("member.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    write_record(path)
    data = bytearray(path.read_bytes())
    for i in range(100, 164):  # 64 bytes flipped, as the issue measured
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _image(**kw):
    base = dict(n_train=10, pca_dim=5, n_clients=2, alpha=1.0, min_size=1, lr_range=(0.1, 0.1),
                epoch_range=(1, 1), seeds=(0,))
    return NS(**{**base, **kw})


CASES = {
    "meta_expert": ("preprocess", ["cifar-10-python.tar.gz"],
                    lambda: NS(dataset="cifar10", data={}, seeds=(0,), profiles=("a",)), ["lt_a_seed0.npz"]),
    "lfss": ("preprocess", ["cifar-10-python.tar.gz"], lambda: NS(data=NS(dataset="cifar10")), ["i.npz", "r.json"]),
    "fedecado": ("preprocess", ["cifar-10-python.tar.gz"], lambda: NS(image=_image(dataset="cifar10")),
                 ["p.npz", "s.json"]),
    "ntk_dfl": ("preprocess", ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                               "t10k-labels-idx1-ubyte.gz"],  # issue 35: preprocess checks it got all four files
                lambda: NS(data=NS(source="mnist"), n_clients=2, alpha=1.0, min_size=1, partition="dirichlet",
                           samples_per_client=None, arms=(), seeds=(0,), n_classes=10), ["s.npz", "s.json"]),
}


@pytest.mark.parametrize("slug", sorted(CASES))
def test_the_studys_reader_refuses_a_flipped_raw_archive(slug, tmp_path):
    import importlib

    stage_name, names, config, outs = CASES[slug]
    stages = importlib.import_module(f"icml25.studies.{slug}.stages")
    inputs = tuple(_flipped(tmp_path / "raw" / n) for n in names)
    stage = Stage(slug=slug, name=stage_name, config=config(), scale="paper", data_source="remote", mirror=None,
                  inputs=inputs, outputs=tuple(tmp_path / "out" / o for o in outs))
    with pytest.raises(IntegrityError) as err:
        getattr(stages, stage_name)(stage, _Run())
    assert str(inputs[0]) in str(err.value) and f"delete {inputs[0]}" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_sard_data_remix_and_cat_iv_readers_refuse_a_changed_packaged_file(tmp_path):
    """The offline files of sard, data_remix and cat_iv are written with a record (core.download.obtain); their
    preprocess re-checks it."""
    from icml25.studies.cat_iv import stages as cat_iv

    raw = [_flipped(tmp_path / "raw" / n) for n in ("card.csv", "mroz.csv")]
    stage = Stage(slug="cat_iv", name="preprocess", scale="smoke", data_source="offline", mirror=None,
                  config=NS(settings=(), n=(), seeds=(), noise_ratio=0.0, real=NS(datasets=("card",), card_rows=None)),
                  inputs=tuple(raw), outputs=(tmp_path / "o/s.npz", tmp_path / "o/r.npz"))
    import icml25.studies.cat_iv.data as D

    orig = D.build_synthetic
    try:
        D.build_synthetic = lambda *a, **k: {"x": __import__("numpy").zeros(1)}
        with pytest.raises(IntegrityError, match="card.csv"):
            cat_iv.preprocess(stage, _Run())
    finally:
        D.build_synthetic = orig
