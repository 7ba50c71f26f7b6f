"""data_remix: the method's identities (KL, routing, reassembly, gradient isolation), the data, the verdicts, the
config, the download path and a smoke run of every stage through Snakemake."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from icml25.studies import data_remix as dr  # noqa: E402
from icml25.studies.data_remix import data as D  # noqa: E402
from icml25.studies.data_remix import evaluate as E  # noqa: E402
from icml25.studies.data_remix.method import masked_grad_blocks, masked_grad_max  # noqa: E402
from icml25.core.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, load_claims  # noqa: E402
from icml25.core.config import ConfigError, build, load_yaml, merge_scale  # noqa: E402
from icml25.core.download import DownloadError, read_manifest  # noqa: E402
from icml25.studies.data_remix.__main__ import main as stage_cli  # noqa: E402
from icml25.studies.data_remix.config import Config  # noqa: E402
from icml25.studies.data_remix.train import arm_lr, build_model, train_arm, unimodal_loss  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "config/studies/data_remix.yaml"


def get_settings(scale: str) -> dict:
    """The plain dict of the validated config of ``scale``."""
    return build(Config, merge_scale(load_yaml(YAML), scale), "data_remix").model_dump(mode="json")


# --------------------------------------------------------------------------------------------- KL and routing


@pytest.mark.parametrize("C", [2, 6, 31])
def test_kl_to_uniform_zero_for_uniform_and_log2C_for_one_hot(C):
    uniform = np.full((3, C), 1.0 / C)
    np.testing.assert_allclose(dr.kl_to_uniform(uniform), 0.0, atol=1e-12)
    one_hot = np.eye(C)
    # the clip leaves (C−1)·1e-9·log2(C·1e-9) ≈ −1e-9·(C−1)·27 bits off log2 C
    np.testing.assert_allclose(dr.kl_to_uniform(one_hot), np.log2(C), atol=1e-6)


def test_kl_to_uniform_known_value_and_bad_input():
    # half the mass on each of 2 of 4 classes: 2 · 0.5 · log2(4 · 0.5) = 1 bit (+ two clipped zeros ≈ −5.6e-8)
    assert dr.kl_to_uniform([[0.5, 0.5, 0.0, 0.0]])[0] == pytest.approx(1.0, abs=1e-7)
    with pytest.raises(ValueError, match="probs must be"):
        dr.kl_to_uniform(np.ones(4))
    with pytest.raises(ValueError, match="NaN"):
        dr.kl_to_uniform([[np.nan, 1.0]])


@st.composite
def prob_rows(draw, n=None, C=None):
    n = n or draw(st.integers(1, 20))
    C = C or draw(st.integers(2, 12))
    seed = draw(st.integers(0, 2**31))
    conc = draw(st.sampled_from([0.05, 0.5, 5.0]))
    return np.random.default_rng(seed).dirichlet(np.full(C, conc), size=n)


@settings(max_examples=60, deadline=None)
@given(prob_rows())
def test_kl_to_uniform_non_negative_and_at_most_log2C(p):
    kl = dr.kl_to_uniform(p)
    assert kl.shape == (p.shape[0],)
    assert (kl >= -1e-12).all() and (kl <= np.log2(p.shape[1]) + 1e-9).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 30), st.integers(2, 8))
def test_assignment_symmetric_under_swapping_modalities(seed, n, C):
    rng = np.random.default_rng(seed)
    pa, pv = rng.dirichlet(np.ones(C), n), rng.dirichlet(np.ones(C), n)
    kl_a, kl_v = dr.kl_to_uniform(pa), dr.kl_to_uniform(pv)
    untied = kl_a != kl_v
    assert np.array_equal(dr.assign_modalities(pa, pv)[untied], ~dr.assign_modalities(pv, pa)[untied])
    assert np.array_equal(dr.assign_modalities(pa, pv), kl_a < kl_v)


def test_assignment_routes_to_the_less_confident_modality_and_ties_go_visual():
    C = 6
    confident, uniform = np.eye(C)[[0]], np.full((1, C), 1 / C)
    assert dr.assign_modalities(uniform, confident).tolist() == [True]   # audio unsure → D_a
    assert dr.assign_modalities(confident, uniform).tolist() == [False]  # visual unsure → D_v
    p = np.random.default_rng(0).dirichlet(np.ones(C), 5)
    assert not dr.assign_modalities(p, p).any()  # exact ties → D_v
    # issue 32: one-hot heads on different classes are an exact tie (the paper and the released code send it to
    # D_v). By hand, with the 1e-9 clip: KL = log2(6) + 5·1e-9·log2(6e-9) for every one-hot row at C = 6.
    kl_onehot = np.log2(6) + 5 * 1e-9 * np.log2(6e-9)
    hot = np.eye(C)
    np.testing.assert_allclose(dr.kl_to_uniform(hot), np.full(C, kl_onehot), rtol=1e-15)
    for dtype in (np.float64, np.float32):  # softmax outputs come as float32
        pa = np.repeat(hot, C, axis=0).astype(dtype)  # all 36 (audio class, visual class) pairs
        pv = np.tile(hot, (C, 1)).astype(dtype)
        assert not dr.assign_modalities(pa, pv).any()  # every pair → D_v
    # a permutation of the same probabilities is a tie too; more audio confidence sends the row to D_v, less to D_a
    q = np.array([[0.5, 0.2, 0.1, 0.1, 0.05, 0.05]])
    assert not dr.assign_modalities(q[:, ::-1], q).any()
    assert dr.assign_modalities(np.array([[0.49, 0.21, 0.1, 0.1, 0.05, 0.05]]), q).tolist() == [True]
    with pytest.raises(ValueError, match="differ in rows"):
        dr.assign_modalities(p, p[:3])


# --------------------------------------------------------------------------------------------- reassembly


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 200), st.integers(1, 70), st.integers(0, 2**31), st.floats(0.0, 1.0))
def test_remix_batches_partition_order_and_sizes(N, bs, seed, share):
    rng = np.random.default_rng(seed)
    assign = rng.random(N) < share
    batches = dr.remix_batches(assign, bs, np.random.default_rng(seed))
    modes = [m for m, _ in batches]
    assert modes == sorted(modes, key=lambda m: m != "v")  # every "v" batch precedes every "a" batch
    allidx = np.concatenate([idx for _, idx in batches]) if batches else np.zeros(0, int)
    assert np.array_equal(np.sort(allidx), np.arange(N))  # each sample exactly once: no expansion
    assert all(1 <= len(idx) <= bs for _, idx in batches)
    for mode, idx in batches:
        assert (assign[idx] == (mode == "a")).all()
    n_a, n_v = int(assign.sum()), int(N - assign.sum())
    assert modes.count("v") == -(-n_v // bs) and modes.count("a") == -(-n_a // bs)


def test_remix_batches_empty_subset_is_skipped_and_bad_input_raises():
    batches = dr.remix_batches(np.ones(10, bool), 4, np.random.default_rng(0))
    assert [m for m, _ in batches] == ["a", "a", "a"] and [len(i) for _, i in batches] == [4, 4, 2]
    with pytest.raises(ValueError, match="bool"):
        dr.remix_batches(np.ones(3, int), 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="batch_size"):
        dr.remix_batches(np.ones(3, bool), 0, np.random.default_rng(0))


# --------------------------------------------------------------------------------------------- model / gradients


def _batch(n=16, d=32, C=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randn(n, d, generator=g), torch.randint(0, C, (n,), generator=g)


def test_fusion_model_defaults_and_masked_forward_values():
    torch.manual_seed(0)
    model = dr.FusionNet()
    assert (model.head.in_features, model.head.out_features, model.feat) == (128, 6, 64)
    xa, xv, _ = _batch()
    a, v = model.enc_a(xa), model.enc_v(xv)
    fused, la, lv = dr.masked_forward(model, xa, xv, "av")
    torch.testing.assert_close(fused, a @ model.head.weight[:, :64].T + v @ model.head.weight[:, 64:].T
                               + model.head.bias)
    fused_v, la_v, lv_v = dr.masked_forward(model, xa, xv, "v")  # visual batch: a ← 0
    torch.testing.assert_close(fused_v, v @ model.head.weight[:, 64:].T + model.head.bias)
    torch.testing.assert_close(la_v, model.head_a.bias.expand(16, 6))
    torch.testing.assert_close(lv_v, lv)
    fused_a, _, lv_a = dr.masked_forward(model, xa, xv, "a")  # audio batch: v ← 0
    torch.testing.assert_close(fused_a, a @ model.head.weight[:, :64].T + model.head.bias)
    torch.testing.assert_close(lv_a, model.head_v.bias.expand(16, 6))
    torch.testing.assert_close(model(xa, xv, "a")[0], fused_a)
    with pytest.raises(ValueError, match="mode"):
        dr.masked_forward(model, xa, xv, "x")


@pytest.mark.parametrize("mode", ["a", "v"])
def test_claim2_gradients_of_the_masked_modality_are_exactly_zero(mode):
    torch.manual_seed(1)
    model = dr.FusionNet()
    xa, xv, y = _batch(seed=2)
    model.zero_grad(set_to_none=True)
    unimodal_loss(dr.masked_forward(model, xa, xv, mode), y, mode, 1.0).backward()
    other = "v" if mode == "a" else "a"
    for p in getattr(model, f"enc_{other}").parameters():  # the encoder ran: gradient exists and is exactly 0
        assert p.grad is not None and torch.count_nonzero(p.grad) == 0
    assert all(p.grad is None for p in getattr(model, f"head_{other}").parameters())
    cols_other = slice(64, 128) if other == "v" else slice(0, 64)
    cols_own = slice(0, 64) if other == "v" else slice(64, 128)
    assert torch.count_nonzero(model.head.weight.grad[:, cols_other]) == 0
    # this modality's blocks do learn (so the zeros above are not an artefact of a dead model)
    assert torch.count_nonzero(model.head.weight.grad[:, cols_own]) > 0
    assert all(p.grad.abs().sum() > 0 for p in getattr(model, f"enc_{mode}").parameters())
    assert masked_grad_max(model, mode) == 0.0
    names = [n for n, _ in masked_grad_blocks(model, mode)]
    assert names[-1] == f"head.weight[:, {cols_other.start}:{cols_other.stop}]" and len(names) == 7


def test_masked_grad_max_detects_leaks_in_a_joint_batch():
    torch.manual_seed(1)
    model = dr.FusionNet()
    xa, xv, y = _batch(seed=3)
    out = dr.masked_forward(model, xa, xv, "av")
    (torch.nn.functional.cross_entropy(out[0], y) + out[1].pow(2).mean() + out[2].pow(2).mean()).backward()
    assert masked_grad_max(model, "a") > 1e-4 and masked_grad_max(model, "v") > 1e-4


# --------------------------------------------------------------------------------------------- data


def test_make_synth_av_is_the_exact_generator():
    out = dr.make_synth_av(n_train_per_class=7, n_test_per_class=3, C=4, d=5, seed=11)
    rng = np.random.default_rng(11)
    mu_a, mu_v = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    for split, n in (("train", 7), ("test", 3)):
        y = np.repeat(np.arange(4), n)
        z = rng.choice(3, size=y.size, p=[0.8, 0.1, 0.1])
        xa = 1.5 * mu_a[y] * (z != 1)[:, None] + rng.standard_normal((y.size, 5))
        xv = 0.5 * mu_v[y] * (z != 2)[:, None] + rng.standard_normal((y.size, 5))
        perm = rng.permutation(y.size)
        s = out[split]
        np.testing.assert_array_equal(s["y"], y[perm])
        np.testing.assert_array_equal(s["z"], z[perm])
        np.testing.assert_allclose(s["x_a"], xa[perm].astype(np.float32))
        np.testing.assert_allclose(s["x_v"], xv[perm].astype(np.float32))


def test_make_synth_av_determinism_shapes_balance_and_corruption_rates():
    a, b, c = dr.make_synth_av(seed=3), dr.make_synth_av(seed=3), dr.make_synth_av(seed=4)
    for split, n in (("train", 500), ("test", 200)):
        for k in ("x_a", "x_v", "y", "z"):
            np.testing.assert_array_equal(a[split][k], b[split][k])
        assert not np.array_equal(a[split]["x_a"], c[split]["x_a"])
        s = a[split]
        N = 6 * n
        assert s["x_a"].shape == s["x_v"].shape == (N, 32) and s["x_a"].dtype == np.float32
        assert np.bincount(s["y"]).tolist() == [n] * 6
        for flag in (1, 2):  # P(z = flag) = 0.1: within 3σ of the binomial rate
            rate = (s["z"] == flag).mean()
            assert abs(rate - 0.1) <= 3 * np.sqrt(0.1 * 0.9 / N), (split, flag, rate)
    # a corrupted modality carries no class signal: its class means collapse to ~0 (|mean| ≤ 5 σ/√n)
    s = a["train"]
    for key, flag, scale in (("x_a", 1, 1.5), ("x_v", 2, 0.5)):
        corrupt = np.array([s[key][(s["z"] == flag) & (s["y"] == k)].mean(0) for k in range(6)])
        clean = np.array([s[key][(s["z"] == 0) & (s["y"] == k)].mean(0) for k in range(6)])
        assert np.abs(corrupt).max() < 5 / np.sqrt(((s["z"] == flag) & (s["y"] == 0)).sum() * 0.5)
        assert np.linalg.norm(clean, axis=1).mean() == pytest.approx(scale * np.sqrt(32), rel=0.35)


def test_make_synth_av_rejects_bad_rho():
    with pytest.raises(ValueError, match="rho"):
        dr.make_synth_av(rho=(0.7, 0.5))


def test_digit_pairs_labels_split_and_partners():
    from icml25.core.datasets import load_mnist5k, mnist5k_split

    data = D.make_digit_pairs(seed=5, noise_sd=0.0)
    Xd, yd = D.load_digits8x8()
    tr, te = data["train"], data["test"]
    assert tr["x_a"].shape == (4000, 784) and te["x_a"].shape == (1000, 784) and tr["x_v"].shape == (4000, 64)
    assert np.bincount(tr["y"]).tolist() == [400] * 10 and np.bincount(te["y"]).tolist() == [100] * 10
    assert 0.0 <= tr["x_a"].min() and tr["x_a"].max() == 1.0 and "z" not in tr
    # the MNIST side is core's 400/100 split of MNIST-5k for the same seed (rows permuted)
    split = mnist5k_split(5)
    assert {r.tobytes() for r in te["x_a"]} == {r.tobytes() for r in split["X_test"]}
    assert load_mnist5k()[0].shape == (5000, 784)
    # without noise every B row is an 8×8 digit of the same class, and no 8×8 image serves both splits
    lookup = {row.tobytes(): k for row, k in zip((Xd / 16.0).astype(np.float32), yd)}
    assert all(lookup[r.tobytes()] == k for r, k in zip(tr["x_v"], tr["y"]))
    assert not {r.tobytes() for r in tr["x_v"]} & {r.tobytes() for r in te["x_v"]}
    noisy = D.make_digit_pairs(seed=5, noise_sd=0.5)["train"]["x_v"]
    assert np.std(noisy - tr["x_v"]) == pytest.approx(0.5, rel=0.02)


def test_packaged_files_are_hash_checked(tmp_path, monkeypatch):
    manifest = read_manifest(D.MANIFEST)
    for name in D.PACKAGED:
        assert len(D.package_file(name)) == manifest[name].size
    bad = tmp_path / "manifest.csv"
    bad.write_text(D.MANIFEST.read_text().replace("09f66e6debdee2cd", "19f66e6debdee2cd"))
    monkeypatch.setattr(D, "MANIFEST", bad)
    with pytest.raises(D.DataError, match="sklearn/datasets/data/digits.csv.gz: sha256"):
        D.package_file("digits8x8")
    with pytest.raises(D.DataError, match="expected 1797 rows"):
        D.parse_digits8x8(gzip.compress(b"1,2\n"))
    with pytest.raises(D.DataError, match="not shipped in a wheel"):
        D.package_file("kinetics400_train")


def test_raw_files_give_the_same_digit_pairs_as_the_wheels(tmp_path):
    paths = []
    for name in D.DATASET_FILES["digits"]:
        p = tmp_path / D.RAW_NAMES[name]
        p.write_bytes(D.package_file(name))
        paths.append(p)
    raw = D.read_raw_digits(paths)
    a = D.make_dataset("digits", {"noise_sd": 0.5, "digits_train_frac": 0.8}, 1, raw)
    b = D.make_dataset("digits", {"noise_sd": 0.5, "digits_train_frac": 0.8}, 1)
    for split in ("train", "test"):
        for k in ("x_a", "x_v", "y"):
            np.testing.assert_array_equal(a[split][k], b[split][k])
    back = D.dataset_from_arrays(D.split_arrays(a, 1), 1)
    np.testing.assert_array_equal(back["test"]["x_v"], a["test"]["x_v"])
    with pytest.raises(D.DataError, match="seed 2"):
        D.dataset_from_arrays(D.split_arrays(a, 1), 2, "digits.npz")
    with pytest.raises(D.DataError, match="cremad.*no offline builder"):
        D.make_dataset("cremad", {}, 0)


def test_validate_dataset_names_the_bad_key():
    data = dr.make_synth_av(n_train_per_class=2, n_test_per_class=2, seed=0)
    data["test"]["y"] = data["test"]["y"][:-1]
    with pytest.raises(D.DataError, match=r"synth\['test'\]\['x_a'\]"):
        D.validate_dataset(data, "synth")


# --------------------------------------------------------------------------------------------- training


def _tiny(epochs=3, warmup=1):
    s = get_settings("smoke")
    s["train"].update(epochs=epochs, warmup=warmup)
    s["synth"].update(n_train_per_class=20, n_test_per_class=10)
    return s


def test_remix_epochs_process_exactly_N_samples_with_isolated_gradients():
    s = _tiny()
    data = D.make_dataset("synth", s["synth"], 0)
    res = train_arm(data, "remix", s["train"], 0)
    assert [r["n_seen"] for r in res["curve"]] == [120] * 3
    for row in res["curve"][1:]:
        assert row["n_a"] + row["n_v"] == 120 and row["max_masked_grad"] == 0.0
    assert res["assign"].shape == (120,) and res["assign"].sum() == res["curve"][-1]["n_a"]


def test_joint_noaux_leaves_unimodal_heads_untouched_and_code_lr_arm():
    s = _tiny(epochs=2)
    data = D.make_dataset("synth", s["synth"], 0)
    trained = train_arm(data, "joint_noaux", s["train"], 0)["model"]
    fresh = build_model(data, s["train"], 0)
    torch.testing.assert_close(trained.head_a.weight, fresh.head_a.weight, rtol=0, atol=0)
    assert not torch.equal(trained.head.weight, fresh.head.weight)
    assert arm_lr("remix_code_lr", s["train"]) == 5e-5 and arm_lr("remix", s["train"]) == 1e-3
    with pytest.raises(ValueError, match="unknown arm"):
        train_arm(data, "ogm", s["train"], 0)


def test_smoke_run_is_deterministic_and_feeds_every_verdict():
    from icml25.studies.data_remix.experiment import run

    s = _tiny()
    runs = [run(s, arm, seed) for arm in ("joint", "remix") for seed in (0, 1)]
    again = run(s, "remix", 0)
    assert again["datasets"]["synth"]["final"] == runs[2]["datasets"]["synth"]["final"]
    for r in runs:
        f = r["datasets"]["synth"]["final"]
        assert f["fused_acc"] > 0.5 and f["probe_a"] > 0.5  # 6 classes: chance is 1/6
    v = E.verdicts_from_runs(runs, check_arms=("remix",), warmup=1, floor_pt=3.41)
    assert v["check2_isolation"][0] is True and v["check2_isolation"][1]["epochs"] == 4
    assert v["check1_routing"][1]["n"] == 2 and v["claim3_fused"][2]["datasets"]["synth"]["n"] == 2


# --------------------------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize("ra, rv, expected", [
    ([0.8, 0.9, 1.0], [0.95, 0.8, 0.85], True),      # boundary 0.8 counts
    ([0.79, 0.9, 1.0], [0.9, 0.9, 0.9], False),      # one seed short: the check fails
    ([0.9, 0.9, 0.9], [0.3, 0.9, 0.5], False),       # the visual side fails
])
def test_check_routing_holds_only_if_every_seed_routes_the_noise_modality(ra, rv, expected):
    holds, stat = E.check_routing(ra, rv)
    assert holds is expected
    assert stat["mean_route_a"] == pytest.approx(np.mean(ra)) and stat["n"] == 3


def test_check_routing_rejects_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        E.check_routing([np.nan], [0.9])
    with pytest.raises(ValueError, match="route_v values"):
        E.check_routing([0.9, 0.9], [0.9])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        E.check_routing([1.2], [0.9])


def test_check_isolation_holds_and_each_failure_mode():
    ok = dict(n_seen=[100, 100], n_a=[30, 40], n_v=[70, 60], n_train=[100, 100], max_masked_grad=[0.0, 0.0])
    holds, stat = E.check_isolation(**ok)
    assert holds and stat == {"epochs": 2, "epochs_wrong_count": 0, "epochs_bad_partition": 0,
                              "max_masked_grad": 0.0}
    assert E.check_isolation(**{**ok, "n_seen": [100, 101]})[1]["epochs_wrong_count"] == 1
    assert not E.check_isolation(**{**ok, "n_seen": [100, 101]})[0]
    assert not E.check_isolation(**{**ok, "n_a": [31, 40]})[0]
    assert not E.check_isolation(**{**ok, "max_masked_grad": [0.0, 1e-30]})[0]
    with pytest.raises(ValueError, match="empty"):
        E.check_isolation([], [], [], [], [])


def _acc(base, d_pt):
    """(treated, baseline) accuracy fractions whose paired differences are d_pt points (base in fractions)."""
    b = np.asarray(base, float)
    return b + np.asarray(d_pt, float) / 100.0, b


def test_paired_gain_student_t_interval_and_mde_by_hand():
    """d = 1, 2, 3 pt: mean 2, sd 1, t_{0.975,2} = 4.3027 → CI 2 ± 4.3027/√3 = [−0.484, 4.484] (never the
    [1, 3] of a percentile bootstrap); MDE (4.3027 + t_{0.8,2} = 1.0607) · 1/√3 = 3.097."""
    t, b = _acc([0.5] * 3, [1.0, 2.0, 3.0])
    _, _, stat = E.paired_gain({"s": t}, {"s": b}, floor_pt=1.0)
    d = stat["datasets"]["s"]
    assert d["mean_pt"] == pytest.approx(2.0)
    assert (d["ci_low_pt"], d["ci_high_pt"]) == pytest.approx((2 - 4.302653 / 3 ** 0.5, 2 + 4.302653 / 3 ** 0.5),
                                                              abs=1e-5)
    assert d["mde_pt"] == pytest.approx((4.302653 + 1.060660) / 3 ** 0.5, abs=1e-5)
    assert d["ci_method"] == "t 95%, n=3 seeds"


def test_paired_gain_reproduced_needs_the_floor_and_a_positive_ci_on_every_dataset():
    t1, b1 = _acc([0.5] * 3, [5.0, 5.5, 6.0])   # mean 5.5 ≥ 3.41, CI low 4.26 > 0
    t2, b2 = _acc([0.25] * 3, [4.0, 4.5, 5.0])  # mean 4.5 ≥ 3.41, CI low 3.26 > 0
    rep, notrep, stat = E.paired_gain({"synth": t1, "digits": t2}, {"synth": b1, "digits": b2}, floor_pt=3.41)
    assert (rep, notrep) == (True, False) and stat["floor_pt"] == 3.41
    # the same gains against a floor above their means: neither reproduced nor (CI high 6.74 ≥ 6.5) not reproduced
    assert E.paired_gain({"synth": t1}, {"synth": b1}, floor_pt=6.5)[:2] == (False, False)
    # significant but below the floor on one dataset → inconclusive
    t3, b3 = _acc([0.5] * 3, [1.0, 1.1, 1.2])
    assert E.paired_gain({"a": t1, "b": t3}, {"a": b1, "b": b3}, floor_pt=3.41)[:2] == (False, False)


def test_paired_gain_mean_exactly_at_the_floor_counts_and_ci_low_zero_does_not():
    t, b = _acc([0.5] * 3, [3.0, 3.5, 4.0])  # mean 3.5 = floor; CI low 2.26 > 0
    assert E.paired_gain({"s": t}, {"s": b}, floor_pt=3.5)[0] is True
    t, b = _acc([0.5] * 3, [0.0, 0.0, 0.0])
    assert E.paired_gain({"s": t}, {"s": b}, floor_pt=0.0)[:2] == (False, False)  # CI low 0 is not > 0


def test_paired_gain_not_reproduced_when_the_ci_excludes_the_floor_on_every_dataset():
    good_t, good_b = _acc([0.5] * 3, [5.0, 5.5, 6.0])
    small_t, small_b = _acc([0.5] * 3, [0.5, 0.55, 0.6])  # CI high 0.67 < 3.41
    rep, notrep, stat = E.paired_gain({"a": small_t, "b": small_t}, {"a": small_b, "b": small_b}, floor_pt=3.41)
    assert (rep, notrep) == (False, True) and stat["datasets"]["a"]["ci_high_pt"] < 3.41
    assert E.paired_gain({"a": good_t, "b": small_t}, {"a": good_b, "b": small_b}, floor_pt=3.41)[:2] == (
        False, False)  # one dataset up, one below: inconclusive


def test_paired_gain_rejects_bad_input():
    with pytest.raises(ValueError, match="datasets differ"):
        E.paired_gain({"a": [0.5]}, {"b": [0.5]}, floor_pt=1.0)
    with pytest.raises(ValueError, match="fractions"):
        E.paired_gain({"a": [50.0]}, {"a": [49.0]}, floor_pt=1.0)
    with pytest.raises(ValueError, match="seeds"):
        E.paired_gain({"a": [0.5, 0.6]}, {"a": [0.5]}, floor_pt=1.0)
    with pytest.raises(ValueError, match="floor_pt"):
        E.paired_gain({"a": [0.5]}, {"a": [0.5]}, floor_pt=float("nan"))
    assert E.claim_fused_accuracy({"a": [0.6, 0.61]}, {"a": [0.5] * 2}, floor_pt=3.41)[0] is True
    assert E.claim_unimodal_sufficiency({"a": [0.4, 0.41]}, {"a": [0.5] * 2}, floor_pt=3.41)[1] is True


def _fake_runs(leak: float = 0.0, remix_gain: float = 0.0, solo_v_probe: float = 0.8,
               route: float = 0.9) -> list[dict]:
    runs = []
    for arm in ("joint", "joint_noaux", "remix", "remix_code_lr", "solo_v"):
        for seed in (0, 1, 2):
            curve = [{"n_seen": 10, "n_a": 4, "n_v": 6, "max_masked_grad": leak if e == 2 else 0.0} for e in range(3)]
            fused = 0.9 + (remix_gain * (1 + 0.1 * seed) if arm == "remix" else 0.0)
            final = {"fused_acc": fused, "probe_v": {"solo_v": solo_v_probe, "joint_noaux": 0.7}.get(arm, 0.75),
                     "route_a_given_acorrupt": route, "route_v_given_vcorrupt": 0.95, "n_train": 10}
            runs.append({"arm": arm, "seed": seed, "datasets": {"synth": {"curve": curve, "z": True, "final": final}}})
    return runs


ARMS5 = ["joint", "joint_noaux", "remix", "remix_code_lr", "solo_v"]


def _claims(**kw) -> dict:
    return {x.id: x for x in E.build_claims(_fake_runs(**kw), arms=ARMS5, warmup=1, floor_pt=3.41,
                                            min_laziness_pt=1.0)}


def test_build_claims_entries_verdicts_evidence_and_laziness_note():
    c = _claims(remix_gain=0.05)  # d = 5, 5.5, 6 pt on fused accuracy; probes identical (d = 0)
    assert list(c) == ["c1_routing", "c2_isolation", "c3_fused", "c4_unimodal"]
    assert (c["c1_routing"].kind, c["c1_routing"].source, c["c1_routing"].holds) == ("check", "ours", True)
    assert c["c2_isolation"].holds is True and c["c2_isolation"].evidence.n == 12  # 2 epochs x 2 arms x 3 seeds
    c3 = c["c3_fused"]
    assert c3.verdict == REPRODUCED and c3.key_numbers["synth d (pt)"] == pytest.approx(5.5)
    assert (c3.evidence.n, c3.evidence.unit, c3.evidence.paper_data) == (3, "seeds", False)
    assert c3.evidence.ci_method.startswith("t 95%, n=3 seeds")
    assert c3.evidence.mde == pytest.approx((4.302653 + 1.060660) * 0.5 / 3 ** 0.5, abs=1e-4)
    assert [g.name for g in c3.gates] == ["laziness_synth", "headroom_synth"] and all(g.passed for g in c3.gates)
    assert c3.gates[0].value == pytest.approx(5.0) and c3.gates[1].value == pytest.approx(10.0)
    assert c["c4_unimodal"].verdict == NOT_REPRODUCED  # d = 0 exactly: CI [0, 0] lies below the 3.41-pt floor
    assert c["c4_unimodal"].statistic["weak_probe_by_arm"]["synth"] == pytest.approx(
        {"joint": 0.75, "joint_noaux": 0.7, "remix": 0.75, "solo_v": 0.8})
    assert "synth: joint 75.0, joint_noaux 70.0, remix 75.0, solo_v 80.0" in c["c4_unimodal"].note
    assert c["c4_unimodal"].note.startswith("Small, clean data")  # a null result: the caveat is said
    assert c3.note.startswith("Weak-modality")  # reproduced: no null-result caveat


def test_build_claims_not_reproduced_and_inconclusive():
    assert _claims(remix_gain=0.005)["c3_fused"].verdict == NOT_REPRODUCED  # d = 0.5-0.6 pt: CI high < 3.41
    assert _claims(remix_gain=0.03)["c3_fused"].verdict == INCONCLUSIVE  # d = 3-3.6 pt: CI [2.55, 4.05] spans 3.41


def test_build_claims_failed_laziness_gate_makes_a_positive_result_inconclusive():
    c = _claims(remix_gain=0.05, solo_v_probe=0.75)  # solo_v = joint on the weak modality: no laziness
    c3 = c["c3_fused"]
    assert c3.verdict == INCONCLUSIVE and not c3.gates[0].passed and c3.gates[0].value == pytest.approx(0.0)
    assert "adequacy gate laziness_synth" in c3.note and "the test alone gives 'reproduced'" in c3.note
    no_solo = E.build_claims([r for r in _fake_runs(remix_gain=0.05) if r["arm"] != "solo_v"], arms=ARMS5[:4],
                             warmup=1, floor_pt=3.41, min_laziness_pt=1.0)
    assert no_solo[2].verdict == INCONCLUSIVE and no_solo[2].gates[0].value is None  # no solo_v arm: NaN fails


def test_build_claims_failed_headroom_gate():
    runs = _fake_runs(remix_gain=0.01)
    for r in runs:
        r["datasets"]["synth"]["final"]["fused_acc"] += 0.08  # joint at 98 %: 2 pt of room < 3.41
    c = {x.id: x for x in E.build_claims(runs, arms=ARMS5, warmup=1, floor_pt=3.41, min_laziness_pt=1.0)}
    assert c["c3_fused"].gates[1].value == pytest.approx(2.0) and not c["c3_fused"].gates[1].passed
    assert c["c3_fused"].verdict == INCONCLUSIVE and "headroom_synth" in c["c3_fused"].note
    assert "the test alone gives 'not reproduced'" in c["c3_fused"].note


def test_check1_routing_fails_and_check2_detects_a_leak():
    c = _claims(route=0.7)
    assert c["c1_routing"].holds is False and c["c1_routing"].verdict == NOT_REPRODUCED
    leaky = _claims(leak=1e-7)
    assert leaky["c2_isolation"].holds is False and leaky["c2_isolation"].verdict == NOT_REPRODUCED


def test_paper_data_follows_the_datasets():
    assert E.uses_paper_data(["cremad", "kinetics_sounds"]) is True
    assert E.uses_paper_data(["synth", "digits"]) is False and E.uses_paper_data(["cremad", "digits"]) is False


def test_linear_probe_value():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 100)
    X = rng.standard_normal((300, 4))
    X[:, 0] += 20.0 * y  # separable on one coordinate (gaps of 20 σ)
    assert E.linear_probe(X, y, X, y) == 1.0
    assert E.linear_probe(rng.standard_normal((300, 4)), y, rng.standard_normal((300, 4)), y) < 0.5


def test_paper_scale_follows_the_released_recipe():
    """Issue 32: the paper scale is the released run (scripts/run_train.sh, run_baseline.sh and their argparse
    defaults): Adam, batch 64, 60 epochs, warm-up 10, StepLR ×0.1 at epoch 30, weight decay 1e-4, lr 1e-3 for the
    baseline and 5e-5 for Remix (the remix_code_lr arm), official ResNet initialisation."""
    paper = get_settings("paper")
    t = paper["train"]
    assert (t["epochs"], t["warmup"], t["lr_step"], t["lr_gamma"], t["batch_size"]) == (60, 10, 30, 0.1, 64)
    assert (t["weight_decay"], t["alpha"], t["beta"], t["gamma1"], t["gamma2"]) == (1e-4, 0.5, 0.5, 1.0, 1.0)
    assert arm_lr("joint", t) == 1e-3 and arm_lr("remix_code_lr", t) == 5e-5
    assert {"joint", "remix_code_lr"} <= set(paper["arms"]) and t["resnet_init"] == "official"
    assert (t["resnet_width"], t["feat"], paper["device"]) == (64, 512, "cuda")  # ResNet-18 on a GPU
    assert "solo_v" in paper["arms"]  # the laziness gate of claims 3-4 needs it
    # the learning rate of the Remix arm at epoch e: 5e-5 before epoch 30, 5e-6 from it (StepLR written out)
    lrs = [5e-5 * 0.1 ** (e // 30) for e in range(60)]
    assert lrs[29] == 5e-5 and lrs[30] == pytest.approx(5e-6) and lrs[59] == pytest.approx(5e-6)


# --------------------------------------------------------------------------------------------- settings


def test_config_scales_build_and_bad_values_name_the_key():
    smoke, default, paper = (get_settings(s) for s in ("smoke", "default", "paper"))
    assert smoke["seeds"] == [1000] and smoke["datasets"] == ["synth"] and smoke["synth"]["n_train_per_class"] == 50
    assert smoke["arms"] == ["joint", "remix"]
    assert (smoke["train"]["epochs"], smoke["train"]["warmup"]) == (4, 2)
    # the CPU budget shortens the default run (spec: 30 epochs, warm-up 5); the model's defaults keep the spec's
    assert (default["train"]["epochs"], default["train"]["warmup"], default["train"]["lr_step"]) == (20, 3, 10)
    assert (Config.model_fields["train"].default.epochs, Config.model_fields["train"].default.warmup) == (30, 5)
    assert default["datasets"] == ["synth", "digits"] and len(default["arms"]) == 6
    assert default["seeds"] == [2000, 2001, 2002]  # issue 32: renewed (0-2, 1000-1002 were seen)
    assert default["min_gain_pt"] == 3.41 and default["adequacy"]["min_laziness_pt"] == 1.0
    assert paper["encoder"] == "resnet18" and paper["train"]["hidden"] is None and paper["seeds_per_job"] == 1
    base = merge_scale(load_yaml(YAML), "default")
    for path, value, match in (
            (("train", "warmup"), 30, r"data_remix\.train: warmup: 30 must be < epochs"),
            (("train", "lr"), 0.0, r"data_remix\.train\.lr"),
            (("synth", "rho"), [0.7, 0.5], r"data_remix\.synth: rho"),
            (("digits", "noise_sd"), -0.1, r"data_remix\.digits\.noise_sd"),
            (("min_gain_pt",), -1.0, r"data_remix\.min_gain_pt"),
            (("adequacy", "min_laziness_pt"), float("nan"), r"data_remix\.adequacy\.min_laziness_pt"),
            (("arms",), ["joint", "solo_a"], r"arms: must include \['remix'\]"),
            (("datasets",), ["mnist"], r"data_remix\.datasets\[0\]")):
        data = json.loads(json.dumps(base))
        node = data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        with pytest.raises(ConfigError, match=match):
            build(Config, data, "data_remix")


def test_paper_scale_resnet_uses_the_released_initialisation():
    """Issue 32: conv weights ~ N(0, 2/fan_out) with fan_out = out·k·k (Kaiming normal, fan_out), norm weights
    ~ N(1, 0.02²), norm biases 0; measured on the largest tensors against the formula (sampling error < 1 %)."""
    from icml25.studies.data_remix.model import ResNet18Encoder

    torch.manual_seed(0)
    enc = ResNet18Encoder(3).requires_grad_(False)
    conv = enc.layers[-1].conv2.weight  # (512, 512, 3, 3): 2.4 M draws
    assert float(conv.mean()) == pytest.approx(0.0, abs=1e-4)
    assert float(conv.std()) == pytest.approx(math.sqrt(2 / (512 * 9)), rel=0.01)
    stem = enc.stem[0].weight  # (64, 3, 7, 7): fan_out = 64·49, not fan_in = 3·49
    assert float(stem.std()) == pytest.approx(math.sqrt(2 / (64 * 49)), rel=0.05)
    bn_w = torch.cat([m.weight for m in enc.modules() if isinstance(m, torch.nn.BatchNorm2d)])
    bn_b = torch.cat([m.bias for m in enc.modules() if isinstance(m, torch.nn.BatchNorm2d)])
    assert bn_w.numel() > 4000 and float(bn_w.mean()) == pytest.approx(1.0, abs=2e-3)
    assert float(bn_w.std()) == pytest.approx(0.02, rel=0.05) and float(bn_b.abs().max()) == 0.0
    # PyTorch's default (the switch "torch"): BN weights exactly 1, conv std sqrt(1/(3·fan_in)) ≠ the official one
    torch.manual_seed(0)
    plain = ResNet18Encoder(3, init="torch").requires_grad_(False)
    assert float(plain.layers[-1].conv2.weight.std()) == pytest.approx(math.sqrt(1 / (3 * 512 * 9)), rel=0.01)
    assert all(bool((m.weight == 1).all()) for m in plain.modules() if isinstance(m, torch.nn.BatchNorm2d))
    with pytest.raises(ValueError, match="init must be one of"):
        ResNet18Encoder(1, init="xavier")


def test_paper_scale_resnet_encoders_shapes_and_isolation():
    from icml25.studies.data_remix.model import resnet18_fusion

    torch.manual_seed(0)
    model = resnet18_fusion(n_classes=6)
    xa = torch.randn(2, 1, 32, 32)       # log-spectrogram
    xv = torch.randn(2, 2, 3, 32, 32)    # 2 frames
    a, v = model.enc_a(xa), model.enc_v(xv)
    assert a.shape == v.shape == (2, 512) and (a >= 0).all()
    fused, la, lv = dr.masked_forward(model, xa, xv, "v")
    unimodal_loss((fused, la, lv), torch.tensor([1, 4]), "v", 1.0).backward()
    assert masked_grad_max(model, "v") == 0.0
    assert model.enc_v.stem[0].weight.grad.abs().sum() > 0


# --------------------------------------------------------------------------------------------- stages


def test_download_remote_through_directory_mirror(tmp_path):
    mirror = tmp_path / "mirror"
    manifest = read_manifest(D.MANIFEST)
    for name in D.PACKAGED:
        dest = mirror / manifest[name].mirror_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(D.package_file(name))
    out = [str(tmp_path / "raw" / D.RAW_NAMES[n]) for n in D.DATASET_FILES["digits"]]
    args = ["download", "--scale", "default", "--no-track", "--config", str(YAML), "--data-source", "remote",
            "--mirror", str(mirror), "--out"]
    with pytest.raises(SystemExit, match="expected 2 --out"):  # default = synth (no file) + digits (2 files)
        stage_cli([*args, out[0]])
    assert stage_cli([*args, *out]) == 0
    assert Path(out[0]).read_bytes() == D.package_file("mnist_5k")
    Path(out[0]).unlink()
    (mirror / manifest["mnist_5k"].mirror_path).write_bytes(b"corrupt")
    with pytest.raises(DownloadError, match="mnist_5k"):
        stage_cli([*args, *out])
    assert not Path(out[0]).exists()


def test_train_rejects_unknown_arm_and_a_missing_gpu(tmp_path):
    outs = [str(tmp_path / f"m.{e}") for e in ("pt", "json", "npz")]
    with pytest.raises(SystemExit, match="arm"):
        stage_cli(["train", "--scale", "smoke", "--no-track", "--config", str(YAML), "--arm", "ogm", "--in", "a.npz",
                   "--out", *outs])
    if not torch.cuda.is_available():  # the paper scale asks for cuda: a clear stop, not a silent CPU run
        with pytest.raises(SystemExit, match="no CUDA device"):
            stage_cli(["train", "--scale", "paper", "--no-track", "--config", str(YAML), "--arm", "remix", "--in",
                       "a.npz", "b.npz", "--out", *outs])


def test_smoke_pipeline_through_snakemake(tmp_path):
    """All stages at scale smoke through Snakemake in a project copy (its own results dir and MLflow store)."""
    from conftest import copy_project, run_snakemake, tail

    work = copy_project(tmp_path / "proj")
    out = run_snakemake(work, "--cores", "2", "--config", "studies=[data_remix]", "scale=smoke", timeout=600)
    assert out.returncode == 0, tail(out)
    r = work / "results/smoke/data_remix"
    doc = load_claims(r / "claims.json")
    entries = {c["id"]: c for c in doc["claims"]}
    assert list(entries) == ["c1_routing", "c2_isolation", "c3_fused", "c4_unimodal"]
    assert doc["seeds"] == [1000] and doc["paper"]["ref"].endswith("2506.11550")
    kinds = {k: (c["kind"], c["source"], c["verdict"]) for k, c in entries.items()}
    assert kinds["c1_routing"][:2] == ("check", "ours")  # issue 31: a pure-noise corruption makes it a check
    assert kinds["c3_fused"] == ("claim", "paper", INCONCLUSIVE) and kinds["c4_unimodal"][0] == "claim"
    for cid in ("c3_fused", "c4_unimodal"):  # one seed, no solo_v arm: the evidence rule and the laziness gate
        ev3 = entries[cid]["evidence"]
        assert (ev3["n"], ev3["unit"], ev3["paper_data"]) == (1, "seeds", False)
        assert ev3["ci_method"].startswith("none (n=1 seeds)")
        assert {g["name"]: g["passed"] for g in entries[cid]["gates"]}["laziness_synth"] is False
    c2 = entries["c2_isolation"]
    assert (c2["kind"], c2["holds"], c2["verdict"]) == ("check", True, REPRODUCED)
    assert c2["statistic"] == {"epochs": 2, "epochs_wrong_count": 0, "epochs_bad_partition": 0,
                               "max_masked_grad": 0.0}  # 2 post-warm-up epochs of remix
    assert c2["evidence"] == {"n": 2, "unit": "epochs", "paper_data": None, "ci_method": "", "mde": None}
    assert "not evidence against the paper" in entries["c3_fused"]["note"]
    (rec,) = json.loads((r / "models/remix/chunk0.json").read_text())["runs"]
    assert [row["n_seen"] for row in rec["curve"]] == [300] * 4 and rec["final"]["n_train"] == 300
    assert entries["c1_routing"]["statistic"]["route_a"] == [rec["final"]["route_a_given_acorrupt"]]
    assign = np.load(r / "models/remix/chunk0.npz")
    assert assign["synth/s1000/assign"].sum() == rec["curve"][-1]["n_a"]
    ev = json.loads((r / "metrics/eval.json").read_text())
    assert set(ev["summary"]["synth"]) == {"joint", "remix"}  # the smoke scale's arms
    assert ev["summary"]["synth"]["remix"]["fused_acc"]["mean"] == rec["final"]["fused_acc"]
    assert ev["curves"]["synth"]["remix"]["share_a"][:2] == [None, None]  # warm-up: no routing
    for name in ("routing.png", "accuracy.png"):
        assert (r / "figures" / name).stat().st_size > 5000
    assert "c2_isolation" in (r / "report.md").read_text()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work}/results/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("icml25/data_remix").experiment_id], max_results=500)
    (job,) = [x for x in runs if x.data.tags.get("stage") == "train" and x.data.tags.get("arm") == "remix"
              and x.data.tags["run_level"] == "job"]
    assert job.data.tags["seed"] == "1000"  # a job of one seed is that seed's run
    history = client.get_metric_history(job.info.run_id, "train/loss")
    assert [m.step for m in history] == [0, 1, 2, 3]
    assert [m.value for m in history] == pytest.approx([row["loss"] for row in rec["curve"]])
    assert [m.step for m in client.get_metric_history(job.info.run_id, "train/n_a")] == [2, 3]
    assert {a.path for a in client.list_artifacts(job.info.run_id, "model")} == {"model/chunk0.pt",
                                                                                 "model/config.json"}
    evals = {x.data.tags["arm"]: x for x in runs if x.data.tags.get("stage") == "evaluate"
             and x.data.tags["run_level"] == "nested" and "seed" not in x.data.tags}
    assert set(evals) == set(ev["summary"]["synth"])
    assert evals["remix"].data.metrics["eval/fused_acc"] == pytest.approx(rec["final"]["fused_acc"])
    evaluate = next(x for x in runs if x.data.tags.get("stage") == "evaluate" and x.data.tags["run_level"] == "job")
    assert evaluate.data.metrics["verdicts/checks_hold"] == 2.0  # c1 (routing) and c2 are checks
