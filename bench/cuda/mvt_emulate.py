# Host emulation of src/backend/cuda/mvt.cuh's Q4_K and Q5_K format
# (mvt_kq: the tensor-core matrix-vector kernel of batches): a warp's 16
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
from mvr_emulate import Mem, bound16, f32, half, ld16, ldx16, random_kblocks, round_x, u2f


def fma(a, b, c): return f32(np.float64(a) * np.float64(b) + np.float64(c))  # fmaf: one rounding
def ubytes(w): return [(w >> (8 * i)) & 255 for i in range(4)]
def sbytes(w): return [b - 256 if b >= 128 else b for b in ubytes(w)]


class KQ:  # mvt_kq<Q5>
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
    def lane(self, w, xq, xm, cols, s, G, lane):
        # The lane's A fragments of the 4 mmas, its x words (B), and its slot's epilogue terms.
        g, q = lane >> 2, lane & 3
        si = q if self.bug == 'si' else 2 * (q & 1) + (q >> 1)
        lowg = g < 4
        xok = True if self.bug == 'xok' else ((g >> 1) & 1) == (q >> 1)
        hs = 1.0 / 16.0 if not self.q5 and q >= 2 and self.bug != 'hs' else 1.0
        dsc, dmn = [], []
        for r in range(2):
            h = w['h'][r]
            y, z, v = h[1] >> (8 * si), h[2] >> (8 * si), h[3] >> (8 * si)
            sc = y & 63 if G == 0 else (v & 15) | ((y >> 2) & 0x30)
            mn = z & 63 if G == 0 else ((v >> 4) & 15) | ((z >> 2) & 0x30)
            dsc.append(f32(f32(f32(half(h[0])) * f32(sc)) * f32(hs)))
            dmn.append(f32(f32(half(h[0] >> 16)) * f32(mn)))
        c2 = 2 * (2 * G + (q >> 1))
        if self.bug == 'c2': c2 = 2 * G + (q >> 1)
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
        X = ldx16(xq, xo) if xok else [0, 0, 0, 0]
        if self.bug == 'lowg': lowg = not lowg
        return dict(a=a, X=X, lowg=lowg, dsc=dsc, dmn=dmn, gi=8 * s + 4 * G + si)


def mma(frags, t):
    # C (16 x 8) = A (16 x 32 u8) B (32 x 8 s8) from the lanes' fragments of mma t.
    A = np.zeros((16, 32), dtype=np.int64)
    B = np.zeros((32, 8), dtype=np.int64)
    for lane, f in enumerate(frags):
        g, q = lane >> 2, lane & 3
        a0, a1, a2, a3 = f['a'][t]
        A[g, 4 * q:4 * q + 4], A[g + 8, 4 * q:4 * q + 4] = ubytes(a0), ubytes(a1)
        A[g, 16 + 4 * q:20 + 4 * q], A[g + 8, 16 + 4 * q:20 + 4 * q] = ubytes(a2), ubytes(a3)
        b0, b1 = (f['X'][t], 0) if f['lowg'] else (0, f['X'][t])
        B[4 * q:4 * q + 4, g], B[16 + 4 * q:20 + 4 * q, g] = sbytes(b0), sbytes(b1)
    return A @ B


def unit_product(F, m, starts, bpr, xq, xm, cols):
    # The 16 rows at starts (lane g: rows g and g + 8), one token; their sums.
    acc = [[f32(0), f32(0)] for _ in range(32)]
    for s in range(bpr):
        ws = [F.load(m, starts[l >> 2], starts[(l >> 2) + 8], s, l & 3) for l in range(32)]
        for G in range(2):
            frags = [F.lane(ws[l], xq, xm, cols, s, G, l) for l in range(32)]
            c = [[0] * 4 for _ in range(32)]
            for t in range(4):
                C = mma(frags, t)
                for l in range(32):
                    g, q = l >> 2, l & 3
                    for i, (row, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))):
                        c[l][i] += int(C[row, col])
            k = 256 if F.bug == 'plane' else 128
            for l, f in enumerate(frags):
                e = xm[f['gi']]
                dx = f32(u2f(e[0]))
                mx = f32(dx * f32(e[3]))
                for r in range(2):
                    acc[l][r] = fma(f['dsc'][r], f32(dx * f32(c[l][2 * r] + k * c[l][2 * r + 1])),
                                    fma(-f['dmn'][r], mx, acc[l][r]))
    y = [0.0] * 16
    for g in range(8):  # quad_sum: (q0 + q1) + (q2 + q3)
        for r in range(2):
            v = [acc[4 * g + q][r] for q in range(4)]
            y[g + 8 * r] = float(f32(f32(v[0] + v[1]) + f32(v[2] + v[3])))
    return y


def check(F, qt, cols, rng, xmean=0.0):
    bpr = cols // 256
    rb = bpr * F.BYTES
    qw = random_kblocks(rng, qt, 16 * bpr, F.BYTES)
    deq = quants.dequantize(qw.reshape(16, rb), qt).astype(np.float64)
    base = 256
    m = Mem(bytearray(base) + qw.tobytes() + bytearray(16), base, base + 16 * rb + 16)
    x = ((rng.standard_normal(cols) + xmean) * rng.uniform(0.2, 5)).astype(np.float32)
    xq, xm, _ = round_x(x, None)
    y = unit_product(F, m, [base + r * rb for r in range(16)], bpr, xq, xm, cols)
    xr = x.astype(np.float64)
    worst = 0.0
    for r in range(16):
        e = abs(y[r] - float(deq[r] @ xr)) / bound16(deq[r], xr)
        worst = max(worst, e) if e == e else float('inf')
    return worst


if __name__ == '__main__':
    rng = np.random.default_rng(15)
    fails = 0
    for q5, qt, name, bugs in ((False, Q.Q4_K, "q4_k", ('hs', 'si', 'xok', 'lowg', 'plane')),
                               (True, Q.Q5_K, "q5_k", ('c2', 'si', 'xok', 'plane'))):
        for cols in (256, 768, 2816):
            for xmean in (0.0, 2.0):
                e = check(KQ(q5), qt, cols, rng, xmean)
                ok = e <= 1.0
                fails += not ok
                print(f"{name} mvt cols {cols:5d} x mean {xmean}: error {e:.3f} of the 16-bit bound "
                      f"{'ok' if ok else 'FAIL'}")
        for bug in bugs:
            caught = max(check(KQ(q5, bug), qt, 768, rng, xm) for xm in (0.0, 2.0)) > 1.0
            fails += not caught
            print(f"{name} mvt planted '{bug}': {'fails as it must' if caught else 'NOT CAUGHT'}")
    sys.exit(1 if fails else 0)
