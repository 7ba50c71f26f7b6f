"""Atomic file output: every result is written to a temporary sibling and renamed into place.

A killed job therefore leaves either the previous file or none, never a half-written one that looks complete
(rename is atomic within one file system, which a sibling temporary guarantees).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is fsynced and renamed to ``path``.

    On an exception the temporary is removed and ``path`` is untouched. The temporary keeps ``path``'s
    suffix so libraries that choose a format by extension (matplotlib, pandas, numpy) behave.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{''.join(path.suffixes)}", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; results are ordinary files
    try:
        yield tmp_path
        if tmp_path.is_file():
            with open(tmp_path, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; on success it replaces ``path`` (an existing directory is
    moved aside first and removed after the rename), so ``path`` is always either the old complete directory or the
    new complete one. On an exception the temporary is removed and ``path`` is untouched."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | Path, text: str) -> Path:
    """Atomically write ``text`` (utf-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not json-serialisable: {type(obj).__name__}")


def _finite(obj: Any) -> Any:
    """Replace NaN/inf by None so the json is standard (json.dumps would write NaN)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json(path: str | Path, data: Any) -> Path:
    """Atomically write standard json (sorted keys, NaN → null, numpy scalars/arrays converted)."""
    text = json.dumps(data, default=_json_default, indent=2, sort_keys=True)
    return write_text(path, json.dumps(_finite(json.loads(text)), indent=2, sort_keys=True) + "\n")


def read_json(path: str | Path) -> Any:
    """Read a json file; the error names the file on malformed content."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: malformed json: {err}") from err


def save_npz(path: str | Path, **arrays: Any) -> Path:
    """Atomically write a compressed npz of plain (non-object) arrays."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)
    return Path(path)


def load_npz(path: str | Path, required: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Load an npz without pickles; a missing array named in ``required`` raises naming it and the file."""
    with np.load(path, allow_pickle=False) as data:
        out = {k: data[k] for k in data.files}
    missing = [k for k in required if k not in out]
    if missing:
        raise ValueError(f"{path}: missing array(s) {missing} (has {sorted(out)})")
    return out


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Atomically save a matplotlib figure and close it."""
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


@contextlib.contextmanager
def file_lock(lock_file: str | Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (created with its folder) for the ``with`` block: serialises
    processes that share the results directory (store creation, parent runs, spool replay)."""
    lock_file = Path(lock_file)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
