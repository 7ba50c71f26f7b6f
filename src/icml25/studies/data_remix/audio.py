"""The audio front end of the paper scale: a clip's WAV file → a log-magnitude spectrogram (1 channel).

The released Data Remixing code reads precomputed spectrograms (``<clip>.npy``) made by the recipe it adapts from
OGM-GE (``CramedDataset``: ``librosa.load(sr=22050)``, the clip tiled and cut to 3 s, clipped to [−1, 1],
``librosa.stft(n_fft=512, hop_length=353)``, ``log(|S| + 1e-7)``) [V]. This module computes the same quantity with
scipy / numpy (no librosa):

1. :func:`read_wav`: PCM WAV (int16 / int32 / uint8 / float) → float64 samples in [−1, 1] (stereo averaged to mono);
2. :func:`resample`: polyphase resampling (``scipy.signal.resample_poly``) to ``sample_rate`` [R: librosa uses a
   different resampler (soxr), so the values differ slightly from the released ones];
3. :func:`log_spectrogram`: tile to ``seconds``, clip, centred STFT (zero padding of n_fft/2 each side, periodic
   Hann window, librosa ≥ 0.10's defaults), ``log(|S| + 1e-7)``; output (n_fft/2 + 1, 1 + L // hop) float32.

At paper scale CREMA-D: 22050 Hz, 3 s, n_fft 512, hop 353 → (257, 188).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy import signal
from scipy.io import wavfile

from icml25.core.datasets import DataError

LOG_EPS = 1e-7  #: added to |S| before the log [V]


def read_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """A WAV file → (samples (n,) float64 in [−1, 1], sample rate in Hz). int16 / int32 are divided by 2^15 / 2^31,
    uint8 is centred at 128; several channels are averaged. Errors name the file."""
    try:
        rate, data = wavfile.read(str(path))
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"{path}: not a readable WAV file ({err})") from None
    scale = {np.dtype(np.int16): 2.0 ** 15, np.dtype(np.int32): 2.0 ** 31}
    if data.dtype in scale:
        x = data.astype(np.float64) / scale[data.dtype]
    elif data.dtype == np.uint8:
        x = (data.astype(np.float64) - 128.0) / 128.0
    elif data.dtype.kind == "f":
        x = data.astype(np.float64)
    else:
        raise DataError(f"{path}: unsupported WAV sample type {data.dtype}")
    if x.ndim == 2:
        x = x.mean(axis=1)
    if x.size == 0 or rate <= 0:
        raise DataError(f"{path}: empty WAV file (rate {rate}, {x.size} samples)")
    return x, int(rate)


def resample(x: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Polyphase resampling of ``x`` (n,) from ``rate`` to ``target`` Hz (identity when equal)."""
    if rate == target:
        return np.asarray(x, dtype=np.float64)
    g = math.gcd(int(rate), int(target))
    return signal.resample_poly(np.asarray(x, dtype=np.float64), int(target) // g, int(rate) // g)


def log_spectrogram(x: np.ndarray, rate: int, *, sample_rate: int, seconds: float, n_fft: int,
                    hop: int) -> np.ndarray:
    """Samples ``x`` (n,) at ``rate`` Hz → log |STFT| (n_fft // 2 + 1, 1 + L // hop) float32, L = round(seconds ·
    sample_rate): resampled, tiled (repeated) to L samples and cut, clipped to [−1, 1], zero-padded by n_fft // 2
    on both sides, framed every ``hop`` samples, periodic Hann window, one-sided FFT magnitude, log(|S| + 1e-7)."""
    if n_fft < 2 or hop < 1 or seconds <= 0:
        raise ValueError(f"log_spectrogram: need n_fft >= 2, hop >= 1, seconds > 0 (got {n_fft}, {hop}, {seconds})")
    y = resample(x, rate, sample_rate)
    L = int(round(seconds * sample_rate))
    if y.size == 0 or L < 1:
        raise ValueError("log_spectrogram: empty signal")
    y = np.clip(np.tile(y, -(-L // y.size))[:L], -1.0, 1.0)
    padded = np.pad(y, n_fft // 2)
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop]  # (1 + L // hop, n_fft) for even n_fft
    window = signal.get_window("hann", n_fft)  # periodic (fftbins=True)
    mag = np.abs(np.fft.rfft(frames * window, axis=1)).T
    return np.log(mag + LOG_EPS).astype(np.float32)


def clip_spectrogram(path: str | Path, spec) -> np.ndarray:
    """:func:`log_spectrogram` of a WAV file with the settings of a paper dataset's config section ``spec``
    (``sample_rate``, ``seconds``, ``n_fft``, ``hop``)."""
    x, rate = read_wav(path)
    return log_spectrogram(x, rate, sample_rate=int(spec["sample_rate"]), seconds=float(spec["seconds"]),
                           n_fft=int(spec["n_fft"]), hop=int(spec["hop"]))
