"""Rewrite a GGUF with some of its matrices requantized by wick's own quantizer.

    python bench/requant.py IN.gguf OUT.gguf --match ffn_down --type q2_k

Matrices whose name contains --match (and whose rows are a multiple of the
target block) are decoded to f32 by the `gguf` package's dequantizer and
quantized again by src/quant (compiled here into a small shared library);
every other tensor and every metadata entry is copied as it is. For accuracy
experiments on weight types a default model does not ship (bench/RESULTS.md:
the activation formats of Q2_K).
"""

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_rewrite import rewrite  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUANTIZERS = {"q2_k": (T.Q2_K, "wk_q2_k_quantize"), "q3_k": (T.Q3_K, "wk_q3_k_quantize"),
              "q4_k": (T.Q4_K, "wk_q4_k_quantize"), "q5_k": (T.Q5_K, "wk_q5_k_quantize"),
              "q6_k": (T.Q6_K, "wk_q6_k_quantize"), "iq4_nl": (T.IQ4_NL, "wk_iq4_nl_quantize"),
              "iq4_xs": (T.IQ4_XS, "wk_iq4_xs_quantize")}


def build_quantizer(tmp):
    lib = Path(tmp) / "libwkquant.so"
    srcs = sorted(str(p) for p in (ROOT / "src/quant").glob("*.c"))
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", str(ROOT / "src"), "-I",
                    str(ROOT / "include"), *srcs, "-o", str(lib), "-lm"], check=True)
    return ctypes.CDLL(str(lib))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--match", required=True, help="substring of the tensor names to requantize")
    ap.add_argument("--type", required=True, choices=sorted(QUANTIZERS))
    a = ap.parse_args()
    qtype, fn_name = QUANTIZERS[a.type]
    bs, ts = GGML_QUANT_SIZES[qtype]
    with tempfile.TemporaryDirectory() as tmp:
        fn = getattr(build_quantizer(tmp), fn_name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        done = 0

        def tensor(t):
            nonlocal done
            shape = [int(x) for x in reversed(t.shape.tolist())]  # rows first
            if a.match not in t.name or len(shape) != 2 or shape[-1] % bs:
                return t.data, t.tensor_type
            x = np.ascontiguousarray(quants.dequantize(t.data, t.tensor_type),
                                     dtype=np.float32).reshape(-1)
            out = np.empty(x.size // bs * ts, dtype=np.uint8)
            fn(x.ctypes.data, out.ctypes.data, x.size // bs)
            done += 1
            return out.reshape(shape[0], shape[-1] // bs * ts), qtype

        rewrite(a.src, a.dst, tensor=tensor)
    print(f"requantized {done} tensors to {a.type}", file=sys.stderr)


if __name__ == "__main__":
    main()
