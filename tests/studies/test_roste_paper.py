"""The roste paper-scale stages end to end on CPU: a tiny random Llama saved locally stands in for the hub model and a
20-row synthetic TL;DR file for the data (skipped without transformers)."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from icml25.core.download import DownloadError
from icml25.studies.roste.claims import CLAIM_IDS

tf = pytest.importorskip("transformers")

YAML = Path(__file__).resolve().parents[2] / "config" / "studies" / "roste.yaml"
WORDS = ("cat dog bird fish tree house car road river town food water sun rain snow wind red blue green small big "
         "old new my the a is was and to").split()


def _tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "tl;dr:": 3, **{w: 4 + i for i, w in enumerate(WORDS)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = tf.PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(path)


def _tldr_rows(n: int, seed: int) -> dict[str, list[str]]:
    """TL;DR-format rows: a post of 10 words ending in 'tl;dr:'; the summary is its first 3 words."""
    rng = np.random.default_rng(seed)
    prompts, completions = [], []
    for _ in range(n):
        post = list(rng.choice(WORDS, 10))
        prompts.append(" ".join(post) + " tl;dr:")
        completions.append(" " + " ".join(post[:3]))
    return {"prompt": prompts, "completion": completions}


@pytest.fixture(scope="module")
def paper_setup(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("roste_paper")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = tf.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    tf.LlamaForCausalLM(cfg).save_pretrained(root / "tiny")
    _tokenizer(root / "tiny")
    rows = _tldr_rows(20, 0)  # 16 train + 4 test rows
    mirror = root / "mirror" / "trl-lib" / "tldr" / "data"
    mirror.mkdir(parents=True)
    pq.write_table(pa.table({k: v[:16] for k, v in rows.items()}), mirror / "train-00000-of-00001.parquet")
    pq.write_table(pa.table({k: v[16:] for k, v in rows.items()}), mirror / "test-00000-of-00001.parquet")
    doc = yaml.safe_load(YAML.read_text())
    doc["scales"]["paper"] = {
        "seeds": [0], "seeds_per_job": 1, "arms": ["fp_sft", "rtn", "quarot_lite", "ste", "ste_rot_all", "roste"],
        "search": {"calib_examples": 8}, "eval": {"invariance_configs": 2},
        "paper": {"model": "meta-llama/Llama-3.1-8B", "local_dir": str(root / "tiny"), "dataset": "tldr",
                  "lr": 3e-3, "batch": 4, "epochs": 6,
                  "max_length": 64, "e_every": 4, "eval_examples": 4, "max_new_tokens": 6, "dtype": "float64",
                  "search_dtype": "float64", "invariance_tokens": 8, "device": "cpu"}}
    (root / "roste.yaml").write_text(yaml.safe_dump(doc))
    yield root
    torch.set_num_threads(threads)


def _stage(root: Path, *argv: str) -> None:
    from icml25.studies.roste.__main__ import main

    assert main([argv[0], "--scale", "paper", "--no-track", "--config", str(root / "roste.yaml"), *argv[1:]]) == 0


def test_rouge_l_of_identical_strings_is_one():
    from icml25.studies.roste.evaluate import rouge_l

    assert rouge_l(["the cat sat"], ["the cat sat"]) == 1.0
    assert rouge_l(["dog"], ["the cat sat"]) == 0.0


def test_tldr_reader_names_file_and_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from icml25.studies.roste.paper_data import read_tldr, split_messages

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"prompt": ["a tl;dr:"], "summary": ["b"]}), bad)
    with pytest.raises(ValueError, match=r"bad.parquet: missing column\(s\) \['completion'\]"):
        read_tldr(bad)
    pq.write_table(pa.table({"prompt": ["a tl;dr:", "c"], "completion": ["b", " "]}), bad)
    with pytest.raises(ValueError, match=r"bad.parquet: column 'completion' row 1"):
        read_tldr(bad)
    with pytest.raises(ValueError, match="x.parquet: column 'messages' row 3: no assistant turn"):
        split_messages([{"role": "user", "content": "hi"}], "x.parquet: column 'messages' row 3")
    turns, reply = split_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "x")
    assert turns == [{"role": "user", "content": "hi"}] and reply == "yo"


def test_paper_stage_chain_on_a_tiny_local_llama(paper_setup):
    """prepare (manifest files from a mirror, trust_unpinned) -> pretrain (tokenise) -> preprocess (rotation search)
    -> train (every trained arm) -> evaluate (claims.json) on CPU, with values asserted at each step."""
    root = paper_setup
    res = root / "results"
    raw = [res / "raw" / "paper" / "tldr_train.parquet", res / "raw" / "paper" / "tldr_test.parquet"]
    hub_rec = res / "raw" / "paper" / "hub_model.json"
    remote = ["--data-source", "remote", "--mirror", str(root / "mirror")]
    with pytest.raises(DownloadError, match="UNPINNED"):  # the manifest pins no hash: refused without the opt-in
        _stage(root, "prepare", *remote, "--out", *map(str, raw), str(hub_rec))
    assert not any(p.exists() for p in raw)
    _stage(root, "prepare", *remote, "--trust-unpinned", "--out", *map(str, raw), str(hub_rec))
    assert all(p.exists() and Path(f"{p}.sha256").exists() for p in raw)
    from icml25.core.hub import directory_digest

    local = {"repo_id": "meta-llama/Llama-3.1-8B", "revision": f"local:{directory_digest(root / 'tiny')}",
             "source": "local"}  # paper.local_dir stands in for the hub model, recorded by its content digest
    assert json.loads(hub_rec.read_text()) == {"name": "llama_3_1_8b", **local}

    start = res / "models" / "pretrain_a30.pt"
    _stage(root, "pretrain", "--set", "alpha=30", "--in", *map(str, raw), str(hub_rec), "--out", str(start))
    rec = torch.load(start, weights_only=True)
    assert len(rec["train"]) == 16 and len(rec["test"]) == 4
    assert rec["hub"] == {"name": "llama_3_1_8b", **local} and rec["revision"] == local["revision"]
    ex = rec["test"][0]
    n_prompt = len(ex["prompt_ids"])
    assert n_prompt == 11 and ex["labels"][:n_prompt] == [-100] * n_prompt  # 10 words + "tl;dr:" masked
    assert ex["labels"][n_prompt:] == ex["input_ids"][n_prompt:] and ex["input_ids"][-1] == 2  # 3 words + EOS
    assert len(ex["input_ids"]) == n_prompt + 4

    rotcfg = res / "processed" / "rotcfg_a30_seed0.json"
    _stage(root, "preprocess", "--set", "alpha=30", "--in", *map(str, raw), str(start), "--out", str(rotcfg))
    search = json.loads(rotcfg.read_text())
    slots = [f"r{k}.{l}" for l in range(2) for k in (2, 3, 4)]
    assert sorted(search["choices"]) == sorted(slots)
    for s in slots:  # the per-slot argmin of positive errors
        e_i, e_h = search["errors"][s]
        assert e_i > 0 and e_h > 0 and search["choices"][s] == (e_h < e_i)
    assert search["measured"] == pytest.approx(search["totals"]["sum_min"], rel=1e-9)

    chunks = {}
    for arm in ("fp_sft", "ste", "ste_rot_all", "roste"):
        chunks[arm] = res / "models" / arm / "chunk0.pt"
        extra = [str(rotcfg)] if arm == "roste" else []
        _stage(root, "train", "--arm", arm, "--seeds", "0", "--in", *map(str, raw), str(start), *extra,
               "--out", str(chunks[arm]))
        run = torch.load(chunks[arm], weights_only=True)["runs"]["0"]
        loss = run["loss"]
        assert len(loss) == 6 * 4 and all(math.isfinite(v) for v in loss)  # 6 epochs x 16 rows / batch 4
        assert np.mean(loss[-4:]) < 0.8 * np.mean(loss[:4]), (arm, loss)  # the last epoch fits better than the first
        assert [k for k, _ in run["e_w"]] == [0, 4, 8, 12, 16, 20, 24]
        assert run["rotations"]["r1"] == (arm in ("ste_rot_all", "roste"))
    roste_rot = torch.load(chunks["roste"], weights_only=True)["runs"]["0"]["rotations"]
    assert {s: roste_rot[s] for s in slots} == search["choices"]

    claims, metrics = res / "claims.json", res / "metrics" / "eval.json"
    _stage(root, "evaluate", "--in", *map(str, raw), str(start), str(rotcfg), *map(str, chunks.values()),
           "--out", str(claims), str(metrics))
    doc = json.loads(claims.read_text())
    assert sorted(c["id"] for c in doc["claims"]) == sorted(CLAIM_IDS) and doc["scale"] == "paper"
    assert doc["models"] == {"llama_3_1_8b": local}  # the model every stage loaded, in claims.json
    m = json.loads(metrics.read_text())
    assert sorted(m["per_seed"]) == sorted(["fp_sft", "rtn", "quarot_lite", "ste", "ste_rot_all", "roste"])
    for arm, by_seed in m["per_seed"].items():
        v = by_seed["0"]
        assert math.isfinite(v["test_loss"]) and 0 <= v["token_acc"] <= 1 and 0 <= v["rougeL"] <= 1, arm
    # float64, quantizers off: rotations exact up to the float32 variance of HF's RMSNorm (R1)
    assert max(r["max_abs_diff"] for r in m["invariance"]) < 1e-6
    c3 = {c["id"]: c for c in doc["claims"]}
    assert c3["c3a_rotation_invariance"]["holds"] is True and c3["c3b_search_optimal"]["holds"] is True
    assert m["bounds"]["rows"] == 2 * (64 * 3 + 32 * 2 + 128 * 2)  # q,o,down: 64 rows; k,v: 32; gate,up: 128
    figs = [res / "figures" / "e_w.png", res / "figures" / "test_loss.png", res / "report.md"]
    _stage(root, "report", "--in", str(metrics), "--out", *map(str, figs))
    assert all(f.stat().st_size > 0 for f in figs) and "| roste | 1 |" in figs[2].read_text()


C1 = "0123456789abcdef0123456789abcdef01234567"


def _fake_stage(name="prepare", trust_unpinned=False, data_source="remote", **paper):
    from types import SimpleNamespace

    p = {"model": "Qwen/Qwen2.5-0.5B", "revision": None, "local_dir": None, **paper}
    return SimpleNamespace(name=name, trust_unpinned=trust_unpinned, data_source=data_source,
                           config=SimpleNamespace(paper=SimpleNamespace(**p)))


def test_prepare_resolves_the_model_once_and_refuses_unpinned_without_the_opt_in(tmp_path, monkeypatch):
    """paper.model's UNPINNED row: refused without trust_unpinned (no network call); with it, the hub's commit
    (data_source remote) or the commit the local Hugging Face cache holds for main; paper.revision pins it."""
    import huggingface_hub.constants

    from icml25.core import hub
    from icml25.studies.roste import paper_stages as PS

    monkeypatch.setattr(hub, "hub_commit", lambda repo: pytest.fail(f"network call for {repo}"))
    with pytest.raises(SystemExit, match="trust_unpinned=true"):
        PS.resolve_paper_model(_fake_stage())
    pinned = PS.resolve_paper_model(_fake_stage(revision=C1))
    assert (pinned.name, pinned.revision, pinned.source) == ("qwen2_5_0_5b", C1, "pinned")
    monkeypatch.setattr(hub, "hub_commit", lambda repo: {"Qwen/Qwen2.5-0.5B": C1[::-1]}[repo])
    res = PS.resolve_paper_model(_fake_stage(trust_unpinned=True))
    assert (res.revision, res.source) == (C1[::-1], "resolved")
    cache = tmp_path / "hub"  # the cache layout huggingface_hub writes: refs/main -> snapshots/<commit>/
    snap = cache / "models--Qwen--Qwen2.5-0.5B" / "snapshots" / C1
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (cache / "models--Qwen--Qwen2.5-0.5B" / "refs").mkdir()
    (cache / "models--Qwen--Qwen2.5-0.5B" / "refs" / "main").write_text(C1)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    res = PS.resolve_paper_model(_fake_stage(trust_unpinned=True, data_source="local"))
    assert (res.revision, res.source) == (C1, "resolved")
    with pytest.raises(SystemExit, match="holds no snapshot"):
        PS.resolve_paper_model(_fake_stage(trust_unpinned=True, data_source="local", model="Qwen/Qwen2.5-7B"))


def test_later_stages_load_the_recorded_commit_or_refuse_a_stale_record(tmp_path):
    from icml25.core import hub
    from icml25.studies.roste import paper_stages as PS

    rec = {"name": "qwen2_5_0_5b", "repo_id": "Qwen/Qwen2.5-0.5B", "revision": C1, "source": "resolved"}
    res = PS.recorded_model(_fake_stage("train"), rec, "start")
    assert (res.path, res.revision, res.source) == ("Qwen/Qwen2.5-0.5B", C1, "resolved")
    assert res.kwargs() == {"revision": C1, "trust_remote_code": False}
    with pytest.raises(SystemExit, match="rerun prepare"):  # the config now pins another commit
        PS.recorded_model(_fake_stage("train", revision=C1[::-1]), rec, "start")
    with pytest.raises(SystemExit, match="rerun prepare"):  # the config now names another model
        PS.recorded_model(_fake_stage("train", model="Qwen/Qwen2.5-7B"), rec, "start")
    with pytest.raises(SystemExit, match=r"lacks \['revision'\]"):
        PS.recorded_model(_fake_stage("train"), {**rec, "revision": ""}, "start")
    d = tmp_path / "weights"
    d.mkdir()
    (d / "config.json").write_text("{}")
    local = {**rec, "revision": f"local:{hub.directory_digest(d)}", "source": "local"}
    assert PS.recorded_model(_fake_stage("train", local_dir=str(d)), local, "start").path == str(d)
    (d / "config.json").write_text('{"changed": 1}')
    with pytest.raises(SystemExit, match="changed since prepare"):
        PS.recorded_model(_fake_stage("train", local_dir=str(d)), local, "start")


@pytest.mark.parametrize("d", [12, 20, 28, 76, 148, 28 * 16, 896, 64])
def test_hadamard_of_the_paper_widths_is_orthonormal_and_fast(d):
    """H_m ⊗ H_2^k (Paley H_m) for the paper models' widths: R R^T = I, and the fast rotation equals x @ R."""
    from icml25.studies.roste import hadamard_any as HA

    r = HA.signs(d, 3)
    R = HA.matrix(r)
    assert torch.allclose(R @ R.T, torch.eye(d, dtype=torch.float64), atol=1e-12)
    assert set(HA.hadamard(d).unique().tolist()) == {-1.0, 1.0}
    x = torch.randn(5, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    assert torch.allclose(HA.rotate(x, r), x @ R, atol=1e-12)
    for m, w in ((28, 14336), (148, 18944), (76, 4864), (28, 3584)):  # Llama 3.1 8B, Qwen2.5-7B, -0.5B
        assert HA.split(w)[0] == m
    with pytest.raises(ValueError, match="rotation size 3"):
        HA.split(3)


def test_hf_rotations_exact_for_non_power_of_2_widths():
    """A tiny Llama with hidden 96 = 12 * 8 and intermediate 224 = 28 * 8 (the paper models' kind of widths): every
    rotation with quantizers off reproduces the logits; W4A4KV4 changes them."""
    from icml25.studies.roste import hf
    from icml25.studies.roste.method import QuantConfig

    cfg = tf.LlamaConfig(vocab_size=64, hidden_size=96, intermediate_size=224, num_hidden_layers=2,
                         num_attention_heads=3, num_key_value_heads=3, max_position_embeddings=64)
    torch.manual_seed(1)
    base = tf.LlamaForCausalLM(cfg).double().eval()
    x = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ref = base(x).logits
        got = hf.prepare_for_roste(copy.deepcopy(base), "all", QuantConfig(None, None, None), seed=2)(x).logits
        q = hf.prepare_for_roste(copy.deepcopy(base), "all", QuantConfig(), seed=2)(x).logits
    assert float((got - ref).abs().max()) < 1e-6 and float((q - ref).abs().max()) > 1e-3


def test_hf_qwen2_prepared_generation_matches_uncached_greedy():
    """A tiny Qwen2 (q/k/v biases, GQA, hidden 112 = 28 * 4): rotations exact with quantizers off, and under W4A4KV4
    the KV-cached generate() of the evaluation equals greedy decoding that recomputes the whole prefix."""
    from icml25.studies.roste import hf
    from icml25.studies.roste.method import QuantConfig

    cfg = tf.Qwen2Config(vocab_size=64, hidden_size=112, intermediate_size=152, num_hidden_layers=2,
                         num_attention_heads=7, num_key_value_heads=1, max_position_embeddings=64,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    base = tf.Qwen2ForCausalLM(cfg).double().eval()
    x = torch.randint(0, 64, (1, 10), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        got = hf.prepare_for_roste(copy.deepcopy(base), "all", QuantConfig(None, None, None), seed=1)(x).logits
        assert float((got - base(x).logits).abs().max()) < 1e-6
        m = hf.prepare_for_roste(copy.deepcopy(base), "all", QuantConfig(), seed=1)
        gen = m.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=6, do_sample=False,
                         pad_token_id=0, eos_token_id=None)
        y = x
        for _ in range(6):
            y = torch.cat([y, m(input_ids=y, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert gen.tolist() == y.tolist()


def test_tulu3_examples_hold_out_rows_and_mask_the_prompt(paper_setup, tmp_path):
    """Tulu 3 rows: the answer is the last assistant turn, everything before it the (masked) prompt; a seeded
    held-out split of tulu3_test_examples rows; train_examples subsamples the rest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from icml25.studies.roste.paper_data import sft_examples

    tok = tf.AutoTokenizer.from_pretrained(paper_setup / "tiny", local_files_only=True)
    msgs = [[{"role": "user", "content": f"cat {'dog ' * k}"}, {"role": "assistant", "content": "sun rain"},
             {"role": "user", "content": "more"}, {"role": "assistant", "content": "red " * (k % 3 + 1)}]
            for k in range(10)]
    pq.write_table(pa.table({"messages": msgs}), tmp_path / "t.parquet")
    data = sft_examples("tulu3", {"tulu3_00000": tmp_path / "t.parquet"}, tok, 64, 5, 3, seed=0)
    assert len(data["train"]) == 5 and len(data["test"]) == 3
    again = sft_examples("tulu3", {"tulu3_00000": tmp_path / "t.parquet"}, tok, 64, 5, 3, seed=0)
    assert again == data  # seeded
    for ex in data["test"]:
        n = len(ex["prompt_ids"])
        answer = ex["input_ids"][n:]
        assert ex["labels"][:n] == [-100] * n and ex["labels"][n:] == answer
        assert tok.decode(answer[:-1]) == ex["reference"].strip() and answer[-1] == tok.eos_token_id
    with pytest.raises(ValueError, match="leaves no training rows"):
        sft_examples("tulu3", {"tulu3_00000": tmp_path / "t.parquet"}, tok, 64, None, 10)


def test_rehearsal_miniatures_are_real_format_tldr_and_a_qwen2_shaped_model(tmp_path):
    """The rehearsal's files (roste/rehearsal.py): the TL;DR parquet files read by the paper reader with the real
    text layout, the same bytes on a second call; the tiny model loads through hf.load_causal_lm as a Qwen2 with
    Qwen2.5-0.5B's structure at 1/8 width (biases, tied embeddings, non-power-of-2 widths, GQA 7:1) and its
    tokenizer round-trips the prompt words and ends answers with Qwen's EOS."""
    from icml25.core.download import read_manifest
    from icml25.studies.roste import hf, rehearsal
    from icml25.studies.roste.paper_data import read_tldr, tokenise_pair

    manifest = read_manifest(Path(rehearsal.__file__).with_name("manifest.csv"), rehearsal=False)
    assert rehearsal.write_miniatures(tmp_path / "a", manifest) == ["tldr_train", "tldr_test"]
    rehearsal.write_miniatures(tmp_path / "b", manifest)
    for name, n in rehearsal.ROWS.items():
        path = tmp_path / "a" / manifest[name].mirror_path
        assert path.read_bytes() == (tmp_path / "b" / manifest[name].mirror_path).read_bytes()
        pairs = read_tldr(path)
        assert len(pairs) == n
        for prompt, completion in pairs:
            assert prompt.startswith("SUBREDDIT: r/") and "\n\nTITLE: " in prompt and prompt.endswith("\n\nTL;DR:")
            post = prompt.split("\n\nPOST: ")[1].split(".\n\n")[0].split()
            assert completion == " " + " ".join(post[:5])  # the summary is the post's first five words
    rehearsal.write_manual(tmp_path / "m")
    model_dir = tmp_path / "m" / rehearsal.MODEL_DIR
    res = hf.resolve_model("Qwen/Qwen2.5-0.5B", local_dir=model_dir)
    model = hf.load_causal_lm(res, dtype=torch.float32)
    c = model.config
    assert type(model).__name__ == "Qwen2ForCausalLM" and c.tie_word_embeddings
    assert (c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads) == (112, 304, 7, 1)
    assert model.model.layers[0].self_attn.q_proj.bias is not None
    tok = hf.load_tokenizer(res)
    assert tok.eos_token == tok.pad_token == "<|endoftext|>" and tok.eos_token_id == c.eos_token_id == 0
    prompt, completion = read_tldr(tmp_path / "a" / manifest["tldr_test"].mirror_path)[0]
    ex = tokenise_pair(tok, prompt, completion, 128)
    assert tok.unk_token_id not in ex["input_ids"]  # every miniature word is in the vocabulary
    assert ex["input_ids"][-1] == 0 and ex["labels"][-6:] == ex["input_ids"][-6:]  # five words + EOS
    assert tok.decode(ex["input_ids"][-6:-1]) == completion.strip()
    rehearsal.write_manual(tmp_path / "m2")
    m2 = tmp_path / "m2" / rehearsal.MODEL_DIR
    assert (m2 / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()
