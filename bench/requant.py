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
from gguf import GGUFReader, GGUFValueType, GGUFWriter, quants
from gguf.constants import GGML_QUANT_SIZES

ROOT = Path(__file__).resolve().parents[1]
QUANTIZERS = {"q2_k": (T.Q2_K, "wk_q2_k_quantize"), "q3_k": (T.Q3_K, "wk_q3_k_quantize"),
              "q4_k": (T.Q4_K, "wk_q4_k_quantize"), "q5_k": (T.Q5_K, "wk_q5_k_quantize"),
              "q6_k": (T.Q6_K, "wk_q6_k_quantize")}


def build_quantizer(tmp):
    lib = Path(tmp) / "libwkquant.so"
    srcs = sorted(str(p) for p in (ROOT / "src/quant").glob("*.c"))
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", str(ROOT / "src"), "-I",
                    str(ROOT / "include"), *srcs, "-o", str(lib), "-lm"], check=True)
    return ctypes.CDLL(str(lib))


def copy_field(w, field):
    """One metadata entry from the reader to the writer, by its value type."""
    key, vt = field.name, field.types[0]
    if key.startswith("GGUF.") or key == "general.alignment":
        return
    if vt == GGUFValueType.ARRAY:
        sub = field.types[1] if len(field.types) > 1 else None
        if sub == GGUFValueType.STRING:
            vals = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        else:
            vals = [field.parts[i].tolist()[0] for i in field.data]
        w.add_array(key, vals)
    elif vt == GGUFValueType.STRING:
        w.add_string(key, bytes(field.parts[field.data[0]]).decode("utf-8"))
    else:
        w.add_key_value(key, field.parts[field.data[0]].tolist()[0], vt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--match", required=True, help="substring of the tensor names to requantize")
    ap.add_argument("--type", required=True, choices=sorted(QUANTIZERS))
    a = ap.parse_args()
    qtype, fn_name = QUANTIZERS[a.type]
    bs, ts = GGML_QUANT_SIZES[qtype]
    r = GGUFReader(a.src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = GGUFWriter(a.dst, arch)
    for field in r.fields.values():
        if field.name != "general.architecture":
            copy_field(w, field)
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_quantizer(tmp)
        fn = getattr(lib, fn_name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        done = 0
        for t in r.tensors:
            shape = [int(x) for x in reversed(t.shape.tolist())]  # rows first
            k = shape[-1]
            if a.match in t.name and k % bs == 0 and len(shape) == 2:
                x = np.ascontiguousarray(quants.dequantize(t.data, t.tensor_type),
                                         dtype=np.float32).reshape(-1)
                nb = x.size // bs
                out = np.empty(nb * ts, dtype=np.uint8)
                fn(x.ctypes.data, out.ctypes.data, nb)
                w.add_tensor(t.name, out.reshape(shape[0], k // bs * ts), raw_dtype=qtype)
                done += 1
            else:
                w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
        print(f"requantized {done} tensors to {a.type}", file=sys.stderr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
