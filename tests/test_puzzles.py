"""`alphazero puzzles` (``alphazero.judge.puzzles``): scores only-move puzzles, refuses malformed files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from commands.main import main

# Installed by .ci/run (apt-get install stockfish); a missing engine fails these tests, never skips them.
STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"

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


def test_a_binary_puzzle_file_is_one_line(one_line_error, tmp_path) -> None:
    binary = tmp_path / "puzzles.csv"
    binary.write_bytes("fen,best_uci\n".encode() + bytes([0xFF, 0xFE, 0x00, 0x41]) * 8)
    assert f"{binary}:2: not a text file" in one_line_error("puzzles", str(binary), "--player", "random")
