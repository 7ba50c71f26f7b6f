"""sard paper scale: the archive readers (CIFAR-10 pickles, cal_housing.data, VOC XML + JPEG tars) on hand-made
inputs with hand-computed values, the ResNet-18 family, the multi-task costs, the processed-file round trip of an
image main model, and the rehearsal miniatures' format."""
from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np
import pytest
import torch

from icml25.core.datasets import DataError
from icml25.core.download import read_manifest
from icml25.studies.sard import agents as A
from icml25.studies.sard import data as D
from icml25.studies.sard import paper_data as P
from icml25.studies.sard import rehearsal as R
from icml25.studies.sard.evaluate import describe_per_seed
from icml25.studies.sard.model import ResNet18, build_rejector


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _batch(data: np.ndarray, labels: list[int]) -> bytes:
    return pickle.dumps({b"batch_label": b"x", b"labels": labels, b"data": data, b"filenames": [b"a"] * len(labels)},
                        protocol=2)


# ------------------------------------------------------------------------------------------------- CIFAR-10


def test_cifar_batch_decodes_pixel_exact_channel_major():
    data = np.zeros((2, 3072), dtype=np.uint8)
    data[0, 0] = 7            # image 0, red, row 0, col 0
    data[0, 1024 + 33] = 9    # image 0, green, row 1, col 1
    data[1, 2048 + 1023] = 255  # image 1, blue, row 31, col 31
    x, y = P.parse_cifar_batch(_batch(data, [3, 9]), "b")
    assert x.shape == (2, 3, 32, 32) and x.dtype == np.uint8 and y.tolist() == [3, 9]
    assert x[0, 0, 0, 0] == 7 and x[0, 1, 1, 1] == 9 and x[1, 2, 31, 31] == 255 and int(x.sum()) == 7 + 9 + 255


def test_cifar_archive_reads_six_batches_in_order_and_fails_naming_member(tmp_path):
    members = {m: _batch(np.full((1, 3072), i, dtype=np.uint8), [i]) for i, m in enumerate(P.CIFAR10_MEMBERS)}
    path = tmp_path / "c.tar.gz"
    path.write_bytes(_tar(members))
    x, y = P.read_cifar10(path)
    assert y.tolist() == [0, 1, 2, 3, 4, 5] and x[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 4, 5]
    del members["cifar-10-batches-py/test_batch"]
    path.write_bytes(_tar(members))
    with pytest.raises(DataError, match="test_batch.*missing"):
        P.read_cifar10(path)


def test_cifar_pickle_is_restricted_and_checked():
    class Evil:
        def __reduce__(self):
            return (print, ("owned",))

    with pytest.raises(DataError, match="print, which is not allowed"):
        P.parse_cifar_batch(pickle.dumps({b"data": Evil()}, protocol=2), "evil")
    with pytest.raises(DataError, match="b'labels'.*missing"):
        P.parse_cifar_batch(pickle.dumps({b"data": np.zeros((1, 3072), np.uint8)}, protocol=2), "b")
    with pytest.raises(DataError, match="uint8 \\(n, 3072\\)"):
        P.parse_cifar_batch(_batch(np.zeros((1, 100), np.uint8), [0]), "b")
    with pytest.raises(DataError, match="0..9"):
        P.parse_cifar_batch(_batch(np.zeros((1, 3072), np.uint8), [10]), "b")


# ---------------------------------------------------------------------------------------- California Housing


def test_cal_housing_features_as_scikit_learn_by_hand():
    raw = (b"-122.230000,37.880000,41.000000,880.000000,129.000000,322.000000,126.000000,8.325200,452600.000000\n"
           b"-118.000000,34.000000,10.000000,1000.000000,200.000000,500.000000,250.000000,2.000000,100000.000000\n")
    X, y = P.parse_cal_housing(raw, "cal")
    assert X.shape == (2, 8)
    np.testing.assert_allclose(X[0], [8.3252, 41, 880 / 126, 129 / 126, 322, 322 / 126, 37.88, -122.23])
    np.testing.assert_allclose(X[1], [2.0, 10, 4.0, 0.8, 500, 2.0, 34.0, -118.0])
    np.testing.assert_allclose(y, [4.526, 1.0])


def test_cal_housing_bad_rows_fail_naming_file_and_column(tmp_path):
    with pytest.raises(DataError, match="cal: expected 9 columns"):
        P.parse_cal_housing(b"1,2,3\n", "cal")
    with pytest.raises(DataError, match="cal: cannot parse"):
        P.parse_cal_housing(b"1,2,3,4,5,6,7,8,x\n", "cal")
    with pytest.raises(DataError, match="'households' must be positive"):
        P.parse_cal_housing(b"1,2,3,4,5,6,0,8,9\n", "cal")
    path = tmp_path / "c.tgz"
    path.write_bytes(_tar({"CaliforniaHousing/other.data": b""}))
    with pytest.raises(DataError, match="cal_housing.data.*missing"):
        P.read_california_housing(path)


# ------------------------------------------------------------------------------------------------ VOC 2007


def _xml(objects: str, w: int = 100, h: int = 50) -> bytes:
    return (f"<annotation><filename>1.jpg</filename><size><width>{w}</width><height>{h}</height><depth>3</depth>"
            f"</size>{objects}</annotation>").encode()


def _obj(name: str, box: tuple[int, int, int, int], difficult: int = 0) -> str:
    return (f"<object><name>{name}</name><difficult>{difficult}</difficult><bndbox><xmin>{box[0]}</xmin>"
            f"<ymin>{box[1]}</ymin><xmax>{box[2]}</xmax><ymax>{box[3]}</ymax></bndbox></object>")


def test_voc_annotation_keeps_the_largest_non_difficult_object_normalised():
    raw = _xml(_obj("dog", (1, 1, 90, 45), difficult=1) + _obj("cat", (11, 6, 30, 25)) + _obj("car", (51, 1, 60, 10)))
    label, box, size = P.parse_voc_annotation(raw, "a.xml")
    assert label == P.VOC_CLASSES.index("cat") and size == (100, 50)
    np.testing.assert_allclose(box, [10 / 100, 5 / 50, 30 / 100, 25 / 50])
    label, _, _ = P.parse_voc_annotation(_xml(_obj("dog", (1, 1, 9, 9), difficult=1)), "b.xml")
    assert label == P.VOC_CLASSES.index("dog")  # only difficult objects: the largest of them


def test_voc_annotation_errors_name_file_and_field():
    with pytest.raises(DataError, match="a.xml: object 0: <name> 'unicorn'"):
        P.parse_voc_annotation(_xml(_obj("unicorn", (1, 1, 2, 2))), "a.xml")
    with pytest.raises(DataError, match="a.xml: object 0: <bndbox>"):
        P.parse_voc_annotation(_xml("<object><name>cat</name></object>"), "a.xml")
    with pytest.raises(DataError, match="a.xml: no <object>"):
        P.parse_voc_annotation(_xml(""), "a.xml")
    with pytest.raises(DataError, match="a.xml: <size>"):
        P.parse_voc_annotation(b"<annotation></annotation>", "a.xml")


def test_voc_tar_reads_image_and_target_and_refuses_unpaired(tmp_path):
    from PIL import Image

    img = np.zeros((20, 40, 3), dtype=np.uint8)
    img[:, :20] = (255, 0, 0)
    img[:, 20:] = (0, 0, 255)
    jpg = io.BytesIO()
    Image.fromarray(img).save(jpg, format="PNG")  # lossless bytes; Pillow sniffs the format
    root = P.VOC_ROOT
    members = {f"{root}/Annotations/000001.xml": _xml(_obj("bus", (1, 1, 20, 10)), 40, 20),
               f"{root}/JPEGImages/000001.jpg": jpg.getvalue()}
    path = tmp_path / "v.tar"
    path.write_bytes(_tar(members, "w"))
    x, labels, boxes, ids = P.read_voc([path], 4)
    assert x.shape == (1, 3, 4, 4) and labels.tolist() == [P.VOC_CLASSES.index("bus")] and ids == ["v.tar:000001"]
    np.testing.assert_allclose(boxes[0], [0, 0, 0.5, 0.5])
    assert x[0, 0, :, 0].tolist() == [255] * 4 and x[0, 2, :, 3].tolist() == [255] * 4  # left red, right blue
    members[f"{root}/Annotations/000002.xml"] = members[f"{root}/Annotations/000001.xml"]
    path.write_bytes(_tar(members, "w"))
    with pytest.raises(DataError, match="without both.*000002"):
        P.read_voc([path], 4)


def test_box_iou_and_multitask_costs_by_hand():
    a = np.array([[0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    b = np.array([[0.25, 0.25, 0.75, 0.75], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(P.box_iou(a, b), [0.0625 / (0.25 + 0.25 - 0.0625), 1.0, 0.0])
    y, box = np.array([3]), np.array([[0.0, 0.0, 1.0, 1.0]])
    pl = np.array([[3, 4, 3]])
    pb = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.5, 1.0]]])
    c = A.multitask_costs(y, box, pl, pb, [0.05, 0.10], lam=1.0)
    np.testing.assert_allclose(c, [[0.0, (1 + 0 + 0.05) / 2.1, (0 + 0.5 + 0.10) / 2.1]])


def test_simulated_box_experts_know_their_classes():
    y = np.array([2, 2, 5, 5])
    box = np.tile([0.2, 0.2, 0.6, 0.6], (4, 1))
    labels, boxes = A.simulate_box_experts(y, box, [(2,), (5,)], 1.0, 0.0, 20, seed=0)
    assert labels[:2, 0].tolist() == [2, 2] and labels[2:, 1].tolist() == [5, 5]
    np.testing.assert_allclose(boxes[:2, 0], box[:2])
    assert (boxes[..., 2] >= boxes[..., 0]).all() and (boxes[..., 3] >= boxes[..., 1]).all()
    again = A.simulate_box_experts(y, box, [(2,), (5,)], 1.0, 0.0, 20, seed=0)
    assert np.array_equal(labels, again[0]) and np.array_equal(boxes, again[1])


# --------------------------------------------------------------------------------------- models and records


def test_resnet18_standard_size_and_flat_input():
    assert sum(p.numel() for p in ResNet18((3, 32, 32), 10, 64).parameters()) == 11_173_962  # the CIFAR ResNet-18
    net = build_rejector({"rejector": "resnet18", "width": 2, "image_shape": [3, 8, 8]}, 192, 3, seed=0).eval()
    x = torch.rand(4, 3, 8, 8)
    assert torch.equal(net(x.view(4, -1)), net(x)) and net(x).shape == (4, 3)
    with pytest.raises(ValueError, match="does not match 100"):
        build_rejector({"rejector": "resnet18", "width": 2, "image_shape": [3, 8, 8]}, 100, 3, seed=0)


@pytest.fixture(scope="module")
def miniatures(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    manifest = read_manifest(D.MANIFEST, rehearsal=False)
    names = R.write_miniatures(root, manifest)
    return root, manifest, names


_IMG_CFG = {"split": (0.3, 0.4, 0.1, 0.2), "main_weak_classes": (5, 6, 7, 8, 9), "main_weak_keep": 0.1,
            "main_width": 2, "main_epochs": 1, "main_lr": 0.1, "main_batch_size": 16, "box_weight": 1.0,
            "expert_classes": ((5, 6, 7), (7, 8, 9)), "expert_p": 0.95, "beta": (0.05, 0.10)}


def test_cifar_prep_round_trips_and_threat_model_cost_matches_stored(miniatures):
    root, manifest, _ = miniatures
    data = D.read_paper_raw("cifar10", [root / manifest["cifar10"].mirror_path])
    prep = D.prepare("cifar10", 0, {"cifar10": _IMG_CFG, "device": "cpu"}, data)
    arrays = {**D.prepared_arrays(prep, 0, shared_x=True), "x": prep["x"],
              **D.dataset_arrays("cifar10", prep["task"], prep["beta"], prep["clip"], prep["cost_scale"])}
    back = D.prepared_from_arrays(arrays, 0)
    assert back["x"].shape == (120, 3072) and back["x"].dtype == np.float32 and back["task"] == "classification"
    assert np.array_equal(back["x"], data[0].reshape(120, -1).astype(np.float32) / np.float32(255))
    te = back["idx"]["test"]
    np.testing.assert_array_equal(D.main_costs_at(back, back["x"][te], te), back["costs"][te, 0])
    fees = {round(float(v), 5) for v in np.unique(back["costs"][:, 1:].astype(np.float64) * 1.1)}
    assert fees <= {0.05, 0.1, 1.05, 1.1}  # expert costs: (1{wrong} + beta_j) / (1 + max beta)


def test_voc_prep_multitask_costs_and_threat_model(miniatures):
    root, manifest, _ = miniatures
    data = D.read_paper_raw("voc2007", [root / manifest[n].mirror_path for n in D.DATASET_FILES["voc2007"]], 16)
    cfg = {**_IMG_CFG, "image_size": 16, "main_batch_size": 8, "expert_classes": ((2, 7), (0, 1)), "expert_p": 0.9,
           "expert_box_noise": 0.05, "lambda_reg": 1.0}
    prep = D.prepare("voc2007", 1, {"voc2007": cfg, "device": "cpu"}, data)
    assert prep["task"] == "multitask" and prep["costs"].min() >= 0 and prep["costs"].max() <= 1
    arrays = {**D.prepared_arrays(prep, 1, shared_x=True), "x": prep["x"],
              **D.dataset_arrays("voc2007", prep["task"], prep["beta"], prep["clip"], prep["cost_scale"])}
    back = D.prepared_from_arrays(arrays, 1)
    te = back["idx"]["test"]
    np.testing.assert_allclose(D.main_costs_at(back, back["x"][te], te), back["costs"][te, 0], atol=1e-6)


def test_california_prep_standardises_with_agent_rows(miniatures):
    root, manifest, _ = miniatures
    data = D.read_paper_raw("california_housing", [root / manifest["california_housing"].mirror_path])
    cfg = {"split": (0.3, 0.4, 0.1, 0.2), "main_features": ("MedInc",), "ridge_alpha": 1.0, "beta": (0.05, 0.1),
           "cost_scale": 4.0}
    prep = D.prepare("california_housing", 0, {"california_housing": cfg}, data)
    a = prep["idx"]["agents"]
    np.testing.assert_allclose(prep["x"][a].mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(prep["y"][a].mean(), 0, atol=1e-12)
    te = prep["idx"]["test"]
    np.testing.assert_allclose(D.main_costs_at(prep, prep["x"][te], te), prep["costs"][te, 0], atol=1e-7)


def test_describe_per_seed_skips_undefined_seeds():
    d = describe_per_seed([0.2, float("nan"), 0.4])
    assert d["n"] == 2 and d["undefined_seeds"] == 1 and d["mean"] == pytest.approx(0.3)
    assert describe_per_seed([float("nan")])["mean"] is None


# ------------------------------------------------------------------------------------------- the miniatures


def test_miniatures_have_the_real_formats_and_are_deterministic(miniatures, tmp_path):
    root, manifest, names = miniatures
    assert names == ["cifar10", "california_housing", "voc2007_trainval", "voc2007_test"]
    with tarfile.open(root / manifest["cifar10"].mirror_path, "r:gz") as tar:
        got = {m.name for m in tar.getmembers()}
        doc = pickle.loads(tar.extractfile("cifar-10-batches-py/data_batch_1").read(), encoding="bytes")
        meta = pickle.loads(tar.extractfile("cifar-10-batches-py/batches.meta").read(), encoding="bytes")
    assert set(P.CIFAR10_MEMBERS) | {"cifar-10-batches-py/batches.meta"} <= got
    assert set(doc) == {b"batch_label", b"labels", b"data", b"filenames"}
    assert doc[b"data"].dtype == np.uint8 and doc[b"data"].shape == (R.CIFAR_PER_BATCH, 3072)
    assert meta[b"label_names"][0] == b"airplane"
    with tarfile.open(root / manifest["voc2007_test"].mirror_path, "r:") as tar:
        assert f"{P.VOC_ROOT}/ImageSets/Main/test.txt" in tar.getnames()
    R.write_miniatures(tmp_path, manifest)
    for n in names:
        p = manifest[n].mirror_path
        assert (tmp_path / p).read_bytes() == (root / p).read_bytes(), n
