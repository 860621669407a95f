"""wick's tokenizer against Hugging Face, for both default models.

Reference: the tokenizer transformers builds from the same GGUF file
(transformers.integrations.gguf: vocab, merges, token types -> a `tokenizers`
Tokenizer), i.e. what `AutoTokenizer.from_pretrained(models_dir, gguf_file=...)`
gives. transformers' GGUF *file reader* imports torch at module level, and
AutoTokenizer's GGUF config step needs torch for these architectures, so
without torch we (1) provide `read_gguf_metadata` (the one reader function the
tokenizer path calls) implemented with the `gguf` package, and (2) pick the
tokenizer class as AutoTokenizer's mapping does (model type -> class, else
TokenizersBackend) and call its `from_pretrained(models_dir, gguf_file=...)`.
Everything after reading the metadata is Hugging Face code. With torch
installed, AutoTokenizer itself is used.

Inputs: tests/fixtures/tokenizer/corpus.jsonl (scripts/make_tok_corpus.py).
Raw-byte inputs ({"b64": ...}, invalid UTF-8) go to wick as bytes and to the
reference as bytes.decode("utf-8", "replace"); wick replaces invalid UTF-8
the same way (U+FFFD per maximal subpart) before tokenizing.
"""
import base64
import json
import os
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = Path(os.environ.get("WICK_MODELS", ROOT / "models"))
CORPUS = ROOT / "tests" / "fixtures" / "tokenizer" / "corpus.jsonl"
WICK = os.environ.get("WICK", str(ROOT / "build" / "wick"))
MODELS = {"smollm2": "smollm2-135m-instruct-q4_1.gguf", "gemma3": "gemma3-270m-q4_k_m.gguf"}
READER = "transformers.integrations.gguf.reader"


_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _read_gguf_metadata(path, string_arrays=()):
    """transformers' read_gguf_metadata contract (its module imports torch):
    scalars as Python values, numeric arrays as lists, string arrays as lists
    when named in string_arrays (else their length), plus the tensor names.
    Parsed with struct from the GGUF layout (as the gguf package documents it)."""
    import mmap
    import struct

    with open(path, "rb") as fh:
        b = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    assert b[:4] == b"GGUF", path
    _, n_tensors, n_kv = struct.unpack_from("<IQQ", b, 4)
    pos = 24

    def string(pos):
        (n,) = struct.unpack_from("<Q", b, pos)
        return b[pos + 8 : pos + 8 + n].decode("utf-8"), pos + 8 + n

    def value(pos, t, keep):
        if t in _SCALAR:
            return struct.unpack_from(_SCALAR[t], b, pos)[0], pos + struct.calcsize(_SCALAR[t])
        if t == 8:
            return string(pos)
        et, n = struct.unpack_from("<IQ", b, pos)
        pos += 12
        if et in _SCALAR:
            w = struct.calcsize(_SCALAR[et])
            return list(struct.unpack_from(f"<{n}{_SCALAR[et][1]}", b, pos)), pos + n * w
        out = []
        for _ in range(n):
            v, pos = value(pos, et, keep)
            if keep:
                out.append(v)
        return (out if keep else n), pos

    md = {}
    for _ in range(n_kv):
        key, pos = string(pos)
        (t,) = struct.unpack_from("<I", b, pos)
        md[key], pos = value(pos + 4, t, key in string_arrays)
    names = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        (nd,) = struct.unpack_from("<I", b, pos)
        pos += 4 + 8 * nd + 12
        names.append(name)
    return md, tuple(names)


def load_reference(fname, models_dir=MODELS_DIR):
    try:
        import torch  # noqa: F401

        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(models_dir), gguf_file=fname)
    except ImportError:
        pass
    shim = types.ModuleType(READER)
    shim.read_gguf_metadata = _read_gguf_metadata
    saved = sys.modules.get(READER)
    sys.modules[READER] = shim
    try:
        from transformers import TokenizersBackend
        from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES, tokenizer_class_from_name

        arch = _read_gguf_metadata(str(Path(models_dir) / fname))[0]["general.architecture"]
        name = TOKENIZER_MAPPING_NAMES.get(arch)
        cls = (tokenizer_class_from_name(name) if name else None) or TokenizersBackend
        return cls.from_pretrained(str(models_dir), gguf_file=fname)
    finally:
        if saved is None:
            sys.modules.pop(READER, None)
        else:
            sys.modules[READER] = saved


def read_corpus():
    raw = []
    for line in CORPUS.read_text().splitlines():
        v = json.loads(line)
        raw.append(base64.b64decode(v["b64"]) if isinstance(v, dict) else v.encode("utf-8"))
    return raw


def wick(model, *args, stdin=None):
    path = model if os.path.sep in model else str(MODELS_DIR / MODELS[model])
    p = subprocess.run([WICK, "tokenize", "-m", path, *args], input=stdin,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return [json.loads(x) for x in p.stdout.decode().split("\n")[:-1]]  # not splitlines(): U+2028 is text


def wick_decode(model, seqs, *flags, tmp_path):
    f = tmp_path / "ids.jsonl"
    f.write_text("".join(json.dumps(s) + "\n" for s in seqs))
    return wick(model, "--decode", "--jsonl", str(f), *flags)


@pytest.fixture(scope="module")
def corpus():
    raw = read_corpus()
    assert len(raw) >= 1000
    return raw, [b.decode("utf-8", "replace") for b in raw]


_REFS = {}


@pytest.fixture(params=sorted(MODELS))
def model(request):
    name = request.param
    if not (MODELS_DIR / MODELS[name]).exists():
        pytest.skip(f"model file {MODELS_DIR / MODELS[name]} is missing (scripts/fetch_models.sh)")
    if name not in _REFS:
        _REFS[name] = load_reference(MODELS[name])
    return name, _REFS[name]


def report(what, texts, want, got):
    bad = [i for i in range(len(want)) if want[i] != got[i]]
    print(f"{what}: {len(want) - len(bad)}/{len(want)} identical ({100.0 * (len(want) - len(bad)) / len(want):.2f}%)")
    for i in bad[:15]:
        print(f"  input {i}: {texts[i][:80]!r}\n    hf:   {want[i][:40]}\n    wick: {got[i][:40]}")
    return bad


@pytest.mark.parametrize("parse_special", [True, False], ids=["special", "no-special"])
def test_encode_matches_hf(model, corpus, parse_special):
    name, ref = model
    _, texts = corpus
    want = ref(texts, split_special_tokens=not parse_special)["input_ids"]
    got = wick(name, "--jsonl", str(CORPUS), *([] if parse_special else ["--no-special"]))
    assert len(got) == len(want)
    assert not report(f"{name} encode (parse_special={parse_special})", texts, want, got)


def test_encode_without_bos_matches_hf(model, corpus):
    name, ref = model
    _, texts = corpus
    want = ref(texts, add_special_tokens=False)["input_ids"]
    got = wick(name, "--jsonl", str(CORPUS), "--no-bos")
    assert not report(f"{name} encode (add_special_tokens=False)", texts, want, got)


def test_encode_long_text_matches_hf(model, corpus, tmp_path):
    """The whole corpus as one input (~170 KB): exercises the word cache and word splitting."""
    name, ref = model
    _, texts = corpus
    big = "\n".join(texts) + " " + " ".join(t for t in texts if len(t) < 40)
    f = tmp_path / "big.jsonl"
    f.write_text(json.dumps(big) + "\n")
    for flags in ((), ("--no-special",)):
        want = ref(big, split_special_tokens=bool(flags))["input_ids"]
        got = wick(name, "--jsonl", str(f), *flags)[0]
        first = next((i for i in range(min(len(want), len(got))) if want[i] != got[i]), None)
        assert want == got, f"{name}: {len(want)} vs {len(got)} ids, first difference at {first}"


def test_decode_matches_hf(model, corpus, tmp_path):
    name, ref = model
    _, texts = corpus
    ids = ref(texts)["input_ids"]
    for skip in (False, True):
        want = ref.batch_decode(ids, skip_special_tokens=skip)
        got = wick_decode(name, ids, *(["--skip-special"] if skip else []), tmp_path=tmp_path)
        assert not report(f"{name} decode (skip_special={skip})", texts, want, got)
    # Streaming, token by token, gives the same text for every corpus input.
    want = ref.batch_decode(ids)
    got = wick_decode(name, ids, "--stream", tmp_path=tmp_path)
    assert not report(f"{name} stream decode", texts, want, got)


def test_round_trip(model, corpus, tmp_path):
    name, ref = model
    _, texts = corpus
    ids = wick(name, "--jsonl", str(CORPUS), "--no-bos")
    ref_back = ref.batch_decode(ref(texts, add_special_tokens=False)["input_ids"])
    ref_ok = [ref_back[i] == texts[i] for i in range(len(texts))]
    back = wick_decode(name, ids, tmp_path=tmp_path)
    ours_ok = [back[i] == texts[i] for i in range(len(texts))]
    print(f"{name}: the reference round-trips {sum(ref_ok)}/{len(texts)}; wick round-trips all of those: "
          f"{all(ours_ok[i] for i in range(len(texts)) if ref_ok[i])}")
    assert [i for i in range(len(texts)) if ref_ok[i] and not ours_ok[i]] == []


def test_decode_random_ids_matches_hf(model, tmp_path):
    """Arbitrary id sequences: partial UTF-8 pieces, byte tokens, special tokens."""
    name, ref = model
    n = len(ref)
    rng = random.Random(7)
    vocab = ref.get_vocab()
    byte_ids = [i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x")] or list(range(n))
    seqs = []
    for _ in range(300):
        seq = []
        for _ in range(rng.randint(0, 12)):
            k = rng.random()
            seq.append(rng.choice(byte_ids) if k < 0.35 else rng.randrange(0, 300) if k < 0.5 else rng.randrange(0, n))
        seqs.append(seq)
    for skip in (False, True):
        want = [ref.decode(s, skip_special_tokens=skip) for s in seqs]
        got = wick_decode(name, seqs, *(["--skip-special"] if skip else []), tmp_path=tmp_path)
        assert not report(f"{name} decode random ids (skip_special={skip})", [str(s) for s in seqs], want, got)


def test_cli_errors(tmp_path):
    path = str(MODELS_DIR / MODELS["smollm2"])
    if not Path(path).exists():
        pytest.skip("smollm2 model file is missing")
    bad = tmp_path / "bad.jsonl"
    for line in ['"unterminated', '{"b64": "@@@"}', '"\\ud800"', "[1, 2]", '"a" extra']:
        bad.write_text(line + "\n")
        p = subprocess.run([WICK, "tokenize", "-m", path, "--jsonl", str(bad)], capture_output=True)
        err = p.stderr.decode().strip().splitlines()
        assert p.returncode != 0 and len(err) == 1, (line, p.stderr)
    p = subprocess.run([WICK, "tokenize", "-m", path, "--decode", "1 99999999"], capture_output=True)
    assert p.returncode != 0 and len(p.stderr.decode().strip().splitlines()) == 1
    p = subprocess.run([WICK, "tokenize", "-m", str(tmp_path / "missing.gguf"), "hi"], capture_output=True)
    assert p.returncode != 0 and len(p.stderr.decode().strip().splitlines()) == 1
    p = subprocess.run([WICK, "tokenize", "-m", path, "--json", "Hello world"], capture_output=True)
    assert p.returncode == 0 and json.loads(p.stdout) == [19556, 905]


# ---- pre-tokenizers and SentencePiece variants no default model uses ----
# Written as GGUF files from a default model's own vocabulary with one key
# changed; Hugging Face builds its reference from the same file.

VARIANTS = {
    # name: (source model, architecture, tokenizer.ggml.pre, add_space_prefix)
    "llama-bpe": ("smollm2", "llama", "llama-bpe", None),
    "qwen2": ("smollm2", "qwen2", "qwen2", None),
    "llama-spm": ("gemma3", "llama", None, True),
}


def write_variant(src, dst, arch, pre, add_space_prefix):
    import gguf

    md, _ = _read_gguf_metadata(str(src), ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"))
    w = gguf.GGUFWriter(str(dst), arch)
    w.add_tokenizer_model(md["tokenizer.ggml.model"])
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(md["tokenizer.ggml.tokens"])
    types = list(md["tokenizer.ggml.token_type"])
    if md["tokenizer.ggml.model"] == "llama":
        # transformers' LlamaTokenizer always registers "<s>" and "</s>" as special
        # tokens (its defaults); in a real Llama 2 file they are control tokens, so
        # mark them so here too, else the borrowed Gemma vocabulary disagrees.
        for i, t in enumerate(md["tokenizer.ggml.tokens"]):
            if t in ("<s>", "</s>"):
                types[i] = 3
    w.add_token_types(types)
    if "tokenizer.ggml.scores" in md:
        w.add_token_scores(md["tokenizer.ggml.scores"])
    if "tokenizer.ggml.merges" in md:
        w.add_token_merges(md["tokenizer.ggml.merges"])
    for key in ("bos", "eos", "unknown", "padding"):
        if f"tokenizer.ggml.{key}_token_id" in md:
            w.add_uint32(f"tokenizer.ggml.{key}_token_id", md[f"tokenizer.ggml.{key}_token_id"])
    for key in ("add_bos_token", "add_eos_token"):
        if f"tokenizer.ggml.{key}" in md:
            w.add_bool(f"tokenizer.ggml.{key}", md[f"tokenizer.ggml.{key}"])
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request, tmp_path_factory):
    src_model, arch, pre, prefix = VARIANTS[request.param]
    src = MODELS_DIR / MODELS[src_model]
    if not src.exists():
        pytest.skip(f"model file {src} is missing (scripts/fetch_models.sh)")
    d = tmp_path_factory.mktemp("tokvariant")
    write_variant(src, d / "v.gguf", arch, pre, prefix)
    return request.param, str(d / "v.gguf"), load_reference("v.gguf", d)


def test_variant_encode_matches_hf(variant, corpus, tmp_path):
    name, path, ref = variant
    _, texts = corpus
    for special in (True, False):
        want = ref(texts, split_special_tokens=not special)["input_ids"]
        got = wick(path, "--jsonl", str(CORPUS), *([] if special else ["--no-special"]))
        assert not report(f"{name} encode (parse_special={special})", texts, want, got)
    ids = ref(texts)["input_ids"]
    want = ref.batch_decode(ids, skip_special_tokens=True)
    got = wick_decode(path, ids, "--skip-special", tmp_path=tmp_path)
    assert not report(f"{name} decode", texts, want, got)
    got = wick_decode(path, ids, "--skip-special", "--stream", tmp_path=tmp_path)
    assert not report(f"{name} stream decode", texts, want, got)
