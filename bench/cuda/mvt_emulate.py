# Host emulation of src/backend/cuda/mvt.cuh's formats (Q4_K, Q5_K, Q6_K,
# Q8_0, Q4_0: the tensor-core matrix-vector kernel of batches): a warp's 16
# rows, every lane's loads and A fragments, its x words and where they go in
# B, the mma.m16n8k32 itself written out from the PTX ISA's fragment layout
# (A 16 x 32 u8, B 32 x 8 s8, C 16 x 8 s32; g = lane / 4, q = lane % 4: a0
# row g, k 4q + [0, 4); a1 row g + 8; a2, a3 the same at k 16 + 4q; b0 k 4q
# + [0, 4) of column g, b1 k 16 + 4q + [0, 4); c0, c1 row g, columns 2q, 2q
# + 1; c2, c3 row g + 8), the scale epilogue and the quad sum. x is
# mvr_emulate.py's 16-bit x (two int8 planes). Checked against the gguf
# package's dequantizer within the 16-bit rounding bound, with planted
# mistakes that must fail it.
import os, sys
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mvr_emulate import (Mem, bound16, f32, funnel_r, half, ld16, ldx16, random_kblocks,
                         round_x, u2f)


def fma(a, b, c): return f32(np.float64(a) * np.float64(b) + np.float64(c))  # fmaf: one rounding
def ubytes(w): return [(w >> (8 * i)) & 255 for i in range(4)]
def sbytes(w): return [b - 256 if b >= 128 else b for b in ubytes(w)]


def sacc(acc, r, scale, v):  # acc[r] = fmaf(scale, v, acc[r])
    acc[r] = fma(scale, f32(v), acc[r])


class KQ:  # mvt_kq<Q5>: a step one super-block, rounds G = 0, 1 of 4 mmas
    COLS, BLOCK = 256, 256
    def __init__(self, q5, bug=None):
        self.q5, self.bug = q5, bug
        self.BYTES, self.QS = (176, 48) if q5 else (144, 16)
    def load(self, m, p0, p1, s, q):
        w = dict(h=[], q=[], qh=[])
        for r in range(2):
            b = (p1 if r else p0) + self.BYTES * s
            w['h'].append(ld16(m, b))
            w['q'].append([ld16(m, b + self.QS + 16 * q), ld16(m, b + self.QS + 64 + 16 * q)])
            if self.q5: w['qh'].append(ld16(m, b + 16 + 16 * (q & 1)))
        return w
    def rounds(self, w, xq, xm, cols, s, lane):
        g, q = lane >> 2, lane & 3
        si = q if self.bug == 'si' else 2 * (q & 1) + (q >> 1)
        lowg = g < 4
        xok = True if self.bug == 'xok' else ((g >> 1) & 1) == (q >> 1)
        hs = 1.0 / 16.0 if not self.q5 and q >= 2 and self.bug != 'hs' else 1.0
        out = []
        for G in range(2):
            dsc, dmn = [], []
            for r in range(2):
                h = w['h'][r]
                y, z, v = h[1] >> (8 * si), h[2] >> (8 * si), h[3] >> (8 * si)
                sc = y & 63 if G == 0 else (v & 15) | ((y >> 2) & 0x30)
                mn = z & 63 if G == 0 else ((v >> 4) & 15) | ((z >> 2) & 0x30)
                dsc.append(f32(f32(f32(half(h[0])) * f32(sc)) * f32(hs)))
                dmn.append(f32(f32(half(h[0] >> 16)) * f32(mn)))
            c2 = 2 * G + (q >> 1) if self.bug == 'c2' else 2 * (2 * G + (q >> 1))
            a = [[0] * 4 for _ in range(4)]
            for t in range(4):
                for r in range(2):
                    wq = w['q'][r][G][t]
                    if self.q5:
                        hb = w['qh'][r][t]
                        a[t][r] = (wq & 0x0F0F0F0F) | (((hb >> c2) & 0x01010101) << 4)
                        a[t][2 + r] = ((wq >> 4) & 0x0F0F0F0F) | (((hb >> (c2 + 1)) & 0x01010101) << 4)
                    else:
                        a[t][r], a[t][2 + r] = wq & 0x0F0F0F0F, wq & 0xF0F0F0F0
            xo = (g & 1) * cols + 256 * s + 64 * (2 * G + (q >> 1)) + 16 * (q & 1) + (0 if lowg else 32)
            e = xm[8 * s + 4 * G + si]
            dx = f32(u2f(e[0]))
            mx = f32(dx * f32(e[3]))
            def epi(c, acc, dsc=dsc, dmn=dmn, dx=dx, mx=mx):
                for r in range(2):
                    acc[r] = fma(dsc[r], f32(dx * f32(c[2 * r] + self.k * c[2 * r + 1])),
                                 fma(-dmn[r], mx, acc[r]))
            out.append(dict(a=a, X=ldx16(xq, xo) if xok else [0] * 4,
                            lowg=(not lowg) if self.bug == 'lowg' else lowg, s8=False, epi=epi))
        return out
    @property
    def k(self): return 256 if self.bug == 'plane' else 128


def words_a2(m, p, n):  # the n words of bytes at 2-byte aligned p (aligned loads, funnel shifts)
    a = p & ~3
    r = [m.rd(a + 4 * i, 4) for i in range(n)] + [m.rd(a + 4 * n, 2) if p & 2 else 0]
    return [funnel_r(r[i], r[i + 1], (p & 2) * 8) for i in range(n)]


class Q80:  # mvt_fmt<WK_Q8_0>: a step 4 blocks, one round of 4 mmas, s8 codes
    COLS, BLOCK, BYTES = 128, 32, 34
    def __init__(self, bug=None): self.bug = bug
    def load(self, m, p0, p1, s, q):
        w = dict(r=[], d=[])
        for r in range(2):
            b = (p1 if r else p0) + 136 * s
            run = b + 34 * (q >> 1) + 2 + 16 * (q & 1)
            w['r'].append([words_a2(m, run, 4), words_a2(m, run + 68, 4)])
            w['d'].append(m.rd(b + 34 * q, 2))
        return w
    def rounds(self, w, xq, xm, cols, s, lane):
        g, q = lane >> 2, lane & 3
        lowg, xok = g < 4, ((g >> 1) & 1) == (q >> 1)
        a = [[w['r'][r][i][t] for i in range(2) for r in range(2)] for t in range(4)]
        if self.bug == 'blocks': a = [[w['r'][r][i][t] for r in range(2) for i in range(2)] for t in range(4)]
        xo = (g & 1) * cols + 128 * s + 32 * (q >> 1) + 16 * (q & 1) + (0 if lowg else 64)
        dx = f32(u2f(xm[4 * s + q][0]))
        d = [f32(half(w['d'][r])) for r in range(2)]
        def epi(c, acc):
            for r in range(2): sacc(acc, r, f32(d[r] * dx), c[2 * r] + 128 * c[2 * r + 1])
        return [dict(a=a, X=ldx16(xq, xo) if xok else [0] * 4, lowg=lowg, s8=self.bug != 'u8', epi=epi)]


class Q40:  # mvt_fmt<WK_Q4_0>: a step 8 blocks, rounds R of 2 mmas (blocks 2R, 2R + 1)
    COLS, BLOCK, BYTES = 256, 32, 18
    def __init__(self, bug=None): self.bug = bug
    def load(self, m, p0, p1, s, q):
        w = dict(r=[], d=[])
        for r in range(2):
            b = (p1 if r else p0) + 144 * s
            run = b + 18 * (q >> 1) + 2 + 8 * (q & 1)
            w['r'].append([words_a2(m, run + 36 * R, 2) for R in range(4)])
            w['d'].append([m.rd(b + 36 * R + 18 * (q & 1), 2) for R in range(4)])
        return w
    def rounds(self, w, xq, xm, cols, s, lane):
        g, q = lane >> 2, lane & 3
        lowg, xok = g < 4, ((g >> 1) & 1) == (q >> 1)
        out = []
        for R in range(4):
            a = [[0] * 4 for _ in range(2)]
            for t in range(2):
                for r in range(2):
                    wq = w['r'][r][R][t]
                    a[t][r], a[t][2 + r] = wq & 0x0F0F0F0F, (wq >> 4) & 0x0F0F0F0F
            xo = (g & 1) * cols + 256 * s + 64 * R + 32 * (q >> 1) + 8 * (q & 1) + (0 if lowg else 16)
            e = xm[8 * s + 2 * R + (q & 1)]
            dx = f32(u2f(e[0]))
            half_ = (q & 1) if self.bug == 'half' else (q >> 1)
            o = 8 * (e[2] if half_ else e[1])
            d = [f32(half(w['d'][r][R])) for r in range(2)]
            def epi(c, acc, d=d, dx=dx, o=o):
                for r in range(2): sacc(acc, r, f32(d[r] * dx), c[2 * r] + 128 * c[2 * r + 1] - o)
            out.append(dict(a=a, X=ldx16(xq, xo)[:2] if xok else [0] * 2, lowg=lowg, s8=False, epi=epi))
        return out


class Q6K:  # mvt_fmt<WK_Q6_K>: a step half a super-block, rounds h of 2 mmas
    COLS, BLOCK, BYTES = 128, 256, 210
    def __init__(self, bug=None): self.bug = bug
    def load(self, m, p0, p1, s, q):
        n = s & 1
        w = dict(l=[], h=[], sc=[], d=[])
        for r in range(2):
            b = (p1 if r else p0) + 210 * (s >> 1)
            w['l'].append([words_a2(m, b + 64 * n + 8 * q + 32 * h, 2) for h in range(2)])
            w['h'].append(words_a2(m, b + 128 + 32 * n + 8 * q, 2))
            sp = b + 192 + 8 * n + 4 * (q >> 1)
            w['sc'].append(m.rd(sp, 2) | (m.rd(sp + 2, 2) << 16))
            w['d'].append(m.rd(b + 208, 2))
        return w
    def rounds(self, w, xq, xm, cols, s, lane):
        g, q = lane >> 2, lane & 3
        n, sb = s & 1, s >> 1
        lowg, xok = g < 4, ((g >> 1) & 1) == (q >> 1)
        out = []
        for h in range(2):
            a = [[0] * 4 for _ in range(2)]
            dsc = []
            for r in range(2):
                sc = (w['sc'][r] >> (16 * h + 8 * (q & 1))) & 255
                dsc.append(f32(f32(half(w['d'][r])) * f32(sc - 256 if sc >= 128 else sc)))
                for t in range(2):
                    lw = w['l'][r][h][t]
                    hh = w['h'][r][t] >> (2 * (1 - h) if self.bug == 'qh' else 2 * h)
                    a[t][r] = (lw & 0x0F0F0F0F) | ((hh & 0x03030303) << 4)
                    a[t][2 + r] = ((lw >> 4) & 0x0F0F0F0F) | (((hh >> 4) & 0x03030303) << 4)
            xo = (g & 1) * cols + 256 * sb + 128 * n + 32 * h + 8 * q + (0 if lowg else 64)
            e = xm[8 * sb + 4 * n + h + 2 * (q >> 1)]
            dx = f32(u2f(e[0]))
            o = (0 if self.bug == 'offset' else 32) * (e[2] if q & 1 else e[1])
            def epi(c, acc, dsc=dsc, dx=dx, o=o):
                for r in range(2): sacc(acc, r, f32(dsc[r] * dx), c[2 * r] + 128 * c[2 * r + 1] - o)
            out.append(dict(a=a, X=ldx16(xq, xo)[:2] if xok else [0] * 2, lowg=lowg, s8=False, epi=epi))
        return out


def sbytes_or(s8, w): return sbytes(w) if s8 else ubytes(w)


def mma(frags, t):
    # C (16 x 8) = A (16 x 32, u8 or s8) B (32 x 8 s8) from the lanes' fragments of mma t.
    A = np.zeros((16, 32), dtype=np.int64)
    B = np.zeros((32, 8), dtype=np.int64)
    for lane, f in enumerate(frags):
        g, q = lane >> 2, lane & 3
        a0, a1, a2, a3 = (sbytes_or(f['s8'], v) for v in f['a'][t])
        A[g, 4 * q:4 * q + 4], A[g + 8, 4 * q:4 * q + 4] = a0, a1
        A[g, 16 + 4 * q:20 + 4 * q], A[g + 8, 16 + 4 * q:20 + 4 * q] = a2, a3
        b0, b1 = (f['X'][t], 0) if f['lowg'] else (0, f['X'][t])
        B[4 * q:4 * q + 4, g], B[16 + 4 * q:20 + 4 * q, g] = sbytes(b0), sbytes(b1)
    return A @ B


def unit_product(F, m, starts, steps, xq, xm, cols):
    # The 16 rows at starts (lane g: rows g and g + 8), one token; their sums.
    acc = [[f32(0), f32(0)] for _ in range(32)]
    for s in range(steps):
        rs = [F.rounds(F.load(m, starts[l >> 2], starts[(l >> 2) + 8], s, l & 3), xq, xm, cols, s, l)
              for l in range(32)]
        for k in range(len(rs[0])):
            frags = [rs[l][k] for l in range(32)]
            c = [[0] * 4 for _ in range(32)]
            for t in range(len(frags[0]['a'])):
                C = mma(frags, t)
                for l in range(32):
                    g, q = l >> 2, l & 3
                    for i, (row, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))):
                        c[l][i] += int(C[row, col])
            for l in range(32): frags[l]['epi'](c[l], acc[l])
    y = [0.0] * 16
    for g in range(8):  # quad_sum: (q0 + q1) + (q2 + q3)
        for r in range(2):
            v = [acc[4 * g + q][r] for q in range(4)]
            y[g + 8 * r] = float(f32(f32(v[0] + v[1]) + f32(v[2] + v[3])))
    return y


def random_blocks(rng, qt, rows, cols, by):
    if qt in (Q.Q8_0, Q.Q4_0):
        return quants.quantize(rng.standard_normal((rows, cols)).astype(np.float32), qt).reshape(-1)
    return random_kblocks(rng, qt, rows * (cols // 256), by)


def check(F, qt, cols, rng, xmean=0.0, base=256):
    rb = cols // F.BLOCK * F.BYTES
    qw = random_blocks(rng, qt, 16, cols, F.BYTES)
    deq = quants.dequantize(qw.reshape(16, rb), qt).astype(np.float64)
    m = Mem(bytearray(base) + qw.tobytes() + bytearray(16), base & ~15, base + 16 * rb + 16)
    x = ((rng.standard_normal(cols) + xmean) * rng.uniform(0.2, 5)).astype(np.float32)
    xq, xm, _ = round_x(x, None)
    y = unit_product(F, m, [base + r * rb for r in range(16)], cols // F.COLS, xq, xm, cols)
    xr = x.astype(np.float64)
    worst = 0.0
    for r in range(16):
        e = abs(y[r] - float(deq[r] @ xr)) / bound16(deq[r], xr)
        worst = max(worst, e) if e == e else float('inf')
    return worst


if __name__ == '__main__':
    rng = np.random.default_rng(15)
    fails = 0
    cases = ((lambda b=None: KQ(False, b), Q.Q4_K, "q4_k", (256, 768, 2816), ('hs', 'si', 'xok', 'lowg', 'plane')),
             (lambda b=None: KQ(True, b), Q.Q5_K, "q5_k", (256, 768, 2816), ('c2', 'si', 'xok', 'plane')),
             (Q6K, Q.Q6_K, "q6_k", (256, 768, 2816), ('qh', 'offset')),
             (Q80, Q.Q8_0, "q8_0", (128, 384, 1280), ('blocks', 'u8')),
             (Q40, Q.Q4_0, "q4_0", (256, 768, 2816), ('half',)))
    for make, qt, name, colss, bugs in cases:
        bases = (256,) if make().BYTES % 4 == 0 else (256, 258)
        for cols in colss:
            for base in bases:
                for xmean in (0.0, 2.0):
                    e = check(make(), qt, cols, rng, xmean, base)
                    ok = e <= 1.0
                    fails += not ok
                    print(f"{name} mvt cols {cols:5d} base {base} x mean {xmean}: error {e:.3f} of the "
                          f"16-bit bound {'ok' if ok else 'FAIL'}")
        for bug in bugs:
            caught = max(check(make(bug), qt, colss[1], rng, xm, base) for xm in (0.0, 2.0)
                         for base in bases) > 1.0
            fails += not caught
            print(f"{name} mvt planted '{bug}': {'fails as it must' if caught else 'NOT CAUGHT'}")
    sys.exit(1 if fails else 0)
