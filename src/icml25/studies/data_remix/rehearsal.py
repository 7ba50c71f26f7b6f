"""Miniature files for the paper-scale rehearsal of data_remix (``icml25.core.rehearsal``).

Downloaded (``write_miniatures``, at each manifest row's ``mirror_path``), in the exact formats of the OGM-GE lists
the real run fetches:

* CREMA-D ``data.csv`` / ``test.csv``: header-less ``<clip>,<emotion>`` rows, clip names
  ``<actor>_<sentence>_<emotion>_<level>`` (4 clips per emotion, one of them in test.csv; one extra train clip is
  listed but has no files, as a clip the released loader skips);
* Kinetics-Sounds ``my_train.txt`` / ``my_test.txt``: ``<youtube id>_<start>,10,<class>`` rows (31 classes, 2 train
  and 1 test clip each).

Hand-placed (``write_manual``, under ``results/rehearsal/mirror/manual/data_remix/``), in the layout the loader
checks (:mod:`.paper_data`):

* ``cremad/AudioWAV/<clip>.wav``: 16 kHz mono 16-bit PCM, as the CREMA-D repository's files (0.25 s here);
* ``kinetics_sounds/audio/<clip>.wav``: 16 kHz mono 16-bit PCM, as the ffmpeg extraction writes;
* ``<dataset>/Image-01-FPS/<clip>/frame_0000<k>.jpg``: 3 RGB JPEG frames (32 × 24 here; CREMA-D's are 480 × 360).

Content: a class-dependent tone plus noise, class-coloured frames plus noise, all from fixed seeds (identical bytes
on every call; no archives, so no timestamps).
"""
from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from scipy.io import wavfile

from .paper_data import AUDIO_DIR, CREMAD_EMOTIONS, FRAMES_DIR

SAMPLE_RATE = 16000  #: CREMA-D's rate and the ffmpeg extraction's (-ar 16000)
WAV_SECONDS = 0.25
N_FRAMES = 3
FRAME_WH = (32, 24)
KS_CLASSES = 31
SENTENCES = ("DFA", "IEO", "ITH", "TIE")
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _cremad_clips() -> dict[str, list[tuple[str, str]]]:
    """{"all", "test", "absent"}: (clip, emotion) rows of the CREMA-D miniature."""
    rows, test = [], []
    for e, emo in enumerate(CREMAD_EMOTIONS):
        for k, sentence in enumerate(SENTENCES):
            clip = (f"10{10 + e:02d}_{sentence}_{emo}_XX", emo)
            rows.append(clip)
            if k == 3:
                test.append(clip)
    absent = [("1091_IEO_NEU_XX", "NEU")]
    return {"all": rows + absent, "test": test, "absent": absent}


def _ks_clips() -> dict[str, list[tuple[str, int]]]:
    rng = np.random.default_rng(34)
    out: dict[str, list[tuple[str, int]]] = {"train": [], "test": []}
    for c in range(KS_CLASSES):
        for split in ("train", "train", "test"):
            yid = "".join(rng.choice(list(_ID_CHARS), 11))
            out[split].append((f"{yid}_{int(rng.integers(0, 300))}", c))
    return out


def _csv(rows) -> bytes:
    return "".join(",".join(map(str, r)) + "\n" for r in rows).encode()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """The four split lists at their manifest ``mirror_path`` under ``root``; returns the row names."""
    cd, ks = _cremad_clips(), _ks_clips()
    files = {"cremad_data_csv": _csv(cd["all"]), "cremad_test_csv": _csv(cd["test"]),
             "ks_train_list": _csv((clip, 10, c) for clip, c in ks["train"]),
             "ks_test_list": _csv((clip, 10, c) for clip, c in ks["test"])}
    for name, data in files.items():
        _write(Path(root) / manifest[name].mirror_path, data)
    return list(files)


def _wav(label: int, rng: np.random.Generator) -> bytes:
    t = np.arange(int(SAMPLE_RATE * WAV_SECONDS)) / SAMPLE_RATE
    x = 0.3 * np.sin(2 * np.pi * (200.0 + 60.0 * label) * t) + 0.05 * rng.standard_normal(t.size)
    buf = io.BytesIO()
    wavfile.write(buf, SAMPLE_RATE, np.round(np.clip(x, -1, 1) * 32767).astype(np.int16))
    return buf.getvalue()


def _jpeg(label: int, n_classes: int, rng: np.random.Generator) -> bytes:
    from PIL import Image

    w, h = FRAME_WH
    hue = np.array([255.0 * label / n_classes, 128.0, 255.0 * (1 - label / n_classes)])
    img = np.clip(hue + 40 * rng.standard_normal((h, w, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img, "RGB").save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _clip_files(root: Path, dataset: str, clip: str, label: int, n_classes: int, rng: np.random.Generator) -> None:
    _write(root / AUDIO_DIR[dataset] / f"{clip}.wav", _wav(label, rng))
    for k in range(1, N_FRAMES + 1):
        _write(root / FRAMES_DIR / clip / f"frame_0000{k}.jpg", _jpeg(label, n_classes, rng))


def write_manual(root: Path) -> None:
    """The hand-placed clips of both datasets under ``root`` (``cremad/``, ``kinetics_sounds/``)."""
    root = Path(root)
    rng = np.random.default_rng(3401)
    cd = _cremad_clips()
    absent = {c for c, _ in cd["absent"]}
    for clip, emo in cd["all"]:
        if clip not in absent:
            _clip_files(root / "cremad", "cremad", clip, CREMAD_EMOTIONS.index(emo), len(CREMAD_EMOTIONS), rng)
    for split in ("train", "test"):
        for clip, c in _ks_clips()[split]:
            _clip_files(root / "kinetics_sounds", "kinetics_sounds", clip, c, KS_CLASSES, rng)
