"""engram import reads a file of any size in constant memory: both passes over a ~40 MB JSONL (the check and the
batches) grow the process by far less than the file. In a fresh interpreter, so the peak RSS is the import's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import resource, sys
from pathlib import Path
from engram_client.cli.importer import Importer, batches, checked_count
from engram_client.cli.io import iter_records

path = Path(sys.argv[1])
importer = Importer(None, "t", path, skip_invalid=True)   # never sends: the reading side alone
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
total = checked_count(path, "", importer)
sent = sum(len(b) for b in batches(iter_records(path), 128, importer))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(total, sent, importer.counts["rejected"], (after - before) // 1024)
"""


def test_both_passes_over_a_big_file_keep_memory_flat(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = "Caroline: I went to the LGBTQ support group yesterday and it was so powerful. " * 12
    with path.open("w", encoding="utf-8") as f:
        for i in range(40_000):
            f.write(json.dumps({"content": f"{i} {line}", "type": "episodic", "entities": ["caroline"]}) + "\n")
        f.write("not json\n")
    size_mb = path.stat().st_size / 2**20
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=300)
    total, sent, rejected, grew_mb = map(int, done.stdout.split())
    assert (total, sent, rejected) == (40_001, 40_000, 1)
    assert size_mb > 35 and grew_mb < 16, (size_mb, grew_mb)   # holding the records took 78 MB
