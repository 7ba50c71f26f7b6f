"""Miniature files for the paper-scale rehearsal of rip (``icml25.core.rehearsal``).

The paper DAG (``scales.paper``, ``source: wildchat``) reads:

* the 14 WildChat-1M parquet shards (manifest rows ``wildchat_00000`` … ``wildchat_00013``), of which
  :func:`.paper.read_wildchat` reads ``language`` and ``conversation`` (a list of turn structs with ``role`` and
  ``content``). Each miniature is a one-row-group parquet file with the dataset card's top-level columns and types
  (``conversation_hash``, ``model``, ``timestamp`` timestamp[us, UTC], ``conversation`` list<struct<content,
  country, hashed_ip, header struct<accept-language, user-agent>, language, redacted, role, state, timestamp,
  toxic, turn_identifier>>, ``turn``, ``language``, ``openai_moderation`` / ``detoxify_moderation`` [R: reduced to
  the ``flagged`` field / two scores], ``toxic``, ``redacted``, ``state``, ``country``, ``hashed_ip``, ``header``);
  10 conversations per shard from a fixed word list, among them non-English rows, Midjourney prompts and a
  duplicate, so the preparation's filters all act;
* the two released RIP sets (``rip_8b``, ``rip_70b``): JSON Lines, only checked to be JSON objects per line (the
  pipeline does not read their fields; [R] the miniature's field names ``prompt``/``chosen``/``rejected`` were
  not checked against the real files);
* four Hugging Face models (``models.csv``), written by :func:`write_manual` under ``root`` with transformers'
  own ``save_pretrained`` and pointed at by ``paper.model_dirs`` in ``config/rehearsal/rip.yaml``:

  - ``llama_tiny``: a random ``LlamaForCausalLM`` with Llama 3.1 8B's architecture choices (grouped-query
    attention 4 query heads : 2 K/V heads like 32 : 8, llama3 RoPE scaling, untied embeddings, SiLU MLP) at hidden
    32, 2 layers — the seed model M (policy start and reference);
  - ``armorm_tiny``: our :class:`.rewardmodels.ArmoRMScorer` with the released tensor names and K = 19 objectives
    (gating MLP 3 × 16), its ``config.json`` carrying ArmoRM's ``architectures``/``auto_map`` entries that point
    at custom code which is *not* shipped — a load that tried remote code would fail;
  - ``judge_tiny``: a random ``LlamaForSequenceClassification`` with one label (the local judge's class);
  - each with a byte-level tokenizer (256 byte tokens, no merges, Llama 3's special tokens) and a Llama-3-style
    chat template (``<|start_header_id|>role<|end_header_id|>\\n\\n … <|eot_id|>``), so ArmoRM's gating pattern
    occurs as in the real model.

Deterministic: fixed seeds, no timestamps in parquet or safetensors; ``save_pretrained`` output is byte-stable.
Needs transformers (the paper path's classes) and tokenizers.
"""
from __future__ import annotations

import datetime as dt
import io
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np

SHARDS = [f"wildchat_{i:05d}" for i in range(14)]
RELEASED = ("rip_8b", "rip_70b")
ROWS_PER_SHARD = 10
MODEL_DIRS = {"seed": "llama_tiny", "reward": "armorm_tiny", "judge": "judge_tiny"}  #: models.csv row -> dir
WORDS = ("explain write list describe compare summarize translate plan suggest why how what a the an of to in on for "
         "with about story poem email recipe code python function bug error list table history science music "
         "travel budget week garden cat dog coffee tea river city mountain book film game friend job interview "
         "short long simple detailed three five ten steps ideas tips reasons example").split()
OTHER_LANG = ("Chinese", "Russian")
SPECIAL = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "<|finetune_right_pad_id|>")
CHAT_TEMPLATE = ("{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}"
                 "<|end_header_id|>\n\n{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
                 "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


def _write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(dest)


def _schema():
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    header = pa.struct([("accept-language", pa.string()), ("user-agent", pa.string())])
    turn = pa.struct([("content", pa.string()), ("country", pa.string()), ("hashed_ip", pa.string()),
                      ("header", header), ("language", pa.string()), ("redacted", pa.bool_()),
                      ("role", pa.string()), ("state", pa.string()), ("timestamp", ts), ("toxic", pa.bool_()),
                      ("turn_identifier", pa.int64())])
    return pa.schema([("conversation_hash", pa.string()), ("model", pa.string()), ("timestamp", ts),
                      ("conversation", pa.list_(turn)), ("turn", pa.int64()), ("language", pa.string()),
                      ("openai_moderation", pa.list_(pa.struct([("flagged", pa.bool_())]))),
                      ("detoxify_moderation", pa.list_(pa.struct([("toxicity", pa.float64()),
                                                                  ("insult", pa.float64())]))),
                      ("toxic", pa.bool_()), ("redacted", pa.bool_()), ("state", pa.string()),
                      ("country", pa.string()), ("hashed_ip", pa.string()), ("header", header)])


def wildchat_rows(shard: int) -> list[dict]:
    """The conversations of miniature shard ``shard`` (row 3: another language; row 5: a Midjourney prompt; row 6
    of shard k>0 repeats row 0 of shard k-1 word for word: a duplicate)."""
    rng = np.random.default_rng([20250701, shard])
    t0 = dt.datetime(2023, 4, 9, tzinfo=dt.timezone.utc) + dt.timedelta(days=shard)
    rows = []
    for i in range(ROWS_PER_SHARD):
        words = " ".join(rng.choice(WORDS, int(rng.integers(5, 12))))
        prompt = words.capitalize() + "?"
        lang = "English"
        if i == 3:
            lang = OTHER_LANG[shard % 2]
        if i == 5:
            prompt = f"/imagine prompt: {words}, cinematic light --ar 16:9"
        if i == 6 and shard > 0:
            prompt = wildchat_rows(shard - 1)[0]["conversation"][0]["content"]
        answer = " ".join(rng.choice(WORDS, int(rng.integers(8, 20)))).capitalize() + "."
        when = t0 + dt.timedelta(minutes=17 * i)
        user = {"content": prompt, "country": "Narnia", "hashed_ip": f"{shard:04x}{i:04x}" * 8,
                "header": {"accept-language": "en-US,en;q=0.9", "user-agent": "Mozilla/5.0"}, "language": lang,
                "redacted": False, "role": "user", "state": None, "timestamp": None, "toxic": False,
                "turn_identifier": int(shard * 100 + i)}
        bot = {"content": answer, "country": None, "hashed_ip": None, "header": None, "language": lang,
               "redacted": False, "role": "assistant", "state": None, "timestamp": when, "toxic": False,
               "turn_identifier": int(shard * 100 + i)}
        rows.append({"conversation_hash": f"{int(rng.integers(0, 2**62)):032x}", "model": "gpt-3.5-turbo-0301",
                     "timestamp": when, "conversation": [user, bot], "turn": 1, "language": lang,
                     "openai_moderation": [{"flagged": False}, {"flagged": False}],
                     "detoxify_moderation": [{"toxicity": 0.001, "insult": 0.0005}] * 2, "toxic": False,
                     "redacted": False, "state": None, "country": "Narnia", "hashed_ip": user["hashed_ip"],
                     "header": user["header"]})
    return rows


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema()), buf)
    return buf.getvalue()


def _released(name: str) -> bytes:
    rng = np.random.default_rng([20250702, RELEASED.index(name)])
    lines = []
    for i in range(4):
        p = " ".join(rng.choice(WORDS, 8)).capitalize() + "?"
        lines.append(json.dumps({"prompt": p, "chosen": " ".join(rng.choice(WORDS, 12)),
                                 "rejected": " ".join(rng.choice(WORDS, 6))}, sort_keys=True))
    return ("\n".join(lines) + "\n").encode()


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write the 14 WildChat shards and the two released sets at their manifest ``mirror_path`` under ``root``."""
    for i, name in enumerate(SHARDS):
        _write(Path(root) / manifest[name].mirror_path, _parquet(wildchat_rows(i)))
    for name in RELEASED:
        _write(Path(root) / manifest[name].mirror_path, _released(name))
    return [*SHARDS, *RELEASED]


def _tokenizer():
    """A byte-level tokenizer (256 byte tokens, no merges) with Llama 3's special tokens and a Llama-3-style chat
    template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    vocab = {ch: i for i, ch in enumerate(sorted(bytes_to_unicode().values()))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   pad_token="<|finetune_right_pad_id|>", model_max_length=4096)
    fast.add_special_tokens({"additional_special_tokens": [s for s in SPECIAL if s not in
                                                           ("<|begin_of_text|>", "<|eot_id|>",
                                                            "<|finetune_right_pad_id|>")]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _llama_config(tok, **extra):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=131072,
                       rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                          "original_max_position_embeddings": 8192},
                       rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, torch_dtype="float32", **extra)


def _seeded(seed: int, build):
    import torch

    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return build()
    finally:
        torch.random.set_rng_state(state)


def _armorm(tok):
    import torch

    from .rewardmodels import armorm_class

    cfg = _llama_config(tok, num_objectives=19, gating_hidden_dim=16, gating_n_hidden=3, gating_temperature=10)

    def build():
        m = armorm_class()(cfg)
        with torch.no_grad():  # visible head: weights of std 0.5 (post_init's 0.02 would give a flat gate)
            for p in (*m.gating.parameters(), m.regression_layer.weight):
                p.normal_(0.0, 0.5)
            m.gating.logit_scale.fill_(1.0)
            m.reward_transform_matrix.copy_(torch.eye(19))
            m.reward_transform_matrix[4, :] -= 0.1  # a verbosity-style row, as the released matrix has
            m.reward_transform_matrix[4, 4] = 1.0
        return m

    return _seeded(20250704, build)


def write_manual(root: Path) -> None:
    """Write the three tiny models (+ tokenizers) at ``root / MODEL_DIRS[...]`` (each written beside and renamed)."""
    from transformers import LlamaForCausalLM, LlamaForSequenceClassification

    root = Path(root)
    tok = _tokenizer()
    builders = {
        "seed": lambda: _seeded(20250703, lambda: LlamaForCausalLM(_llama_config(tok))),
        "reward": lambda: _armorm(tok),
        "judge": lambda: _seeded(20250705, lambda: LlamaForSequenceClassification(_llama_config(tok, num_labels=1))),
    }
    for name, sub in MODEL_DIRS.items():
        dest, tmp = root / sub, root / f".{sub}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model = builders[name]()
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        if name == "reward":  # the released config's custom-code entries (the code itself is not shipped)
            cfg_path = tmp / "config.json"
            doc = json.loads(cfg_path.read_text())
            doc["architectures"] = ["LlamaForRewardModelWithGating"]
            doc["auto_map"] = {"AutoModelForSequenceClassification":
                               "modeling_custom.LlamaForRewardModelWithGating"}
            cfg_path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
