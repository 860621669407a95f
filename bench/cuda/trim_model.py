"""Writes a trimmed copy of a GGUF model: its first N layers and first V
vocabulary rows (token arrays cut to match, merges dropped), so a real
model's weights fit the device machine's 64 MiB transfer limit.
usage: trim_model.py IN OUT LAYERS VOCAB"""
import sys
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gguf_rewrite import rewrite  # noqa: E402


def main():
    src, dst, n_layers, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    arch = gguf.GGUFReader(src).fields["general.architecture"].contents()

    def field(key, val):
        if key == "tokenizer.ggml.merges":
            return None
        if key == f"{arch}.block_count":
            return n_layers
        if key == f"{arch}.vocab_size":
            return vocab
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            return val[:vocab]
        return val

    def tensor(t):
        name = t.name
        if name.startswith("blk.") and int(name.split(".")[1]) >= n_layers:
            return None
        data = np.array(t.data)
        if name in ("token_embd.weight", "output.weight") and data.shape[0] > vocab:
            data = data[:vocab]
        return data, t.tensor_type

    rewrite(src, dst, field, tensor)


if __name__ == "__main__":
    main()
