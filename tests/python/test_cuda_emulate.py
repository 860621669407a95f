"""The host emulations of the CUDA matrix-vector formats (bench/cuda/*_emulate.py).

Each script re-implements a kernel's loads and arithmetic on the host, checks
it against an independent product (the gguf package's dequantizer, or the FP8
formula) within the kernel test's bound, and plants mistakes that must fail
that bound; it exits non-zero otherwise (mmq_emulate.py: the fused batch
kernel's Q4_K and Q6_K formats; mvr_kx_emulate.py: the Q2_K, Q3_K, IQ4_XS and
IQ4_NL register formats on 16-bit x; mvt_emulate.py: the tensor-core batch
kernel's five formats, its mma fragments written out). mvr_split_emulate.py does the same for
the register kernel's split grid: every item of every row counted once. They check the formats' design, not
the compiled kernels (the device runs of bench/cuda/session.sh do that), and
run here so they keep working as the formats change.
"""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpy")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["mvq_emulate.py", "mvr_emulate.py", "fp8w_emulate.py",
                                    "mvr_split_emulate.py", "mmq_emulate.py",
                                    "mvr_kx_emulate.py", "mvt_emulate.py"])
def test_emulation(script):
    if script != "mvr_split_emulate.py":  # the others import gguf (fp8w through mvr_emulate)
        pytest.importorskip("gguf")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "cuda" / script)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "NOT CAUGHT" not in r.stdout
