"""Writes a trimmed copy of a GGUF model: its first N layers and first V
vocabulary rows (token arrays cut to match, merges dropped), so a real
model's weights fit the device machine's 64 MiB transfer limit.
usage: trim_model.py IN OUT LAYERS VOCAB"""
import sys

import gguf
import numpy as np


def main():
    src, dst, n_layers, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key == "tokenizer.ggml.merges":
            continue
        val = f.contents()
        vt = f.types[0]
        if key == f"{arch}.block_count":
            val = n_layers
        if key == f"{arch}.vocab_size":
            val = vocab
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            val = val[:vocab]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, val, vt, sub_type=f.types[1] if len(f.types) > 1 else None)
        else:
            w.add_key_value(key, val, vt)
    for t in r.tensors:
        name = t.name
        if name.startswith("blk.") and int(name.split(".")[1]) >= n_layers:
            continue
        data = np.array(t.data)
        if name in ("token_embd.weight", "output.weight") and data.shape[0] > vocab:
            data = data[:vocab]
        w.add_tensor(name, data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
