# Host emulation of src/backend/cuda/mvr.cuh (k_mvr): the x rounding of
# matvec.cuh's mv_round_x (4 lanes a group), every lane's loads (byte
# addresses, aligned words, funnel shifts as written) and dot products, and
# the warp's load/compute cursors over units and the register ring. Checked
# against the gguf package's dequantizer within the int8 bound; the wide
# K-quant formats of mvr_w4.cuh too, with their shared-memory bank pattern
# and planted mistakes that must fail, and the 32-value block formats of
# mvr_q4.cuh with theirs. x here is int8 (mvq.cuh's rounding), the design
# these formats had until session 14; they now take 16-bit x as two int8
# planes, which mvr_kx_emulate.py emulates for the session-33 formats.
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

def quant_x32(xv):  # mvq.cuh, one thread a group
    am = f32(max(abs(f32(v)) for v in xv))
    inv = f32(127.0) / am if am > 0 else f32(0)
    dx = am * f32(1.0/127.0)
    qx = []
    for i in range(8):
        a = [f2u(f32(np.float64(xv[4*i+k]) * np.float64(inv) + 12582912.0)) for k in range(4)]
        qx.append(byte_perm(byte_perm(a[0], a[1], 0x0040), byte_perm(a[2], a[3], 0x0040), 0x5410))
    il = ih = 0
    for i in range(4): il = dp4(qx[i], 0x01010101, il); ih = dp4(qx[4+i], 0x01010101, ih)
    return qx, il, ih, f32(dx)

def round_x(x, nw):  # matvec.cuh mv_round_x: 4 lanes a group, shuffles written out
    cols = len(x); xq = bytearray(cols); xm = [None] * (cols // 32); ss = f32(0)
    for g in range(cols // 32):
        v = [[f32(x[32*g + 8*p + k]) for k in range(8)] for p in range(4)]
        if nw is not None:
            for p in range(4):
                for k in range(8):
                    ss = f32(ss + v[p][k] * v[p][k]); v[p][k] = f32(v[p][k] * f32(nw[32*g + 8*p + k]))
        am = [f32(max(abs(t) for t in v[p])) for p in range(4)]
        am = [max(am[p], am[p ^ 1]) for p in range(4)]
        am = [max(am[p], am[p ^ 2]) for p in range(4)]
        s = []
        for p in range(4):
            inv = f32(127.0) / am[p] if am[p] > 0 else f32(0)
            q = []
            for h in range(2):
                a = [f2u(f32(np.float64(v[p][4*h+k]) * np.float64(inv) + 12582912.0)) for k in range(4)]
                q.append(byte_perm(byte_perm(a[0], a[1], 0x0040), byte_perm(a[2], a[3], 0x0040), 0x5410))
            xq[32*g + 8*p: 32*g + 8*p + 8] = struct.pack('<II', q[0], q[1])
            s.append(dp4(q[1], 0x01010101, dp4(q[0], 0x01010101, 0)))
        s = [s[p] + s[p ^ 1] for p in range(4)]
        sh = [s[p ^ 2] for p in range(4)]
        dx = am[0] * f32(1.0/127.0)
        xm[g] = (f2u(dx), ((s[0] & 0xffff) | ((sh[0] << 16) & M32)) & M32)
        # identical to quant_x32 on the normed values
        qx, il, ih, dx2 = quant_x32([v[p][k] for p in range(4) for k in range(8)])
        assert struct.pack('<8I', *qx) == bytes(xq[32*g:32*g+32]) and il == s[0] and ih == sh[0]
        assert f2u(dx2) == xm[g][0]
    return xq, xm, ss

def ldx16(xq, off): return [int.from_bytes(xq[off+4*i:off+4*i+4], 'little') for i in range(4)]

def load_x2(xq, xm, ga, gb, h, ok):
    a = ldx16(xq, 32*ga + 16*h); b = ldx16(xq, 32*gb + 16*h)
    ma, mb = xm[ga], xm[gb]
    da = f32(u2f(ma[0])) if ok else f32(0); db = f32(u2f(mb[0])) if ok else f32(0)
    s = 16 - 16*h
    sa = i32((ma[1] << s) & M32) >> 16; sb_ = i32((mb[1] << s) & M32) >> 16
    return dict(a=a, b=b, da=da, db=db, sa=sa, sb=sb_)

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
        ia = ib = 0
        for i in range(4):
            ia = dp4(w['q'][i] & 0x0F0F0F0F, x['a'][i], ia)
            ib = dp4((w['q'][i] >> 4) & 0x0F0F0F0F, x['b'][i], ib)
        return kq_sum(w['h'], j >> 1, ia, ib, x)

class Q5K:
    LPB, BYTES, BLOCK = 8, 176, 256
    def load(m, blk, j): return dict(h=ld16(m, blk), qh=ld16(m, blk + 16 + 16*(j & 1)), q=ld16(m, blk + 48 + 16*j))
    load_x = Q4K.load_x
    def dot(w, x, j):
        p = j >> 1; ia = ib = 0
        for i in range(4):
            hi = w['qh'][i] >> (2*p); q = w['q'][i]
            ia = dp4((q & 0x0F0F0F0F) | ((hi & 0x01010101) << 4), x['a'][i], ia)
            ib = dp4(((q >> 4) & 0x0F0F0F0F) | (((hi >> 1) & 0x01010101) << 4), x['b'][i], ib)
        return kq_sum(w['h'], p, ia, ib, x)

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
        hs = j & 2; ia = ib = 0
        for i in range(4):
            l = funnel_r(w['l'][i], w['l'][i+1], w['sh'])
            h = funnel_r(w['h'][i], w['h'][i+1], w['sh']) >> hs
            ia = dp4((l & 0x0F0F0F0F) | ((h & 0x03030303) << 4), x['a'][i], ia)
            ib = dp4(((l >> 4) & 0x0F0F0F0F) | (((h >> 4) & 0x03030303) << 4), x['b'][i], ib)
        bs = 8 * (j & 1)
        sa, sb_ = s8(w['s0'] >> bs), s8(w['s1'] >> bs)
        s = x['da'] * f32(sa * (ia - 32*x['sa'])) + x['db'] * f32(sb_ * (ib - 32*x['sb']))
        return f32(f32(half(w['d'])) * s)

class Q80:
    LPB, BYTES, BLOCK = 1, 34, 32
    def load(m, blk, j):
        a = blk & ~3
        return dict(r=[m.rd(a + 4*i, 4) for i in range(9)], sh=16 + (blk & 2) * 8)
    def load_x(xq, xm, b, j, ok):
        return dict(v=ldx16(xq, 32*b) + ldx16(xq, 32*b + 16), dx=f32(u2f(xm[b][0])) if ok else f32(0))
    def dot(w, x, j):
        a = 0
        for i in range(8): a = dp4(funnel_rc(w['r'][i], w['r'][i+1], w['sh']), x['v'][i], a)
        d = f32(half((w['r'][0] >> (w['sh'] - 16)) & 0xffff))
        return f32(d * x['dx'] * f32(a))

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
        y = xm[b][1]
        lo = i32((y << 16) & M32) >> 16; hi = i32(y) >> 16
        return dict(a=ldx16(xq, 32*b), b=ldx16(xq, 32*b + 16), dx=f32(u2f(xm[b][0])) if ok else f32(0),
                    s=lo if self.bug == 'half_sum' else lo + hi)
    def dot(self, w, x, j):
        r, sh = w['r'], w['sh']
        fn = funnel_r if self.bug == 'wrap' else funnel_rc
        if self.a2:
            qw = 1 if self.q5 else 0
            q = [fn(r[qw + i], r[qw + i + 1], sh) for i in range(4)]
            qh = fn(r[0], r[1], sh) if self.q5 else 0
        else:
            q = r[self.NW - 4:]; qh = r[1] if self.q5 else 0
        a = 0
        for i in range(4):
            lo, hi = q[i] & 0x0F0F0F0F, (q[i] >> 4) & 0x0F0F0F0F
            if self.q5:
                lo |= spread4(qh >> (4*i)) << 4
                hi |= spread4(qh >> (16 + 4*i + (4 if self.bug == 'qh_half' else 0))) << 4
            xa, xb = (x['b'], x['a']) if self.bug == 'halves' else (x['a'], x['b'])
            a = dp4(lo, xa[i], a); a = dp4(hi, xb[i], a)
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
        base = 256*b + 64*p
        addrs = [base + 16*(i ^ r) for i in range(4)]
        xs = [ldx16(xq, a) for a in addrs]
        if self.bug == 'bank': xs = [xs[i ^ r ^ (2*f + (p >> 1))] for i in range(4)]  # right values, wrong order of reads
        ga, gb = xm[8*b + 2*p], xm[8*b + 2*p + 1]  # one 16-byte load
        addrs.append(len(xq) + 8*(8*b + 2*p))
        def gsum(y):
            lo = i32((y << 16) & M32) >> 16; hi = i32(y) >> 16
            return lo if self.bug == 'half_sum' else lo + hi
        use_ok = ok or self.bug == 'past_end'
        return dict(x=xs, f=f, mf=(0x0F0F0F0F << (4*f)) & M32 if self.bug != 'mask' else 0x0F0F0F0F,
                    da=f32(u2f(ga[0])) if use_ok else f32(0), db=f32(u2f(gb[0])) if use_ok else f32(0),
                    sa=gsum(ga[1]), sb=gsum(gb[1]), addrs=addrs)
    def dot(self, w, x, p):
        q = w['q0'] + w['q1']; xv = x['x'][0] + x['x'][1] + x['x'][2] + x['x'][3]; f = x['f']
        ia = ib = 0
        if not self.q5:
            mf = x['mf']
            for i in range(8):
                ia = dp4us(q[i] & mf, xv[i], ia); ib = dp4us(q[i] & (~mf & M32), xv[8 + i], ib)
            lo, hi = (ib, ia) if f else (ia, ib)
            if self.bug == 'no_swap': lo, hi = ia, ib
            hi = hi if self.bug == 'no_shift' else hi >> 4
        else:
            qh = w['h0'] + w['h1']
            s, ha, hb = 4*f, 2*p + f, 2*p + 1 - f
            if self.bug == 'qh_bit': hb = 2*p + f
            for i in range(8):
                va = ((q[i] >> s) & 0x0F0F0F0F) | (((qh[i] >> ha) & 0x01010101) << 4)
                vb = ((q[i] >> (4 - s)) & 0x0F0F0F0F) | (((qh[i] >> hb) & 0x01010101) << 4)
                ia = dp4(va, xv[i], ia); ib = dp4(vb, xv[8 + i], ib)
            lo, hi = (ib, ia) if f else (ia, ib)
            if self.bug == 'no_swap': lo, hi = ia, ib
        return kq_sum(w['h'], p, lo, hi, dict(da=x['da'], db=x['db'], sa=x['sa'], sb=x['sb']))

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
        bound = sum(abs(xt[32*g:32*g+32]).max() / 254 * abs(deq[r, 32*g:32*g+32]).sum() for g in range(cols // 32))
        e = abs(y - ref) / bound
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
                    print(f"{name} cols {cols:5d} base {base} norm {int(norm)}: error {e:.3f} of the int8 bound {'ok' if ok else 'FAIL'}")
    for qt, name in ((Q.Q4_0, "q4_0"), (Q.Q4_1, "q4_1"), (Q.Q5_0, "q5_0"), (Q.Q5_1, "q5_1")):
        F = Q32(qt)
        for cols in (800, 1280, 96):
            for base in (256, 258) if F.BYTES % 4 else (256,):
                for norm, xmean in ((False, 0.0), (True, 0.0), (False, 2.0)):
                    e = check(F, qt, cols, 3, base, rng, norm, xmean)
                    ok = e <= 1.0
                    fails += not ok
                    print(f"{name} cols {cols:5d} base {base} norm {int(norm)} x mean {xmean}: error {e:.3f} of the int8 bound {'ok' if ok else 'FAIL'}")
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
                print(f"{name} w4 cols {cols:5d} norm {int(norm)} x mean {xmean}: error {e:.3f} of the int8 bound {'ok' if ok else 'FAIL'}")
        xq, xm, _ = round_x(rng.standard_normal(4096).astype(np.float32), None)
        ways = bank_check(F, xq, xm, 16)
        fails += ways != 1
        print(f"{name} w4 x reads: {ways}-way bank conflicts {'ok' if ways == 1 else 'FAIL'}")
    # Planted mistakes: each must fail (the error past the int8 bound, or a
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
    sys.exit(1 if fails else 0)
