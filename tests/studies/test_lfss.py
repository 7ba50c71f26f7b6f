"""lfss study: the spec's required tests (stability identities, alignment vs brute force, metrics, the two losses,
the loader, k-means determinism), the verdict functions and the adequacy gate at their boundaries, and the
pieces of the training loop that the identities rest on (old-network snapshot, threshold rule, schedule)."""
from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml25.core.claims import INCONCLUSIVE, REPRODUCED, load_claims, validate_claims
from icml25.core.config import ConfigError, build, load_yaml, merge_scale
from icml25.studies.lfss import (cluster_metrics, hungarian_align, kmeans_cosine, prototype_loss,
                                 sample_stability_loss, stability_scores)
from icml25.studies.lfss.data import (MNIST5K_SHA256, DataError, _mnist5k_bytes, augment, load_mnist5k,
                                      read_cifar_batch, subset)
from icml25.studies.lfss.evaluate import (INADEQUATE, adequacy_gate, brute_force_align, check3_stability_identities,
                                          claim1_unstable_misclustered, claim2_lfss_improves, stability_correctness,
                                          stability_identities)
from icml25.studies.lfss.method import stability_from_labels, unstable_mask
from icml25.studies.lfss.model import LFSSNet
from icml25.studies.lfss.train import lr_at

from icml25.studies.lfss.__main__ import main as stage_cli
from icml25.studies.lfss import data as D
from icml25.studies.lfss.config import Config

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "config" / "studies" / "lfss.yaml"


def _config(scale: str, **over) -> Config:
    return build(Config, merge_scale(load_yaml(YAML), scale, over), "lfss")


# ----------------------------------------------------------------------------------- claim 3: the identities
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_stability_identities_hold(seed):
    res = stability_identities(seed=seed, n=200, k=4)
    assert res == {"permutation_invariant": True, "scale_invariant": True, "self_one": True,
                   "alignment_optimal": True, "flag_count": True}


def test_check3_verdict_holds_and_fails():
    ok = {"a": True, "b": True}
    assert check3_stability_identities([ok, ok]) == (True, {"trials": 2, "failed": {"a": 0, "b": 0},
                                                            "identities": ["a", "b"]})
    holds, stat = check3_stability_identities([ok, {"a": True, "b": False}])
    assert holds is False and stat["failed"] == {"a": 0, "b": 1}
    with pytest.raises(ValueError):
        check3_stability_identities([])


def test_stability_scores_exact_on_hand_features():
    old = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [1.0, -1.0]])
    new = np.array([[2.0, 0.0], [1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
    out = stability_from_labels(old, new, np.array([0, 1, 1, 0]), np.array([1, 0, 0, 1]), k=2, delta=0.5)
    np.testing.assert_allclose(out["s"], [1.0, 1 / math.sqrt(2), -1.0, 1.0], atol=1e-12)
    assert out["new_aligned"].tolist() == [0, 1, 1, 0]  # ids swapped back to the old ones
    # ⌊0.5 * 4⌋ = 2 -> θ = 2nd smallest s = 1/√2 -> only s < θ (sample 2) is flagged
    assert out["pseudo"].tolist() == [0, 1, -1, 0]
    assert out["old"].tolist() == [0, 1, 1, 0]


def test_stability_scores_public_api_runs_kmeans_and_permutation_of_ids_is_irrelevant():
    rng = np.random.default_rng(5)
    centres = np.eye(3) * 5
    old = centres[np.repeat(np.arange(3), 20)] + rng.normal(size=(60, 3)) * 0.3
    new = old + rng.normal(size=(60, 3)) * 0.2
    out = stability_scores(old, new, k=3, delta=0.1, seed=0)
    assert set(out) == {"s", "pseudo", "new_aligned", "old"}
    assert (out["new_aligned"] == out["old"]).all()  # well-separated clusters: aligned labels agree fully
    assert int((out["pseudo"] == -1).sum()) == 5  # ⌊0.1 · 60⌋ − 1, no ties
    # rescaling rows leaves s unchanged; old == new gives s ≡ 1
    out2 = stability_scores(old * 7.0, new * rng.uniform(0.5, 2, size=(60, 1)), k=3)
    np.testing.assert_allclose(out2["s"], out["s"], atol=1e-12)
    np.testing.assert_allclose(stability_scores(old, old, k=3)["s"], 1.0, atol=1e-12)


def test_unstable_mask_threshold_rule():
    s = np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 0.0])
    assert unstable_mask(s, 0.3).tolist() == (s < 0.2).tolist()  # θ = 3rd smallest = 0.2 -> 2 flagged
    assert unstable_mask(s, 0.0).sum() == 0 and unstable_mask(s, 0.05).sum() == 0  # ⌊δN⌋ < 1
    assert unstable_mask(np.ones(10), 0.5).sum() == 0  # all tied: nothing below θ
    with pytest.raises(ValueError):
        unstable_mask(s, 1.5)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(10, 300), delta=st.floats(0.0, 1.0), seed=st.integers(0, 10_000))
def test_flag_count_property(n, delta, seed):
    s = np.random.default_rng(seed).permutation(n).astype(float)  # distinct values
    assert unstable_mask(s, delta).sum() == max(int(np.floor(delta * n)) - 1, 0)


# ---------------------------------------------------------------------------- alignment vs brute force, metrics
@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 5), n=st.integers(1, 60), seed=st.integers(0, 10_000))
def test_hungarian_align_equals_brute_force(k, n, seed):
    rng = np.random.default_rng(seed)
    ref, lab = rng.integers(k, size=n), rng.integers(k, size=n)
    aligned = hungarian_align(ref, lab, k)
    _, best = brute_force_align(ref, lab, k)
    assert int((aligned == ref).sum()) == best
    # a relabelling: same partition as lab
    assert len({(a, b) for a, b in zip(lab, aligned)}) == len(set(lab.tolist()))


def test_hungarian_align_hand_case_and_errors():
    assert hungarian_align([0, 0, 1, 1, 2], [2, 2, 0, 0, 1], 3).tolist() == [0, 0, 1, 1, 2]
    with pytest.raises(ValueError, match="0..1"):
        hungarian_align([0, 1], [0, 2], 2)


def test_cluster_metrics_perfect_permuted_and_hand_value():
    y = np.repeat(np.arange(4), 5)
    perm = np.array([2, 0, 3, 1])
    assert cluster_metrics(y, perm[y]) == pytest.approx((1.0, 1.0, 1.0))
    acc, nmi, ari = cluster_metrics([0, 0, 1, 1], [0, 1, 1, 1])
    assert acc == pytest.approx(0.75)
    assert ari == pytest.approx(0.0)  # hand: index 0 - expected 0 (one pair in both, 1·3/6=0.5...) -> sklearn 0
    assert 0 < nmi < 1


def test_kmeans_deterministic_per_seed_and_recovers_separated_clusters():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(5), 40)
    x = np.eye(8)[y] * 4 + rng.normal(size=(200, 8)) * 0.3
    l1, c1 = kmeans_cosine(x, 5, seed=3)
    l2, c2 = kmeans_cosine(x, 5, seed=3)
    assert np.array_equal(l1, l2) and np.array_equal(c1, c2)
    assert cluster_metrics(y, l1)[0] == 1.0
    np.testing.assert_allclose(np.linalg.norm(c1, axis=1), 1.0)
    hard = rng.normal(size=(300, 6))
    runs = [kmeans_cosine(hard, 6, seed=s)[0] for s in range(4)]
    assert any(not np.array_equal(runs[0], r) for r in runs[1:])  # seeds matter on unstructured data
    with pytest.raises(ValueError):
        kmeans_cosine(x, 0)


def test_kmeans_keeps_the_best_of_n_init_starts_by_cosine_inertia():
    """Issue 32: the released clustering keeps the best of 10 k-means++ starts (least Σ 1 - cos). Brute force:
    the n_init run equals the single run of least inertia among starts seed*n_init + i, i < n_init."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 6))  # unstructured: the starts disagree

    def inertia(lab, cen):
        z = x / np.linalg.norm(x, axis=1, keepdims=True)
        c = cen / np.linalg.norm(cen, axis=1, keepdims=True)
        return float(sum(1 - z[i] @ c[lab[i]] for i in range(len(z))))

    for seed in (0, 3):
        singles = [kmeans_cosine(x, 6, seed=seed * 10 + i) for i in range(10)]
        values = [inertia(*r) for r in singles]
        assert len({round(v, 9) for v in values}) > 1  # the starts differ, so the choice matters
        best_lab, best_cen = kmeans_cosine(x, 6, seed=seed, n_init=10)
        j = int(np.argmin(values))
        assert np.array_equal(best_lab, singles[j][0]) and np.array_equal(best_cen, singles[j][1])
        assert inertia(best_lab, best_cen) == pytest.approx(min(values), rel=1e-12)
        assert inertia(best_lab, best_cen) < max(values) - 1e-6
    assert np.array_equal(kmeans_cosine(x, 6, seed=4, n_init=1)[0], kmeans_cosine(x, 6, seed=4)[0])
    with pytest.raises(ValueError, match="n_init"):
        kmeans_cosine(x, 6, n_init=0)
    d = _config("default")
    assert (d.stability.kmeans_n_init, d.evaluate.kmeans_n_init) == (10, 10)


# --------------------------------------------------------------------------------------------------- losses
def test_sample_stability_loss_hand_value():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    old = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    # rows (t = 0.5): log(1+e^-2); log(1+e^2); log 2 + 2   (positive excluded from the denominator)
    expected = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(2)) + math.log(2) + 2) / 3
    assert float(sample_stability_loss(q, old, t=0.5)) == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx(1.649001, abs=1e-6)
    assert float(sample_stability_loss(3 * q, 0.5 * old)) == pytest.approx(expected, abs=1e-6)  # normalised
    with pytest.raises(ValueError, match="B >= 2"):
        sample_stability_loss(q[:1], old[:1])


def test_sample_stability_loss_gradient_only_to_q():
    q = torch.randn(6, 4, requires_grad=True)
    old = torch.randn(6, 4, requires_grad=True)
    sample_stability_loss(q, old).backward()
    assert q.grad.abs().sum() > 0 and old.grad is None


def test_prototype_loss_hand_value_order_invariance_ignores_unstable_and_gradients():
    e = torch.eye(3)
    # two singleton clusters with q = k = e0, e1: each row loss = log(e^2 + 2) - 2
    val = prototype_loss(e[:2], e[:2], torch.tensor([0, 1]), n_clusters=3)
    assert float(val) == pytest.approx(math.log(math.exp(2) + 2) - 2, abs=1e-6)

    g = torch.Generator().manual_seed(0)
    q = torch.randn(12, 5, generator=g, requires_grad=True)
    k = torch.randn(12, 5, generator=g, requires_grad=True)
    pseudo = torch.tensor([0, 1, 2, -1, 0, 1, 2, 3, -1, 3, 0, 1])
    base = prototype_loss(q, k, pseudo, 4)
    perm = torch.randperm(12, generator=g)
    assert float(prototype_loss(q[perm], k[perm], pseudo[perm], 4).detach()) == pytest.approx(float(base.detach()), abs=1e-6)
    # the -1 samples are ignored: changing them or dropping them changes nothing
    q2, k2 = q.detach().clone(), k.detach().clone()
    q2[pseudo == -1] = 100.0
    k2[pseudo == -1] = -7.0
    assert float(prototype_loss(q2, k2, pseudo, 4)) == pytest.approx(float(base.detach()), abs=1e-6)
    keep = pseudo >= 0
    assert float(prototype_loss(q[keep], k[keep], pseudo[keep], 4)) == pytest.approx(float(base.detach()), abs=1e-6)
    base.backward()
    assert q.grad.abs().sum() > 0 and k.grad.abs().sum() > 0
    assert q.grad[pseudo == -1].abs().sum() == 0


def test_prototype_loss_zero_with_fewer_than_two_clusters():
    q = torch.randn(4, 3, requires_grad=True)
    k = torch.randn(4, 3)
    out = prototype_loss(q, k, torch.tensor([2, 2, -1, 2]), 3)
    assert float(out) == 0.0
    out.backward()  # still differentiable
    assert float(prototype_loss(q, k, torch.tensor([-1, -1, -1, -1]), 3)) == 0.0
    with pytest.raises(ValueError):
        prototype_loss(q, k, torch.tensor([0, 1, 3, 0]), 3)


# ------------------------------------------------------------------------------------------------ the data
def test_mnist5k_loader_hash_shape_and_classes():
    x, y = load_mnist5k()
    assert x.shape == (5000, 1, 28, 28) and x.dtype == np.float32 and y.dtype == np.int64
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert np.bincount(y).tolist() == [500] * 10
    assert (np.diff(y) >= 0).all() and y[0] == 0 and y[-1] == 9  # rows are sorted by digit
    assert float(x.sum()) == pytest.approx(514772.97, abs=0.05) and float(x[0].sum()) == pytest.approx(121.941, abs=1e-3)


def test_mnist5k_loader_rejects_tampered_bytes():
    raw = _mnist5k_bytes()
    bad = raw[:-1] + bytes([raw[-1] ^ 1])
    with pytest.raises(DataError, match="mnist_5k.csv.gz: sha256 [0-9a-f]{64} differs from the pinned 846f6cad"):
        load_mnist5k(bad)
    assert MNIST5K_SHA256.startswith("846f6cad")


def test_mnist5k_loader_is_core_datasets_scaled():
    from icml25.core.datasets import load_mnist5k as core_load

    x, y = load_mnist5k()
    X, yc = core_load()
    assert np.array_equal(x.reshape(5000, 784) * np.float32(255.0), X.astype(np.float32))
    assert np.array_equal(y, yc) and x.flags.writeable  # a copy: training code may not touch core's cache
    raw_x, raw_y = load_mnist5k(_mnist5k_bytes())  # the explicit-bytes path parses to the same arrays
    assert np.array_equal(raw_x, x) and np.array_equal(raw_y, y)


def test_subset_stratified_and_seeded():
    y = np.repeat(np.arange(10), 500)
    a, b = subset(y, 0, per_class=250), subset(y, 0, per_class=250)
    assert np.array_equal(a, b) and a.size == 2500 and np.bincount(y[a]).tolist() == [250] * 10
    assert not np.array_equal(a, subset(y, 1, per_class=250))
    assert subset(y, 0, n_images=512).size == 512
    with pytest.raises(DataError, match="per_class=501"):
        subset(y, 0, per_class=501)


def test_augment_deterministic_and_each_part_acts():
    x = torch.rand(16, 1, 28, 28)
    a = augment(x, torch.Generator().manual_seed(1))
    b = augment(x, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and a.shape == x.shape
    ident = dict(crop_scale=(1.0, 1.0), rotation_deg=0.0, erase_p=0.0, noise_sigma=0.0)
    noisy = augment(torch.zeros(64, 1, 28, 28), torch.Generator().manual_seed(2), **{**ident, "noise_sigma": 0.05})
    assert float(noisy.std()) == pytest.approx(0.05, rel=0.05)
    erased = augment(torch.ones(64, 1, 28, 28), torch.Generator().manual_seed(3),
                     **{**ident, "erase_p": 1.0, "crop_scale": (1.0, 1.0)})
    frac0 = (erased < 0.5).float().mean(dim=(1, 2, 3))
    assert (frac0 > 0.01).all()  # every image lost a rectangle (≥ 2 % of its area, minus resampling borders)


def test_cifar_reader_restricted(tmp_path):
    good = tmp_path / "data_batch_1"
    with good.open("wb") as fh:
        pickle.dump({b"data": np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072), b"labels": [3, 7]}, fh)
    x, y = read_cifar_batch(good)
    assert x.shape == (2, 3, 32, 32) and y.tolist() == [3, 7] and int(x[1, 0, 0, 0]) == 3072 % 256

    class Evil:
        def __reduce__(self):
            import os
            return (os.system, ("true",))

    evil = tmp_path / "evil"
    evil.write_bytes(pickle.dumps({b"data": Evil()}))
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        read_cifar_batch(evil)


def _stl10_archive(path, n_train=2, n_test=1, n_unl=1):
    """A tiny stl10_binary.tar.gz in the publisher's format (channels stored column-major, labels 1..10)."""
    import io
    import tarfile

    rng = np.random.default_rng(0)
    imgs = {s: rng.integers(0, 256, (n, 3, 96, 96), dtype=np.uint8)
            for s, n in (("train", n_train), ("test", n_test), ("unlabeled", n_unl))}
    labels = {"train": np.array([1, 10][:n_train], np.uint8), "test": np.array([4][:n_test], np.uint8)}
    with tarfile.open(path, "w:gz") as tar:
        def add(name, data):
            info = tarfile.TarInfo(f"stl10_binary/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for s, x in imgs.items():
            add(f"{s}_X.bin", x.transpose(0, 1, 3, 2).tobytes())  # column-major per channel, as published
        for s, y in labels.items():
            add(f"{s}_y.bin", y.tobytes())
    return imgs, labels


def test_stl10_reader(tmp_path):
    from icml25.studies.lfss.data import read_raw, read_stl10_archive, read_stl10_images

    imgs, labels = _stl10_archive(tmp_path / "stl10_binary.tar.gz")
    x, y = read_raw(tmp_path / "stl10_binary.tar.gz", "stl10")
    assert x.dtype == np.uint8 and x.shape == (3, 3, 96, 96)
    assert np.array_equal(x, np.concatenate([imgs["train"], imgs["test"]])) and y.tolist() == [0, 9, 3]
    xa, ya = read_stl10_archive(tmp_path / "stl10_binary.tar.gz", ("unlabeled",))
    assert np.array_equal(xa, imgs["unlabeled"]) and ya.tolist() == [-1]
    # one pixel by hand: image 0, channel 2, row 5, column 7 sits at byte 2*9216 + 7*96 + 5 (column-major)
    raw = imgs["train"][0].transpose(0, 2, 1).tobytes()
    assert read_stl10_images(raw)[0, 2, 5, 7] == raw[2 * 9216 + 7 * 96 + 5]
    with pytest.raises(DataError, match="not a whole number of 3x96x96 images"):
        read_stl10_images(raw[:-1], "x.bin")
    with pytest.raises(DataError, match="choose from"):
        read_stl10_archive(tmp_path / "stl10_binary.tar.gz", ("extra",))


def test_manifest_rows_and_stl10_download_through_a_mirror(tmp_path, monkeypatch):
    """Every remote data set has a manifest row named like the download stage's file; the plain-http STL-10 row
    is verified by its publisher md5 and its sha256 pinned (here on a tiny archive served from a local mirror)."""
    import hashlib

    from icml25.core.download import read_manifest
    from icml25.studies.lfss import stages
    from icml25.studies.lfss.config import N_CLASSES, RAW_FILES
    from icml25.studies.lfss.data import IMAGENET_CLASSES, read_raw

    rows = read_manifest(stages.MANIFEST)
    assert set(rows) == {d for d in N_CLASSES if d != "mnist5k" and d not in IMAGENET_CLASSES}
    assert all(RAW_FILES[name] == row.url.rsplit("/", 1)[1] for name, row in rows.items())
    assert (rows["stl10"].sha256, rows["stl10"].md5) == ("", "91f7769df0f17e558f3565bffb0c7dfb")
    assert (rows["tiny_imagenet"].sha256, rows["tiny_imagenet"].md5) == ("", "90528d7ca1a48142e341f4ef8d21d0de")

    mirror = tmp_path / "mirror"
    archive = mirror / rows["stl10"].mirror_path
    archive.parent.mkdir(parents=True)
    imgs, _ = _stl10_archive(archive)
    data = archive.read_bytes()
    manifest = tmp_path / "manifest.csv"
    text = stages.MANIFEST.read_text().replace(rows["stl10"].md5, hashlib.md5(data).hexdigest())
    manifest.write_text(text)
    monkeypatch.setattr(stages, "MANIFEST", manifest)
    yaml = tmp_path / "lfss.yaml"
    yaml.write_text(YAML.read_text().replace("data: {dataset: cifar10,", "data: {dataset: stl10,"))
    out = tmp_path / "raw" / "stl10_binary.tar.gz"
    stage_cli(["download", "--scale", "paper", "--no-track", "--config", str(yaml), "--data-source", "remote",
               "--mirror", str(mirror), "--out", str(out)])
    assert out.read_bytes() == data
    assert hashlib.sha256(data).hexdigest() in out.with_name(out.name + ".sha256").read_text()
    x, y = read_raw(out, "stl10")
    assert np.array_equal(x[:2], imgs["train"]) and y.tolist() == [0, 9, 3]


def _jpeg(rgb, mode="RGB"):
    import io

    from PIL import Image

    buf = io.BytesIO()
    img = Image.new(mode, (64, 64), rgb if mode == "RGB" else rgb[0])
    img.save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def test_tiny_imagenet_reader(tmp_path):
    import zipfile

    from icml25.studies.lfss.data import read_raw, read_tiny_imagenet_zip

    path = tmp_path / "tiny-imagenet-200.zip"
    r = "tiny-imagenet-200"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{r}/wnids.txt", "n09999999\nn01443537\n")  # not sorted: labels follow sorted wnids
        zf.writestr(f"{r}/train/n01443537/images/n01443537_0.JPEG", _jpeg((250, 10, 10)))
        zf.writestr(f"{r}/train/n01443537/n01443537_boxes.txt", "n01443537_0.JPEG\t0\t0\t63\t63\n")
        zf.writestr(f"{r}/train/n09999999/images/n09999999_0.JPEG", _jpeg((10, 10, 250)))
        zf.writestr(f"{r}/train/n09999999/images/n09999999_1.JPEG", _jpeg((128, 0, 0), mode="L"))  # grey
        zf.writestr(f"{r}/val/images/val_0.JPEG", _jpeg((10, 250, 10)))
        zf.writestr(f"{r}/val/val_annotations.txt", "val_0.JPEG\tn09999999\t0\t0\t63\t63\n")
    x, y = read_raw(path, "tiny_imagenet")
    assert x.shape == (3, 3, 64, 64) and x.dtype == np.uint8 and y.tolist() == [0, 1, 1]
    means = x.reshape(3, 3, -1).mean(axis=2)
    assert np.allclose(means[0], [250, 10, 10], atol=4) and np.allclose(means[1], [10, 10, 250], atol=4)
    assert np.allclose(means[2], 128, atol=4)  # grey expanded to RGB
    xv, yv = read_tiny_imagenet_zip(path, "val")
    assert yv.tolist() == [1] and np.allclose(xv.reshape(3, -1).mean(axis=1), [10, 250, 10], atol=4)
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as zf:
        zf.writestr(f"{r}/wnids.txt", "n01443537\n")
        zf.writestr(f"{r}/train/n01443537/images/a.JPEG", b"not a jpeg")
    with pytest.raises(DataError, match="bad.zip:tiny-imagenet-200/train/n01443537/images/a.JPEG: not a readable"):
        read_tiny_imagenet_zip(tmp_path / "bad.zip")


def test_imagenet_subset_manual_placement(tmp_path):
    from icml25.studies.lfss.data import IMAGENET10, read_imagenet_folders, read_raw

    root = tmp_path / "train"
    with pytest.raises(DataError, match="is not a directory. ImageNet has no public download"):
        read_imagenet_folders(root, "imagenet10")
    for i, w in enumerate(IMAGENET10[:9]):
        (root / w).mkdir(parents=True)
        (root / w / f"{w}_1.JPEG").write_bytes(_jpeg((20 * i, 0, 0)))
    with pytest.raises(DataError, match=f"needs the class folders {IMAGENET10[9]}/ \\(1 of 10 missing\\)"):
        read_imagenet_folders(root, "imagenet10")
    (root / IMAGENET10[9]).mkdir()
    with pytest.raises(DataError, match=f"no images .* for class {IMAGENET10[9]}"):
        read_imagenet_folders(root, "imagenet10")
    (root / IMAGENET10[9] / "b.JPEG").write_bytes(_jpeg((180, 0, 0)))
    x, y = read_imagenet_folders(root, "imagenet10", size=32)
    assert x.shape == (10, 3, 32, 32) and y.tolist() == list(range(10))
    assert np.allclose(x[:, 0].reshape(10, -1).mean(axis=1), [20 * i for i in range(10)], atol=4)
    # the download stage writes them as an npz; preprocess reads it back through read_raw
    np.savez(tmp_path / "imagenet10.npz", X=x, y=y)
    xr, yr = read_raw(tmp_path / "imagenet10.npz", "imagenet10")
    assert np.array_equal(xr, x) and np.array_equal(yr, y)
    yaml = tmp_path / "lfss.yaml"
    yaml.write_text(YAML.read_text().replace("data: {dataset: cifar10,", "data: {dataset: imagenet10,"))
    with pytest.raises(SystemExit, match="imagenet10 has no public download; place the ILSVRC2012"):
        stage_cli(["download", "--scale", "paper", "--no-track", "--config", str(yaml), "--out",
                   str(tmp_path / "out.npz")])
    yaml.write_text(YAML.read_text().replace("data: {dataset: cifar10,", f"data: {{dataset: imagenet10, "
                                                                          f"imagenet_root: '{tmp_path}',"))
    with pytest.raises(SystemExit, match=f"{tmp_path}: imagenet10 needs the class folders {IMAGENET10[0]}/"):
        stage_cli(["download", "--scale", "paper", "--no-track", "--config", str(yaml), "--out",
                   str(tmp_path / "out.npz")])
    assert not (tmp_path / "out.npz").exists()


# ------------------------------------------------------------------------ layout check of placed folders (issue 35)
def _imagenet_tree(root: Path, per_class: int = 2, wnids=None) -> Path:
    """A hand-made ImageNet-10 tree: ``per_class`` JPEGs of distinct colours per class folder, and a hidden file."""
    for i, w in enumerate(wnids or D.IMAGENET10):
        (root / w).mkdir(parents=True)
        for k in range(per_class):
            (root / w / f"{w}_{k}.JPEG").write_bytes(_jpeg((20 * i, 10 * k, 0)))
    (root / (wnids or D.IMAGENET10)[0] / ".DS_Store").write_bytes(b"\0junk")  # hidden files are ignored
    return root


def test_imagenet_layout_check_reports_a_good_tree(tmp_path, monkeypatch):
    root = _imagenet_tree(tmp_path / "train")
    rep = D.check_imagenet_layout(root, "imagenet10", counts="any", sample=2)
    assert rep["classes"] == {w: 2 for w in D.IMAGENET10} and rep["total"] == 20 and len(rep["decoded"]) == 20
    one = D.check_imagenet_layout(root, "imagenet10", counts="any", sample=1)
    assert one["decoded"] == [str(root / w / f"{w}_0.JPEG") for w in D.IMAGENET10]  # the first file of each class
    assert D._sample(list(range(10)), 3) == [0, 4, 9] and D._sample([1, 2], 5) == [1, 2]
    # the published counts: 732-1300 a class; a 2-image class is named with its count
    with pytest.raises(DataError, match=rf"train/{D.IMAGENET10[0]}: 2 images, an ILSVRC2012 training class has "
                                        r"732-1300 \(10 class folder\(s\) out of range"):
        D.check_imagenet_layout(root, "imagenet10")
    # the same rule with hand-set expectations: within range, then the subset's total against the published one
    monkeypatch.setattr(D, "ILSVRC_TRAIN_PER_CLASS", (1, 5))
    monkeypatch.setattr(D, "PUBLISHED_TOTALS", {**D.PUBLISHED_TOTALS, "imagenet10": 20})
    assert D.check_imagenet_layout(root, "imagenet10")["total"] == 20
    monkeypatch.setattr(D, "PUBLISHED_TOTALS", {**D.PUBLISHED_TOTALS, "imagenet10": 21})
    with pytest.raises(DataError, match="imagenet10 has 20 training images, published: 21"):
        D.check_imagenet_layout(root, "imagenet10")
    assert D.PUBLISHED_TOTALS == {"imagenet10": 21, "imagenet_dogs": 19_500, "imagenet1k": 1_281_167}


def _bad_parent(root):
    (root / "train").mkdir()
    for w in D.IMAGENET10:
        (root / w).rename(root / "train" / w)


@pytest.mark.parametrize("edit, message", [
    (lambda r: __import__("shutil").rmtree(r), "data.imagenet_root '.*/train' is not a directory"),
    (_bad_parent, "holds train/<wnid>/ folders: set data.imagenet_root to .*/train/train"),
    (lambda r: __import__("shutil").rmtree(r / D.IMAGENET10[9]), f"needs the class folders {D.IMAGENET10[9]}/"),
    (lambda r: (r / D.IMAGENET10[2] / D.IMAGENET10[2]).mkdir(),
     f"{D.IMAGENET10[2]}/{D.IMAGENET10[2]}: a folder inside class folder {D.IMAGENET10[2]}/"),
    (lambda r: (r / D.IMAGENET10[3] / "labels.txt").write_text("x"),
     f"{D.IMAGENET10[3]}/labels.txt: not an image file"),
    (lambda r: [p.unlink() for p in (r / D.IMAGENET10[4]).iterdir()], f"no images for class {D.IMAGENET10[4]}"),
    (lambda r: (r / D.IMAGENET10[5] / f"{D.IMAGENET10[5]}_1.JPEG").write_bytes(b"<html>not found</html>"),
     f"{D.IMAGENET10[5]}_1.JPEG: not a readable image"),
])
def test_imagenet_layout_check_names_each_kind_of_bad_tree(tmp_path, edit, message):
    root = _imagenet_tree(tmp_path / "train")
    edit(root)
    with pytest.raises(DataError, match=message):
        D.check_imagenet_layout(root, "imagenet10", counts="any", sample=2)


def test_imagenet1k_layout_needs_the_1000_folders_and_counts_mode_is_checked(tmp_path):
    root = _imagenet_tree(tmp_path / "train", 1, wnids=["n01440764", "n01443537", "n01484850"])
    with pytest.raises(DataError, match="imagenet1k needs the 1000 class folders n########/, found 3"):
        D.check_imagenet_layout(root, "imagenet1k", counts="any")
    with pytest.raises(DataError, match="layout.counts must be published or any, got 'some'"):
        D.check_imagenet_layout(root, "imagenet1k", counts="some")


def test_tiny_imagenet_layout_check(tmp_path):
    import zipfile

    from icml25.studies.lfss import rehearsal as R

    good = tmp_path / "tiny.zip"
    good.write_bytes(R.tiny_imagenet_zip())  # 200 wnids, one training image each, 10 validation images
    rep = D.check_tiny_imagenet_zip(good, counts="any", sample=2)
    assert len(rep["classes"]) == 200 and rep["total"] == 200 and sum(rep["val"].values()) == R.TINY_VAL
    assert len(rep["decoded"]) == 200
    with pytest.raises(DataError, match="tiny.zip:tiny-imagenet-200/train/n01440000/images/: 1 images, expected 500"):
        D.check_tiny_imagenet_zip(good)

    def rewrite(name, change):
        out = tmp_path / name
        with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w") as dst:
            for info in src.infolist():
                data = change(info.filename, src.read(info.filename))
                if data is not None:
                    dst.writestr(info.filename, data)
        return out

    missing_val = rewrite("a.zip", lambda n, b: None if n.endswith("val/images/val_3.JPEG") else b)
    with pytest.raises(DataError, match="a.zip:tiny-imagenet-200/val/val_annotations.txt:4: expected 'file<TAB>wnid'"):
        D.check_tiny_imagenet_zip(missing_val, counts="any")
    dup = rewrite("b.zip", lambda n, b: b + b"n01440000\n" if n.endswith("wnids.txt") else b)
    with pytest.raises(DataError, match="wnids.txt: 201 wnids \\(200 distinct\\), expected 200 distinct"):
        D.check_tiny_imagenet_zip(dup, counts="any")
    png = rewrite("c.zip", lambda n, b: b)
    with zipfile.ZipFile(png, "a") as zf:
        zf.writestr("tiny-imagenet-200/train/n01440000/images/x.png", b"")
    with pytest.raises(DataError, match="train/n01440000/images/x.png: not a JPEG"):
        D.check_tiny_imagenet_zip(png, counts="any")
    with pytest.raises(DataError, match="wnids.txt' missing \\(is this tiny-imagenet-200.zip"):
        D.check_tiny_imagenet_zip(rewrite("d.zip", lambda n, b: None if n.endswith("wnids.txt") else b))


def test_layout_stage_writes_its_report_or_stops_naming_the_path(tmp_path):
    root = _imagenet_tree(tmp_path / "train")
    text = YAML.read_text().replace("data: {dataset: cifar10,", f"data: {{dataset: imagenet10, "
                                                                f"imagenet_root: '{root}',")
    yaml = tmp_path / "lfss.yaml"
    yaml.write_text(text.replace("counts: published", "counts: any"))
    out = tmp_path / "raw" / "layout.json"
    assert stage_cli(["layout", "--scale", "paper", "--no-track", "--config", str(yaml), "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["total"] == 20 and rep["counts"] == "any" and rep["classes"][D.IMAGENET10[9]] == 2
    yaml.write_text(text)  # the published counts: the 2-image classes stop the stage, nothing is written
    out.unlink()
    with pytest.raises(SystemExit, match=f"lfss layout: lfss: {root}/{D.IMAGENET10[0]}: 2 images"):
        stage_cli(["layout", "--scale", "paper", "--no-track", "--config", str(yaml), "--out", str(out)])
    assert not out.exists()


def test_branches_config_merges_validates_and_names_bad_entries():
    from icml25.studies.lfss.config import branch_config

    rehearsal = load_yaml(ROOT / "config" / "rehearsal" / "lfss.yaml")
    cfg = _config("paper", **rehearsal)
    b = branch_config(cfg.model_dump(mode="json"), "imagenet10")
    assert (b["data"]["dataset"], b["data"]["n_classes"], b["model"]["backbone"], b["train"]["batch_size"]) == (
        "imagenet10", 10, "resnet34", 8)
    assert b["branches"] == {} and b["model"]["width"] == cfg.model.width and b["seeds"] == [2000, 2001, 2002]
    assert b["data"]["imagenet_root"] == "results/rehearsal/mirror/manual/lfss" and b["layout"]["counts"] == "any"
    for bad, message in [({"models": {}}, "branches.models: a branch name is"),
                         ({"x": {"data": {"dataset": "imagenet_dogs"}}}, "imagenet_dogs has 15 classes, got 10"),
                         ({"x": {"branches": {}}}, "a branch cannot hold branches")]:
        with pytest.raises(ConfigError, match=message):
            _config("paper", branches=bad)
    with pytest.raises(ValueError, match="no branch 'y'"):
        branch_config(cfg.model_dump(mode="json"), "y")


# ----------------------------------------------------------------------------------------- the training loop
def test_old_network_snapshot_is_frozen_under_train_mode_forwards():
    torch.manual_seed(0)
    net = LFSSNet((4, 8), hidden=16, dim=8).train()
    x = torch.rand(32, 1, 28, 28)
    net.refresh_old()
    before = net.features(x, "target")
    for _ in range(3):
        net.old_embed(torch.rand(32, 1, 28, 28) * 3)  # train-mode BN: batch stats, no buffer update
        net.target(torch.rand(32, 1, 28, 28) * 3)  # the target's own running stats move
    assert torch.equal(net.features(x, "old"), before)
    assert not torch.equal(net.features(x, "target"), before)


def test_ema_update_exact():
    net = LFSSNet((2, 4), hidden=8, dim=4)
    pq = next(net.encoder_q.parameters())
    with torch.no_grad():
        pq.fill_(1.0)
        next(net.encoder_k.parameters()).fill_(0.0)
    net.ema_update(0.9)
    assert torch.allclose(next(net.encoder_k.parameters()), torch.full_like(pq, 0.1))


def test_lr_schedule_is_the_released_one_at_paper_scale():
    """Issue 32: the released cosine (LZX-001/LFSS models/util.py cosine_annealing_LR, learning_eta_min 0.5)
    decays to 0.5 x lr over `epochs`, not to 0. Paper recipe: lr 0.05, 1000 epochs, warm-up 10, 195 steps per
    epoch (50,000 CIFAR-10 images, batch 256, drop_last). The released epoch counter at global step k (0-based) is
    e = (k + 1)/spe + 1, so e = 900 exactly at the last step of the 899th epoch (k = 899*spe - 1)."""
    spe, epochs, warm, base = 195, 1000, 10, 0.05
    k = 899 * spe - 1
    expected = 0.025 + 0.5 * (0.05 - 0.025) * (1 + math.cos(math.pi * (900 - 10) / 1000))  # written out
    assert expected == pytest.approx(0.02574, abs=1e-5)  # the issue's 0.0257 (the old schedule gave 0.0013)
    assert lr_at(k, spe, epochs, warm, base) == pytest.approx(expected, rel=1e-12)
    # first step of training epoch 900 (e = 900 + 1/spe)
    e = 900 + 1 / spe
    assert lr_at(899 * spe, spe, epochs, warm, base) == pytest.approx(
        0.025 + 0.0125 * (1 + math.cos(math.pi * (e - 10) / 1000)), rel=1e-12)
    last = lr_at(epochs * spe - 1, spe, epochs, warm, base)  # e = 1001
    assert last == pytest.approx(0.025 + 0.0125 * (1 + math.cos(math.pi * 991 / 1000)), rel=1e-12)
    assert 0.025 < last < 0.02501  # ends just above 0.5 x lr
    # warm-up: lr = base * e / warm while e < warm; the first step has e = 1 + 1/spe
    assert lr_at(0, spe, epochs, warm, base) == pytest.approx(0.05 * (1 + 1 / spe) / 10, rel=1e-12)
    assert lr_at(9 * spe - 2, spe, epochs, warm, base) == pytest.approx(0.05 * (10 - 1 / spe) / 10, rel=1e-12)
    # e = 10 exactly (k = 9*spe - 1): cosine branch at its top, lr = base
    assert lr_at(9 * spe - 1, spe, epochs, warm, base) == pytest.approx(0.05, rel=1e-12)
    # min_ratio = 0 gives the plain released cosine to 0 at e = warm + epochs
    assert lr_at(9 * spe - 1 + epochs * spe, spe, epochs, warm, base, min_ratio=0.0) == pytest.approx(0.0, abs=1e-15)
    # default scale: 15 steps/epoch, 15 epochs, warm-up 2
    lrs = [lr_at(k, 15, 15, 2, 0.05) for k in range(225)]
    assert min(lrs[15:]) > 0.025 and lrs[-1] == pytest.approx(0.025 + 0.0125 * (1 + math.cos(math.pi * 14 / 15)))


def test_weight_decay_applies_to_biases_and_batchnorm_as_released():
    """Issue 32: the released optimiser (collect_params with exclude_bias_and_bn off) decays every parameter."""
    from icml25.studies.lfss.train import _param_groups

    net = LFSSNet((2, 4), hidden=8, dim=4)
    trained = {id(p) for m in (net.encoder_q, net.projector_q, net.predictor) for p in m.parameters()}
    n_bn_bias = sum(p.numel() for m in (net.encoder_q, net.projector_q, net.predictor) for p in m.parameters()
                    if p.ndim == 1)
    assert n_bn_bias > 0
    for flag, wd_1d in ((True, 5e-4), (False, 0.0)):
        groups = _param_groups(net, 5e-4, flag)
        assert {id(p) for g in groups for p in g["params"]} == trained  # each trained parameter once
        assert sum(len(g["params"]) for g in groups) == len(trained)
        for g in groups:
            for p in g["params"]:
                assert g["weight_decay"] == (5e-4 if p.ndim > 1 else wd_1d)
    # one SGD step on a zero gradient shrinks a BatchNorm weight of 1 by lr * wd exactly (no momentum yet)
    bn = next(m for m in net.encoder_q.modules() if isinstance(m, torch.nn.BatchNorm2d))
    opt = torch.optim.SGD(_param_groups(net, 5e-4, True), lr=0.1, momentum=0.9)
    for p in (q for g in opt.param_groups for q in g["params"]):
        p.grad = torch.zeros_like(p)
    before = bn.weight.detach().clone()
    opt.step()
    torch.testing.assert_close(bn.weight.detach(), before * (1 - 0.1 * 5e-4))
    assert _config("default").train.wd_bias_bn is True and _config("paper").train.lr_min_ratio == 0.5


def test_config_scales_and_bad_keys():
    d = _config("default")
    assert (d.data.per_class, d.train.epochs, d.train.eta, d.train.batch_size, d.model.dim) == (100, 15, 6, 64, 64)
    assert d.stability.snapshot == "previous_boundary" and d.seeds == (2000, 2001, 2002) and d.arms == ("base", "lfss")
    assert (d.adequacy.base_ratio, d.adequacy.max_drop, d.claims.c2_min_d_acc) == (0.9, 0.05, 0.01)
    smoke, paper = _config("smoke"), _config("paper")
    assert (smoke.data.n_images, smoke.train.epochs, smoke.train.eta) == (512, 3, 1)
    assert (paper.data.dataset, paper.model.backbone, paper.seeds_per_job) == ("cifar10", "resnet18", 1)
    with pytest.raises(ConfigError, match=r"lfss\.train\.ema: Input should be less than 1"):
        _config("default", train={"ema": 1.0})
    with pytest.raises(ConfigError, match="claim_epochs_back: epochs E - 10 must be >= 1"):
        _config("default", train={"epochs": 10, "eta": 5})
    with pytest.raises(ConfigError, match=r"lfss\.augment\.flip: unknown key"):
        _config("default", augment={"flip": True})
    with pytest.raises(ConfigError, match="n_classes: tiny_imagenet has 200 classes, got 10"):
        _config("paper", data={"dataset": "tiny_imagenet"})
    assert _config("paper", data={"dataset": "imagenet_dogs", "n_classes": 15}).data.image_size == 96


# ------------------------------------------------------------------------------------ claim verdicts, the gate
@pytest.mark.parametrize("auroc,gap,expected", [
    ([0.60, 0.59, 0.58], [0.06, 0.05, 0.04], (True, False)),     # mean AUROC 0.59, mean gap 0.05: reproduced
    ([0.58, 0.58, 0.58], [0.05, 0.05, 0.05], (True, False)),     # both exactly at the thresholds
    ([0.70, 0.70, 0.50], [0.10, 0.10, 0.10], (False, False)),    # one seed not > 0.5: inconclusive
    ([0.579, 0.58, 0.58], [0.05, 0.05, 0.05], (False, False)),   # mean AUROC just below 0.58
    ([0.60, 0.60, 0.60], [0.05, 0.05, 0.0499], (False, False)),  # mean gap just below 5 pts
    ([0.50, 0.50, 0.50], [0.10, 0.10, 0.10], (False, True)),     # mean AUROC ≤ 0.5: not reproduced
    ([0.70, 0.70, 0.70], [0.0, 0.0, 0.0], (False, True)),        # mean gap ≤ 0: not reproduced
    ([0.52, 0.51, 0.53], [0.01, 0.02, 0.01], (False, False)),    # weak but positive: inconclusive
])
def test_claim1_verdict_boundaries(auroc, gap, expected):
    rep, nrep, stat = claim1_unstable_misclustered(auroc, gap)
    assert (rep, nrep) == expected
    assert stat["auroc_mean"] == pytest.approx(np.mean(auroc)) and stat["gap_mean"] == pytest.approx(np.mean(gap))


def test_claim1_inconclusive_when_gate_fails_or_nan():
    rep, nrep, stat = claim1_unstable_misclustered([0.9] * 3, [0.3] * 3, gate=False)
    assert (rep, nrep, stat["note"]) == (False, False, INADEQUATE)
    rep, nrep, _ = claim1_unstable_misclustered([0.9, float("nan"), 0.9], [0.3] * 3)
    assert (rep, nrep) == (False, False)


@pytest.mark.parametrize("ab,al,nb,nl,expected", [
    ([0.40, 0.40, 0.40], [0.42, 0.41, 0.39], [0.3] * 3, [0.31] * 3, (True, False)),  # 2 of 3 seeds up, NMI up
    ([0.40, 0.40, 0.40], [0.42, 0.39, 0.39], [0.3] * 3, [0.31] * 3, (False, False)),  # only 1 seed positive
    ([0.40, 0.40, 0.40], [0.42, 0.41, 0.39], [0.3] * 3, [0.30] * 3, (False, False)),  # NMI difference 0
    ([0.40, 0.40, 0.40], [0.39, 0.39, 0.39], [0.3] * 3, [0.2] * 3, (False, False)),   # −1 pt exactly: not < −1
    ([0.40, 0.40, 0.40], [0.38, 0.39, 0.399], [0.3] * 3, [0.4] * 3, (False, True)),   # mean −1.03 pts
    ([0.40, 0.40, 0.40], [0.35, 0.45, 0.36], [0.3] * 3, [0.4] * 3, (False, True)),    # mean −1.33 pts
    ([0.319, 0.319, 0.40], [0.319 + 5.6e-17, 0.3190000000000001, 0.45], [0.3] * 3, [0.31] * 3, (False, False)),
    # two "positive" seeds that are float noise on equal ACCs (the default run's seed 1): one real positive only
])
def test_claim2_verdict_boundaries(ab, al, nb, nl, expected):
    rep, nrep, stat = claim2_lfss_improves(ab, al, nb, nl)
    d = np.mean(np.subtract(al, ab))
    if expected == (False, True):
        assert d < -0.01
    assert (rep, nrep) == expected, stat


def test_claim2_gate_and_shapes():
    rep, nrep, stat = claim2_lfss_improves([0.3] * 3, [0.5] * 3, [0.3] * 3, [0.5] * 3, gate=False)
    assert (rep, nrep, stat["note"]) == (False, False, INADEQUATE)
    with pytest.raises(ValueError, match="paired"):
        claim2_lfss_improves([0.3] * 3, [0.5] * 2, [0.3] * 3, [0.5] * 3)


def test_adequacy_gate_boundaries():
    curve = [[0.30, 0.45, 0.50], [0.30, 0.48, 0.50], [0.2, 0.5, 0.5]]
    ok, stat = adequacy_gate([0.45, 0.45, 0.45], curve, 0.5)  # 0.45 = 0.9 x 0.5: passes
    assert ok and stat["threshold"] == pytest.approx(0.45) and stat["max_drop"] == pytest.approx(0.0)
    ok, stat = adequacy_gate([0.449, 0.449, 0.449], curve, 0.5)
    assert not ok and not stat["level_ok"] and stat["drift_ok"]
    drop = [[0.30, 0.55, 0.50], [0.30, 0.551, 0.50], [0.5, 0.5, 0.5]]  # seed 2 drops 5.1 pts
    ok, stat = adequacy_gate([0.5] * 3, drop, 0.5)
    assert not ok and stat["level_ok"] and not stat["drift_ok"] and stat["max_drop"] == pytest.approx(0.051)
    ok, _ = adequacy_gate([0.5] * 3, [[0.30, 0.55, 0.50]] * 3, [0.5, 0.5, 0.5])  # exactly 5 pts: passes
    assert ok
    with pytest.raises(ValueError):
        adequacy_gate([0.5, 0.5], curve, 0.5)


def test_claim2_floor():
    # mean dACC 0.5 pt > 0 with 2 of 3 seeds up: reproduced without a floor, inconclusive under the 1-pt floor
    args = ([0.40] * 3, [0.41, 0.405, 0.40], [0.3] * 3, [0.31] * 3)
    assert claim2_lfss_improves(*args)[:2] == (True, False)
    assert claim2_lfss_improves(*args, min_d_acc=0.01)[:2] == (False, False)
    assert claim2_lfss_improves([0.40] * 3, [0.42, 0.41, 0.40], [0.3] * 3, [0.31] * 3, min_d_acc=0.01)[:2] == (
        True, False)  # mean exactly 1 pt


def _results(base_acc, lfss_acc, auroc=(0.6, 0.62, 0.64), curve_top=None):
    out = {}
    for i, s in enumerate((1000, 1001, 1002)):
        for arm, acc in (("base", base_acc[i]), ("lfss", lfss_acc[i])):
            curve = [acc - 0.1, curve_top if curve_top is not None else acc, acc]
            out[arm, s] = {"final": {"acc": acc, "nmi": acc / 2 + (0.01 if arm == "lfss" else 0.0)},
                           "curve_acc": curve, "claim1": {"auroc": auroc[i], "gap": 0.08}}
    return out


def test_build_claims_gates_evidence_and_t_interval():
    from scipy import stats

    from icml25.studies.lfss.evaluate import build_claims, stability_identities

    trials = [stability_identities(seed=0, n=200, k=3)]
    refs = {s: {"acc": 0.5} for s in (1000, 1001, 1002)}
    # the base learner passes the gate (0.46 >= 0.45, no drift): verdicts come from the tests
    claims, gate = build_claims(_results([0.46] * 3, [0.48, 0.49, 0.50]), refs, trials)
    c = {x.id: x for x in claims}
    assert gate["passes"] and c["c1_unstable_misclustered"].verdict == REPRODUCED
    assert c["c2_lfss_improves"].verdict == REPRODUCED
    ev = c["c2_lfss_improves"].evidence
    assert (ev.n, ev.unit, ev.paper_data, ev.ci_method) == (3, "seeds", False, "t 95%, n=3 seeds")
    d = np.array([0.02, 0.03, 0.04])
    lo, hi = stats.t.interval(0.95, 2, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(3))
    assert c["c2_lfss_improves"].metrics["d_acc"]["ci_low"] == pytest.approx(lo)
    assert c["c2_lfss_improves"].statistic["sign_flip_p"] == pytest.approx(1 / 8)
    # a base learner below 0.9 x the reference: both claims inconclusive, the note names the gate and numbers
    claims, gate = build_claims(_results([0.40] * 3, [0.42, 0.43, 0.44]), refs, trials)
    c = {x.id: x for x in claims}
    assert not gate["passes"]
    for cid in ("c1_unstable_misclustered", "c2_lfss_improves"):
        assert c[cid].verdict == INCONCLUSIVE and "base_level" in c[cid].note and "0.4" in c[cid].note
        assert "the test alone gives 'reproduced'" in c[cid].note
    # a drifting base learner (best epoch 6 pts above the last): the drift gate fails alone
    claims, _ = build_claims(_results([0.46] * 3, [0.48, 0.49, 0.50], curve_top=0.52), refs, trials)
    c1 = claims[0]
    assert c1.verdict == INCONCLUSIVE and "base_no_drift" in c1.note and "base_level" not in c1.note
    # a stricter ratio is a config choice: 0.95 x 0.5 = 0.475 > 0.46 fails the level gate
    claims, _ = build_claims(_results([0.46] * 3, [0.48, 0.49, 0.50]), refs, trials, ratio=0.95)
    assert claims[0].verdict == INCONCLUSIVE
    # the paper's data set: paper_data True
    claims, _ = build_claims(_results([0.46] * 3, [0.48, 0.49, 0.50]), refs, trials, paper_data=True)
    assert claims[0].evidence.paper_data is True and claims[1].evidence.paper_data is True
    # without the base arm nothing is measured: untested at default, not a fixed inconclusive
    only_lfss = {k: v for k, v in _results([0.46] * 3, [0.48] * 3).items() if k[0] == "lfss"}
    claims, _ = build_claims(only_lfss, refs, trials)
    assert [x.status for x in claims[:2]] == ["untested", "untested"] and claims[0].testable_at == "default"


def test_stability_correctness_statistics():
    s = np.arange(10, dtype=float)  # δ = 0.3 -> θ = 2 -> samples 0, 1 flagged
    correct = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 1], dtype=bool)
    out = stability_correctness(s, correct, delta=0.3)
    assert out == {"auroc": 1.0, "acc_unstable": 0.0, "acc_stable": 1.0, "gap": 1.0, "n_flagged": 2}
    out = stability_correctness(s[::-1], correct, delta=0.3)
    # reversed: the flagged (s = 0, 1) are samples 9, 8, both correct; the rest hold the 2 wrong ones
    assert out["auroc"] == 0.0 and out["acc_unstable"] == 1.0 and out["gap"] == pytest.approx(0.75 - 1.0)
    assert math.isnan(stability_correctness(s, np.ones(10, bool))["auroc"])


# ------------------------------------------------------------------------------------- stages (smoke)
def test_smoke_all_stages(smoke_run):
    """Every stage at smoke through Snakemake: the session's smoke run of every study (tests/conftest.py)."""
    r = smoke_run / "results/smoke/lfss"
    # preprocess: seed 0's 512-image subset and its gate reference
    arrays = np.load(r / "processed/images.npz")
    idx = arrays["subset/0"]
    assert idx.size == 512 and np.array_equal(idx, subset(arrays["y"], 0, n_images=512))
    ref = json.loads((r / "processed/pca50_kmeans_acc.json").read_text())["references"]["0"]
    x, y = load_mnist5k()
    from icml25.studies.lfss.data import pca_kmeans_reference

    assert ref == pca_kmeans_reference(x[idx], y[idx], pca_dim=50, runs=3, n_init=10)
    # train: delta = 0.1 of 512 samples without ties flags floor(51.2) - 1 = 50 at every boundary (lfss), 0 (base)
    curves = {arm: json.loads((r / f"models/{arm}/chunk0.json").read_text())["curves"]["0"] for arm in ("base", "lfss")}
    assert [c["epoch"] for c in curves["lfss"]] == [1, 2, 3]
    assert [c["n_unstable"] for c in curves["lfss"]] == [50, 50, 50]
    assert [c["n_unstable"] for c in curves["base"]] == [0, 0, 0] and curves["base"][0]["loss_ss"] == 0.0
    assert curves["lfss"][0]["loss_p"] == 0.0 and curves["lfss"][1]["loss_p"] > 0  # eta = 1
    assert all(c["loss_ss"] > 0 for c in curves["lfss"])
    feats = np.load(r / "models/lfss/chunk0.npz")
    assert feats["features/0"].shape == (512, 64) and feats["stability/0/3/s"].shape == (512,)
    # claims: one seed, so claims 1-2 are inconclusive (by the gate or the evidence rule); check 3 holds
    doc = load_claims(r / "claims.json")
    by = {c["id"]: c for c in doc["claims"]}
    assert list(by) == ["c1_unstable_misclustered", "c2_lfss_improves", "c3_stability_identities"]
    assert (by["c3_stability_identities"]["kind"], by["c3_stability_identities"]["verdict"]) == ("check", REPRODUCED)
    assert by["c3_stability_identities"]["evidence"]["n"] == 15
    for cid in ("c1_unstable_misclustered", "c2_lfss_improves"):
        assert by[cid]["kind"] == "claim" and by[cid]["verdict"] == INCONCLUSIVE
        assert by[cid]["evidence"] == {"n": 1, "unit": "seeds", "paper_data": False, "ci_method": "none (n=1 seeds)",
                                       "mde": None}
        assert [g["name"] for g in by[cid]["gates"]] == ["base_level", "base_no_drift"]
    validate_claims(doc)
    evaluation = json.loads((r / "metrics/eval.json").read_text())
    gate = evaluation["gate"]
    assert gate["reference_acc"] == pytest.approx(ref["acc"]) and gate["threshold"] == pytest.approx(0.9 * ref["acc"])
    assert gate["passes"] == ("learner inadequate" not in by["c1_unstable_misclustered"]["note"])
    final = evaluation["arms"]["lfss"]["final"]["0"]
    assert 0.15 < final["acc"] <= 1.0 and final["runs"] == 3  # above chance (0.1)
    assert all((r / f"figures/{n}.png").stat().st_size > 5000 for n in ("stability_hist", "acc_curves"))
    assert "c2_lfss_improves" in (r / "report.md").read_text()
    # MLflow: the train job of one seed is that seed's run, with the per-epoch curves; per-arm evaluate runs
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_run}/results/mlflow.db")
    runs = [x for x in client.search_runs([client.get_experiment_by_name("icml25/lfss").experiment_id],
                                          max_results=1000) if x.data.tags.get("scale") == "smoke"]
    (job,) = [x for x in runs if x.data.tags.get("stage") == "train" and x.data.tags.get("arm") == "lfss"
              and x.data.tags["run_level"] == "job"]
    assert job.data.tags["seed"] == "0"
    history = client.get_metric_history(job.info.run_id, "train/acc")
    assert [(m.step, m.value) for m in history] == [(c["epoch"], pytest.approx(c["acc"])) for c in curves["lfss"]]
    assert [a.path for a in client.list_artifacts(job.info.run_id, "model")] == ["model/chunk0.pt",
                                                                                  "model/config.json"]
    evals = [x for x in runs if x.data.tags.get("stage") == "evaluate" and x.data.tags["run_level"] == "nested"]
    assert {x.data.tags["arm"]: x.data.metrics["eval/acc"] for x in evals} == pytest.approx(
        {a: evaluation["arms"][a]["final"]["0"]["acc"] for a in ("base", "lfss")})


def test_stages_reject_bad_input(tmp_path):
    common = ["--scale", "smoke", "--no-track", "--config", str(YAML)]
    with pytest.raises(SystemExit, match="cifar10 is a paper-scale archive; run with data_source=remote"):
        stage_cli(["download", "--scale", "paper", "--no-track", "--config", str(YAML), "--out",
                   str(tmp_path / "cifar-10-python.tar.gz")])
    assert not list(tmp_path.iterdir())
    with pytest.raises(SystemExit, match="--arm must be one of"):
        stage_cli(["train", *common, "--arm", "magic", "--in", "x.npz", "--out", "a.pt", "b.npz", "c.json"])


# ------------------------------------------------------------------------------------ paper path (ResNets, RGB)
@pytest.mark.parametrize("name,stem,size,width,n_params", [
    ("resnet18", "cifar", 32, 512, 11_168_832),      # the CIFAR ResNet-18 (≈ 11.2 M without its classifier)
    ("resnet18", "cifar", 96, 512, 11_168_832),      # STL-10 size: same network
    ("resnet18", "imagenet", 64, 512, 11_176_512),   # = torchvision resnet18 (11,689,512) - fc (513,000)
    ("resnet34", "imagenet", 64, 512, 21_284_672),   # = 21,797,672 - 513,000
    ("resnet50", "imagenet", 64, 2048, 23_508_032),  # = 25,557,032 - 2,049,000
    ("resnet34", "cifar", 96, 512, 21_276_992),      # the ImageNet-subset networks as configured (3x3 stem):
    ("resnet50", "cifar", 96, 2048, 23_500_352),     # the imagenet-stem counts - 9,408 + 1,728
])
def test_resnet_shapes_and_parameter_counts(name, stem, size, width, n_params):
    from icml25.studies.lfss.model import encoder

    net, w = encoder(name, in_channels=3, stem=stem)
    assert w == width and sum(p.numel() for p in net.parameters()) == n_params
    with torch.no_grad():
        assert net.eval()(torch.rand(2, 3, size, size)).shape == (2, width)


def test_lfss_net_with_resnet18_heads_of_the_paper():
    net = LFSSNet(hidden=4096, dim=256, in_channels=3, backbone="resnet18", stem="cifar")
    proj = 512 * 4096 + 4096 + 2 * 4096 + 4096 * 256 + 256  # Linear, BN (affine), Linear
    assert sum(p.numel() for p in net.projector_q.parameters()) == proj
    assert sum(p.numel() for p in net.predictor.parameters()) == 256 * 4096 + 4096 + 2 * 4096 + 4096 * 256 + 256
    assert sum(p.numel() for p in net.encoder_q.parameters()) == 11_168_832
    assert not any(p.requires_grad for p in [*net.encoder_k.parameters(), *net.old.parameters()])
    with pytest.raises(ValueError, match="unknown ResNet 'resnet101'"):
        LFSSNet(backbone="resnet101")


def test_colour_augmentations_values():
    from icml25.studies.lfss.data import (augment_colour, colour_jitter, grayscale, hsv_to_rgb, random_flip,
                                          random_grayscale, random_resized_crop, rgb_to_hsv, view_fn)

    x = torch.rand(16, 3, 32, 32)
    a = augment_colour(x, torch.Generator().manual_seed(1))
    assert torch.equal(a, augment_colour(x, torch.Generator().manual_seed(1))) and a.shape == x.shape
    assert not torch.equal(a, augment_colour(x, torch.Generator().manual_seed(2)))
    assert float(a.min()) >= 0.0 and float(a.max()) <= 1.0
    # flip mirrors exactly (p = 1), leaves images alone (p = 0); about half flipped at p = 0.5
    g = torch.Generator().manual_seed(0)
    assert torch.equal(random_flip(x, g, 1.0), x.flip(-1)) and torch.equal(random_flip(x, g, 0.0), x)
    many = torch.rand(400, 3, 2, 2)
    half = random_flip(many, torch.Generator().manual_seed(3), 0.5)
    mirrored = (half == many.flip(-1)).flatten(1).all(1)
    assert ((half == many).flatten(1).all(1) ^ mirrored).all() and 0.4 < float(mirrored.float().mean()) < 0.6
    # grayscale: three equal channels holding the luma
    gr = random_grayscale(x, g, 1.0)
    assert torch.equal(gr[:, 0], gr[:, 1]) and torch.equal(gr[:, 1], gr[:, 2])
    assert torch.allclose(gr[:, :1], 0.299 * x[:, :1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3])
    assert torch.equal(random_grayscale(x, g, 0.0), x)
    # a full-area square crop is the identity (bilinear sampling at the pixel centres)
    assert torch.allclose(random_resized_crop(x, g, (1.0, 1.0), (1.0, 1.0)), x, atol=1e-6)
    # HSV round trip; hue shifted by a third of a turn turns pure red into pure green
    assert torch.allclose(hsv_to_rgb(rgb_to_hsv(x)), x, atol=1e-5)
    red = torch.zeros(1, 3, 2, 2)
    red[:, 0] = 1.0
    hsv = rgb_to_hsv(red)
    hsv[:, 0] = (hsv[:, 0] + 1 / 3) % 1.0
    assert torch.allclose(hsv_to_rgb(hsv), torch.roll(red, 1, dims=1), atol=1e-6)
    # jitter with zero strengths is the identity; brightness only scales and clamps; colours stay in range
    assert torch.equal(colour_jitter(x, g, 0.0, 0.0, 0.0, 0.0), x)
    br = colour_jitter(torch.full((64, 3, 1, 1), 0.5), torch.Generator().manual_seed(4), 0.4, 0.0, 0.0, 0.0)
    assert torch.equal(br[:, 0], br[:, 1]) and 0.3 - 1e-6 <= float(br.min()) < float(br.max()) <= 0.7 + 1e-6
    assert float(grayscale(colour_jitter(x, g)).max()) <= 1.0
    # the pipeline follows the channels (auto) and refuses colour views of grey images
    assert view_fn("auto", 3) is augment_colour and view_fn("auto", 1) is augment
    with pytest.raises(ValueError, match="pipeline=colour needs RGB images, got 1 channel"):
        view_fn("colour", 1)


def test_paper_path_trains_resnet18_on_rgb(tmp_path):
    """The paper configuration, shrunk (8 random 32x32 RGB images, batch 4, 2 epochs, narrow heads), takes real
    steps of the ResNet-18 learner with colour views on the CPU: finite losses, every online parameter group
    moves, the prototype loss is active after eta, and the features have the head's width."""
    from icml25.studies.lfss.train import resolve_device, train_arm

    cfg = _config("paper")
    assert (cfg.train.device, cfg.augment.pipeline, cfg.model.hidden, cfg.model.dim) == ("cuda", "colour", 4096, 256)
    settings = {"data": {"n_classes": 2}, "model": {**cfg.model.model_dump(), "hidden": 32, "dim": 16},
                "train": {**cfg.train.model_dump(), "epochs": 2, "eta": 1, "warmup_epochs": 1, "batch_size": 4,
                          "threads": 1, "device": "cpu"},
                "augment": cfg.augment.model_dump(), "stability": {**cfg.stability.model_dump(), "record_every": 1}}
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 3, 32, 32), dtype=np.float32), np.repeat([0, 1], 4)
    torch.manual_seed(5)
    init = LFSSNet(cfg.model.channels, 32, 16, in_channels=3, backbone="resnet18", stem="cifar").state_dict()
    out = train_arm(x, y, settings, "lfss", 5)
    assert [c["epoch"] for c in out["curves"]] == [1, 2]
    assert all(math.isfinite(c[k]) and c[k] > 0 for c in out["curves"] for k in ("loss", "loss_n", "loss_ss"))
    assert out["curves"][0]["loss_p"] == 0.0 and out["curves"][1]["loss_p"] > 0  # L_p from epoch eta + 1
    assert out["features"].shape == (8, 16) and np.isfinite(out["features"]).all()
    after = out["net"].state_dict()
    for name in ("encoder_q.0.weight", "encoder_q.3.conv1.weight", "encoder_q.10.conv2.weight",
                 "projector_q.3.weight", "predictor.0.weight"):
        assert not torch.equal(init[name], after[name]), name
    assert not torch.equal(init["encoder_k.0.weight"], after["encoder_k.0.weight"])  # the EMA target follows
    assert after["encoder_q.0.weight"].device.type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="train.device=cuda but torch sees no CUDA device"):
            resolve_device("cuda")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("backbone", ["resnet34", "resnet50"])
def test_paper_resnets_at_full_width_train_through_the_loop(backbone):
    """Issue 35: the ImageNet-subset backbones at width 1 with the paper's heads (h 4096, D 256) take real steps of
    the lfss arm through the training loop (4 RGB images, batch 2, 2 epochs so L_p is active): finite losses, the
    encoder moves, features of the head's width. The step cost at the paper's batch and 96 px is measured by
    benchmarks/lfss_resnet_step.py (README, Scales)."""
    from icml25.studies.lfss.train import train_arm

    cfg = _config("paper")
    settings = {"data": {"n_classes": 2}, "model": {**cfg.model.model_dump(), "backbone": backbone, "width": 1.0},
                "train": {**cfg.train.model_dump(), "epochs": 2, "eta": 1, "warmup_epochs": 1, "batch_size": 2,
                          "threads": 1, "device": "cpu"},
                "augment": cfg.augment.model_dump(), "stability": {**cfg.stability.model_dump(), "record_every": 1,
                                                                   "kmeans_n_init": 1}}
    assert (settings["model"]["hidden"], settings["model"]["dim"]) == (4096, 256)
    x, y = np.random.default_rng(1).random((4, 3, 32, 32), dtype=np.float32), np.array([0, 0, 1, 1])
    torch.manual_seed(3)
    init = LFSSNet(hidden=4096, dim=256, in_channels=3, backbone=backbone).encoder_q[0].weight.detach().clone()
    out = train_arm(x, y, settings, "lfss", 3)
    assert all(math.isfinite(c[k]) for c in out["curves"] for k in ("loss", "loss_n", "loss_ss", "loss_p"))
    assert out["curves"][1]["loss_p"] > 0 and out["features"].shape == (4, 256)
    assert sum(p.numel() for p in out["net"].encoder_q.parameters()) == {"resnet34": 21_276_992,
                                                                         "resnet50": 23_500_352}[backbone]
    assert not torch.equal(init, out["net"].encoder_q[0].weight)


def test_resnet_step_benchmark_counts_and_step():
    """benchmarks/lfss_resnet_step.py on a tiny batch: closed counts, a finite loss, extrapolation bookkeeping."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("lfss_resnet_step", ROOT / "benchmarks" / "lfss_resnet_step.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.CLOSED_COUNTS == {"resnet18": 11_689_512 - 513_000 - 9_408 + 1_728,
                                   "resnet34": 21_797_672 - 513_000 - 9_408 + 1_728,
                                   "resnet50": 25_557_032 - 2_049_000 - 9_408 + 1_728}
    row = bench.measure("resnet18", 32, batch=4, micro=2, micro_steps=1)
    assert row["encoder_params"] == 11_168_832 and math.isfinite(row["loss"]) and row["extrapolated"]
    assert (row["micro_run"], row["micro_total"]) == (1, 2) and row["wall_s"] > 0


# ------------------------------------------------------------------------------------- rehearsal (issue 34)


def test_rehearsal_miniatures_read_through_every_paper_loader(tmp_path):
    """Every paper source's miniature (CIFAR-10 / CIFAR-100 pickle tarballs, the STL-10 binary tarball, the
    Tiny-ImageNet zip of JPEGs, the hand-placed ImageNet-10 folders) reads through the study's own loader with the
    classes it was written with; the bytes are the same on every call."""
    from icml25.core.download import read_manifest
    from icml25.studies.lfss import rehearsal as R

    manifest = read_manifest(Path(D.__file__).with_name("manifest.csv"), rehearsal=False)
    names = R.write_miniatures(tmp_path / "a", manifest)
    assert names == ["cifar10", "cifar20", "stl10", "tiny_imagenet"]
    R.write_miniatures(tmp_path / "b", manifest)
    expect = {"cifar10": ((5 * R.PER_BATCH, 3, 32, 32), np.arange(5 * R.PER_BATCH) % 10),
              "cifar20": ((5 * R.PER_BATCH, 3, 32, 32), np.arange(5 * R.PER_BATCH) % 100 % 20),
              "stl10": ((30, 3, 96, 96), np.r_[np.arange(20) % 10, np.arange(10) % 10]),
              "tiny_imagenet": ((200, 3, 64, 64), np.arange(200))}
    for name in names:
        path = tmp_path / "a" / manifest[name].mirror_path
        assert path.read_bytes() == (tmp_path / "b" / manifest[name].mirror_path).read_bytes()
        x, y = D.read_raw(path, name)
        assert x.shape == expect[name][0] and x.dtype == np.uint8, name
        np.testing.assert_array_equal(y, expect[name][1])
    R.write_manual(tmp_path / "manual")
    x, y = D.read_imagenet_folders(tmp_path / "manual", "imagenet10", 96)
    assert x.shape == (10 * R.IMAGENET_PER_CLASS, 3, 96, 96)
    np.testing.assert_array_equal(y, np.repeat(np.arange(10), R.IMAGENET_PER_CLASS))


def test_rehearsal_stl10_bytes_are_column_major_and_cifar_pickles_python2():
    """A hand-made STL-10 image: pixel (row 0, col 1) of channel 0 is the file's byte 96 (each channel column-major);
    the CIFAR batches are protocol-2 pickles with byte strings (no _codecs call) and numpy.core.multiarray."""
    from icml25.studies.lfss import rehearsal as R

    img = np.zeros((1, 3, 96, 96), dtype=np.uint8)
    img[0, 0, 0, 1] = 200
    buf = np.ascontiguousarray(img.transpose(0, 1, 3, 2)).tobytes()  # as stl10_archive writes it
    assert buf[96] == 200 and buf[1] == 0
    np.testing.assert_array_equal(D.read_stl10_images(buf), img)
    blob = R.py2_pickle({b"data": np.zeros((1, 3072), np.uint8), b"labels": [4]})
    assert b"_codecs" not in blob and b"cnumpy.core.multiarray\n_reconstruct" in blob
    x, y = D.read_cifar_batch("mem", fh=__import__("io").BytesIO(blob))
    assert x.shape == (1, 3, 32, 32) and list(y) == [4]


def test_resnet_width_one_is_the_paper_backbone():
    """ResNet-18 with the CIFAR stem and no classifier: torchvision's 11,689,512 parameters minus the 1000-way fc
    (513,000) and with a 3x3 instead of a 7x7 stem (1,728 instead of 9,408) = 11,168,832; width scales it."""
    from icml25.studies.lfss import model as Mo

    count = lambda net: sum(p.numel() for p in net.parameters())  # noqa: E731
    assert count(Mo.resnet("resnet18", 3, "cifar")) == 11_168_832
    small, feat = Mo.encoder("resnet18", in_channels=3, width=1 / 16)
    assert feat == 32 and count(small) < count(Mo.resnet("resnet18", 3, "cifar")) / 100
    assert Mo.encoder("resnet50", in_channels=3)[1] == 2048


# ---------------------------------------------------------------- issue 37: exact speed-ups (same floats as before)
def test_maxpool2x2_equals_nn_maxpool_values_and_gradients():
    """MaxPool2x2 gives nn.MaxPool2d(2)'s outputs bit for bit (odd sizes floored), with and without a gradient,
    and the same input gradient (first maximum of a window in raster order) on tie-heavy ReLU maps."""
    import torch
    from torch import nn

    from icml25.studies.lfss.model import MaxPool2x2, max_pool_2x2

    gen = torch.Generator().manual_seed(0)
    for shape in [(4, 3, 28, 28), (2, 5, 7, 9), (3, 2, 14, 15)]:
        x = torch.relu(torch.randn(shape, generator=gen))
        x[..., ::3, :] = torch.round(x[..., ::3, :])  # many exact ties, at 0 and above
        ref = nn.MaxPool2d(2)(x)
        with torch.no_grad():
            assert torch.equal(MaxPool2x2()(x), ref)
        assert torch.equal(max_pool_2x2(x), ref)
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        g = torch.randn(ref.shape, generator=gen)
        g[..., 0, :] = -0.0  # signed zeros land as +0 in max_pool2d's gradient
        nn.MaxPool2d(2)(a).backward(g)
        out = MaxPool2x2()(b)
        assert torch.equal(out, ref)
        out.backward(g)
        assert torch.equal(a.grad.view(torch.int32), b.grad.view(torch.int32))  # bit for bit, zero signs too


def test_cluster_sums_equal_np_add_at_bitwise():
    """The k-means centre sums equal np.add.at's sequential sums bit for bit (signed zeros included)."""
    from icml25.studies.lfss.method import _cluster_sums

    rng = np.random.default_rng(3)
    for trial in range(60):
        n, d, k = int(rng.integers(1, 400)), int(rng.integers(1, 70)), int(rng.integers(1, 12))
        z = rng.standard_normal((n, d)) * 10.0 ** float(rng.integers(-3, 4))
        if trial % 4 == 0:
            z[rng.random(z.shape) < 0.5] = -0.0
        labels = rng.integers(0, k, n)
        ref = np.zeros((k, d))
        np.add.at(ref, labels, z)
        got = _cluster_sums(z, labels, np.bincount(labels, minlength=k))
        assert np.array_equal(ref.view(np.int64), got.view(np.int64))
