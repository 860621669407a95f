#!/usr/bin/env python3
"""What rounding each matrix's input does to the default models' logits.

The CUDA matrix-vector kernels round x per 32 values before their integer
dot products: to 16 bits (max|x| / 16383, the default since session 14) or,
before that, to 8 (max|x| / 127). This study runs a float64 numpy forward of
the two default models (weights dequantized by the gguf package; it follows
the architectures as src/model/model.c describes them). It first checks
that forward against the transformers reference in
tests/fixtures/ref/default_<model>.npz (the top-1 token at every position,
and the largest logits). Then it rounds the inputs of chosen matrix roles as
the kernels do, and reports the logits' cosine against the unrounded forward
and the top-1 agreement:
  qkv (attention input), o (attention output), gate_up (FFN input), down
  (the gated unit's output), out (the final norm's output into the output
  matrix).
The question it answers: whether 8-bit x for some roles would keep the
parity bar (cosine >= 0.999, top-1 >= 99%) that 8-bit x everywhere broke on
Gemma 3.

    .venv/bin/python bench/act_rounding.py [smollm2] [gemma3]
"""
import sys
import numpy as np
from gguf import GGUFReader, quants

MODELS = {"smollm2": "models/smollm2-135m-instruct-q4_1.gguf",
          "gemma3": "models/gemma3-270m-q4_k_m.gguf"}
ROLES = ("qkv", "o", "gate_up", "down", "out")
CONFIGS = [("16-bit everywhere (the CUDA default)", {r: 16383 for r in ROLES}),
           ("8-bit everywhere (before session 14)", {r: 127 for r in ROLES}),
           ("8-bit but down (16-bit)", {**{r: 127 for r in ROLES}, "down": 16383}),
           ("8-bit qkv, gate_up; 16-bit o, down, out",
            {"qkv": 127, "gate_up": 127, "o": 16383, "down": 16383, "out": 16383}),
           ("8-bit down only", {**{r: 16383 for r in ROLES}, "down": 127})]


class Model:
    def __init__(self, path):
        r = GGUFReader(path)
        self.arch = self.field(r, "general.architecture")
        a = self.arch
        self.dim = int(self.field(r, f"{a}.embedding_length"))
        self.n_layers = int(self.field(r, f"{a}.block_count"))
        self.n_heads = int(self.field(r, f"{a}.attention.head_count"))
        self.n_kv = int(self.field(r, f"{a}.attention.head_count_kv"))
        self.hd = int(self.field(r, f"{a}.attention.key_length", self.dim // self.n_heads))
        self.eps = float(self.field(r, f"{a}.attention.layer_norm_rms_epsilon"))
        self.base = float(self.field(r, f"{a}.rope.freq_base", 10000.0))
        self.window = int(self.field(r, f"{a}.attention.sliding_window", 0))
        self.t = {}
        for t in r.tensors:
            w = quants.dequantize(t.data, t.tensor_type)
            self.t[t.name] = np.asarray(w, dtype=np.float64).reshape([int(v) for v in t.shape[::-1]])
        self.gemma = a == "gemma3"

    @staticmethod
    def field(r, key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        v = f.parts[f.data[0]]
        return bytes(v).decode() if v.dtype == np.uint8 else v[0]

    def layer_rope(self, il):
        if self.gemma and (il + 1) % 6 != 0:  # local layers: RoPE base 10000, sliding window
            return 10000.0, self.window
        return self.base, 0


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rnd(x, levels):
    # x rounded per 32 values of its last axis as the kernels do: d = max|x| / levels.
    if not levels:
        return x
    g = x.reshape(*x.shape[:-1], -1, 32)
    d = np.abs(g).max(axis=-1, keepdims=True) / levels
    q = np.where(d > 0, np.rint(g / np.where(d > 0, d, 1)), 0)
    return (q * d).reshape(x.shape)


def rope(x, pos, base, neox):
    hd = x.shape[-1]
    f = base ** (-2.0 * np.arange(hd // 2) / hd)
    th = pos[:, None] * f[None, :]
    c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
    if neox:
        a, b = x[..., :hd // 2], x[..., hd // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    y = np.empty_like(x)
    y[..., 0::2], y[..., 1::2] = a * c - b * s, a * s + b * c
    return y


def forward(M, ids, lv):
    # Logits [n, vocab] of the prompt ids; lv: levels of each role's x rounding.
    n = len(ids)
    pos = np.arange(n, dtype=np.float64)
    E = M.t["token_embd.weight"]
    h = E[ids] * (np.sqrt(M.dim) if M.gemma else 1.0)
    mm = lambda role, W, x: rnd(x, lv.get(role)) @ W.T
    G = M.n_heads // M.n_kv
    for il in range(M.n_layers):
        T = lambda name: M.t[f"blk.{il}.{name}.weight"]
        x = rmsnorm(h, T("attn_norm"), M.eps)
        q = mm("qkv", T("attn_q"), x).reshape(n, M.n_heads, M.hd)
        k = mm("qkv", T("attn_k"), x).reshape(n, M.n_kv, M.hd)
        v = mm("qkv", T("attn_v"), x).reshape(n, M.n_kv, M.hd)
        if M.gemma:
            q, k = rmsnorm(q, T("attn_q_norm"), M.eps), rmsnorm(k, T("attn_k_norm"), M.eps)
        base, window = M.layer_rope(il)
        q, k = rope(q, pos, base, M.gemma), rope(k, pos, base, M.gemma)
        mask = np.tril(np.ones((n, n), dtype=bool))
        if window:
            mask &= (np.arange(n)[:, None] - np.arange(n)[None, :]) < window
        o = np.empty((n, M.n_heads, M.hd))
        for hh in range(M.n_heads):
            s = q[:, hh] @ k[:, hh // G].T / np.sqrt(M.hd)
            s = np.where(mask, s, -np.inf)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            o[:, hh] = (p / p.sum(axis=1, keepdims=True)) @ v[:, hh // G]
        a = mm("o", T("attn_output"), o.reshape(n, -1))
        h = h + (rmsnorm(a, T("post_attention_norm"), M.eps) if M.gemma else a)
        x = rmsnorm(h, T("ffn_norm"), M.eps)
        g, u = mm("gate_up", T("ffn_gate"), x), mm("gate_up", T("ffn_up"), x)
        if M.gemma:
            g = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)))
        else:
            g = g / (1 + np.exp(-g))
        y = mm("down", T("ffn_down"), g * u)
        h = h + (rmsnorm(y, T("post_ffw_norm"), M.eps) if M.gemma else y)
    x = rmsnorm(h, M.t["output_norm.weight"], M.eps)
    return mm("out", M.t.get("output.weight", E), x)


def main(names):
    for name in names:
        M = Model(MODELS[name])
        ref = np.load(f"tests/fixtures/ref/default_{name}.npz")
        prompts = sorted(int(k[4:]) for k in ref.files if k.startswith("ids_"))
        exact = {i: forward(M, ref[f"ids_{i}"].astype(np.int64), {}) for i in prompts}
        # The forward against transformers: top-1 at every position (near ties, gap < 0.05,
        # excepted) and the largest logit.
        agree = total = 0
        dmax = 0.0
        for i in prompts:
            top1, gap = ref[f"top1_{i}"], ref[f"gap_{i}"]
            mine = exact[i].argmax(axis=1)
            ok = (mine == top1) | (gap < 0.05)
            agree += int(ok.sum())
            total += len(top1)
            dmax = max(dmax, float(np.abs(exact[i].max(axis=1) - ref[f"top_logits_{i}"][:, 0]).max()))
        print(f"{name}: numpy forward against transformers: top-1 {agree}/{total} positions "
              f"(near ties excepted), largest logit within {dmax:.2e}")
        if agree != total or dmax > 2e-2:
            print(f"{name}: FORWARD DIFFERS from the reference: no study")
            continue
        for label, lv in CONFIGS:
            cmin, same, n = 1.0, 0, 0
            for i in prompts:
                y, e = forward(M, ref[f"ids_{i}"].astype(np.int64), lv), exact[i]
                c = (y * e).sum(axis=1) / np.sqrt((y * y).sum(axis=1) * (e * e).sum(axis=1))
                cmin = min(cmin, float(c.min()))
                same += int((y.argmax(axis=1) == e.argmax(axis=1)).sum())
                n += len(e)
            print(f"{name}: {label:42s} min cosine {cmin:.6f}, top-1 {100.0 * same / n:6.2f}%")


if __name__ == "__main__":
    main(sys.argv[1:] or list(MODELS))
