"""A slim Anserini classpath for a box that cannot take the 170 MB fat jar along.

A lent GPU box has no Java and no network, and what travels to it is capped (64 MiB with the tree). The server's
lexical index needs only Lucene and four Anserini classes of the fat jar's 585 MB unpacked. This tool keeps the
packages the JVM loaded classes from while the server ran (a class-load log, ``-Xlog:class+load``), whole: every
class and resource of each such package, so a class that the logged run did not reach but its package's code
reaches later (a merge policy, a codec's reader) is there too. ``META-INF/services`` files keep only the providers
that are in the jar (a provider missing from its jar is an error to ``ServiceLoader``).

    # 1. log which classes the server loads (its lexical tests and an ingest run with search)
    JAVA_TOOL_OPTIONS="-Xlog:class+load=info:file=/tmp/cl/%p.txt" python -m pytest -q tests/unit/lexical
    JAVA_TOOL_OPTIONS="-Xlog:class+load=info:file=/tmp/cl/%p.txt" python -m benchmarks.ingest.run --parts a,b,c ...
    # 2. the packages, kept in the repository (benchmarks/gpu/lucene-packages.txt)
    python -m benchmarks.gpu.classpath packages /tmp/cl/*.txt
    # 3. the slim jar, from the installed pyserini's fat jar
    python -m benchmarks.gpu.classpath jar .whl/anserini-1.7.1-slim-fatjar.jar

The server finds it where pyserini is not installed: an ``anserini-*-fatjar.jar`` on ``$CLASSPATH``
(``server.lexical.jvm.anserini_jar``). The fat jar stays the server's classpath everywhere else.
"""
from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

PACKAGES = Path(__file__).with_name("lucene-packages.txt")


def packages_from_logs(logs: list[Path]) -> list[str]:
    """Packages (dotted) of the classes a ``-Xlog:class+load`` log says came from an Anserini fat jar."""
    found: set[str] = set()
    for log in logs:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            words = line.split()
            if len(words) >= 4 and words[2] == "source:" and "fatjar" in words[3] and "." in words[1]:
                found.add(words[1].rsplit(".", 1)[0])
    return sorted(found)


def slim_jar(fat: Path, dest: Path, packages: list[str]) -> dict[str, int]:
    """Writes ``dest`` with every entry of ``fat`` that lies directly in one of ``packages`` (classes and resources),
    and its ``META-INF/services`` files cut to the providers that are kept. Returns counts."""
    dirs = {p.replace(".", "/") + "/" for p in packages}
    counts = {"classes": 0, "resources": 0, "services": 0, "providers_dropped": 0}
    with zipfile.ZipFile(fat) as src, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        names = src.namelist()
        kept: set[str] = set()
        for name in names:
            if name.endswith("/"):
                continue
            folder = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
            if folder in dirs:
                out.writestr(name, src.read(name))
                kept.add(name)
                counts["classes" if name.endswith(".class") else "resources"] += 1
        for name in names:
            if not name.startswith("META-INF/services/") or name.endswith("/"):
                continue
            lines = src.read(name).decode("utf-8").splitlines()
            providers = []
            for line in lines:
                cls = line.split("#", 1)[0].strip()
                if not cls:
                    continue
                if cls.replace(".", "/") + ".class" in kept:
                    providers.append(cls)
                else:
                    counts["providers_dropped"] += 1
            if providers:
                out.writestr(name, "\n".join(providers) + "\n")
                counts["services"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pk = sub.add_parser("packages", help="write the package list from class-load logs")
    pk.add_argument("logs", nargs="+", type=Path)
    pk.add_argument("--out", type=Path, default=PACKAGES)
    jr = sub.add_parser("jar", help="write the slim jar from the installed pyserini's fat jar")
    jr.add_argument("dest", type=Path)
    jr.add_argument("--packages", type=Path, default=PACKAGES)
    jr.add_argument("--fat", type=Path, default=None, help="the fat jar (default: the installed pyserini's)")
    args = p.parse_args(argv)
    if args.cmd == "packages":
        found = packages_from_logs(args.logs)
        if not found:
            print("no classes from an Anserini fat jar in those logs", file=sys.stderr)
            return 1
        args.out.write_text("".join(f"{x}\n" for x in found), encoding="utf-8")
        print(f"{len(found)} packages -> {args.out}")
        return 0
    from server.lexical.jvm import anserini_jar

    fat = args.fat or anserini_jar()
    packages = [x.strip() for x in args.packages.read_text(encoding="utf-8").splitlines() if x.strip()]
    args.dest.parent.mkdir(parents=True, exist_ok=True)
    counts = slim_jar(fat, args.dest, packages)
    print(f"{args.dest}: {args.dest.stat().st_size / 1e6:.1f} MB from {fat.name} "
          f"({fat.stat().st_size / 1e6:.0f} MB); {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
