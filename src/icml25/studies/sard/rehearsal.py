"""Miniature paper-scale archives of the sard study for the rehearsal (``icml25.core.rehearsal``).

Each miniature has the container, member names, encodings and dtypes of the real file; only the content is
synthetic, tiny and deterministic (fixed seeds; fixed mtimes, owners and gzip headers):

* ``cifar-10-python.tar.gz``: a gzip tar with ``cifar-10-batches-py/`` holding ``data_batch_1..5``, ``test_batch``
  (python pickles, protocol 2, dicts with bytes keys ``b"batch_label"``, ``b"labels"`` (list of int),
  ``b"data"`` (uint8 (n, 3072) channel-major rows), ``b"filenames"`` (list of bytes)), ``batches.meta`` and
  ``readme.html``; :data:`CIFAR_PER_BATCH` images per batch, each class a colour with noise (learnable);
* ``cal_housing.tgz``: ``CaliforniaHousing/cal_housing.data`` (comma-separated, 9 columns printed ``%f`` as in
  the StatLib file) and ``CaliforniaHousing/cal_housing.domain``; :data:`CAL_ROWS` rows of plausible values;
* ``VOCtrainval_06-Nov-2007.tar`` / ``VOCtest_06-Nov-2007.tar``: plain tars with ``VOCdevkit/VOC2007/`` holding
  ``Annotations/<id>.xml`` (the VOC XML schema: folder, filename, source, owner, size, segmented, objects with
  name, pose, truncated, difficult, bndbox), ``ImageSets/Main/{trainval,train,val}.txt`` or ``test.txt`` and
  ``JPEGImages/<id>.jpg`` (small baseline JPEGs with one coloured rectangle per object on a textured background).
"""
from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .paper_data import CIFAR10_CLASSES, VOC_CLASSES

CIFAR_PER_BATCH = 20   #: images per miniature CIFAR batch (the real batches hold 10,000)
CAL_ROWS = 240         #: rows of the miniature cal_housing.data (real: 20,640)
VOC_IMAGES = {"voc2007_trainval": 24, "voc2007_test": 16}  #: images per miniature VOC tar (real: 5,011 / 4,952)
MTIME = 1243814400     #: fixed tar member mtime (2009-06-01)


def _tar_bytes(members: list[tuple[str, bytes | None]], compress: bool) -> bytes:
    """A tar (GNU format) of ``(name, data)`` members in order (``data`` None = a directory), owner root, fixed
    mtime; gzip-compressed with a zero header mtime and no file name when ``compress``."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = MTIME, 0, 0, "", ""
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    if not compress:
        return raw.getvalue()
    out = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


# ------------------------------------------------------------------------------------------------- CIFAR-10


def _cifar_batch(rng: np.random.Generator, label: bytes, n: int) -> bytes:
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    colour = np.linspace(30, 225, 10)
    base = np.stack([colour[labels], colour[(labels * 3) % 10], colour[(labels * 7) % 10]], axis=1)  # (n, 3)
    img = base[:, :, None, None] + rng.normal(0, 25, (n, 3, 32, 32))
    data = np.clip(np.round(img), 0, 255).astype(np.uint8).reshape(n, 3072)
    doc = {b"batch_label": label, b"labels": [int(v) for v in labels], b"data": data,
           b"filenames": [f"{CIFAR10_CLASSES[v]}_s_{i:06d}.png".encode() for i, v in enumerate(labels)]}
    return pickle.dumps(doc, protocol=2)


def cifar10_tarball(seed: int = 20250701, per_batch: int = CIFAR_PER_BATCH) -> bytes:
    """The miniature ``cifar-10-python.tar.gz`` (members in the real archive's order)."""
    rng = np.random.default_rng(seed)
    d = "cifar-10-batches-py"
    batches = {f"data_batch_{i}": _cifar_batch(rng, f"training batch {i} of 5".encode(), per_batch)
               for i in range(1, 6)}
    batches["test_batch"] = _cifar_batch(rng, b"testing batch 1 of 1", per_batch)
    meta = pickle.dumps({b"num_cases_per_batch": per_batch,
                         b"label_names": [c.encode() for c in CIFAR10_CLASSES], b"num_vis": 3072}, protocol=2)
    readme = b"<meta HTTP-EQUIV=\"REFRESH\" content=\"0; URL=http://www.cs.toronto.edu/~kriz/cifar.html\">\n"
    order = ["data_batch_4", "readme.html", "test_batch", "data_batch_3", "batches.meta", "data_batch_2",
             "data_batch_5", "data_batch_1"]
    files = {**batches, "batches.meta": meta, "readme.html": readme}
    return _tar_bytes([(d, None)] + [(f"{d}/{name}", files[name]) for name in order], compress=True)


# ---------------------------------------------------------------------------------------- California Housing


def cal_housing_tgz(seed: int = 20250702, n: int = CAL_ROWS) -> bytes:
    """The miniature ``cal_housing.tgz``: ``CaliforniaHousing/cal_housing.data`` + ``.domain``."""
    rng = np.random.default_rng(seed)
    lon = rng.uniform(-124.3, -114.3, n)
    lat = rng.uniform(32.5, 42.0, n)
    age = rng.integers(1, 53, n).astype(float)
    households = rng.integers(20, 2000, n).astype(float)
    rooms = np.round(households * rng.uniform(3, 7, n))
    bedrooms = np.round(households * rng.uniform(0.9, 1.3, n))
    population = np.round(households * rng.uniform(1.5, 4.5, n))
    income = np.round(rng.gamma(4.0, 1.0, n) + 0.5, 4)
    value = np.clip(np.round(40000 * income + 3000 * (lat < 38) * (lon < -121) * 10 + rng.normal(0, 30000, n)),
                    14999, 500001)
    table = np.column_stack([lon, lat, age, rooms, bedrooms, population, households, income, value])
    data = "".join(",".join(f"{v:f}" for v in row) + "\n" for row in table).encode()
    domain = ("longitude: continuous.\nlatitude: continuous.\nhousingMedianAge: continuous.\n"
              "totalRooms: continuous.\ntotalBedrooms: continuous.\npopulation: continuous.\n"
              "households: continuous.\nmedianIncome: continuous.\nmedianHouseValue: continuous.\n").encode()
    return _tar_bytes([("CaliforniaHousing", None), ("CaliforniaHousing/cal_housing.data", data),
                       ("CaliforniaHousing/cal_housing.domain", domain)], compress=True)


# ------------------------------------------------------------------------------------------------ VOC 2007


def _voc_xml(image_id: str, w: int, h: int, objects: list[tuple[str, int, tuple[int, int, int, int]]]) -> bytes:
    objs = "".join(
        f"\t<object>\n\t\t<name>{name}</name>\n\t\t<pose>Unspecified</pose>\n\t\t<truncated>0</truncated>\n"
        f"\t\t<difficult>{difficult}</difficult>\n\t\t<bndbox>\n\t\t\t<xmin>{b[0]}</xmin>\n\t\t\t<ymin>{b[1]}</ymin>\n"
        f"\t\t\t<xmax>{b[2]}</xmax>\n\t\t\t<ymax>{b[3]}</ymax>\n\t\t</bndbox>\n\t</object>\n"
        for name, difficult, b in objects)
    return (f"<annotation>\n\t<folder>VOC2007</folder>\n\t<filename>{image_id}.jpg</filename>\n\t<source>\n"
            f"\t\t<database>The VOC2007 Database</database>\n\t\t<annotation>PASCAL VOC2007</annotation>\n"
            f"\t\t<image>flickr</image>\n\t\t<flickrid>0</flickrid>\n\t</source>\n\t<owner>\n"
            f"\t\t<flickrid>rehearsal</flickrid>\n\t\t<name>?</name>\n\t</owner>\n\t<size>\n\t\t<width>{w}</width>\n"
            f"\t\t<height>{h}</height>\n\t\t<depth>3</depth>\n\t</size>\n\t<segmented>0</segmented>\n{objs}"
            f"</annotation>\n").encode()


def _jpeg(rng: np.random.Generator, w: int, h: int, objects) -> bytes:
    from PIL import Image

    img = rng.integers(60, 120, (h, w, 3)).astype(np.uint8)
    for name, _, (x0, y0, x1, y1) in objects:
        k = VOC_CLASSES.index(name)
        img[y0 - 1:y1, x0 - 1:x1] = (12 * k % 256, 255 - 12 * k, (80 + 40 * k) % 256)
    out = io.BytesIO()
    Image.fromarray(img).save(out, format="JPEG", quality=90)
    return out.getvalue()


def voc_tar(which: str, seed: int) -> bytes:
    """A miniature VOC 2007 tar: ``which`` = ``voc2007_trainval`` or ``voc2007_test``."""
    rng = np.random.default_rng(seed)
    n = VOC_IMAGES[which]
    first = 5 if which == "voc2007_trainval" else 1
    ids = [f"{first + 2 * i:06d}" for i in range(n)]
    root = "VOCdevkit/VOC2007"
    ann, jpg = [], []
    for image_id in ids:
        w, h = int(rng.integers(40, 64)), int(rng.integers(32, 56))
        objects = []
        for k in range(int(rng.integers(1, 3))):
            bw, bh = int(rng.integers(8, w // 2)), int(rng.integers(8, h // 2))
            x0, y0 = int(rng.integers(1, w - bw)), int(rng.integers(1, h - bh))
            objects.append((VOC_CLASSES[int(rng.integers(0, 20))], int(k == 1 and rng.random() < 0.5),
                            (x0, y0, x0 + bw, y0 + bh)))
        ann.append((f"{root}/Annotations/{image_id}.xml", _voc_xml(image_id, w, h, objects)))
        jpg.append((f"{root}/JPEGImages/{image_id}.jpg", _jpeg(rng, w, h, objects)))
    if which == "voc2007_trainval":
        half = n // 2
        sets = {"trainval.txt": ids, "train.txt": ids[:half], "val.txt": ids[half:]}
    else:
        sets = {"test.txt": ids}
    lists = [(f"{root}/ImageSets/Main/{name}", "".join(i + "\n" for i in v).encode()) for name, v in sets.items()]
    dirs = [("VOCdevkit", None), (root, None), (f"{root}/Annotations", None), (f"{root}/ImageSets", None),
            (f"{root}/ImageSets/Main", None), (f"{root}/JPEGImages", None)]
    return _tar_bytes(dirs[:3] + ann + dirs[3:5] + lists + dirs[5:] + jpg, compress=False)


# -------------------------------------------------------------------------------------------------- entry


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write the paper-scale archives at their manifest ``mirror_path`` under ``root``; return the row names.
    The three scikit-learn rows of the offline scales are not part of the paper DAG and are not written."""
    files = {"cifar10": cifar10_tarball(), "california_housing": cal_housing_tgz(),
             "voc2007_trainval": voc_tar("voc2007_trainval", 20250703),
             "voc2007_test": voc_tar("voc2007_test", 20250704)}
    for name, data in files.items():
        dest = Path(root) / manifest[name].mirror_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists() or dest.read_bytes() != data:
            tmp = dest.with_name(dest.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(dest)
    return list(files)
