"""`alphazero label`: positions from EPD, PGN and a run's replay, labelled by Stockfish, resumable."""

from __future__ import annotations

import csv
import json

import chess
import pytest

from alphazero.board import encoding
from alphazero.learn.label import COLUMNS, LabelFile
from alphazero.learn.positions import read_fens
from commands.main import main

STOCKFISH = "uci:/usr/games/stockfish?depth=6"
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"
ITALIAN_EPD = 'r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - id "italian";'
EPD_LINES = [AFTER_E4, MATE_IN_ONE, "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN w KQkq - 0 1",  # 7 squares on rank 1
             ITALIAN_EPD, AFTER_E4.replace(" 0 1", " 3 7")]  # the same position as line 1

pytestmark = pytest.mark.engine


def read_rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def label(capsys, *args: str) -> tuple[int, dict | None, str]:
    code = main(["label", *args])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    return code, (json.loads(lines[-1]) if code == 0 else None), captured.err


def test_label_epd_rows_bad_line_and_resume(tmp_path, capsys) -> None:
    positions = tmp_path / "positions.epd"
    positions.write_text("\n".join(EPD_LINES) + "\n")
    out = tmp_path / "labels.csv"
    code, summary, err = label(capsys, str(positions), "--labeller", STOCKFISH, "--out", str(out))
    assert code == 0
    assert f"{positions}:3:" in err and "illegal" in err  # named by file and line, and skipped
    assert summary["labelled"] == 3 and summary["bad_lines"] == 1 and summary["positions"] == 3
    assert out.read_text().splitlines()[0] == ",".join(COLUMNS)
    rows = read_rows(out)
    assert [row["fen"].split()[:4] for row in rows] == [line.split()[:4] for line in (AFTER_E4, MATE_IN_ONE, ITALIAN_EPD)]
    for row in rows:
        board = chess.Board(row["fen"])
        assert chess.Move.from_uci(row["best_uci"]) in board.legal_moves
        assert bool(row["score_cp"]) != bool(row["mate"])  # exactly one score
        assert sum(int(row[key]) for key in ("wdl_win", "wdl_draw", "wdl_loss")) == 1000  # Stockfish's UCI_ShowWDL
    mate = rows[1]
    assert (mate["best_uci"], mate["mate"], mate["score_cp"], mate["wdl_win"]) == ("a1a8", "1", "", "1000")
    assert abs(int(rows[0]["score_cp"])) < 150  # 1. e4 is about level, from Black's side

    before = out.read_text()
    code, summary, _ = label(capsys, str(positions), "--labeller", STOCKFISH, "--out", str(out))
    assert code == 0 and summary["labelled"] == 0 and summary["already_labelled"] == 3
    assert out.read_text() == before

    # A kill in the middle of the last row: the torn row is cut off and labelled again.
    out.write_text(before[: before.rindex("\n", 0, len(before) - 1) + 12])
    code, summary, _ = label(capsys, str(positions), "--labeller", STOCKFISH, "--out", str(out))
    assert code == 0 and summary["labelled"] == 1 and summary["already_labelled"] == 2
    assert [row["fen"] for row in read_rows(out)] == [row["fen"] for row in rows]


def test_label_pgn_every_position_once_and_limit(tmp_path, capsys) -> None:
    pgn = tmp_path / "games.pgn"
    pgn.write_text('[Event "a"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n'
                   '[Event "bad"]\n[Result "*"]\n\n1. e4 e5 2. Ke3 *\n\n'
                   '[Event "c"]\n[Result "1/2-1/2"]\n\n1. d4 d5 2. c4 1/2-1/2\n')
    out = tmp_path / "labels.csv"
    code, summary, err = label(capsys, str(pgn), "--labeller", STOCKFISH, "--out", str(out), "--limit", "5")
    assert code == 0 and summary["labelled"] == 5 and err == ""  # reading stopped before the bad game
    code, summary, err = label(capsys, str(pgn), "--labeller", STOCKFISH, "--out", str(out))
    assert f"{pgn}:9:" in err and "line 6" in err and "Ke3" in err
    # Game a: the 7 positions before its moves (its mate has nothing to label); game c: 3 new (start repeats).
    assert code == 0 and summary["positions"] == 10 and summary["labelled"] == 5 and summary["already_labelled"] == 5
    fens = [row["fen"] for row in read_rows(out)]
    assert len({" ".join(fen.split()[:4]) for fen in fens}) == 10
    assert fens[0] == chess.STARTING_FEN


def test_replay_positions_are_every_position_of_the_games(tmp_path) -> None:
    """A run directory's positions come from its games' PGNs: a superset of the positions the shards trained on."""
    from alphazero.config import SearchConfig, SelfPlayConfig
    from alphazero.learn.replay import read_shard, write_shard
    from alphazero.nets.evaluator import UniformEvaluator
    from alphazero.search.selfplay import SelfPlayer

    player = SelfPlayer(UniformEvaluator(), SearchConfig(num_simulations=4),
                        SelfPlayConfig(games_per_worker=2, max_plies=16, random_opening_plies=2), seed=3)
    shard_path = tmp_path / "run" / "replay" / "shard-00000000.npz"
    shard_path.parent.mkdir(parents=True)
    write_shard(shard_path, player.play(2))
    bad: list = []
    fens = list(read_fens(tmp_path / "run", bad.append))
    assert bad == []
    packed = {row.tobytes() for row in encoding.encode_packed(chess.Board(fen) for fen in fens)}
    shard = read_shard(shard_path)
    assert all(row.tobytes() in packed for row in shard.planes)
    assert len(fens) >= shard.num_positions


BOOK = "/usr/share/games/gnuchess/book.bin"


def game_transitions(rows: list[dict[str, str]]) -> tuple[int, int]:
    """(transitions along the engine's best move, other transitions) between consecutive rows whose
    second position follows from the first by one legal move (a new game breaks the chain)."""
    best = other = 0
    for before, after in zip(rows, rows[1:]):
        board = chess.Board(before["fen"])
        for move in board.legal_moves:
            board.push(move)
            if board.fen().split()[:4] == after["fen"].split()[:4]:
                best += move.uci() == before["best_uci"]
                other += move.uci() != before["best_uci"]
            board.pop()
    return best, other


def test_label_plays_games_from_a_book_and_resumes_with_new_games(tmp_path, capsys) -> None:
    """A book source: engine games whose every position is a row, the engine's move played except at
    the few random plies; a rerun appends positions of other games, never a position twice."""
    out = tmp_path / "games.csv"
    code, summary, err = label(capsys, BOOK, "--labeller", "uci:/usr/games/stockfish?depth=3", "--out", str(out),
                               "--limit", "120", "--random-moves", "2")
    assert code == 0 and err == "" and summary["labelled"] == 120 and summary["games"] >= 1
    rows = read_rows(out)
    assert len(rows) == 120
    for row in rows:
        board = chess.Board(row["fen"])
        assert board.fullmove_number >= 5  # after the 8 book plies
        assert chess.Move.from_uci(row["best_uci"]) in board.legal_moves
    best, other = game_transitions(rows)
    assert best + other >= 120 - 2 * summary["games"]  # each game is one chain of positions
    assert other <= 2 * summary["games"]  # at most the random plies leave the engine's move
    assert other >= 1 and best > 5 * other

    code, summary, err = label(capsys, BOOK, "--labeller", "uci:/usr/games/stockfish?depth=3", "--out", str(out),
                               "--limit", "40", "--random-moves", "2")
    assert code == 0 and summary["labelled"] == 40
    keys = [" ".join(row["fen"].split()[:4]) for row in read_rows(out)]
    assert len(keys) == 160 and len(set(keys)) == 160
    assert keys[120] not in keys[:120]  # the resumed run opened another game


def test_a_played_game_ends_when_it_is_over_or_decided() -> None:
    from alphazero.judge.arena import Opening
    from alphazero.learn.label import ADJUDICATE_PLIES, GameTask, Labeller

    labeller = Labeller("uci:/usr/games/stockfish?depth=6")
    try:
        mated = labeller.play(GameTask(Opening("mate", MATE_IN_ONE), seed=0, random_moves=0))
        assert [result.row[2:4] for result in mated if result.row] == [("1", "a1a8")]  # then it is checkmate
        # Queen and rook against a bare king: beyond ADJUDICATE_CP from the first position, so the game stops
        # after that many plies, or sooner at a mate the engine finds and plays out.
        won = labeller.play(GameTask(Opening("won", "4k3/8/8/8/8/8/8/QR2K3 w - - 0 1"), seed=0, random_moves=0))
        assert len(won) <= ADJUDICATE_PLIES + 12
        assert all(result.row is not None for result in won)
    finally:
        labeller.close()


def test_a_book_needs_a_limit_or_minutes_and_holds_no_positions(tmp_path, capsys) -> None:
    code, _, err = label(capsys, BOOK, "--labeller", STOCKFISH, "--out", str(tmp_path / "o.csv"))
    assert code == 2 and "--limit" in err and "--minutes" in err
    code, _, err = label(capsys, BOOK, "--labeller", STOCKFISH, "--out", str(tmp_path / "o.csv"), "--limit", "5",
                         "--random-moves", "25")
    assert code == 2 and "--random-moves" in err
    with pytest.raises(ValueError, match="book"):
        list(read_fens(BOOK, lambda bad: None))


def test_minutes_stops_handing_out_work(tmp_path, capsys) -> None:
    out = tmp_path / "o.csv"
    code, summary, _ = label(capsys, BOOK, "--labeller", STOCKFISH, "--out", str(out), "--minutes", "0.0001")
    assert code == 0 and summary["games"] == 0 and summary["labelled"] == 0
    assert out.read_text() == ",".join(COLUMNS) + "\n"


def test_a_foreign_output_file_is_refused(tmp_path, capsys) -> None:
    out = tmp_path / "notes.csv"
    out.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a label file"):
        LabelFile(out).existing()
    positions = tmp_path / "p.epd"
    positions.write_text(MATE_IN_ONE + "\n")
    code, _, err = label(capsys, str(positions), "--labeller", STOCKFISH, "--out", str(out))
    assert code == 2 and "notes.csv:1" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "a,b\n1,2\n"
    out.write_text("a,b\n1,2")  # no final newline: nothing is cut off a file that is not a label file
    with pytest.raises(ValueError, match="not a label file"):
        LabelFile(out).existing()
    assert out.read_text() == "a,b\n1,2"


def test_a_file_with_no_position_is_an_error_and_writes_nothing(tmp_path, one_line_error) -> None:
    positions, out = tmp_path / "notes.epd", tmp_path / "labels.csv"
    positions.write_text("# nothing here is a position\nhello\n\nworld\n")
    message = one_line_error("label", str(positions), "--labeller", STOCKFISH, "--out", str(out))
    assert f"{positions}: no position could be read (2 bad lines, the first {positions}:2: " in message
    assert not out.exists()


def test_the_old_engine_option_names_the_labeller(tmp_path, one_line_error) -> None:
    message = one_line_error("label", str(tmp_path / "p.epd"), "--engine", STOCKFISH, "--out", str(tmp_path / "o.csv"))
    assert f"--engine is now --labeller: --labeller '{STOCKFISH}'" in message
    assert not (tmp_path / "o.csv").exists()


def test_a_bad_engine_exits_2(tmp_path, capsys) -> None:
    positions = tmp_path / "p.epd"
    positions.write_text(MATE_IN_ONE + "\n")
    code, _, err = label(capsys, str(positions), "--labeller", "uci:/no/such/engine?depth=3", "--out", str(tmp_path / "o.csv"))
    assert code == 2 and "/no/such/engine" in err
    code, _, err = label(capsys, str(positions), "--labeller", "uci:/usr/games/stockfish?Hashh=16", "--out", str(tmp_path / "o.csv"))
    assert code == 2 and "Hashh" in err


@pytest.mark.ray
@pytest.mark.slow  # a private Ray and two engine actors: 33 s measured on a busy two-core machine
def test_label_on_ray_workers(tmp_path, capsys) -> None:
    positions = tmp_path / "positions.epd"
    positions.write_text("\n".join(EPD_LINES) + "\n")
    out = tmp_path / "labels.csv"
    code, summary, _ = label(capsys, str(positions), "--labeller", STOCKFISH, "--out", str(out), "--workers", "2")
    assert code == 0 and summary["labelled"] == 3
    rows = read_rows(out)
    assert sorted(row["fen"].split()[:4] for row in rows) == sorted(
        line.split()[:4] for line in (AFTER_E4, MATE_IN_ONE, ITALIAN_EPD))
    assert {row["best_uci"] for row in rows if row["mate"]} == {"a1a8"}


FAKE_ENGINE = '''import sys
fen = ""
for line in sys.stdin:
    words = line.split()
    if words[:1] == ["uci"]:
        print("id name fake\\noption name Hash type spin default 16 min 1 max 64\\nuciok", flush=True)
    elif words[:1] == ["isready"]:
        print("readyok", flush=True)
    elif words[:2] == ["position", "fen"]:
        fen = " ".join(words[2:])
    elif words[:1] == ["go"]:
        if fen.startswith("6k1"):
            sys.exit(3)  # dies on this position
        print("info depth 1 score cp 7 lowerbound", flush=True)
        print("info string not a score", flush=True)
        print("info depth 2 seldepth 3 multipv 1 score cp -12 wdl 100 450 450 nodes 40 pv e7e5 g1f3", flush=True)
        print("bestmove e7e5 ponder g1f3", flush=True)
    elif words[:1] == ["quit"]:
        break
'''


def test_an_engine_that_dies_fails_one_position_and_is_restarted(tmp_path, capsys) -> None:
    import sys

    engine = tmp_path / "fake_engine.py"
    engine.write_text(FAKE_ENGINE)
    positions = tmp_path / "p.epd"
    after_d4 = "rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - 0 1"
    positions.write_text(f"{AFTER_E4}\n{MATE_IN_ONE}\n{after_d4}\n")
    out = tmp_path / "labels.csv"
    code, summary, err = label(capsys, str(positions), "--labeller", f"uci:{sys.executable} {engine}?Hash=8&depth=2",
                               "--out", str(out))
    assert code == 0 and summary["labelled"] == 2 and summary["failed"] == 1, err
    assert "6k1/5ppp" in err and "engine failed" in err and "exited" in err
    rows = read_rows(out)
    assert [row["fen"] for row in rows] == [AFTER_E4, after_d4]
    assert [(row["score_cp"], row["mate"], row["best_uci"], row["wdl_win"], row["wdl_draw"], row["wdl_loss"])
            for row in rows] == [("-12", "", "e7e5", "100", "450", "450")] * 2
