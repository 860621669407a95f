#!/usr/bin/env python3
"""transformers' perplexity of the default models on tests/fixtures/text/ppl.txt.

Run with the reference venv:
    .venv-ref/bin/python scripts/ref/make_ppl_ref.py [smollm2|gemma3 ...]

ppl.txt is /usr/share/common-licenses/GPL-3, copied verbatim (the license
allows verbatim copies only, so it is not cut).

Definition (the same as `wick perplexity -m MODEL -f FILE -c CTX`):
  tokens = encode(whole text, add_special=false, parse_special=false);
  chunks of L = CTX consecutive text tokens, a final partial chunk dropped;
  input of a chunk = ([BOS] if the tokenizer declares add_bos_token else [])
  + its L text tokens; every input token with a preceding token in the input
  is scored by its NLL given its prefix; chunks are independent;
  perplexity = exp(mean NLL over all scored tokens).
Each value is given for all chunks and for the first FIRST_CHUNKS chunks
(what `--chunks N` would evaluate), so CI can run the bigger model on a part.

Output: tests/fixtures/ref/ppl.json.
"""

import json
import math
import os
import shutil
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE = "/usr/share/common-licenses/GPL-3"
TEXT = os.path.join(ROOT, "tests", "fixtures", "text", "ppl.txt")
OUT = os.path.join(ROOT, "tests", "fixtures", "ref", "ppl.json")
MODELS = {
    "smollm2": "smollm2-135m-instruct-q4_1.gguf",
    "gemma3": "gemma3-270m-q4_k_m.gguf",
}
CTX = 512
FIRST_CHUNKS = 8


def text_tokens(tok, text):
    # parse_special=false: special-token text stays plain text
    return tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def chunk_nll(model, inp):
    with torch.no_grad():
        logits = model(torch.tensor([inp]), use_cache=False).logits[0].double()
    logp = torch.log_softmax(logits[:-1], dim=-1)
    target = torch.tensor(inp[1:])
    return float(-logp[torch.arange(len(target)), target].sum()), len(target)


def measure(name, text):
    gguf_file = MODELS[name]
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, "models"), gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(os.path.join(ROOT, "models"), gguf_file=gguf_file,
                                                 dtype=torch.float32, attn_implementation="eager")
    model.eval()
    ids = text_tokens(tok, text)
    add_bos = bool(getattr(tok, "add_bos_token", False))
    bos = [tok.bos_token_id] if add_bos else []
    n_chunks = len(ids) // CTX
    chunks = []
    for c in range(n_chunks):
        nll, n = chunk_nll(model, bos + ids[c * CTX:(c + 1) * CTX])
        chunks.append({"nll_sum": nll, "scored": n})
        print(f"  {name} chunk {c}: mean nll {nll / n:.4f}")

    def ppl(cs):
        return math.exp(sum(c["nll_sum"] for c in cs) / sum(c["scored"] for c in cs))

    res = {
        "gguf": f"models/{gguf_file}", "n_text_tokens": len(ids), "add_bos": add_bos,
        "bos_id": bos[0] if bos else None, "first_ids": ids[:16],
        "n_chunks": n_chunks, "scored": sum(c["scored"] for c in chunks), "perplexity": ppl(chunks),
        "first_chunks": {"n_chunks": FIRST_CHUNKS,
                         "scored": sum(c["scored"] for c in chunks[:FIRST_CHUNKS]),
                         "perplexity": ppl(chunks[:FIRST_CHUNKS])},
        "chunk_mean_nll": [c["nll_sum"] / c["scored"] for c in chunks],
    }
    print(f"{name}: {len(ids)} tokens, {n_chunks} chunks, ppl {res['perplexity']:.4f}, "
          f"first {FIRST_CHUNKS}: {res['first_chunks']['perplexity']:.4f} ({time.time() - t0:.0f} s)")
    return res


def main(argv):
    torch.set_num_threads(os.cpu_count() or 1)
    os.makedirs(os.path.dirname(TEXT), exist_ok=True)
    if not os.path.exists(TEXT):
        shutil.copyfile(SOURCE, TEXT)
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    doc = {}
    if os.path.exists(OUT):
        with open(OUT, encoding="utf-8") as f:
            doc = json.load(f)
    doc.update({"text": "tests/fixtures/text/ppl.txt", "ctx": CTX,
                "definition": "exp(mean NLL); chunks of ctx text tokens, partial dropped; "
                              "[BOS]+chunk if add_bos_token; every token with a prefix scored"})
    doc.setdefault("models", {})
    for name in argv or list(MODELS):
        doc["models"][name] = measure(name, text)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
