#!/usr/bin/env python3
"""Side-by-side speed of llama.cpp and wick on the same machine, models and threads.

Run it with the scratch venv that holds llama-cpp-python (never a project
dependency):

    python3 -m venv /work/llamacpp-venv
    CMAKE_ARGS="-DGGML_NATIVE=ON" /work/llamacpp-venv/bin/pip install llama-cpp-python
    /work/llamacpp-venv/bin/python bench/compare_llamacpp.py --wick build/wick \
        --threads 1,2 --reps 5 --markdown /tmp/section.md

What is timed (the llama-bench definitions, for both engines):
  pp: from an empty KV cache, one batch of P random token ids (P = 512 by
      default, fed in passes of at most 512 tokens, logits of the last token
      only) is evaluated; seconds from just before the first decode call to
      the return of llama_synchronize. t/s = P / seconds.
  tg: from an empty KV cache, N one-token decode steps (N = 128), logits each
      step, position i at step i, a fresh random id each step; seconds from
      before the first step to after the last llama_synchronize. t/s = N /
      seconds. (Filling the 1-token ctypes batch, a few microseconds, is
      inside the timed loop.)
  -d D: both tests start after D random tokens already evaluated into the
      cache (untimed), as llama-bench's and wick bench's -d.
llama.cpp runs in this process through the low-level API (llama_decode on a
llama_batch; n_ctx = P + N, n_batch = n_ubatch = 512, library defaults for the
rest: f16 KV cache, flash attention "auto"). wick runs as `wick bench --json
-r 1` (its own table gives the same two figures from the same definitions), one
process per repetition. The two engines alternate repetition by repetition
(order flipped every repetition) after one untimed warm-up of each; the figure
reported is the median, with mean and sample stdev beside it.

--rss also measures wick's peak resident memory for `wick run -m MODEL -c 2048
-n 64 -p ...` with /usr/bin/time -v, next to file size + KV cache + 64 MiB.
"""

import argparse
import ctypes
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time

MODELS = {
    "smollm2": "models/smollm2-135m-instruct-q4_1.gguf",
    "gemma3": "models/gemma3-270m-q4_k_m.gguf",
}
MIB = 1024 * 1024


def import_llama():
    try:
        import llama_cpp  # noqa: PLC0415 (only in the scratch venv)
    except ImportError:
        sys.exit("compare_llamacpp: llama_cpp not importable; run with /work/llamacpp-venv/bin/python")
    return llama_cpp


class LlamaCpp:
    """One model and context of llama.cpp, with one reusable batch."""

    def __init__(self, lc, path, n_prompt, n_gen, n_batch, depth=0):
        self.lc = lc
        self.n_prompt, self.n_gen, self.n_batch, self.depth = n_prompt, n_gen, n_batch, depth
        mp = lc.llama_model_default_params()
        self.model = lc.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            sys.exit(f"compare_llamacpp: llama.cpp cannot load {path}")
        cp = lc.llama_context_default_params()
        cp.n_ctx = depth + n_prompt + n_gen
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        self.fa = cp.flash_attn_type
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            sys.exit("compare_llamacpp: llama.cpp cannot create a context")
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self.batch = lc.llama_batch_init(max(n_batch, 1), 0, 1)
        self.rng = random.Random(1234)

    def close(self):
        lc = self.lc
        lc.llama_batch_free(self.batch)
        lc.llama_free(self.ctx)
        lc.llama_model_free(self.model)

    def meta(self, key):
        buf = ctypes.create_string_buffer(256)
        n = self.lc.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode() if n >= 0 else None

    def hparams(self):
        lc, m = self.lc, self.model
        arch = self.meta("general.architecture")
        n_head = lc.llama_model_n_head(m)
        hd = self.meta(f"{arch}.attention.key_length")
        return {
            "arch": arch,
            "n_layer": lc.llama_model_n_layer(m),
            "n_head_kv": lc.llama_model_n_head_kv(m),
            "head_dim": int(hd) if hd else lc.llama_model_n_embd(m) // n_head,
            "size": lc.llama_model_size(m),
            "params": lc.llama_model_n_params(m),
        }

    def _fill(self, start, n, logits_last):
        b = self.batch
        b.n_tokens = n
        for i in range(n):
            b.token[i] = self.rng.randrange(self.n_vocab)
            b.pos[i] = start + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if (i == n - 1 or not logits_last) else 0

    def _clear(self):
        """Empties the cache, then evaluates `depth` random tokens (untimed)."""
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), False)
        for done in range(0, self.depth, self.n_batch):
            self._fill(done, min(self.n_batch, self.depth - done), True)
            self._decode()
        self.lc.llama_synchronize(self.ctx)

    def _decode(self):
        rc = self.lc.llama_decode(self.ctx, self.batch)
        if rc != 0:
            sys.exit(f"compare_llamacpp: llama_decode returned {rc}")

    def pp(self, threads):
        """(tokens/s, tokens per CPU second) of one pp test; batches are
        prepared before the clock starts."""
        lc = self.lc
        lc.llama_set_n_threads(self.ctx, threads, threads)
        self._clear()
        secs = cpu = 0.0
        for done in range(0, self.n_prompt, self.n_batch):
            n = min(self.n_batch, self.n_prompt - done)
            self._fill(self.depth + done, n, True)
            t0, c0 = time.perf_counter(), time.process_time()
            self._decode()
            lc.llama_synchronize(self.ctx)
            secs += time.perf_counter() - t0
            cpu += time.process_time() - c0
        return self.n_prompt / secs, self.n_prompt / cpu if cpu > 0 else 0.0

    def tg(self, threads, n=None):
        lc = self.lc
        n = self.n_gen if n is None else n
        lc.llama_set_n_threads(self.ctx, threads, threads)
        self._clear()
        b, ctx, rr, nv = self.batch, self.ctx, self.rng.randrange, self.n_vocab
        b.n_tokens = 1
        b.n_seq_id[0] = 1
        b.seq_id[0][0] = 0
        b.logits[0] = 1
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(n):
            b.token[0] = rr(nv)
            b.pos[0] = self.depth + i
            if lc.llama_decode(ctx, b) != 0:
                sys.exit("compare_llamacpp: llama_decode failed in tg")
            lc.llama_synchronize(ctx)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        return n / secs, n / cpu if cpu > 0 else 0.0


def wick_once(wick, model, threads, n_prompt, n_gen, depth=0):
    cmd = [wick, "bench", "-m", model, "-p", str(n_prompt), "-n", str(n_gen), "-t", str(threads),
           "-d", str(depth), "-r", "1", "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j


def summary(v):
    return {
        "median": statistics.median(v),
        "mean": statistics.fmean(v),
        "stdev": statistics.stdev(v) if len(v) > 1 else 0.0,
        "samples": v,
    }


def fmt(s):
    if not s:
        return "—"
    return f"{s['median']:.2f} ({s['mean']:.2f} ± {s['stdev']:.2f})"


def machine():
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return {"cpu": model, "cores": os.cpu_count(), "commit": commit + ("+dirty" if dirty else ""),
            "kernel": platform.release(), "load_start": os.getloadavg()[0]}


def measure_rss(wick, model_path, hp, n_ctx=2048, n_gen=64):
    prompt = "The history of the printing press begins"
    cmd = ["/usr/bin/time", "-v", wick, "run", "-m", model_path, "-c", str(n_ctx), "-n",
           str(n_gen), "-t", "2", "--temp", "0", "-p", prompt]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    if r.returncode != 0 or not m:
        sys.exit(f"compare_llamacpp: {' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
    rss = int(m.group(1)) * 1024
    file_bytes = os.path.getsize(model_path)
    per_pos = 2 * hp["n_layer"] * hp["n_head_kv"] * hp["head_dim"]  # K and V elements
    kv32 = per_pos * n_ctx * 4
    kv16 = per_pos * n_ctx * 2
    return {"cmd": " ".join(cmd), "rss": rss, "file": file_bytes, "kv_f32": kv32, "kv_f16": kv16,
            "budget_f32": file_bytes + kv32 + 64 * MIB, "budget_f16": file_bytes + kv16 + 64 * MIB}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="smollm2,gemma3", help="comma list of smollm2, gemma3 or paths")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("-d", "--depth", type=int, default=0, help="tokens in the cache before each test")
    ap.add_argument("--wick", help="path of the wick executable (omit: llama.cpp only)")
    ap.add_argument("--rss", action="store_true", help="also measure wick run's peak RSS")
    ap.add_argument("--rss-wick", help="comma list of wick executables for --rss (default --wick)")
    ap.add_argument("--json", help="write every sample here")
    ap.add_argument("--markdown", help="write the result section here")
    a = ap.parse_args()
    if a.reps < 1 or a.p < 1 or a.n < 1:
        sys.exit("compare_llamacpp: --reps, -p and -n must be >= 1")
    lc = import_llama()
    keep = lc.llama_log_callback(lambda level, text, user: None)
    lc.llama_log_set(keep, ctypes.c_void_p())
    lc.llama_backend_init()
    threads = [int(t) for t in a.threads.split(",")]
    info = machine()
    info["llama_cpp_python"] = lc.__version__
    info["llama_system"] = lc.llama_print_system_info().decode().strip()
    rows, rss = [], []
    for name in a.models.split(","):
        path = MODELS.get(name, name)
        ll = LlamaCpp(lc, path, a.p, a.n, a.batch, a.depth)
        hp = ll.hparams()
        for t in threads:
            ll.pp(t)  # untimed warm-up (wick bench warms up inside each process)
            ll.tg(t, 8)
            s = {(e, t, k): [] for e in ("llama.cpp", "wick") for t in ("pp", "tg")
                 for k in ("wall", "cpu")}
            for rep in range(a.reps):
                order = ["llama.cpp", "wick"] if rep % 2 == 0 else ["wick", "llama.cpp"]
                for eng in order:
                    if eng == "llama.cpp":
                        for test, (w, c) in (("pp", ll.pp(t)), ("tg", ll.tg(t))):
                            s[(eng, test, "wall")].append(w)
                            s[(eng, test, "cpu")].append(c)
                    elif a.wick:
                        j = wick_once(a.wick, path, t, a.p, a.n, a.depth)
                        for test in ("pp", "tg"):
                            s[(eng, test, "wall")].append(j[test]["mean"])
                            cpu = j.get(f"{test}_per_cpu_s")
                            if cpu:
                                s[(eng, test, "cpu")].append(cpu["mean"])
                        hp["wick_bytes_per_token"] = j["weight_bytes_per_token"]
            for test in ("pp", "tg"):
                row = {"model": os.path.basename(path), "threads": t,
                       "test": f"{test}{a.p if test == 'pp' else a.n}"
                               + (f" @ d{a.depth}" if a.depth else ""),
                       "llama.cpp": summary(s[("llama.cpp", test, "wall")]),
                       "wick": summary(s[("wick", test, "wall")]) if s[("wick", test, "wall")] else None,
                       "llama.cpp_cpu": summary(s[("llama.cpp", test, "cpu")]),
                       "wick_cpu": summary(s[("wick", test, "cpu")]) if s[("wick", test, "cpu")] else None}
                rows.append(row)
                print(f"{row['model']:36s} t={t} {row['test']:6s} llama.cpp {fmt(row['llama.cpp'])}"
                      f"  wick {fmt(row['wick'])}", flush=True)
        ll.close()
        if a.rss and (a.rss_wick or a.wick):
            for exe in (a.rss_wick or a.wick).split(","):
                rss.append(dict(measure_rss(exe, path, hp), model=os.path.basename(path), exe=exe))
    info["load_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "args": vars(a), "rows": rows, "rss": rss}, f, indent=1)
    md = render(info, a, rows, rss)
    print(md)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)


def render(info, a, rows, rss):
    out = [f"- machine: {info['cpu']}, {info['cores']} cores, Linux {info['kernel']}; 1-min load "
           f"average {info['load_start']:.1f} at the start, {info['load_end']:.1f} at the end "
           "(other work running beside)",
           f"- commit: {info['commit']}; llama-cpp-python {info['llama_cpp_python']} "
           f"(built from source, GGML_NATIVE=ON)",
           f"- llama.cpp system info: `{info['llama_system']}`",
           f"- command: `/work/llamacpp-venv/bin/python bench/compare_llamacpp.py "
           f"--models {a.models} --threads {a.threads} --reps {a.reps} -p {a.p} -n {a.n}"
           + (f" -d {a.depth}" if a.depth else "")
           + (f" --wick {a.wick}" if a.wick else "") + (" --rss" if a.rss else "")
           + (f" --rss-wick {a.rss_wick}" if a.rss_wick else "") + "`",
           f"- t/s = median (mean ± sample stdev) of {a.reps} repetitions, engines alternating",
           "",
           "| model | threads | test | llama.cpp t/s | wick t/s | wick / llama.cpp |",
           "| --- | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        ratio = (f"{r['wick']['median'] / r['llama.cpp']['median']:.2f}" if r["wick"] else "—")
        out.append(f"| {r['model']} | {r['threads']} | {r['test']} | {fmt(r['llama.cpp'])} | "
                   f"{fmt(r['wick'])} | {ratio} |")
    if any(r["wick_cpu"] for r in rows):
        out += ["", "Tokens per CPU second (process CPU time, all threads, spinning included): "
                "less disturbed by other work on the machine; at 1 thread it approximates "
                "the quiet-machine speed.", "",
                "| model | threads | test | llama.cpp t/CPU-s | wick t/CPU-s | wick / llama.cpp |",
                "| --- | ---: | --- | ---: | ---: | ---: |"]
        for r in rows:
            if not r["wick_cpu"]:
                continue
            ratio = r["wick_cpu"]["median"] / r["llama.cpp_cpu"]["median"]
            out.append(f"| {r['model']} | {r['threads']} | {r['test']} | {fmt(r['llama.cpp_cpu'])} | "
                       f"{fmt(r['wick_cpu'])} | {ratio:.2f} |")
    if rss:
        out += ["", "Peak RSS of `wick run` (`/usr/bin/time -v`, -c 2048 -n 64):", "",
                "| model | wick | peak RSS | file | KV f32 (f16) | budget file + KV + 64 MiB, f32 KV (f16 KV) | within |",
                "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
        for x in rss:
            ok = "yes" if x["rss"] <= x["budget_f32"] else "no"
            ok16 = "yes" if x["rss"] <= x["budget_f16"] else "no"
            out.append(f"| {x['model']} | {x['exe']} | {x['rss'] / MIB:.1f} MiB | {x['file'] / MIB:.1f} MiB | "
                       f"{x['kv_f32'] / MIB:.1f} ({x['kv_f16'] / MIB:.1f}) MiB | "
                       f"{x['budget_f32'] / MIB:.1f} ({x['budget_f16'] / MIB:.1f}) MiB | "
                       f"{ok} ({ok16}) |")
        out.append("")
        out.append(f"command (first): `{rss[0]['cmd']}`")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
