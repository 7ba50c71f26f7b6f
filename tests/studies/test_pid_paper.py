"""pid paper scale: the ResNet-50 detector, the GenImage loaders (layout, decoding, windows, index), the per-image
units, the paper claims and the rehearsal's miniature archives."""
from __future__ import annotations

import io
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from icml25.core.claims import UNTESTED
from icml25.core.datasets import DataError
from icml25.studies.pid import genimage as G
from icml25.studies.pid import paper as P
from icml25.studies.pid import rehearsal as R
from icml25.studies.pid.resnet import ResNet50


def _resnet50_params(w: int) -> int:
    """Parameter count of ResNet-50 with base width ``w`` and one logit, by hand from the architecture."""
    n = 3 * 49 * w + 2 * w  # stem conv + BN
    cin = w
    for stage, blocks in enumerate((3, 4, 6, 3)):
        p = w * 2 ** stage
        for j in range(blocks):
            n += cin * p + 2 * p + 9 * p * p + 2 * p + 4 * p * p + 8 * p
            if j == 0:  # projection shortcut (channels change in every stage's first block)
                n += cin * 4 * p + 8 * p
            cin = 4 * p
    return n + cin + 1  # fc


def test_resnet50_matches_the_standard_network_at_width_64():
    # torchvision's resnet50 has 25,557,032 parameters with 1000 classes: minus 2048*1000 + 1000, plus 2048 + 1
    assert _resnet50_params(64) == 25_557_032 - 2_049_000 + 2_049 == 23_510_081
    m = ResNet50()
    assert sum(p.numel() for p in m.parameters()) == 23_510_081
    assert [len(getattr(m, f"layer{i}")) for i in range(1, 5)] == [3, 4, 6, 3]
    assert m.layer2[0].conv2.stride == (2, 2) and m.layer2[0].conv1.stride == (1, 1)  # v1.5: stride on the 3x3
    keys = m.state_dict().keys()
    assert {"conv1.weight", "layer4.2.conv3.weight", "layer1.0.downsample.0.weight", "fc.weight"} <= set(keys)


@pytest.mark.parametrize("w", [1, 4, 8])
def test_resnet50_reduced_width_keeps_the_architecture(w):
    m = ResNet50(width=w)
    assert sum(p.numel() for p in m.parameters()) == _resnet50_params(w)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 40, 33)
    assert m.eval()(x).shape == (2,)


def test_crop_or_pad_hand_cases():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    out = G.crop_or_pad(img, 4)  # padded at the bottom/right to 4x4, then the central window (offset 0)
    assert out.shape == (4, 4, 3)
    np.testing.assert_array_equal(out[:2, :3], img)
    assert not out[2:].any() and not out[:, 3:].any()
    big = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3)
    np.testing.assert_array_equal(G.crop_or_pad(big, 4), big[1:5, 2:6])  # centre: (6-4)//2, (8-4)//2
    win = G.crop_or_pad(big, 4, np.random.default_rng(5))
    r2 = np.random.default_rng(5)
    y0, x0 = int(r2.integers(0, 3)), int(r2.integers(0, 5))
    np.testing.assert_array_equal(win, big[y0:y0 + 4, x0:x0 + 4])


def _save(path, arr, fmt, mode="RGB", **kw):
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.fromarray(arr)
    (img if mode == "RGB" else img.convert(mode)).save(path, format=fmt, **kw)
    return path


def test_load_image_converts_grey_and_rgba_and_names_bad_files(tmp_path):
    px = np.array([[[10, 20, 30], [200, 100, 0]]], dtype=np.uint8)
    rgba = Image.fromarray(np.concatenate([px, np.full((1, 2, 1), 7, np.uint8)], -1), "RGBA")
    rgba.save(tmp_path / "a.png")
    np.testing.assert_array_equal(G.load_image(tmp_path / "a.png"), px)  # alpha dropped, colours exact (PNG)
    Image.fromarray(np.array([[0, 128, 255]], np.uint8), "L").save(tmp_path / "g.png")
    np.testing.assert_array_equal(G.load_image(tmp_path / "g.png"), np.repeat([[[0], [128], [255]]], 3, -1))
    Image.fromarray(np.array([[1, 60000]], np.uint16)).save(tmp_path / "deep.png")
    with pytest.raises(DataError, match="deep.png: unsupported image mode"):
        G.load_image(tmp_path / "deep.png")
    (tmp_path / "bad.JPEG").write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(DataError, match="bad.JPEG: cannot decode"):
        G.load_image(tmp_path / "bad.JPEG")


def _tree(root, stem, counts):
    """An unpacked subset ``root/stem/{train,val}/{ai,nature}`` with counts[(split, cls)] tiny images."""
    rng = np.random.default_rng(0)
    for (split, cls), n in counts.items():
        for i in range(n):
            arr = rng.integers(0, 256, size=(20, 24, 3), dtype=np.uint8)
            if cls == "ai":
                _save(root / stem / split / cls / f"{i:03d}_x_{i:05d}.png", arr, "PNG")
            else:
                _save(root / stem / split / cls / f"n0_{i}.JPEG", arr, "JPEG", quality=95)


FULL = {("train", "ai"): 10, ("train", "nature"): 20, ("val", "ai"): 3, ("val", "nature"): 2}


def test_subset_files_checks_the_layout(tmp_path):
    _tree(tmp_path / "sd", "imagenet_ai_0419_sdv4", FULL)
    (tmp_path / "sd/imagenet_ai_0419_sdv4/train/ai/notes.txt").write_text("ignored")
    files = G.subset_files(tmp_path / "sd", "sdv14")
    assert {k: len(v) for k, v in files.items()} == FULL
    with pytest.raises(DataError, match="imagenet_ai_0424_sdv5/train/nature: missing"):
        _tree(tmp_path / "sd5", "imagenet_ai_0424_sdv5", {("train", "ai"): 1})
        G.subset_files(tmp_path / "sd5", "sdv15")
    (tmp_path / "e/imagenet_glide/train/nature").mkdir(parents=True)
    for split, cls in [("train", "ai"), ("val", "ai"), ("val", "nature")]:
        (tmp_path / f"e/imagenet_glide/{split}/{cls}").mkdir(parents=True, exist_ok=True)
    with pytest.raises(DataError, match="imagenet_glide/train/nature: no image files"):
        G.subset_files(tmp_path / "e", "glide")
    with pytest.raises(DataError, match="subset 'sd3' unknown"):
        G.subset_files(tmp_path, "sd3")


def test_build_index_roles_labels_groups(tmp_path):
    _tree(tmp_path / "a", "imagenet_ai_0419_sdv4", FULL)
    _tree(tmp_path / "b", "imagenet_glide", {**FULL, ("val", "ai"): 4})
    idx = P.build_index({"sdv14": tmp_path / "a", "glide": tmp_path / "b"}, ["sdv14"], ["sdv14", "glide"],
                        val_frac=0.1, seed=0)
    role, lab, grp = idx["role"], idx["label"], idx["group"]
    # train split of sdv14 only: 10 ai (1 val = round(1.0)), 20 nature (2 val)
    assert ((role == 1) & (lab == 1)).sum() == 1 and ((role == 1) & (lab == 0)).sum() == 2
    assert ((role == 0) & (lab == 1)).sum() == 9 and ((role == 0) & (lab == 0)).sum() == 18
    assert all("/train/" in p for p in idx["image"][role < 2]) and all("/val/" in p for p in idx["image"][role == 2])
    assert not any("imagenet_glide/train" in p for p in idx["image"])  # glide is only tested
    assert list(idx["groups"]) == ["sdv14", "glide"]
    assert ((grp == 0) & (role == 2)).sum() == 5 and ((grp == 1) & (role == 2)).sum() == 6
    assert (grp[role < 2] == -1).all() and len(set(idx["image"])) == len(idx["image"])
    np.testing.assert_array_equal(idx["is_jpeg"], [p.endswith(".JPEG") for p in idx["image"]])
    again = P.build_index({"sdv14": tmp_path / "a", "glide": tmp_path / "b"}, ["sdv14"], ["sdv14", "glide"], 0.1, 0)
    np.testing.assert_array_equal(again["role"], role)  # seeded
    with pytest.raises(DataError, match=r"no unpacked archive for subsets \['adm'\]"):
        P.build_index({"sdv14": tmp_path / "a"}, ["sdv14"], ["adm"])


def test_balanced_units_average_to_balanced_accuracy():
    # group 0: 1 real (right), 3 fakes (1 right) -> (1 + 1/3) / 2; group 1: 2 real (1 right), 2 fakes (2 right) -> 3/4
    correct = np.array([1, 1, 0, 0, 1, 0, 1, 1], bool)
    label = np.array([0, 1, 1, 1, 0, 0, 1, 1])
    group = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    u = P.balanced_units(correct, label, group)
    assert u[group == 0].mean() == pytest.approx(2 / 3)
    assert u[group == 1].mean() == pytest.approx(3 / 4)


def test_crop_dataset_windows_and_inputs(tmp_path):
    from icml25.studies.pid.train import detector_input
    arr = np.random.default_rng(1).integers(0, 256, size=(40, 36, 3), dtype=np.uint8)
    f = _save(tmp_path / "x.png", arr, "PNG")
    test = P.CropDataset([str(f)], [1], "pid", 32, train=False)
    x, y = test[0]
    np.testing.assert_array_equal(x.numpy(), detector_input(G.crop_or_pad(arr, 32)[None], "pid")[0])
    assert float(y) == 1.0
    train = P.CropDataset([str(f)], [1], "rgb", 32, train=True, seed=3)
    a, b = train[0][0], train[0][0]
    assert torch.equal(a, b)  # the same (seed, epoch, item) draws the same window and flips
    win = train.window(0, np.random.default_rng([3, 0, 0]))
    np.testing.assert_array_equal(a.numpy(), detector_input(win[None], "rgb")[0])
    seen = set()
    for e in range(6):
        train.set_epoch(e)
        seen.add(train[0][0].numpy().tobytes())
    assert len(seen) > 1
    jpeg = P.CropDataset([str(f)], [1], "rgb", 32, train=False, jpeg=75)
    from icml25.studies.pid.data import jpeg_roundtrip
    crop = G.crop_or_pad(arr, 32)
    np.testing.assert_array_equal(jpeg[0][0].numpy(), detector_input(jpeg_roundtrip(crop[None], 75), "rgb")[0])
    assert not np.array_equal(jpeg[0][0].numpy(), detector_input(crop[None], "rgb")[0])


def test_decide_paper_accuracy_verdicts():
    from icml25.studies.pid.claims import decide_paper_accuracy
    rep, nrep, st = decide_paper_accuracy(np.array([0.97, 0.98, 0.99]), 0.95)
    assert (rep, nrep) == (True, False) and st["mean"] == pytest.approx(0.98)
    assert decide_paper_accuracy(np.array([0.50, 0.52, 0.51]), 0.95)[:2] == (False, True)
    assert decide_paper_accuracy(np.array([0.90, 0.99, 0.70]), 0.95)[:2] == (False, False)


def test_evaluate_claims_paper_units_are_heldout_generators():
    from icml25.studies.pid.claims import evaluate_claims_paper
    groups, heldout = ["sdv14", "adm", "glide", "vqdm"], ["adm", "glide", "vqdm"]
    grp = np.repeat(np.arange(4), 4)
    runs = []
    for arm, base in (("pid", 0.9), ("rgb", 0.6)):
        for seed in range(3):
            m = {f"test/acc_{g}": base for g in groups} | {f"test/auc_{g}": base for g in groups}
            m |= {"test/acc_mean": base, "test/acc_heldout": base, "val/auc_A": 0.9,
                  "test/acc_heldout_jpeg95": base, "test/acc_heldout_jpeg75": base}
            units = np.full(16, base) + 0.01 * np.tile([0, 1, 2, 3], 4) * (arm == "pid")
            runs.append({"arm": arm, "seed": seed, "metrics": m, "units": units.tolist(),
                         "unit_group": grp.tolist()})
    test_real = np.random.default_rng(0).integers(0, 256, size=(4, 48, 48, 3), dtype=np.uint8)
    claims, summary = evaluate_claims_paper(
        runs, test_real, {"colour_space": "yuv601", "step": 1.0, "bound_steps": (1.0,), "bound_random": 1000},
        groups=groups, heldout=heldout, train_generators=["sdv14"], paper_acc=0.98, paper_tolerance=0.1)
    by = {c.id: c for c in claims}
    assert list(by) == ["residual_bound", "pixelwise_invariance", "genimage_accuracy", "heldout_generalisation",
                        "robustness_report"]
    assert by["genimage_accuracy"].verdict == "reproduced" and by["genimage_accuracy"].evidence.paper_data
    c3 = by["heldout_generalisation"]
    assert (c3.evidence.n, c3.evidence.unit) == (3, "generators")
    # per held-out subset g (1..3): pid - rgb = 0.3 + 0.01 * mean(0..3) = 0.315 for every subset
    np.testing.assert_allclose(c3.statistic["per_image"], [0.315] * 3)
    assert by["robustness_report"].status == UNTESTED
    assert summary["groups"] == groups and summary["heldout"] == heldout


def test_rehearsal_archives_are_deterministic_and_in_genimage_layout(tmp_path):
    data = R.archive_bytes("midjourney")
    assert data == R.archive_bytes("midjourney")
    path = tmp_path / "Midjourney" / "imagenet_midjourney.zip"
    path.parent.mkdir()
    path.write_bytes(data)
    G.archive_check(path)  # names safe, CRCs valid, no bomb
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert {i.date_time for i in zf.infolist()} == {R.DATE}
        grey = [n for n in names if n.endswith(".JPEG") and Image.open(io.BytesIO(zf.read(n))).mode == "L"]
    assert "imagenet_midjourney/train/ai/" in names and "imagenet_midjourney/val/nature/" in names
    assert any(n.startswith("imagenet_midjourney/val/nature/ILSVRC2012_val_") for n in names) and grey
    R.write_manual(tmp_path / "manual")
    assert (tmp_path / "manual" / "Midjourney" / "imagenet_midjourney.zip").read_bytes() == data
    assert len(list((tmp_path / "manual").rglob("*.zip"))) == 8


def test_paper_run_end_to_end_on_miniature_archives(tmp_path):
    """Unpack two miniature archives (the rehearsal's), index them, train a width-2 ResNet-50 for one epoch and
    test it: every metric of the claims is finite and the units average to the per-subset accuracies."""
    from icml25.core.download import record_path, sha256_file
    unpacked = {}
    for key in ("sdv14", "adm"):
        folder, stem = G.SUBSETS[key]
        arc = tmp_path / f"{stem}.zip"
        arc.write_bytes(R.archive_bytes(key))
        record_path(arc).write_text(sha256_file(arc) + "\n")
        G.unpack(arc, tmp_path / "u" / stem)
        unpacked[key] = tmp_path / "u" / stem
    idx = P.build_index(unpacked, ["sdv14"], ["sdv14", "adm"], 0.1, 0)
    s = {"crop": 32, "det_width": 2, "det_epochs": 1, "det_lr": 1e-3, "batch": 8, "det_device": "cpu",
         "det_workers": 0, "det_eval_batch": 16, "step": 1.0, "colour_space": "yuv601", "noise_amp": 1.0,
         "jpeg_qualities": (75,), "det_threshold": "val"}
    res = P.run(idx, "pid_noise", 0, s, ["adm"])
    m = res["metrics"]
    assert all(np.isfinite(m[k]) for k in ("test/acc_sdv14", "test/acc_adm", "test/acc_mean", "val/auc_A",
                                           "test/acc_heldout_jpeg75"))
    for k, g in enumerate(["sdv14", "adm"]):
        assert res["units"][res["unit_group"] == k].mean() == pytest.approx(m[f"test/acc_{g}"])
    assert m["test/acc_heldout"] == m["test/acc_adm"] and len(res["curves"]["train/bce"]) == 1


def test_download_reads_the_hand_placed_directory(tmp_path):
    from icml25.core.cli import Stage
    from icml25.core.download import record_path
    from icml25.studies.pid.stages import download, genimage_archives
    entries = genimage_archives()
    placed, raw = tmp_path / "GenImage", tmp_path / "raw"
    R.write_manual(placed)
    cfg = SimpleNamespace(data=SimpleNamespace(dataset="genimage", genimage_dir=str(placed)))
    logged = {}
    download(Stage("pid", "download", cfg, "paper", "offline", None, (), tuple(raw / n for n in entries),
                   trust_unpinned=True), SimpleNamespace(log_metrics=lambda m, **_: logged.update(m)))
    assert logged["download/archives"] == 8 and all(record_path(raw / n).exists() for n in entries)
    cfg = SimpleNamespace(data=SimpleNamespace(dataset="genimage", genimage_dir=str(tmp_path / "nowhere")))
    with pytest.raises(SystemExit, match="nowhere is not a directory"):
        download(Stage("pid", "download", cfg, "paper", "offline", None, (), tuple(raw / n for n in entries),
                       trust_unpinned=True), None)


def test_paper_and_rehearsal_configs():
    """The paper scale is the GPU ResNet-50 run on GenImage; the rehearsal keeps its DAG (every arm, 3 seeds, the
    hand-placed tree) at reduced width on CPU."""
    import pathlib

    from icml25.core.config import build, load_yaml, merge_scale
    from icml25.studies.pid.config import Config
    root = pathlib.Path(__file__).resolve().parents[2]
    y = load_yaml(root / "config/studies/pid.yaml")
    paper = build(Config, merge_scale(y, "paper"))
    assert (paper.data.dataset, paper.detector.backbone, paper.detector.device) == ("genimage", "resnet50", "cuda")
    assert paper.detector.width == 64 and paper.data.crop == 256 and paper.seeds_per_job == 1
    assert paper.data.train_generators == ("sdv14",) and len(paper.data.test_generators) == 8 == len(G.SUBSETS)
    assert paper.detector.train_crop is None and paper.residual.bound_random is None
    reh = build(Config, merge_scale(y, "paper", load_yaml(root / "config/rehearsal/pid.yaml")))
    assert reh.detector.device == "cpu" and reh.detector.width < 64 and len(reh.seeds) >= 3
    assert set(reh.arms) == {"rgb", "pid", "pid_noise", "npr"} and reh.detector.backbone == "resnet50"
    assert reh.data.genimage_dir == "results/rehearsal/mirror/manual/pid"
