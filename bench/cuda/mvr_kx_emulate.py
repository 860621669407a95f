# Host emulation of src/backend/cuda/mvr_kx.cuh, the register kernel's
# formats for Q2_K, Q3_K, IQ4_XS and IQ4_NL, on mvr_emulate.py's 16-bit x
# (two int8 planes, v = lo + 128 hi) and its walk of a row (row_product):
# every lane's loads (byte addresses, aligned words, funnel shifts as
# written), the IQ4 level lookup by byte permutes (quant.cuh's iq4_lut8) and
# the dot products, checked against the gguf package's dequantizer within
# the 16-bit rounding bound, and planted mistakes that must fail it.
import os, sys
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mvr_emulate import (M32, Mem, bound16, byte_perm, dpx, f32, funnel_r, funnel_rc, half, i32,
                         ld16_a2, load_x2, load_xg, round_x, row_product)

def planes2(c, m, pa, hb, x, bug=None):  # mvr_planes2; m None: Q2_K
    a = b = ah = bh = 0
    for i in range(4):
        wa = (c[i] >> pa) & 0x03030303
        wb = (c[i] >> (pa + 2)) & 0x03030303
        if m is not None:
            wa |= ((m[i] >> hb) & 0x01010101) << 2
            wb |= ((m[i] >> (hb + 1)) & 0x01010101) << 2
        a, ah = dpx(wa, x['a'][i], x['ah'][i], (a, ah))
        b, bh = dpx(wb, x['b'][i], x['bh'][i], (b, bh))
    k = 256 if bug == 'plane' else 128
    return a + k * ah, b + k * bh


class Q2K:
    LPB, BYTES, BLOCK = 8, 84, 256
    def __init__(self, bug=None): self.bug = bug
    def load(self, m, blk, j):
        h, b, e = j >> 2, (j >> 1) & 1, j & 1
        return dict(q=[m.rd(blk + 16 + 32 * h + 16 * b + 4 * i, 4) for i in range(4)],
                    sc=m.rd(blk + 8 * h + 4 * e, 4), dd=m.rd(blk + 80, 4))
    def load_x(self, xq, xm, b, j, ok):
        g = 8 * b + 4 * (j >> 2) + 2 * (j & 1)
        return load_x2(xq, xm, g, g + 1, (j >> 1) & 1, ok)
    def dot(self, w, x, j):
        pa = 2 * (j & 1) if self.bug == 'plane_shift' else 4 * (j & 1)
        ia, ib = planes2(w['q'], None, pa, 0, x, self.bug)
        bs = 8 * ((j >> 1) & 1)
        ca, cb = (w['sc'] >> bs) & 255, (w['sc'] >> (16 + bs)) & 255
        if self.bug == 'nibbles': ca, cb = ((ca & 15) << 4) | (ca >> 4), ((cb & 15) << 4) | (cb >> 4)
        d, dmin = f32(half(w['dd'])), f32(half(w['dd'] >> 16))
        fs = x['da'] * f32((ca & 15) * ia) + x['db'] * f32((cb & 15) * ib)
        fm = x['da'] * f32((ca >> 4) * x['sa']) + x['db'] * f32((cb >> 4) * x['sb'])
        return f32(d * fs - dmin * fm)


class Q3K:
    LPB, BYTES, BLOCK = 8, 110, 256
    def __init__(self, bug=None): self.bug = bug
    def load(self, m, blk, j):
        h, b, e = j >> 2, (j >> 1) & 1, j & 1
        return dict(l=ld16_a2(m, blk + 32 + 32 * h + 16 * b), m=ld16_a2(m, blk + 16 * b),
                    s0=m.rd(blk + 96 + 4 * e, 2) | (m.rd(blk + 98 + 4 * e, 2) << 16),
                    s1=m.rd(blk + 104, 2) | (m.rd(blk + 106, 2) << 16), d=m.rd(blk + 108, 2),
                    sh=(blk & 2) * 8)
    load_x = Q2K.load_x
    def dot(self, w, x, j):
        h, b, e = j >> 2, (j >> 1) & 1, j & 1
        c = [funnel_r(w['l'][i], w['l'][i + 1], w['sh']) for i in range(4)]
        mk = [funnel_r(w['m'][i], w['m'][i + 1], w['sh']) for i in range(4)]
        hb = 4 * h + e if self.bug == 'hmask_bit' else 4 * h + 2 * e
        ia, ib = planes2(c, mk, 4 * e, hb, x, self.bug)
        lo, hi = 8 * b + 4 * h, 8 * b + 2 * (2 * h + e)
        sa = (((w['s0'] >> lo) & 15) | (((w['s1'] >> hi) & 3) << 4)) - 32
        sb = (((w['s0'] >> (16 + lo)) & 15) | (((w['s1'] >> (16 + hi)) & 3) << 4)) - 32
        off = 0 if self.bug == 'no_offset' else 4
        fs = x['da'] * f32(sa * (ia - off * x['sa'])) + x['db'] * f32(sb * (ib - off * x['sb']))
        return f32(f32(half(w['d'])) * fs)


IQ4_T = (0xBFAD9881, 0xF6EADDCF, 0x26190D01, 0x71594535)


def iq4_lut8(q, bug=None):  # quant.cuh: the levels of code word q's 8 codes, lo and hi
    t0, t1, t2, t3 = IQ4_T
    if bug == 'table': t1, t2 = t2, t1
    c = q & 0x77777777
    s = ((q >> 1) & 0x44444444) | 0x32103210
    a = byte_perm(byte_perm(t0, t1, c), byte_perm(t2, t3, c), s)
    b = byte_perm(byte_perm(t0, t1, c >> 16), byte_perm(t2, t3, c >> 16), s >> 16)
    lo, hi = byte_perm(a, b, 0x6420), byte_perm(a, b, 0x7531)
    return (hi, lo) if bug == 'order' else (lo, hi)


def iq4_dot(q, x, bug=None):  # mvr_iq4_dot
    s = t = 0
    for i in range(4):
        lo, hi = iq4_lut8(q[i], bug)
        s, t = dpx(lo, x['a'][i], x['ah'][i], (s, t))
        s, t = dpx(hi, x['b'][i], x['bh'][i], (s, t))
    return s + 128 * t


class IQ4XS:
    LPB, BYTES, BLOCK = 8, 136, 256
    def __init__(self, bug=None): self.bug = bug
    def load(self, m, blk, j):
        return dict(h0=m.rd(blk, 4), h1=m.rd(blk + 4, 4),
                    q=[m.rd(blk + 8 + 16 * j + 4 * i, 4) for i in range(4)])
    def load_x(self, xq, xm, b, j, ok): return load_xg(xq, xm, 8 * b + j, ok)
    def dot(self, w, x, j):
        sh = 2 * (j ^ 1) if self.bug == 'scale_h' else 2 * j
        ls = (((w['h1'] >> (4 * j)) & 15) | (((w['h0'] >> (16 + sh)) & 3) << 4)) - 32
        d = f32(half(w['h0']))
        return f32(f32(f32(d * f32(ls)) * x['dx']) * f32(iq4_dot(w['q'], x, self.bug)))


class IQ4NL:  # mvr_q_a2's loads (as Q4_0)
    LPB, BYTES, BLOCK = 1, 18, 32
    def __init__(self, bug=None): self.bug = bug
    def load(self, m, blk, j):
        a = blk & ~3
        return dict(r=[m.rd(a + 4 * i, 4) for i in range(5)], sh=16 + (blk & 2) * 8)
    def load_x(self, xq, xm, b, j, ok): return load_xg(xq, xm, b, ok)
    def dot(self, w, x, j):
        fn = funnel_r if self.bug == 'wrap' else funnel_rc
        q = [fn(w['r'][i], w['r'][i + 1], w['sh']) for i in range(4)]
        d = f32(half((w['r'][0] >> (w['sh'] - 16)) & 0xffff))
        return f32(f32(d * x['dx']) * f32(iq4_dot(q, x, self.bug)))


D_AT = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.IQ4_XS: (0,), Q.IQ4_NL: (0,)}


def random_blocks(rng, qt, nblk, by):
    qw = rng.integers(0, 256, size=nblk * by, dtype=np.uint8)
    for k in range(nblk):
        for o in D_AT[qt]:
            h = np.float16(rng.uniform(0.001, 0.01)).view(np.uint16)
            qw[k * by + o] = h & 255
            qw[k * by + o + 1] = h >> 8
    return qw


def check(F, qt, cols, rows, base, rng, xmean=0.0):
    # The largest |y - ref| over rows as a share of the 16-bit rounding bound.
    bpr = cols // F.BLOCK
    rb = bpr * F.BYTES
    qw = random_blocks(rng, qt, rows * bpr, F.BYTES)
    deq = quants.dequantize(qw.reshape(rows, rb), qt).astype(np.float64)
    m = Mem(bytearray(base) + qw.tobytes() + bytearray(16), base & ~15, base + rows * rb + 16)
    x = ((rng.standard_normal(cols) + xmean) * rng.uniform(0.2, 5)).astype(np.float32)
    xq, xm, _ = round_x(x, None)
    xr = x.astype(np.float64)
    worst = 0.0
    for r in range(rows):
        y = row_product(F, m, base + r * rb, bpr, xq, xm)
        e = abs(y - float(deq[r] @ xr)) / bound16(deq[r], xr)
        worst = max(worst, e) if e == e else float('inf')
    return worst


def lut_check(rng):
    # Every code in every nibble of a word, and random words, against the table.
    levels = [b - 256 if b >= 128 else b for t in IQ4_T for b in t.to_bytes(4, 'little')]
    assert levels == [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]
    ws = [int(v) for v in rng.integers(0, 1 << 32, size=2000, dtype=np.uint64)]
    ws += [(c << (4 * k)) | (int(rng.integers(0, 1 << 32)) & ~(15 << (4 * k)) & M32)
           for k in range(8) for c in range(16)]
    for q in ws:
        lo, hi = iq4_lut8(q)
        for k in range(4):  # byte k of q: value k (low nibble), 16 + k (high)
            byte = (q >> (8 * k)) & 255
            if (i32(lo << (24 - 8 * k)) >> 24) != levels[byte & 15]: return False
            if (i32(hi << (24 - 8 * k)) >> 24) != levels[byte >> 4]: return False
    return True


if __name__ == '__main__':
    rng = np.random.default_rng(33)
    fails = 0
    ok = lut_check(rng)
    fails += not ok
    print(f"iq4_lut8, every code at every nibble and 2000 random words: {'ok' if ok else 'FAIL'}")
    cases = ((Q2K, Q.Q2_K, "q2_k", (256, 768, 2816), ('plane_shift', 'nibbles', 'plane')),
             (Q3K, Q.Q3_K, "q3_k", (256, 768, 2816), ('hmask_bit', 'no_offset', 'plane')),
             (IQ4XS, Q.IQ4_XS, "iq4_xs", (256, 768, 2816), ('table', 'order', 'scale_h')),
             (IQ4NL, Q.IQ4_NL, "iq4_nl", (96, 800, 1280), ('table', 'order', 'wrap')))
    for cls, qt, name, colss, bugs in cases:
        F = cls()
        bases = (256, 258) if F.BYTES % 4 else (256,)
        for cols in colss:
            for base in bases:
                for xmean in (0.0, 2.0):
                    e = check(F, qt, cols, 3, base, rng, xmean)
                    good = e <= 1.0
                    fails += not good
                    print(f"{name} cols {cols:5d} base {base} x mean {xmean}: error {e:.3f} of the "
                          f"16-bit bound {'ok' if good else 'FAIL'}")
        for bug in bugs:
            B = cls(bug)
            try:
                caught = max(check(B, qt, colss[1], 2, base, rng, xm)
                             for base in bases for xm in (0.0, 2.0)) > 1.0
            except AssertionError:
                caught = True
            fails += not caught
            print(f"{name} planted '{bug}': {'fails as it must' if caught else 'NOT CAUGHT'}")
    sys.exit(1 if fails else 0)
