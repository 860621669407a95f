#!/usr/bin/env python3
"""Tiny random models of each architecture wick runs, as GGUF fixtures, plus
transformers' float32 logits for them.

Run with the reference venv (it has torch):
    .venv-ref/bin/python scripts/ref/make_tiny_models.py

For each variant below the script
  1. builds a transformers model from a config with seeded random weights,
     scaled so that logits spread over several units (not a flat softmax);
  2. writes it to tests/fixtures/models/tiny_<name>.gguf itself with
     gguf.GGUFWriter, in the layout of llama.cpp's HF converter: GGUF tensor
     names from gguf's tensor-name map, llama Q/K rows permuted into
     interleaved-pair RoPE order, Gemma 3 norm weights stored as 1 + w, llama3
     RoPE scaling as a rope_freqs tensor, 1-D tensors always F32, and the
     hyper-parameter keys llama.cpp writes; plus a small but complete
     tokenizer section ("gpt2" byte-level BPE, or "llama" SentencePiece);
  3. checks that transformers' own GGUF loader reads the file back to the
     same weights and the same logits (an assertion: a wrong layout stops
     the script);
  4. stores the original model's float32 logits for three prompts of random
     ids (every position) in tests/fixtures/ref/tiny_<name>.npz.
"""

import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import gguf
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL_DIR = os.path.join(ROOT, "tests", "fixtures", "models")
REF_DIR = os.path.join(ROOT, "tests", "fixtures", "ref")
VOCAB = 320
PROMPT_LENS = (7, 16, 33)  # the last is four times Gemma 3's tiny window
CORPUS = "/usr/share/common-licenses/GPL-3"

COMMON = dict(vocab_size=VOCAB, hidden_size=64, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=512)

# name -> (transformers model_type, GGUF arch, config, file type, tokenizer kind)
VARIANTS = {
    "llama": ("llama", "llama", dict(
        COMMON, intermediate_size=128, num_hidden_layers=3, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        tie_word_embeddings=False), "f32", "gpt2"),
    "llama_rope3": ("llama", "llama", dict(
        COMMON, intermediate_size=96, num_hidden_layers=2, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "llama3", "rope_theta": 20000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64},
        tie_word_embeddings=True), "f32", "gpt2"),
    "qwen2_f16": ("qwen2", "qwen2", dict(
        COMMON, intermediate_size=128, num_hidden_layers=2, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True), "f16", "gpt2"),
    "qwen3": ("qwen3", "qwen3", dict(
        COMMON, intermediate_size=128, num_hidden_layers=3, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 300000.0},
        attention_bias=False, tie_word_embeddings=False), "f32", "gpt2"),
    # Six layers: llama.cpp's Gemma 3 makes every sixth layer global
    # (layers 0-4 sliding, 5 global), the transformers default as well.
    # query_pre_attn_scalar = head_dim: llama.cpp scales scores by
    # 1/sqrt(head_dim) for Gemma 3 (no GGUF key carries it).
    # Sliding layers use RoPE base 10000, fixed for Gemma 3 in llama.cpp.
    "gemma3": ("gemma3_text", "gemma3", dict(
        COMMON, intermediate_size=96, num_hidden_layers=6, rms_norm_eps=1e-6,
        sliding_window=8, query_pre_attn_scalar=16,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        final_logit_softcapping=None, attn_logit_softcapping=None,
        tie_word_embeddings=True, bos_token_id=2, eos_token_id=1, pad_token_id=0),
        "f32", "llama"),
}


# ---------------------------------------------------------------- tokenizers

def byte_to_char():
    """GPT-2's reversible byte -> printable character table."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def corpus_words():
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()[:20000]
    return text.split()


def train_merges(words, n_merges):
    """A few greedy BPE merges over words (each a tuple of symbols)."""
    counts = {}
    for w in words:
        key = tuple(w)
        counts[key] = counts.get(key, 0) + 1
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in counts.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        merged = {}
        for w, c in counts.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        counts = merged
    return merges


def gpt2_vocab():
    """256 byte symbols, then merged symbols, then <|endoftext|> (control)."""
    table = byte_to_char()
    tokens = [table[b] for b in range(256)]
    words = [[table[b] for b in (" " + w).encode("utf-8")] for w in corpus_words()]
    merges = train_merges(words, VOCAB - 257)
    for a, b in merges:
        tokens.append(a + b)
    tokens.append("<|endoftext|>")
    types = [1] * (len(tokens) - 1) + [3]
    assert len(tokens) == VOCAB and len(set(tokens)) == VOCAB
    return tokens, types, [f"{a} {b}" for a, b in merges]


def spm_vocab():
    """<pad> <eos> <bos> <unk>, 256 byte tokens, then scored pieces."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"]
    types = [3, 3, 3, 2]
    scores = [0.0] * 4
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(6)
        scores.append(0.0)
    words = [list("\u2581" + w) for w in corpus_words()]
    chars = sorted({c for w in words for c in w if c.isalpha() or c == "\u2581"})
    pieces = list(chars)
    for a, b in train_merges(words, VOCAB):
        if len(tokens) + len(pieces) >= VOCAB:
            break
        if a + b not in pieces:
            pieces.append(a + b)
    pieces = pieces[:VOCAB - len(tokens)]
    for i, p in enumerate(pieces):
        tokens.append(p)
        types.append(1)
        scores.append(-float(i))
    assert len(tokens) == VOCAB and len(set(tokens)) == VOCAB
    return tokens, types, scores


def write_tokenizer(w, kind):
    if kind == "gpt2":
        tokens, types, merges = gpt2_vocab()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(VOCAB - 1)
        w.add_eos_token_id(VOCAB - 1)
        w.add_add_bos_token(False)
    else:
        tokens, types, scores = spm_vocab()
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(False)


# ---------------------------------------------------------------- models

def build_model(model_type, cfg, ftype, seed):
    config = AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                             dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    gemma = model_type.startswith("gemma")
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            if name.endswith("norm.weight"):
                # Gemma scales by (1 + w); the others by w. The GGUF holds
                # float32(1 + w): keep only w that survive that round trip.
                p.copy_(((1.0 + 0.3 * r) - 1.0) if gemma else 1.0 + 0.3 * r)
            elif name.endswith(".bias"):
                p.copy_(0.3 * r)
            elif "embed_tokens" in name:
                p.copy_(0.5 * r)
            elif name == "lm_head.weight":
                p.copy_(3.0 * r / p.shape[1] ** 0.5)
            else:
                p.copy_(r / p.shape[1] ** 0.5)
            if ftype == "f16" and p.dim() == 2:
                p.copy_(p.half().float())  # exactly what the F16 file holds
    model.eval()
    return model


def llama_permute(w, n_head):
    """HF (rotate-halves) Q/K rows -> llama.cpp's interleaved-pair order."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(rp, head_dim):
    """Per-frequency divisors of llama3 RoPE scaling (the rope_freqs tensor)."""
    base, factor = rp["rope_theta"], rp["factor"]
    lo, hi, old = rp["low_freq_factor"], rp["high_freq_factor"], rp["original_max_position_embeddings"]
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / base ** (i / head_dim)
        wavelen = 2 * np.pi / freq
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_gguf(path, name, model, arch, ftype, tok_kind):
    c = model.config
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"wick tiny {name}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if ftype == "f16" else gguf.LlamaFileType.ALL_F32)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_dimension_count(c.head_dim)
    if arch == "gemma3":
        w.add_rope_freq_base(c.rope_parameters["full_attention"]["rope_theta"])
        w.add_sliding_window(c.sliding_window)
    else:
        w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    if arch == "llama":
        w.add_vocab_size(c.vocab_size)
    write_tokenizer(w, tok_kind)

    tmap = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch.upper()), c.num_hidden_layers)
    for hf_name, t in model.state_dict().items():
        if hf_name == "lm_head.weight" and c.tie_word_embeddings:
            continue
        gname = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert gname is not None, f"no GGUF name for {hf_name}"
        data = t.detach().numpy().astype(np.float32)
        if arch == "llama" and gname.endswith("attn_q.weight"):
            data = llama_permute(data, c.num_attention_heads)
        elif arch == "llama" and gname.endswith("attn_k.weight"):
            data = llama_permute(data, c.num_key_value_heads)
        if arch == "gemma3" and gname.endswith("norm.weight"):
            data = data + 1.0
        if ftype == "f16" and data.ndim == 2:
            data = data.astype(np.float16)
        w.add_tensor(gname, np.ascontiguousarray(data))
    rp = c.rope_parameters
    if rp.get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(rp, c.head_dim))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def logits_of(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].float().numpy()


def check_round_trip(path, model, model_type, prompts):
    """transformers' GGUF loader must give back the same weights and logits.

    A few hyper-parameters have no GGUF key (llama.cpp fixes them per
    architecture) or are not read by transformers' legacy GGUF config
    mapping; those alone are copied from the original config, after the
    ones the file does carry are compared."""
    orig = model.config
    cfg = AutoConfig.from_pretrained(os.path.dirname(path), gguf_file=path)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "vocab_size", "tie_word_embeddings", "max_position_embeddings"):
        assert getattr(cfg, key) == getattr(orig, key), (path, key, getattr(cfg, key), getattr(orig, key))
    assert abs(cfg.rms_norm_eps - orig.rms_norm_eps) < 1e-12 * 1e6, (path, cfg.rms_norm_eps)
    if model_type == "gemma3_text":
        assert cfg.sliding_window == orig.sliding_window
        assert cfg.layer_types == orig.layer_types
        assert cfg.head_dim == orig.head_dim
        assert cfg.rope_parameters["full_attention"]["rope_theta"] == orig.rope_parameters["full_attention"]["rope_theta"]
        assert cfg.rope_parameters["sliding_attention"]["rope_theta"] == orig.rope_parameters["sliding_attention"]["rope_theta"]
        cfg.query_pre_attn_scalar = orig.query_pre_attn_scalar  # no GGUF key
    else:
        assert cfg.rope_parameters["rope_theta"] == orig.rope_parameters["rope_theta"]
        if model_type == "qwen3":
            cfg.head_dim = orig.head_dim  # legacy mapping ignores key_length for qwen3
        if orig.rope_parameters.get("rope_type") == "llama3":
            cfg.rope_parameters = dict(orig.rope_parameters)  # carried as rope_freqs.weight
    back = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=path, config=cfg,
                                                dtype=torch.float32, attn_implementation="eager")
    back.eval()
    sd_a, sd_b = model.state_dict(), back.state_dict()
    assert sd_a.keys() == sd_b.keys(), (path, set(sd_a) ^ set(sd_b))
    for k in sd_a:
        assert torch.equal(sd_a[k], sd_b[k]), (path, k, (sd_a[k] - sd_b[k]).abs().max().item())
    for ids in prompts:
        a, b = logits_of(model, ids), logits_of(back, ids)
        assert np.array_equal(a, b) or np.abs(a - b).max() <= 1e-6 * np.abs(a).max(), (path, np.abs(a - b).max())


def check_tokenizer_loads(path):
    tok = transformers.AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=path)
    ids = tok("the General Public License", add_special_tokens=False)["input_ids"]
    assert len(ids) > 0 and max(ids) < VOCAB, (path, ids)
    return len(ids)


def main():
    os.makedirs(MODEL_DIR, exist_ok=True)
    os.makedirs(REF_DIR, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for seed, (name, (mtype, arch, cfg, ftype, tok_kind)) in enumerate(VARIANTS.items()):
            model = build_model(mtype, cfg, ftype, 1000 + seed)
            hf_dir = os.path.join(tmp, name)
            model.save_pretrained(hf_dir)  # the HF checkpoint the GGUF stands for
            rng = np.random.default_rng(2000 + seed)
            prompts = [rng.integers(0, VOCAB, n).tolist() for n in PROMPT_LENS]
            gpath = os.path.join(tmp, f"tiny_{name}.gguf")
            write_gguf(gpath, name, model, arch, ftype, tok_kind)
            check_round_trip(gpath, model, mtype, prompts)
            n_tok = check_tokenizer_loads(gpath)
            final = os.path.join(MODEL_DIR, f"tiny_{name}.gguf")
            shutil.copyfile(gpath, final)
            ref = {"n_prompts": np.int32(len(prompts)), "vocab": np.int32(VOCAB)}
            spreads = []
            for i, ids in enumerate(prompts):
                lg = logits_of(model, ids)
                ref[f"ids_{i}"] = np.array(ids, dtype=np.int32)
                ref[f"logits_{i}"] = lg.astype(np.float32)
                spreads.append(float(lg.std(axis=-1).mean()))
            np.savez_compressed(os.path.join(REF_DIR, f"tiny_{name}.npz"), **ref)
            print(f"tiny_{name}: {os.path.getsize(final)} bytes, round trip ok, "
                  f"tokenizer ok ({n_tok} ids), logit std {np.mean(spreads):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
