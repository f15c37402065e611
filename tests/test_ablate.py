"""tools/ablate.py: an ablation's variants as the command line gives them, and its table."""

import json

import pytest

from tools.ablate import parse_variant, run_summary, table


def test_a_variant_is_a_name_and_its_overrides():
    assert parse_variant("puct32") == ("puct32", [])
    assert parse_variant("gumbel8: search.algorithm=gumbel, search.num_simulations=8") == (
        "gumbel8", ["search.algorithm=gumbel", "search.num_simulations=8"])
    assert parse_variant("ema: train.ema_decay=0.99,") == ("ema", ["train.ema_decay=0.99"])
    assert parse_variant("again: seed=2") == ("again", ["seed=2"])  # the same config, another run
    for bad, words in (("", "the name"), ("a b: x.y=1", "the name"), ("v: algorithm=gumbel", "'algorithm=gumbel'"),
                       ("v: search.algorithm", "SECTION.KEY=VALUE"),
                       ("v: max_minutes=5", "or seed=N")):
        with pytest.raises(ValueError, match=words):
            parse_variant(bad)


def test_the_summary_and_the_table_say_what_each_run_did(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({
        "games": 500, "positions": 80000, "learner_step": 300, "best_generation": 2, "generation": 3,
        "elapsed_s": 1200.0}))
    events = [{"event": "selfplay_stats", "games": 100, "max_length": 0.4, "resigned": 0.0, "would_resign": 0,
               "false_resign_rate": None},
              {"event": "promoted", "games": 999},
              {"event": "selfplay_stats", "games": 300, "max_length": 0.2, "resigned": 0.1, "would_resign": 6,
               "resign_unfinished": 2, "false_resign_rate": 0.25}]
    (tmp_path / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + '\n{"torn')
    summary = run_summary(tmp_path)
    assert summary["positions_per_s"] == pytest.approx(66.7) and summary["seconds"] == 1200
    # Shares weighted by each generation's games: (40 + 60) / 400 capped, 30 / 400 resigned, 1 of the 4 judged
    # (6 would have resigned, 2 of them stopped at the length limit) false.
    assert (summary["capped"], summary["resigned"], summary["false_resign_rate"]) == (0.25, 0.075, 0.25)
    rows = [{"name": "puct32", "overrides": [], **summary, "anchor": True},
            {"name": "gumbel8", "overrides": ["search.algorithm=gumbel"], **summary,
             "rating": {"elo": 35.2, "elo_low": -20.1, "elo_high": 90.6}}]
    lines = table(rows).splitlines()
    assert lines[0].startswith("| variant | overrides | Elo [95%]") and len(lines) == 4
    assert "| puct32 | (the config) | anchor (0) | 500 | 80,000 | 66.7 | 300 | 2 | 25% / 8% |" == lines[2]
    assert "| +35 [-20, +91] |" in lines[3] and "search.algorithm=gumbel" in lines[3]
    # A run without events (or from before them) says so rather than a made-up zero.
    (tmp_path / "events.jsonl").unlink()
    assert run_summary(tmp_path)["capped"] is None
    assert table([{"name": "old", "overrides": [], **run_summary(tmp_path), "anchor": True}]).endswith("| - / - |")
