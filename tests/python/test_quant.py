"""Reference tests of src/quant against independent implementations.

The quant sources are compiled into a small shared library (no CMake needed)
and called through ctypes. Ground truth:
  * gguf.quants (numpy) dequantize: must be BIT-EXACT on random blocks;
  * gguf.quants quantize where the package implements it: BYTE-IDENTICAL;
    elsewhere the error must stay within the format's bound, measured with
    gguf's own dequantizer;
  * FP8 and Q8_K (which gguf does not decode): numpy implementations written
    here from the format definitions, plus numpy's own float16 decoder for
    FP8 E5M2 (an E5M2 code is the top byte of an IEEE half).
"""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import quants  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FP8_E4M3, FP8_E5M2 = 1001, 1002

# Byte offsets of the f16 scale fields of each block type; random bytes
# elsewhere, sane finite halves here, so every dequantized value is finite.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
    T.Q6_K: [208], T.IQ4_NL: [0], T.IQ4_XS: [0],
}
FLOAT_TYPES = [T.F32, T.F16, T.BF16]
GGUF_DEQUANT_TYPES = FLOAT_TYPES + list(F16_FIELDS)
ALL_TYPES = GGUF_DEQUANT_TYPES + [T.Q8_K, FP8_E4M3, FP8_E5M2]

# Relative RMSE bound (RMS of the error over RMS of the data) on Gaussian
# rows. A uniform quantizer with step D has RMS error D / sqrt(12); for b bits
# over a block's range (about +-2.5 sigma for 32 values, +-2.2 for 16) that is
# roughly 5 sigma / (2^b - 1) / 3.46. Estimates: 4-bit 0.09, 5-bit 0.045,
# 6-bit 0.022, 8-bit 0.006 (0.008 for 256-value Q8_K blocks, amax about 3 sigma), 2-bit (affine, 16 values) 0.35, 3-bit 0.18; the
# least-squares K-quant fits and non-linear IQ4 levels do a little better.
# Bounds are these estimates with about 25% headroom (plus the f16 scale
# rounding for the small errors), measured values are printed.
RMSE_BOUND = {
    T.F32: 0.0, T.F16: 5e-4, T.BF16: 4e-3,
    T.Q4_0: 0.12, T.Q4_1: 0.11, T.Q5_0: 0.06, T.Q5_1: 0.055, T.Q8_0: 0.008,
    T.Q2_K: 0.40, T.Q3_K: 0.20, T.Q4_K: 0.10, T.Q5_K: 0.05, T.Q6_K: 0.025,
    T.Q8_K: 0.01, T.IQ4_NL: 0.11, T.IQ4_XS: 0.11,
    FP8_E4M3: 0.04, FP8_E5M2: 0.08,
}


def type_id(t):
    return int(t)


def type_name(t):
    return {FP8_E4M3: "FP8_E4M3", FP8_E5M2: "FP8_E5M2"}.get(t) or T(t).name


def block_shape(t):
    if t in (FP8_E4M3, FP8_E5M2):
        return 128, 132
    return GGML_QUANT_SIZES[T(t)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("wkq") / "libwkq.so"
    # src/quant needs only header-only parts of src/base (fp.h) and wick.h
    srcs = sorted(str(p) for p in (ROOT / "src/quant").glob("*.c"))
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-std=c11", "-D_GNU_SOURCE", "-O2", "-ffp-contract=off", "-shared", "-fPIC",
           "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
           "-I", str(ROOT / "src"), "-I", str(ROOT / "include"), *srcs, "-o", str(out),
           "-lm"]
    subprocess.run(cmd, check=True)
    so = ctypes.CDLL(str(out))
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    so.wk_dequantize_row.argtypes = [ctypes.c_int, vp, vp, i64]
    so.wk_quantize_row.argtypes = [ctypes.c_int, vp, vp, i64]
    so.wk_dot_row.argtypes = [ctypes.c_int, vp, vp, i64]
    so.wk_dot_row.restype = ctypes.c_float
    for f in ("wk_fp8_e4m3_to_f32", "wk_fp8_e5m2_to_f32"):
        getattr(so, f).argtypes = [ctypes.c_uint8]
        getattr(so, f).restype = ctypes.c_float
    for f in ("wk_f32_to_fp8_e4m3", "wk_f32_to_fp8_e5m2"):
        getattr(so, f).argtypes = [ctypes.c_float]
        getattr(so, f).restype = ctypes.c_uint8
    return so


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def wk_dequantize(lib, t, data, n):
    out = np.full(n + 16, np.nan, dtype=np.float32)  # poisoned, with a tail
    st = lib.wk_dequantize_row(type_id(t), ptr(data), ptr(out), n)
    assert st == 0, f"{type_name(t)}: wk_dequantize_row returned {st}"
    assert np.all(np.isnan(out[n:])), f"{type_name(t)}: wrote past the row end"
    return out[:n]


def wk_quantize(lib, t, x):
    bs, ts = block_shape(t)
    nbytes = x.size // bs * ts
    out = np.full(nbytes + 16, 0xA5, dtype=np.uint8)
    st = lib.wk_quantize_row(type_id(t), ptr(np.ascontiguousarray(x, dtype=np.float32)),
                             ptr(out), x.size)
    assert st == 0, f"{type_name(t)}: wk_quantize_row returned {st}"
    assert np.all(out[nbytes:] == 0xA5), f"{type_name(t)}: wrote past the row end"
    return out[:nbytes]


def random_halves(rng, n):
    """Finite f16 scales: magnitudes 1e-4..10, some zeros and subnormals."""
    mag = 10.0 ** rng.uniform(-4, 1, n)
    kind = rng.random(n)
    mag = np.where(kind < 0.03, 0.0, mag)
    mag = np.where((kind >= 0.03) & (kind < 0.06), rng.uniform(0, 6e-5, n), mag)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float16)


def random_blocks(rng, t, nblocks):
    bs, ts = block_shape(t)
    b = rng.integers(0, 256, size=(nblocks, ts), dtype=np.uint8)
    for off in F16_FIELDS.get(t, []):
        b[:, off:off + 2] = random_halves(rng, nblocks).view(np.uint8).reshape(nblocks, 2)
    if t == T.Q8_K:
        d = (rng.standard_normal(nblocks) * 1e-2).astype(np.float32)
        b[:, 0:4] = d.view(np.uint8).reshape(nblocks, 4)
    if t in (FP8_E4M3, FP8_E5M2):
        d = (10.0 ** rng.uniform(-6, 1, nblocks)).astype(np.float32)
        b[:, 0:4] = d.view(np.uint8).reshape(nblocks, 4)
    return b.reshape(-1)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


# ---- independent numpy decoders for what gguf does not cover ----------------

def np_fp8_e4m3(codes):
    c = codes.astype(np.int64)
    e, m = (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (8 + m) * 2.0 ** (e - 10.0))
    return np.where(c & 0x80, -mag, mag).astype(np.float32)


def np_fp8_e5m2(codes):
    c = codes.astype(np.int64)
    e, m = (c >> 2) & 31, c & 3
    with np.errstate(invalid="ignore"):
        mag = np.where(e == 0, m * 2.0 ** -16, (4 + m) * 2.0 ** (e - 17.0))
        mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
    return np.where(c & 0x80, -mag, mag).astype(np.float32)


def np_fp8_blocks(data, dec):
    b = data.reshape(-1, 132)
    d = b[:, :4].copy().view(np.float32)
    return (d * dec(b[:, 4:])).reshape(-1)


def np_q8_k_blocks(data):
    b = data.reshape(-1, 292)
    d = b[:, :4].copy().view(np.float32)
    return (d * b[:, 4:260].copy().view(np.int8).astype(np.float32)).reshape(-1)


def reference_dequantize(t, data):
    if t == FP8_E4M3:
        return np_fp8_blocks(data, np_fp8_e4m3)
    if t == FP8_E5M2:
        return np_fp8_blocks(data, np_fp8_e5m2)
    if t == T.Q8_K:
        return np_q8_k_blocks(data)
    return quants.dequantize(data, T(t)).reshape(-1)


def np_fp8_encode(x, table_codes, table_vals):
    """Nearest code by exhaustive search, ties to the even code."""
    a = np.abs(x).astype(np.float64)[:, None]
    dist = np.abs(a - table_vals[None, :].astype(np.float64))
    best = dist.min(axis=1, keepdims=True)
    cand = np.where(dist == best, table_codes[None, :], 1 << 20)
    even = np.where(cand % 2 == 0, cand, 1 << 20).min(axis=1)
    code = np.where(even < (1 << 20), even, cand.min(axis=1))
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def np_q8_k_quantize(x):
    """GGML's Q8_K reference algorithm, in numpy."""
    blocks = x.reshape(-1, 256).astype(np.float32)
    out = np.zeros((blocks.shape[0], 292), dtype=np.uint8)
    for i, b in enumerate(blocks):
        j = int(np.argmax(np.abs(b)))
        v = b[j]
        if v == 0:
            continue
        iscale = np.float32(-127) / v
        q = np.minimum(np.rint(iscale * b), 127).astype(np.int8)
        out[i, :4] = np.array([np.float32(1) / iscale], np.float32).view(np.uint8)
        out[i, 4:260] = q.view(np.uint8)
        sums = q.astype(np.int16).reshape(16, 16).sum(axis=1).astype(np.int16)
        out[i, 260:] = sums.view(np.uint8)
    return out.reshape(-1)


# ---- data ----------------------------------------------------------------

NCOLS = 4096


def gaussian_rows(rng, nrows):
    """Normal rows with scales 1e-3..1e3 (no outliers)."""
    scale = 10.0 ** rng.uniform(-3, 3, (nrows, 1))
    return (rng.standard_normal((nrows, NCOLS)) * scale).astype(np.float32)


def hard_rows(rng):
    """Rows with outliers, heavy tails, constant and zero blocks, tiny scales."""
    rows = []
    for _ in range(8):  # sparse outliers at 20..100 sigma
        r = rng.standard_normal(NCOLS) * 10.0 ** rng.uniform(-2, 2)
        idx = rng.choice(NCOLS, 6, replace=False)
        r[idx] *= rng.uniform(20, 100, 6) * rng.choice([-1, 1], 6)
        rows.append(r)
    rows.append(rng.standard_t(2, NCOLS))
    rows.append(rng.uniform(-1, 3, NCOLS))
    r = rng.standard_normal(NCOLS)
    r[0:32] = 0.0                       # one all-zero block among random ones
    r[32:64] = 1.5                      # a constant block
    r[64:96] = -0.25                    # a negative constant block
    r[256:288] = rng.standard_normal(32) * 1e-6   # scale in f16's subnormal range
    rows.append(r)
    rows.append(rng.standard_normal(NCOLS) * 1e-6)
    rows.append(rng.standard_normal(NCOLS) + 40.0)  # large offset (for the _1 kinds)
    return np.array(rows, dtype=np.float32)


# ---- tests -----------------------------------------------------------------

def test_type_table_sizes(lib):
    class Info(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char_p), ("block", ctypes.c_int),
                    ("bytes", ctypes.c_int), ("computable", ctypes.c_bool)]
    lib.wk_type_get.argtypes = [ctypes.c_int]
    lib.wk_type_get.restype = ctypes.POINTER(Info)
    checked = 0
    for t, (bs, ts) in GGML_QUANT_SIZES.items():
        p = lib.wk_type_get(int(t))
        if not p:
            continue
        got = (p.contents.block, p.contents.bytes)
        if t == T.Q8_1 and got == (32, 36):
            # gguf-py still lists the old f32 layout (40 B); GGML's block_q8_1
            # is two f16 + 32 int8 = 36 B. Q8_1 never appears in model files.
            print("Q8_1: table has 36 B (GGML's current layout), gguf-py says 40 B")
            continue
        assert got == (bs, ts), f"{t.name}: table says {got}, gguf says {(bs, ts)}"
        checked += 1
    assert checked >= 25


@pytest.mark.parametrize("t", ALL_TYPES, ids=type_name)
def test_dequantize_bit_exact(lib, t):
    rng = np.random.default_rng(1000 + type_id(t))
    bs, ts = block_shape(t)
    nblocks = 8192 if bs == 1 else 4096 if bs <= 128 else 2048
    data = random_blocks(rng, t, nblocks)
    got = wk_dequantize(lib, t, data, nblocks * bs)
    want = reference_dequantize(t, data)
    assert want.dtype == np.float32 and want.size == got.size
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    if t in FLOAT_TYPES + [FP8_E5M2]:  # random bits include NaNs: equal if both NaN
        bad = bad[~(np.isnan(got[bad]) & np.isnan(want[bad]))]
    else:
        assert np.all(np.isfinite(got)), "sane scales must give finite values"
    print(f"{type_name(t)}: {nblocks} random blocks, {got.size} values, {bad.size} differ")
    assert bad.size == 0, (f"{type_name(t)}: {bad.size} values differ, first at {bad[0]}: "
                           f"wick {got[bad[0]]!r} vs reference {want[bad[0]]!r}")


def relative_rmse(x, y):
    return float(np.sqrt(np.mean((x.astype(np.float64) - y) ** 2) / np.mean(x.astype(np.float64) ** 2)))


@pytest.mark.parametrize("t", ALL_TYPES, ids=type_name)
def test_quantize(lib, t):
    rng = np.random.default_rng(2000 + type_id(t))
    normal = gaussian_rows(rng, 48)
    hard = hard_rows(rng)
    x = np.concatenate([normal, hard])
    ours = wk_quantize(lib, t, x)

    # 1. byte-identical where an independent quantizer exists
    ref = None
    if t == T.Q8_K:
        ref, who = np_q8_k_quantize(x), "numpy Q8_K reference"
    elif t in (FP8_E4M3, FP8_E5M2):
        ref, who = np_fp8_quantize(x, t), "numpy FP8 reference"
    else:
        try:
            ref, who = quants.quantize(x, T(t)).reshape(-1).view(np.uint8), "gguf.quants"
        except NotImplementedError as e:
            print(f"{type_name(t)}: no byte comparison: gguf raises NotImplementedError ({e}); "
                  "checking the error bound only")
    if ref is not None:
        assert ref.size == ours.size
        bad = np.flatnonzero(ref != ours)
        print(f"{type_name(t)}: {x.size} values ({x.size // block_shape(t)[0]} blocks) "
              f"vs {who}: {bad.size} bytes differ")
        assert bad.size == 0, f"{type_name(t)}: first differing byte {bad[0]}: {ours[bad[0]]} vs {ref[bad[0]]}"

    # 2. error bound, decoded by the independent decoder
    deq = reference_dequantize(t, ours).reshape(x.shape)
    assert np.all(np.isfinite(deq))
    errs = [relative_rmse(x[i], deq[i]) for i in range(len(normal))]
    worst, mean = max(errs), float(np.mean(errs))
    print(f"{type_name(t)}: relative RMSE on {len(normal)} Gaussian rows: mean {mean:.5f} "
          f"worst {worst:.5f} (bound {RMSE_BOUND[t]})")
    assert worst <= RMSE_BOUND[t]
    # outliers, heavy tails, offsets: the error of each block relative to its
    # largest magnitude obeys the same bound (the rows with 1e-6 scales, where
    # the f16 scale itself is subnormal, are there for the byte comparison only)
    sel = [*range(10), 12]
    bs = max(block_shape(t)[0], 32)
    xb = hard[sel].reshape(-1, bs).astype(np.float64)
    eb = deq[len(normal):][sel].reshape(-1, bs) - xb
    ratio = np.sqrt(np.mean(eb ** 2, axis=1)) / np.abs(xb).max(axis=1)
    print(f"{type_name(t)}: hard rows: worst block RMSE / block max {ratio.max():.5f}")
    assert ratio.max() <= RMSE_BOUND[t]


def np_fp8_quantize(x, t):
    fmax, dec = (448.0, np_fp8_e4m3) if t == FP8_E4M3 else (57344.0, np_fp8_e5m2)
    codes = np.arange(0x7f if t == FP8_E4M3 else 0x7c, dtype=np.int64)  # finite, >= 0
    vals = dec(codes)
    blocks = x.reshape(-1, 128).astype(np.float32)
    out = np.zeros((blocks.shape[0], 132), dtype=np.uint8)
    d = (np.abs(blocks).max(axis=1) / np.float32(fmax)).astype(np.float32)
    out[:, :4] = d.view(np.uint8).reshape(-1, 4)
    safe = np.where(d > 0, d, np.float32(1))[:, None]
    scaled = (blocks / safe).astype(np.float32)
    q = np_fp8_encode(scaled.reshape(-1), codes, vals).reshape(blocks.shape)
    out[:, 4:] = np.where(d[:, None] > 0, q, 0)
    return out.reshape(-1)


@pytest.mark.parametrize("t", ALL_TYPES, ids=type_name)
def test_dot(lib, t):
    """wk_dot_row against sum(gguf dequant * x) in float64, within 1e-6 of sum |a x|."""
    rng = np.random.default_rng(3000 + type_id(t))
    bs, ts = block_shape(t)
    n = 4096
    for trial in range(20):
        # odd trials: random blocks (not for the float types, whose random bits
        # hold NaN and inf); even trials: our quantization of normal data
        if trial % 2 and t not in FLOAT_TYPES:
            data = random_blocks(rng, t, n // bs)
            if t == FP8_E5M2:  # no inf / NaN codes here
                codes = data.reshape(-1, 132)[:, 4:]
                codes[(codes & 0x7c) == 0x7c] &= 0xbf
        else:
            w = rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 2)
            data = wk_quantize(lib, t, w.astype(np.float32))
        x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 2)).astype(np.float32)
        deq = reference_dequantize(t, data).astype(np.float64)
        want = float(np.dot(deq, x.astype(np.float64)))
        mag = float(np.dot(np.abs(deq), np.abs(x.astype(np.float64))))
        got = lib.wk_dot_row(type_id(t), ptr(data), ptr(x), n)
        assert abs(got - want) <= 1e-6 * mag + 1e-30, f"trial {trial}: {got} vs {want} (scale {mag})"


MODELS = ["models/smollm2-135m-instruct-q4_1.gguf", "models/gemma3-270m-q4_k_m.gguf"]


def gguf_tensor_table(path):
    """(name, type, ne0, n_values, offset) of every tensor of a GGUF file.

    A minimal header walk (gguf.GGUFReader takes tens of seconds on a
    262k-token vocabulary); the tensor bytes are then read with numpy."""
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    pos = 0

    def take(fmt_dtype, count=1):
        nonlocal pos
        v = np.frombuffer(buf, dtype=fmt_dtype, count=count, offset=pos)
        pos += v.nbytes
        return v

    def u32():
        return int(take("<u4")[0])

    def u64():
        return int(take("<u8")[0])

    def string():
        nonlocal pos
        n = u64()
        s = bytes(buf[pos:pos + n]).decode("utf-8", "replace")
        pos += n
        return s

    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(vt):
        nonlocal pos
        if vt == 8:
            string()
        elif vt == 9:
            et, n = u32(), u64()
            if et in scalar:
                pos += scalar[et] * n
            else:
                for _ in range(n):
                    skip_value(et)
        else:
            pos += scalar[vt]

    assert bytes(buf[:4]) == b"GGUF"
    pos = 8
    n_tensors, n_kv = u64(), u64()
    alignment = 32
    for _ in range(n_kv):
        key, vt = string(), u32()
        if key == "general.alignment" and vt == 4:
            alignment = u32()
        else:
            skip_value(vt)
    infos = []
    for _ in range(n_tensors):
        name, nd = string(), u32()
        dims = [u64() for _ in range(nd)]
        qt, off = u32(), u64()
        infos.append((name, T(qt), dims[0], int(np.prod(dims)), off))
    base = (pos + alignment - 1) // alignment * alignment
    return buf, [(n, qt, ne0, nv, base + off) for n, qt, ne0, nv, off in infos]


@pytest.mark.parametrize("path", MODELS, ids=lambda p: Path(p).stem)
def test_real_model_tensors(lib, path):
    """Every tensor of the default models: its first rows (up to 64 KiB of
    each tensor) dequantize bit-exactly as gguf does, and dot products agree."""
    if not (ROOT / path).exists():
        pytest.skip(f"{path} not present (fetched by the project's model download step)")
    buf, table = gguf_tensor_table(str(ROOT / path))
    stats = {}
    rng = np.random.default_rng(5)
    for name, qt, ne0, nvals, off in table:
        bs, ts = GGML_QUANT_SIZES[qt]
        row_bytes = ne0 // bs * ts
        take = max(1, min(nvals // ne0, 65536 // row_bytes))
        data = np.array(buf[off:off + take * row_bytes])
        n = ne0 * take
        got = wk_dequantize(lib, qt, data, n)
        want = quants.dequantize(data.reshape(take, row_bytes), qt).reshape(-1).astype(np.float32)
        assert got.size == want.size
        assert same_bits(got, want), f"{name} ({qt.name}): dequantization differs from gguf"
        x = rng.standard_normal(ne0).astype(np.float32)
        d = lib.wk_dot_row(int(qt), ptr(data), ptr(x), ne0)
        w0 = want[:ne0].astype(np.float64)
        assert abs(d - w0 @ x) <= 1e-6 * (np.abs(w0) @ np.abs(x)) + 1e-30, name
        c = stats.setdefault(qt.name, [0, 0])
        c[0] += 1
        c[1] += n
    assert stats, "no tensors found"
    print(f"{Path(path).name}: " + ", ".join(f"{k}: {v[0]} tensors, {v[1]} values" for k, v in stats.items()))


def test_fp8_codes(lib):
    codes = np.arange(256, dtype=np.uint8)
    e4 = np.array([lib.wk_fp8_e4m3_to_f32(int(c)) for c in codes], dtype=np.float32)
    e5 = np.array([lib.wk_fp8_e5m2_to_f32(int(c)) for c in codes], dtype=np.float32)
    assert same_bits(e4, np_fp8_e4m3(codes))
    assert e4[0x7f] == 480.0 and e4[0x7e] == 448.0 and e4[0x01] == 2.0 ** -9
    ref5 = np_fp8_e5m2(codes)
    nan5 = np.isnan(ref5)
    assert np.array_equal(np.isnan(e5), nan5) and same_bits(e5[~nan5], ref5[~nan5])
    # E5M2 is the top byte of an IEEE half: numpy's f16 decoder is a second reference
    half = (codes.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    assert np.array_equal(np.isnan(half), nan5) and same_bits(e5[~nan5], half[~nan5])
    print("FP8: all 256 codes of E4M3 and E5M2 decoded identically (E5M2 also vs numpy float16)")


def test_fp8_encode(lib):
    rng = np.random.default_rng(4)
    for name, enc, fmax, ncodes, dec in (
            ("E4M3", lib.wk_f32_to_fp8_e4m3, 448.0, 0x7f, np_fp8_e4m3),
            ("E5M2", lib.wk_f32_to_fp8_e5m2, 57344.0, 0x7c, np_fp8_e5m2)):
        codes = np.arange(ncodes, dtype=np.int64)
        vals = dec(codes)
        exact = vals.astype(np.float32)
        mids = ((vals[:-1].astype(np.float64) + vals[1:]) / 2).astype(np.float32)  # ties
        rand = (rng.standard_normal(20000) * 10.0 ** rng.uniform(-6, 2, 20000) * fmax / 100)
        x = np.concatenate([exact, -exact, mids, -mids, rand.astype(np.float32)])
        x = x[np.abs(x) <= fmax]
        got = np.array([enc(float(v)) for v in x], dtype=np.uint8)
        want = np_fp8_encode(x, codes, vals)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{name}: {x[bad[0]]!r} -> {got[bad[0]]:#x}, expected {want[bad[0]]:#x}"
        print(f"FP8 {name}: {x.size} values (all codes, all midpoints, random) encoded identically")
    # saturation, overflow and specials
    assert lib.wk_f32_to_fp8_e4m3(1e9) == 0x7e and lib.wk_f32_to_fp8_e4m3(-470.0) == 0xfe
    assert lib.wk_f32_to_fp8_e4m3(float("inf")) == 0x7e
    assert lib.wk_f32_to_fp8_e5m2(61440.0) == 0x7c and lib.wk_f32_to_fp8_e5m2(61439.0) == 0x7b
    assert lib.wk_f32_to_fp8_e5m2(float("-inf")) == 0xfc
    assert np.isnan(lib.wk_fp8_e5m2_to_f32(lib.wk_f32_to_fp8_e5m2(float("nan"))))


def test_unsupported_and_invalid(lib):
    buf = np.zeros(1024, dtype=np.uint8)
    out = np.zeros(256, dtype=np.float32)
    for t in (T.IQ2_XXS, T.Q8_1, T.TQ1_0, T.MXFP4, 9999, -1):
        assert lib.wk_dequantize_row(int(t), ptr(buf), ptr(out), 256) == 3  # WICK_ERR_UNSUPPORTED
        assert lib.wk_quantize_row(int(t), ptr(out), ptr(buf), 256) == 3
        assert np.isnan(lib.wk_dot_row(int(t), ptr(buf), ptr(out), 256))
    assert lib.wk_dequantize_row(int(T.Q4_K), ptr(buf), ptr(out), 100) == 5  # not a block multiple
    x = np.ones(32, dtype=np.float32)
    x[5] = np.nan
    assert lib.wk_quantize_row(int(T.Q8_0), ptr(x), ptr(buf), 32) == 5  # non-finite input


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s"]))
