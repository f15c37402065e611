"""The scale simulation (``tools/scale.py``, ``workers.scale``) at a tiny size: every figure is reported, and sane.

Two loopback nodes, two synthetic self-play actors through the real driver (the smoke config's learner, no arena
worker) for a few seconds, a small replay window, and a small network broadcast to one, two and four actors. The
figures themselves are measurements (docs/RESULTS.md, "Scale simulated on one machine"), not asserted here beyond
being measured.
"""

from __future__ import annotations

import pytest

from tests.runs import SMOKE

pytestmark = [pytest.mark.ray]


@pytest.mark.timeout(120)
def test_the_scale_tool_reports_ingestion_sampling_and_broadcast_with_memory_sampled() -> None:
    import ray

    from tools.scale import parser, run

    args = parser().parse_args(["--config", str(SMOKE), "--set", "arena.games=0",
                                "--nodes", "2", "--actors", "2", "--rate", "200", "--game-positions", "40",
                                "--seconds", "1", "--interval", "0.25", "--window", "20000", "--sampling-seconds", "0.2",
                                "--broadcast", "1,2,4", "--blocks", "1", "--channels", "8", "--repeats", "1",
                                "--set", "selfplay.games_per_call=2", "--set", "selfplay.games_per_worker=4"])
    figures = run(args)
    assert not ray.is_initialized()  # the tool stopped what it started

    (row,) = figures["ingestion"]
    assert row["actors"] == 2 and row["offered_positions_per_s"] == 400
    assert row["positions_per_s"] > 0 and row["games"] > 0 and row["positions"] == 40 * row["games"]
    # The actors play at the offered rate: over the whole run no more than that arrives. (The steady rate spans a
    # second or less, and results land 80 positions at a time, so a loaded machine can read it 1.6x high.)
    assert row["positions"] <= 400 * row["seconds"]
    assert 0 < row["driver_busy"] < 1
    assert row["ms_per_result"]["write_shard"] > 0 and row["ms_per_result"]["write_inflight"] > 0
    for memory in ("driver_rss_mb", "learner_rss_mb", "object_store_mib"):
        assert row[memory]["first"] is not None and row[memory]["max"] >= row[memory]["first"] >= 0, memory
    assert row["driver_rss_mb"]["first"] > 50

    sampling = figures["sampling"]
    assert sampling["window_positions"] == 20000 and sampling["positions_per_s"] > 0

    broadcast = figures["broadcast"]
    assert [r["actors"] for r in broadcast["runs"]] == [1, 2, 4]
    assert all(r["seconds"] > 0 for r in broadcast["runs"]) and broadcast["runs"][-1]["nodes"] == 2
    assert broadcast["seconds_per_added_actor"] is not None and broadcast["estimate_1000_actors_s"] is not None
