"""data_remix paper scale (issue 34): the audio front end against scipy and hand-computed values, the split-list and
frame loaders on hand-made inputs, the ResNet-18 encoders' input handling and width, the paper dataset built from
the rehearsal's miniature clips, and a ResNet training run with exact gradient isolation."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from scipy import signal
from scipy.io import wavfile

torch = pytest.importorskip("torch")
PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

from icml25.core.config import ConfigError, build, load_yaml, merge_scale  # noqa: E402
from icml25.core.datasets import DataError  # noqa: E402
from icml25.core.download import read_manifest  # noqa: E402
from icml25.studies.data_remix import audio as A  # noqa: E402
from icml25.studies.data_remix import data as D  # noqa: E402
from icml25.studies.data_remix import paper_data as P  # noqa: E402
from icml25.studies.data_remix import rehearsal as R  # noqa: E402
from icml25.studies.data_remix.config import Config  # noqa: E402
from icml25.studies.data_remix.model import IMAGENET_MEAN, IMAGENET_STD, ResNet18Encoder  # noqa: E402
from icml25.studies.data_remix.train import train_arm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "config/studies/data_remix.yaml"


def _wav_bytes(x: np.ndarray, rate: int) -> bytes:
    buf = io.BytesIO()
    wavfile.write(buf, rate, x)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------- audio front end


def test_read_wav_scales_int16_exactly_and_averages_channels(tmp_path):
    x = np.array([0, 1, -1, 32767, -32768, 1000], dtype=np.int16)
    (tmp_path / "a.wav").write_bytes(_wav_bytes(x, 16000))
    y, rate = A.read_wav(tmp_path / "a.wav")
    assert rate == 16000
    np.testing.assert_array_equal(y, x / 32768.0)  # exact: int16 / 2^15
    st = np.stack([x, np.zeros_like(x)], axis=1)
    (tmp_path / "s.wav").write_bytes(_wav_bytes(st, 8000))
    y2, _ = A.read_wav(tmp_path / "s.wav")
    np.testing.assert_array_equal(y2, x / 65536.0)
    (tmp_path / "bad.wav").write_bytes(b"RIFF not really")
    with pytest.raises(DataError, match="bad.wav"):
        A.read_wav(tmp_path / "bad.wav")


def test_log_spectrogram_hand_computed_dc_case():
    """Constant c, n_fft 4, hop 4, L 8: zero padding 2 each side gives frames [0,0,c,c], [c,c,c,c], [c,c,0,0];
    periodic Hann (0, .5, 1, .5): the three bins of each frame computed by hand."""
    c = 0.5
    S = A.log_spectrogram(np.full(8, c), 100, sample_rate=100, seconds=0.08, n_fft=4, hop=4)
    assert S.shape == (3, 3)
    mag = np.exp(S.astype(np.float64)) - A.LOG_EPS
    np.testing.assert_allclose(mag[0], [1.5 * c, 2 * c, 0.5 * c], atol=1e-6)
    # bin 1: sum_n x_n w_n (−i)^n; frame 1: 0 − 0.5ic − c + 0.5ic = −c; frame 0: −c + 0.5ic; frame 2: −0.5ic
    np.testing.assert_allclose(mag[1], [abs(-c + 0.5j * c), c, 0.5 * c], atol=1e-6)
    # bin 2 (Nyquist), sum_n x_n w_n (−1)^n: frame 0: c − 0.5c; frame 1: −0.5c + c − 0.5c = 0; frame 2: −0.5c
    np.testing.assert_allclose(mag[2], [0.5 * c, 0.0, 0.5 * c], atol=1e-6)


def test_log_spectrogram_matches_scipy_stft():
    rng = np.random.default_rng(0)
    x = np.clip(0.3 * rng.standard_normal(800), -1, 1)
    S = A.log_spectrogram(x, 8000, sample_rate=8000, seconds=0.1, n_fft=64, hop=16)
    assert S.shape == (33, 1 + 800 // 16)
    win = signal.get_window("hann", 64)
    _, _, Z = signal.stft(x, nperseg=64, noverlap=48, window=win, boundary="zeros", padded=False, detrend=False)
    ref = np.log(np.abs(Z) * win.sum() + A.LOG_EPS)  # scipy scales the spectrum by 1 / sum(window)
    np.testing.assert_allclose(S, ref[:, :S.shape[1]], atol=2e-5)


def test_log_spectrogram_tiles_clips_and_resamples():
    x = np.linspace(-2, 2, 100)
    tiled = A.log_spectrogram(x, 1000, sample_rate=1000, seconds=0.25, n_fft=16, hop=8)
    by_hand = A.log_spectrogram(np.clip(np.concatenate([x, x, x[:50]]), -1, 1), 1000, sample_rate=1000,
                                seconds=0.25, n_fft=16, hop=8)
    np.testing.assert_array_equal(tiled, by_hand)
    t = np.arange(16000) / 16000
    S = A.log_spectrogram(0.5 * np.sin(2 * np.pi * 1000 * t), 16000, sample_rate=22050, seconds=1.0, n_fft=512,
                          hop=353)
    assert S.shape == (257, 1 + 22050 // 353)
    peak = int(np.argmax(S[:, S.shape[1] // 2]))
    assert peak == round(1000 * 512 / 22050)  # 1 kHz lands on bin 23 after resampling 16 kHz -> 22.05 kHz


# --------------------------------------------------------------------------------------------- split lists


def test_cremad_list_parses_and_bad_rows_name_file_line_and_column():
    good = b"1001_DFA_ANG_XX,ANG\n1002_IEO_NEU_XX,NEU\n\n"
    assert P.parse_cremad_list(good, "data.csv") == [("1001_DFA_ANG_XX", 5), ("1002_IEO_NEU_XX", 0)]
    for raw, match in ((b"1001_DFA_ANG_XX,ANG,x\n", r"data\.csv: line 1: expected 2 columns"),
                       (b"1001_DFA_ANG_XX,ANG\n1001_DFA_ANG_XX,BOR\n", r"line 2: column label: 'BOR'"),
                       (b"1001_DFA_ANG_XX,SAD\n", r"line 1: column label: 'SAD' differs"),
                       (b"hello,ANG\n", r"line 1: column clip: 'hello'"), (b"\n", "no rows")):
        with pytest.raises(DataError, match=match):
            P.parse_cremad_list(raw, "data.csv")
    splits = P.split_lists("cremad", [good, b"1002_IEO_NEU_XX,NEU\n"], ["data.csv", "test.csv"], 6)
    assert splits == {"train": [("1001_DFA_ANG_XX", 5)], "test": [("1002_IEO_NEU_XX", 0)]}
    with pytest.raises(DataError, match=r"test\.csv: 1 test clips are not in data\.csv"):
        P.split_lists("cremad", [good, b"1003_IEO_NEU_XX,NEU\n"], ["data.csv", "test.csv"], 6)


def test_kinetics_sounds_list_parses_and_rejects_bad_rows():
    assert P.parse_ks_list(b"-3Mwkq-7TV4_2,10,23\n04fLIUMTbco_6,10,0\n", "t") == [("-3Mwkq-7TV4_2", 23),
                                                                                 ("04fLIUMTbco_6", 0)]
    for raw, match in ((b"a_1,10,31\n", r"t: line 1: column label: '31'"), (b"a_1,ten,3\n", "column seconds"),
                       (b"a_1,10\n", "expected 3 columns")):
        with pytest.raises(DataError, match=match):
            P.parse_ks_list(raw, "t", 31)
    with pytest.raises(DataError, match="in both splits"):
        P.split_lists("kinetics_sounds", [b"a_1,10,3\n", b"a_1,10,3\n"], ["tr", "te"], 31)


# --------------------------------------------------------------------------------------------- frames


def test_frame_indices_follow_the_released_test_transform():
    # min(i*seg + seg//2, n-1), seg = n // 2 (released AV_CD_Dataset, test mode)
    assert P.frame_indices(10, 2) == [2, 7]
    assert P.frame_indices(5, 2) == [1, 3]
    assert P.frame_indices(3, 2) == [0, 1]
    assert P.frame_indices(1, 2) == [0, 0]


def test_load_frames_picks_by_number_and_decodes_rgb(tmp_path):
    clip = tmp_path / "c"
    clip.mkdir()
    colours = {k: (20 * k, 255 - 20 * k, 100) for k in range(1, 11)}
    for k, rgb in colours.items():  # released naming: frame_0000 + str(k) -> frame_000010.jpg for k = 10
        Image.new("RGB", (8, 8), rgb).save(clip / f"frame_0000{k}.jpg", quality=95)
    out = P.load_frames(clip, 2, 8)
    assert out.shape == (2, 3, 8, 8) and out.dtype == np.uint8
    for i, k in enumerate((3, 8)):  # indices [2, 7] of the frames sorted by number
        assert np.abs(out[i].reshape(3, -1).astype(int) - np.array(colours[k])[:, None]).max() <= 3
    (clip / "frame_x.jpg").write_bytes(b"")
    with pytest.raises(DataError, match="frame_x.jpg"):
        P.load_frames(clip, 2, 8)
    with pytest.raises(DataError, match="no frame"):
        P.load_frames(tmp_path, 2, 8)


# --------------------------------------------------------------------------------------------- model


def test_resnet_encoder_width_and_input_handling():
    torch.manual_seed(0)
    enc = ResNet18Encoder(3, width=4).eval()
    assert enc.out_features == 32
    x8 = torch.randint(0, 256, (2, 2, 3, 16, 16), dtype=torch.uint8)
    mean, std = torch.tensor(IMAGENET_MEAN).view(3, 1, 1), torch.tensor(IMAGENET_STD).view(3, 1, 1)
    by_hand = (x8.float() / 255 - mean) / std
    with torch.no_grad():
        torch.testing.assert_close(enc(x8), enc(by_hand))
        assert enc(x8).shape == (2, 32)
    aud = ResNet18Encoder(1, width=4).eval()
    s = torch.randn(3, 20, 30)
    with torch.no_grad():
        torch.testing.assert_close(aud(s), aud(s.unsqueeze(1)))
    assert "mean" not in enc.state_dict()  # normalisation constants are not parameters of the checkpoint


def test_paper_config_needs_resnet_and_a_matching_feature_size():
    base = merge_scale(load_yaml(YAML), "paper")
    for key, value, match in (("encoder", "mlp", "paper datasets"),
                              ("train", {"feat": 64}, "8 \\* train.resnet_width")):
        data = {**base, key: {**base[key], **value} if isinstance(value, dict) else value}
        with pytest.raises(ConfigError, match=match):
            build(Config, data, "data_remix")


# --------------------------------------------------------------------------------------------- dataset + training


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    """The rehearsal's miniature lists and clips, and the rehearsal's paper settings."""
    root = tmp_path_factory.mktemp("mirror")
    manifest = read_manifest(D.MANIFEST, rehearsal=False)
    names = R.write_miniatures(root, manifest)
    R.write_manual(root / "manual")
    lists = {n: (root / manifest[n].mirror_path).read_bytes() for n in names}
    cfg = merge_scale(load_yaml(YAML), "paper")
    for ds in ("cremad", "kinetics_sounds"):
        cfg[ds] = {**cfg[ds], **load_yaml(ROOT / "config/rehearsal/data_remix.yaml")[ds],
                   "root": str(root / "manual" / ds)}
    return {"root": root, "lists": lists, "settings": build(Config, cfg, "data_remix").model_dump(mode="json")}


def test_paper_dataset_from_miniature_clips(mini):
    spec = mini["settings"]["cremad"]
    splits = P.split_lists("cremad", [mini["lists"]["cremad_data_csv"], mini["lists"]["cremad_test_csv"]],
                           ["data.csv", "test.csv"], 6)
    assert (len(splits["train"]), len(splits["test"])) == (19, 6)  # 3 per emotion + the absent clip; 1 per emotion
    data, missing = P.build_paper_dataset("cremad", spec, splits)
    assert missing == {"n_missing_train": 1, "n_missing_test": 0}
    tr = data["train"]
    assert tr["x_a"].shape == (18, 33, 1 + int(22050 * 0.5) // 64) and tr["x_v"].shape == (18, 2, 3, 16, 16)
    assert tr["x_v"].dtype == np.uint8 and sorted(np.bincount(tr["y"])) == [3] * 6
    clip = splits["train"][0][0]
    np.testing.assert_array_equal(tr["x_a"][0], A.clip_spectrogram(Path(spec["root"]) / "AudioWAV" / f"{clip}.wav",
                                                                   spec))
    D.validate_dataset(data, "cremad")
    with pytest.raises(DataError, match=r"1 of 19 train clips are missing"):
        P.build_paper_dataset("cremad", {**spec, "max_missing_frac": 0.0}, splits)
    with pytest.raises(DataError, match="is not a directory"):
        P.build_paper_dataset("cremad", {**spec, "root": str(mini["root"] / "nowhere")}, splits)


def test_resnet_training_isolates_gradients_and_uses_every_sample_once(mini):
    spec = mini["settings"]["kinetics_sounds"]
    splits = P.split_lists("kinetics_sounds", [mini["lists"]["ks_train_list"], mini["lists"]["ks_test_list"]],
                           ["tr", "te"], 31)
    data, _ = P.build_paper_dataset("kinetics_sounds", spec, splits)
    cfg = {**mini["settings"]["train"], "encoder": "resnet18", "device": "cpu", "epochs": 2, "warmup": 1,
           "resnet_width": 2, "feat": 16}
    res = train_arm(data, "remix", cfg, seed=0)
    last = res["curve"][-1]
    assert last["n_seen"] == 62 and last["n_a"] + last["n_v"] == 62 and last["max_masked_grad"] == 0.0
    assert res["model"].feat == 16 and np.isfinite(last["loss"])
