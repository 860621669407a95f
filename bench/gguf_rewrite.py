"""Writes a GGUF as a changed copy of another: the bench scripts' shared copy
loop (bench/requant.py, bench/cuda/trim_model.py).

rewrite(src, dst, field, tensor): every metadata entry but the file's own
(GGUF.*) goes through field(key, value) -> value, or None to drop it; every
tensor through tensor(t) -> (numpy array, GGMLQuantizationType), or None to
drop it (t: the `gguf` package's ReaderTensor). Returns the GGUFReader.
"""
import gguf


def rewrite(src, dst, field=lambda key, val: val, tensor=lambda t: (t.data, t.tensor_type)):
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        val = field(key, f.contents())
        if val is None:
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, val, vt, sub_type=f.types[1] if len(f.types) > 1 else None)
        else:
            w.add_key_value(key, val, vt)
    for t in r.tensors:
        out = tensor(t)
        if out is not None:
            w.add_tensor(t.name, out[0], raw_dtype=out[1])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return r
