"""The slim Anserini jar for a GPU box (benchmarks/gpu/classpath.py): whole packages, services cut to what is kept."""
from __future__ import annotations

import zipfile
from pathlib import Path

from benchmarks.gpu.classpath import PACKAGES, packages_from_logs, slim_jar


def test_packages_come_from_the_fat_jar_lines_of_a_class_load_log(tmp_path: Path) -> None:
    log = tmp_path / "1.txt"
    log.write_text(
        "[0.011s][info][class,load] java.lang.Object source: jrt:/java.base\n"
        "[0.5s][info][class,load] org.apache.lucene.index.Term source: file:/x/anserini-1.7.1-fatjar.jar\n"
        "[0.6s][info][class,load] org.apache.lucene.index.Term$1 source: file:/x/anserini-1.7.1-fatjar.jar\n"
        "[0.7s][info][class,load] io.anserini.analysis.AnalyzerUtils source: jar:file:/x/anserini-1.7.1-fatjar.jar!/\n"
        "[0.8s][info][class,load] engram.BatchSearch source: file:/repo/server/lexical/java/build/\n",
        encoding="utf-8")
    assert packages_from_logs([log]) == ["io.anserini.analysis", "org.apache.lucene.index"]


def test_the_slim_jar_keeps_whole_packages_and_only_their_providers(tmp_path: Path) -> None:
    fat = tmp_path / "anserini-0-fatjar.jar"
    with zipfile.ZipFile(fat, "w") as z:
        z.writestr("org/apache/lucene/index/Term.class", b"a")
        z.writestr("org/apache/lucene/index/NeverLoaded.class", b"b")   # same package: kept
        z.writestr("org/apache/lucene/index/stopwords.txt", b"the")       # a resource of it: kept
        z.writestr("org/apache/lucene/index/sub/Deeper.class", b"c")     # a subpackage: not kept
        z.writestr("ai/onnxruntime/native/lib.so", b"x" * 1000)
        z.writestr("META-INF/services/org.apache.lucene.codecs.Codec",
                   "# comment\norg.apache.lucene.index.Term\nai.onnxruntime.Provider\n")
        z.writestr("META-INF/services/ai.Other", "ai.onnxruntime.Provider\n")
    dest = tmp_path / "slim.jar"
    counts = slim_jar(fat, dest, ["org.apache.lucene.index"])
    with zipfile.ZipFile(dest) as z:
        names = set(z.namelist())
        codec = z.read("META-INF/services/org.apache.lucene.codecs.Codec").decode()
    assert names == {"org/apache/lucene/index/Term.class", "org/apache/lucene/index/NeverLoaded.class",
                     "org/apache/lucene/index/stopwords.txt", "META-INF/services/org.apache.lucene.codecs.Codec"}
    assert codec == "org.apache.lucene.index.Term\n"
    assert counts == {"classes": 2, "resources": 1, "services": 1, "providers_dropped": 2}


def test_the_package_list_is_tracked_and_holds_lucene_and_anserini() -> None:
    packages = PACKAGES.read_text(encoding="utf-8").split()
    assert "org.apache.lucene.index" in packages and "io.anserini.analysis" in packages
    assert packages == sorted(set(packages))
