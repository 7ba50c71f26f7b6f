"""magnets paper path: the Flax-msgpack reader against hand-encoded bytes, the VQGAN converter's layout against a
numpy convolution, the tokenizer's quantizer against brute force, the Hugging Face ImageNet member names and crop
against hand-computed cases, the FID Inception's FID-specific pooling, FID from statistics against the closed form,
and the untested video entries."""
from __future__ import annotations

import gzip
import io
import struct
import tarfile

import numpy as np
import pytest
import torch

from icml25.core.datasets import DataError
from icml25.studies.magnets import flaxmsgpack as FM
from icml25.studies.magnets import imagenet as IN
from icml25.studies.magnets import inception as INC
from icml25.studies.magnets import paper as P
from icml25.studies.magnets import vqgan as V

torch.set_num_threads(1)
TINY = V.VQGANConfig(filters=8, channel_multipliers=(1, 1, 2, 2, 4), num_res_blocks=1, embedding_dim=8,
                     codebook_size=16, groups=4)


# --- Flax msgpack -----------------------------------------------------------------------------------------------
def _hand_doc() -> bytes:
    """{"params": {"w": float32 [1.5, -2.0]}, "step": 7} written byte by byte from the MessagePack spec."""
    inner = (b"\x93" + b"\x91\x02" + b"\xa7float32" + b"\xc4\x08" + struct.pack("<2f", 1.5, -2.0))
    assert len(inner) == 21
    return (b"\x82" + b"\xa6params" + b"\x81" + b"\xa1w" + b"\xc7\x15\x01" + inner
            + b"\xa4step" + b"\x07")


def test_flax_msgpack_reads_hand_encoded_bytes():
    doc = FM.loads(_hand_doc(), "hand")
    assert doc["step"] == 7 and doc["params"]["w"].dtype == np.float32
    np.testing.assert_array_equal(doc["params"]["w"], np.array([1.5, -2.0], np.float32))
    assert FM.flatten(doc["params"]) == {"w": doc["params"]["w"]}


def test_flax_msgpack_scalars_and_ints_of_every_width():
    raw = b"\x86" + b"\xa1a\xcd\x01\x00" + b"\xa1b\xd0\xfe" + b"\xa1c\xcb" + struct.pack(">d", 0.25) \
        + b"\xa1d\xc3" + b"\xa1e\xc0" + b"\xa1f\xff"
    assert FM.loads(raw) == {"a": 256, "b": -2, "c": 0.25, "d": True, "e": None, "f": -1}


def test_flax_msgpack_round_trip_and_chunked_arrays():
    tree = {"params": {"enc": {"kernel": np.arange(24, dtype=np.float32).reshape(2, 3, 4)},
                       "ids": np.array([3, 1], np.int64)}}
    back = FM.loads(FM.dumps(tree))
    np.testing.assert_array_equal(back["params"]["enc"]["kernel"], tree["params"]["enc"]["kernel"])
    assert back["params"]["ids"].dtype == np.int64
    chunked = {"x": {FM.CHUNKED: True, "shape": {"0": 2, "1": 2},
                     "chunks": {"0": np.array([1.0, 2.0, 3.0]), "1": np.array([4.0])}}}
    np.testing.assert_array_equal(FM.loads(FM.dumps(chunked))["x"], [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("data, match", [
    (_hand_doc()[:-5], r"ckpt: truncated"),
    (_hand_doc() + b"\x00", r"1 trailing bytes"),
    (b"\x81\xa1w\xd4\x63\x00", r"extension type 99"),
    (b"\xc1", r"0xc1 is not a MessagePack type"),
])
def test_flax_msgpack_refuses_malformed_input(data, match):
    with pytest.raises(FM.CheckpointError, match=match):
        FM.loads(data, "ckpt")


def test_flax_msgpack_refuses_object_dtypes_and_wrong_sizes():
    inner = b"\x93\x91\x01\xa6object\xc4\x08" + b"\x00" * 8
    with pytest.raises(FM.CheckpointError, match="dtype 'object'"):
        FM.loads(b"\xc7" + bytes([len(inner)]) + b"\x01" + inner)
    inner = b"\x93\x91\x03\xa7float32\xc4\x08" + b"\x00" * 8
    with pytest.raises(FM.CheckpointError, match=r"8 data bytes for shape \(3,\) float32 \(12 expected\)"):
        FM.loads(b"\xc7" + bytes([len(inner)]) + b"\x01" + inner)


# --- VQGAN ------------------------------------------------------------------------------------------------------
def _random_state(cfg: V.VQGANConfig, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(v.shape, generator=g) * 0.2 for k, v in V.VQGAN(cfg).state_dict().items()}


def test_converter_names_and_layout_match_the_published_tree():
    tree = V.to_flax(_random_state(V.VQGANConfig()))["params"]
    flat = FM.flatten(tree)
    # shapes of the published checkpoint's tree (MaskGIT tokenizer, ImageNet-256)
    assert flat["encoder.Conv_0.kernel"].shape == (3, 3, 3, 128)
    assert flat["encoder.Conv_1.kernel"].shape == (1, 1, 512, 256) and flat["encoder.Conv_1.bias"].shape == (256,)
    assert flat["encoder.ResBlock_4.Conv_2.kernel"].shape == (1, 1, 256, 256)
    assert flat["encoder.ResBlock_8.GroupNorm_0.scale"].shape == (256,)
    assert flat["decoder.Conv_0.kernel"].shape == (3, 3, 256, 512)
    assert flat["decoder.Conv_5.kernel"].shape == (3, 3, 128, 3)
    assert flat["decoder.ResBlock_8.Conv_0.kernel"].shape == (3, 3, 256, 128)
    assert flat["quantizer.codebook"].shape == (1024, 256)
    assert sum(k.startswith("encoder.ResBlock_") and k.endswith("Conv_0.kernel") for k in flat) == 12
    assert sum(k.startswith("decoder.ResBlock_") and k.endswith("Conv_0.kernel") for k in flat) == 12


def test_converted_conv_equals_a_numpy_same_correlation_with_the_flax_kernel():
    state = _random_state(TINY, 1)
    tree = V.to_flax(state)
    k = tree["params"]["encoder"]["Conv_0"]["kernel"]  # (3, 3, 3, F): (kh, kw, in, out)
    model = V.VQGAN(TINY)
    model.load_state_dict(V.convert_flax(FM.loads(FM.dumps(tree)), TINY))
    x = np.random.default_rng(0).normal(size=(3, 5, 6)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    ref = np.zeros((k.shape[3], 5, 6))
    for o in range(k.shape[3]):
        for y in range(5):
            for xx in range(6):
                ref[o, y, xx] = (k[:, :, :, o].transpose(2, 0, 1) * xp[:, y:y + 3, xx:xx + 3]).sum()
    got = model.encoder.Conv_0(torch.as_tensor(x)[None])[0].detach().numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_converter_errors_name_missing_and_misshapen_parameters():
    tree = V.to_flax(_random_state(TINY))
    del tree["params"]["decoder"]["Conv_1"]["bias"]
    with pytest.raises(FM.CheckpointError, match=r"ck: .*missing decoder\.Conv_1\.bias"):
        V.convert_flax(tree, TINY, "ck")
    tree = V.to_flax(_random_state(TINY))
    tree["params"]["quantizer"]["codebook"] = np.zeros((17, 8), np.float32)
    with pytest.raises(FM.CheckpointError, match=r"quantizer\.codebook: shape \(17, 8\)"):
        V.convert_flax(tree, TINY, "ck")
    with pytest.raises(FM.CheckpointError, match="no params.encoder/decoder/quantizer"):
        V.convert_flax({"opt": {}}, TINY, "ck")


def test_quantizer_is_the_brute_force_nearest_code_and_tokens_are_row_major():
    model = V.VQGAN(TINY)
    model.load_state_dict(_random_state(TINY, 2))
    z = torch.randn(2, 8, 3, 4, generator=torch.Generator().manual_seed(3))
    ids = model.quantizer.indices(z).numpy()
    cb = model.quantizer.codebook.detach().numpy()
    for b in range(2):
        for y in range(3):
            for x in range(4):
                assert ids[b, y, x] == np.argmin(((cb - z[b, :, y, x].numpy()) ** 2).sum(1))
    tokens = model.encode(torch.rand(2, 3, 64, 64))
    assert tokens.shape == (2, 16)  # 64 px / 16 per token side -> 4 x 4
    assert model.decode(tokens).shape == (2, 3, 64, 64)


def test_resblock_with_a_channel_change_adds_the_1x1_conv_of_its_own_output():
    blk = V.ResBlock(4, 8, groups=4)
    x = torch.randn(1, 4, 5, 5)
    with torch.no_grad():
        h = blk.Conv_1(torch.nn.functional.silu(blk.GroupNorm_1(blk.Conv_0(torch.nn.functional.silu(
            blk.GroupNorm_0(x))))))
        blk.Conv_2.weight.zero_()
        torch.testing.assert_close(blk(x), h)  # the input x is not carried
        blk.Conv_2.weight.copy_(torch.eye(8).view(8, 8, 1, 1))
        torch.testing.assert_close(blk(x), 2 * h)


# --- ImageNet shards --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, wnid", [
    ("n01440764_10026_n01440764.JPEG", "n01440764"),
    ("ILSVRC2012_val_00000001_n01751748.JPEG", "n01751748"),
    ("train/n01443537_2_n01443537.JPEG", "n01443537"),
])
def test_member_wnid_follows_the_hf_naming(name, wnid):
    assert IN.member_wnid(name) == wnid


@pytest.mark.parametrize("name", ["ILSVRC2012_test_00000001.JPEG", "n01440764_1.png", "README.txt", "n0144_x.JPEG"])
def test_member_wnid_refuses_unlabelled_or_foreign_members(name):
    with pytest.raises(DataError, match=name.replace(".", r"\.")):
        IN.member_wnid(name)


def test_centre_crop_by_hand():
    from PIL import Image

    img = np.arange(2 * 4 * 3, dtype=np.uint8).reshape(2, 4, 3) * 10  # h=2, w=4: shorter side already 2
    out = IN.centre_crop(Image.fromarray(img), 2)
    np.testing.assert_array_equal(out, img[:, 1:3])  # columns 1..2 of 4
    grey = IN.centre_crop(Image.fromarray(np.full((6, 3), 77, np.uint8)), 3)  # L -> RGB, rows 1..3 of 6
    assert grey.shape == (3, 3, 3) and (grey == 77).all()


def _shard(tmp_path, members) -> str:
    from PIL import Image

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, colour in members:
            buf = io.BytesIO()
            Image.fromarray(np.full((20, 30, 3), colour, np.uint8)).save(buf, format="JPEG", quality=95)
            info = tarfile.TarInfo(name)
            info.size = len(buf.getvalue())
            tar.addfile(info, io.BytesIO(buf.getvalue()))
    path = tmp_path / "shard.tar.gz"
    path.write_bytes(gzip.compress(raw.getvalue()))
    return str(path)


def test_shard_stream_labels_and_crops(tmp_path):
    path = _shard(tmp_path, [("n01443537_5_n01443537.JPEG", (200, 10, 10)), ("n01440764_9_n01440764.JPEG",
                                                                                (10, 200, 10))])
    got = list(IN.iter_shard(path, 16))
    assert [w for _, w, _ in got] == ["n01443537", "n01440764"]
    assert all(img.shape == (16, 16, 3) for *_, img in got)
    assert np.abs(got[0][2].astype(int) - [200, 10, 10]).max() <= 4  # flat colour survives JPEG and resizing
    index = IN.class_index([w for _, w, _ in got], 2, "here")
    assert index == {"n01440764": 0, "n01443537": 1}  # sorted wnids = the dataset's class order
    np.testing.assert_array_equal(IN.labels_of(["n01443537", "n01440764"], index, "x"), [1, 0])
    with pytest.raises(DataError, match="here: 2 distinct wnids .* paper.n_classes = 3"):
        IN.class_index(["n01440764", "n01443537"], 3, "here")
    with pytest.raises(DataError, match=r"val: wnids \['n09999999'\]"):
        IN.labels_of(["n09999999"], index, "val")
    data = open(path, "rb").read()
    (tmp_path / "cut.tar.gz").write_bytes(data[: len(data) // 2])  # cut inside the second member
    with pytest.raises(DataError, match="cut.tar.gz"):
        list(IN.iter_shard(tmp_path / "cut.tar.gz", 16))


# --- Inception and FID ------------------------------------------------------------------------------------------
def test_inception_fid_variant_pooling_and_feature_size():
    ones = torch.ones(1, 1, 4, 4)
    assert torch.equal(INC._avg(ones), ones)  # count_include_pad=False: borders stay 1 (the FID graph)
    net = INC.FIDInceptionV3(16).eval()
    assert net.Mixed_7c.max_pool and not net.Mixed_7b.max_pool
    assert net.features(torch.rand(2, 3, 40, 40)).shape == (2, 128)
    with pytest.raises(ValueError, match="width_divisor 3"):
        INC.FIDInceptionV3(3)


def test_inception_loader_names_missing_keys(tmp_path):
    state = INC.FIDInceptionV3(16).state_dict()
    state = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    torch.save(state, tmp_path / "ok.pth")
    net = INC.load_fid_inception(tmp_path / "ok.pth", 16)
    torch.testing.assert_close(net.fc.weight, state["fc.weight"])
    del state["Mixed_6b.branch7x7_2.bn.running_var"]
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match=r"bad.pth: .*missing \['Mixed_6b.branch7x7_2.bn.running_var'\]"):
        INC.load_fid_inception(tmp_path / "bad.pth", 16)


def test_fid_from_statistics_closed_form():
    from icml25.studies.magnets.evaluate import frechet_distance

    # 1-D Gaussians: FID = (mu1 - mu2)^2 + (s1 - s2)^2
    assert P.frechet_from_stats(np.array([1.0]), np.array([[4.0]]), np.array([3.0]), np.array([[1.0]])) == \
        pytest.approx(4.0 + 1.0)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 3)), rng.normal(1.0, 2.0, size=(60, 3))
    assert P.frechet_from_stats(*P.stats(a), *P.stats(b)) == pytest.approx(frechet_distance(a, b), rel=1e-9)


def test_paper_raw_roles_and_video_entries(tmp_path):
    names = ["imagenet_train_1", "imagenet_val", "imagenet_train_0", "maskgit_tokenizer", "fid_inception"]
    roles = P.raw_roles([tmp_path / n for n in names])
    assert [p.name for p in roles["train"]] == ["imagenet_train_0", "imagenet_train_1"]
    entries = P.video_untested()
    assert [e.id for e in entries] == ["c6_ucf101_fvd", "c7_k600_fvd"]
    assert all(e.status == "untested" and "MAGVIT" in e.note and "I3D" in e.note for e in entries)


def test_adequacy_without_a_class_gate():
    from icml25.studies.magnets.evaluate import adequacy_gates

    gates = adequacy_gates([float("nan")] * 3, [6.0, 6.2, 6.4], 2.5, None, 3.0)
    assert [g.name for g in gates] == ["generator_fd_over_floor"] and gates[0].passed
    assert gates[0].value == pytest.approx(6.2 / 2.5)


def test_rehearsal_miniatures_read_through_the_paper_loaders(tmp_path):
    from icml25.core.config import build, deep_merge, load_yaml, merge_scale
    from icml25.studies.magnets import rehearsal as R
    from icml25.studies.magnets.config import Config

    cfg = build(Config, deep_merge(merge_scale(load_yaml("config/studies/magnets.yaml"), "paper"),
                                   load_yaml("config/rehearsal/magnets.yaml")))
    (tmp_path / "t.tar.gz").write_bytes(R.train_shard(0))
    (tmp_path / "v.tar.gz").write_bytes(R.val_shard())
    train = list(IN.iter_shard(tmp_path / "t.tar.gz", cfg.paper.image_size))
    val = list(IN.iter_shard(tmp_path / "v.tar.gz", cfg.paper.image_size))
    assert train[0][0] == "n01440764_10026_n01440764.JPEG" and val[0][0] == "ILSVRC2012_val_00000001_n01443537.JPEG"
    assert len(train) == 8 and len(val) == 12 and len({w for _, w, _ in train}) == cfg.paper.n_classes
    vq = V.config_from(cfg.paper.vqgan.model_dump(), cfg.tokenizer.K)
    state = V.convert_flax(FM.loads(R.tokenizer_checkpoint()), vq)
    assert state["quantizer.codebook"].shape == (cfg.tokenizer.K, cfg.paper.vqgan.embedding_dim)
    (tmp_path / "i.pth").write_bytes(R.inception_weights())
    assert INC.load_fid_inception(tmp_path / "i.pth", cfg.paper.inception_width).dim == 128
