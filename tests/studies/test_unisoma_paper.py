"""Paper scale of the unisoma study: the official pickle formats (hand-made samples with hand-computed views),
malformed files failing with the file, sample and key named, the hand-placed layout check, the ragged npz layout,
the normalisers, batching, the rollout metric on a closed form, the nine experiments' recipes, a tiny training
run of each task, and the rehearsal miniatures."""
from __future__ import annotations

import pickle
from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from icml25.studies.unisoma import paper as P
from icml25.studies.unisoma import paper_data as PD
from icml25.studies.unisoma import rehearsal as R
from icml25.studies.unisoma.config import EXPERIMENT_NAMES

f32 = np.float32


def _dump(tmp_path, obj, name="x_dataset_train.pkl", protocol=4):
    p = tmp_path / name
    p.write_bytes(pickle.dumps(obj, protocol=protocol))
    return p


def _bilateral():
    return {"init_metal_pos": np.array([[0, 0, 0], [1, 0, 0]], f32),
            "init_rubber_pos": np.array([[0, -1, 0], [1, -1, 0], [2, -1, 0]], f32),
            "die_1_pos": np.array([[0, 1, 0, 0, -0.5, 0]], f32),
            "die_2_pos": np.array([[0, -2, 0, 0, 0.25, 0], [1, -2, 0, 0, 0.25, 0]], f32),
            "final_metal_pos": np.array([[0, -0.5, 0], [1, -0.25, 0]], f32),
            "final_rubber_pos": np.array([[0, -1.5, 0], [1, -1, 0], [2, -1, 0]], f32),
            "final_metal_stress": np.array([3, 4], f32), "final_rubber_stress": np.array([[1], [2], [0]], f32),
            "final_metal_peeq": np.array([0.5, 0.0], f32), "final_rubber_peeq": np.zeros(3, f32)}


# ---------------------------------------------------------------------------------------------------- formats
def test_bilateral_stamping_view_by_hand():
    v = PD.long_time_view("bilateral_stamping", _bilateral(), "f")
    # loads = [p, p + displacement] of each die; rigids = die positions
    np.testing.assert_array_equal(v.loads[0], [[0, 1, 0, 0, 0.5, 0]])
    np.testing.assert_array_equal(v.loads[1], [[0, -2, 0, 0, -1.75, 0], [1, -2, 0, 1, -1.75, 0]])
    np.testing.assert_array_equal(v.rigids[1], [[0, -2, 0], [1, -2, 0]])
    # targets = [final - init, stress, peeq]; a (N, 1) stress column is accepted
    np.testing.assert_array_equal(v.targets[0], [[0, -0.5, 0, 3, 0.5], [0, -0.25, 0, 4, 0]])
    np.testing.assert_array_equal(v.targets[1][:, :4], [[0, -0.5, 0, 1], [0, 0, 0, 2], [0, 0, 0, 0]])


def test_unilateral_stamping_has_a_fixed_die_and_sixteen_moving_segments():
    s = {k: v for k, v in _bilateral().items() if not k.startswith("die_")}
    s["die_1_pos"] = np.array([[5, 5, 5]], f32)
    for i in range(1, 17):
        s[f"die_2-{i}_pos"] = np.array([[i, 0, 0, 0, 0, -i]], f32)
    v = PD.long_time_view("unilateral_stamping", s, "f")
    assert (len(v.loads), len(v.rigids)) == (16, 17)
    np.testing.assert_array_equal(v.rigids[0], [[5, 5, 5]])
    np.testing.assert_array_equal(v.rigids[3], [[3, 0, 0]])
    np.testing.assert_array_equal(v.loads[2], [[3, 0, 0, 3, 0, -3]])
    with pytest.raises(PD.DataError, match=r"f: key 'die_2-16_pos' missing"):
        PD.long_time_view("unilateral_stamping", {k: x for k, x in s.items() if k != "die_2-16_pos"}, "f")


def test_deforming_plate_takes_the_frame_of_largest_actuator_travel():
    x = np.zeros((4, 5, 3), f32)
    x[1:, :, 2] = [[1], [2], [3]]                      # the plate sinks frame by frame
    r = np.zeros((4, 2, 3), f32)
    r[:, :, 0] = [[0], [1], [3], [2]]                  # the actuator travels 1, 3, 2: farthest at frame 2
    stress = np.arange(20, dtype=f32).reshape(4, 5) * 1000
    v = PD.long_time_view("deforming_plate", {"deformable_solid_pos": x, "rigid_solid_pos": r,
                                              "deformable_solid_stress": stress[..., None]}, "f")
    np.testing.assert_array_equal(v.targets[0][:, :3], np.tile([0, 0, 2], (5, 1)))
    np.testing.assert_array_equal(v.targets[0][:, 3], [10, 11, 12, 13, 14])   # stress / 1000 at frame 2
    np.testing.assert_array_equal(v.loads[0], [[0, 0, 0, 3, 0, 0]] * 2)        # [p0, p2 - p0]


def test_tissue_manipulation_views_and_lists_of_frames():
    frames = [np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], f32) + t * np.array([0, 0, 0.5], f32)
              for t in range(4)]                       # a list of per-frame arrays, as well as an ndarray
    grip = np.stack([np.array([[2.0, 0, 0]], f32) * (t + 1) for t in range(4)])
    s = {"tissue_mesh_positions": frames, "gripper_position": grip, "grasping_position": np.array([7, 8, 9], f32)}
    lt = PD.long_time_view("tissue_manipulation", s, "f")
    np.testing.assert_array_equal(lt.rigids[1], [[7, 8, 9]])
    np.testing.assert_array_equal(lt.loads[1], [[7, 8, 9, 0, 0, 0]])         # fixed grasp point: zero motion
    np.testing.assert_array_equal(lt.loads[0], [[2, 0, 0, 6, 0, 0]])         # [p0, p_last - p0]
    np.testing.assert_array_equal(lt.targets[0], np.tile([0, 0, 1.5], (4, 1)))
    tr = PD.trajectory_view("tissue_manipulation", s, 3, "f")
    loads, rigids, defs, targets = tr.frame_inputs(1)
    np.testing.assert_array_equal(loads[0], [[4, 0, 0, 2, 0, 0]])            # [p_t, p_{t+1} - p_t]
    np.testing.assert_array_equal(loads[1], [[7, 8, 9, 0, 0, 0]])
    np.testing.assert_array_equal(targets[0], np.tile([0, 0, 0.5], (4, 1)))
    assert tr.deformables[0].shape == (3, 4, 3)
    with pytest.raises(PD.DataError, match="f: key 'tissue_mesh_positions' has 4 frames, the experiment needs 5"):
        PD.trajectory_view("tissue_manipulation", s, 5, "f")


def test_malformed_files_fail_naming_file_sample_and_key(tmp_path):
    good = _bilateral()
    cases = [({**good, "final_metal_pos": np.zeros((3, 3), f32)}, r"key 'final_metal_pos' has shape \(3, 3\), expected \(2, 3\)"),
             ({**good, "final_metal_peeq": np.zeros(2, np.int64)}, "key 'final_metal_peeq' must hold floats"),
             ({**good, "die_1_pos": np.full((1, 6), np.nan, f32)}, "key 'die_1_pos' has non-finite values"),
             ({k: v for k, v in good.items() if k != "final_rubber_stress"}, "key 'final_rubber_stress' missing")]
    for i, (sample, msg) in enumerate(cases):
        path = _dump(tmp_path, [good, sample], f"bad{i}.pkl")
        with pytest.raises(PD.DataError, match=msg) as err:
            PD.convert("bilateral_stamping", PD.read_official(path), PD.LONG, None, str(path))
        assert f"bad{i}.pkl: sample 1" in str(err.value)
    for obj, msg in (({"a": 1}, "non-empty list of sample dicts"), ([good, [1]], "sample 1 is a list")):
        with pytest.raises(PD.DataError, match=msg):
            PD.read_official(_dump(tmp_path, obj, "top.pkl"))
    od = _dump(tmp_path, [OrderedDict(good)], "od.pkl")
    with pytest.raises(PD.DataError, match="od.pkl: refused by the restricted unpickler: global collections"):
        PD.read_official(od)
    trunc = tmp_path / "trunc.pkl"
    trunc.write_bytes(pickle.dumps([good], protocol=4)[:100])
    with pytest.raises(PD.DataError, match="trunc.pkl: .*truncated"):
        PD.read_official(trunc)
    with pytest.raises(PD.DataError, match="max_pickle_bytes=10"):
        PD.read_official(_dump(tmp_path, [good]), max_bytes=10)


def test_protocol_5_array_pickles_load(tmp_path):
    path = _dump(tmp_path, [_bilateral()], protocol=5)
    assert b"_frombuffer" in path.read_bytes()
    back = PD.read_official(path)
    np.testing.assert_array_equal(back[0]["die_2_pos"], _bilateral()["die_2_pos"])


def test_manual_layout_check_lists_what_is_missing(tmp_path):
    with pytest.raises(PD.DataError, match="is not a directory"):
        PD.check_manual_layout(tmp_path / "nope", ["rice_grip"])
    (tmp_path / "rice_grip" / "data" / "input").mkdir(parents=True)
    (tmp_path / PD.manual_path("rice_grip", "train")).write_bytes(b"x")
    with pytest.raises(PD.DataError, match=r"2 file\(s\) missing: \['rice_grip/data/input/rice_grip_dataset_eval"):
        PD.check_manual_layout(tmp_path, ["rice_grip"])
    for s in ("eval", "test"):
        (tmp_path / PD.manual_path("rice_grip", s)).write_bytes(b"x")
    assert [p.name for p in PD.check_manual_layout(tmp_path, ["rice_grip"])] == [
        "rice_grip_dataset_train.pkl", "rice_grip_dataset_eval.pkl", "rice_grip_dataset_test.pkl"]


# ---------------------------------------------------------------------------------------------------- layout
def test_ragged_pack_roundtrip_and_normalisers_by_hand():
    a = PD.long_time_view("bilateral_stamping", _bilateral(), "a")
    b = PD.long_time_view("bilateral_stamping", {**_bilateral(), "init_metal_pos": np.ones((2, 3), f32)}, "b")
    c = PD.LongSample([x[:1] for x in a.loads], a.rigids, [a.deformables[0], a.deformables[1][:2]],
                      [a.targets[0], a.targets[1][:2]])                        # different node counts
    packed = PD.pack(PD.LONG, [a, c, b])
    np.testing.assert_array_equal(packed["long_time/deformables1_n"], [3, 2, 3])
    back = PD.unpack(PD.LONG, packed)
    for x, y in zip([a, c, b], back):
        for g in ("loads", "rigids", "deformables", "targets"):
            for u, v in zip(getattr(x, g), getattr(y, g)):
                np.testing.assert_array_equal(u.astype(f32), v)
    norm = PD.fit_normalisers(PD.LONG, [a, b], [np.array([[1.0], [3.0]])])
    # metal initial positions: rows (0,0,0), (1,0,0), (1,1,1), (1,1,1): mean (.75, .5, .5), std (.433, .5, .5)
    np.testing.assert_allclose(norm["deformables0_mean"], [0.75, 0.5, 0.5])
    np.testing.assert_allclose(norm["deformables0_std"], [np.sqrt(3) / 4, 0.5, 0.5])
    np.testing.assert_allclose([norm["edges0_mean"][0], norm["edges0_std"][0]], [2.0, 1.0])
    # rubber: x and z displacement and PEEQ are 0 everywhere: constant, std 1, flagged
    assert norm["targets1_const"].tolist() == [1, 0, 1, 0, 1] and norm["targets1_std"][4] == 1.0


def test_trajectory_normalisers_use_frame_steps():
    x = np.zeros((3, 4, 3))
    x[:, :, 0] = np.arange(4)                          # 4 nodes on a line
    x[1] += [0, 0, 1]
    x[2] += [0, 0, 3]                                  # steps of +1 then +2 in z
    r = np.zeros((3, 1, 3))
    tr = PD.Trajectory([x], [r, r + 1])
    norm = PD.fit_normalisers(PD.AUTO, [tr], [])
    np.testing.assert_allclose(norm["targets0_mean"], [0, 0, 1.5])
    np.testing.assert_allclose(norm["targets0_std"], [1, 1, 0.5])             # x, y constant: std 1
    np.testing.assert_allclose(norm["deformables0_mean"], [1.5, 0, 0.5])      # frames 0 and 1 only


def test_long_batches_stack_only_equal_node_counts():
    mk = lambda n: PD.LongSample([np.zeros((2, 6))], [np.zeros((2, 3))], [np.zeros((n, 3))], [np.zeros((n, 3))])
    items = [mk(4), mk(4), mk(5), mk(4), mk(4), mk(4)]
    assert P.long_batches(items, range(6), 2) == [[0, 1], [2], [3, 4], [5]]
    assert P.long_batches(items, [5, 0, 2], 8) == [[5, 0], [2]]


def test_rollout_of_a_still_model_equals_the_static_reference():
    """A model predicting zero normalised displacement with target mean 0 never moves: its rollout RMSE is the
    static one, (t+1)|v|/√3 per frame for a body moving at constant velocity v."""
    v = np.array([0.3, 0.0, 0.4])
    x = np.stack([np.random.default_rng(0).uniform(size=(5, 3)) + t * v for t in range(4)])
    tr = PD.Trajectory([x], [np.zeros((4, 1, 3))])

    class Still(torch.nn.Module):
        def forward(self, loads, rigids, defs, edges=None):
            return [torch.zeros(d.shape[0], d.shape[1], 3) for d in defs]

    norm = {**{f"{g}0_{s}": np.zeros(c) if s == "mean" else np.ones(c) for g, c in
               (("loads", 6), ("rigids", 3), ("deformables", 3), ("targets", 3), ("edges", 1)) for s in ("mean", "std")},
            "targets0_const": np.zeros(3)}
    out = P.rollout_metrics(Still(), [tr], P.Norm(norm), 3, "cpu")
    expected = np.mean([(t + 1) * np.linalg.norm(v) / np.sqrt(3) for t in range(3)])
    np.testing.assert_allclose(out["static_rmse"], [expected], rtol=1e-6)
    np.testing.assert_allclose(out["rollout_rmse"], out["static_rmse"], rtol=1e-6)


# ---------------------------------------------------------------------------------------------------- recipes
def test_experiments_follow_the_official_configs():
    assert tuple(PD.EXPERIMENTS) == EXPERIMENT_NAMES and len(PD.DATASETS) == 7
    e = PD.EXPERIMENTS
    assert (e["bilateral_stamping/long_time"].optimizer, e["bilateral_stamping/long_time"].epochs) == ("adamw", 100)
    u = e["unilateral_stamping/long_time"]
    assert (u.n_loads, u.n_rigids, u.n_deformables, len(u.contact_pairs)) == (16, 17, 2, 18)
    assert e["deforming_plate/long_time"].out_dim == 4 and e["deforming_plate/long_time"].epochs == 200
    ce = e["cavity_extruding/autoregressive"]
    assert (ce.n_loads, ce.n_rigids, ce.n_deformables, ce.frames, ce.batch, ce.lr_decay) == (4, 4, 3, 121, 120, 5.0)
    assert e["rice_grip/autoregressive"].frames == 41 and e["rice_grip/autoregressive"].noise == 1e-3
    assert all(x.weight_decay == 0 for x in e.values() if x.task == PD.AUTO)


def _model_cfg(**kw):
    return SimpleNamespace(**{"width": 16, "n_slices": 4, "n_layers": 1, "n_heads": 2, "mlp_ratio": 2, "knn_k": 3,
                              "implicit_max_layers": 6, **kw})


@pytest.mark.parametrize("name", ["deforming_plate/long_time", "rice_grip/autoregressive"])
def test_tiny_training_run_of_each_task(name):
    exp = PD.EXPERIMENTS[name]
    frames = PD.experiment_frames(exp, 4)
    split = {s: PD.convert(exp.dataset, PD.restricted_loads(R.miniature(exp.dataset, s)), exp.task, frames, s)
             for s in ("train", "eval", "test")}
    norm = PD.fit_normalisers(exp.task, split["train"], P.edge_lengths(exp.task, split["train"], 3))
    for arm in ("unisoma", "implicit"):
        model, arch, hist = P.train_experiment(exp, arm, split["train"], split["eval"], norm, _model_cfg(), lr=1e-3,
                                               epochs=2, eval_every=1, seed=0)
        assert len(hist["loss"]) == 2 and hist["val_epochs"] == [0, 1] and np.isfinite(hist["loss"]).all()
        assert hist["best_val_loss"] == min(hist["val_loss"])
        again = P.model_from_arch(arch)
        again.load_state_dict(model.state_dict())
        m = P.test_metrics(again, exp, split["test"], norm, 3, "cpu")
        key = "rel_l2_pos" if exp.task == PD.LONG else "rollout_rmse"
        assert m[key].shape == (3,) and np.isfinite(m[key]).all()
        if exp.task == PD.LONG:
            assert "rel_l2_stress" in m and "rel_l2_peeq" not in m                 # deforming plate: 4 channels
    u, i = P.build_model(exp, "unisoma", _model_cfg())[0], P.build_model(exp, "implicit", _model_cfg())[0]
    assert abs(sum(p.numel() for p in i.parameters()) / sum(p.numel() for p in u.parameters()) - 1) <= 0.1


# ---------------------------------------------------------------------------------------------------- rehearsal
def test_rehearsal_miniatures_are_deterministic_and_in_every_format(tmp_path):
    from icml25.core.download import read_manifest

    manifest = read_manifest(R.__file__.replace("rehearsal.py", "manifest.csv"), rehearsal=False)
    names = R.write_miniatures(tmp_path / "m", manifest)
    assert sorted(names) == sorted(manifest) and len(names) == 21
    R.write_manual(tmp_path / "manual")
    paths = PD.check_manual_layout(tmp_path / "manual", PD.DATASETS)
    for p in paths:
        assert p.read_bytes() == (tmp_path / "m" / p.relative_to(tmp_path / "manual")).read_bytes()
    assert R.miniature("rice_grip", "eval") == R.miniature("rice_grip", "eval")
    for exp in PD.EXPERIMENTS.values():
        path = tmp_path / "manual" / PD.manual_path(exp.dataset, "train")
        items = PD.convert(exp.dataset, PD.read_official(path), exp.task, PD.experiment_frames(exp, 4), str(path))
        assert len(items) == R.COUNTS["train"]
    plate = PD.convert("deforming_plate", PD.read_official(tmp_path / "manual" / PD.manual_path("deforming_plate",
                                                                                             "train")), PD.LONG,
                       None, "p")
    assert len({s.deformables[0].shape[0] for s in plate}) == 2                 # ragged node counts


# ---------------------------------------------------------------------------------------------------- stages
def test_paper_stages_in_process_on_the_miniature_tree(tmp_path, monkeypatch):
    """download (layout check, first-use pin with trust_unpinned, format check) -> preprocess -> train ->
    evaluate -> report for one long-time and one autoregressive experiment, each stage seeing only its
    STAGE_KEYS; a missing hand-placed file and an UNPINNED row without the opt-in stop the download."""
    import json
    from pathlib import Path

    from icml25.core.cli import Stage, _NullRun
    from icml25.core.config import StageView, build, deep_merge, load_yaml, merge_scale
    from icml25.studies.unisoma.config import STAGE_KEYS, Config
    from icml25.studies.unisoma.stages import STAGES

    root = Path(__file__).resolve().parents[2]
    raw = deep_merge(merge_scale(load_yaml(root / "config/studies/unisoma.yaml"), "paper"),
                     load_yaml(root / "config/rehearsal/unisoma.yaml"))
    manual = tmp_path / "manual"
    R.write_manual(manual)
    raw["paper"].update(manual_dir=str(manual), experiments=["tissue_manipulation/long_time",
                                                             "rice_grip/autoregressive"], device="cpu", epochs=1)
    cfg = build(Config, raw)
    out = tmp_path / "r"

    def stage(name, inputs, outputs, trust=False, **extra):
        return Stage(slug="unisoma", name=name, config=StageView(cfg, STAGE_KEYS[name], who=name), scale="paper",
                     data_source="remote", mirror=None, inputs=tuple(map(Path, inputs)),
                     outputs=tuple(map(Path, outputs)), seeds=(0, 1, 2), extra=extra, trust_unpinned=trust)

    ds = ["tissue_manipulation", "rice_grip"]
    raws = [out / "raw" / PD.file_name(d, s) for d in ds for s in PD.SPLITS]
    with pytest.raises(Exception, match="UNPINNED"):
        STAGES["download"](stage("download", [], raws), _NullRun())
    assert not any(p.exists() for p in raws)
    STAGES["download"](stage("download", [], raws, trust=True), _NullRun())
    assert all(p.with_name(p.name + ".sha256").is_file() for p in raws)
    interim = [out / "interim" / d / f"{s}.npz" for d in ds for s in PD.SPLITS]
    norms = [out / "processed" / d / "normalisers.npz" for d in ds]
    for i, d in enumerate(ds):
        STAGES["preprocess"](stage("preprocess", raws[3 * i:3 * i + 3], [*interim[3 * i:3 * i + 3], norms[i]]),
                             _NullRun())
    models = []
    for i, (d, t) in enumerate((("tissue_manipulation", "long_time"), ("rice_grip", "autoregressive"))):
        models.append(out / "models" / d / t / "chunk0.pt")
        STAGES["train"](stage("train", [*interim[3 * i:3 * i + 3], norms[i]], [models[-1]], experiment=f"{d}/{t}"),
                        _NullRun())
    claims, metrics = out / "claims.json", out / "metrics" / "eval.json"
    STAGES["evaluate"](stage("evaluate", [*raws, *interim, *norms, *models], [claims, metrics]), _NullRun())
    doc = json.loads(claims.read_text())
    ids = {c["id"]: c for c in doc["claims"]}
    assert {"headline_explicit_beats_implicit_tissue_manipulation_long_time",
            "headline_explicit_beats_implicit_rice_grip_autoregressive", "permutation_equivariance", "allocation",
            "data_safety_roundtrip", "baseline_param_match", "paper_tables_sota_over_baselines"} == set(ids)
    assert ids["paper_tables_sota_over_baselines"]["status"] == "untested"
    head = ids["headline_explicit_beats_implicit_rice_grip_autoregressive"]
    assert head["evidence"]["n"] == 3 and head["statistic"]["n_test"] == R.COUNTS["test"]
    for cid in ("permutation_equivariance", "allocation", "data_safety_roundtrip", "baseline_param_match"):
        assert ids[cid]["holds"] is True, ids[cid]
    figure, md = out / "figures" / "error_maps.png", out / "report.md"
    STAGES["report"](stage("report", [metrics], [figure, md]), _NullRun())
    assert figure.stat().st_size > 5000 and "rice_grip/autoregressive" in md.read_text()
    (manual / PD.manual_path("rice_grip", "eval")).unlink()
    with pytest.raises(SystemExit, match=r"1 file\(s\) missing: \['rice_grip/data/input/rice_grip_dataset_eval"):
        STAGES["download"](stage("download", [], raws, trust=True), _NullRun())
