"""`alphazero ladder` (``alphazero.judge.ladder``): a player's Elo on a UCI engine's ``UCI_Elo`` scale.

Two fakes stand in for Stockfish. A game runner whose results are drawn from the Elo model itself, with
known true ratings, checks the estimate, the bracketing, the links and the resume (thousands of games
in milliseconds). A fake UCI engine (a Python script written into tmp_path, ``UCI_Elo`` 1000-2000 setting
how often it plays its best move, deterministic for a position and level) drives the real path: specs,
the engine's name and range, the file, the command line, Ray. One short ladder uses the real Stockfish.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest

from alphazero.judge.arena import GameResult
from alphazero.judge.elo import elo_to_score, fit_ratings
from alphazero.judge.ladder import MAX_MOVE, Ladder, LadderSettings, Scale, read_ladder
from commands.main import main

STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"
SCALE = Scale("sf", "FakeFish 1", 1350, 2850, 100.0)
LINK = "link"

FAKE_ENGINE = '''
import random, sys
import chess

VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}
NAME = sys.argv[sys.argv.index("--name") + 1] if "--name" in sys.argv else "FakeFish 1"


def best(board):
    def gain(move):
        board.push(move)
        mate = board.is_checkmate()
        board.pop()
        captured = board.piece_at(move.to_square)
        return (mate, VALUES[captured.piece_type] if captured else 0, move.uci())
    return max(board.legal_moves, key=gain)


board, elo, limited = chess.Board(), 1000, False
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "uci":
        print(f"id name {NAME}")
        if "--plain" not in sys.argv:
            print("option name UCI_LimitStrength type check default false")
            print("option name UCI_Elo type spin default 1000 min 1000 max 2000")
        print("uciok")
    elif words[0] == "isready":
        print("readyok")
    elif words[0] == "setoption":
        name, value = line.split(" name ", 1)[1].split(" value ")
        if name.strip() == "UCI_Elo":
            elo = int(value)
        elif name.strip() == "UCI_LimitStrength":
            limited = value.strip() == "true"
    elif words[0] == "position":
        board = chess.Board() if words[1] == "startpos" else chess.Board(" ".join(words[2:8]))
        for move in words[words.index("moves") + 1:] if "moves" in words else []:
            board.push_uci(move)
    elif words[0] == "go":
        level = elo if limited else 2000
        rng = random.Random(f"{board.fen()} {level}")  # the same move for the same position and level
        moves = sorted(board.legal_moves, key=chess.Move.uci)
        print(f"bestmove {(best(board) if rng.random() < (level - 1000) / 1000 else rng.choice(moves)).uci()}")
    elif words[0] == "quit":
        break
    sys.stdout.flush()
'''


# --------------------------------------------------------------------------------------------
# A runner drawing results from the Elo model


class ModelRunner:
    """Plays no chess: each game's result is drawn from the Elo model (draws 0-30%, expected score
    1 / (1 + 10^(-d/400))) with the true ratings of ``truth`` (a level: its UCI_Elo), seeded by the game,
    so a resumed ladder gets the same results. ``stop_after`` games: KeyboardInterrupt, as a Ctrl-C."""

    def __init__(self, truth: dict[str, float], stop_after: int | None = None) -> None:
        self.truth = truth
        self.stop_after = stop_after
        self.played = 0

    def elo(self, spec: str) -> float:
        return self.truth[spec] if spec in self.truth else float(spec.split("UCI_Elo=")[1].split("&")[0])

    def __call__(self, spec_a, spec_b, schedule, max_plies, seed, on_games, adjudication=None) -> None:
        for index, opening, a_is_white in schedule:
            if self.stop_after is not None and self.played >= self.stop_after:
                raise KeyboardInterrupt
            expected = elo_to_score(self.elo(spec_a) - self.elo(spec_b))
            draw = 1.2 * expected * (1.0 - expected)
            roll = random.Random(f"{spec_a}|{spec_b}|{seed}|{index}").random()
            score = 1.0 if roll < expected - draw / 2 else 0.5 if roll < expected + draw / 2 else 0.0
            white = score if a_is_white else 1.0 - score
            result = {1.0: "1-0", 0.5: "1/2-1/2", 0.0: "0-1"}[white]
            names = (spec_a, spec_b) if a_is_white else (spec_b, spec_a)
            self.played += 1
            on_games([GameResult(index, opening, *names, result, "model", 1, "", a_is_white)])


def _ladder(truth: dict[str, float], out: Path | None = None, stop_after: int | None = None, **settings) -> Ladder:
    return Ladder(SCALE, LadderSettings(**settings), ModelRunner(truth, stop_after), out=out)


def _table(records: list[dict]) -> dict[tuple, tuple]:
    return {(r["player"], r["round"], r["index"]): (r["opponent"], r["opponent_elo"], r["score"]) for r in records}


@pytest.mark.parametrize("truth", [1000.0, 1720.0, 2430.0])
def test_the_estimate_holds_the_true_rating_and_the_levels_bracket_it(truth: float) -> None:
    ladder = _ladder({"p": truth, LINK: 1290.0})
    ladder.climb("p", 200, [LINK])
    report = ladder.report("p")
    assert report["games"] == 200 and report["new_games"] == len(ladder.records)
    assert report["elo_low"] < truth < report["elo_high"] < report["elo_low"] + 250
    assert report["text"].startswith(f"Elo {report['elo']:.0f} [") and report["text"].endswith("on FakeFish 1's UCI_Elo scale")
    games = {entry["spec"]: entry for entry in report["opponents"]}
    if truth > SCALE.floor:
        # Once there (in steps of at most MAX_MOVE), every round against a level within 100 Elo of the player,
        # where a game tells the most; no link needed.
        arrived = min(r["round"] for r in ladder.records if abs(r["opponent_elo"] - truth) <= 100)
        assert arrived <= 2 + abs(truth - LadderSettings().guess) / MAX_MOVE  # a round or so of slack
        assert all(abs(r["opponent_elo"] - truth) <= 100 for r in ladder.records if r["round"] >= arrived)
        assert LINK not in games and all(record["player"] == "p" for record in ladder.records)
    else:
        # Far below the floor: the link was laddered against the levels, then played most of the games.
        assert games[LINK]["games"] >= 150 and not games[LINK]["pinned"]
        assert sum(record["player"] == LINK for record in ladder.records) == LadderSettings().link_games


def test_the_scales_own_engine_at_a_level_never_plays_itself() -> None:
    # Stockfish at UCI_Elo 1700 laddered on Stockfish's scale: rounds whose estimate lands on 1700 play the nearest
    # other level (the arena refuses a player against itself), and the fit still finds it.
    player = SCALE.level_spec(1700)
    ladder = _ladder({player: 1700.0}, guess=1700.0)
    ladder.climb(player, 120)
    opponents = [r["opponent_elo"] for r in ladder.records]
    assert player not in {r["opponent"] for r in ladder.records} and set(opponents) <= {1650, 1750, 1600, 1800, 1550, 1850}
    assert 1650 in opponents and 1750 in opponents
    report = ladder.report(player)
    assert report["elo_low"] < 1700.0 < report["elo_high"]


def test_the_links_own_uncertainty_widens_the_interval() -> None:
    ladder = _ladder({"p": 950.0, LINK: 1290.0})
    ladder.climb("p", 200, [LINK])
    rating = ladder.ratings(intervals="profile")["p"]
    games = [(r["player"], r["opponent"], r["score"]) for r in ladder.records]
    pins = {r["opponent"]: r["opponent_elo"] for r in ladder.records if r["opponent_elo"] is not None}
    link = ladder.ratings()[LINK].elo
    as_if_known = fit_ratings(games, pinned={**pins, LINK: link}, intervals="profile")["p"]
    assert as_if_known.elo == pytest.approx(rating.elo, abs=1.0)
    assert rating.elo_high - rating.elo_low > 1.1 * (as_if_known.elo_high - as_if_known.elo_low)


def test_precision_stops_the_ladder_early() -> None:
    ladder = _ladder({"p": 1800.0})
    ladder.climb("p", 1000, precision=60.0)
    report = ladder.report("p")
    assert report["games"] < 1000 and report["elo_high"] - report["elo_low"] <= 120.0
    assert report["elo_low"] < 1800.0 < report["elo_high"]


def test_an_interrupted_ladder_resumes_to_the_same_table(tmp_path: Path) -> None:
    truth = {"p": 1000.0, LINK: 1290.0}
    whole = _ladder(truth, tmp_path / "whole.jsonl")
    whole.climb("p", 120, [LINK])

    out = tmp_path / "cut.jsonl"
    with pytest.raises(KeyboardInterrupt):  # stopped in the middle of the link's ladder
        _ladder(truth, out, stop_after=57).climb("p", 120, [LINK])
    lines = out.read_text().splitlines(keepends=True)
    assert len(lines) == 57
    out.write_text("".join(lines[:-1]) + lines[-1][:40])  # and the last line torn, as by a kill while writing
    resumed = _ladder(truth, out)
    assert len(resumed.records) == 56
    resumed.climb("p", 120, [LINK])
    assert resumed.new_games == len(whole.records) - 56
    assert _table(read_ladder(out)) == _table(whole.records)
    assert resumed.report("p")["elo"] == pytest.approx(whole.report("p")["elo"])

    # Another player's ladder on the same file reuses the link's games; a longer budget plays only the rest.
    again = _ladder({**truth, "q": 1100.0}, out)
    again.climb("q", 40, [LINK])
    again.climb("p", 140, [LINK])
    assert again.new_games == 40 + 20
    assert sum(r["player"] == LINK for r in again.records) == sum(r["player"] == LINK for r in whole.records)


# --------------------------------------------------------------------------------------------
# The command, with the fake UCI engine


@pytest.fixture()
def fake_engine(tmp_path: Path) -> str:
    script = tmp_path / "fake_uci.py"
    script.write_text(FAKE_ENGINE)
    return f"{sys.executable} {script}"


def _ladder_command(capsys, engine: str, *args: str, player: str = "") -> dict:
    player = player or f"uci:{engine}?UCI_LimitStrength=true&UCI_Elo=1700&movetime=1"
    assert main(["ladder", player, "--engine", engine, "--movetime", "1", "--max-plies", "40", "--batch", "4",
                 "--link", "none", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_command_ladders_a_uci_engine_and_resumes_from_its_file(capsys, tmp_path: Path, fake_engine: str) -> None:
    whole = _ladder_command(capsys, fake_engine, "--games", "8", "--out", str(tmp_path / "whole.jsonl"))
    assert whole["scale"] == "FakeFish 1" and whole["text"].endswith("on FakeFish 1's UCI_Elo scale")
    assert whole["games"] == whole["new_games"] == 8 and whole["elo_low"] < whole["elo"] < whole["elo_high"]
    records = read_ladder(tmp_path / "whole.jsonl")
    assert [r["round"] for r in records].count(0) == 4 and all(r["opponent_elo"] is not None for r in records)
    assert records[0]["opponent"] == f"uci:{fake_engine}?UCI_LimitStrength=true&UCI_Elo=1500&movetime=1"
    assert all(r["pgn"].startswith("[Event ") for r in records)

    out = tmp_path / "cut.jsonl"
    _ladder_command(capsys, fake_engine, "--games", "4", "--out", str(out))  # one round, then stopped
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:2]) + lines[2][:30])
    resumed = _ladder_command(capsys, fake_engine, "--games", "8", "--out", str(out))
    assert resumed["new_games"] == 6
    assert _table(read_ladder(out)) == _table(records)
    assert resumed["elo"] == pytest.approx(whole["elo"])

    # The text report: the headline first, then a row per opponent.
    assert main(["ladder", f"uci:{fake_engine}?UCI_LimitStrength=true&UCI_Elo=1700&movetime=1", "--engine", fake_engine,
                 "--movetime", "1", "--games", "8", "--batch", "4", "--link", "none", "--out", str(out)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == resumed["text"] and any(line.startswith("UCI_Elo 1500 ") for line in text)


@pytest.mark.ray
def test_ray_workers_play_the_same_games(capsys, tmp_path: Path, fake_engine: str) -> None:
    here = tmp_path / "here.jsonl"
    there = tmp_path / "there.jsonl"
    _ladder_command(capsys, fake_engine, "--games", "4", "--out", str(here))
    report = _ladder_command(capsys, fake_engine, "--games", "4", "--out", str(there), "--workers", "2")
    assert report["games"] == 4
    assert _table(read_ladder(there)) == _table(read_ladder(here))  # the fake engine is deterministic


def test_adjudicate_reaches_every_round_of_the_ladder(capsys, monkeypatch, fake_engine: str) -> None:
    from alphazero.judge import ladder as ladder_module
    from alphazero.judge.arena import Adjudication

    seen = []
    real = ladder_module.play_here

    def recording(*args, **kwargs):
        seen.append(args[6] if len(args) > 6 else kwargs.get("adjudication"))
        return real(*args, **kwargs)

    monkeypatch.setattr(ladder_module, "play_here", recording)
    _ladder_command(capsys, fake_engine, "--games", "8", "--adjudicate")
    assert len(seen) == 2 and all(rules == Adjudication() for rules in seen)
    seen.clear()
    _ladder_command(capsys, fake_engine, "--games", "4")
    assert seen == [None]


def test_a_short_ladder_on_the_real_stockfish(capsys) -> None:
    assert main(["ladder", "random", "--engine", STOCKFISH, "--movetime", "5", "--games", "2", "--batch", "2",
                 "--max-plies", "30", "--link", "none", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scale"].startswith("Stockfish ") and report["games"] == 2  # 15.1 in Debian 12
    assert report["text"].endswith(f"on {report['scale']}'s UCI_Elo scale")
    assert report["opponents"][0]["spec"] == f"uci:{STOCKFISH}?UCI_LimitStrength=true&UCI_Elo=1500&movetime=5"


def test_bad_input_is_one_line_and_exit_2(one_line_error, tmp_path: Path, fake_engine: str) -> None:
    base = ["ladder", "random", "--engine", fake_engine, "--link", "none"]
    assert "--games must be positive" in one_line_error(*base, "--games", "0")
    assert "--batch must be a positive even" in one_line_error(*base, "--batch", "3")
    assert "--movetime" in one_line_error(*base, "--movetime", "0")
    assert "--precision" in one_line_error(*base, "--precision", "-5")
    assert "--workers must be positive" in one_line_error(*base, "--workers", "0")
    assert "nonsense" in one_line_error("ladder", "nonsense:x", "--engine", fake_engine)
    assert "nonsense" in one_line_error(*base, "--link", "nonsense:y")
    assert "could not be started" in one_line_error("ladder", "random", "--engine", str(tmp_path / "no-engine"))
    assert "no UCI_Elo" in one_line_error("ladder", "random", "--engine", f"{fake_engine} --plain")
    assert "is a directory" in one_line_error(*base, "--out", str(tmp_path))
    image = tmp_path / "image.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    assert f"{image}:1: not a text file" in one_line_error(*base, "--out", str(image))
    assert image.read_bytes() == b"\x89PNG\r\n\x1a\n"
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"format_version": 1, "scale": "Stockfish 15.1", "player": "random", "round": 0,
                                 "index": 0, "opponent": "x", "opponent_elo": 1350, "score": 0.0}) + "\n")
    assert "Stockfish 15.1" in one_line_error(*base, "--out", str(other))
    other.write_text('{"format_version": 1, "player": "random"}\n')
    assert "line 1 is not a ladder game record" in one_line_error(*base, "--out", str(other))
