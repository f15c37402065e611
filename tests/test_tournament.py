"""`alphazero tournament` (``alphazero.judge.tournament``): a round robin on one Elo scale, resumable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from alphazero.fileio import read_jsonl
from commands.main import main

# Fast players with a known order: material search at depth 2 >> one-ply captures >> random moves.
PLAYERS = ["random", "greedy", "ab:material?depth=2"]


def test_round_robin_orders_the_players_and_resumes_from_its_file(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["tournament", *PLAYERS, "--games", "10", "--max-plies", "160", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    ratings = result["ratings"]
    assert ratings["random"]["elo"] == 0.0  # the first player is the anchor
    assert ratings["ab:material?depth=2"]["elo"] > ratings["greedy"]["elo"] > ratings["random"]["elo"] + 100
    assert all(r["elo_low"] <= r["elo"] <= r["elo_high"] and r["games"] == 20 for r in ratings.values())
    records = read_jsonl(out)
    assert [(r["a"], r["b"]) for r in records] == [(PLAYERS[0], PLAYERS[1]), (PLAYERS[0], PLAYERS[2]),
                                                     (PLAYERS[1], PLAYERS[2])]
    assert all(r["wins"] + r["draws"] + r["losses"] == 10 for r in records)

    # A rerun with the same file plays nothing new and fits the same ratings.
    records[2]["wins"], records[2]["losses"] = records[2]["losses"], records[2]["wins"]  # tamper: proves it is read
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["tournament", *PLAYERS, "--games", "10", "--out", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert len(read_jsonl(out)) == 3
    assert again["matches"][2]["wins"] == records[2]["wins"]
    assert again["ratings"]["greedy"]["elo"] != pytest.approx(ratings["greedy"]["elo"])


def test_pinned_anchors_fix_the_scale(tmp_path, capsys):
    # A file holding every match: nothing is played. C scored 30/40 against A and 18/40 against B.
    a, b, c = "random", "greedy", "ab:material?depth=1"
    out = tmp_path / "t.jsonl"
    matches = [(a, b, 20, 0, 20), (a, c, 10, 0, 30), (b, c, 22, 0, 18)]
    out.write_text("".join(json.dumps({"format_version": 1, "a": x, "b": y, "games": 40, "wins": w, "draws": d,
                                       "losses": l, "score": (w + d / 2) / 40, "elo": 0, "elo_low": 0, "elo_high": 0,
                                       "terminations": {}}) + "\n" for x, y, w, d, l in matches))
    assert main(["tournament", a, b, c, "--games", "40", "--out", str(out), "--anchor", f"{a}@1000",
                 "--anchor", f"{b}@1200", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    ratings = result["ratings"]
    assert result["pinned"] == {a: 1000.0, b: 1200.0}
    assert ratings[a]["elo"] == ratings[a]["elo_low"] == 1000.0 and ratings[b]["elo"] == ratings[b]["elo_high"] == 1200.0
    # C's maximum likelihood by a grid search, one virtual draw per pair as the fit's prior.
    grid = np.arange(800.0, 1600.0, 0.01)
    likelihood = sum((points + 0.5) * np.log(1 / (1 + 10 ** ((elo - grid) / 400)))
                     + (40.5 - points) * np.log(1 / (1 + 10 ** ((grid - elo) / 400)))
                     for elo, points in ((1000.0, 30.0), (1200.0, 18.0)))
    assert ratings[c]["elo"] == pytest.approx(grid[np.argmax(likelihood)], abs=0.02)
    assert ratings[c]["elo_low"] < ratings[c]["elo"] < ratings[c]["elo_high"]


@pytest.mark.parametrize("argv, message", [
    (["random", "--games", "2"], "at least two different"),
    (["random", "random", "--games", "2"], "at least two different"),
    (["random", "greedy", "--games", "2", "--anchor", "ab:material"], "not one of the players"),
    (["random", "greedy", "--games", "2", "--anchor", "random@x"], "not one of the players"),
    (["random", "greedy", "--games", "2", "--anchor", "random", "--anchor", "greedy@100"], "one SPEC"),
    (["random", "greedy", "--games", "2", "--anchor", "random@inf"], "finite"),
    (["random", "greedy", "--games", "2", "--anchor", "random@1", "--anchor", "random@2"], "twice"),
    (["random", "greedy", "--games", "3"], "even"),
    (["random", "nonsense:x", "--games", "2"], "nonsense"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(["tournament", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_binary_results_file_is_one_line_and_left_alone(tmp_path, one_line_error):
    out = tmp_path / "image.png"
    out.write_bytes(b"\x89PNG\r\n\x1a\n")
    assert f"{out}:1: not a text file" in one_line_error("tournament", "random", "greedy", "--games", "2", "--out", str(out))
    assert out.read_bytes() == b"\x89PNG\r\n\x1a\n"
