"""Tests of meta_expert's paper path (issue 34): the paper settings and their long-tailed counts, the WideResNet,
the RGB views, the loaders on the rehearsal's miniature files (pixel-exact against the arrays that were written),
STL-10's 96 → 32 px resize, batched evaluation, the device switch, the train stage's setting, and that no stage
of the paper path is a stub."""
from __future__ import annotations

import io
import re

import numpy as np
import pytest
import torch

from icml25.core.config import ConfigError, build, deep_merge, load_yaml, merge_scale, to_dict
from icml25.core.datasets import DataError
from icml25.core.download import read_manifest
from icml25.studies.meta_expert import data as D
from icml25.studies.meta_expert import rehearsal as R
from icml25.studies.meta_expert.__main__ import main as stage_cli
from icml25.studies.meta_expert.config import (Config, raw_files, run_label, run_settings, split_name,
                                                train_parts)
from icml25.studies.meta_expert.evaluate import evaluate_model
from icml25.studies.meta_expert.method import long_tail_counts
from icml25.studies.meta_expert.model import SSLNet, WideResNet
from icml25.studies.meta_expert.train import arm_spec, resolve_device, train_arm

from conftest import ROOT

YAML = ROOT / "config/studies/meta_expert.yaml"
PKG = ROOT / "src/icml25/studies/meta_expert"


def _paper() -> Config:
    return build(Config, merge_scale(load_yaml(YAML), "paper"), path="meta_expert")


def _rehearsal() -> dict:
    data = deep_merge(merge_scale(load_yaml(YAML), "paper"), load_yaml(ROOT / "config/rehearsal/meta_expert.yaml"))
    return to_dict(build(Config, data, path="meta_expert"))


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    manifest = read_manifest(PKG / "manifest.csv", rehearsal=False)
    R.write_miniatures(root, manifest)
    return {name: root / e.mirror_path for name, e in manifest.items()}


# ------------------------------------------------------------------------------------------- stubs are gone


def test_no_stub_left_in_the_paper_path():
    pattern = re.compile(r"planned, not implemented|not implemented in this|which this project does not run")
    for path in PKG.glob("*.py"):
        assert not pattern.search(path.read_text()), path.name


# ---------------------------------------------------------------------------------------- paper settings


def test_paper_settings_are_the_released_configs():
    cfg = _paper()
    assert (cfg.train.device, cfg.train.iterations, cfg.train.batch, cfg.train.uratio, cfg.train.cosine) == (
        "cuda", 262144, 64, 2, False)
    assert (cfg.model.backbone, cfg.model.depth, cfg.model.widen, cfg.model.bn_branches) == ("wrn_28_2", 28, 2, True)
    by = {st.name: st for st in cfg.settings}
    assert sorted({st.dataset for st in cfg.settings}) == ["cifar10", "stl10", "svhn"]
    # 20 runs per arm and seed: CIFAR-10 12 (N1 1500/500 x gamma 150/200 x 3 profiles), SVHN 4, STL-10 4
    assert sum(len(st.profiles) for st in cfg.settings) == 20
    c = by["cifar10_n500_g200"].data
    assert (c.n_max, c.gamma_l, c.m_max, c.gamma_u, c.uniform_per_class) == (500, 200.0, 4000, 200.0, 4000)
    assert by["svhn_n1500_g200"].profiles == ("consistent",)
    assert raw_files(to_dict(cfg)) == ["cifar-10-python.tar.gz", "train_32x32.mat", "test_32x32.mat",
                                       "stl10_binary.tar.gz"]


def test_default_keeps_its_paths_and_files():
    cfg = to_dict(build(Config, merge_scale(load_yaml(YAML), "default"), path="meta_expert"))
    (st,) = run_settings(cfg)
    assert st["name"] == "" and st["dataset"] == "mnist5k" and raw_files(cfg) == ["mnist_5k.csv.gz"]
    assert split_name("consistent", 2000) == "lt_consistent_seed2000.npz"
    assert split_name("uniform", 4, "svhn_n1500_g150") == "lt_svhn_n1500_g150_uniform_seed4.npz"
    assert run_label("", "consistent") == "consistent" and run_label("a", "reversed") == "a/reversed"
    assert train_parts(cfg, {0: (2000, 2001, 2002)}, "chunk{chunk}.json") == [
        ("fixmatch", "chunk0.json"), ("cpe", "chunk0.json"), ("meta_expert", "chunk0.json")]
    paper = to_dict(_paper())
    parts = train_parts(paper, {0: (0,), 1: (2,), 2: (4,)}, "chunk{chunk}.csv")
    assert len(parts) == 150 and parts[0] == ("fixmatch", "cifar10_n1500_g150", "chunk0.csv")


def test_settings_are_validated():
    raw = merge_scale(load_yaml(YAML), "paper")
    stl = {"name": "s", "dataset": "stl10", "profiles": ["uniform"], "data": {"n_max": 150}}
    with pytest.raises(ConfigError, match="STL-10's unlabelled set has no labels"):
        build(Config, {**raw, "settings": [stl]}, path="meta_expert")
    dup = {"name": "a", "dataset": "cifar10"}
    with pytest.raises(ConfigError, match="names must be unique"):
        build(Config, {**raw, "settings": [dup, dup]}, path="meta_expert")
    with pytest.raises(ConfigError, match="6n \\+ 4"):
        build(Config, {**raw, "model": {**raw["model"], "depth": 12}}, path="meta_expert")


def test_long_tailed_counts_of_the_paper_settings():
    """USB's make_imbalance_data: int(N1 * (1/gamma)^(c/9)); the values below are that formula evaluated by hand
    once (CIFAR-10-LT N1 1500 / gamma 150, N1 500 / gamma 200, STL-10 N1 150 / gamma 15)."""
    assert long_tail_counts(1500, 150, 10) == [1500, 859, 492, 282, 161, 92, 53, 30, 17, 10]
    assert long_tail_counts(500, 200, 10) == [500, 277, 154, 85, 47, 26, 14, 8, 4, 2]
    assert long_tail_counts(150, 15, 10) == [150, 111, 82, 60, 45, 33, 24, 18, 13, 10]


def test_paper_lt_on_a_synthetic_cifar_sized_train_set():
    """Per class 5000 images (CIFAR-10's train split): the consistent, uniform and reversed profiles of N1 1500,
    M1 3000, gamma 150 have the paper's counts, the labelled set is the same for every profile, all disjoint."""
    y = np.repeat(np.arange(10), 5000)
    raw = {"x_train": np.zeros((len(y), 1, 1, 3), np.uint8), "y_train": y, "x_test": np.zeros((2, 1, 1, 3), np.uint8),
           "y_test": np.array([0, 1])}
    d = {"n_max": 1500, "gamma_l": 150.0, "m_max": 3000, "gamma_u": 150.0, "uniform_per_class": 3000}
    lt = long_tail_counts(3000, 150, 10)
    expect = {"consistent": lt, "uniform": [3000] * 10, "reversed": lt[::-1]}
    labelled = None
    for profile, counts in expect.items():
        s = D.paper_lt("cifar10", raw, 2, profile, **d)
        assert np.bincount(s["y_lab"], minlength=10).tolist() == long_tail_counts(1500, 150, 10)
        assert np.bincount(s["y_unl"], minlength=10).tolist() == counts
        assert not set(s["lab_idx"]) & set(s["unl_idx"])
        labelled = s["lab_idx"] if labelled is None else labelled
        assert np.array_equal(s["lab_idx"], labelled)


# -------------------------------------------------------------------------- loaders on the miniatures


def test_cifar_miniature_decodes_pixel_exact(mirror):
    """The miniature tarball written by rehearsal.py is read back by the real loader to the very arrays that were
    generated (channel planes → HWC, 5 train batches in order)."""
    rng = np.random.default_rng(20250701)
    y_train, y_test = R._labels(R.CIFAR_TRAIN_PER_CLASS, rng), R._labels(R.CIFAR_TEST_PER_CLASS, rng)
    x_train, x_test = R.images(rng, y_train, 32), R.images(rng, y_test, 32)
    got = D.read_cifar10(mirror["cifar-10-python.tar.gz"])
    assert np.array_equal(got["x_train"], x_train) and np.array_equal(got["y_train"], y_train)
    assert np.array_equal(got["x_test"], x_test) and np.array_equal(got["y_test"], y_test)


def test_svhn_miniature_is_matlab_v5_and_decodes_pixel_exact(mirror):
    from scipy.io import loadmat

    path = mirror["train_32x32.mat"]
    assert path.read_bytes()[:10] == b"MATLAB 5.0"
    m = loadmat(str(path))
    assert m["X"].shape == (32, 32, 3, 200) and m["X"].dtype == np.uint8 and m["y"].shape == (200, 1)
    assert set(np.unique(m["y"])) == set(range(1, 11))  # 10 stands for the digit 0
    x, y = D.read_svhn(path)
    assert np.array_equal(x[7], m["X"][:, :, :, 7]) and y[m["y"].ravel() == 10].tolist() == [0] * 20


def test_svhn_malformed_files_name_file_and_variable(tmp_path):
    from scipy.io import savemat

    savemat(tmp_path / "a.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8)})
    with pytest.raises(DataError, match="a.mat: expected variables X and y"):
        D.read_svhn(tmp_path / "a.mat")
    savemat(tmp_path / "b.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.ones((3, 1))})
    with pytest.raises(DataError, match="b.mat: X must be"):
        D.read_svhn(tmp_path / "b.mat")
    (tmp_path / "c.mat").write_bytes(b"not a mat file at all" * 10)
    with pytest.raises(DataError, match="c.mat"):
        D.read_svhn(tmp_path / "c.mat")


def test_stl10_miniature_decodes_and_resizes(mirror):
    rng = np.random.default_rng(20250703)
    y_train, y_test = R._labels(R.STL_TRAIN_PER_CLASS, rng), R._labels(R.STL_TEST_PER_CLASS, rng)
    x_train = R.images(rng, y_train, 96)
    got = D.read_stl10(mirror["stl10_binary.tar.gz"])
    assert np.array_equal(got["x_train"], x_train) and np.array_equal(got["y_train"], y_train)
    assert np.array_equal(got["y_test"], y_test) and got["x_unl"].shape == (R.STL_UNLABELLED, 96, 96, 3)
    small = D.resize_area(got["x_train"], 32)
    assert small.shape == (len(y_train), 32, 32, 3)
    block = got["x_train"][3, 6:9, 12:15, 1].astype(float)  # output pixel (2, 4) of channel 1: a 3x3 block mean
    assert small[3, 2, 4, 1] == int(np.floor(block.mean() + 0.5))


def test_resize_area_hand_computed():
    x = np.zeros((1, 6, 6, 3), np.uint8)
    x[0, :3, :3, 0] = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]  # mean 4
    x[0, :3, 3:, 0] = [[1, 1, 1], [1, 1, 1], [1, 1, 2]]  # mean 10/9 = 1.11 -> 1
    x[0, 3:, :3, 0] = [[0, 0, 0], [0, 0, 0], [0, 2, 3]]  # mean 5/9 = 0.56 -> 1
    x[0, 3:, 3:, 0] = 255
    out = D.resize_area(x, 2)
    assert out[0, :, :, 0].tolist() == [[4, 1], [1, 255]] and not out[..., 1:].any()
    with pytest.raises(DataError, match="divisible by 32"):
        D.resize_area(np.zeros((1, 40, 40, 3), np.uint8), 32)


def test_miniatures_are_deterministic(tmp_path, mirror):
    manifest = read_manifest(PKG / "manifest.csv", rehearsal=False)
    names = R.write_miniatures(tmp_path, manifest)
    assert sorted(names) == sorted(manifest)
    for name in names:
        assert (tmp_path / manifest[name].mirror_path).read_bytes() == mirror[name].read_bytes(), name


# ---------------------------------------------------------------------------------- RGB views, normalise


def test_rgb_normalise_hand_computed():
    x = torch.full((1, 3, 2, 2), 0.5)
    out = D.normalise(x, "cifar10")
    assert out[0, :, 0, 0].tolist() == pytest.approx([(0.5 - 0.4914) / 0.2471, (0.5 - 0.4822) / 0.2435,
                                                      (0.5 - 0.4465) / 0.2616])
    assert D.normalise(torch.full((1, 1, 1, 1), 0.1307), "mnist5k").item() == 0.0


def test_weak_rgb_is_a_flip_and_a_window_of_the_reflect_padded_image():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(12, 3, 8, 8, generator=g)
    out = D.weak_augment_rgb(x, torch.Generator().manual_seed(3), pad=2, flip=True)
    flips = 0
    for i in range(12):
        found = None
        for flipped in (False, True):
            src = x[i].flip(2) if flipped else x[i]
            padded = torch.nn.functional.pad(src[None], (2, 2, 2, 2), mode="reflect")[0]
            for oy in range(5):
                for ox in range(5):
                    if torch.equal(padded[:, oy:oy + 8, ox:ox + 8], out[i]):
                        found = flipped
        assert found is not None, i  # brute force: some flip and offset reproduce the view exactly
        flips += found
    assert 0 < flips < 12
    assert torch.equal(D.weak_augment_rgb(x, g, pad=0, flip=False), x)


def test_randaugment_ops_hand_computed():
    x = torch.full((1, 3, 4, 4), 0.5)
    one = torch.ones(1)
    assert torch.allclose(D._ra_op(x, "posterize", one), torch.full_like(x, 112 / 255))  # 4 bits: 127.5 -> 112
    assert torch.allclose(D._ra_op(x, "solarize", one), 1 - x)  # threshold 0: every pixel inverted
    assert torch.allclose(D._ra_op(x, "brightness", -one), torch.full_like(x, 0.05))  # factor 0.1
    assert torch.equal(D._ra_op(x, "identity", one), x)
    y = torch.linspace(0.2, 0.6, 48).view(1, 3, 4, 4)
    ac = D._ra_op(y, "autocontrast", one)
    assert torch.allclose(ac.amin((2, 3)), torch.zeros(1, 3)) and torch.allclose(ac.amax((2, 3)), torch.ones(1, 3))
    s = D.strong_augment_rgb(torch.rand(16, 3, 32, 32, generator=torch.Generator().manual_seed(1)),
                             torch.Generator().manual_seed(2))
    s2 = D.strong_augment_rgb(torch.rand(16, 3, 32, 32, generator=torch.Generator().manual_seed(1)),
                              torch.Generator().manual_seed(2))
    assert torch.equal(s, s2) and s.min() >= 0 and s.max() <= 1 and s.shape == (16, 3, 32, 32)


# ------------------------------------------------------------------------------------------ WideResNet


def test_wide_resnet_28_2_size_and_taps():
    """WRN-28-2 with a 10-way linear head has 1 467 610 parameters (the FixMatch / USB figure); closed form:
    stem 3·16·9, per block BN(c_in) + conv(c_in→c_out) + BN(c_out) + conv(c_out→c_out) (+ 1×1 shortcut when the
    width changes), final BN, head 128·10 + 10."""
    def block(ci, co):
        return 2 * ci + 9 * ci * co + 2 * co + 9 * co * co + (ci * co if ci != co else 0)

    ch = (16, 32, 64, 128)
    closed = 3 * 16 * 9 + sum(block(ch[g] if i == 0 else ch[g + 1], ch[g + 1]) for g in range(3) for i in range(4))
    closed += 2 * 128 + 128 * 10 + 10
    net = SSLNet(10, backbone="wrn_28_2", n_experts=1)
    assert sum(p.numel() for p in net.parameters()) == closed == 1467610
    wrn = WideResNet(10, 1)
    maps = wrn(torch.zeros(2, 3, 32, 32))
    assert [tuple(m.shape[1:]) for m in maps] == [(16, 32, 32), (16, 32, 32), (32, 16, 16), (64, 8, 8)]
    with pytest.raises(ValueError, match="6n \\+ 4"):
        WideResNet(12, 1)


def test_bn_branches_replace_the_final_bn():
    """With tied H/M/T branches (weights copied from the final BN) each branch equals the plain last feature."""
    torch.manual_seed(0)
    net = SSLNet(10, backbone="wrn_28_2", n_experts=3, bn_branches=True, depth=10, widen=1).eval()
    for bn in net.branch_bns:
        bn.load_state_dict(net.backbone.final_bn.state_dict())
    out = net(torch.randn(4, 3, 32, 32))
    for k in range(3):
        ref = net.experts[k](out["feats"][-1])
        for j in range(3):
            assert torch.allclose(out["branches"][k, j], ref, atol=1e-6)


# ------------------------------------------------------------------------------------ evaluation, device


def test_batched_evaluation_equals_one_pass():
    torch.manual_seed(0)
    cfg = {"method": {"taus": (0.0, 2.0, 4.0), "la_tau": 1.0}}
    net = SSLNet(10, backbone="wrn_28_2", n_experts=3, dea=True, depth=10, widen=1).eval()
    x = torch.randint(0, 256, (37, 32, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    y = torch.arange(37) % 10
    lp, taus = torch.log(torch.full((10,), 0.1)), torch.tensor([0.0, 2.0, 4.0])
    spec = arm_spec("meta_expert", cfg)
    a = evaluate_model(net, x, y, spec, lp, taus, 2, 4, keep_arrays=True, dataset="svhn", batch=None)
    b = evaluate_model(net, x, y, spec, lp, taus, 2, 4, keep_arrays=True, dataset="svhn", batch=8)
    assert a.keys() == b.keys()
    np.testing.assert_allclose(np.asarray(a["w"]), np.asarray(b["w"]), atol=1e-6)
    for k in a:
        if k != "w":
            assert a[k] == pytest.approx(b[k], abs=1e-6), k


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_a_gpu_names_the_key():
    with pytest.raises(RuntimeError, match="train.device: cuda"):
        resolve_device("cuda")


def test_rehearsal_config_trains_every_paper_arm_on_stl10(one_thread):
    """The rehearsal's reduced WRN on the STL-10 miniature: every arm trains and the DEA's weights are a simplex."""
    cfg = _rehearsal()
    settings = {k: cfg[k] for k in ("model", "method", "train", "augment")}
    settings["dataset"] = "stl10"
    y = np.repeat(np.arange(10), 8)
    rng = np.random.default_rng(0)
    raw = {"x_train": R.images(rng, y, 32), "y_train": y, "x_unl": R.images(rng, y[:20], 32),
           "x_test": R.images(rng, y[:30], 32), "y_test": y[:30]}
    split = D.paper_lt("stl10", raw, 0, "consistent", **cfg["settings"][2]["data"])
    for arm in cfg["arms"]:
        res = train_arm(arm, split, settings, 0)
        assert res["curves"][-1]["iteration"] == cfg["train"]["iterations"]
        if "w" in res["final"]:
            np.testing.assert_allclose(np.asarray(res["final"]["w"]).sum(1), 1.0, atol=1e-6)


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_train_stage_needs_the_splits_of_one_setting(tmp_path, capsys):
    args = ["train", "--scale", "paper", "--no-track", "--config", str(YAML), "--arm", "meta_expert", "--seeds", "0",
            "--in", str(tmp_path / "lt_consistent_seed0.npz"), "--out", str(tmp_path / "a.json"),
            str(tmp_path / "a.pt"), str(tmp_path / "a.csv")]
    if not torch.cuda.is_available():  # the paper's train.device is cuda: a job without a GPU stops first, clearly
        assert stage_cli(args) == 2 and "meta_expert.train.device: cuda requested" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="must be those of exactly one setting"):
        stage_cli([*args, "--device", "cpu"])


def test_svhn_miniature_header_is_fixed():
    a, b = R.svhn_mat(2, 1), R.svhn_mat(2, 1)
    assert a == b and a[:116].rstrip() == R.MAT_HEADER
    from scipy.io import loadmat

    assert loadmat(io.BytesIO(a))["X"].shape == (32, 32, 3, 20)


def test_smoke_stages_run_through_their_stage_views(tmp_path, one_thread):
    """download → preprocess → train through the stage CLI at smoke (the unnamed setting): each stage reads only
    its declared keys (StageView), which a paper-only test would not see."""
    import json

    common = ["--scale", "smoke", "--no-track", "--config", str(YAML)]
    raw = tmp_path / "raw" / "mnist_5k.csv.gz"
    stage_cli(["download", *common, "--out", str(raw)])
    split = tmp_path / "processed" / "lt_consistent_seed1000.npz"
    stage_cli(["preprocess", *common, "--in", str(raw), "--out", str(split)])
    outs = [str(tmp_path / f"models/fixmatch/chunk0.{ext}") for ext in ("json", "pt", "csv")]
    stage_cli(["train", *common, "--arm", "fixmatch", "--seeds", "1000", "--in", str(split), "--out", *outs])
    (run,) = json.loads((tmp_path / "models/fixmatch/chunk0.json").read_text())["runs"]
    assert (run["profile"], run["seed"]) == ("consistent", 1000) and 0 <= run["final"]["top1"] <= 1
