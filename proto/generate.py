"""Generate the Python stubs of proto/engram/v1 into engram_proto/v1 (imported by the server and the client alike).

Run as ``python proto/generate.py`` (``make proto``); ``--check`` exits 1 when the committed stubs
differ from what the .proto files generate (a test calls it).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "engram_proto"
PACKAGE = "engram_proto"


def _generate(out: Path) -> dict[str, str]:
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}"]
    if protoc.main(args + protos) != 0:
        raise SystemExit("protoc failed")
    files: dict[str, str] = {}
    for path in sorted(out.rglob("*.py*")):
        text = path.read_text()
        # protoc writes absolute imports of the proto package (engram.v1); ours is engram_proto.v1.
        text = re.sub(r"^from engram\.v1 import", f"from {PACKAGE}.v1 import", text, flags=re.M)
        files[str(path.relative_to(out / "engram"))] = text
    files["v1/__init__.py"] = ""
    return files


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        files = _generate(Path(tmp))
    if "--check" in argv:
        stale = [name for name, text in files.items()
                 if not (OUT_DIR / name).exists() or (OUT_DIR / name).read_text() != text]
        for name in stale:
            sys.stderr.write(f"stale or missing: engram_proto/{name}\n")
        return 1 if stale else 0
    for name, text in files.items():
        dest = OUT_DIR / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    (OUT_DIR / "__init__.py").write_text('"""Generated from proto/ by proto/generate.py; do not edit."""\n')
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
