"""`wick bench`: its JSON report is complete and self-consistent, and bad flags fail cleanly."""
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def wick():
    path = os.environ.get("WICK")
    assert path and Path(path).is_file(), "set WICK=/abs/path/to/build/wick"
    return path


def test_bench_json_smollm2():
    res = subprocess.run([wick(), "bench", "-m", "smollm2", "-p", "16", "-n", "4", "-r", "2",
                          "-t", "1", "--json"], capture_output=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    doc = json.loads(res.stdout)
    assert doc["arch"] == "llama" and doc["threads"] == 1 and doc["reps"] == 2
    assert doc["file_bytes"] == (ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf").stat().st_size
    for test, n in (("pp", 16), ("tg", 4)):
        r = doc[test]
        assert r["tokens"] == n and len(r["samples"]) == 2
        assert all(s > 0 for s in r["samples"])
        assert min(r["samples"]) <= r["mean"] <= max(r["samples"])
    # generation bandwidth = weight bytes read per token x tokens/s
    want = doc["weight_bytes_per_token"] * doc["tg"]["mean"] / 1e9
    assert abs(doc["tg_gb_per_s"] - want) <= 1e-3 * want + 1e-3


def expected_bytes_per_token(path):
    """Weight bytes a decode step reads, from the `gguf` package's view of
    the file: every tensor but the token embedding, of which one row is
    gathered, unless it doubles as the output matrix (no output.weight)."""
    from gguf import GGUFReader
    ts = {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}
    tied = "output.weight" not in ts
    return sum(ts.values()) - (0 if tied else ts["token_embd.weight"]), tied


def test_bench_bytes_per_token(tmp_path):
    """weight_bytes_per_token on a tied model (SmolLM2) and an untied one
    (a tiny random llama from `wick mkmodel`, its own output matrix)."""
    untied = tmp_path / "tiny.gguf"
    res = subprocess.run([wick(), "mkmodel", "--arch", "llama", "--like", "tiny", "--type", "q4_k",
                          "-o", str(untied)], capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    for path in (ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf", untied):
        want, tied = expected_bytes_per_token(str(path))
        res = subprocess.run([wick(), "bench", "-m", str(path), "-p", "0", "-n", "2", "-r", "1",
                              "-t", "1", "--json"], capture_output=True, timeout=300, cwd=ROOT)
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        got = json.loads(res.stdout)["weight_bytes_per_token"]
        assert got == want, f"{path.name} (tied {tied}): {got} bytes a token, want {want}"


def test_bench_bad_flags():
    for args in (["-t", "0"], ["-r", "x"], ["--nope"], ["-p", "-5"]):
        res = subprocess.run([wick(), "bench", "-m", "smollm2", *args], capture_output=True,
                             timeout=60, cwd=ROOT)
        err = res.stderr.decode().strip().splitlines()
        assert res.returncode != 0 and len(err) == 1, (args, res.stderr.decode())
