"""`wick perplexity` against transformers' perplexity of the same GGUF.

Text: tests/fixtures/text/ppl.txt (GPL-3, verbatim). Reference:
tests/fixtures/ref/ppl.json from scripts/ref/make_ppl_ref.py, with the
definition stated there and in tools/cmd_perplexity.c; CTX 512. Both CPU
paths are run: the exact f32 path (`--exact`) and the default fast path.
The text has 7,658 SmolLM2 / 7,562 Gemma 3 tokens (14 chunks each); to keep
CI time small both score the first 8 chunks (`--chunks 8`: 4,088 scored tokens
for SmolLM2, which adds no BOS, 4,096 for Gemma 3). ppl.json also holds the
all-chunk values. Each must be within 0.5% of the reference.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT = ROOT / "tests" / "fixtures" / "text" / "ppl.txt"
REF = ROOT / "tests" / "fixtures" / "ref" / "ppl.json"
REL_TOL = 0.005
# model -> score only the first N chunks (None: all)
CASES = {"smollm2": 8, "gemma3": 8}


def wick():
    path = os.environ.get("WICK")
    assert path and Path(path).is_file(), "set WICK=/abs/path/to/build/wick"
    return path


@pytest.mark.parametrize("mode", ["exact", "fast"])
@pytest.mark.parametrize("name", list(CASES))
def test_perplexity_matches_transformers(name, mode):
    doc = json.loads(REF.read_text(encoding="utf-8"))
    ref = doc["models"][name]
    model = ROOT / ref["gguf"]
    assert model.is_file(), f"missing {model}: run scripts/fetch_models.sh"
    cmd = [wick(), "perplexity", "-m", str(model), "-f", str(TEXT), "-c", str(doc["ctx"]),
           "-t", str(os.cpu_count() or 1)]
    if mode == "exact":
        cmd.append("--exact")
    want = ref["perplexity"]
    if CASES[name] is not None:
        assert ref["first_chunks"]["n_chunks"] == CASES[name]
        assert ref["first_chunks"]["scored"] >= 4000
        cmd += ["--chunks", str(CASES[name])]
        want = ref["first_chunks"]["perplexity"]
    res = subprocess.run(cmd, capture_output=True, timeout=900)
    assert res.returncode == 0, f"{' '.join(cmd)}: exit {res.returncode}: {res.stderr.decode()[-2000:]}"
    last = res.stdout.decode().strip().splitlines()[-1]
    assert last.startswith("perplexity: "), f"last stdout line: {last!r}"
    got = float(last.split()[1])
    rel = abs(got - want) / want
    print(f"{name} {mode}: wick {got:.4f} transformers {want:.4f} (rel {rel:.2e})")
    assert rel <= REL_TOL, f"{name}: wick perplexity {got:.4f}, transformers {want:.4f} ({rel:.2%} off)"
