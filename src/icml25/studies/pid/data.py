"""Real photos from package wheels, crops, the split by source image, and the JPEG-alignment utility.

The real class is the 8-bit RGB photos shipped in the scikit-image 0.26 (``skimage/data/``) and scikit-learn 1.9
(``sklearn/datasets/images/``) wheels. Each file's bytes are checked against a pinned sha256
(:func:`icml25.core.datasets.packaged_bytes`) and the decoded array (Pillow) against a second pinned sha256,
since JPEG decoders can differ. Crops are exact slices of the decoded image: nothing in this package resizes.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import numpy as np

from icml25.core.datasets import DataError, packaged_bytes


@dataclass(frozen=True)
class RealImage:
    package: str
    path: str
    sha256: str  #: of the file's bytes in the wheel
    array_sha256: str  #: of the decoded (H, W, 3) uint8 C-order array
    shape: tuple[int, int]  #: (H, W)
    fmt: str  #: "png" | "jpeg"
    licence: str


_SK, _SL = "scikit-image==0.26.0", "scikit-learn==1.9.1"
REAL_IMAGES: dict[str, RealImage] = {
    "astronaut": RealImage("skimage", "data/astronaut.png",
                           "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5", "a8c429c18afa7b0fd5673e598d73a21225d94c864a71bbb3885126fdecb41071", (512, 512), "png",
                           "public domain"),
    "chelsea": RealImage("skimage", "data/chelsea.png",
                         "596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb", "416b729128bfb2c3d1eb69bf9b1734a796293abc17939267b2dc94f8a5784031", (300, 451), "png", "CC0"),
    "coffee": RealImage("skimage", "data/coffee.png",
                        "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7", "0ce2b51640b9c95f19617f03eabf40c3f0368589cc1ee1190b70966165ac184f", (400, 600), "png", "CC0"),
    "ihc": RealImage("skimage", "data/ihc.png",
                     "f8dd1aa387ddd1f49d8ad13b50921b237df8e9b262606d258770687b0ef93cef", "c5b3ef509a92f16d4c29be8cf0300fe75d53e13a3ce650159db932caea8dcc1b", (512, 512), "png",
                     "no known restrictions"),
    "motorcycle_left": RealImage("skimage", "data/motorcycle_left.png",
                                 "db18e9c4157617403c3537a6ba355dfeafe9a7eabb6b9b94cb33f6525dd49179", "ca829467c1d4f427da9c4862ba43829da6ac90afe1f75735e95dba9e3fd9620b", (500, 741),
                                 "png", "Middlebury 2014 stereo terms"),
    "motorcycle_right": RealImage("skimage", "data/motorcycle_right.png",
                                  "5fc913ae870e42a4b662314bc904d1786bcad8e2f0b9b67dba5a229406357797", "ae44d83f55e66623c7985499fd2f1685a56023e442e66eca89b3457dd46b17af", (500, 741),
                                  "png", "Middlebury 2014 stereo terms"),
    "hubble_deep_field": RealImage("skimage", "data/hubble_deep_field.jpg",
                                   "3a19c5dd8a927a9334bb1229a6d63711b1c0c767fb27e2286e7c84a3e2c2f5f4", "9a3ea9548188f81e63435188456e74de45a981ebeb791e265abe79a26d3b528b", (872, 1000),
                                   "jpeg", "NASA, public domain"),
    "retina": RealImage("skimage", "data/retina.jpg",
                        "38a07f36f27f095e818aea7b96d34202c05176d30253c66733f2e00379e9e0e6", "3670e389d0dae9f755cc1bb7e4da4c3d2cdf10eba2dc3060836d8d4b8024d860", (1411, 1411), "jpeg",
                        "CC0"),
    "rocket": RealImage("skimage", "data/rocket.jpg",
                        "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c", "3d4435cc745752b7f9724df88c6e18817de3ce7e3d2d71c55f85f7831e68f197", (427, 640), "jpeg",
                        "SpaceX, public domain"),
    "china": RealImage("sklearn", "datasets/images/china.jpg",
                       "8378025ad2519d649d02e32bd98990db4ab572357d9f09841c2fbfbb4fefad29", "e701459344fd69797154c91add3bb5d70e5ed1a61d8bed889bab3a796104698d", (427, 640), "jpeg",
                       "CC BY 2.0"),
    "flower": RealImage("sklearn", "datasets/images/flower.jpg",
                        "a77f6ec41e353afdf8bdff2ea981b2955535d8d83294f8cfa49cf4e423dd5638", "3202904ed246795bf616c66d7859cd7c6080eff736c6e38dc5cc62779742033f", (427, 640), "jpeg",
                        "CC BY 2.0"),
}
#: Split by source image [R]; the motorcycle stereo pair stays together.
TRAIN_IMAGES = ("astronaut", "coffee", "motorcycle_left", "motorcycle_right", "retina", "china")
TEST_IMAGES = ("chelsea", "ihc", "hubble_deep_field", "rocket", "flower")


def image_bytes(name: str) -> bytes:
    """The sha256-verified file bytes of real image ``name`` from its wheel."""
    if name not in REAL_IMAGES:
        raise DataError(f"real image {name!r} unknown; known: {sorted(REAL_IMAGES)}")
    im = REAL_IMAGES[name]
    return packaged_bytes(im.package, im.path, im.sha256, requirement=_SK if im.package == "skimage" else _SL)


def decode_rgb(raw: bytes, name: str) -> np.ndarray:
    """Decode PNG/JPEG bytes to (H, W, 3) uint8; a truncated, grey, RGBA, palette or 16-bit file raises DataError
    naming ``name`` (the study excludes such images rather than converting them)."""
    from PIL import Image
    try:
        with Image.open(io.BytesIO(raw)) as img:
            img.load()
            mode = img.mode
            arr = np.asarray(img)
    except Exception as err:  # noqa: BLE001 -- Pillow raises many types for corrupt files
        raise DataError(f"{name}: cannot decode image ({err})") from None
    if mode != "RGB" or arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise DataError(f"{name}: expected 8-bit RGB, got mode {mode} dtype {arr.dtype} shape {arr.shape}")
    return np.ascontiguousarray(arr)


def array_sha256(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def load_real_image(name: str, path=None) -> np.ndarray:
    """Real image ``name`` as read-only (H, W, 3) uint8, file and decoded-array hashes verified; read from its
    wheel, or from the file ``path`` (a copy made by the download stage) when given."""
    if path is None:
        raw = image_bytes(name)  # raises DataError for an unknown name
        where = f"{REAL_IMAGES[name].package}/{REAL_IMAGES[name].path}"
    else:
        if name not in REAL_IMAGES:
            raise DataError(f"{path}: real image {name!r} unknown; known: {sorted(REAL_IMAGES)}")
        raw, where = open(path, "rb").read(), str(path)
        got = hashlib.sha256(raw).hexdigest()
        if got != REAL_IMAGES[name].sha256:
            raise DataError(f"{where}: sha256 {got} differs from the pinned {REAL_IMAGES[name].sha256}")
    im = REAL_IMAGES[name]
    arr = decode_rgb(raw, where)
    if arr.shape[:2] != im.shape:
        raise DataError(f"{where}: decoded shape {arr.shape[:2]} differs from {im.shape}")
    if im.array_sha256 and array_sha256(arr) != im.array_sha256:
        raise DataError(f"{where}: decoded array sha256 {array_sha256(arr)} differs from the pinned "
                        f"{im.array_sha256} (different JPEG decoder?)")
    arr.flags.writeable = False
    return arr


def crop_positions(shape: tuple[int, int], size: int = 64, stride: int = 32) -> np.ndarray:
    """Top-left corners (n, 2) int64 of the size x size grid crops at ``stride`` inside an (H, W) image."""
    h, w = shape
    if h < size or w < size:
        return np.zeros((0, 2), dtype=np.int64)
    ys, xs = np.arange(0, h - size + 1, stride), np.arange(0, w - size + 1, stride)
    return np.stack(np.meshgrid(ys, xs, indexing="ij"), -1).reshape(-1, 2).astype(np.int64)


def _crop_keep(img: np.ndarray, pos: np.ndarray, size: int, min_std: float) -> np.ndarray:
    """Mask (n,) of the crops at corners ``pos`` whose every channel has (population) std >= ``min_std``: the same
    decision as ``crop.astype(float64).std(axis=pixels).min() >= min_std`` on each stacked crop, without stacking
    every crop of the image. Per channel, integral images give each crop's exact integer sums S1 = Σx, S2 = Σx²
    (int64), so N²·var = N·S2 − S1² exactly (N = size²); only a crop whose exact variance lies within 1e-9
    (relative) of min_std² is decided by numpy's float std of its pixels, as before."""
    n_pix = size * size
    thr = float(min_std) ** 2
    keep = np.ones(len(pos), dtype=bool)
    ys, xs = pos[:, 0], pos[:, 1]
    for ch in range(img.shape[2]):
        plane = img[:, :, ch].astype(np.int64)
        sums = []
        for a in (plane, plane * plane):
            ii = np.zeros((a.shape[0] + 1, a.shape[1] + 1), dtype=np.int64)
            np.cumsum(np.cumsum(a, axis=0), axis=1, out=ii[1:, 1:])
            sums.append(ii[ys + size, xs + size] - ii[ys, xs + size] - ii[ys + size, xs] + ii[ys, xs])
        num = n_pix * sums[1] - sums[0] * sums[0]  # N² var, exact
        var = num / float(n_pix * n_pix)
        near = np.abs(var - thr) <= 1e-9 * max(thr, 1.0)
        ok = var >= thr
        for i in np.flatnonzero(near & keep):  # borderline: numpy's float64 std decides, as it did
            y, x = pos[i]
            ok[i] = img[y:y + size, x:x + size, ch].astype(np.float64).std() >= min_std
        keep &= ok
    return keep


def extract_crops(img: np.ndarray, size: int = 64, stride: int = 32, min_std: float = 2.0, max_crops: int = 256,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Grid crops of ``img`` (H, W, 3) uint8: (n, size, size, 3) uint8 exact slices and their corners (n, 2).

    Crops in which any channel has std < ``min_std`` are dropped; at most ``max_crops`` are kept as a subset drawn
    with ``default_rng(seed)`` (kept in grid order). Only the kept crops are copied out of the image."""
    pos = crop_positions(img.shape[:2], size, stride)
    pos = pos[_crop_keep(img, pos, size, min_std)] if len(pos) else pos
    if len(pos) > max_crops:
        sel = np.sort(np.random.default_rng(seed).choice(len(pos), max_crops, replace=False))
        pos = pos[sel]
    crops = np.stack([img[y:y + size, x:x + size] for y, x in pos]) if len(pos) else np.zeros((0, size, size, 3),
                                                                                                np.uint8)
    return np.ascontiguousarray(crops), pos


def real_crops(images, size: int = 64, stride: int = 32, min_std: float = 2.0, max_crops: int = 256,
               seed: int = 0, paths=None) -> dict[str, np.ndarray]:
    """Crops of every image in ``images`` (names): ``x`` (n, size, size, 3) uint8, ``source`` (n,) image index into
    ``names``, ``pos`` (n, 2), ``names`` and ``is_jpeg`` (n,) bool (source file format)."""
    xs, src, pos = [], [], []
    names = tuple(images)
    for i, name in enumerate(names):
        c, p = extract_crops(load_real_image(name, (paths or {}).get(name)), size, stride, min_std, max_crops, seed)
        xs.append(c)
        pos.append(p)
        src.append(np.full(len(c), i, dtype=np.int64))
    src_a = np.concatenate(src)
    jpeg = np.array([REAL_IMAGES[n].fmt == "jpeg" for n in names])[src_a]
    return {"x": np.concatenate(xs), "source": src_a, "pos": np.concatenate(pos), "names": np.array(names),
            "is_jpeg": jpeg}


def jpeg_roundtrip(x: np.ndarray, quality: int) -> np.ndarray:
    """JPEG-compress and decode each (H, W, 3) uint8 image of ``x`` (..., H, W, 3) at ``quality`` with 4:4:4
    chroma (Pillow ``subsampling=0``), applied alike to both classes (claim 4)."""
    from PIL import Image
    flat = x.reshape(-1, *x.shape[-3:])
    out = np.empty_like(flat)
    for i, im in enumerate(flat):
        buf = io.BytesIO()
        Image.fromarray(im).save(buf, format="JPEG", quality=int(quality), subsampling=0)
        buf.seek(0)
        with Image.open(buf) as d:
            out[i] = np.asarray(d.convert("RGB"))
    return out.reshape(x.shape)
