"""Host emulation of the register-streamed kernel's split grid (mvr.cuh).

The f32-x types give each block a contiguous share of the units (rows) and
split the share's items evenly among the block's warps (mvr_share, 32-bit
arithmetic); a warp keeps its partial sums of a unit it does not hold whole
in part[warp][0] (its first unit) or part[warp][1] (its last), and the thread
of the first warp boundary inside a split unit adds the parts in warp order.
This re-implements those integer rules and checks, over many shapes, grids
and block sizes, that every item of every unit is counted exactly once and
every unit written exactly once; planted mistakes must fail. It checks the
design, not the compiled kernel (the device's kernel tests do that).
"""

import random
import sys


def share(units, groups, nw, bx, gx):
    """mvr_share: the block's first group and at(w) (n = q nw + r)."""
    uq, ur = divmod(units, gx)
    u0 = uq * bx + ur * bx // gx
    u1 = uq * (bx + 1) + ur * (bx + 1) // gx
    q, r = divmod((u1 - u0) * groups, nw)
    return lambda w: u0 * groups + q * w + r * w // nw


def run(units, steps, m, nw, gx, bug=None):
    """Items each unit was written with, or an error string."""
    items = m * steps
    g = items // m
    written = {}
    for bx in range(gx):
        at = share(units, g, nw, bx, gx)
        part = {}
        for warp in range(nw):
            s0 = at(warp) * m
            total = at(warp + 1) * m - s0
            fu, fi = divmod(s0, items)
            cu, ci, acc = fu, fi, []

            def finish(slot):
                nonlocal acc
                if slot < 0:
                    if cu in written:
                        raise ValueError(f"unit {cu} written twice")
                    written[cu] = acc
                else:
                    part[(warp, slot)] = acc
                acc = []

            for _ in range(total):
                acc.append((cu, ci))
                ci += 1
                if ci == items:
                    first_part = cu == fu and (fi != 0 or bug == "first_whole")
                    finish(0 if first_part else -1)
                    ci, cu = 0, cu + 1
            if total > 0 and ci != 0:
                finish(1 if bug == "tail_slot" else (0 if cu == fu else 1))
        for wb in range(1, nw):
            sb = at(wb)
            u = sb // g
            u0 = u * g
            first = at(wb - 1) <= u0 if bug != "every_boundary" else True
            if sb % g == 0 or not first:
                continue
            a = []
            v, sv = (wb if bug == "skip_before" else wb - 1), None
            sv = at(v)
            while v < nw and sv < u0 + g:
                sn = at(v + 1)
                if sn > sv:
                    a += part.get((v, 0 if sv // g == u else 1), [(-1, v)])
                sv, v = sn, v + 1
            if u in written:
                raise ValueError(f"unit {u} written twice")
            written[u] = a
    for u in range(units):
        if sorted(written.get(u, [])) != [(u, i) for i in range(items)]:
            return f"unit {u} of {units}: wrong items"
    return None


def sweep(bug=None, n=800):
    rnd = random.Random(7)
    for _ in range(n):
        units = rnd.choice([1, 2, 3, 5, 31, 37, 64, 100, 132, 133, 640, 1024, 4096, 6144, 14336])
        steps = rnd.choice([1, 2, 3, 4, 7, 8, 16, 56])
        m, nw = rnd.choice([1, 2]), rnd.choice([8, 16, 24, 32])
        gx = min(rnd.choice([1, 2, 33, 66, 112, 132]), units)
        if units * steps * m > 200000:  # keep the sweep quick: big shapes at fewer steps
            steps = 1 + 200000 // (units * m)
        try:
            err = run(units, steps, m, nw, gx, bug)
        except ValueError as e:
            err = str(e)
        if err:
            return err
    return None


if __name__ == "__main__":
    err = sweep()
    print(f"split grid emulation: {'every item once' if not err else 'FAILED: ' + err}")
    ok = err is None
    for bug in ("first_whole", "tail_slot", "every_boundary", "skip_before"):
        e = sweep(bug, 300)
        print(f"split planted '{bug}': {'fails as it must (' + e + ')' if e else 'NOT CAUGHT'}")
        ok &= e is not None
    sys.exit(0 if ok else 1)
