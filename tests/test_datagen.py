"""`alphazero datagen`: our alpha-beta's own games as NNUE data, in our CSV and bullet's text format, resumable;
and reading both formats back (label, nnue train)."""

from __future__ import annotations

import csv
import json
import math
import sys

import chess
import numpy as np
import pytest

from alphazero.errors import InputError
from alphazero.judge.arena import Opening
from alphazero.learn import bullet_text
from alphazero.learn.label import LEGACY_COLUMNS, ABLabeller, GameTask, LabelFile
from alphazero.learn.nnue_data import read_source
from alphazero.learn.positions import position_key, read_fens, source_kind
from alphazero.nets.features import parse_features
from commands.main import main

PLAYER = "ab:material?nodes=400"
WON = "4k3/8/8/8/8/8/8/QR2K3 w - - 0 1"  # White mates soon
LOST = "qr2k3/8/8/8/8/8/8/4K3 w - - 0 1"  # the same, Black to win, White to move
MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"


def datagen(capsys, *args: str) -> dict:
    code = main(["datagen", "--player", PLAYER, *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out.strip().splitlines()[-1])


def csv_rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_bullet_lines_are_from_whites_view_and_read_back() -> None:
    line = bullet_text.format_line("8/8/8/8/8/8/8/K1k5 b - - 0 1", -35, None, 0.5)
    assert line == "8/8/8/8/8/8/8/K1k5 b - - 0 1 | -35 | 0.5\n"
    assert bullet_text.parse_line(line) == ("8/8/8/8/8/8/8/K1k5 b - - 0 1", -35.0, 0.5)
    mate = bullet_text.format_line(WON, None, 3, 1.0)
    assert mate.split(" | ")[1] == str(bullet_text.MATE_SCORE - 3)
    assert bullet_text.parse_line(mate)[1] == math.inf
    assert bullet_text.parse_line(bullet_text.format_line(LOST, None, -2, 0.0))[1:] == (-math.inf, 0.0)
    assert bullet_text.parse_line(bullet_text.format_line(WON, 99999, None, 1.0))[1] < bullet_text.MATE_THRESHOLD
    for bad, says in (("x | 1", "expected"), (f"{WON} | 1.5 | 1.0", "integer"), (f"{WON} | 10 | 1-0", "result")):
        with pytest.raises(ValueError, match=says):
            bullet_text.parse_line(bad)


def test_a_game_s_rows_carry_its_result_for_each_side_to_move() -> None:
    labeller = ABLabeller(PLAYER)
    for fen, white in ((WON, 1.0), (LOST, 0.0)):
        rows = labeller.play(GameTask(Opening("end", fen), seed=0, random_moves=0))
        assert rows and all(result.row is not None for result in rows)
        for result in rows:
            assert result.row is not None
            turn_white = chess.Board(result.fen).turn == chess.WHITE
            assert float(result.row[-1]) == (white if turn_white else 1.0 - white)
    mated = labeller.play(GameTask(Opening("mate", MATE_IN_ONE), seed=0, random_moves=0))
    assert [result.row[2:4] for result in mated if result.row] == [("1", "a1a8")]
    assert [result.row[-1] for result in mated if result.row] == ["1"]


FIRST_LEGAL = '''import sys
import chess
board = chess.Board()
for line in sys.stdin:
    words = line.split()
    if words[:1] == ["uci"]:
        print("id name first\\nuciok", flush=True)
    elif words[:1] == ["isready"]:
        print("readyok", flush=True)
    elif words[:2] == ["position", "fen"]:
        board = chess.Board(" ".join(words[2:8]))
    elif words[:1] == ["go"]:
        move = min(board.legal_moves, key=lambda move: move.uci())
        print(f"info depth 1 score cp 0 pv {move.uci()}", flush=True)
        print(f"bestmove {move.uci()}", flush=True)
    elif words[:1] == ["quit"]:
        break
'''


@pytest.fixture()
def first_legal(tmp_path) -> str:
    """A UCI engine that plays the first of the legal moves in UCI order and scores every position 0."""
    script = tmp_path / "first_legal.py"
    script.write_text(FIRST_LEGAL)
    return f"uci:{sys.executable} {script}?depth=1"


def first_legal_move(board: chess.Board) -> chess.Move:
    return min(board.legal_moves, key=lambda move: move.uci())


def test_against_an_opponent_the_rows_are_the_player_s_own_positions(first_legal) -> None:
    labeller = ABLabeller(PLAYER)
    try:
        for white in (True, False):
            task = GameTask(Opening("start", chess.STARTING_FEN), seed=0, random_moves=0, opponent=first_legal,
                            white=white)
            rows = labeller.play(task)
            assert len(rows) > 5 and all(result.row is not None for result in rows)
            turns = {chess.Board(result.fen).turn for result in rows}
            assert turns == {chess.WHITE if white else chess.BLACK}
            for result, following in zip(rows, rows[1:]):  # the player's move, then the opponent's, between rows
                assert result.row is not None
                board = chess.Board(result.fen)
                board.push_uci(result.row[3])
                board.push(first_legal_move(board))
                assert board.fen() == following.fen
            assert {result.row[-1] for result in rows if result.row} == {"1"}  # PeSTO beats the first legal move
            last = rows[-1]
            assert last.row is not None
            board = chess.Board(last.fen)
            board.push_uci(last.row[3])
            assert board.is_checkmate()  # the opponent scores 0, so no adjudication: the game is played out
        assert list(labeller.opponents) == [first_legal]  # one opponent engine for both games
    finally:
        labeller.close()
    assert labeller.opponents == {}


def test_datagen_plays_an_opponent_with_either_colour(tmp_path, capsys, first_legal) -> None:
    out = tmp_path / "d.csv"
    summary = datagen(capsys, "--games", "2", "--out", str(out), "--opponent", first_legal, "--random-moves", "0")
    rows = csv_rows(out)
    assert summary["games"] == 2 and len(rows) == summary["labelled"] > 10
    assert {chess.Board(row["fen"]).turn for row in rows} == {chess.WHITE, chess.BLACK}
    assert {row["result"] for row in rows} == {"1"}


def test_datagen_writes_the_same_games_as_csv_and_as_bullet_text(tmp_path, capsys) -> None:
    as_csv, as_text = tmp_path / "d.csv", tmp_path / "d.txt"
    first = datagen(capsys, "--games", "3", "--out", str(as_csv), "--seed", "7", "--random-moves", "3")
    second = datagen(capsys, "--games", "3", "--out", str(as_text), "--seed", "7", "--random-moves", "3")
    assert first["games"] == second["games"] == 3 and first["labelled"] == second["labelled"] > 30
    rows = csv_rows(as_csv)
    lines = as_text.read_text().splitlines()
    assert len(rows) == len(lines) == first["labelled"]
    assert source_kind(as_text) == "bullet" and len(list(read_fens(as_text, pytest.fail))) == len(lines)
    results = set()
    for row, line in zip(rows, lines):
        board = chess.Board(row["fen"])
        assert board.fullmove_number >= 5 and chess.Move.from_uci(row["best_uci"]) in board.legal_moves
        fen, white_cp, white_result = bullet_text.parse_line(line)
        sign = 1 if board.turn == chess.WHITE else -1
        assert fen == row["fen"]
        if row["mate"]:
            assert white_cp == sign * int(row["mate"]) * math.inf
        else:
            assert white_cp == sign * int(row["score_cp"])
        assert white_result == (float(row["result"]) if sign == 1 else 1.0 - float(row["result"]))
        results.add(row["result"])
    assert results <= {"1", "0.5", "0"}


def test_datagen_resumes_to_a_number_of_positions(tmp_path, capsys) -> None:
    out = tmp_path / "d.txt"
    summary = datagen(capsys, "--positions", "60", "--out", str(out))
    assert summary["labelled"] == 60 and len(out.read_text().splitlines()) == 60
    assert datagen(capsys, "--positions", "60", "--out", str(out))["labelled"] == 0  # done: no game is played
    before = out.read_text()
    out.write_text(before + before.splitlines()[0][:30])  # a kill mid-line: the torn line is cut off
    summary = datagen(capsys, "--positions", "100", "--out", str(out))
    assert summary["labelled"] == 40
    keys = [position_key(bullet_text.parse_line(line)[0]) for line in out.read_text().splitlines()]
    assert len(keys) == 100 and len(set(keys)) == 100 and out.read_text().startswith(before)


def test_nnue_data_reads_scores_and_results_from_both_formats(tmp_path) -> None:
    text = tmp_path / "d.txt"
    text.write_text(f"{WON} | 900 | 1.0\n{LOST.replace(' w ', ' b ')} | -31990 | 0.0\n{MATE_IN_ONE} | 500 | 0.5\n")
    data = read_source(text, parse_features("all"))
    assert data.score_cp.tolist() == [900.0, math.inf, 500.0]  # Black to move in line 2: Black's mate
    assert data.result.tolist() == [1.0, 1.0, 0.0]
    table = tmp_path / "d.csv"
    table.write_text("fen,score_cp,mate,best_uci,result\n"
                     f"{WON},900,,a1a7,1\n{LOST},,-3,e1d2,0\n{MATE_IN_ONE},500,,a1a8,\n")
    data = read_source(table, parse_features("all"))
    assert data.score_cp.tolist() == [900.0, -math.inf, 500.0]
    assert data.result[:2].tolist() == [1.0, -1.0] and np.isnan(data.result[2])
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{WON} | 900 | 1.0\n{WON} | 9x | 1.0\n")
    with pytest.raises(InputError, match="bad.txt:2: the score"):
        read_source(bad, parse_features("all"))


def test_an_older_label_file_is_appended_in_its_own_columns(tmp_path) -> None:
    out = tmp_path / "old.csv"
    out.write_text(",".join(LEGACY_COLUMNS) + "\n" + f"{WON},900,,a1a7,,,\n")
    label_file = LabelFile(out)
    assert label_file.existing() == {position_key(WON)} and label_file.columns == LEGACY_COLUMNS
    row = (MATE_IN_ONE, "", "1", "a1a8", "", "", "", "1")
    assert label_file.format([row]) == f"{MATE_IN_ONE},,1,a1a8,,,\n"
    text_file = tmp_path / "notes.txt"
    text_file.write_text("some notes\n")
    with pytest.raises(InputError, match="notes.txt:1: not bullet"):
        LabelFile(text_file).existing()


def test_bad_requests_get_one_line(tmp_path, one_line_error) -> None:
    out = str(tmp_path / "d.txt")
    assert "--games" in one_line_error("datagen", "--out", out)
    assert "no such file" in one_line_error("datagen", "--out", out, "--games", "1", "--book", str(tmp_path / "b.bin"))
    assert "--games must be" in one_line_error("datagen", "--out", out, "--games", "0")
    assert "unknown evaluation" in one_line_error("datagen", "--out", out, "--games", "1", "--player", "ab:nothing")
    assert "unknown evaluation" in one_line_error("datagen", "--out", out, "--games", "1", "--opponent", "ab:nothing")
    message = one_line_error("datagen", "--out", out, "--games", "1", "--player", "mcts:net.pt")
    assert "labeller 'mcts:net.pt': expected our alpha-beta, ab:" in message and "or a UCI engine, uci:" in message
    epd = tmp_path / "p.epd"
    epd.write_text(WON + "\n")
    assert "game result" in one_line_error("label", str(epd), "--labeller", PLAYER, "--out", out)
    assert not (tmp_path / "d.txt").exists()


def test_label_takes_our_alpha_beta_as_labeller(tmp_path, capsys) -> None:
    epd = tmp_path / "p.epd"
    epd.write_text(f"{MATE_IN_ONE}\n{WON}\n")
    out = tmp_path / "l.csv"
    assert main(["label", str(epd), "--labeller", PLAYER, "--out", str(out)]) == 0
    rows = csv_rows(out)
    assert [(row["mate"], row["best_uci"], row["result"]) for row in rows][0] == ("1", "a1a8", "")
    assert int(rows[1]["score_cp"]) > 900 or int(rows[1]["mate"]) > 0


def test_sigterm_stops_datagen_as_ctrl_c_does_and_the_same_command_goes_on(tmp_path, capsys) -> None:
    """``kill``, ``docker stop`` or a scheduler's SIGTERM: the games written are kept whole, exit status 130,
    and the same command continues the file (before, SIGTERM killed at once and could tear the last line)."""
    from tests.runs import terminated_when

    out = tmp_path / "d.csv"
    code, err = terminated_when(["datagen", "--player", PLAYER, "--games", "1000", "--out", str(out)],
                                lambda: len(out.read_text().splitlines()) > 20, "a game written")
    assert code == 130, err[-2000:]
    assert f"interrupted; the positions in {out} are kept" in err and "Traceback" not in err
    rows = csv_rows(out)
    assert rows and all(len(row) == 8 and None not in row.values() for row in rows)
    summary = datagen(capsys, "--positions", str(len(rows) + 10), "--out", str(out))
    assert summary["labelled"] == 10 and len({row["fen"] for row in csv_rows(out)}) == len(rows) + 10
