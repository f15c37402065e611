"""`alphazero arena`: results, statistics, openings with both colours, PGN, SPRT, Ray workers."""

from __future__ import annotations

import json
from pathlib import Path

import chess
import chess.pgn
import pytest
import torch

from alphazero.config import NetworkConfig
from alphazero.nets.network import PolicyValueNet, save_network
from commands.main import main

BOOK = Path("/usr/share/games/gnuchess/book.bin")

torch.set_num_threads(1)


def _arena(capsys, *args: str) -> dict:
    assert main(["arena", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _read_pgn(path: Path) -> list[chess.pgn.Game]:
    games = []
    with open(path) as handle:
        while (game := chess.pgn.read_game(handle)) is not None:
            assert not game.errors, game.errors  # every move parsed and legal
            games.append(game)
    return sorted(games, key=lambda game: int(game.headers["Round"]))


def test_greedy_beats_random_clearly(capsys) -> None:
    report = _arena(capsys, "greedy", "random", "--games", "20", "--max-plies", "200", "--seed", "1")
    assert report["players"] == {"a": "greedy", "b": "random"}
    assert report["wins"] + report["draws"] + report["losses"] == report["games"] == 20
    assert report["score"] >= 0.75
    assert report["terminations"].get("checkmate", 0) >= 5  # greedy mates, not just outlasts
    assert sum(report["terminations"].values()) == 20
    assert report["elo_low"] < report["elo"] < report["elo_high"] and report["elo_low"] > 0
    assert report["los"] > 0.99
    penta = report["pentanomial"]
    assert sum(penta["counts"]) == 10 and penta["elo_low"] > 0 and 0.99 < penta["los"] <= 1.0
    assert "sprt" not in report and report["stopped_early"] is False


def test_text_report_names_the_statistics(capsys) -> None:
    assert main(["arena", "greedy", "random", "--games", "4", "--max-plies", "120"]) == 0
    out = capsys.readouterr().out
    assert "greedy vs random: 4 games" in out
    for word in ("W/D/L", "Elo", "(95%)", "LOS", "Pairs [", "Terminations"):
        assert word in out


def test_tiny_network_against_random_writes_full_pgn(capsys, tmp_path) -> None:
    torch.manual_seed(0)
    net = tmp_path / "tiny.pt"
    save_network(PolicyValueNet(NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)), net)
    spec = f"mcts:{net}?sims=8"
    pgn = tmp_path / "out" / "games.pgn"
    report = _arena(capsys, spec, "random", "--games", "4", "--max-plies", "40", "--pgn", str(pgn))
    assert report["games"] == 4 and report["pgn"] == str(pgn)
    games = _read_pgn(pgn)
    assert [int(game.headers["Round"]) for game in games] == [1, 2, 3, 4]
    for index, game in enumerate(games):
        headers = game.headers
        assert (headers["White"], headers["Black"]) == ((spec, "random") if index % 2 == 0 else ("random", spec))
        assert headers["Result"] in ("1-0", "0-1", "1/2-1/2")
        assert headers["Opening"] and headers["Termination"]
        board = game.end().board()  # replays every move: all legal
        if headers["Termination"] == "max length":
            assert headers["Result"] == "1/2-1/2" and len(board.move_stack) == 40 + 4  # opening plies + 40
        else:
            assert board.is_game_over(claim_draw=True)
    assert sum(report["terminations"].values()) == 4


def test_pgn_games_are_in_round_order_though_they_end_in_any_order(capsys, tmp_path) -> None:
    pgn = tmp_path / "games.pgn"
    _arena(capsys, "greedy", "random", "--games", "8", "--max-plies", "80", "--seed", "3", "--pgn", str(pgn))
    with open(pgn) as handle:  # file order, not sorted
        rounds = [int(game.headers["Round"]) for game in iter(lambda: chess.pgn.read_game(handle), None)]
    assert rounds == list(range(1, 9))


def test_max_length_is_a_draw_reported_as_such(capsys) -> None:
    report = _arena(capsys, "random", "random", "--games", "6", "--max-plies", "6")
    assert report["draws"] == 6 and report["terminations"] == {"max length": 6}


def test_book_openings_are_played_with_both_colours(capsys, tmp_path) -> None:
    pgn = tmp_path / "book.pgn"
    _arena(capsys, "greedy", "random", "--games", "6", "--max-plies", "20", "--openings", str(BOOK),
           "--opening-plies", "6", "--pgn", str(pgn))
    games = _read_pgn(pgn)
    assert len(games) == 6
    openings = []
    for k in range(3):
        first, second = games[2 * k], games[2 * k + 1]
        assert first.headers["Opening"] == second.headers["Opening"]
        assert (first.headers["White"], first.headers["Black"]) == (second.headers["Black"], second.headers["White"])
        book_moves = first.headers["Opening"].split()
        assert len(book_moves) == 6
        for game in (first, second):
            assert [move.uci() for move in game.mainline_moves()][:6] == book_moves
        openings.append(first.headers["Opening"])
    assert len(set(openings)) == 3


def test_epd_openings_are_played_with_both_colours(capsys, tmp_path) -> None:
    epd = tmp_path / "openings.epd"
    positions = ["r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq -",
                 "rnbqkb1r/pppppppp/5n2/8/3P4/8/PPP1PPPP/RNBQKBNR w KQkq - bm c4; id \"indian\";"]
    epd.write_text("# two positions\n" + "\n".join(positions) + "\n")
    pgn = tmp_path / "epd.pgn"
    report = _arena(capsys, "greedy", "random", "--games", "4", "--max-plies", "16", "--openings", str(epd),
                    "--pgn", str(pgn))
    assert report["openings"] == str(epd)
    games = _read_pgn(pgn)
    starts = set()
    for k in range(2):
        first, second = games[2 * k], games[2 * k + 1]
        assert first.headers["FEN"] == second.headers["FEN"] and first.headers["SetUp"] == "1"
        assert first.headers["White"] == second.headers["Black"] == "greedy"
        starts.add(" ".join(first.headers["FEN"].split()[:4]))
    assert starts == {" ".join(chess.Board.from_epd(line)[0].fen().split()[:4]) for line in positions}


def test_bad_opening_file_names_the_line(capsys, tmp_path) -> None:
    epd = tmp_path / "bad.epd"
    epd.write_text("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -\nnot a position at all\n")
    assert main(["arena", "greedy", "random", "--games", "2", "--openings", str(epd)]) == 2
    assert f"{epd}:2" in capsys.readouterr().err
    assert main(["arena", "greedy", "random", "--games", "3"]) == 2
    assert "even" in capsys.readouterr().err
    assert main(["arena", "greedy", "random", "--games", "2", "--sprt", "50"]) == 2
    assert "ELO0,ELO1" in capsys.readouterr().err


def test_an_opening_file_counts_every_line_and_refuses_binary_files_in_one_line(one_line_error, tmp_path) -> None:
    epd = tmp_path / "openings.epd"
    epd.write_text("# openings\n\nrnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -\nnot a position at all\n")
    assert f"{epd}:4: not a FEN/EPD position" in one_line_error("arena", "greedy", "random", "--games", "2",
                                                                 "--openings", str(epd))
    image = tmp_path / "logo.png"  # a binary file given as openings
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert f"{image}:1: not a text file" in one_line_error("arena", "greedy", "random", "--games", "2",
                                                            "--openings", str(image))
    book = tmp_path / "book.bin"  # not a polyglot book: entries are 16 bytes
    book.write_bytes(bytes(17))
    message = one_line_error("arena", "greedy", "random", "--games", "2", "--openings", str(book))
    assert f"opening book {book} is not a polyglot book" in message and "PosixPath" not in message
    assert "is a directory" in one_line_error("arena", "greedy", "random", "--games", "2", "--openings", str(tmp_path))


def test_sprt_stops_a_lopsided_match_early(capsys, tmp_path) -> None:
    pgn = tmp_path / "sprt.pgn"
    report = _arena(capsys, "greedy", "random", "--games", "200", "--max-plies", "200", "--sprt", "0,50",
                    "--pgn", str(pgn))
    sprt = report["sprt"]
    assert sprt["decision"] == "H1" and sprt["llr"] >= sprt["upper"] > 0 > sprt["lower"]
    assert report["stopped_early"] is True and report["games"] < 200
    assert report["wins"] + report["draws"] + report["losses"] == report["games"]
    assert len(_read_pgn(pgn)) == report["games"]  # every counted game, and only those, in the PGN


def test_progress_off_a_terminal_is_whole_lines_with_the_llr(capsys, monkeypatch) -> None:
    """stderr a file or a pipe (as under capsys): whole lines, no carriage returns; each line once
    PROGRESS_LINE_SECONDS have passed (0 here: every game), the last when the SPRT decides."""
    from alphazero.judge import match

    monkeypatch.setattr(match, "PROGRESS_LINE_SECONDS", 0.0)
    assert main(["arena", "greedy", "random", "--games", "200", "--max-plies", "200", "--sprt", "0,50"]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert "\r" not in captured.err and len(lines) >= 4
    assert all(line.startswith("[arena] ") and " games, W/D/L " in line for line in lines)
    assert lines[0].startswith("[arena] 1/200 games") and "LLR" in lines[-1]
    played = int(lines[-1].split()[1].split("/")[0])
    assert f"{played} games" in captured.out  # the last line is where the SPRT stopped the match
    monkeypatch.setattr(match, "PROGRESS_LINE_SECONDS", 3600.0)
    assert main(["arena", "greedy", "random", "--games", "4", "--max-plies", "120"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("[arena] 4/4 games, W/D/L ")  # only the last, without an SPRT
    assert "LLR" not in lines[0]


def test_adjudication_follows_fishtests_rules_on_both_players_scores() -> None:
    from alphazero.judge.arena import Adjudication

    rules = Adjudication()
    late, early = chess.Board(), chess.Board()
    late.fullmove_number = 40
    win = [0, 10, 650, 700, 620, 9000, 700, 640]  # White's view; the last 3 moves of each side >= 600
    assert rules.decide(early, win) == (1.0, "adjudication: win")
    assert rules.decide(early, [-s for s in win]) == (-1.0, "adjudication: win")
    assert rules.decide(early, win[:-1] + [590]) is None  # one side does not agree
    assert rules.decide(early, win[:-1] + [None]) is None  # a player without a score is never adjudicated
    assert rules.decide(early, win[-5:]) is None  # five plies are not three moves of each side
    quiet = [5, -12, 20, -20, 0, 3, 1, -1] * 2  # 16 plies within 20 cp
    assert rules.decide(late, [300] + quiet) == (0.0, "adjudication: draw")
    assert rules.decide(early, quiet) is None  # before move 34
    assert rules.decide(late, quiet[:-1] + [21]) is None
    assert rules.decide(late, quiet[1:]) is None  # 15 plies
    with pytest.raises(Exception, match="bad adjudication"):
        Adjudication(resign_move_count=0)


def test_adjudicated_games_end_early_by_both_players_scores(capsys) -> None:
    """Alpha-beta players report their scores: with --adjudicate their games end as soon as both agree
    (every game here, far sooner than played out); greedy reports none, so its games are played out."""
    common = ["--games", "6", "--openings", str(BOOK), "--max-plies", "300", "--seed", "4"]
    played = _arena(capsys, "ab:material?depth=4", "ab:material?depth=1", *common)
    judged = _arena(capsys, "ab:material?depth=4", "ab:material?depth=1", *common, "--adjudicate")
    assert judged["adjudication"]["resign_score"] == 600 and played["adjudication"] is None
    assert sum(n for reason, n in judged["terminations"].items() if reason.startswith("adjudication")) >= 4
    assert not any(reason.startswith("adjudication") for reason in played["terminations"])
    assert judged["score"] >= 0.5 and played["score"] >= 0.5  # depth 4 beats depth 1 either way
    greedy = _arena(capsys, "ab:material?depth=1", "greedy", "--games", "2", "--max-plies", "160", "--adjudicate")
    assert not any(reason.startswith("adjudication") for reason in greedy["terminations"])


@pytest.mark.ray
def test_ray_workers_play_the_whole_match(capsys, tmp_path) -> None:
    pgn = tmp_path / "ray.pgn"
    report = _arena(capsys, "greedy", "random", "--games", "8", "--max-plies", "100", "--workers", "2",
                    "--pgn", str(pgn))
    assert report["wins"] + report["draws"] + report["losses"] == report["games"] == 8
    assert sum(report["pentanomial"]["counts"]) == 4 and report["score"] >= 0.6
    games = _read_pgn(pgn)
    assert [int(game.headers["Round"]) for game in games] == list(range(1, 9))  # chunks keep their places
    assert all(games[2 * k].headers["Opening"] == games[2 * k + 1].headers["Opening"] for k in range(4))


def test_a_match_resumed_from_part_of_its_schedule_plays_only_those_games() -> None:
    from alphazero.judge.arena import Match, match_schedule, play_match, random_openings
    from alphazero.judge.players import GreedyPlayer, RandomPlayer

    openings = random_openings(3, 2, seed=5)
    schedule = match_schedule(openings)
    assert [(index, a_white) for index, _, a_white in schedule] == [(0, True), (1, False), (2, True), (3, False),
                                                                   (4, True), (5, False)]
    # A stop after games 0, 3 and 4: the resumed match plays 1, 2 and 5 with the same openings and colours.
    remaining = [entry for entry in schedule if entry[0] in (1, 2, 5)]
    match = Match(GreedyPlayer(seed=1), RandomPlayer(seed=2), remaining, max_plies=60)
    games = []
    while not match.done:
        ended = match.advance(30.0)
        assert ended or match.done  # returns as soon as a game ends, not at the end of the slice
        games += ended
    assert sorted(g.index for g in games) == [1, 2, 5]
    for game in games:
        assert game.opening == openings[game.index // 2] and game.a_is_white == (game.index % 2 == 0)
        assert game.white == ("greedy" if game.a_is_white else "random")
    full = play_match(GreedyPlayer(seed=1), RandomPlayer(seed=2), openings, max_plies=60)
    assert sorted(g.index for g in full.games) == list(range(6))


def test_a_match_continues_games_from_the_moves_they_had_reached() -> None:
    from alphazero.judge.arena import Match, match_schedule, random_openings
    from alphazero.judge.players import GreedyPlayer, RandomPlayer

    openings = random_openings(2, 2, seed=3)
    first = Match(GreedyPlayer(seed=1), RandomPlayer(seed=2), match_schedule(openings), max_plies=30)
    for _ in range(6):
        first.step()
    reached = first.in_flight()
    assert sorted(reached) == [0, 1, 2, 3] and all(len(moves) == 6 for moves in reached.values())
    # A new match (a new worker after a stop) continues each game from its position, not its opening.
    second = Match(GreedyPlayer(seed=1), RandomPlayer(seed=2), match_schedule(openings), max_plies=30, played=reached)
    games = []
    while not second.done:
        games += second.advance(30.0)
    for game in games:
        moves = [m.uci() for m in chess.pgn.read_game(__import__("io").StringIO(game.pgn)).mainline_moves()]
        opening = list(openings[game.index // 2].moves)
        assert moves[: len(opening) + 6] == opening + reached[game.index]
        # The ply limit counts from the opening, across the restart.
        assert len(moves) - len(opening) <= 30


def test_one_arena_worker_plays_arena_after_arena(tmp_path) -> None:
    """The run's arena worker (here in this process, as Ray would run it): each arena's first call brings its
    networks and games; a finished arena leaves the worker idle and holding no networks; a call with no
    arena in progress is an error, not a silent empty answer."""
    from alphazero.config import load_config
    from alphazero.judge.arena import match_schedule
    from alphazero.judge.promotion import arena_openings
    from alphazero.nets.network import net_to_payload
    from workers.actors import ArenaGames, ArenaWorker

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml")
    torch.manual_seed(7)
    nets = [net_to_payload(PolicyValueNet(config.network)) for _ in range(3)]
    worker = ArenaWorker(config)
    with pytest.raises(RuntimeError, match="no arena in progress"):
        worker.play(1.0)
    for generation, (candidate, best) in enumerate([(nets[1], nets[0]), (nets[2], nets[1])], start=1):
        schedule = match_schedule(arena_openings(config, generation))
        assert len(schedule) == config.arena.games
        games, finished, _ = worker.play(30.0, ArenaGames(candidate, best, generation, schedule))
        while not finished:
            more, finished, _ = worker.play(30.0)
            games += more
        assert sorted(game.index for game in games) == [entry[0] for entry in schedule]
        assert all(f"gen-{generation:04d}" in (game.white, game.black) for game in games)
        assert worker.match is None  # idle: the arena's networks are released
    with pytest.raises(RuntimeError, match="no arena in progress"):
        worker.play(1.0)


def _lines(path: Path) -> list[dict]:
    """The whole lines of a games file (a torn one skipped)."""
    from alphazero.fileio import read_jsonl

    return read_jsonl(path)


def test_out_keeps_each_game_and_the_same_command_plays_only_the_pairs_not_complete(capsys, tmp_path) -> None:
    """A match stopped part-way (here: its file cut after game 5, a torn line after it) goes on from its games
    file: the stored games count and are not played again, the pair left half-done is replayed (its stored
    game kept), the PGN holds every game; a finished match plays nothing; more --games extend it."""
    out, pgn = tmp_path / "match.jsonl", tmp_path / "match.pgn"
    common = ["greedy", "random", "--max-plies", "60", "--out", str(out), "--pgn", str(pgn)]
    first = _arena(capsys, *common, "--games", "8")
    records = _lines(out)
    assert sorted(r["index"] for r in records) == list(range(8)) and first["games_stored"] == 0
    assert [r["result"] for r in sorted(records, key=lambda r: r["index"])] == [g.headers["Result"] for g in _read_pgn(pgn)]
    kept = sorted(out.read_text().splitlines(), key=lambda line: json.loads(line)["index"])[:5]
    out.write_text("\n".join(kept) + "\n" + kept[0][:40])  # games 0-4, then a line torn by a kill

    resumed = _arena(capsys, *common, "--games", "8")
    records = _lines(out)  # the torn line is closed off, and skipped
    assert out.read_text().splitlines()[:5] == kept
    assert sorted(r["index"] for r in records) == list(range(8))  # game 4 not written twice
    assert resumed["games"] == 8 and resumed["games_stored"] == 5
    assert resumed["wins"] == sum(r["result"] == ("1-0" if r["a_is_white"] else "0-1") for r in records)
    assert [int(g.headers["Round"]) for g in _read_pgn(pgn)] == list(range(1, 9))

    again = _arena(capsys, *common, "--games", "8")
    assert again["games_stored"] == 8 and len(out.read_text().splitlines()) == 9
    assert {k: again[k] for k in ("wins", "draws", "losses")} == {k: resumed[k] for k in ("wins", "draws", "losses")}
    more = _arena(capsys, *common, "--games", "12")
    assert more["games"] == 12 and more["games_stored"] == 8
    assert sorted(r["index"] for r in _lines(out)) == list(range(12))


def test_out_refuses_another_matchs_games(one_line_error, capsys, tmp_path) -> None:
    out = tmp_path / "match.jsonl"
    _arena(capsys, "greedy", "random", "--games", "2", "--max-plies", "40", "--out", str(out))
    error = one_line_error("arena", "random", "random", "--games", "2", "--max-plies", "40", "--out", str(out))
    assert "holds another match (a 'greedy' there, 'random' here)" in error and "give another --out" in error
    error = one_line_error("arena", "greedy", "random", "--games", "2", "--max-plies", "50", "--out", str(out))
    assert "max_plies 40 there, 50 here" in error
    out.write_text('{"format_version": 1, "index": 0}\n')
    assert "line 1 is not an arena game record" in one_line_error("arena", "greedy", "random", "--games", "2", "--out", str(out))


def test_a_resumed_match_hands_its_runner_only_the_pairs_not_complete(tmp_path) -> None:
    """The parallel arena's chunks (``ChunkRunner``) cover exactly the pairs the games file lacks, each at
    its place in the match."""
    from alphazero.judge.match import play_chunk, run_arena

    seen: list[tuple[int, int]] = []

    def here(spec_a, spec_b, chunks, max_plies, seed, on_games, event, adjudication) -> bool:
        for number, (first, openings) in enumerate(chunks):
            seen.append((first, len(openings)))
            if on_games(play_chunk(spec_a, spec_b, openings, first, max_plies, seed, number, event, adjudication)):
                return True
        return False

    out = tmp_path / "match.jsonl"
    run_arena("greedy", "random", 20, max_plies=30, out=out, chunk_runner=here, parallelism=2)
    assert sorted(first + k for first, count in seen for k in range(count)) == list(range(10))
    lines = out.read_text().splitlines()
    gone = {2, 3, 4, 5, 13, 19}  # pairs 1 and 2 whole, one game of pairs 6 and 9
    out.write_text("".join(line + "\n" for line in lines if json.loads(line)["index"] not in gone))
    seen.clear()
    report = run_arena("greedy", "random", 20, max_plies=30, out=out, chunk_runner=here, parallelism=2)
    assert sorted(first + k for first, count in seen for k in range(count)) == [1, 2, 6, 9]
    assert report["games"] == 20 and report["games_stored"] == 14
    assert sorted(json.loads(line)["index"] for line in out.read_text().splitlines()) == list(range(20))


def test_sigterm_stops_a_match_and_the_same_command_goes_on_from_its_games(capsys, tmp_path) -> None:
    """A long match killed by ``kill`` / a scheduler / a session's end: exit 130 with where it goes on, every
    finished game kept whole in its file, and the same command plays only the rest."""
    from tests.runs import terminated_when

    out = tmp_path / "long.jsonl"
    args = ["arena", "ab:material?depth=2", "ab:material?depth=1", "--games", "40", "--openings", str(BOOK),
            "--max-plies", "120", "--out", str(out)]
    code, err = terminated_when(args, lambda: out.exists() and len(out.read_text().splitlines()) >= 2, "two games written")
    assert code == 130, err[-2000:]
    assert f"alphazero arena: stopped; the same command goes on from {out}" in err and "Traceback" not in err
    stored = _lines(out)
    assert 2 <= len(stored) < 40 and len(stored) == len(out.read_text().splitlines())  # every line whole
    report = _arena(capsys, *args[1:])
    assert report["games"] == 40 and report["games_stored"] == len(stored)
    assert sorted(r["index"] for r in _lines(out)) == list(range(40))


def test_an_adjudicated_match_resumes_from_its_games(capsys, tmp_path) -> None:
    out = tmp_path / "judged.jsonl"
    args = ["ab:material?depth=2", "ab:material?depth=1", "--openings", str(BOOK), "--max-plies", "200", "--adjudicate",
            "--out", str(out)]
    _arena(capsys, *args, "--games", "4")
    more = _arena(capsys, *args, "--games", "6")
    assert more["games_stored"] == 4 and more["games"] == 6 and len(_lines(out)) == 6
