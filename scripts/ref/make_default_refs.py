#!/usr/bin/env python3
"""transformers' references for the two default models, read from their GGUF.

Run with the reference venv (torch, transformers, accelerate):
    .venv-ref/bin/python scripts/ref/make_default_refs.py [smollm2|gemma3 ...]

Each model is loaded with AutoModelForCausalLM.from_pretrained("models",
gguf_file=..., dtype=float32): transformers dequantizes every tensor with the
gguf package and runs in float32 (eager attention). The tokenizer is
AutoTokenizer from the same file; its ids are stored so wick and the
reference see identical input.

Written to tests/fixtures/ref/default_<model>.npz, for prompt i:
  text_i          the prompt text
  ids_i           int32 [n]        token ids (the HF tokenizer's; Gemma 3's start with <bos>)
  top1_i          int32 [n]        argmax of the logits at each position
  gap_i           float32 [n]      top-1 minus top-2 logit at each position
  top_ids_i       int32 [n, 32]    the 32 largest logits' ids, largest first
  top_logits_i    float32 [n, 32]  their logits
  full_pos_i      int32 [k]        positions whose whole logit vector is stored
  full_i          float16 [k, vocab]
  greedy_i        int32 [64]       greedy continuation (see below)
  greedy_gap_i    float32 [64]     top-1 minus top-2 logit at each greedy step
Full vectors: SmolLM2 (vocab 49152) for every position while the running
total stays within FULL_POSITIONS, then the last position only; Gemma 3
(vocab 262144) the last position of each prompt.

Greedy continuation: exactly 64 steps of argmax over the raw logits, the
end-of-sequence token treated like any other (nothing is suppressed and
generation does not stop), computed with the KV cache and then checked
against one cache-free forward over prompt + continuation.
"""

import os
import sys
import time

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REF_DIR = os.path.join(ROOT, "tests", "fixtures", "ref")
MODELS = {
    "smollm2": "smollm2-135m-instruct-q4_1.gguf",
    "gemma3": "gemma3-270m-q4_k_m.gguf",
}
N_GREEDY = 64
TOP_K = 32
FULL_POSITIONS = {"smollm2": 150, "gemma3": 0}

CHAT_USER = "Give me three short tips for sleeping better."
PROMPTS = [
    ("prose", "The old lighthouse keeper climbed the spiral stairs every evening, carrying "
              "a lantern and a thermos of tea. One night in November,"),
    ("question", "What is the capital of Australia, and why was it chosen instead of Sydney?"),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n"
             "        return n\n"),
    ("list", "Packing list for a weekend hike:\n1. water bottle\n2. rain jacket\n3."),
    ("french", "La tour Eiffel a été construite pour l'Exposition universelle de 1889. Elle"),
    ("japanese", "東京は日本の首都であり、"),
    ("math", "Q: A train travels at 60 miles per hour for 2.5 hours. How far does it go?\nA:"),
    ("json", '{"name": "wick", "language": "C11", "targets": ["x86-64", '),
    ("chat", None),  # the model's chat format, with its special tokens
]


def chat_text(name, tok):
    if name == "gemma3":
        # The Gemma 3 GGUF carries no chat template; this is Gemma's turn format.
        return f"<bos><start_of_turn>user\n{CHAT_USER}<end_of_turn>\n<start_of_turn>model\n"
    return tok.apply_chat_template([{"role": "user", "content": CHAT_USER}], tokenize=False,
                                   add_generation_prompt=True)


def encode(name, tok, kind, text):
    if kind == "chat":
        # the rendered template already holds any BOS
        return tok(text, add_special_tokens=False)["input_ids"]
    return tok(text)["input_ids"]


def forward(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids]), use_cache=False).logits[0].float()


def top2_gap(logits):
    v = torch.topk(logits, 2, dim=-1).values
    return (v[..., 0] - v[..., 1]).numpy().astype(np.float32)


def greedy(model, ids):
    toks, gaps = [], []
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        for _ in range(N_GREEDY):
            last = out.logits[0, -1].float()
            nxt = int(torch.argmax(last))
            toks.append(nxt)
            gaps.append(float(top2_gap(last)))
            out = model(torch.tensor([[nxt]]), past_key_values=out.past_key_values, use_cache=True)
    # The same sequence without the cache must give the same argmaxes.
    full = forward(model, ids + toks)
    again = torch.argmax(full[len(ids) - 1:-1], dim=-1).tolist()
    for step, (a, b) in enumerate(zip(toks, again)):
        if a != b:
            print(f"  note: cached/uncached argmax differ at step {step}: {a} vs {b} "
                  f"(gap {gaps[step]:.2e})")
    return np.array(toks, dtype=np.int32), np.array(gaps, dtype=np.float32)


def make(name):
    gguf_file = MODELS[name]
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, "models"), gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(os.path.join(ROOT, "models"), gguf_file=gguf_file,
                                                 dtype=torch.float32, attn_implementation="eager")
    model.eval()
    print(f"{name}: loaded in {time.time() - t0:.0f} s")
    ref = {"n_prompts": np.int32(len(PROMPTS)), "n_greedy": np.int32(N_GREEDY)}
    full_left = FULL_POSITIONS[name]
    for i, (kind, text) in enumerate(PROMPTS):
        if text is None:
            text = chat_text(name, tok)
        ids = encode(name, tok, kind, text)
        lg = forward(model, ids)
        top = torch.topk(lg, TOP_K, dim=-1)
        n = len(ids)
        if n <= full_left:
            pos = list(range(n))
            full_left -= n
        else:
            pos = [n - 1]
        g_ids, g_gaps = greedy(model, ids)
        ref.update({
            f"text_{i}": np.array(text), f"kind_{i}": np.array(kind),
            f"ids_{i}": np.array(ids, dtype=np.int32),
            f"top1_{i}": top.indices[:, 0].numpy().astype(np.int32),
            f"gap_{i}": top2_gap(lg),
            f"top_ids_{i}": top.indices.numpy().astype(np.int32),
            f"top_logits_{i}": top.values.numpy().astype(np.float32),
            f"full_pos_{i}": np.array(pos, dtype=np.int32),
            f"full_{i}": lg[pos].numpy().astype(np.float16),
            f"greedy_{i}": g_ids, f"greedy_gap_{i}": g_gaps,
        })
        cont = tok.decode(g_ids.tolist())
        print(f"  [{i}] {kind}: {n} ids, min gap prompt {top2_gap(lg).min():.2e} "
              f"greedy {g_gaps.min():.2e}, full {len(pos)} pos; -> {cont[:70]!r}")
    path = os.path.join(REF_DIR, f"default_{name}.npz")
    np.savez_compressed(path, **ref)
    print(f"{name}: {path} {os.path.getsize(path) / 1e6:.2f} MB, {time.time() - t0:.0f} s")


def main(argv):
    torch.set_num_threads(os.cpu_count() or 1)
    os.makedirs(REF_DIR, exist_ok=True)
    for name in argv or list(MODELS):
        make(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
