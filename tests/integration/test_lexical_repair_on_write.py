"""Space returned after a full disk: the first Write to a tenant whose lexical index is stale rebuilds it before
the Write takes the space (the periodic repair could come after the Writes had used it up again), and a lexical
search finds both the memories before and the new one."""

from __future__ import annotations

from support import start_server


def test_a_write_rebuilds_a_stale_lexical_index_first(tmp_path, jvm, embedder) -> None:
    # no periodic flush: only the Write can repair
    running = start_server(tmp_path / "data", embedder=embedder, lucene_commit_interval_s=3600.0)
    try:
        client = running.client()
        client.create_tenant("t")
        before = client.write("t", "the heron nests by the old mill").results[0].memory_id
        (shard,) = [s for s in running.app.engine.registry.loaded() if s.tenant_id == "t"]
        shard.lexical_stale = True   # what Lucene's ENOSPC leaves (tests/reliability/test_disk_full.py, for real)
        assert shard.repair_due()
        after = client.write("t", "a kingfisher dives by the old mill").results[0].memory_id
        assert not shard.lexical_stale
        hits = {h.memory.memory_id for h in client.search("t", "old mill", lexical_only=True).hits}
        assert hits == {before, after}
    finally:
        running.stop()
