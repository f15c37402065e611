"""`alphazero ratings`, `puzzles` and `play`: orders players by strength, scores puzzles, plays a person."""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import chess
import chess.pgn
import pytest
import torch

from alphazero.checkpoint import (
    ArenaRecord,
    RunDirectory,
    RunState,
    append_jsonl,
    read_jsonl,
)
from alphazero.cli import main
from alphazero.judge.evaluate import parse_human_move, rate_players, wilson_interval
from alphazero.nets.network import NetworkConfig, PolicyValueNet, save_network

# Installed by .ci/run (apt-get install stockfish); a missing engine fails these tests, never skips them.
STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"
TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)

# Ten only-move puzzles from /work/shared/data/puzzles-dev.csv (Stockfish 15.1, depth 12).
PUZZLES = """fen,best_uci,best_cp,second_cp
rnbqkbnr/1p1pp1p1/p6p/1Np2p2/2P5/1Q1P1P1P/PP2P1P1/R1B1KBNR b KQkq - 1 7,a6b5,390,125
rn5r/p2kbppp/4p3/2pn4/2p1P3/3PB1PP/PP3PB1/RN2KR2 w Q - 0 15,e4d5,530,145
2N2b1r/7p/8/2ppk1pP/4p3/4P3/1B2K3/8 b - - 1 35,d5d4,488,56
r1bq1knr/pppnpp2/3p2p1/6Np/3b1P2/1P1QP1P1/P1P4P/RNB1KB1R b KQ - 0 8,d4a1,558,100
8/8/6p1/3pn3/2p2Rk1/B7/4K3/8 b - - 4 38,g4f4,651,-304
rnbq1bnr/p1pppkp1/5p2/7p/1p1P1P2/N3B3/PPPNP1PP/R2QKB1R b KQ - 0 6,b4a3,331,42
r1bqk1nr/pp1p2pp/2nN1p2/2b1p3/8/7P/P1PPPPP1/R1BQKBNR b KQkq - 1 6,c5d6,462,-33
r1bk1bnr/pp2pppp/8/2p1p3/B1q1P3/1N6/P4PPP/R2QK2R b KQ - 5 13,d8c7,395,-297
1nb2br1/3qpk1p/1Qpp1pp1/8/2PPn2P/8/rP2PPP1/RNB1KB1R w KQ - 0 11,a1a2,126,-553
3k4/r7/1p1n1p1n/5P2/3N4/6PP/8/5KR1 w - - 2 44,d4c6,91,-257
"""

torch.set_num_threads(1)


@pytest.fixture()
def puzzle_file(tmp_path) -> Path:
    path = tmp_path / "puzzles.csv"
    path.write_text(PUZZLES)
    return path


def _tiny_net(path: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    save_network(PolicyValueNet(TINY), path)
    return path


# ------------------------------------------------------------------------------------------- ratings


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


# ------------------------------------------------------------------------------------------- puzzles


def test_wilson_interval_matches_the_formula() -> None:
    low, high = wilson_interval(8, 10)
    assert math.isclose(low, 0.4902, abs_tol=1e-3) and math.isclose(high, 0.9433, abs_tol=1e-3)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0


def test_a_strong_engine_solves_puzzles_and_random_does_not(capsys, puzzle_file) -> None:
    assert main(["puzzles", str(puzzle_file), "--player", f"uci:{STOCKFISH}?depth=10", "--json"]) == 0
    strong = json.loads(capsys.readouterr().out)
    assert main(["puzzles", str(puzzle_file), "--player", "random", "--json", "--limit", "8"]) == 0
    weak = json.loads(capsys.readouterr().out)
    assert strong["total"] == 10 and weak["total"] == 8
    assert strong["share"] >= 0.8 and weak["share"] <= 0.3
    for report in (strong, weak):
        assert report["low"] <= report["share"] <= report["high"]
        assert report["solved"] == round(report["share"] * report["total"])
    assert main(["puzzles", str(puzzle_file), "--player", "greedy"]) == 0
    assert "95% Wilson interval" in capsys.readouterr().out


def test_bad_puzzle_rows_and_specs_exit_2(capsys, tmp_path, puzzle_file) -> None:
    bad = tmp_path / "bad.csv"
    lines = PUZZLES.splitlines()
    bad.write_text("\n".join([lines[0], lines[1], "rnbqkbnr/pppppppp/8/8 w KQkq - 0 1,e2e4,0,0"]) + "\n")
    assert main(["puzzles", str(bad), "--player", "random"]) == 2
    err = capsys.readouterr().err
    assert "row 2" in err and "bad FEN" in err
    illegal = tmp_path / "illegal.csv"
    illegal.write_text("\n".join([lines[0], lines[1].replace(",a6b5,", ",e2e4,")]) + "\n")
    assert main(["puzzles", str(illegal), "--player", "random"]) == 2
    assert "row 1" in capsys.readouterr().err
    assert main(["puzzles", str(puzzle_file), "--player", "stockfish"]) == 2
    assert "unknown kind 'stockfish'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- play


def test_human_move_reasons() -> None:
    board = chess.Board()
    for san in ("d4", "e5", "Nf3", "Bb4+"):
        board.push_san(san)
    with pytest.raises(ValueError, match="ambiguous move Nd2: could be Nbd2 or Nfd2"):
        parse_human_move(board, "Nd2")
    with pytest.raises(ValueError, match="you are in check"):
        parse_human_move(board, "e3")
    assert parse_human_move(board, "c3") == chess.Move.from_uci("c2c3")
    assert parse_human_move(board, "Nfd2") == parse_human_move(board, "f3d2")
    promotion = chess.Board("8/4P3/8/8/8/8/k7/4K3 w - - 0 1")
    with pytest.raises(ValueError, match="e7e8q"):
        parse_human_move(promotion, "e7e8")
    assert parse_human_move(promotion, "e8=N").promotion == chess.KNIGHT
    pinned = chess.Board("4r1k1/8/8/8/8/8/4N3/4K3 w - - 0 1")
    with pytest.raises(ValueError, match="leave your king in check"):
        parse_human_move(pinned, "Nc3")
    with pytest.raises(ValueError, match="castling"):
        parse_human_move(chess.Board(), "O-O")
    with pytest.raises(ValueError, match="e1 holds your own king"):
        parse_human_move(chess.Board(), "d1e1")


def test_play_through_standard_input(monkeypatch, capsys, tmp_path) -> None:
    net = _tiny_net(tmp_path / "tiny.pt", seed=0)
    pgn = tmp_path / "game.pgn"
    # an illegal move, a SAN move, a UCI move, an ambiguous move, nonsense, then quit
    monkeypatch.setattr(sys, "stdin", io.StringIO("e2e5\nd4\ng1f3\nNd2\nhello\nquit\n"))
    assert main(["play", "--checkpoint", str(net), "--sims", "4", "--pgn", str(pgn)]) == 0
    out = capsys.readouterr().out
    assert "illegal move e2e5: the pawn on e2 cannot move to e5" in out
    assert "ambiguous move Nd2: could be Nbd2 or Nfd2" in out
    assert "not a move: 'hello'" in out
    assert "8 | r n b q k b n r | 8" in out and "    a b c d e f g h" in out  # labelled, White at the bottom
    assert f"Game saved to {pgn}" in out
    game = chess.pgn.read_game(io.StringIO(pgn.read_text()))
    moves = [move.uci() for move in game.mainline_moves()]
    assert len(moves) == 4 and moves[0] == "d2d4" and moves[2] == "g1f3"
    assert game.headers["White"] == "human" and "alphazero" in game.headers["Black"]
    assert game.headers["Result"] == "*" and game.headers["Termination"] == "abandoned"


def test_play_as_black_ends_cleanly_at_end_of_input(tmp_path) -> None:
    net = _tiny_net(tmp_path / "tiny.pt", seed=1)
    result = subprocess.run([sys.executable, "-m", "alphazero.cli", "play", "--checkpoint", str(net), "--sims", "4",
                             "--color", "black"], input="e5\n", capture_output=True, text=True, cwd=tmp_path,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    board_text = result.stdout
    assert "    h g f e d c b a" in board_text and board_text.index("\n1 | ") < board_text.index("\n8 | ")  # Black's side
    assert "8 | r n b k q b n r | 8" in board_text
    assert "End of input" in result.stdout
    saved = list(tmp_path.glob("game-*.pgn"))
    assert len(saved) == 1
    game = chess.pgn.read_game(io.StringIO(saved[0].read_text()))
    moves = [move.uci() for move in game.mainline_moves()]
    assert len(moves) == 3 and moves[1] == "e7e5" and game.headers["Black"] == "human"


def test_resign_scores_the_game_for_the_network(monkeypatch, capsys, tmp_path) -> None:
    net = _tiny_net(tmp_path / "tiny.pt", seed=2)
    pgn = tmp_path / "resigned.pgn"
    monkeypatch.setattr(sys, "stdin", io.StringIO("resign\n"))
    assert main(["play", "--checkpoint", str(net), "--sims", "2", "--pgn", str(pgn)]) == 0
    game = chess.pgn.read_game(io.StringIO(pgn.read_text()))
    assert game.headers["Result"] == "0-1" and game.headers["Termination"] == "resignation"
    assert main(["play", "--checkpoint", str(tmp_path / "missing.pt")]) == 2
    assert "no network file" in capsys.readouterr().err
