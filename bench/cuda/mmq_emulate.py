# Host emulation of the fused batch kernel's formats (mmq_fmt in
# src/backend/cuda/mmq.cuh), Q4_K and Q6_K: every lane's loads
# (byte addresses, aligned words and funnel shifts as written), its A
# fragments (the 0x6400 codes, f16 subtract and fma / multiply), x staged in
# shared memory as (x0, x2, x1, x3) and each lane's 8-byte B read (with the
# bank pattern of a half-warp), the m16n8k16 fragment layout, the K split
# and the partial sums. Checked against the gguf package's dequantizer for
# Q4_K and Q6_K within the kernel test's bound (2e-3 of sum |w x|), with
# planted mistakes that must fail it.
import struct, sys
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

M32 = 0xffffffff
SB, JS, SUBS = 4, 80, 32
TS = SUBS * JS + 8


class Mem:
    def __init__(self, data):
        self.b = data
    def rd(self, a, n):
        assert a % n == 0, ("misaligned", a, n)
        assert 0 <= a and a + n <= len(self.b), ("out of allocation", a, n)
        return int.from_bytes(self.b[a:a+n], 'little')


def funnel_r(lo, hi, sh): return (((hi << 32) | lo) >> (sh & 31)) & M32
def h2(u): return np.frombuffer(struct.pack('<I', u & M32), dtype=np.float16).astype(np.float16)
def u2(v): return struct.unpack('<I', np.asarray(v, dtype=np.float16).tobytes())[0]
def byte_perm(x, y, s):
    bs = [(x >> (8*k)) & 255 for k in range(4)] + [(y >> (8*k)) & 255 for k in range(4)]
    return sum(bs[(s >> (4*k)) & 7] << (8*k) for k in range(4))
def f16(v): return np.float16(v)


def ld16_a2(mem, p):  # mvr_ld16_a2
    a = p & ~3
    r = [mem.rd(a + 4*i, 4) for i in range(4)]
    r.append(mem.rd(a + 16, 2) if p & 2 else 0)
    return r


def kq_scale_min(w0, w1, w2, s):  # quant.cuh
    sh = 8 * (s & 3)
    b0, b1, b2 = (w0 >> sh) & 255, (w1 >> sh) & 255, (w2 >> sh) & 255
    if s < 4: return float(b0 & 63), float(b1 & 63)
    return float((b2 & 15) | ((b0 >> 6) << 4)), float((b2 >> 4) | ((b1 >> 6) << 4))


class Q4K:
    BYTES = 144
    def __init__(self, bug=None): self.bug = bug
    def load(self, mem, p0, p1, q):
        w = []
        for p in (p0, p1):
            h = [mem.rd(p + 4*i, 4) for i in range(4)]
            c = [mem.rd(p + 16 + 32*q + 4*i, 4) for i in range(8)]
            w.append((h, c))
        return w
    def scales(self, w, q):
        s = []
        for h, _ in w:
            d = float(h2(h[0] & 0xffff)[0]); dm = float(h2(h[0] >> 16)[0])
            row = []
            for hi in range(2):
                sc, mn = kq_scale_min(h[1], h[2], h[3], 2*q + hi)
                row.append((f16(np.float32(d) * np.float32(sc)), f16(np.float32(dm) * np.float32(mn))))
            s.append(row)
        return s
    def frag(self, w, s, q, st):
        wd, hi = st >> 1, st & 1
        if self.bug == 'nibble': hi ^= 1
        a = [0] * 4
        for r in range(2):
            x = w[r][1][wd]; t = x >> 4 if hi else x
            c02 = (t & 0x000F000F) | 0x64006400
            c13 = ((t >> 8) & 0x000F000F) | 0x64006400
            sc, mn = s[r][hi]
            for k, c in ((r, c02), (2 + r, c13)):
                v = h2(c)
                v = (v - f16(1024)).astype(np.float16)
                v = np.array([np.float16(np.float32(e) * np.float32(sc) - np.float32(mn)) for e in v])
                a[k] = u2(v)  # one rounding: the f16 fma
        return a
    def xcol(self, q, st):
        if self.bug == 'xcol': return 32 * (2*q + (st & 1)) + 4 * (st >> 1) ^ 4
        return 32 * (2*q + (st & 1)) + 4 * (st >> 1)


class Q6K:
    BYTES = 210
    def __init__(self, bug=None): self.bug = bug
    def load(self, mem, p0, p1, q):
        hf, l = q >> 1, 16 * (q & 1)
        w = []
        for p in (p0, p1):
            a = ld16_a2(mem, p + 64*hf + l); b = ld16_a2(mem, p + 64*hf + 32 + l)
            h = ld16_a2(mem, p + 128 + 32*hf + l)
            sp = p + 192 + 8*hf; sc = 0
            for j in range(4): sc |= ((mem.rd(sp + 2*j, 2) >> (8 * (q & 1))) & 255) << (8*j)
            d = mem.rd(p + 208, 2) | (((p + l) & 3) << 19)
            w.append((a, b, h, sc, d))
        return w
    def scales(self, w, q):
        s = []
        for a, b, h, sc, d in w:
            dd = float(h2(d & 0xffff)[0])
            row = []
            for j in range(4):
                v = (sc >> (8*j)) & 255; v = v - 256 if v >= 128 else v
                row.append(f16(np.float32(dd) * np.float32(v)))
            s.append(row)
        return s
    def frag(self, w, s, q, st):
        j, wd = st >> 2, st & 3
        if self.bug == 'qh': j2 = j ^ 1
        else: j2 = j
        out = [0] * 4
        for r in range(2):
            a, b, h, sc, d = w[r]
            sh = d >> 16
            if self.bug == 'shift': sh = 0
            lw = b if j & 1 else a
            ql = funnel_r(lw[wd], lw[wd+1], sh) >> (4 * (j >> 1))
            qh = funnel_r(h[wd], h[wd+1], sh) >> (2 * j2)
            c02 = (ql & 0x000F000F) | ((qh & 0x00030003) << 4) | 0x64006400
            c13 = ((ql >> 8) & 0x000F000F) | (((qh >> 8) & 0x00030003) << 4) | 0x64006400
            for k, c in ((r, c02), (2 + r, c13)):
                v = (h2(c) - f16(1056)).astype(np.float16)
                out[k] = u2((v.astype(np.float32) * np.float32(s[r][j])).astype(np.float16))
        return out
    def xcol(self, q, st):
        return 128 * (q >> 1) + 32 * (st >> 2) + 16 * (q & 1) + 4 * (st & 3)


def stage_x(x, K, n, ntt, sb0, nb):  # the split's x in shared memory
    xs = bytearray(ntt * 8 * TS)
    for t in range(ntt * 8):
        for j in range(SUBS):
            for wd in range(8):
                v = (0, 0)
                if t < n and j < 8 * nb:
                    c = sb0 * 256 + 32*j + 4*wd
                    v = (u2(x[t, c:c+2]), u2(x[t, c+2:c+4]))
                st = (byte_perm(v[0], v[1], 0x5410), byte_perm(v[0], v[1], 0x7632))
                o = t * TS + j * JS + 8 * wd
                xs[o:o+8] = struct.pack('<II', *st)
    return xs


def run(fmt, W, rowb, rows, K, x, n):
    mem = Mem(W); ntt = (n + 7) // 8
    splits = (K // 256 + SB - 1) // SB
    part = np.zeros((splits, n, rows), dtype=np.float32)
    for by in range(splits):
        sb0 = by * SB; nb = min(SB, K // 256 - sb0)
        xs = stage_x(x, K, n, ntt, sb0, nb)
        for tile in range((rows + 15) // 16):
            acc = np.zeros((ntt, 16, 8), dtype=np.float64)
            for b in range(nb):
                A = np.zeros((16, 16, 16), dtype=np.float64)  # [step][row][k]
                Bk = np.zeros((ntt, 16, 16, 8), dtype=np.float64)  # [tile][step][k][col]
                for lane in range(32):
                    g, q = lane >> 2, lane & 3
                    r0 = tile * 16 + g
                    p0 = min(r0, rows - 1) * rowb + (sb0 + b) * fmt.BYTES
                    p1 = min(r0 + 8, rows - 1) * rowb + (sb0 + b) * fmt.BYTES
                    w = fmt.load(mem, p0, p1, q); s = fmt.scales(w, q)
                    for st in range(16):
                        a = fmt.frag(w, s, q, st)
                        for k, (row, kk) in enumerate(((g, 2*q), (g + 8, 2*q), (g, 2*q + 8), (g + 8, 2*q + 8))):
                            A[st, row, kk:kk+2] = h2(a[k]).astype(np.float64)
                        col = 256 * b + fmt.xcol(q, st)
                        for t in range(ntt):
                            o = (g + 8*t) * TS + (col >> 5) * JS + 2 * (col & 31)
                            b0, b1 = struct.unpack('<II', xs[o:o+8])
                            Bk[t, st, 2*q:2*q+2, g] = h2(b0).astype(np.float64)
                            Bk[t, st, 2*q+8:2*q+10, g] = h2(b1).astype(np.float64)
                for t in range(ntt):
                    for st in range(16): acc[t] += A[st] @ Bk[t, st]
            for t in range(ntt):
                for r in range(16):
                    for c in range(8):
                        tok, row = 8*t + c, tile * 16 + r
                        if tok < n and row < rows: part[by, tok, row] = np.float32(acc[t, r, c])
    return part.sum(axis=0, dtype=np.float32)


def bank_check(fmt):  # a half-warp's 8-byte B reads: 32 banks, no two lanes sharing one
    for st in range(16):
        for half in range(2):
            banks = []
            for lane in range(16 * half, 16 * half + 16):
                g, q = lane >> 2, lane & 3
                col = fmt.xcol(q, st)
                o = g * TS + (col >> 5) * JS + 2 * (col & 31)
                banks += [(o // 4) % 32, (o // 4 + 1) % 32]
            assert len(set(banks)) == 32, ("bank conflict", type(fmt).__name__, st, half)


def case(name, qt, fmt, rows, K, n, rng, expect_ok=True):
    # random blocks (every byte pattern is a block), scales of a sane size
    nb = K // 256
    W = bytearray(rng.integers(0, 256, rows * nb * fmt.BYTES, dtype=np.uint8).tobytes())
    for i in range(rows * nb):
        o = i * fmt.BYTES
        d = np.float16(rng.uniform(0.5, 1.5) / 64)
        if qt == Q.Q4_K:
            W[o:o+4] = np.array([d, d / 3], dtype=np.float16).tobytes()
        else:
            W[o+208:o+210] = np.array([d], dtype=np.float16).tobytes()
    rowb = nb * fmt.BYTES
    deq = quants.dequantize(np.frombuffer(bytes(W), dtype=np.uint8).reshape(rows, rowb), qt)
    deq = deq.astype(np.float64)
    x = rng.standard_normal((n, K)).astype(np.float16)
    y = run(fmt, W, rowb, rows, K, x, n)
    ref = x.astype(np.float64) @ deq.T
    mag = np.abs(x.astype(np.float64)) @ np.abs(deq).T
    err = float(np.max(np.abs(y.astype(np.float64) - ref) / (mag + 1e-6)))
    ok = err <= 2e-3
    print(f"{name}: {rows}x{K} n={n}: max error {err:.2e} of sum|wx|" + ("" if ok == expect_ok else
          ("  FAIL" if expect_ok else "  NOT CAUGHT")))
    return ok == expect_ok


def main():
    rng = np.random.default_rng(16)
    good = True
    for fmt in (Q4K(), Q6K()):
        bank_check(fmt)
    good &= case("q4_k", Q.Q4_K, Q4K(), 24, 1280, 9, rng)
    good &= case("q6_k", Q.Q6_K, Q6K(), 24, 1280, 9, rng)  # odd super-blocks 2 mod 4
    good &= case("q6_k", Q.Q6_K, Q6K(), 17, 768, 3, rng)
    for bug, qt, f in (("nibble", Q.Q4_K, Q4K), ("xcol", Q.Q4_K, Q4K), ("qh", Q.Q6_K, Q6K),
                       ("shift", Q.Q6_K, Q6K)):
        good &= case(f"planted {bug}", qt, f(bug), 16, 1280, 8, rng, expect_ok=False)
    print("mmq emulation:", "ok" if good else "FAILED")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
