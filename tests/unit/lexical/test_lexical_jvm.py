from __future__ import annotations

from pathlib import Path

from server import lexical
from server.lexical import jvm as jvm_module


def test_start_jvm_is_idempotent_and_reported(jvm: None) -> None:
    assert jvm_module.jvm_started()
    lexical.start(heap_mb=2048)  # second call: no-op, no error
    assert jvm_module.jvm_started()
    runtime = jvm_module.jclass("java.lang.System").getProperty("java.version")
    assert int(str(runtime).split(".")[0]) >= 21


def test_classpath_is_the_bundled_anserini_jar() -> None:
    jar = jvm_module.anserini_jar()
    assert jar.is_file()
    assert jar.name.startswith("anserini-") and jar.name.endswith("-fatjar.jar")


def test_jclass_proxies_are_cached(jvm: None) -> None:
    first = jvm_module.jclass("org.apache.lucene.index.Term")
    assert jvm_module.jclass("org.apache.lucene.index.Term") is first


def test_java_major_reads_the_release_file(tmp_path: Path) -> None:
    (tmp_path / "release").write_text('IMPLEMENTOR="x"\nJAVA_VERSION="25.0.2"\n', encoding="utf-8")
    assert jvm_module._java_major(tmp_path) == 25
    (tmp_path / "release").write_text('JAVA_VERSION="17.0.9"\n', encoding="utf-8")
    assert jvm_module._java_major(tmp_path) == 17
    assert jvm_module._java_major(tmp_path / "missing") == 0
