# Host emulation of src/backend/cuda/mvr.cuh (k_mvr): the x rounding of
# mvr_round_x16 (16 bits per 32 values, held as a lo and a hi int8 plane: v
# = lo + 128 hi), every lane's loads (byte addresses, aligned words, funnel
# shifts as written) and dot products on both planes, and the warp's
# load/compute cursors over units and the register ring. Checked against the
# gguf package's dequantizer within the 16-bit rounding bound; the wide
# K-quant formats of mvr_w4.cuh too, with their shared-memory bank pattern
# and planted mistakes that must fail, the 32-value block formats of
# mvr_q4.cuh with theirs, and FP8 on f32 x (mvr_kx_emulate.py: mvr_kx.cuh's
# formats).
import struct, sys
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

M32 = 0xffffffff
f32 = np.float32

class Mem:
    def __init__(self, data, lo, hi):
        self.b = data; self.lo = lo; self.hi = hi; self.reads = []
    def rd(self, a, n):
        assert a % n == 0, ("misaligned", a, n)
        assert self.lo <= a and a + n <= self.hi, ("out of allocation", a, n, self.lo, self.hi)
        self.reads.append((a, n))
        return int.from_bytes(self.b[a:a+n], 'little')

def half(v): return float(np.frombuffer(struct.pack('<H', v & 0xffff), dtype=np.float16)[0])
def funnel_r(lo, hi, sh): return (((hi << 32) | lo) >> (sh & 31)) & M32
def funnel_rc(lo, hi, sh): return (((hi << 32) | lo) >> min(sh, 32)) & M32
def sb(v): return v - 256 if v >= 128 else v
def s8(v): v &= 255; return v - 256 if v >= 128 else v
def dp4(a, b, c):
    return c + sum(sb((a >> (8*k)) & 255) * sb((b >> (8*k)) & 255) for k in range(4))
def byte_perm(x, y, s):
    bs = [(x >> (8*k)) & 255 for k in range(4)] + [(y >> (8*k)) & 255 for k in range(4)]
    return sum(bs[(s >> (4*k)) & 7] << (8*k) for k in range(4))
def f2u(f): return struct.unpack('<I', struct.pack('<f', f32(f)))[0]
def u2f(u): return struct.unpack('<f', struct.pack('<I', u & M32))[0]
def i32(v): v &= M32; return v - (1 << 32) if v >= (1 << 31) else v

L16 = 16383  # |v| <= L16

def round_x(x, nw):
    # mvr_round_x16: per group of 32 (times the folded norm's weights nw
    # unless None), d = max|v| / 16383, v = rn(v 16383 / max|v|); the lo plane
    # (v & 127) in bytes [0, cols), the hi plane (v >> 7) in [cols, 2 cols);
    # xm[g] = (d's bits, sum of v over [0, 16), over [16, 32), over all 32);
    # ss: the sum of squares of x (the norm's).
    cols = len(x); xq = bytearray(2 * cols); xm = []; ss = f32(0)
    for g in range(cols // 32):
        v = []
        for k in range(32):
            t = f32(x[32*g + k])
            if nw is not None: ss = f32(ss + t * t); t = f32(t * f32(nw[32*g + k]))
            v.append(t)
        am = f32(max(abs(t) for t in v))
        inv = f32(L16) / am if am > 0 else f32(0)
        q = [int(np.rint(f32(t * inv))) for t in v]  # __float2int_rn: ties to even
        assert all(abs(t) <= L16 for t in q)
        for k, t in enumerate(q):
            xq[32*g + k] = t & 127; xq[cols + 32*g + k] = (t >> 7) & 255
        s0, s1 = sum(q[:16]), sum(q[16:])
        xm.append((f2u(am * f32(1.0 / L16)), s0, s1, s0 + s1))
    return xq, xm, ss

def ldx16(xq, off): return [int.from_bytes(xq[off+4*i:off+4*i+4], 'little') for i in range(4)]

def load_x2(xq, xm, ga, gb, h, ok):  # mvr_load_x2
    cols = len(xq) // 2
    return dict(a=ldx16(xq, 32*ga + 16*h), b=ldx16(xq, 32*gb + 16*h),
                ah=ldx16(xq, cols + 32*ga + 16*h), bh=ldx16(xq, cols + 32*gb + 16*h),
                da=f32(u2f(xm[ga][0])) if ok else f32(0), db=f32(u2f(xm[gb][0])) if ok else f32(0),
                sa=xm[ga][2 if h else 1], sb=xm[gb][2 if h else 1])

def load_xg(xq, xm, g, ok):  # mvr_q32::load_x: group g whole (Q8_0 takes it too)
    cols = len(xq) // 2
    return dict(a=ldx16(xq, 32*g), b=ldx16(xq, 32*g + 16), ah=ldx16(xq, cols + 32*g),
                bh=ldx16(xq, cols + 32*g + 16), dx=f32(u2f(xm[g][0])) if ok else f32(0),
                s=xm[g][3], s0=xm[g][1])

def dpx(w, xl, xh, acc):  # mvr_dp4x: w times both planes
    return dp4(w, xl, acc[0]), dp4(w, xh, acc[1])

def kq_sum(h, p, ia, ib, x):
    sh = 16 * (p & 1)
    y, z, v = h[1] >> sh, h[2] >> sh, h[3] >> sh
    sc = (y & 0x3F3F) if p < 2 else (v & 0x0F0F) | ((y >> 2) & 0x3030)
    mn = (z & 0x3F3F) if p < 2 else ((v >> 4) & 0x0F0F) | ((z >> 2) & 0x3030)
    d = f32(half(h[0] & 0xffff)); dmin = f32(half(h[0] >> 16))
    fs = x['da'] * f32((sc & 0xff) * ia) + x['db'] * f32((sc >> 8) * ib)
    fm = x['da'] * f32((mn & 0xff) * x['sa']) + x['db'] * f32((mn >> 8) * x['sb'])
    return f32(d * fs - dmin * fm)

def ld16(m, p): assert p % 16 == 0; return [m.rd(p + 4*i, 4) for i in range(4)]
def ld16_a2(m, p):
    a = p & ~3
    r = [m.rd(a + 4*i, 4) for i in range(4)]
    r.append(m.rd(a + 16, 2) if p & 2 else 0)
    return r

class Q4K:
    LPB, BYTES, BLOCK = 8, 144, 256
    def load(m, blk, j): return dict(h=ld16(m, blk), q=ld16(m, blk + 16 + 16*j))
    def load_x(xq, xm, b, j, ok):
        g = 8*b + 2*(j >> 1); return load_x2(xq, xm, g, g + 1, j & 1, ok)
    def dot(w, x, j):
        a = b = (0, 0)
        for i in range(4):
            a = dpx(w['q'][i] & 0x0F0F0F0F, x['a'][i], x['ah'][i], a)
            b = dpx((w['q'][i] >> 4) & 0x0F0F0F0F, x['b'][i], x['bh'][i], b)
        return kq_sum(w['h'], j >> 1, a[0] + 128*a[1], b[0] + 128*b[1], x)

class Q5K:
    LPB, BYTES, BLOCK = 8, 176, 256
    def load(m, blk, j): return dict(h=ld16(m, blk), qh=ld16(m, blk + 16 + 16*(j & 1)), q=ld16(m, blk + 48 + 16*j))
    load_x = Q4K.load_x
    def dot(w, x, j):
        p = j >> 1; a = b = (0, 0)
        for i in range(4):
            hi = w['qh'][i] >> (2*p); q = w['q'][i]
            a = dpx((q & 0x0F0F0F0F) | ((hi & 0x01010101) << 4), x['a'][i], x['ah'][i], a)
            b = dpx(((q >> 4) & 0x0F0F0F0F) | (((hi >> 1) & 0x01010101) << 4), x['b'][i], x['bh'][i], b)
        return kq_sum(w['h'], p, a[0] + 128*a[1], b[0] + 128*b[1], x)

class Q6K:
    LPB, BYTES, BLOCK = 8, 210, 256
    def load(m, blk, j):
        n, q = j >> 2, j & 3
        return dict(l=ld16_a2(m, blk + 64*n + 16*q), h=ld16_a2(m, blk + 128 + 32*n + 16*(q & 1)),
                    s0=m.rd(blk + 192 + 8*n + (q & 2), 2), s1=m.rd(blk + 196 + 8*n + (q & 2), 2),
                    d=m.rd(blk + 208, 2), sh=(blk & 2) * 8)
    def load_x(xq, xm, b, j, ok):
        g = 8*b + 4*(j >> 2) + ((j >> 1) & 1); return load_x2(xq, xm, g, g + 2, j & 1, ok)
    def dot(w, x, j):
        hs = j & 2; a = b = (0, 0)
        for i in range(4):
            l = funnel_r(w['l'][i], w['l'][i+1], w['sh'])
            h = funnel_r(w['h'][i], w['h'][i+1], w['sh']) >> hs
            a = dpx((l & 0x0F0F0F0F) | ((h & 0x03030303) << 4), x['a'][i], x['ah'][i], a)
            b = dpx(((l >> 4) & 0x0F0F0F0F) | (((h >> 4) & 0x03030303) << 4), x['b'][i], x['bh'][i], b)
        ia, ib = a[0] + 128*a[1], b[0] + 128*b[1]
        bs = 8 * (j & 1)
        sa, sb_ = s8(w['s0'] >> bs), s8(w['s1'] >> bs)
        s = x['da'] * f32(sa * (ia - 32*x['sa'])) + x['db'] * f32(sb_ * (ib - 32*x['sb']))
        return f32(f32(half(w['d'])) * s)

class Q80:
    LPB, BYTES, BLOCK = 1, 34, 32
    def load(m, blk, j):
        a = blk & ~3
        return dict(r=[m.rd(a + 4*i, 4) for i in range(9)], sh=16 + (blk & 2) * 8)
    def load_x(xq, xm, b, j, ok): return load_xg(xq, xm, b, ok)
    def dot(w, x, j):
        xv, yv = x['a'] + x['b'], x['ah'] + x['bh']; a = (0, 0)
        for i in range(8): a = dpx(funnel_rc(w['r'][i], w['r'][i+1], w['sh']), xv[i], yv[i], a)
        d = f32(half((w['r'][0] >> (w['sh'] - 16)) & 0xffff))
        return f32(d * x['dx'] * f32(a[0] + 128*a[1]))

# The 32-value block formats of mvr_q4.cuh (Q4_0, Q4_1, Q5_0, Q5_1): a lane
# a block, the aligned words under it (Q4_0, Q5_0 from the 4-byte boundary
# at or below the block, joined by clamped funnel shifts), x the block's
# group with its sum carrying the offsets. bug names a planted mistake.
def spread4(v): return ((v & 0xF) * 0x00204081) & 0x01010101

class Q32:
    LPB, BLOCK = 1, 32
    def __init__(self, qt, bug=None):
        self.qt, self.bug = qt, bug
        self.a2 = qt in (Q.Q4_0, Q.Q5_0); self.q5 = qt in (Q.Q5_0, Q.Q5_1)
        self.BYTES = {Q.Q4_0: 18, Q.Q4_1: 20, Q.Q5_0: 22, Q.Q5_1: 24}[qt]
        self.NW = 6 if self.q5 else 5
    def load(self, m, blk, j):
        a = blk & ~3 if self.a2 else blk
        return dict(r=[m.rd(a + 4*i, 4) for i in range(self.NW)], sh=16 + (blk & 2) * 8)
    def load_x(self, xq, xm, b, j, ok):
        x = load_xg(xq, xm, b, ok)
        if self.bug == 'half_sum': x['s'] = x['s0']
        return x
    def dot(self, w, x, j):
        r, sh = w['r'], w['sh']
        fn = funnel_r if self.bug == 'wrap' else funnel_rc
        if self.a2:
            qw = 1 if self.q5 else 0
            q = [fn(r[qw + i], r[qw + i + 1], sh) for i in range(4)]
            qh = fn(r[0], r[1], sh) if self.q5 else 0
        else:
            q = r[self.NW - 4:]; qh = r[1] if self.q5 else 0
        acc = (0, 0)
        for i in range(4):
            lo, hi = q[i] & 0x0F0F0F0F, (q[i] >> 4) & 0x0F0F0F0F
            if self.q5:
                lo |= spread4(qh >> (4*i)) << 4
                hi |= spread4(qh >> (16 + 4*i + (4 if self.bug == 'qh_half' else 0))) << 4
            xa, xb, ya, yb = x['a'], x['b'], x['ah'], x['bh']
            if self.bug == 'halves': xa, xb, ya, yb = xb, xa, yb, ya
            acc = dpx(lo, xa[i], ya[i], acc); acc = dpx(hi, xb[i], yb[i], acc)
        a = acc[0] + 128*acc[1]
        if self.a2:
            d = f32(half((r[0] >> (sh - 16)) & 0xffff))
            off = 16 if self.q5 else 8
            if self.bug == 'offset': off = 24 - off  # the other type's
            return f32(d * x['dx'] * f32(a - off * x['s']))
        d = f32(half(r[0] & 0xffff)); mm = f32(half(r[0] >> 16))
        if self.bug == 'no_min': mm = f32(0)
        return f32(x['dx'] * f32(d * f32(a) + mm * f32(x['s'])))

# The wide K-quant formats (mvr_w4.cuh): 4 lanes a super-block, lane p
# takes qs bytes [32p, 32p + 32) (Q5_K: all 32 qh bytes, bits 2p, 2p + 1),
# halves in the order e = p / 2; x chunk i ^ (2f + e), f = b % 2. bug names
# a planted mistake (the emulation must fail it).
def dp4us(a, b, c):
    return c + sum(((a >> (8*k)) & 255) * sb((b >> (8*k)) & 255) for k in range(4))

class W4:
    LPB, BLOCK = 4, 256
    def __init__(self, qt, bug=None):
        self.q5 = qt == Q.Q5_K; self.BYTES = 176 if self.q5 else 144; self.bug = bug
    def load(self, m, blk, p):
        e = 0 if self.bug == 'e_weights' else p >> 1
        w = dict(h=ld16(m, blk))
        qs = blk + (48 if self.q5 else 16) + 32*p
        if self.q5: w['h0'] = ld16(m, blk + 16 + 16*e); w['h1'] = ld16(m, blk + 32 - 16*e)
        w['q0'] = ld16(m, qs + 16*e); w['q1'] = ld16(m, qs + 16 - 16*e)
        return w
    def load_x(self, xq, xm, b, p, ok):
        f = b & 1
        r = 2*(0 if self.bug == 'bank' else f) + (p >> 1)
        if self.bug == 'e_x': r = 2*f
        cols = len(xq) // 2
        base = 256*b + 64*p
        addrs = [base + 16*(i ^ r) for i in range(4)]
        xs = [ldx16(xq, a) for a in addrs]; ys = [ldx16(xq, cols + a) for a in addrs]
        if self.bug == 'bank':  # right values, wrong order of reads
            xs = [xs[i ^ r ^ (2*f + (p >> 1))] for i in range(4)]
            ys = [ys[i ^ r ^ (2*f + (p >> 1))] for i in range(4)]
        addrs += [cols + a for a in addrs]  # the hi plane's loads (cols: a multiple of 256)
        ga, gb = xm[8*b + 2*p], xm[8*b + 2*p + 1]  # two 16-byte loads (2-way: not in addrs)
        def gsum(m): return m[1] if self.bug == 'half_sum' else m[3]  # whole-group sums
        use_ok = ok or self.bug == 'past_end'
        return dict(x=xs, y=ys, f=f, mf=(0x0F0F0F0F << (4*f)) & M32 if self.bug != 'mask' else 0x0F0F0F0F,
                    da=f32(u2f(ga[0])) if use_ok else f32(0), db=f32(u2f(gb[0])) if use_ok else f32(0),
                    sa=gsum(ga), sb=gsum(gb), addrs=addrs)
    def dot(self, w, x, p):
        q = w['q0'] + w['q1']; f = x['f']
        xv = x['x'][0] + x['x'][1] + x['x'][2] + x['x'][3]; yv = x['y'][0] + x['y'][1] + x['y'][2] + x['y'][3]
        ia = ib = ja = jb = 0
        if not self.q5:
            mf = x['mf']; nf = ~mf & M32
            for i in range(8):
                ia = dp4us(q[i] & mf, xv[i], ia); ja = dp4us(q[i] & mf, yv[i], ja)
                ib = dp4us(q[i] & nf, xv[8 + i], ib); jb = dp4us(q[i] & nf, yv[8 + i], jb)
            ia += 128*ja; ib += 128*jb
            lo, hi = (ib, ia) if f else (ia, ib)
            if self.bug == 'no_swap': lo, hi = ia, ib
            hi = hi if self.bug == 'no_shift' else hi >> 4
        else:
            qh = w['h0'] + w['h1']
            s, ha, hb = 4*f, 2*p + f, 2*p + 1 - f
            if self.bug == 'qh_bit': hb = 2*p + f
            a = b = (0, 0)
            for i in range(8):
                va = ((q[i] >> s) & 0x0F0F0F0F) | (((qh[i] >> ha) & 0x01010101) << 4)
                vb = ((q[i] >> (4 - s)) & 0x0F0F0F0F) | (((qh[i] >> hb) & 0x01010101) << 4)
                a = dpx(va, xv[i], yv[i], a); b = dpx(vb, xv[8 + i], yv[8 + i], b)
            ia, ib = a[0] + 128*a[1], b[0] + 128*b[1]
            lo, hi = (ib, ia) if f else (ia, ib)
            if self.bug == 'no_swap': lo, hi = ia, ib
        return kq_sum(w['h'], p, lo, hi, dict(da=x['da'], db=x['db'], sa=x['sa'], sb=x['sb']))

# FP8 E4M3 / E5M2 (mvr.cuh's mvr_fp8: f32 x, blocks of an f32 scale and 128
# codes): lane j of 8 takes code words j, j + 8, j + 16, j + 24 and x's
# float4s of the same index, two f32 accumulators (even and odd values).
def e4m3(v):
    e, m = (v >> 3) & 15, v & 7
    return (-1.0 if v & 0x80 else 1.0) * (m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0**(e - 7))
def e5m2(v): return half(v << 8)  # the top byte of a half
FP8_DEC = {False: [e4m3(v) for v in range(256)], True: [e5m2(v) for v in range(256)]}

def fma32(a, b, c): return f32(np.float64(a) * np.float64(b) + np.float64(c))  # fmaf

class FP8:
    LPB, BYTES, BLOCK = 8, 132, 128
    def __init__(self, e5, bug=None): self.e5, self.bug = e5, bug
    def load(self, m, blk, j):
        k = (lambda i: 4 * (4 * j + i)) if self.bug == 'words' else (lambda i: 4 * j + 32 * i)
        return dict(d=m.rd(blk, 4), q=[m.rd(blk + 4 + k(i), 4) for i in range(4)])
    def load_x(self, x, xm, b, j, ok):
        return dict(v=[x[128*b + 4*(j + 8*i): 128*b + 4*(j + 8*i) + 4] for i in range(4)], ok=ok)
    def dot(self, w, x, j):
        dec = FP8_DEC[not self.e5 if self.bug == 'decoder' else self.e5]
        a0 = a1 = f32(0)
        for i in range(4):
            f = [f32(dec[(w['q'][i] >> (8*k)) & 255]) for k in range(4)]
            v = x['v'][i]
            a0 = fma32(f[0], v[0], a0); a1 = fma32(f[1], v[1], a1)
            a0 = fma32(f[2], v[2], a0); a1 = fma32(f[3], v[3], a1)
        return f32(f32(u2f(w['d'])) * f32(a0 + a1)) if x['ok'] or self.bug == 'past_end' else f32(0)

def fp8_check(F, cols, rows, rng):
    # Rows of random codes (no NaN codes) and scales of magnitudes 1, 10, 100
    # by block, against the f64 product of the decoded blocks; error as a share
    # of 1e-5 sum |w x| (f32 sums).
    dec = FP8_DEC[F.e5]
    bpr = cols // 128; rb = 132 * bpr
    mem = bytearray(256); deq = np.zeros((rows, cols))
    for r in range(rows):
        for b in range(bpr):
            sc = np.float32(0.01 * (0.5 + rng.random()) * 10.0**(b % 3))
            codes = [c for c in rng.integers(0, 256, 200).tolist()
                     if (c & 0x7f) != 0x7f and (not F.e5 or (c & 0x7c) != 0x7c)][:128]
            mem += struct.pack('<f', sc) + bytes(codes)
            deq[r, 128*b:128*b + 128] = float(sc) * np.array([dec[c] for c in codes])
    mem += bytearray(16)
    m = Mem(mem, 256, 256 + rows * rb + 16)
    x = (rng.standard_normal(cols) * rng.uniform(0.2, 5)).astype(np.float32)
    worst = 0.0
    for r in range(rows):
        with np.errstate(all='ignore'):  # a planted wrong decoder meets inf and NaN codes
            y = row_product(F, m, 256 + r * rb, bpr, x, None)
        e = abs(y - float(deq[r] @ x.astype(np.float64))) / (1e-5 * float(abs(deq[r] * x).sum()))
        worst = max(worst, e) if e == e else float('inf')
    return worst

# Shared-memory banks of the wide formats' x reads: a 16-byte load runs in
# four phases of 8 lanes; a phase is conflict-free when its lanes' 16-byte
# quads (address / 16 mod 8) differ.
def bank_check(F, xq, xm, bpr):
    worst = 1
    for s in range((bpr + 7) // 8):
        ad = []
        for lane in range(32):
            sub, p = lane // 4, lane % 4
            b = s*8 + sub
            ad.append(F.load_x(xq, xm, min(b, bpr - 1), p, b < bpr)['addrs'])
        for k in range(len(ad[0])):
            for ph in range(4):
                lanes = [l for l in range(8*ph, 8*ph + 8) if s*8 + l // 4 < bpr]
                addrs = {ad[l][k] for l in lanes}
                quads = [(a // 16) % 8 for a in addrs]
                worst = max(worst, max(quads.count(v) for v in set(quads)))
    return worst

def row_product(F, m, row_start, bpr, xq, xm):
    BPS = 32 // F.LPB; steps = (bpr + BPS - 1) // BPS
    acc = [f32(0)] * 32
    for s in range(steps):
        for lane in range(32):
            sub, j = lane // F.LPB, lane % F.LPB
            b = s*BPS + sub; ok = b < bpr
            bc = min(b, bpr - 1)  # load clamps the same way
            n0 = len(m.reads)
            w = F.load(m, row_start + bc*F.BYTES, j)
            blk = row_start + bc*F.BYTES
            for (a, n) in m.reads[n0:]:  # within the block, up to the next 4-byte boundary
                assert a >= (blk & ~3) and a + n <= ((blk + F.BYTES + 3) & ~3), ("read outside block", a, n, blk)
            acc[lane] = f32(acc[lane] + F.dot(w, F.load_x(xq, xm, bc if ok else bpr - 1, j, ok), j))
    return float(sum(np.float64(a) for a in acc))

def bound16(w, x):
    # The 16-bit rounding bound (the kernel test's): sum over groups of
    # max|x| / (2 16383) times sum |w|, plus 1e-5 of sum |w x| for f32 sums.
    return sum(abs(x[32*g:32*g+32]).max() / (2 * L16) * abs(w[32*g:32*g+32]).sum()
               for g in range(len(x) // 32)) + 1e-5 * float(abs(w * x).sum())

def random_kblocks(rng, qt, nblk, BY):
    qw = rng.integers(0, 256, size=nblk * BY, dtype=np.uint8)
    for k in range(nblk):
        o = k * BY + (208 if qt == Q.Q6_K else 0)
        for j in range(1 if qt == Q.Q6_K else 2):
            h = np.float16(rng.uniform(0.001, 0.01)).view(np.uint16)
            qw[o + 2*j] = h & 255; qw[o + 2*j + 1] = h >> 8
    return qw

def check(F, qt, cols, rows, base, rng, norm, xmean=0.0):
    bpr = cols // F.BLOCK; rb = bpr * F.BYTES
    if qt in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        w = (rng.standard_normal((rows, cols)) + (0.7 if qt in (Q.Q4_1, Q.Q5_1) else 0)).astype(np.float32)
        qw = quants.quantize(w, qt).reshape(-1)
    else:
        qw = random_kblocks(rng, qt, rows * bpr, F.BYTES)
    deq = quants.dequantize(qw.reshape(rows, rb), qt).astype(np.float64)
    mem = bytearray(base) + qw.tobytes() + bytearray(16)
    m = Mem(mem, base & ~15, base + rows * rb + 16)  # allocations are 256-aligned; a view may start 2 mod 4
    x = ((rng.standard_normal(cols) + xmean) * rng.uniform(0.2, 5)).astype(np.float32)
    nw = (0.3 + 1.4 * rng.random(cols)).astype(np.float32) if norm else None
    xq, xm, ss = round_x(x, nw)
    xr = x.astype(np.float64) * (nw if norm else 1)
    rs = 1.0 / np.sqrt(float(ss) / cols + 1e-5) if norm else 1.0
    worst = 0
    for r in range(rows):
        y = row_product(F, m, base + r * rb, bpr, xq, xm) * rs
        xt = xr * rs
        ref = float(deq[r] @ xt)
        e = abs(y - ref) / bound16(deq[r], xt)
        worst = max(worst, e) if e == e else float('inf')  # NaN fails
    return worst

# The warp's cursors and ring (k_mvr's main loop written out): every item of
# every unit computed once, from the slot its load filled.
def ring_check(units, steps, gw, tw, D, GLU):
    M = 2 if GLU else 1; items = M * steps
    total = ((units - 1 - gw) // tw + 1) * items if gw < units else 0
    w = [None] * (D + 1)
    lu, li = gw, 0
    done = []
    def load(slot, m):
        nonlocal lu, li
        assert (li & 1 if GLU else 0) == m, "item parity"
        w[slot] = (lu, li); li += 1
        if li == items: li, lu = 0, lu + tw
    for k in range(D):
        if k < total: load(k, k & 1 if GLU else 0)
    cu, ci = gw, 0
    i0 = 0
    while i0 < total:
        for k in range(D + 1):
            if i0 + k >= total: break
            if i0 + k + D < total: load((k + D) % (D + 1), (k + D) & 1 if GLU else 0)
            assert w[k] == (cu, ci), ("slot mismatch", w[k], cu, ci)
            assert (ci & 1 if GLU else 0) == (k & 1 if GLU else 0)
            done.append((cu, ci)); ci += 1
            if ci == items: ci, cu = 0, cu + tw
        i0 += D + 1
    exp = [(u, i) for u in range(gw, units, tw) for i in range(items)]
    assert done == exp, ("coverage", gw, done[:5], exp[:5])

def host_grid(units, n, per_sm, sms, nt):
    nw = nt // 32
    slots = max(per_sm * sms * nw // n, nw)
    per_warp = (units + slots - 1) // slots
    return (((units + per_warp - 1) // per_warp) + nw - 1) // nw

if __name__ == '__main__':
    rng = np.random.default_rng(7)
    fails = 0
    for D in (1, 2, 3):
        for GLU in (False, True):
            if GLU and (D + 1) % 2: continue
            for units, steps, tw in ((45, 1, 8), (7, 14, 3), (100, 4, 32), (3, 2, 8), (64, 3, 64)):
                for gw in range(tw):
                    ring_check(units, steps, gw, tw, D, GLU)
    print("ring and cursors: ok")
    for name, F, qt in (("q4_k", Q4K, Q.Q4_K), ("q5_k", Q5K, Q.Q5_K), ("q6_k", Q6K, Q.Q6_K), ("q8_0", Q80, Q.Q8_0)):
        for cols in ((768, 1280, 2816) if F.BLOCK == 256 else (800, 1280, 96)):
            for base in (256, 258) if F.BYTES % 4 else (256,):
                for norm in (False, True):
                    e = check(F, qt, cols, 3, base, rng, norm)
                    ok = e <= 1.0
                    fails += not ok
                    print(f"{name} cols {cols:5d} base {base} norm {int(norm)}: error {e:.3f} of the 16-bit bound {'ok' if ok else 'FAIL'}")
    for qt, name in ((Q.Q4_0, "q4_0"), (Q.Q4_1, "q4_1"), (Q.Q5_0, "q5_0"), (Q.Q5_1, "q5_1")):
        F = Q32(qt)
        for cols in (800, 1280, 96):
            for base in (256, 258) if F.BYTES % 4 else (256,):
                for norm, xmean in ((False, 0.0), (True, 0.0), (False, 2.0)):
                    e = check(F, qt, cols, 3, base, rng, norm, xmean)
                    ok = e <= 1.0
                    fails += not ok
                    print(f"{name} cols {cols:5d} base {base} norm {int(norm)} x mean {xmean}: error {e:.3f} of the 16-bit bound {'ok' if ok else 'FAIL'}")
        bugs = ['half_sum', 'halves'] + (['wrap', 'offset'] if F.a2 else ['no_min'])
        bugs += ['qh_half'] if F.q5 else []
        for bug in bugs:
            B = Q32(qt, bug)
            caught = False
            try:
                caught = max(check(B, qt, 800, 2, base, rng, False, xm)
                             for base in ((256, 258) if B.BYTES % 4 else (256,)) for xm in (0.0, 2.0)) > 1.0
            except AssertionError:
                caught = True
            fails += not caught
            print(f"{name} planted '{bug}': {'fails as it must' if caught else 'NOT CAUGHT'}")
    for qt, name in ((Q.Q4_K, "q4_k"), (Q.Q5_K, "q5_k")):
        F = W4(qt)
        for cols in (256, 768, 1280, 2048, 2816, 4096):
            for norm, xmean in ((False, 0.0), (True, 0.0), (False, 2.0)):
                e = check(F, qt, cols, 3, 256, rng, norm, xmean)
                ok = e <= 1.0
                fails += not ok
                print(f"{name} w4 cols {cols:5d} norm {int(norm)} x mean {xmean}: error {e:.3f} of the 16-bit bound {'ok' if ok else 'FAIL'}")
        xq, xm, _ = round_x(rng.standard_normal(4096).astype(np.float32), None)
        ways = bank_check(F, xq, xm, 16)
        fails += ways != 1
        print(f"{name} w4 x reads: {ways}-way bank conflicts {'ok' if ways == 1 else 'FAIL'}")
    # Planted mistakes: each must fail (the error past the 16-bit bound, or a
    # bank conflict for 'bank'); x with a mean of 2 standard deviations too,
    # so that the mins' term (x's group sums) weighs.
    for qt, name, bugs in ((Q.Q4_K, "q4_k", ('e_weights', 'e_x', 'no_swap', 'no_shift', 'mask',
                                             'half_sum', 'past_end', 'bank')),
                           (Q.Q5_K, "q5_k", ('e_weights', 'no_swap', 'qh_bit', 'half_sum', 'bank'))):
        for bug in bugs:
            F = W4(qt, bug)
            if bug == 'bank':
                xq, xm, _ = round_x(rng.standard_normal(4096).astype(np.float32), None)
                caught = bank_check(F, xq, xm, 16) > 1 and check(F, qt, 768, 2, 256, rng, False) <= 1.0
            else:
                caught = max(check(F, qt, cols, 2, 256, rng, False, xm)
                             for cols in (768, 2048) for xm in (0.0, 2.0)) > 1.0
            fails += not caught
            print(f"{name} w4 planted '{bug}': {'fails as it must' if caught else 'NOT CAUGHT'}")
    for e5, name in ((False, "fp8_e4m3"), (True, "fp8_e5m2")):
        for cols in (128, 640, 1280):
            e = fp8_check(FP8(e5), cols, 3, rng)
            ok = e <= 1.0
            fails += not ok
            print(f"{name} cols {cols:5d}: error {e:.3f} of 1e-5 sum |w x| {'ok' if ok else 'FAIL'}")
        for bug in ('words', 'decoder', 'past_end'):
            try:
                caught = fp8_check(FP8(e5, bug), 640, 2, rng) > 1.0
            except AssertionError:
                caught = True
            fails += not caught
            print(f"{name} planted '{bug}': {'fails as it must' if caught else 'NOT CAUGHT'}")
    sys.exit(1 if fails else 0)
