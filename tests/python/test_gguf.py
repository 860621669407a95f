"""GGUF reader/writer against the independent `gguf` Python package.

(a) a file written by gguf.GGUFWriter is read by `wick inspect --json`;
(b) a file written by wick's writer (tests/unit/test_gguf.c with
    WICK_GGUF_OUT) is read by gguf.GGUFReader;
(c) both default models: `wick inspect --json` agrees with gguf.GGUFReader.
"""
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

ROOT = Path(__file__).resolve().parents[2]
MODELS = {
    "smollm2": ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf",
    "gemma3": ROOT / "models" / "gemma3-270m-q4_k_m.gguf",
}
SHORT_ARRAY = 16  # wick inspect --json prints arrays up to this length whole


def wick():
    path = os.environ.get("WICK")
    assert path and Path(path).is_file(), "set WICK=/abs/path/to/build/wick"
    return path


def inspect_json(path):
    out = subprocess.run([wick(), "inspect", str(path), "--json"], capture_output=True, check=True)
    return json.loads(out.stdout.decode("utf-8"))


# ---- values as the gguf package sees them (parsed from its field parts) ----

SCALAR_NP = {VT.UINT8, VT.INT8, VT.UINT16, VT.INT16, VT.UINT32, VT.INT32, VT.FLOAT32,
             VT.BOOL, VT.UINT64, VT.INT64, VT.FLOAT64}


def decode_parts(parts, i, vtype):
    """Rebuilds one value (nested arrays included) from GGUFReader field parts."""
    if vtype == VT.STRING:
        return bytes(parts[i + 1]).decode("utf-8"), i + 2
    if vtype in SCALAR_NP:
        v = parts[i].tolist()[0]
        return (bool(v) if vtype == VT.BOOL else v), i + 1
    assert vtype == VT.ARRAY
    itype, n = VT(int(parts[i][0])), int(parts[i + 1][0])
    i += 2
    out = []
    for _ in range(n):
        v, i = decode_parts(parts, i, itype)
        out.append(v)
    return out, i


def field_value(field):
    return decode_parts(field.parts, 3, field.types[0])[0]


def elem_type(field):
    """Innermost element type name as wick prints it."""
    return VT_NAMES[field.types[1]] if len(field.types) > 1 else None


VT_NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
            VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "str",
            VT.ARRAY: "arr", VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}


def same_value(ours, ref, vtype):
    """ours: from wick's JSON; ref: decoded by gguf."""
    if vtype == VT.FLOAT32:
        if isinstance(ours, str):  # "nan" / "inf"
            return np.isnan(ref) if ours == "nan" else float(ours) == ref
        return np.float32(ours) == np.float32(ref)
    if vtype == VT.FLOAT64:
        return float(ours) == ref
    return ours == ref


def check_metadata(meta, reader):
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert list(meta.keys()) == list(fields.keys())
    for key, f in fields.items():
        ours, vtype = meta[key], f.types[0]
        if vtype != VT.ARRAY:
            assert same_value(ours, field_value(f), vtype), key
            continue
        n = int(f.parts[4][0])  # parts: key length, key, type, element type, length, ...
        if n > SHORT_ARRAY:
            assert ours == {"type": elem_type(f), "len": n}, key
        else:
            check_array(ours, field_value(f), f.types[1:], key)


def check_array(ours, ref, types, key):
    if isinstance(ours, dict):
        assert ours == {"type": VT_NAMES[types[0]], "len": len(ref)}, key
        return
    assert len(ours) == len(ref), key
    for o, r in zip(ours, ref):
        if types[0] == VT.ARRAY:
            check_array(o, r, types[1:], key)
        else:
            assert same_value(o, r, types[0]), (key, o, r)


def check_tensors(tensors, reader):
    assert len(tensors) == len(reader.tensors)
    for ours, t in zip(tensors, reader.tensors):
        assert ours["name"] == t.name
        assert ours["type_id"] == int(t.tensor_type)
        assert ours["type"] == t.tensor_type.name.lower()
        assert ours["shape"] == [int(x) for x in t.shape]
        assert ours["offset"] == t.data_offset - reader.data_offset
        assert ours["bytes"] == t.n_bytes


# ---- (a) gguf.GGUFWriter -> wick inspect ----

PY_META = [  # key, value, type, array element type
    ("t.u8", 250, VT.UINT8, None), ("t.i8", -120, VT.INT8, None),
    ("t.u16", 65000, VT.UINT16, None), ("t.i16", -32000, VT.INT16, None),
    ("t.u32", 4294967295, VT.UINT32, None), ("t.i32", -2147483648, VT.INT32, None),
    ("t.f32", 0.1, VT.FLOAT32, None), ("t.bool", False, VT.BOOL, None),
    ("t.str", "tab\there \"q\" \\ \u00e9\u4e2d\U0001f600", VT.STRING, None),
    ("t.u64", 18446744073709551614, VT.UINT64, None),
    ("t.i64", -9223372036854775807, VT.INT64, None), ("t.f64", 1.0 / 3.0, VT.FLOAT64, None),
    ("t.arr.u8", [0, 7, 255], VT.ARRAY, VT.UINT8), ("t.arr.i16", [-5, 5], VT.ARRAY, VT.INT16),
    ("t.arr.u64", [2**64 - 1, 3], VT.ARRAY, VT.UINT64),
    ("t.arr.f64", [1e-300, -7.25], VT.ARRAY, VT.FLOAT64),
    ("t.arr.bool", [True, False, False], VT.ARRAY, VT.BOOL),
    ("t.arr.f32", [1.5, -0.2, 3e38], VT.ARRAY, VT.FLOAT32),
    ("t.arr.str", ["x", "", "\u00fc\u00f1\u00ef", "a\nb"], VT.ARRAY, VT.STRING),
    ("t.arr.long", list(range(-100, 100)), VT.ARRAY, VT.INT32),
    ("t.nest.i32", [[1, 2, 3], [4], [5, 6]], VT.ARRAY, None),
    ("t.nest.str", [["a", "bc"], ["d"]], VT.ARRAY, None),
    ("t.nest.deep", [[[1.5], [2.5, 3.5]], [[4.5]]], VT.ARRAY, None),
]


def write_py_file(path):
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_custom_alignment(64)
    for key, val, vt, sub in PY_META:
        w.add_key_value(key, val, vt, sub_type=sub)
    w.add_tensor("a.f32", rng.standard_normal((3, 8)).astype(np.float32))
    w.add_tensor("b.f16", rng.standard_normal((5,)).astype(np.float16))
    q8 = gguf.quants.quantize(rng.standard_normal((4, 64)).astype(np.float32), QT.Q8_0)
    w.add_tensor("c.q8_0", q8, raw_dtype=QT.Q8_0)
    q4k = rng.integers(0, 256, size=(2, 3, 144), dtype=np.uint8)  # 3 rows of 256 per slice
    w.add_tensor("d.q4_k", q4k, raw_dtype=QT.Q4_K)
    w.add_tensor("e.i32", rng.integers(-9, 9, size=(2, 1, 3, 4)).astype(np.int32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_py_file_read_by_wick(tmp_path):
    path = tmp_path / "py.gguf"
    write_py_file(path)
    ours = inspect_json(path)
    reader = gguf.GGUFReader(str(path))
    assert ours["version"] == 3 and ours["alignment"] == 64
    assert ours["data_offset"] == reader.data_offset
    meta = ours["metadata"]
    for key, val, vt, sub in PY_META:  # against the values handed to the writer
        if key == "t.arr.long":
            assert meta[key] == {"type": "i32", "len": 200}
        elif vt in (VT.FLOAT32,):
            assert np.float32(meta[key]) == np.float32(val)
        elif sub == VT.FLOAT32:
            assert [np.float32(x) for x in meta[key]] == [np.float32(x) for x in val]
        elif key == "t.nest.deep":
            assert meta[key] == [[[np.float32(x) for x in r] for r in q] for q in val]
        else:
            assert meta[key] == val, key
    check_metadata(meta, reader)
    check_tensors(ours["tensors"], reader)
    shapes = {t["name"]: (t["type"], t["shape"]) for t in ours["tensors"]}
    assert shapes == {"a.f32": ("f32", [8, 3]), "b.f16": ("f16", [5]), "c.q8_0": ("q8_0", [64, 4]),
                      "d.q4_k": ("q4_k", [256, 3, 2]), "e.i32": ("i32", [4, 3, 1, 2])}
    assert all(t["offset"] % 64 == 0 for t in ours["tensors"])


# ---- (b) wick's writer -> gguf.GGUFReader ----

def splitmix_bytes(state, n):
    mask = (1 << 64) - 1
    out = bytearray(n)
    for i in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out[i] = (z >> 24) & 0xFF
    return state, bytes(out)


C_META = {  # what tests/unit/test_gguf.c writes
    "general.architecture": "test", "general.alignment": 64,
    "t.u8": 200, "t.i8": -100, "t.u16": 60000, "t.i16": -30000, "t.u32": 4000000000,
    "t.i32": -2000000000, "t.f32": 3.25, "t.bool": True, "t.str": "h\u00e9llo \"wick\"\n",
    "t.u64": 2**64 - 1, "t.i64": -9000000000000000000, "t.f64": 2.718281828459045,
    "t.arr.u8": [1, 2, 255], "t.arr.i8": [-1, 0, 127, -128], "t.arr.u16": [0, 65535],
    "t.arr.i16": [-32768, 32767], "t.arr.u32": [0, 4294967295], "t.arr.i32": [-5, 7, 9],
    "t.arr.f32": [0.5, -1.5, float(np.float32(1e-6))], "t.arr.bool": [True, False, True],
    "t.arr.u64": [1, 2**63 + 5], "t.arr.i64": [-1, 2**62], "t.arr.f64": [1e300, -2.5],
    "t.arr.str": ["a", "", "\u00fcn\u00ef", "x y"], "t.arr.empty": [],
    "t.nest.i32": [[1, 2], [3], []], "t.nest.str": [["a", "bc"], ["d"]],
    "t.nest.deep": [[[1], [2, 3]], [[4]]],
}
C_TENSORS = [("f32.a", QT.F32, [7, 3]), ("f16.b", QT.F16, [5]), ("q8_0.c", QT.Q8_0, [64, 2]),
             ("q4_k.d", QT.Q4_K, [256, 2, 2]), ("q4_0.e", QT.Q4_0, [32, 1, 2, 3]),
             ("bf16.f", QT.BF16, [3, 5])]


def test_wick_file_read_by_gguf_py(tmp_path):
    exe = Path(wick()).parent / "test_gguf"
    assert exe.is_file(), f"{exe} missing: build the unit tests"
    out = tmp_path / "wick.gguf"
    subprocess.run([str(exe)], env={**os.environ, "WICK_GGUF_OUT": str(out)}, check=True,
                   capture_output=True)
    raw = out.read_bytes()
    assert raw[:4] == b"GGUF" and struct.unpack("<I", raw[4:8])[0] == 3
    reader = gguf.GGUFReader(str(out))
    got = {k: field_value(f) for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert list(got) == list(C_META)
    assert got == C_META
    assert reader.fields["t.nest.deep"].types == [VT.ARRAY, VT.ARRAY, VT.ARRAY, VT.INT16]
    assert reader.fields["t.u64"].types == [VT.UINT64]
    assert reader.data_offset % 64 == 0
    state = 42
    assert len(reader.tensors) == len(C_TENSORS)
    for t, (name, qt, shape) in zip(reader.tensors, C_TENSORS):
        assert (t.name, t.tensor_type, [int(x) for x in t.shape]) == (name, qt, shape)
        assert t.data_offset % 64 == 0
        state, expect = splitmix_bytes(state, t.n_bytes)
        assert t.data.tobytes() == expect, name


# ---- (c) the default models ----

@pytest.mark.parametrize("model", sorted(MODELS))
def test_default_model_matches_gguf_py(model):
    path = MODELS[model]
    assert path.is_file(), f"{path} missing"
    ours = inspect_json(model)  # resolved by tool_model_path
    reader = gguf.GGUFReader(str(path))
    assert ours["data_offset"] == reader.data_offset
    assert ours["file_size"] == path.stat().st_size
    check_metadata(ours["metadata"], reader)
    check_tensors(ours["tensors"], reader)


def test_bad_file_one_line_error(tmp_path):
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(MODELS["smollm2"].read_bytes()[:100000])
    r = subprocess.run([wick(), "inspect", str(bad)], capture_output=True)
    assert r.returncode == 1
    lines = r.stderr.decode().strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("wick inspect: gguf: "), lines
    assert "truncated" in lines[0] and "tokenizer.ggml" in lines[0]
    v1 = tmp_path / "v1.gguf"
    v1.write_bytes(b"GGUF" + struct.pack("<IIIII", 1, 0, 0, 0, 0))
    r = subprocess.run([wick(), "inspect", str(v1)], capture_output=True)
    assert r.returncode == 1 and "version 1" in r.stderr.decode()
