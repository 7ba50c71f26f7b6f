"""The paper's datasets, CREMA-D and Kinetics-Sounds: split lists, hand-placed clips, and the arrays the train stage
reads (paper §4.1; the released data loader ``AV_CD_Dataset`` and the OGM-GE lists it adapts) [V].

Split lists (downloaded, ``manifest.csv``; from the OGM-GE repository the released code builds on):

* CREMA-D: ``data.csv`` (all 7442 clips) and ``test.csv`` (744), rows ``<clip>,<emotion>`` without header, emotion
  in NEU HAP SAD FEA DIS ANG; train = data − test (6698 clips). The clip name's third field is the emotion
  (``1001_DFA_ANG_XX``); a row whose label differs from it is rejected.
* Kinetics-Sounds: ``my_train.txt`` and ``my_test.txt``, rows ``<clip>,<seconds>,<class index>`` (31 classes).

Clips (placed by hand under the dataset's ``root``; see the study README for the ffmpeg commands):

* audio: ``<root>/AudioWAV/<clip>.wav`` (CREMA-D, the repository's Git-LFS files) or ``<root>/audio/<clip>.wav``
  (Kinetics-Sounds, extracted from the mp4 clips as 16 kHz mono PCM);
* frames: ``<root>/Image-01-FPS/<clip>/frame_<k>.jpg``, k = 1, 2, … (1 frame per second, the released naming).

A clip listed but absent on disk is skipped, as the released loader does; the share of absent clips must stay
within ``max_missing_frac``. Per clip: the log-spectrogram of :mod:`.audio` (x_a (F, T) float32) and ``frames``
frames picked as the released test transform does (segment centres, :func:`frame_indices`), resized to
``image_size``² (x_v (frames, 3, S, S) uint8; ImageNet normalisation happens in the model). The released training
transform's RandomResizedCrop / flip augmentation is not applied [R].
"""
from __future__ import annotations

import csv
import io
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from icml25.core.datasets import DataError

from .audio import clip_spectrogram

log = logging.getLogger("icml25.data_remix")

CREMAD_EMOTIONS = ("NEU", "HAP", "SAD", "FEA", "DIS", "ANG")  #: class index = position (the released class_dict)
AUDIO_DIR = {"cremad": "AudioWAV", "kinetics_sounds": "audio"}
FRAMES_DIR = "Image-01-FPS"
PAPER_DATASETS = ("cremad", "kinetics_sounds")


def _rows(raw: bytes, name: str, n_cols: int) -> list[tuple[int, list[str]]]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{name}: not UTF-8 text ({err})") from None
    out = []
    for line_no, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != n_cols:
            raise DataError(f"{name}: line {line_no}: expected {n_cols} columns, got {len(row)} ({row})")
        out.append((line_no, [c.strip() for c in row]))
    if not out:
        raise DataError(f"{name}: no rows")
    return out


def parse_cremad_list(raw: bytes, name: str = "cremad list") -> list[tuple[str, int]]:
    """A CREMA-D split list (``<clip>,<emotion>`` rows) → [(clip, class index)]; errors name the file, line and
    column (``clip`` or ``label``)."""
    out = []
    for line_no, (clip, label) in _rows(raw, name, 2):
        if label not in CREMAD_EMOTIONS:
            raise DataError(f"{name}: line {line_no}: column label: {label!r} is not one of {CREMAD_EMOTIONS}")
        parts = clip.split("_")
        if len(parts) != 4 or not parts[0].isdigit():
            raise DataError(f"{name}: line {line_no}: column clip: {clip!r} is not a CREMA-D clip name "
                            "(<actor>_<sentence>_<emotion>_<level>)")
        if parts[2] != label:
            raise DataError(f"{name}: line {line_no}: column label: {label!r} differs from the clip name's emotion "
                            f"{parts[2]!r} ({clip})")
        out.append((clip, CREMAD_EMOTIONS.index(label)))
    return out


def parse_ks_list(raw: bytes, name: str = "kinetics-sounds list", n_classes: int = 31) -> list[tuple[str, int]]:
    """A Kinetics-Sounds split list (``<clip>,<seconds>,<class index>`` rows) → [(clip, class index)]; errors name
    the file, line and column."""
    out = []
    for line_no, (clip, seconds, label) in _rows(raw, name, 3):
        if not clip:
            raise DataError(f"{name}: line {line_no}: column clip: empty")
        try:
            float(seconds)
        except ValueError:
            raise DataError(f"{name}: line {line_no}: column seconds: {seconds!r} is not a number") from None
        if not label.isdigit() or int(label) >= n_classes:
            raise DataError(f"{name}: line {line_no}: column label: {label!r} is not a class index in "
                            f"[0, {n_classes})")
        out.append((clip, int(label)))
    return out


def split_lists(dataset: str, raw: Sequence[bytes], names: Sequence[str], n_classes: int
                ) -> dict[str, list[tuple[str, int]]]:
    """{"train": [(clip, y)], "test": [...]} from the dataset's two raw list files (manifest order)."""
    if dataset == "cremad":
        every, test = (parse_cremad_list(r, n) for r, n in zip(raw, names))
        test_clips = {c for c, _ in test}
        unknown = sorted(test_clips - {c for c, _ in every})
        if unknown:
            raise DataError(f"{names[1]}: {len(unknown)} test clips are not in {names[0]} (e.g. {unknown[0]})")
        return {"train": [(c, y) for c, y in every if c not in test_clips], "test": test}
    if dataset == "kinetics_sounds":
        train, test = (parse_ks_list(r, n, n_classes) for r, n in zip(raw, names))
        overlap = sorted({c for c, _ in train} & {c for c, _ in test})
        if overlap:
            raise DataError(f"{names[0]} / {names[1]}: {len(overlap)} clips in both splits (e.g. {overlap[0]})")
        return {"train": train, "test": test}
    raise DataError(f"data_remix: {dataset!r} is not a paper dataset ({PAPER_DATASETS})")


def frame_number(path: Path) -> int:
    """k of ``frame_<k>.jpg`` (the released naming ``frame_0000<k>``)."""
    try:
        return int(path.stem.split("_")[-1])
    except ValueError:
        raise DataError(f"{path}: frame files must be named frame_<number>.jpg") from None


def frame_indices(n_files: int, n_frames: int) -> list[int]:
    """Indices of the frames the released test transform picks: the centre of each of ``n_frames`` equal segments,
    ``min(i·seg + seg // 2, n − 1)`` with seg = n // n_frames."""
    seg = n_files // n_frames
    return [min(i * seg + seg // 2, n_files - 1) for i in range(n_frames)]


def load_frames(clip_dir: Path, n_frames: int, image_size: int) -> np.ndarray:
    """The picked frames of a clip folder → (n_frames, 3, S, S) uint8 (RGB, bilinear resize to S = image_size)."""
    from PIL import Image, UnidentifiedImageError

    files = sorted(clip_dir.glob("frame_*.jpg"), key=frame_number)
    if not files:
        raise DataError(f"{clip_dir}: no frame_<k>.jpg files")
    out = np.empty((n_frames, 3, image_size, image_size), dtype=np.uint8)
    for i, k in enumerate(frame_indices(len(files), n_frames)):
        try:
            with Image.open(files[k]) as img:
                rgb = img.convert("RGB").resize((image_size, image_size), Image.BILINEAR)
        except (OSError, UnidentifiedImageError) as err:
            raise DataError(f"{files[k]}: not a readable JPEG ({err})") from None
        out[i] = np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1)
    return out


def build_paper_dataset(dataset: str, spec: Mapping, lists: Mapping[str, list[tuple[str, int]]]) -> tuple[dict, dict]:
    """Arrays of a paper dataset from the clips under ``spec["root"]``: ({"train": split, "test": split},
    {"n_missing_train", "n_missing_test"}); split = x_a (N, F, T) float32, x_v (N, frames, 3, S, S) uint8,
    y (N,) int64, in list order."""
    root = Path(spec["root"])
    if not root.is_dir():
        raise DataError(f"data_remix {dataset}: {dataset}.root {root} is not a directory (the clips are placed by "
                        "hand; see the study README)")
    out, stats = {}, {}
    for split, rows in lists.items():
        xa, xv, ys, missing = [], [], [], 0
        for clip, y in rows:
            wav = root / AUDIO_DIR[dataset] / f"{clip}.wav"
            frames = root / FRAMES_DIR / clip
            if not (wav.is_file() and frames.is_dir()):
                missing += 1
                continue
            xa.append(clip_spectrogram(wav, spec))
            xv.append(load_frames(frames, int(spec["frames"]), int(spec["image_size"])))
            ys.append(y)
        frac = missing / len(rows)
        if frac > float(spec["max_missing_frac"]) or not ys:
            raise DataError(f"data_remix {dataset}: {missing} of {len(rows)} {split} clips are missing under {root} "
                            f"({AUDIO_DIR[dataset]}/<clip>.wav, {FRAMES_DIR}/<clip>/); max_missing_frac = "
                            f"{spec['max_missing_frac']}")
        if missing:
            log.warning("%s %s: %d of %d listed clips absent, skipped (as the released loader does)", dataset, split,
                        missing, len(rows))
        out[split] = {"x_a": np.stack(xa), "x_v": np.stack(xv), "y": np.asarray(ys, dtype=np.int64)}
        stats[f"n_missing_{split}"] = missing
    return out, stats
