"""CPU forward pass on tiny random models against transformers' float32 logits.

Fixtures (tests/fixtures/models/tiny_*.gguf) and references
(tests/fixtures/ref/tiny_*.npz) come from scripts/ref/make_tiny_models.py:
llama (untied, F32), llama with llama3 RoPE scaling (tied, rope_freqs
tensor), qwen2 (QKV bias, tied, F16 weights), qwen3 (QK-norm, untied) and
gemma3 (6 layers: 5 sliding with window 8 + 1 global; prompts up to 33
tokens). Each has three prompts of random ids; every position is compared.

Tolerance, per position p: max_j |wick[p, j] - ref[p, j]| <= 1e-4 * max_j |ref[p, j]|.
Run as a whole-prompt batch, and with --chunk 1 (token by token through the
KV cache) and --chunk 3 (chunks that straddle the sliding window).
"""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "fixtures" / "models"
REFS = ROOT / "tests" / "fixtures" / "ref"
NAMES = ["llama", "llama_rope3", "qwen2_f16", "qwen3", "gemma3"]
RTOL = 1e-4


def wick():
    path = os.environ.get("WICK")
    assert path and Path(path).is_file(), "set WICK=/abs/path/to/build/wick"
    return path


def wick_logits(model, ids, out, extra=()):
    cmd = [wick(), "logits", "-m", str(model), "-t", " ".join(str(i) for i in ids),
           "-o", str(out), *extra]
    res = subprocess.run(cmd, capture_output=True, timeout=120)
    assert res.returncode == 0, f"{' '.join(cmd)}: exit {res.returncode}: {res.stderr.decode()[-2000:]}"
    data = np.fromfile(out, dtype="<f4")
    return data


def check_close(name, prompt, got, ref):
    n, vocab = ref.shape
    assert got.size == n * vocab, f"{name} prompt {prompt}: {got.size} floats, expected {n}x{vocab}"
    got = got.reshape(n, vocab)
    assert np.all(np.isfinite(got)), f"{name} prompt {prompt}: non-finite logits"
    err = np.abs(got - ref).max(axis=1)
    scale = np.abs(ref).max(axis=1)
    bad = np.nonzero(err > RTOL * scale)[0]
    if len(bad):
        p = int(bad[0])
        j = int(np.argmax(np.abs(got[p] - ref[p])))
        raise AssertionError(
            f"{name} prompt {prompt} (len {n}): {len(bad)} positions off, first p={p}: "
            f"max|d|={err[p]:.3g} (allowed {RTOL * scale[p]:.3g}) at token {j}: "
            f"wick {got[p, j]:.6g} ref {ref[p, j]:.6g}; worst p={int(np.argmax(err / scale))} "
            f"rel {float((err / scale).max()):.3g}")


@pytest.mark.parametrize("chunk", [None, 1, 3], ids=["batch", "chunk1", "chunk3"])
@pytest.mark.parametrize("name", NAMES)
def test_tiny_logits(name, chunk, tmp_path):
    model = MODELS / f"tiny_{name}.gguf"
    ref = np.load(REFS / f"tiny_{name}.npz")
    extra = [] if chunk is None else ["--chunk", str(chunk)]
    for i in range(int(ref["n_prompts"])):
        ids = ref[f"ids_{i}"].tolist()
        got = wick_logits(model, ids, tmp_path / f"p{i}.bin", extra)
        check_close(name, i, got, ref[f"logits_{i}"])


def test_references_are_not_flat():
    # Guards the fixtures themselves: logits spread over several units and
    # differ between positions, so a test against them can fail.
    for name in NAMES:
        ref = np.load(REFS / f"tiny_{name}.npz")
        lg = ref["logits_2"]
        assert lg.std(axis=1).min() > 1.0, name
        assert np.abs(np.diff(lg, axis=0)).max() > 1.0, name
        assert (MODELS / f"tiny_{name}.gguf").stat().st_size < 1 << 20, name
