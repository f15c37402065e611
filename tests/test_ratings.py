"""`alphazero ratings` (``alphazero.judge.ratings``): orders players by strength, rates a run's generations."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from alphazero.checkpoint import (
    ArenaRecord,
    RunDirectory,
    RunState,
    append_jsonl,
    read_jsonl,
)
from alphazero.config import NetworkConfig
from alphazero.judge.ratings import rate_players
from alphazero.nets.network import PolicyValueNet, save_network
from commands.main import main

# Installed by .ci/run (apt-get install stockfish); a missing engine fails these tests, never skips them.
STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"
TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)

torch.set_num_threads(1)


def _tiny_net(path: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    save_network(PolicyValueNet(TINY), path)
    return path


def test_ratings_recover_the_order_of_three_players() -> None:
    engine = f"uci:{STOCKFISH}?depth=1"
    ratings, games = rate_players(["random", "greedy", engine], games_per_pair=12, max_plies=150, seed=0)
    assert len(games) == 36
    assert ratings["random"].elo == 0.0  # anchored at the first player
    assert ratings[engine].elo > ratings["greedy"].elo + 100 > ratings["random"].elo + 100
    assert ratings[engine].elo_low > 0  # the engine is clearly above random, not just by the point estimate


def test_ratings_of_a_run_directory(capsys, tmp_path) -> None:
    run = RunDirectory(tmp_path / "run")
    for generation in range(3):
        _tiny_net(run.network_path(generation), seed=generation)
    arena = ArenaRecord(generation=1, candidate="gen-0001.pt", best="gen-0000.pt", wins=5, draws=3, losses=2,
                        score=0.65, elo=107.5, elo_low=-60.0, elo_high=300.0, promoted=True, learner_step=10)
    run.write_state(RunState(generation=2, best_generation=1, arenas=[arena]))  # gen-0002 never played
    plot = tmp_path / "plots" / "elo.png"
    args = ["ratings", str(run.path), "--anchor", "random", "--games", "2", "--sims", "2", "--max-plies", "12",
            "--plot", str(plot), "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["ratings"]) == {"gen-0000", "gen-0001", "gen-0002", "random"}
    assert report["anchor"] == "random" and report["ratings"]["random"]["elo"] == 0.0
    # gen-0002 linked to gen-0001; random against first (0), best (1) and last (2): 4 matches of 2 games.
    stored = read_jsonl(run.path / "ratings" / "games.jsonl")  # one line per game, written as it ended
    assert len(stored) == 8 and {r["score"] for r in stored} <= {0.0, 0.5, 1.0}
    assert sorted({(r["a"], r["b"]) for r in stored}) == [("gen-0002", "gen-0001"), ("random", "gen-0000"),
                                                          ("random", "gen-0001"), ("random", "gen-0002")]
    assert report["new_games"] == 8 and report["games"] == 10 + 8
    assert report["ratings"]["gen-0001"]["games"] == 10 + 2 + 2  # arena + link + anchor
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A second call replays nothing: the stored games are reused; without an anchor gen-0000 is 0 Elo.
    assert main(["ratings", str(run.path), "--games", "2", "--sims", "2", "--max-plies", "12"]) == 0
    out = capsys.readouterr().out
    assert len(read_jsonl(run.path / "ratings" / "games.jsonl")) == 8
    assert "(0 new)" in out and "anchor gen-0000 = 0 Elo" in out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["Rank", "Name", "Elo"]
    rows = {line.split()[1]: line.split()[2] for line in lines[1:5]}
    assert set(rows) == {"gen-0000", "gen-0001", "gen-0002", "random"} and rows["gen-0000"] == "+0.0"
    assert (run.path / "ratings" / "elo.png").is_file()

    # The anchor pinned at a rating (SPEC@ELO): the same games, the whole scale shifted to put it there.
    assert main(["ratings", str(run.path), "--anchor", "random@-300", "--games", "2", "--sims", "2", "--max-plies", "12",
                 "--plot", str(plot), "--json"]) == 0
    pinned = json.loads(capsys.readouterr().out)
    assert pinned["new_games"] == 0 and pinned["pinned"] == {"random": -300.0}
    assert pinned["ratings"]["random"]["elo"] == -300.0
    for name, rating in report["ratings"].items():
        assert pinned["ratings"][name]["elo"] == pytest.approx(rating["elo"] - 300.0, abs=1e-6)
        assert pinned["ratings"][name]["elo_high"] - pinned["ratings"][name]["elo"] == pytest.approx(
            rating["elo_high"] - rating["elo"], abs=1e-6)


def test_ratings_continue_a_match_a_stop_cut_short_and_one_writer_at_a_time(capsys, tmp_path) -> None:
    from alphazero.fileio import DirectoryLock

    run = RunDirectory(tmp_path / "run")
    for generation in range(2):
        _tiny_net(run.network_path(generation), seed=generation)
    run.write_state(RunState(generation=1, best_generation=0))
    games_path = run.path / "ratings" / "games.jsonl"
    # A ratings run killed after one of its three games: that game is on disk, with a torn line after it.
    append_jsonl(games_path, {"format_version": 2, "time": 0.0, "a": "gen-0001", "b": "gen-0000", "a_spec": "x",
                              "b_spec": "y", "max_plies": 12, "score": 1.0, "result": "1-0", "termination": "checkmate"})
    with open(games_path, "a") as handle:
        handle.write('{"format_version": 2, "a": "gen-00')
    args = ["ratings", str(run.path), "--games", "3", "--sims", "2", "--max-plies", "12", "--json"]
    with DirectoryLock(games_path.parent, "ratings"):
        assert main(args) == 2  # another ratings holds the directory: refused, nothing played
        assert "in use by another ratings" in capsys.readouterr().err
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["new_games"] == 2  # only the missing games
    lines = read_jsonl(games_path)
    assert len(lines) == 3 and all(line["a"] == "gen-0001" for line in lines)
    assert report["ratings"]["gen-0001"]["games"] == 3


def test_ratings_of_a_missing_run_exits_2(capsys, tmp_path) -> None:
    assert main(["ratings", str(tmp_path / "nothing")]) == 2
    assert "state.json: missing" in capsys.readouterr().err
