"""Q2_K's 8-bit activations in a whole model: perplexity within 0.5% of the
exact path.

No default model ships Q2_K weights, so SmolLM2's 30 `ffn_down` matrices
(the only ones whose rows are a multiple of 256) are requantized to Q2_K by
bench/requant.py (the `gguf` package decodes them, wick's quantizer encodes
them). The exact f32 path (`--exact`) is itself held to transformers by
test_perplexity.py; here the default fast path, which multiplies the Q2_K
matrices with 8-bit activations (a scale per 32 values on CPUs with AVX-512
VNNI, act8b.h; 16-bit ones elsewhere), must stay within 0.5% of it. Batch 1,
so that every product takes the decode kernels (larger batches take the
integer GEMM's 16-bit activations). First 4 chunks of 512 tokens.
"""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = ROOT / "tests" / "fixtures" / "text" / "ppl.txt"
MODEL = ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf"
REL_TOL = 0.005


def perplexity(model, *extra):
    cmd = [os.environ["WICK"], "perplexity", "-m", str(model), "-f", str(TEXT), "-c", "512",
           "--chunks", "4", "-b", "1", "-t", str(os.cpu_count() or 1), *extra]
    res = subprocess.run(cmd, capture_output=True, timeout=900)
    assert res.returncode == 0, f"{' '.join(cmd)}: {res.stderr.decode()[-2000:]}"
    last = res.stdout.decode().strip().splitlines()[-1]
    assert last.startswith("perplexity: "), f"last stdout line: {last!r}"
    return float(last.split()[1])


def test_q2k_fast_path_perplexity(tmp_path):
    assert MODEL.is_file(), f"missing {MODEL}: run scripts/fetch_models.sh"
    model = tmp_path / "smollm2-q2k-ffn-down.gguf"
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "requant.py"), str(MODEL),
                          str(model), "--match", "ffn_down", "--type", "q2_k"],
                         capture_output=True, timeout=600)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert b"requantized 30 tensors" in res.stderr
    exact, fast = perplexity(model, "--exact"), perplexity(model)
    rel = (fast - exact) / exact
    print(f"Q2_K ffn_down: exact {exact:.4f} fast {fast:.4f} ({rel:+.3%})")
    assert abs(rel) <= REL_TOL, f"fast path {fast:.4f} against exact {exact:.4f} ({rel:+.2%})"
