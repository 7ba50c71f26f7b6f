"""Issue 36.8: outputs appear only complete: rip's chosen DPO checkpoint directory (copied through a temporary
directory), coastalbench's remote manifest and the server's pid file (temporary file + rename)."""
from __future__ import annotations

import shutil
import types

import pandas as pd
import pytest

from icml25.core.io import atomic_dir


def test_atomic_dir_replaces_whole_or_leaves_the_old_directory(tmp_path):
    out = tmp_path / "model"
    with atomic_dir(out) as tmp:
        (tmp / "a.bin").write_bytes(b"1")
    assert [p.name for p in out.iterdir()] == ["a.bin"]
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "b.bin").write_bytes(b"2")
            raise RuntimeError("killed mid-copy")
    assert [p.name for p in out.iterdir()] == ["a.bin"]  # the old complete directory, untouched
    with atomic_dir(out) as tmp:
        (tmp / "c.bin").write_bytes(b"3")
    assert [p.name for p in out.iterdir()] == ["c.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary left behind


def test_rip_dpo_copies_the_best_checkpoint_atomically(tmp_path, monkeypatch):
    from icml25.studies.rip import paper as P

    ckpt = tmp_path / "policy_checkpoints"
    for step in (10, 20):
        (ckpt / f"checkpoint-{step}").mkdir(parents=True)
        for i in range(3):
            (ckpt / f"checkpoint-{step}" / f"shard{i}.bin").write_bytes(bytes([step, i]))
    loader = types.SimpleNamespace(from_pretrained=lambda m, **k: None)
    fake = types.SimpleNamespace(AutoTokenizer=loader, AutoModelForCausalLM=loader, bfloat16=None,
                                 cuda=types.SimpleNamespace(empty_cache=lambda: None))
    monkeypatch.setattr(P, "_need", lambda name: fake)
    monkeypatch.setattr(P, "dpo_trl_train", lambda *a, **k: {})
    monkeypatch.setattr(P, "val_reward", lambda p, *a, **k: float(str(p).endswith("20")))
    real_copytree = shutil.copytree

    def dying_copytree(src, dst, *a, **k):  # the node dies after the first of three shards
        real_copytree(src, dst, *a, ignore=lambda d, names: [n for n in names if n != "shard0.bin"], **k)
        raise OSError("node lost")

    monkeypatch.setattr(shutil, "copytree", dying_copytree)
    out = tmp_path / "policy"
    paper = types.SimpleNamespace(lr=1e-6, batch=1, epochs=1, gpus=1, eval_every=1, max_length=None)
    kw = dict(val_prompts=["p"], reward="r", paper=paper, beta=0.1, seed=0)
    with pytest.raises(OSError, match="node lost"):
        P.dpo_trl(P.LocalModel("m"), pd.DataFrame(), out, **kw)
    assert not out.exists()  # before: a directory holding one shard of three looked like a model
    monkeypatch.setattr(shutil, "copytree", real_copytree)
    record = P.dpo_trl(P.LocalModel("m"), pd.DataFrame(), out, **kw)
    assert record["best_step"] == 20 and sorted(p.name for p in out.iterdir()) == ["shard0.bin", "shard1.bin",
                                                                                    "shard2.bin"]


def test_coastalbench_manifest_is_written_whole_or_not_at_all(tmp_path):
    from icml25.studies.coastalbench import remote

    manifest = tmp_path / "manifest.csv"
    manifest.write_text("old complete manifest\n")
    items = [{"key": f"2008/ocean_his_200801{d:02d}.nc", "size": 6, "etag": "e"} for d in range(1, 4)]
    items.append({"key": "2008/ocean_his_20080104.nc", "etag": "e"})  # a listing entry without a size: fails
    with pytest.raises(KeyError):
        remote.write_manifest(items, manifest)
    assert manifest.read_text() == "old complete manifest\n" and sorted(tmp_path.iterdir()) == [manifest]
    assert remote.write_manifest(items[:3], manifest) == 3
