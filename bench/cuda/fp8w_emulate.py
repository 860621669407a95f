# Host emulation of src/backend/cuda/mvr_fp8w.cuh (FP8 E4M3 in 16-byte
# pieces, f16 x): the x image of mvr_stage_ximg, every lane's piece, its
# scale lanes and block split, f16 fused multiply-adds (one rounding each,
# as HFMA2) and the f32 epilogue, over whole rows, against an f64 product
# of the blocks' scales, decoded codes and x. Rows get block magnitudes 1,
# 10 and 100 in turn (as the kernel test of path 11), so a word counted in
# the wrong block shows. Planted mistakes must fail the kernel test's 2e-3
# of sum |w x| on some row; the emulation itself must stay under 4e-4.
#   .venv/bin/python bench/cuda/fp8w_emulate.py
import os, struct, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mvr_emulate import e4m3

TOL, EMU_MAX = 2e-3, 4e-4


E4 = [e4m3(v) for v in range(256)]
h16 = np.float16


def fma16(a, b, c):  # HFMA2: exact product and sum, one rounding
    return h16(float(a) * float(b) + float(c))


def make_row(rng, cols):
    row = bytearray()
    for b in range(cols // 128):
        sc = np.float32(0.01 * (0.5 + rng.random()) * 10.0**(b % 3))
        row += struct.pack('<f', sc)
        codes = [c for c in rng.integers(0, 256, 160).tolist() if (c & 0x7f) != 0x7f][:128]
        row += bytes(codes)
    return bytes(row)


def reference(row, x):
    a = m = 0.0
    for b in range(len(x) // 128):
        sc = struct.unpack('<f', row[132 * b:132 * b + 4])[0]
        for k in range(128):
            w = sc * E4[row[132 * b + 4 + k]]
            a += w * x[128 * b + k]
            m += abs(w * x[128 * b + k])
    return a, m


def image(x, sig, s):  # mvr_stage_ximg: one step's 528 halves
    img = [h16(0)] * 528
    for p in range(528):
        b, o = p // 132, p % 132
        if o >= 4:
            img[p] = h16(x[512 * s + 128 * b + o - 4] * sig)
    return img


def kernel(row, x, bug=None):
    am = float(np.max(np.abs(x)))
    sig = 2.0**np.floor(np.log2(4.0 / am))
    total = 0.0
    for s in range(len(x) // 512):
        img = image(x, sig, s)
        if bug == 'image':  # codes' x without the scale gaps
            img = [h16(x[512 * s + p] * sig) for p in range(512)] + [h16(0)] * 16
        step = row[528 * s:528 * s + 528]
        words, sw = [], [b'\0' * 4] * 32
        for l in range(32):
            q = [step[16 * l + 4 * e:16 * l + 4 * e + 4] for e in range(4)]
            sb, scale_lane = l >> 3, (l & 7) == 0
            if scale_lane:
                sw[l] = q[sb]
                q[sb] = b'\0' * 4
            words.append(q)
        for l in range(32):
            q, sb, scale_lane = words[l], l >> 3, (l & 7) == 0
            b0, b1 = 16 * l // 132, (16 * l + 15) // 132
            split = sb if scale_lane and l else 4
            if bug == 'split':
                split = 4
            src1 = 8 * b1 + (1 if bug == 'scale_lane' else 0)
            s0 = struct.unpack('<f', sw[8 * b0])[0]
            s1 = struct.unpack('<f', sw[src1])[0]
            xv = img[16 * l:16 * l + 16]
            acc, pre = [h16(0), h16(0)], [h16(0), h16(0)]
            for e in range(4):
                for i in range(4):
                    acc[i & 1] = fma16(h16(E4[q[e][i]]), xv[4 * e + i], acc[i & 1])
                if e < split:
                    pre = list(acc)
            we = step[512 + 4 * (l - 28):516 + 4 * (l - 28)] if l >= 28 and bug != 'extra' else b'\0' * 4
            xe = img[512 + 4 * (l & 3):516 + 4 * (l & 3)]
            for i in range(4):
                acc[i & 1] = fma16(h16(E4[we[i]]), xe[i], acc[i & 1])
            fa, fp = float(acc[0]) + float(acc[1]), float(pre[0]) + float(pre[1])
            total += s1 * fa + (s0 - s1) * fp
    return total / sig


def worst(rows, bug=None):
    w = 0.0
    for row, x in rows:
        r, m = reference(row, x)
        w = max(w, abs(kernel(row, x, bug) - r) / m)
    return w


if __name__ == '__main__':
    rng = np.random.default_rng(11)
    rows = []
    for cols in (512, 1024, 2048):
        for k in range(4):
            rows.append((make_row(rng, cols), rng.standard_normal(cols) * (0.05, 0.5, 3.0, 40.0)[k]))
    ok = True
    e = worst(rows)
    print(f"fp8w emulation: max error {e:.2e} of sum|wx| (must stay under {EMU_MAX:g})")
    ok &= e < EMU_MAX
    for bug in ('split', 'extra', 'scale_lane', 'image'):
        e = worst(rows, bug)
        caught = e > TOL
        print(f"fp8w planted '{bug}': max error {e:.2e}: {'fails as it must' if caught else 'NOT CAUGHT'}")
        ok &= caught
    sys.exit(0 if ok else 1)
