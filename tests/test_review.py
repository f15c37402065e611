"""``alphazero review``: every move of finished games graded by a UCI engine, Lichess's way.

A fake UCI engine reads each position's score from a table the test writes (so every grade below is
computed by hand), and logs every ``go`` (so a resumed review can be seen not to search again). Stockfish
itself checks the one thing a fake cannot: that a real blunder is found.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import chess
import chess.pgn
import pytest

from alphazero.judge.review import grade_move, read_games, winning_chances
from commands.main import main

FAKE_ENGINE = '''
import json, sys
import chess

table = json.load(open(sys.argv[1]))
log = open(sys.argv[2], "a")
board = chess.Board()
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "uci":
        print("id name TableFish 1")
        print("option name Threads type spin default 1 min 1 max 8")
        print("option name Hash type spin default 16 min 1 max 1024")
        print("uciok")
    elif words[0] == "isready":
        print("readyok")
    elif words[0] == "position":
        board = chess.Board() if words[1] == "startpos" else chess.Board(" ".join(words[2:8]))
        for move in words[words.index("moves") + 1:] if "moves" in words else []:
            board.push_uci(move)
    elif words[0] == "go":
        log.write(board.epd() + "\\n")
        log.flush()
        move = min(board.legal_moves, key=chess.Move.uci).uci()
        print(f"info depth {words[2]} score cp {table.get(board.epd(), 0)} pv {move}")
        print(f"bestmove {move}")
    elif words[0] == "quit":
        break
    sys.stdout.flush()
'''

SCHOLAR = ["e2e4", "e7e5", "d1h5", "b8c6", "f1c4", "g8f6", "h5f7"]  # 3...Nf6?? 4.Qxf7#


def _after(moves: list[str]) -> chess.Board:
    board = chess.Board()
    for move in moves:
        board.push_uci(move)
    return board


def _epd_after(moves: list[str]) -> str:
    return _after(moves).epd()


def _pgn(moves: list[str], white: str = "W", black: str = "B", result: str = "1-0") -> str:
    board = chess.Board()
    for move in moves:
        board.push_uci(move)
    game = chess.pgn.Game.from_board(board)
    game.headers.update({"White": white, "Black": black, "Result": result})
    return str(game) + "\n\n"


@pytest.fixture()
def fake(tmp_path: Path) -> tuple[str, Path]:
    """The fake engine's command and its log of searched positions. Its table: after 3.Bc4 Black (to move)
    stands +100; after 3...Nf6 White (to move) stands +1000 (mate in one); every other position 0."""
    table = {_epd_after(SCHOLAR[:5]): 100, _epd_after(SCHOLAR[:6]): 1000}
    (tmp_path / "table.json").write_text(json.dumps(table))
    (tmp_path / "engine.py").write_text(FAKE_ENGINE)
    log = tmp_path / "searched.log"
    return f"{sys.executable} {tmp_path / 'engine.py'} {tmp_path / 'table.json'} {log}", log


def _review(capsys, *args: str) -> dict:
    assert main(["review", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_grades_follow_lichess_winning_chances() -> None:
    assert winning_chances(0) == 0 and winning_chances(100) == pytest.approx(0.18203, abs=1e-4)  # 2/(1+e^-0.368)-1
    assert grade_move(0, 0)["accuracy"] == pytest.approx(100, abs=1e-3) and grade_move(0, 0)["label"] is None
    assert grade_move(0, -50)["label"] is None  # wc(-50) = -0.0920
    assert grade_move(0, -60)["label"] == "inaccuracy"  # wc(-60) = -0.1100
    assert grade_move(0, -100)["label"] == "inaccuracy"  # 0.182
    assert grade_move(0, -120)["label"] == "mistake"  # 0.217
    assert grade_move(0, -200)["label"] == "blunder"  # 0.352
    # The same 300 centipawns lost: a blunder from a level position, an inaccuracy while still winning.
    level, winning = grade_move(100, -200), grade_move(800, 500)
    assert level["cp_loss"] == winning["cp_loss"] == 300
    assert level["label"] == "blunder" and winning["label"] == "inaccuracy"
    assert winning["accuracy"] > level["accuracy"]
    assert grade_move(-300, 200)["cp_loss"] == 0 and grade_move(-300, 200)["accuracy"] == pytest.approx(100, abs=1e-3)


def test_a_game_is_graded_move_by_move_as_computed_by_hand(capsys, tmp_path: Path, fake) -> None:
    engine, log = fake
    games = tmp_path / "games.pgn"
    games.write_text(_pgn(SCHOLAR))
    report = _review(capsys, str(games), "--engine", engine, "--blunders", str(tmp_path / "blunders.csv"))
    assert report["engine"] == "TableFish 1" and report["settings"] == {"engine": "TableFish 1", "depth": 10, "nodes": None}
    # 8 positions; the last (checkmate) is scored by the rules, not searched.
    assert report["games"] == 1 and report["positions"] == 8 and len(log.read_text().splitlines()) == 7
    white, black = report["players"]
    # White: 3.Bc4 gives Black +100 (loss 100 cp, an inaccuracy); 4.Qxf7# keeps the +1000.
    assert (white["player"], white["moves"], white["acpl"], white["inaccuracies"], white["mistakes"], white["blunders"]) \
        == ("W", 4, 25, 1, 0, 0)
    assert white["lost"] == 0 and white["first_blunder_move_median"] is None
    # Black: 3...Nf6 from +100 to -1000: one blunder (1,100 cp) in three moves, the game lost with it.
    assert (black["player"], black["moves"], black["acpl"], black["blunders"], black["inaccuracies"]) \
        == ("B", 3, pytest.approx(1100 / 3), 1, 0)
    assert black["lost"] == black["lost_with_blunder"] == 1 and black["first_blunder_move_median"] == 3
    rows = list(csv.DictReader((tmp_path / "blunders.csv").open()))
    assert rows == [{"fen": _after(SCHOLAR[:5]).fen(), "played": "g8f6",
                     "best": min(_after(SCHOLAR[:5]).legal_moves, key=chess.Move.uci).uci(),
                     "before": "100", "after": "-1000", "player": "B", "source": f"{games}#1", "move_number": "3"}]


def test_book_plies_are_not_graded(capsys, tmp_path: Path, fake) -> None:
    engine, log = fake
    games = tmp_path / "games.pgn"
    game = _pgn(SCHOLAR).replace('[Result "1-0"]', '[Result "1-0"]\n[Opening "e2e4 e7e5 d1h5 b8c6"]')
    games.write_text(game)
    assert [g.book_plies for g in read_games(games)] == [4] and [g.book_plies for g in read_games(games, 1)] == [1]
    report = _review(capsys, str(games), "--engine", engine)
    white, black = report["players"]
    assert report["positions"] == 4 and (white["moves"], black["moves"]) == (2, 1) and black["blunders"] == 1
    forced = _review(capsys, str(games), "--engine", engine, "--skip-plies", "0")
    assert forced["positions"] == 8


def test_a_review_file_resumes_without_searching_again_and_workers_agree(capsys, tmp_path: Path, fake) -> None:
    engine, log = fake
    games = tmp_path / "games.pgn"
    other = ["d2d4", "d7d5", "c2c4", "e7e6"]
    games.write_text(_pgn(SCHOLAR) + _pgn(other, "B", "W", "1/2-1/2") + _pgn(SCHOLAR[:4], "X", "Y", "*"))
    out = tmp_path / "review.jsonl"
    first = _review(capsys, str(games), "--engine", engine, "--out", str(out))
    searched = len(log.read_text().splitlines())
    assert first["games"] == first["new_games"] == 3 and searched == 7 + 5 + 5
    again = _review(capsys, str(games), "--engine", engine, "--out", str(out))
    assert again["new_games"] == 0 and len(log.read_text().splitlines()) == searched
    assert again["players"] == first["players"]
    both = {row["player"]: row for row in first["players"]}
    assert both["W"]["games"] == both["B"]["games"] == 2 and both["X"]["games"] == 1
    parallel = _review(capsys, str(games), "--engine", engine, "--workers", "3")
    assert parallel["players"] == first["players"]
    # A torn last line (a kill while writing) is skipped, and that game reviewed again.
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])
    resumed = _review(capsys, str(games), "--engine", engine, "--out", str(out))
    assert resumed["new_games"] == 1 and resumed["players"] == first["players"]


def test_stockfish_finds_the_blunder_of_an_arena_game(capsys, tmp_path: Path) -> None:
    """A real arena file (its book plies from each record) and a real engine at a small depth."""
    record = {"format_version": 1, "match": {}, "index": 0,
              "opening": {"name": "e2e4 e7e5", "fen": chess.STARTING_FEN, "moves": ["e2e4", "e7e5"]},
              "white": "us", "black": "them", "result": "1-0", "termination": "checkmate", "plies": 7,
              "a_is_white": True, "pgn": _pgn(SCHOLAR, "us", "them")}
    games = tmp_path / "games.jsonl"
    games.write_text(json.dumps(record) + "\n")
    report = _review(capsys, str(games), "--depth", "8", "--blunders", str(tmp_path / "blunders.csv"))
    assert report["engine"].startswith("Stockfish")
    us, them = report["players"]
    assert (us["player"], us["moves"], them["player"], them["moves"]) == ("us", 3, "them", 2)
    assert (them["blunders"], them["lost_with_blunder"], them["first_blunder_move_median"]) == (1, 1, 3)
    rows = {row["played"]: row for row in csv.DictReader((tmp_path / "blunders.csv").open())}
    # 3...Nf6?? walks into mate (-1000 after); 4.Qxf7# loses nothing (2.Qh5 may count: depth 8 scores it -1.2).
    assert rows["g8f6"]["after"] == "-1000" and rows["g8f6"]["best"] != "g8f6" and "h5f7" not in rows


def test_bad_input_is_one_line_and_exit_2(capsys, one_line_error, tmp_path: Path, fake) -> None:
    engine, _ = fake
    games = tmp_path / "games.pgn"
    games.write_text(_pgn(SCHOLAR))
    assert "no such games file" in one_line_error("review", str(tmp_path / "none.pgn"), "--engine", engine)
    bad = tmp_path / "bad.pgn"
    bad.write_text('[White "a"]\n\n1. e4 e5 2. Ke3 *\n')
    assert "bad.pgn#1" in one_line_error("review", str(bad), "--engine", engine)
    assert "one of --depth and --nodes" in one_line_error("review", str(games), "--depth", "5", "--nodes", "9", "--engine", engine)
    assert "--depth must be positive" in one_line_error("review", str(games), "--depth", "0", "--engine", engine)
    assert "could not be started" in one_line_error("review", str(games), "--engine", str(tmp_path / "no-engine"))
    out = tmp_path / "review.jsonl"
    assert main(["review", str(games), "--engine", engine, "--out", str(out)]) == 0
    capsys.readouterr()
    assert "give another --out" in one_line_error("review", str(games), "--engine", engine, "--out", str(out), "--depth", "5")
    torn = tmp_path / "arena.jsonl"
    torn.write_text('{"format_version": 1, "no": "pgn"}\n')
    assert "arena.jsonl:1: not an arena or ladder game record" in one_line_error("review", str(torn), "--engine", engine)


def test_a_game_played_twice_is_searched_once_and_counted_twice(capsys, tmp_path: Path, fake) -> None:
    engine, log = fake
    games = tmp_path / "games.pgn"
    games.write_text(_pgn(SCHOLAR) * 2)
    report = _review(capsys, str(games), "--engine", engine, "--blunders", str(tmp_path / "blunders.csv"))
    assert len(log.read_text().splitlines()) == 7 and report["games"] == 2
    white, black = report["players"]
    assert (white["games"], white["inaccuracies"], black["games"], black["blunders"], black["lost_with_blunder"]) == (2, 2, 2, 2, 2)
    sources = [row["source"] for row in csv.DictReader((tmp_path / "blunders.csv").open())]
    assert sources == [f"{games}#1", f"{games}#2"]
