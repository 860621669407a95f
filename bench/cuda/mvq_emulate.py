# Host emulation of the CUDA backend's int8-activation dot products
# (src/backend/cuda/mvq.cuh: quant_x32, ld_words_a2 and mvq<T>::dot, bit for
# bit with dp4a, __byte_perm and __funnelshift_r written out), checked
# against the gguf package's dequantizer: the error of the emulated product
# must stay inside the int8 bound sum_g max|x_g| / 254 * sum_g |w| that
# tests/unit/test_cuda_kernels.c applies on the device. Needs no GPU:
#   .venv/bin/python bench/cuda/mvq_emulate.py
# It checks the formulas before a device run; it is no substitute for the
# kernel tests (it cannot see the compiler or the memory layout).
import struct

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

M32 = 0xffffffff
def u16(b, o): return b[o] | (b[o+1] << 8)
def u32(b, o): return b[o] | (b[o+1] << 8) | (b[o+2] << 16) | (b[o+3] << 24)
def half(v): return float(np.frombuffer(struct.pack('<H', v & 0xffff), dtype=np.float16)[0])
def funnel_r(lo, hi, sh): return (((hi << 32) | lo) >> sh) & M32
def ld_words_a2(buf, p, nw):
    base = p & ~3; sh = (p & 2) * 8
    a = [u32(buf, base + 4*i) for i in range(nw)] + [u16(buf, base + 4*nw) if sh else 0]
    return [funnel_r(a[i], a[i+1], sh) for i in range(nw)]
def sb(v): return v - 256 if v >= 128 else v
def dp4(a, b, c):
    return c + sum(sb((a >> (8*k)) & 255) * sb((b >> (8*k)) & 255) for k in range(4))
def byte_perm(x, y, s):
    bs = [(x >> (8*k)) & 255 for k in range(4)] + [(y >> (8*k)) & 255 for k in range(4)]
    return sum(bs[(s >> (4*k)) & 7] << (8*k) for k in range(4))
def f2u(f): return struct.unpack('<I', struct.pack('<f', np.float32(f)))[0]
def quant_x32(xv):
    am = np.float32(max(abs(v) for v in xv))
    inv = np.float32(127.0) / am if am > 0 else np.float32(0)
    dx = am * np.float32(1.0/127.0)
    qx = []
    for i in range(8):
        a = [f2u(np.float32(np.float64(xv[4*i+k]) * np.float64(inv) + 12582912.0)) for k in range(4)]
        qx.append(byte_perm(byte_perm(a[0], a[1], 0x0040), byte_perm(a[2], a[3], 0x0040), 0x5410))
    il = ih = 0
    for i in range(4): il = dp4(qx[i], 0x01010101, il); ih = dp4(qx[4+i], 0x01010101, ih)
    return qx, il, ih, float(dx)
def spread4(v): return ((v & 0xF) * 0x00204081 & M32) & 0x01010101
def kq_scale_min(w0, w1, w2, s):
    sh = 8 * (s & 3); b0 = (w0 >> sh) & 255; b1 = (w1 >> sh) & 255; b2 = (w2 >> sh) & 255
    if s < 4: return b0 & 63, b1 & 63
    return (b2 & 0xF) | ((b0 >> 6) << 4), (b2 >> 4) | ((b1 >> 6) << 4)
def dot_q4_0(b, o, s, qx, il, ih, dx):
    w = ld_words_a2(b, o + 2, 4); a = 0
    for i in range(4):
        a = dp4(w[i] & 0x0F0F0F0F, qx[i], a); a = dp4((w[i] >> 4) & 0x0F0F0F0F, qx[4+i], a)
    return half(u16(b, o)) * dx * (a - 8*(il+ih))
def dot_q5_0(b, o, s, qx, il, ih, dx):
    qh = u16(b, o+2) | (u16(b, o+4) << 16); w = ld_words_a2(b, o + 6, 4); a = 0
    for i in range(4):
        lo = (w[i] & 0x0F0F0F0F) | (spread4(qh >> (4*i)) << 4)
        hi = ((w[i] >> 4) & 0x0F0F0F0F) | (spread4(qh >> (16 + 4*i)) << 4)
        a = dp4(lo, qx[i], a); a = dp4(hi, qx[4+i], a)
    return half(u16(b, o)) * dx * (a - 16*(il+ih))
def dot_q8_0(b, o, s, qx, il, ih, dx):
    w = ld_words_a2(b, o + 2, 8); a = 0
    for i in range(8): a = dp4(w[i], qx[i], a)
    return half(u16(b, o)) * dx * a
def dot_q4_k(b, o, s, qx, il, ih, dx):
    d = half(u16(b, o)); dmin = half(u16(b, o+2))
    sc, mn = kq_scale_min(u32(b, o+4), u32(b, o+8), u32(b, o+12), s)
    w = [u32(b, o + 16 + 32*(s >> 1) + 4*i) for i in range(8)]; sh = (s & 1)*4; a = 0
    for i in range(8): a = dp4((w[i] >> sh) & 0x0F0F0F0F, qx[i], a)
    return dx * (d*sc*a - dmin*mn*(il+ih))
def dot_q6_k(b, o, s, qx, il, ih, dx):
    n = s >> 2; t = s & 3
    ql = ld_words_a2(b, o + 64*n + 32*(t & 1), 8); qh = ld_words_a2(b, o + 128 + 32*n, 8)
    scw = u16(b, o + 192 + 8*n + 2*t); d = half(u16(b, o+208))
    lsh = (t >> 1)*4; hsh = 2*t; a0 = a1 = 0
    for i in range(8):
        v = ((ql[i] >> lsh) & 0x0F0F0F0F) | (((qh[i] >> hsh) & 0x03030303) << 4)
        if i < 4: a0 = dp4(v, qx[i], a0)
        else: a1 = dp4(v, qx[i], a1)
    return d*dx*(sb(scw & 255)*(a0 - 32*il) + sb(scw >> 8)*(a1 - 32*ih))
def dot_q4_1(b, o, s, qx, il, ih, dx):
    a = 0
    for i in range(4):
        w = u32(b, o + 4 + 4*i)
        a = dp4(w & 0x0F0F0F0F, qx[i], a); a = dp4((w >> 4) & 0x0F0F0F0F, qx[4+i], a)
    return dx * (half(u16(b, o))*a + half(u16(b, o+2))*(il+ih))
def dot_q5_1(b, o, s, qx, il, ih, dx):
    qh = u32(b, o+4); a = 0
    for i in range(4):
        w = u32(b, o + 8 + 4*i)
        lo = (w & 0x0F0F0F0F) | (spread4(qh >> (4*i)) << 4)
        hi = ((w >> 4) & 0x0F0F0F0F) | (spread4(qh >> (16 + 4*i)) << 4)
        a = dp4(lo, qx[i], a); a = dp4(hi, qx[4+i], a)
    return dx * (half(u16(b, o))*a + half(u16(b, o+2))*(il+ih))
def dot_q5_k(b, o, s, qx, il, ih, dx):
    d = half(u16(b, o)); dmin = half(u16(b, o+2))
    sc, mn = kq_scale_min(u32(b, o+4), u32(b, o+8), u32(b, o+12), s)
    hw = [u32(b, o + 16 + 4*i) for i in range(8)]
    w = [u32(b, o + 48 + 32*(s >> 1) + 4*i) for i in range(8)]; sh = (s & 1)*4; a = 0
    for i in range(8):
        a = dp4(((w[i] >> sh) & 0x0F0F0F0F) | (((hw[i] >> s) & 0x01010101) << 4), qx[i], a)
    return dx * (d*sc*a - dmin*mn*(il+ih))
cases = [(Q.Q4_1, 32, 20, dot_q4_1), (Q.Q5_1, 32, 24, dot_q5_1), (Q.Q5_K, 256, 176, dot_q5_k),
         (Q.Q4_0, 32, 18, dot_q4_0), (Q.Q5_0, 32, 22, dot_q5_0), (Q.Q8_0, 32, 34, dot_q8_0),
         (Q.Q4_K, 256, 144, dot_q4_k), (Q.Q6_K, 256, 210, dot_q6_k)]
cols = 512
rng = np.random.default_rng(1)
failed = 0
for qt, BLK, BY, fn in cases:
    w = rng.standard_normal((3, cols)).astype(np.float32)
    if qt in (Q.Q4_K, Q.Q5_K, Q.Q6_K):  # gguf cannot quantize these: random blocks
        qw = rng.integers(0, 256, size=(3, cols // BLK * BY), dtype=np.uint8)
        for r in range(3):
            for k in range(cols // BLK):
                o = k * BY + (208 if qt == Q.Q6_K else 0)
                for j in range(1 if qt == Q.Q6_K else 2):
                    h = np.float16(rng.uniform(0.001, 0.01)).view(np.uint16)
                    qw[r, o + 2*j] = h & 255; qw[r, o + 2*j + 1] = h >> 8
    else:
        qw = quants.quantize(w, qt)
    deq = quants.dequantize(qw, qt)
    x = rng.standard_normal(cols).astype(np.float32)
    worst = 0
    for r in range(3):
        # place row at an odd 2-aligned offset inside a buffer to exercise alignment
        for pad in (0, 2):
            buf = bytes(pad) + qw[r].tobytes() + bytes(8)
            y = 0.0; bound = 0.0
            for g in range(cols // 32):
                qx, il, ih, dx = quant_x32(x[32*g:32*g+32])
                y += fn(buf, pad + (g // (BLK//32)) * BY, g % (BLK//32), qx, il, ih, dx)
                bound += abs(x[32*g:32*g+32]).max()/254 * abs(deq[r, 32*g:32*g+32]).sum()
            ref = float(np.dot(deq[r].astype(np.float64), x))
            worst = max(worst, abs(y - ref) / bound)
    failed += not worst <= 1
    print(f"{qt.name:5s} error {worst:.3f} of the int8 bound {'ok' if worst <= 1 else 'FAIL'}")
raise SystemExit(1 if failed else 0)
