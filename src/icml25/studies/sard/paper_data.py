"""Readers of the sard paper-scale archives (CIFAR-10, California Housing, Pascal VOC 2007), as their publishers
ship them. Every reader takes the downloaded file(s) of ``raw/`` and returns plain arrays; bad input raises
:class:`icml25.core.datasets.DataError` naming the file, the member and the key / column.

* ``cifar-10-python.tar.gz``: members ``cifar-10-batches-py/data_batch_1..5`` and ``test_batch``, each a python
  pickle (protocol 2) of a dict with bytes keys ``b"data"`` (uint8 (10000, 3072), channel-major RGB rows) and
  ``b"labels"`` (list of 10000 ints 0..9). Unpickled through :class:`RestrictedUnpickler`, which admits only
  NumPy's array reconstructors (an untrusted pickle can call nothing else).
* ``cal_housing.tgz`` (figshare 5976036, the archive scikit-learn's ``fetch_california_housing`` reads): member
  ``CaliforniaHousing/cal_housing.data``, 20640 comma-separated rows of 9 floats (longitude, latitude,
  housingMedianAge, totalRooms, totalBedrooms, population, households, medianIncome, medianHouseValue).
  :func:`read_california_housing` derives scikit-learn's 8 features (MedInc, HouseAge, AveRooms, AveBedrms,
  Population, AveOccup, Latitude, Longitude) and the target in units of 100,000 $, exactly as scikit-learn does.
* ``VOCtrainval_06-Nov-2007.tar`` / ``VOCtest_06-Nov-2007.tar``: ``VOCdevkit/VOC2007/Annotations/<id>.xml`` (one
  ``<object>`` per box: ``<name>``, ``<difficult>``, ``<bndbox>`` with 1-based pixel ``xmin ymin xmax ymax``) and
  ``VOCdevkit/VOC2007/JPEGImages/<id>.jpg``. :func:`read_voc` keeps, per image, its largest non-difficult object
  (the multi-task target [R]: its class and its box, normalised to [0, 1] by the image size) and the image
  resized to ``size × size`` (bilinear, Pillow), uint8 (3, size, size).
"""
from __future__ import annotations

import io
import pickle
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from icml25.core.datasets import DataError, read_archive

CIFAR10_MEMBERS = tuple(f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)) + ("cifar-10-batches-py/test_batch",)
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CAL_HOUSING_MEMBER = "CaliforniaHousing/cal_housing.data"
#: columns of cal_housing.data, in file order
CAL_HOUSING_COLUMNS = ("longitude", "latitude", "housingMedianAge", "totalRooms", "totalBedrooms", "population",
                       "households", "medianIncome", "medianHouseValue")
#: scikit-learn's feature names of fetch_california_housing, in its order
CAL_HOUSING_FEATURES = ("MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude",
                        "Longitude")
VOC_ROOT = "VOCdevkit/VOC2007"
VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow", "diningtable",
               "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor")


# ------------------------------------------------------------------------------------------------- CIFAR-10


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler for the CIFAR python batches: only NumPy's array reconstructors may be loaded."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str):  # noqa: D401
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"sard: CIFAR pickle refers to {module}.{name}, which is not allowed")
        return super().find_class(module, name)


def parse_cifar_batch(raw: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 batch pickle → (x (n, 3, 32, 32) uint8, y (n,) int64 in 0..9)."""
    try:
        doc = RestrictedUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise DataError(f"{where}: not a CIFAR batch pickle ({exc})") from exc
    if not isinstance(doc, dict):
        raise DataError(f"{where}: expected a dict, got {type(doc).__name__}")
    for key in (b"data", b"labels"):
        if key not in doc:
            raise DataError(f"{where}: key {key!r} missing (keys: {sorted(map(repr, doc))})")
    data = np.asarray(doc[b"data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{where}: key b'data' must be uint8 (n, 3072), got {data.dtype} {data.shape}")
    y = np.asarray(doc[b"labels"], dtype=np.int64)
    if y.shape != (len(data),):
        raise DataError(f"{where}: key b'labels' has {y.size} entries for {len(data)} images")
    if len(y) and (y.min() < 0 or y.max() > 9):
        raise DataError(f"{where}: key b'labels' must hold 0..9, got [{y.min()}, {y.max()}]")
    return data.reshape(-1, 3, 32, 32), y


def read_cifar10(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Every image of ``cifar-10-python.tar.gz`` (the 5 training batches, then the test batch):
    x (N, 3, 32, 32) uint8, y (N,) int64. The study pools them and draws its own splits (README)."""
    xs, ys = [], []
    with read_archive(path) as tar:
        for name in CIFAR10_MEMBERS:
            try:
                fh = tar.extractfile(name)
            except KeyError:
                fh = None
            if fh is None:
                raise DataError(f"{path}: member {name!r} missing (a CIFAR-10 python archive has {CIFAR10_MEMBERS})")
            x, y = parse_cifar_batch(fh.read(), f"{path}:{name}")
            xs.append(x)
            ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


# ---------------------------------------------------------------------------------------- California Housing


def parse_cal_housing(raw: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """cal_housing.data bytes → X (n, 8) float64 in :data:`CAL_HOUSING_FEATURES` order, y (n,) in 100,000 $.

    As scikit-learn: AveRooms = totalRooms / households, AveBedrms = totalBedrooms / households, AveOccup =
    population / households, target = medianHouseValue / 100000."""
    try:
        t = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise DataError(f"{where}: cannot parse as comma-separated floats ({exc})") from exc
    if t.shape[1] != len(CAL_HOUSING_COLUMNS) or len(t) == 0:
        raise DataError(f"{where}: expected {len(CAL_HOUSING_COLUMNS)} columns {CAL_HOUSING_COLUMNS}, got shape "
                        f"{t.shape}")
    if not np.isfinite(t).all():
        raise DataError(f"{where}: non-finite values in column(s) "
                        f"{[CAL_HOUSING_COLUMNS[j] for j in np.flatnonzero(~np.isfinite(t).all(axis=0))]}")
    col = {c: t[:, i] for i, c in enumerate(CAL_HOUSING_COLUMNS)}
    if (col["households"] <= 0).any():
        raise DataError(f"{where}: column 'households' must be positive (it divides rooms, bedrooms, population)")
    X = np.column_stack([col["medianIncome"], col["housingMedianAge"], col["totalRooms"] / col["households"],
                         col["totalBedrooms"] / col["households"], col["population"],
                         col["population"] / col["households"], col["latitude"], col["longitude"]])
    return X, col["medianHouseValue"] / 100000.0


def read_california_housing(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``cal_housing.tgz`` → :func:`parse_cal_housing` of its member ``CaliforniaHousing/cal_housing.data``."""
    with read_archive(path) as tar:
        try:
            fh = tar.extractfile(CAL_HOUSING_MEMBER)
        except KeyError:
            fh = None
        if fh is None:
            raise DataError(f"{path}: member {CAL_HOUSING_MEMBER!r} missing")
        raw = fh.read()
    return parse_cal_housing(raw, f"{path}:{CAL_HOUSING_MEMBER}")


# ------------------------------------------------------------------------------------------------ VOC 2007


def parse_voc_annotation(raw: bytes, where: str) -> tuple[int, np.ndarray, tuple[int, int]]:
    """One VOC XML → (class index of the largest non-difficult object (:data:`VOC_CLASSES`), its box
    (4,) float64 ``xmin ymin xmax ymax`` normalised to [0, 1] by the image size (1-based pixel corners mapped as
    (x − 1)/width and x/width), (width, height)). An image with only difficult objects uses its largest object."""
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as exc:
        raise DataError(f"{where}: not XML ({exc})") from exc
    try:
        w = int(float(root.findtext("size/width")))
        h = int(float(root.findtext("size/height")))
    except (TypeError, ValueError):
        raise DataError(f"{where}: <size><width>/<height> missing or not a number") from None
    if w <= 0 or h <= 0:
        raise DataError(f"{where}: image size {w}x{h} must be positive")
    objs = []
    for k, obj in enumerate(root.findall("object")):
        name = (obj.findtext("name") or "").strip()
        if name not in VOC_CLASSES:
            raise DataError(f"{where}: object {k}: <name> {name!r} is not a VOC class")
        try:
            box = [float(obj.findtext(f"bndbox/{t}")) for t in ("xmin", "ymin", "xmax", "ymax")]
        except (TypeError, ValueError):
            raise DataError(f"{where}: object {k}: <bndbox> xmin/ymin/xmax/ymax missing or not a number") from None
        if not (box[0] <= box[2] and box[1] <= box[3]):
            raise DataError(f"{where}: object {k}: <bndbox> has xmin > xmax or ymin > ymax: {box}")
        difficult = (obj.findtext("difficult") or "0").strip() == "1"
        objs.append((difficult, (box[2] - box[0] + 1) * (box[3] - box[1] + 1), VOC_CLASSES.index(name), box))
    if not objs:
        raise DataError(f"{where}: no <object>")
    pool = [o for o in objs if not o[0]] or objs
    _, _, label, box = max(pool, key=lambda o: o[1])  # first of equal areas
    norm = np.array([(box[0] - 1) / w, (box[1] - 1) / h, box[2] / w, box[3] / h], dtype=np.float64)
    return label, np.clip(norm, 0.0, 1.0), (w, h)


def decode_image(raw: bytes, size: int, where: str) -> np.ndarray:
    """JPEG bytes → uint8 (3, size, size) RGB, resized with Pillow's bilinear filter."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw)) as im:
            arr = np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR), dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(f"{where}: cannot decode the image ({exc})") from exc
    return np.ascontiguousarray(arr.transpose(2, 0, 1))


def read_voc(paths: Sequence[str | Path], size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The VOC 2007 tars (trainval, test) → x (N, 3, size, size) uint8, label (N,) int64, box (N, 4) float64
    normalised, ids (``<tar name>:<image id>``), images in tar order then id order. Every annotation must have
    its JPEG and vice versa."""
    xs, labels, boxes, ids = [], [], [], []
    for path in paths:
        ann: dict[str, bytes] = {}
        img: dict[str, bytes] = {}
        with read_archive(path) as tar:
            for m in tar:
                if not m.isfile():
                    continue
                if m.name.startswith(f"{VOC_ROOT}/Annotations/") and m.name.endswith(".xml"):
                    ann[Path(m.name).stem] = tar.extractfile(m).read()
                elif m.name.startswith(f"{VOC_ROOT}/JPEGImages/") and m.name.endswith(".jpg"):
                    img[Path(m.name).stem] = tar.extractfile(m).read()
        if not ann:
            raise DataError(f"{path}: no {VOC_ROOT}/Annotations/*.xml member (not a VOC 2007 tar?)")
        unpaired = sorted(set(ann) ^ set(img))
        if unpaired:
            raise DataError(f"{path}: {len(unpaired)} image id(s) without both Annotations/<id>.xml and "
                            f"JPEGImages/<id>.jpg, e.g. {unpaired[:3]}")
        for i in sorted(ann):
            label, box, _ = parse_voc_annotation(ann[i], f"{path}:{VOC_ROOT}/Annotations/{i}.xml")
            xs.append(decode_image(img[i], size, f"{path}:{VOC_ROOT}/JPEGImages/{i}.jpg"))
            labels.append(label)
            boxes.append(box)
            ids.append(f"{Path(path).name}:{i}")
    return np.stack(xs), np.asarray(labels, dtype=np.int64), np.stack(boxes), ids


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of paired boxes ``xmin ymin xmax ymax`` (n, 4) each → (n,) in [0, 1] (0 for an empty union)."""
    ix = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)
    inter = ix * iy
    area = lambda z: np.clip(z[:, 2] - z[:, 0], 0, None) * np.clip(z[:, 3] - z[:, 1], 0, None)  # noqa: E731
    union = area(a) + area(b) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
