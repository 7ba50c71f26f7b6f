"""rip study: the spec's required tests (filter, DPO loss, pairs, judge, generator, smoke chain) plus the pair
table's schema guard, the model's batched decoding and the paper path's pure parts."""
from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats
import torch
import yaml

from icml25.core.claims import load_claims, validate_claims
from icml25.core.config import ConfigError, build, load_yaml, merge_scale
from icml25.studies.rip import build_pairs, dpo_loss, judge_reward, rip_filter
from icml25.studies.rip.config import Config
from icml25.studies.rip.data import apply_op, generate_split
from icml25.studies.rip.method import arm_mask, token_jaccard
from icml25.studies.rip.pairs import PAIR_SCHEMA, PairTableError, read_pairs, write_pairs

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ rip_filter
@pytest.fixture
def eight() -> pd.DataFrame:
    return pd.DataFrame({
        "rejected_reward": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
        "rejected_length": [10, 80, 30, 70, 50, 60, 20, 40],
        "reward_gap": [0.9, 0.1, 0.7, 0.3, 0.5, 0.2, 0.8, 0.4],
    }, index=[10, 11, 12, 13, 14, 15, 16, 17])


def test_rip_filter_exact_mask_with_hand_quantiles(eight):
    # medians (linear interpolation over 8 values): m1 (0.4+0.5)/2 = 0.45; m2 (40+50)/2 = 45; m3 (0.4+0.5)/2 = 0.45
    # keep m1 >= 0.45: rows 14..17; m2 >= 45: 11, 13, 14, 15; m3 <= 0.45: 11, 13, 15, 17  -> only 15
    mask = rip_filter(eight)
    assert mask.index.equals(eight.index) and mask.dtype == bool
    assert mask.tolist() == [False, False, False, False, False, True, False, False]
    # q1 = 0.25: tau1 = 0.1 + 1.75 * 0.1 = 0.275 -> m1 keeps 12..17; m2/m3 as above -> 13 and 15
    assert rip_filter(eight, q_rejected_reward=0.25).tolist() == [False, False, False, True, False, True, False,
                                                                  False]


def test_rip_filter_q001_keeps_all_and_none_disables(eight):
    assert rip_filter(eight, 0.0, 0.0, 1.0).all()
    assert rip_filter(eight, None, None, None).all()
    only_gap = rip_filter(eight, None, None, 0.5)
    assert only_gap.tolist() == (eight["reward_gap"] <= 0.45).tolist()


def test_rip_filter_nan_gives_false_and_missing_column_raises(eight):
    df = eight.copy()
    df.loc[12, "rejected_reward"] = np.nan
    assert not rip_filter(df, 0.0, 0.0, 1.0)[12]
    assert rip_filter(df, None, 0.0, 1.0)[12]  # criterion disabled: NaN does not matter
    with pytest.raises(KeyError, match="reward_gap"):
        rip_filter(eight.drop(columns="reward_gap"))


def test_rip_filter_monotone_in_quantiles():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"rejected_reward": rng.random(200), "rejected_length": rng.integers(0, 30, 200),
                       "reward_gap": rng.random(200)})
    qs = np.linspace(0, 1, 11)
    for a, b in zip(qs[:-1], qs[1:]):
        for key in ("q_rejected_reward", "q_rejected_length"):
            lo, hi = rip_filter(df, **{key: a}), rip_filter(df, **{key: b})
            assert not (hi & ~lo).any(), f"raising {key} added rows"
        lo, hi = rip_filter(df, q_gap=a), rip_filter(df, q_gap=b)
        assert not (lo & ~hi).any(), "raising q_gap removed rows"


def test_rip_kept_set_is_subset_of_every_single_criterion_set():
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"rejected_reward": rng.random(300), "rejected_length": rng.integers(0, 9, 300),
                       "reward_gap": rng.random(300), "chosen": ["12"] * 300, "rejected": ["1"] * 300})
    rip = arm_mask(df, "rip", seed=0)
    for arm in ("m1_only", "m2_only", "m3_only"):
        assert not (rip & ~arm_mask(df, arm, seed=0)).any()
    assert arm_mask(df, "random_same_size", seed=1).sum() == rip.sum() == arm_mask(df, "jaccard", seed=0).sum()
    assert (arm_mask(df, "random_same_size", seed=1) != arm_mask(df, "random_same_size", seed=2)).any()


def test_token_jaccard():
    assert token_jaccard("123", "321") == 1.0
    assert token_jaccard("12", "34") == 0.0
    assert token_jaccard("", "") == 1.0
    assert token_jaccard("112", "23") == pytest.approx(1 / 3)


# -------------------------------------------------------------------------------------------------- dpo_loss
def test_dpo_loss_at_reference_is_ln2_with_gradient():
    B, beta = 5, 0.1
    ref_w, ref_l = torch.randn(B, dtype=torch.float64), torch.randn(B, dtype=torch.float64)
    pw, pl = ref_w.clone().requires_grad_(True), ref_l.clone().requires_grad_(True)
    loss, rw, rl = dpo_loss(pw, pl, ref_w, ref_l, beta)
    assert loss.item() == pytest.approx(math.log(2), abs=1e-12)
    assert torch.all(rw == 0) and torch.all(rl == 0)
    loss.backward()
    assert torch.allclose(pw.grad, torch.full((B,), -beta / (2 * B), dtype=torch.float64))
    assert torch.allclose(pl.grad, torch.full((B,), beta / (2 * B), dtype=torch.float64))


def test_dpo_loss_matches_hand_formula_and_vanishes_at_large_margins():
    rng = np.random.default_rng(0)
    pw, pl, rw, rl = (rng.normal(size=7) * 5 for _ in range(4))
    beta = 0.3
    z = beta * ((pw - rw) - (pl - rl))
    expected = float(np.mean(np.log1p(np.exp(-z))))
    loss, cr, rr = dpo_loss(*(torch.tensor(v) for v in (pw, pl, rw, rl)), beta=beta)
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    assert np.allclose(cr.numpy(), beta * (pw - rw)) and np.allclose(rr.numpy(), beta * (pl - rl))
    big = torch.tensor([500.0, 800.0])
    loss, _, _ = dpo_loss(big, -big, torch.zeros(2), torch.zeros(2), beta=0.1)
    assert loss.item() < 1e-20
    with pytest.raises(ValueError):
        dpo_loss(torch.zeros(3), torch.zeros(2), torch.zeros(3), torch.zeros(3))


# ----------------------------------------------------------------------------------------------- build_pairs
def test_build_pairs_tie_rules_and_gap():
    rewards = np.array([[0.5, 0.9, 0.9, 0.1, 0.1],   # max ties at 1, 2 -> 1; min ties at 3, 4 -> 4
                        [0.3, 0.3, 0.3, 0.3, 0.3],   # all tie: chosen 0, rejected 4
                        [0.2, 0.8, 0.4, 0.6, 0.0]])
    responses = [[f"{i}{j}" * (j + 1) for j in range(5)] for i in range(3)]
    df = build_pairs(np.array([7, 8, 9]), ["p0", "p1", "p2"], responses, rewards)
    assert df["chosen"].tolist() == [responses[0][1], responses[1][0], responses[2][1]]
    assert df["rejected"].tolist() == [responses[0][4], responses[1][4], responses[2][4]]
    assert df["chosen_reward"].tolist() == [0.9, 0.3, 0.8]
    assert df["rejected_reward"].tolist() == [0.1, 0.3, 0.0]
    assert (df["reward_gap"] >= 0).all() and df["reward_gap"].tolist() == pytest.approx([0.8, 0.0, 0.8])
    assert df["rejected_length"].tolist() == [10, 10, 10] and df["chosen_length"].tolist() == [4, 2, 4]
    assert df["prompt_id"].dtype == np.int64
    with pytest.raises(ValueError, match="N=5"):
        build_pairs(np.array([1]), ["p"], [["a", "b"]], np.zeros((1, 5)))


def _pair_frame(n: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rewards = rng.random((n, 3))
    df = build_pairs(np.arange(n, dtype=np.int64), [f"<R{i}|" for i in range(n)],
                     [["1", "22", "333"] for _ in range(n)], rewards)
    df.insert(2, "quality", ["clean"] * n)
    df["ref_logp_chosen"] = -rng.random(n)
    df["ref_logp_rejected"] = -rng.random(n)
    return df


def test_pair_table_parquet_round_trip_keeps_dtypes_and_lists(tmp_path):
    df = _pair_frame()
    path = write_pairs(df, tmp_path / "pairs.parquet")
    assert pq.read_schema(path).remove_metadata().equals(PAIR_SCHEMA.remove_metadata(), check_metadata=False)
    back = read_pairs(path)
    assert list(back.columns) == list(PAIR_SCHEMA.names)
    assert back["prompt_id"].dtype == np.int64 and back["chosen_length"].dtype == np.int64
    assert back["reward_gap"].dtype == np.float64
    assert back["responses"].tolist() == df["responses"].tolist()
    assert back["rewards"].tolist() == df["rewards"].tolist()
    assert not list(tmp_path.glob(".*tmp*"))  # atomic write left no temporary


@pytest.mark.parametrize("mutate, column", [
    (lambda t: t.drop_columns(["ref_logp_rejected"]), "ref_logp_rejected"),
    (lambda t: t.set_column(t.schema.get_field_index("reward_gap"), "reward_gap",
                            pa.array(["x"] * t.num_rows)), "reward_gap"),
    (lambda t: t.set_column(t.schema.get_field_index("chosen_length"), "chosen_length",
                            pa.array([1.5] * t.num_rows)), "chosen_length"),
    (lambda t: t.append_column("score", pa.array([0.0] * t.num_rows)), "score"),
    (lambda t: t.set_column(t.schema.get_field_index("chosen"), "chosen",
                            pa.array([None] + ["a"] * (t.num_rows - 1), pa.string())), "chosen"),
    (lambda t: t.set_column(t.schema.get_field_index("rewards"), "rewards",
                            pa.array([[0.1]] * t.num_rows, pa.list_(pa.float64()))), "rewards"),
])
def test_malformed_pair_table_is_rejected_naming_the_column(tmp_path, mutate, column):
    table = pa.Table.from_pandas(_pair_frame(), preserve_index=False)
    path = tmp_path / "bad.parquet"
    pq.write_table(mutate(table), path)
    with pytest.raises(PairTableError, match=repr(column)):
        read_pairs(path)


def test_pair_table_written_elsewhere_with_large_types_is_accepted(tmp_path):
    table = pa.Table.from_pandas(_pair_frame(), preserve_index=False)
    table = table.cast(pa.schema([pa.field(f.name, pa.large_string() if f.type == pa.string() else f.type)
                                  for f in table.schema]))
    pq.write_table(table, tmp_path / "ext.parquet")
    assert len(read_pairs(tmp_path / "ext.parquet")) == 4


# ----------------------------------------------------------------------------------------------------- judge
def test_judge_exact_empty_cap_noise():
    assert judge_reward("1234", "1234") == 1.0
    assert judge_reward("", "1234") == 0.0
    assert judge_reward("", "") == 1.0
    assert judge_reward("1243", "1234") == pytest.approx(0.5)
    assert judge_reward("1234", "1234", cap=0.3) == 0.3
    rng = np.random.default_rng(0)
    noisy = [judge_reward("1235", "1234", noise_std=0.05, rng=rng) for _ in range(500)]
    assert all(0 <= r <= 1 for r in noisy) and np.std(noisy) == pytest.approx(0.05, rel=0.15)
    assert max(judge_reward("1234", "1234", cap=0.3, noise_std=0.5, rng=rng) for _ in range(50)) <= 0.3
    with pytest.raises(ValueError, match="rng"):
        judge_reward("1", "1", noise_std=0.1)


# ------------------------------------------------------------------------------------------------- generator
def test_generator_class_shares_and_determinism():
    pool = generate_split("pool", 2000, data_seed=0)
    shares = pool["quality"].value_counts(normalize=True)
    assert abs(shares["clean"] - 0.70) <= 0.03
    assert abs(shares["garbled"] - 0.15) <= 0.03 and abs(shares["ambiguous"] - 0.15) <= 0.03
    assert pool.equals(generate_split("pool", 2000, data_seed=0))
    assert not pool.equals(generate_split("pool", 2000, data_seed=1))
    assert (generate_split("test", 100)["quality"] == "clean").all()
    clean = pool[pool["quality"] == "clean"]
    for p, t in zip(clean["prompt"], clean["target"]):
        assert apply_op(p[1], p[2:-1]) == t
    garbled = pool[pool["quality"] == "garbled"]
    assert (garbled["cap"] == 0.3).all() and (pool.loc[pool["quality"] != "garbled", "cap"] == 1.0).all()
    sft = generate_split("sft", 2000)
    assert abs((sft["demo"] != sft["target"]).mean() - 0.2) <= 0.03
    assert apply_op("I", "09") == "10" and apply_op("S", "312") == "123" and apply_op("R", "12") == "21"


# ----------------------------------------------------------------------------------------------------- model
def test_cached_decoding_matches_full_forward_and_sampling_is_seeded():
    from icml25.studies.rip.model import Decoder, encode_batch, generate, pack_sequences, sequence_logps

    torch.manual_seed(0)
    model = Decoder().eval()
    prompts = encode_batch(["<R123|", "<S987|"])
    out = generate(model, prompts, 6)  # greedy, with the key/value cache
    seq = prompts.clone()
    for _ in range(6):  # reference: full forward of the whole prefix every step, no cache
        logits, _ = model(seq)
        last = logits[:, -1].clone()
        last[:, [20, 23]] = -math.inf  # BOS and PAD are never sampled
        seq = torch.cat([seq, last.argmax(-1, keepdim=True)], dim=1)
    ref = seq[:, prompts.shape[1]:]
    for row_out, row_ref in zip(out.tolist(), ref.tolist()):
        n = row_ref.index(22) + 1 if 22 in row_ref else 6  # up to and including EOS, PAD after
        assert row_out[:n] == row_ref[:n] and all(t == 23 for t in row_out[n:])
    a = generate(model, prompts.repeat(8, 1), 6, temperature=0.8, top_p=0.95, generator=torch.Generator().manual_seed(1))
    b = generate(model, prompts.repeat(8, 1), 6, temperature=0.8, top_p=0.95, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    # summed log-probs equal the step-by-step sum of log-softmax along the sequence
    ids, mask = pack_sequences(["<R12|"], ["21"])
    lp = sequence_logps(model, ids, mask).item()
    logits, _ = model(ids[:, :-1])
    logsm = torch.log_softmax(logits[0], -1)
    manual = sum(logsm[t, ids[0, t + 1]].item() for t in (4, 5, 6))  # '2', '1', EOS after '<R12|'
    assert lp == pytest.approx(manual, abs=1e-5)


# ------------------------------------------------------------------------------------------ config & import
def test_config_import_is_light_and_bad_values_name_the_key():
    out = subprocess.run([sys.executable, "-c", "import sys, icml25.studies.rip, icml25.studies.rip.config; "
                          "print('torch' in sys.modules, 'pandas' in sys.modules)"], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"], out.stderr
    raw = merge_scale(load_yaml(ROOT / "config/studies/rip.yaml"), "default")
    assert build(Config, raw).sampling.n_responses == 16
    with pytest.raises(ConfigError, match="filter"):
        build(Config, {**raw, "filter": {"q_gap": 1.5}})
    with pytest.raises(ConfigError, match="arms"):
        build(Config, {**raw, "arms": ["rip", "bogus"]})


def test_prepare_wildchat_rules():
    from icml25.studies.rip.paper import prepare_wildchat

    conv = lambda text: [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    df = pd.DataFrame({"language": ["English", "English", "French", "English", "English"],
                       "conversation": [conv("hello"), conv("hello"), conv("bonjour"),
                                        conv("/imagine prompt: a cat"), conv("Write a MidJourney prompt")]})
    out = prepare_wildchat(df)
    assert out["prompt"].tolist() == ["hello"] and out["prompt_id"].dtype == np.int64


# ------------------------------------------------------------------------------------- paper path: DPO set-up
def _paper_cfg():
    return build(Config, merge_scale(load_yaml(ROOT / "config/studies/rip.yaml"), "paper"))


def test_paper_dpo_config_precomputes_the_reference_and_checkpoints_for_early_stopping(tmp_path):
    """TRL computes log pi_ref itself on the policy's own tokens (one flag for the train and any eval set), the
    global batch is the paper's 64, dropout is off, and a checkpoint is saved every eval_every steps."""
    from icml25.studies.rip.paper import dpo_trl_config

    p = _paper_cfg().paper
    assert (p.batch, p.gpus, p.eval_every, p.val_size, p.max_length) == (64, 8, 20, 470, 4096)
    kw = dpo_trl_config(tmp_path, beta=0.1, lr=p.lr, batch=p.batch, epochs=p.epochs, seed=3, gpus=p.gpus,
                        eval_every=p.eval_every, max_length=p.max_length)
    assert kw["precompute_ref_log_probs"] is True
    assert kw["per_device_train_batch_size"] * kw["gradient_accumulation_steps"] * p.gpus == 64
    assert (kw["save_strategy"], kw["save_steps"], kw["save_only_model"]) == ("steps", 20, True)
    assert kw["disable_dropout"] is True and kw["truncation_mode"] == "keep_end" and kw["max_length"] == 4096
    assert (kw["beta"], kw["learning_rate"], kw["seed"], kw["output_dir"]) == (0.1, 1e-6, 3, str(tmp_path))
    with pytest.raises(ValueError, match="multiple of paper.gpus"):
        dpo_trl_config(tmp_path, beta=0.1, lr=1e-6, batch=60, epochs=1, seed=0, gpus=8, eval_every=20,
                       max_length=None)
    with pytest.raises(ConfigError, match="paper.batch"):
        build(Config, merge_scale({**load_yaml(ROOT / "config/studies/rip.yaml"), "paper": {
            **load_yaml(ROOT / "config/studies/rip.yaml")["paper"], "batch": 60}}, "paper"))


def test_paper_dpo_config_is_accepted_by_trl(tmp_path):
    """Where TRL is installed (the rip-paper env), its DPOConfig takes the arguments and keeps them."""
    trl = pytest.importorskip("trl")
    from icml25.studies.rip.paper import dpo_trl_config

    kw = dpo_trl_config(tmp_path, beta=0.1, lr=1e-6, batch=64, epochs=1, seed=0, gpus=8, eval_every=20,
                        max_length=4096)
    cfg = trl.DPOConfig(**{**kw, "bf16": False})  # bf16 needs a GPU to validate
    assert cfg.precompute_ref_log_probs is True and cfg.save_steps == 20 and cfg.gradient_accumulation_steps == 8
    assert cfg.max_length == 4096 and cfg.truncation_mode == "keep_end" and cfg.disable_dropout is True


def test_paper_dpo_run_with_trl_starts_at_ln2_and_checkpoints(tmp_path):
    """Where TRL is installed: a tiny random Llama (saved locally) on CPU trained through ``dpo_trl_train`` with
    the paper's arguments. The pair table's reference columns hold unrelated values; the step-0 loss is still ln 2, so TRL
    used its own precomputed reference, and checkpoints appear every ``eval_every`` steps."""
    pytest.importorskip("trl")
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from icml25.studies.rip.paper import checkpoint_steps, dpo_trl_config, dpo_trl_train

    chars = sorted(set("<R0123456789|:useratnsi"))
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, **{c: i + 4 for i, c in enumerate(chars)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                  unk_token="<unk>")
    tok.chat_template = ("{% for m in messages %}{{ m['role'] }}:{{ m['content'] }}</s>{% endfor %}"
                         "{% if add_generation_prompt %}assistant:{% endif %}")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                         pad_token_id=0, bos_token_id=1, eos_token_id=2))
    model.save_pretrained(tmp_path / "tiny")  # TRL loads its reference model from the policy's path
    kw = dpo_trl_config(tmp_path / "ckpt", beta=0.1, lr=1e-3, batch=2, epochs=1, seed=0, gpus=1, eval_every=2,
                        max_length=None)
    pairs = _pair_frame(8)  # ref_logp_* are random numbers in [-1, 0]: feeding them would move the logits
    rec = dpo_trl_train(str(tmp_path / "tiny"), tok, pairs, {**kw, "bf16": False, "use_cpu": True})
    assert rec["step0_loss"] == pytest.approx(math.log(2), abs=1e-4)
    assert rec["kept_n"] == 8 and rec["ref_logp_max_abs_diff"] > 1.0
    assert list(checkpoint_steps(tmp_path / "ckpt")) == [2, 4]  # 8 pairs / (1 x 2 accumulation) = 4 steps


def test_paper_dpo_dataset_has_no_reference_columns():
    from icml25.studies.rip.paper import dpo_trl_dataset

    data = dpo_trl_dataset(_pair_frame(3))
    assert set(data) == {"prompt", "chosen", "rejected"}  # TRL precomputes the reference on its own tokens
    assert data["prompt"][1] == [{"role": "user", "content": "<R1|"}]
    assert data["chosen"][0][0]["role"] == "assistant" and len(data["rejected"]) == 3
    with pytest.raises(ValueError, match="kept no pairs"):
        dpo_trl_dataset(_pair_frame(3).iloc[:0])
    with pytest.raises(KeyError, match="'chosen'"):
        dpo_trl_dataset(_pair_frame(3).drop(columns="chosen"))


def test_paper_early_stopping_picks_the_best_validation_checkpoint(tmp_path):
    from icml25.studies.rip.paper import best_checkpoint, checkpoint_steps

    for name in ("checkpoint-20", "checkpoint-40", "checkpoint-71", "runs"):
        (tmp_path / name).mkdir()
    (tmp_path / "checkpoint-9.txt").write_text("")
    assert list(checkpoint_steps(tmp_path)) == [20, 40, 71]
    assert best_checkpoint({20: 0.11, 40: 0.14, 71: 0.12}) == 40
    assert best_checkpoint({20: 0.14, 40: 0.14, 71: 0.12}) == 20  # ties: the earliest
    with pytest.raises(ValueError, match="no checkpoint"):
        best_checkpoint({})
    with pytest.raises(ValueError, match=r"steps \[40\]"):
        best_checkpoint({20: 0.1, 40: float("nan")})


def test_paper_train_stage_stops_early_on_the_validation_prompts(tmp_path, monkeypatch):
    """The paper train stage hands TRL's run the held-out validation prompts and the paper's DPO settings."""
    from icml25.studies.rip import paper as P
    from icml25.studies.rip.__main__ import main

    calls = []

    def fake_dpo_trl(seed_model, pairs, out_dir, **kw):
        calls.append((seed_model, len(pairs), kw))
        Path(out_dir).mkdir(parents=True)
        (Path(out_dir) / "model.safetensors").write_bytes(b"x")
        return {"train_loss": 0.69, "kept_n": len(pairs), "best_step": 40}

    monkeypatch.setattr(P, "dpo_trl", fake_dpo_trl)
    pairs = write_pairs(_pair_frame(6), tmp_path / "pairs.parquet")
    val = tmp_path / "val.parquet"
    pd.DataFrame({"prompt_id": [0, 1], "prompt": ["v0", "v1"], "quality": [None, None], "target": ["", ""],
                  "cap": [1.0, 1.0]}).to_parquet(val)
    rec = tmp_path / "models/none/chunk0.json"
    assert main(["train", "--arm", "none", "--seeds", "1000", "--in", str(pairs), str(val), "--out", str(rec),
                 str(tmp_path / "models/none/chunk0_hf"), "--no-track", "--scale", "paper", "--config",
                 str(ROOT / "config/studies/rip.yaml")]) == 0
    (seed_model, n, kw), = calls
    assert seed_model.repo_id == "meta-llama/Llama-3.1-8B-Instruct" and n == 6
    assert seed_model.source == "pinned" and seed_model.kwargs() == {
        "trust_remote_code": False, "revision": "0e9e39f249a16976918f6564b8830bc894c89659"}
    assert kw["val_prompts"] == ["v0", "v1"] and kw["reward"].repo_id == "RLHFlow/ArmoRM-Llama3-8B-v0.1"
    p = kw["paper"]
    assert (p.eval_every, p.batch, p.gpus, p.lr, p.max_length, p.dpo_backend) == (20, 64, 8, 1e-6, 4096, "trl")
    doc = __import__("json").loads(rec.read_text())
    assert doc["records"]["1000"]["best_step"] == 40 and doc["records"]["1000"]["kept_ids"] == list(range(6))


# ------------------------------------------------------------------------------------------------ smoke chain
def _stage(args: list[str]) -> None:
    from icml25.studies.rip.__main__ import main

    assert main([*args, "--no-track", "--scale", "smoke", "--config", str(ROOT / "config/studies/rip.yaml")]) == 0


def test_smoke_chain_writes_claims_and_adopts_external_pairs(tmp_path):
    torch.set_num_threads(1)
    r = tmp_path / "rip"
    raw = [r / f"raw/{s}.parquet" for s in ("sft", "pool", "val", "test")]
    seed, pairs = r / "models/seed.pt", r / "processed/pairs.parquet"
    t0 = time.process_time()
    _stage(["prepare", "--out", *map(str, raw), str(seed)])
    _stage(["preprocess", "--in", str(raw[1]), str(seed), "--out", str(pairs)])
    arms = ("none", "rip", "random_same_size")
    for arm in arms:
        _stage(["train", "--arm", arm, "--seeds", "0", "--in", str(pairs), str(raw[2]), str(seed), "--out",
                str(r / f"models/{arm}/chunk0.json"), str(r / f"models/{arm}/chunk0.pt")])
    outs = [r / "claims.json", r / "metrics/eval.json", r / "figures/reward_by_arm.png", r / "report.md",
            *(r / f"metrics/{a}_seed0.json" for a in arms)]
    _stage(["evaluate", "--in", str(pairs), str(raw[3]), str(seed), *(str(r / f"models/{a}/chunk0.json")
                                                                        for a in arms), "--out", *map(str, outs)])
    cpu = time.process_time() - t0
    assert cpu <= 20, f"smoke chain took {cpu:.1f} s of CPU"
    doc = load_claims(r / "claims.json")
    by_id = {c["id"]: c for c in doc["claims"]}
    assert set(by_id) == {"rip_beats_random", "rip_drops_low_quality", *MECHANISM_CHECKS, "rip_vs_none_and_others"}
    for cid in MECHANISM_CHECKS:  # checks hold at any scale
        assert by_id[cid]["kind"] == "check" and by_id[cid]["holds"] is True, by_id[cid]
    # one DPO seed: the seed-based claims cannot be decided
    for cid in ("rip_beats_random", "rip_vs_none_and_others"):
        assert by_id[cid]["verdict"] == "inconclusive" and by_id[cid]["evidence"] == {
            "n": 1, "unit": "DPO seeds", "paper_data": False, "ci_method": "none (n=1 DPO seeds)",
            "mde": None}, by_id[cid]
    ev = by_id["rip_drops_low_quality"]["evidence"]
    assert ev["unit"] == "kept prompts" and ev["paper_data"] is False and ev["ci_method"].startswith("Clopper")
    validate_claims(doc)
    assert doc["seeds"] == [0] and doc["paper"]["title"].startswith("R.I.P.")
    assert all(p.exists() for p in outs)
    table = read_pairs(pairs)
    assert len(table) == 300 and all(len(x) == 4 for x in table["responses"])
    assert (table["chosen_reward"] == table["rewards"].map(max)).all()
    # a pair table scored elsewhere is adopted; a malformed one is rejected naming the column
    cfg = load_yaml(ROOT / "config/studies/rip.yaml")
    ext = tmp_path / "ext.yaml"
    ext.write_text(yaml.safe_dump({**cfg, "pairs_table": str(pairs)}))
    from icml25.studies.rip.__main__ import main

    out2 = tmp_path / "adopted.parquet"
    assert main(["preprocess", "--no-track", "--scale", "smoke", "--config", str(ext), "--in", str(raw[1]),
                 str(seed), "--out", str(out2)]) == 0
    assert read_pairs(out2).equals(table)
    pq.write_table(pa.Table.from_pandas(table.drop(columns="ref_logp_chosen"), preserve_index=False), pairs)
    with pytest.raises(PairTableError, match="'ref_logp_chosen'"):
        main(["preprocess", "--no-track", "--scale", "smoke", "--config", str(ext), "--in", str(raw[1]),
              str(seed), "--out", str(out2)])


# ------------------------------------------------------------------------------------------ verdict logic
MECHANISM_CHECKS = ("mechanism_step0_ln2", "mechanism_best_vs_worst", "mechanism_q001_keeps_all",
                    "mechanism_rip_subset")


@pytest.mark.parametrize("d, expected", [
    ([0.02, 0.03, 0.04], "reproduced"),
    ([0.0101, 0.0101, 0.0101], "reproduced"),      # mean just above 0.01
    ([0.01, 0.01, 0.01], "inconclusive"),          # mean = 0.01 is not > 0.01
    ([0.05, 0.05, -0.001], "inconclusive"),        # one d_s <= 0
    ([0.05, 0.0, 0.05], "inconclusive"),           # d_s = 0 is not > 0
    ([0.01, -0.01, 0.0], "not reproduced"),        # mean = 0
    ([-0.02, -0.03, 0.01], "not reproduced"),
    ([0.001, 0.002, 0.003], "not reproduced"),    # all positive, but the t-CI high 0.0045 < the 0.01 floor
    ([0.02, 0.021, 0.5], "inconclusive"),          # mean above the floor, t-CI low < 0
    ([0.05], "inconclusive"),                      # one seed: no interval
    ([], "inconclusive"),
])
def test_decide_paired(d, expected):
    from icml25.studies.rip.evaluate import decide_paired

    assert decide_paired(d) == expected


@pytest.mark.parametrize("pool, kept, expected", [
    (0.30, (0.05, 0.15), "reproduced"), (0.30, (0.10, 0.1501), "inconclusive"), (0.30, (0.0, 0.01), "reproduced"),
    (0.30, (0.1501, 0.2), "not reproduced"), (float("nan"), (0.05, 0.1), "inconclusive"),
    (0.3, (float("nan"), float("nan")), "inconclusive")])
def test_decide_low_quality(pool, kept, expected):
    from icml25.studies.rip.evaluate import decide_low_quality

    assert decide_low_quality(pool, kept) == expected


def _metrics(d_by_seed: dict[int, float], base: float = 0.5) -> dict:
    return {"rip": {s: {"test_reward": base + d, "win_rate_vs_seed": 0.6} for s, d in d_by_seed.items()},
            "random_same_size": {s: {"test_reward": base, "win_rate_vs_seed": 0.5} for s in d_by_seed},
            "none": {s: {"test_reward": base + 0.5 * d, "win_rate_vs_seed": 0.5} for s, d in d_by_seed.items()}}


def _pairs8() -> pd.DataFrame:
    rewards = [[0.9, 0.1], [0.8, 0.4], [0.7, 0.6], [0.95, 0.5], [0.3, 0.2], [1.0, 0.9], [0.6, 0.55], [0.5, 0.1]]
    quality = ["clean"] * 5 + ["garbled", "ambiguous", "garbled"]
    rows = []
    for i, (r, q) in enumerate(zip(rewards, quality)):
        rows.append({"prompt_id": i, "prompt": f"p{i}", "quality": q, "responses": ["a" * (i + 1), "b"],
                     "rewards": r, "chosen": "a" * (i + 1), "rejected": "b", "chosen_reward": max(r),
                     "rejected_reward": min(r), "reward_gap": max(r) - min(r), "chosen_length": i + 1,
                     "rejected_length": 1 + (i % 3), "ref_logp_chosen": -1.0, "ref_logp_rejected": -2.0})
    return pd.DataFrame(rows)


def test_evaluate_claims_three_verdicts_and_evidence_rule():
    from icml25.studies.rip.evaluate import evaluate_claims

    pairs = _pairs8()
    records = {"rip": {s: {"step0_loss": math.log(2)} for s in range(3)}}
    by = lambda m: {c.id: c for c in  # noqa: E731
                    evaluate_claims(m, {"test_reward": 0.4}, records, pairs, (0.5, 0.5, 0.5))}
    assert by(_metrics({0: 0.02, 1: 0.03, 2: 0.04}))["rip_beats_random"].verdict == "reproduced"
    assert by(_metrics({0: -0.02, 1: 0.01, 2: -0.01}))["rip_beats_random"].verdict == "not reproduced"
    assert by(_metrics({0: 0.02, 1: -0.001, 2: 0.05}))["rip_beats_random"].verdict == "inconclusive"
    one = by(_metrics({0: 0.05}))["rip_beats_random"]
    assert one.verdict == "inconclusive" and one.evidence.n == 1  # one seed: no interval, no verdict
    c = by(_metrics({0: 0.02, 1: 0.03, 2: 0.04}))
    assert [c[k].holds for k in MECHANISM_CHECKS] == [True, True, True, True]
    assert c["rip_vs_none_and_others"].verdict == "reproduced" and c["rip_vs_none_and_others"].source == "ours"
    ev = c["rip_beats_random"].evidence
    assert (ev.n, ev.unit, ev.paper_data) == (3, "DPO seeds", False) and ev.ci_method == "t 95%, n=3 DPO seeds"
    d = np.array([0.02, 0.03, 0.04])
    assert ev.mde == pytest.approx((stats.t.ppf(0.975, 2) + stats.t.ppf(0.8, 2)) * d.std(ddof=1) / np.sqrt(3))
    assert c["rip_beats_random"].statistic["sign_flip_p"] == pytest.approx(1 / 8)  # exact: 1 of 2^3 patterns
    lo, hi = stats.t.interval(0.95, 2, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(3))
    assert [c["rip_beats_random"].statistic["d_ci_low"], c["rip_beats_random"].statistic["d_ci_high"]] == \
        pytest.approx([lo, hi])


def test_dpo_adequacy_gate_makes_claims_1_and_4_inconclusive():
    """When DPO on all pairs ends below the seed model, no filter can show a better DPO model: claims 1 and 4 are
    inconclusive and the note names the gate and its numbers; claim 2 (the data level) is not affected."""
    from icml25.studies.rip.evaluate import evaluate_claims

    records = {"rip": {s: {"step0_loss": math.log(2)} for s in range(3)}}
    m = _metrics({0: 0.02, 1: 0.03, 2: 0.04})  # none: about 0.517
    c = {x.id: x for x in evaluate_claims(m, {"test_reward": 0.6}, records, _pairs8(), (0.5, 0.5, 0.5))}
    for cid in ("rip_beats_random", "rip_vs_none_and_others"):
        assert c[cid].verdict == "inconclusive" and "dpo_improves_seed_model" in c[cid].note
        assert "the test alone gives 'reproduced'" in c[cid].note
        assert c[cid].gates[0].value == pytest.approx(np.mean([0.51, 0.515, 0.52]) - 0.6)
    c = {x.id: x for x in evaluate_claims(m, {"test_reward": 0.6}, records, _pairs8(), (0.5, 0.5, 0.5),
                                          dpo_min_gain=-0.2)}
    assert c["rip_beats_random"].verdict == "reproduced"


def test_low_quality_claim_interval_and_gate():
    from icml25.studies.rip.evaluate import clopper_pearson, evaluate_claims

    assert clopper_pearson(0, 10) == pytest.approx((0.0, 1 - 0.025 ** 0.1))  # closed form
    lo, hi = clopper_pearson(22, 315)
    assert lo == pytest.approx(stats.beta.ppf(0.025, 22, 294)) and hi == pytest.approx(stats.beta.ppf(0.975, 23, 293))
    records = {"rip": {0: {"step0_loss": math.log(2)}}}
    m = _metrics({0: 0.02, 1: 0.03, 2: 0.04})
    c = {x.id: x for x in evaluate_claims(m, {"test_reward": 0.4}, records, _pairs8(), (0.5, 0.5, 0.5),
                                          min_pool_low_quality=0.5)}["rip_drops_low_quality"]
    assert c.verdict == "inconclusive" and "pool_has_low_quality" in c.note  # pool share 3/8 < 0.5
    assert c.evidence.unit == "kept prompts" and c.evidence.ci_method.startswith("Clopper-Pearson")


def test_mechanism_checks_fail_on_constructed_violations():
    from icml25.studies.rip.evaluate import mechanism_checks

    ok = {"rows": 8, "chosen_not_max": 0, "rejected_not_min": 0, "negative_gap": 0, "q001_keeps_all": True,
          "rip_subset_of": {"m1_only": True, "m2_only": True, "m3_only": True}, "rip_kept": 2}
    ln2 = math.log(2)
    assert [c.holds for c in mechanism_checks(ok, {"a": ln2 + 1e-4})] == [True] * 4  # boundary: 1e-4 holds
    bad = dict(ok, negative_gap=1, q001_keeps_all=False, rip_subset_of={"m1_only": True, "m2_only": False})
    got = {c.id: c for c in mechanism_checks(bad, {"a": ln2 + 1.1e-4})}
    assert [got[k].holds for k in MECHANISM_CHECKS] == [False, False, False, False]
    assert got["mechanism_rip_subset"].key_numbers == {"not_subset_of": "m2_only"}
    assert mechanism_checks(ok, {})[0].holds is None  # no train records: not computed


def test_claims_without_their_arms_are_untested_not_a_fixed_inconclusive():
    from icml25.studies.rip.evaluate import evaluate_claims

    records = {"rip": {s: {"step0_loss": math.log(2)} for s in range(3)}}
    m = {"rip": _metrics({0: 0.02, 1: 0.03, 2: 0.04})["rip"]}  # only rip: no random_same_size, no none
    c = {x.id: x for x in evaluate_claims(m, {"test_reward": 0.4}, records, _pairs8(), (0.5, 0.5, 0.5))}
    for cid in ("rip_beats_random", "rip_vs_none_and_others"):
        assert c[cid].status == "untested" and c[cid].testable_at == "default"
    assert c["rip_drops_low_quality"].status == "tested"  # the pair table is there: computed


def _levenshtein_full_table(a: str, b: str) -> int:
    """Reference: the textbook (|a|+1) x (|b|+1) dynamic programme, no shortcuts."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return d[-1][-1]


def test_levenshtein_prefix_suffix_shortcut_matches_the_full_table():
    from icml25.studies.rip.judge import levenshtein

    rng = np.random.default_rng(7)
    cases = [("", ""), ("", "12"), ("12", ""), ("1234", "1234"), ("1234", "1243"), ("aab", "ab"), ("ab", "aab"),
             ("abcab", "ab"), ("aaaa", "aa"), ("12321", "121"), ("kitten", "sitting")]
    for _ in range(3000):  # short strings over a 3-letter alphabet: many shared prefixes, suffixes and repeats
        cases.append(tuple("".join(rng.choice(list("abc"), size=rng.integers(0, 9))) for _ in range(2)))
    for a, b in cases:
        assert levenshtein(a, b) == _levenshtein_full_table(a, b), (a, b)
