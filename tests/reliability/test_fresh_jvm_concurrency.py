"""A fresh JVM hit at once by writer and searcher threads on two tenants, in a child process (a JVM crash
kills the process, so only a child can report it). Once, before the warm-up in ``server.lexical.start``, such a
start crashed with SIGSEGV while pyjnius built its first proxy classes on several threads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys, tempfile, threading
    from pathlib import Path
    sys.setswitchinterval(1e-6)
    from server.lexical import detach_current_thread, start
    from server.lexical.lucene import LuceneIndex
    start(heap_mb=256)
    tmp = Path(tempfile.mkdtemp())
    indexes = [LuceneIndex.open(tmp / name) for name in ("a", "b")]
    errors = []

    def run(index, writer):
        try:
            for i in range(60):
                if writer:
                    index.upsert([(i, f"note {i} about otters")])
                    if i % 20 == 0:
                        index.commit(i)
                        index.delete([i])
                else:
                    index.search_many(["otters", "note 7", ""], 10)
                    index.count()
        except BaseException as exc:
            errors.append(exc)
        finally:
            detach_current_thread()

    threads = [threading.Thread(target=run, args=(ix, w)) for ix in indexes for w in (True, False, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ix in indexes:
        ix.close()
    print("errors", len(errors), errors[:1])
    sys.exit(1 if errors else 0)
""")


def test_a_fresh_jvm_survives_threads_from_the_first_call(tmp_path: Path) -> None:
    for _ in range(2):
        # cwd: a crashing JVM writes its hs_err_pid*.log there
        done = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
