"""rip paper path (issue 35): hub models at pinned commits, ArmoRM without remote code (our head on transformers'
Llama backbone) checked against a numpy reference, the local judge, the transformers-only sampler / log-probs /
DPO loop, the WildChat miniatures and the local-judge claims. Tiny random models on CPU; no network."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from icml25.core import hub  # noqa: E402
from icml25.studies.rip import rehearsal as R  # noqa: E402
from icml25.studies.rip import rewardmodels as RM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src/icml25/studies/rip"


def _local(name: str, path: Path):
    return hub.resolve(hub.HubModel(name, "test/tiny", hub.UNPINNED, "test"), local_dir=path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("rip_models")
    R.write_manual(root)
    return {name: _local(name, root / sub) for name, sub in R.MODEL_DIRS.items()}


# ------------------------------------------------------------------------------------------------- models.csv
def test_models_csv_pins_every_paper_model_and_config_names_its_rows():
    rows = hub.read_models(PKG / "models.csv")
    assert set(rows) == {"seed", "reward", "judge"}
    assert all(re.fullmatch(r"[0-9a-f]{40}", m.revision) for m in rows.values())
    assert rows["reward"].repo_id == "RLHFlow/ArmoRM-Llama3-8B-v0.1"
    from icml25.core.config import build, load_yaml, merge_scale
    from icml25.studies.rip.config import Config

    p = build(Config, merge_scale(load_yaml(ROOT / "config/studies/rip.yaml"), "paper")).paper
    assert {p.seed_model, p.reward_model, p.judge_model} == set(rows)
    assert (p.sampler, p.dpo_backend, p.device) == ("vllm", "trl", "cuda")


def test_no_remote_code_anywhere_in_the_study():
    for f in PKG.rglob("*.py"):
        assert not re.search(r"trust_remote_code\s*=\s*True", f.read_text()), f


def test_resolve_models_uses_local_dirs_and_names_unknown_rows(tmp_path):
    from icml25.studies.rip.paper import resolve_models

    class P:  # the two keys resolve_models reads
        model_dirs = {"seed": str(tmp_path)}

    got = resolve_models(P, ["seed", "judge"])
    assert got["seed"].source == "local" and got["seed"].revision.startswith("local:")
    assert got["judge"].source == "pinned" and got["judge"].kwargs()["trust_remote_code"] is False
    with pytest.raises(KeyError, match="'armorm' is not a row"):
        resolve_models(P, ["armorm"])


# ------------------------------------------------------------------------------------------------- ArmoRM
def test_find_last_and_gate_reference_by_hand():
    assert RM.find_last([5, 1, 2, 9, 1, 2, 7], [1, 2]) == 4
    with pytest.raises(ValueError, match="gating token pattern"):
        RM.find_last([1, 3], [1, 2])
    T = 10.0  # logits [0, T ln 3] -> softmax [1/4, 3/4]; x logit_scale 2 -> [0.5, 1.5]
    g = RM.gate_numpy(np.array([[0.0, T * math.log(3)]]), [np.eye(2)], [None], T, 2.0)
    np.testing.assert_allclose(g, [[0.5, 1.5]], atol=1e-12)
    # a hidden ReLU layer: [-1, 2] -> relu [0, 2] -> identity head -> softmax([0, 0.2]) at T = 10
    g = RM.gate_numpy(np.array([[-1.0, 2.0]]), [np.eye(2), np.eye(2) * 1.0], [None, np.zeros(2)], T, 1.0)
    e = np.exp([0.0, 0.2])
    np.testing.assert_allclose(g, [e / e.sum()], atol=1e-12)


def test_armorm_without_remote_code_matches_a_numpy_reference(tiny):
    """The score of our module equals sum_k gate_k (r M)_k computed in float64 numpy from the saved tensors and
    the backbone's hidden states (gate read at the user turn's <|eot_id|>, hand-located; rewards at the last
    token)."""
    from safetensors.numpy import load_file
    from transformers import LlamaModel

    res = tiny["reward"]
    cfg = json.loads((Path(res.path) / "config.json").read_text())
    assert cfg["auto_map"] and not list(Path(res.path).glob("*.py"))  # custom code named, not shipped, not run
    model, tok = RM.load_armorm(res)
    prompts, answers = ["hi", "Tell me a story"], ["abc", "Once upon a time."]
    got = RM.score_armorm(model, tok, prompts, answers, batch=2)

    w = load_file(str(Path(res.path) / "model.safetensors"))
    backbone = LlamaModel.from_pretrained(res.path).eval()
    for i, (p, a) in enumerate(zip(prompts, answers)):
        ids = tok.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": a}])
        # bos, <|start_header_id|>, "user" (4 bytes), <|end_header_id|>, "\n\n" (2 bytes), the prompt's bytes
        gate_at = 1 + 1 + 4 + 1 + 2 + len(p.encode())
        assert ids[gate_at] == tok.convert_tokens_to_ids("<|eot_id|>") and ids[-1] == ids[gate_at]
        with torch.no_grad():
            h = backbone(torch.tensor([ids])).last_hidden_state[0].double().numpy()
        r = w["regression_layer.weight"].astype(np.float64) @ h[-1]
        layers = sorted({int(k.split(".")[2]) for k in w if k.startswith("gating.layers.")})
        g = RM.gate_numpy(h[gate_at][None], [w[f"gating.layers.{j}.weight"] for j in layers],
                          [w[f"gating.layers.{j}.bias"] for j in layers], cfg["gating_temperature"],
                          float(w["gating.logit_scale"][0]))[0]
        ref = float(g @ (r @ w["reward_transform_matrix"].astype(np.float64)))
        assert got[i] == pytest.approx(ref, abs=1e-5)
    assert w["reward_transform_matrix"][4, 0] == pytest.approx(-0.1)  # not the identity: M is applied


def test_armorm_with_a_missing_head_tensor_is_refused(tiny, tmp_path):
    import shutil

    from safetensors.numpy import load_file, save_file

    d = tmp_path / "broken"
    shutil.copytree(tiny["reward"].path, d)
    w = load_file(str(d / "model.safetensors"))
    del w["gating.logit_scale"]
    save_file(w, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="refusing a partly random model"):
        RM.load_armorm(_local("reward", d))


def test_judge_reads_the_last_real_token_whatever_the_padding(tiny):
    model, tok = RM.load_judge(tiny["judge"])
    prompts, answers = ["a", "a much longer prompt here"], ["b", "and a longer answer too"]
    both = RM.score_judge(model, tok, prompts, answers, batch=2)
    alone = [RM.score_judge(model, tok, [p], [a])[0] for p, a in zip(prompts, answers)]
    np.testing.assert_allclose(both, alone, atol=1e-5)
    assert both[0] != both[1]


# ------------------------------------------------------------------------------------- sampler, log-probs, DPO
def test_sequence_logps_sum_the_answer_and_its_eot_only(tiny):
    from icml25.studies.rip.hfpolicy import load_causal_lm, prompt_ids, response_ids, sequence_logps

    model, tok = load_causal_lm(tiny["seed"])
    head, resp = response_ids(tok, "hi", "yo")
    assert head == prompt_ids(tok, "hi") and len(resp) == 3 and resp[-1] == tok.convert_tokens_to_ids("<|eot_id|>")
    ids = torch.tensor([head + resp])
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits[0].double(), -1)
    ref = sum(float(lp[len(head) - 1 + k, t]) for k, t in enumerate(resp))
    got = sequence_logps(model, tok, ["hi", "a longer prompt"], ["yo", "x"]).double()
    assert float(got[0]) == pytest.approx(ref, abs=1e-4)  # padded beside a longer row: same value


def test_generate_is_seeded_and_greedy_is_deterministic(tiny):
    from icml25.studies.rip.hfpolicy import generate, load_causal_lm

    model, tok = load_causal_lm(tiny["seed"])
    a = generate(model, tok, ["p one", "p two"], n=3, max_new_tokens=5, temperature=0.8, top_p=0.95, seed=4)
    b = generate(model, tok, ["p one", "p two"], n=3, max_new_tokens=5, temperature=0.8, top_p=0.95, seed=4)
    assert a == b and len(a) == 2 and all(len(x) == 3 for x in a)
    g1 = generate(model, tok, ["p one"], n=1, max_new_tokens=5)
    assert g1 == generate(model, tok, ["p one"], n=1, max_new_tokens=5)
    with pytest.raises(ValueError, match="greedy"):
        generate(model, tok, ["p"], n=2, max_new_tokens=2)


def test_dpo_native_starts_at_ln2_and_keeps_the_best_checkpoint(tiny):
    from icml25.studies.rip.hfpolicy import dpo_native, load_causal_lm

    model, tok = load_causal_lm(tiny["seed"])
    pairs = pd.DataFrame({"prompt": ["a", "b", "c", "d", "e"], "chosen": ["xy", "z", "w", "v", "u"],
                          "rejected": ["q", "rs", "t", "o", "n"]})
    vals = iter([0.3, 0.7, 0.7, 0.1])  # checks after steps 1, 2, 3 (= the end): best 0.7, earliest step 2
    state, rec = dpo_native(model, tok, pairs, beta=0.1, lr=1e-3, batch=2, epochs=1, seed=0, eval_every=1,
                            val_reward=lambda m: next(vals))
    assert rec["step0_loss"] == pytest.approx(math.log(2), abs=1e-4)
    assert rec["best_step"] == 2 and rec["best_val_reward"] == 0.7 and rec["val_rewards"] == {
        "1": 0.3, "2": 0.7, "3": 0.7}
    assert set(state) == set(model.state_dict())
    with pytest.raises(ValueError, match="kept no pairs"):
        dpo_native(model, tok, pairs.iloc[:0], beta=0.1, lr=1e-3, batch=2, epochs=1, seed=0, eval_every=1,
                   val_reward=lambda m: 0.0)


# ----------------------------------------------------------------------------------------- WildChat miniature
def test_wildchat_miniatures_prepare_to_the_hand_counted_prompts(tmp_path):
    from icml25.core.download import parquet_check, read_manifest
    from icml25.studies.rip.paper import prepare_wildchat, read_wildchat

    entries = read_manifest(PKG / "manifest.csv", rehearsal=False)
    names = R.write_miniatures(tmp_path, entries)
    assert names == [*R.SHARDS, *R.RELEASED]
    paths = [tmp_path / entries[n].mirror_path for n in R.SHARDS]
    for p in paths:
        parquet_check(("language", "conversation"))(p)
    prompts = prepare_wildchat(read_wildchat(paths))
    # 14 shards x 10 rows, minus 14 non-English, 14 Midjourney and 13 cross-shard duplicates
    assert len(prompts) == 140 - 14 - 14 - 13
    assert not prompts["prompt"].str.contains("/imagine prompt").any()
    first = tmp_path / entries[R.SHARDS[0]].mirror_path
    assert first.read_bytes() == (R.write_miniatures(tmp_path / "again", entries) and
                                  (tmp_path / "again" / entries[R.SHARDS[0]].mirror_path).read_bytes())


# ----------------------------------------------------------------------------------------- local-judge claims
def _pairs_without_quality(n: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rewards = rng.random((n, 3))
    from icml25.studies.rip import build_pairs

    df = build_pairs(np.arange(n, dtype=np.int64), [f"p{i}" for i in range(n)],
                     [["a" * (i + 1), "bb", "c"] for i in range(n)], rewards)
    df.insert(2, "quality", pd.Series([None] * n, dtype="object"))
    return df


def test_local_judge_claims_say_who_decided_and_compute_the_win_rate_claim():
    from icml25.studies.rip.evaluate import evaluate_claims

    wr = {"none": [0.50, 0.52, 0.48], "rip": [0.60, 0.70, 0.65], "random_same_size": [0.5, 0.5, 0.5]}
    metrics = {arm: {s: {"test_reward": v[i], "win_rate_vs_seed": v[i]} for i, s in enumerate((0, 1, 2))}
               for arm, v in wr.items()}
    records = {arm: {s: {"step0_loss": math.log(2)} for s in (0, 1, 2)} for arm in wr}
    judge = "8 held-out prompts scored by the local judge test/judge at abc"
    claims = {c.id: c for c in evaluate_claims(metrics, {"test_reward": 0.4}, records, _pairs_without_quality(),
                                               (0.5, 0.5, 0.5), paper_data=True, judge=judge)}
    w = claims["rip_beats_unfiltered_win_rate"]
    # d_s = 0.10, 0.18, 0.17: mean 0.15 > 0.01, all > 0, t-CI low > 0 -> reproduced
    assert w.verdict == "reproduced" and w.statistic["d"] == pytest.approx([0.10, 0.18, 0.17])
    for cid in ("rip_beats_unfiltered_win_rate", "rip_beats_random", "rip_vs_none_and_others"):
        assert "local judge, not the hosted benchmarks" in claims[cid].note and judge in claims[cid].data
    assert claims["rip_drops_low_quality"].status == "untested"
    assert "no quality labels" in claims["rip_drops_low_quality"].note
