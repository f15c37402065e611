"""Tests for the UCI engine: protocol (``alphazero.serve.uci_protocol``), limits (``alphazero.serve.uci_limits``),
the searchers (``alphazero.serve.searchers``) and the command loop (``alphazero.serve.uci``).

The pure layers are tested on their own: the line parser and option tables as data, the stop rules
with explicit clock readings and no threads. The engine is driven three ways: as a subprocess
through python-chess's UCI client (the client is the protocol oracle: it rejects malformed replies
and illegal best moves), as a subprocess fed raw text lines (malformed input), and in-process
through blocking stream stand-ins (tree reuse, isready/stop while searching, ponderhit). python-chess
decides legality everywhere. A tiny random network keeps every search cheap; its moves are bad but
must always be legal. ``--player ab:material`` (alpha-beta) is served the same ways, with mates
whose answer is known; ``--player greedy`` stands for every other player spec.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import chess
import chess.engine
import pytest
import torch

from alphazero.config import NetworkConfig
from alphazero.errors import InputError
from alphazero.nets.network import PolicyValueNet, save_network
from alphazero.serve.searchers import (
    AB_OPTIONS,
    DEFAULT_FPU_REDUCTION,
    DEFAULT_MOVE_OVERHEAD_MS,
    DEFAULT_POLICY_TEMPERATURE,
    NETWORK_OPTIONS,
    AlphaBetaSearcher,
    NetworkSearcher,
    make_searcher,
)
from alphazero.serve.uci import UCIEngine, run_uci, run_uci_player
from alphazero.serve.uci_limits import (
    GoParams,
    Limits,
    depth_to_nodes,
    parse_go,
    time_budget,
    time_limits,
)
from alphazero.serve.uci_protocol import (
    Debug,
    Go,
    IsReady,
    Option,
    OptionTable,
    Position,
    Quit,
    SetOption,
    Stop,
    format_bestmove,
    format_info,
    parse_line,
    parse_position,
)

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)
STOCKFISH = "/usr/games/stockfish"
ENGINE_SCRIPT = "import sys; from alphazero.serve.uci import run_uci; sys.exit(run_uci(sys.argv[1]))"

POSITIONS = [
    chess.STARTING_FEN,
    "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",  # Black to move
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",  # castling both ways
    "1n2k3/P7/8/8/8/8/7p/4K1N1 b - - 0 1",  # Black promotions incl. capture
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1",  # en passant
]
MATED = "7k/5QQ1/8/8/8/8/8/K7 b - - 0 1"  # Black is checkmated
STALEMATED = "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"  # Black is stalemated
ONE_MOVE = "7k/8/8/8/8/8/6R1/K7 b - - 0 1"  # Black's only legal move is Kh7


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.fixture(scope="module")
def net() -> PolicyValueNet:
    torch.manual_seed(0)
    return PolicyValueNet(TINY)


@pytest.fixture(scope="module")
def network_path(tmp_path_factory: pytest.TempPathFactory, net: PolicyValueNet) -> Path:
    path = tmp_path_factory.mktemp("uci") / "net.pt"
    save_network(net, path)
    return path


@pytest.fixture(scope="module")
def engine(network_path: Path):
    engine = chess.engine.SimpleEngine.popen_uci(
        [sys.executable, "-c", ENGINE_SCRIPT, str(network_path)], timeout=60, cwd=str(REPO), env=_env()
    )
    try:
        yield engine
    finally:
        try:
            engine.quit()
        except Exception:
            engine.close()


def assert_legal_line(board: chess.Board, pv: list[chess.Move]) -> None:
    line = board.copy()
    for move in pv:
        assert move in line.legal_moves, (line.fen(), move)
        line.push(move)


# --------------------------------------------------------------------------------------------------
# Pure parsing and time management


def test_parse_go_reads_every_parameter() -> None:
    params = parse_go("wtime 1000 btime -20 winc 5 binc 0 movestogo 7 depth 3 nodes 9 movetime 40 infinite ponder".split())
    assert (params.wtime, params.btime, params.winc, params.binc) == (1000, -20, 5, 0)
    assert (params.movestogo, params.depth, params.nodes, params.movetime) == (7, 3, 9, 40)
    assert params.infinite and params.ponder
    assert parse_go("searchmoves e2e4 d2d4 nodes 5".split()).searchmoves == ["e2e4", "d2d4"]
    assert parse_go([]) == GoParams()


@pytest.mark.parametrize("args, expected, note", [
    ("nodes abc", GoParams(), "nodes needs an integer ('abc'"),
    ("nodes", GoParams(), "nothing follows"),
    ("nodes depth 3", GoParams(depth=3), "nodes needs an integer (nothing follows)"),  # the keyword is kept
    ("nodes 0", GoParams(nodes=1), "read as nodes 1"),
    ("depth 0", GoParams(depth=1), "read as depth 1"),
    ("depth -1", GoParams(depth=1), "read as depth 1"),
    ("movetime -5", GoParams(movetime=0), "read as 0"),
    ("mate 0 movestogo 0", GoParams(), "mate 0 ignored"),
    ("foo 5", GoParams(), "unknown token(s) 'foo 5'"),
    ("frob 3 movetime 40", GoParams(movetime=40), "unknown token(s) 'frob 3'"),
    ("nodes 1.5", GoParams(), "'1.5' is not an integer"),
])
def test_parse_go_reads_what_it_can_of_malformed(args: str, expected: GoParams, note: str) -> None:
    """Every go must end in a bestmove (Stockfish 15.1 also searches on after unknown tokens): the
    parser never raises, keeps what it can read and says what it skipped."""
    params = parse_go(args.split())
    assert params.notes and note in " ".join(params.notes), params.notes
    params.notes = []
    assert params == expected


def test_time_limits_soft_and_hard() -> None:
    """The hard limit (alpha-beta aborts there) is a few soft limits, at most a third of what the
    clock can spare (all of it with movestogo 1), and never more than the clock less the overhead."""
    overhead = 50
    soft, hard = time_limits(GoParams(wtime=60_050, winc=1050), chess.WHITE, overhead)
    assert soft == pytest.approx(2.75) and hard == pytest.approx(3 * 2.75)
    soft, hard = time_limits(GoParams(wtime=1000, winc=10), chess.WHITE, overhead)
    assert soft == pytest.approx(950 / 30 / 1000)  # 1 s + 10 ms: the overhead is kept back once...
    assert time_limits(GoParams(wtime=200, winc=10), chess.WHITE, overhead)[0] == pytest.approx(0.005)
    # ...and from every increment: a low clock spends less than the increment, and climbs back
    soft, hard = time_limits(GoParams(wtime=9050, movestogo=1), chess.WHITE, overhead)
    assert soft == pytest.approx(3.0) and hard == pytest.approx(9.0)
    soft, hard = time_limits(GoParams(wtime=3050, movestogo=2), chess.WHITE, overhead)
    assert soft == pytest.approx(1.0) and hard == pytest.approx(1.0)  # capped at a third of the spare time
    assert time_limits(GoParams(movetime=500), chess.WHITE, overhead) == pytest.approx((0.45, 0.45))
    assert time_limits(GoParams(wtime=40, winc=100), chess.WHITE, overhead) == (0.0, 0.0)  # nothing to spare
    for remaining in (-5, 0, 30, 60, 100, 300, 1000, 10_000):
        for increment in (0, 10, 100, 5000):
            for moves_to_go in (None, 1, 2, 40):
                params = GoParams(wtime=remaining, winc=increment, movestogo=moves_to_go)
                soft, hard = time_limits(params, chess.WHITE, overhead)
                assert 0 <= soft <= hard <= max(0.0, (remaining - overhead) / 1000) + 1e-9, (params, soft, hard)


def test_time_budget_formula() -> None:
    overhead = 50
    # (remaining - overhead) / 30 + 0.75 * (inc - overhead), capped at a third of (remaining - overhead)
    params = GoParams(wtime=60_050, btime=10_050, winc=1050, binc=0)
    assert time_budget(params, chess.WHITE, overhead) == pytest.approx((2000 + 750) / 1000)
    assert time_budget(params, chess.BLACK, overhead) == pytest.approx((10_000 / 30) / 1000)
    # movestogo replaces 30; the cap at a third of the spare time applies
    assert time_budget(GoParams(wtime=9050, movestogo=1), chess.WHITE, overhead) == pytest.approx(3.0)
    assert time_budget(GoParams(wtime=9050, movestogo=4), chess.WHITE, overhead) == pytest.approx(2.25)
    # movetime minus overhead; with a clock too, the smaller wins
    assert time_budget(GoParams(movetime=500), chess.BLACK, overhead) == pytest.approx(0.45)
    assert time_budget(GoParams(movetime=5000, btime=3050), chess.BLACK, overhead) == pytest.approx(0.1)
    # never negative; no limit -> None; the other side's clock is not ours
    assert time_budget(GoParams(wtime=10), chess.WHITE, overhead) == 0.0
    assert time_budget(GoParams(wtime=-100), chess.WHITE, overhead) == 0.0
    assert time_budget(GoParams(), chess.WHITE, overhead) is None
    assert time_budget(GoParams(wtime=1000), chess.BLACK, overhead) is None


def test_depth_mapping_is_increasing() -> None:
    assert depth_to_nodes(1) == 16 and depth_to_nodes(5) == 256
    assert all(depth_to_nodes(d) < depth_to_nodes(d + 1) for d in range(1, 20))


def test_parse_position() -> None:
    board = parse_position("startpos moves e2e4 e7e5 g1f3".split())
    expected = chess.Board()
    for uci in ("e2e4", "e7e5", "g1f3"):
        expected.push_uci(uci)
    assert board == expected and board.move_stack == expected.move_stack
    fen = POSITIONS[2]
    board = parse_position(["fen", *fen.split(), "moves", "e1g1"])  # castling in standard notation
    assert board.piece_at(chess.G1) == chess.Piece(chess.KING, chess.WHITE)
    assert parse_position(["fen", *fen.split()[:4]]).fen() == chess.Board(fen).fen()  # no clocks: defaults
    for bad in ["", "startpos e2e4", "fen", "fen not-a-fen", "banana", "fen 8/8/8/8/8/8/8/8 w - - 0 1"]:
        with pytest.raises(ValueError):
            parse_position(bad.split())
    for cut, kept in [("startpos moves e2e5", chess.Board()), ("startpos moves 0000", chess.Board()),
                      (f"fen {MATED} moves h8g8", chess.Board(MATED))]:
        notes: list[str] = []
        assert parse_position(cut.split(), notes) == kept and len(notes) == 1, cut


def test_run_uci_missing_network(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing.pt"):
        run_uci(str(tmp_path / "missing.pt"))


# --------------------------------------------------------------------------------------------------
# The protocol on its own: lines -> commands, options as data, replies


def test_parse_line_finds_the_command() -> None:
    assert parse_line("") is None and parse_line("  \t \n") is None
    parsed = parse_line("joho debug on")
    assert parsed.command == Debug(True) and parsed.skipped == ("joho",) and parsed.error is None
    assert parse_line("isready now").command == IsReady()  # words after an argument-less command are ignored
    assert parse_line("QUIT\n").command == Quit() and parse_line("stop").command == Stop()
    assert parse_line("setoption name Move Overhead value 20").command == SetOption("Move Overhead", "20")
    assert parse_line("setoption name Clear Hash").command == SetOption("Clear Hash", "")
    go = parse_line("go wtime 100 btime 200 infinite").command
    assert isinstance(go, Go) and go.params == GoParams(wtime=100, btime=200, infinite=True)
    position = parse_line("position startpos moves e2e4 e7e5").command
    assert isinstance(position, Position)
    assert [move.uci() for move in position.board.move_stack] == ["e2e4", "e7e5"]


@pytest.mark.parametrize("line, fault", [
    ("frobnicate", "unknown command 'frobnicate'"),
    ("position fen not-a-fen", "position unchanged"),
    ("debug maybe", "expected 'debug on' or 'debug off'"),
    ("setoption name", "expected 'setoption name <id> [value <x>]'"),
    ("setoption value 3", "expected 'setoption name <id> [value <x>]'"),
])
def test_parse_line_reports_bad_lines(line: str, fault: str) -> None:
    parsed = parse_line(line)
    assert parsed.command is None and fault in parsed.error


def test_parse_line_keeps_skipped_tokens_with_a_bad_command() -> None:
    parsed = parse_line("xx debug maybe")
    assert parsed.command is None and parsed.skipped == ("xx",) and "expected 'debug on'" in parsed.error
    parsed = parse_line("xx go nodes")  # a go is always obeyed, with notes on what it skipped
    assert isinstance(parsed.command, Go) and parsed.skipped == ("xx",) and parsed.command.params.notes


def test_position_moves_end_at_the_first_illegal_one() -> None:
    """Stockfish 15.1's rule: the moves before an illegal one stand, the rest are dropped."""
    for line, kept in [("position startpos moves e2e4 e7e5 g1f3 e2e5 b8c6", ["e2e4", "e7e5", "g1f3"]),
                       ("position startpos moves e2e5", []),
                       ("position startpos moves e2e4 xyz d7d5", ["e2e4"]),
                       ("position startpos moves e2e4 0000 d7d5", ["e2e4"])]:
        position = parse_line(line).command
        assert isinstance(position, Position)
        assert [move.uci() for move in position.board.move_stack] == kept
        assert position.note is not None and f"the first {len(kept)} stands" in position.note
    assert parse_line("position startpos moves e2e4").command.note is None


def test_position_extending_the_last_one_plays_only_the_new_moves() -> None:
    """A GUI sends the whole game before every move: a command that extends the last one continues
    its board (same result as parsing it all), and only when it does."""
    known = parse_line("position startpos moves e2e4 e7e5").command
    longer = parse_line("position startpos moves e2e4 e7e5 g1f3 b8c6", known).command
    assert longer.board == parse_line("position startpos moves e2e4 e7e5 g1f3 b8c6").command.board
    assert longer.board.move_stack == parse_line("position startpos moves e2e4 e7e5 g1f3 b8c6").command.board.move_stack
    assert len(known.board.move_stack) == 2  # the known board is not changed
    cut = parse_line("position startpos moves e2e4 e7e5 g1f3 e7e5", known).command
    assert [m.uci() for m in cut.board.move_stack] == ["e2e4", "e7e5", "g1f3"] and "move 4 'e7e5'" in cut.note
    other = parse_line("position startpos moves d2d4 d7d5 c2c4", known).command  # not an extension
    assert [m.uci() for m in other.board.move_stack] == ["d2d4", "d7d5", "c2c4"]
    fen = parse_line(f"position fen {POSITIONS[2]} moves e1g1 e8c8", known).command
    assert fen.board.fen() == "2kr3r/8/8/8/8/8/8/R4RK1 w - - 2 2"


def test_option_table_declares_checks_and_defaults() -> None:
    table = OptionTable([
        Option("Depth", "spin", 3, sets="depth", low=1, high=9),
        Option("Fast", "check", False, sets="fast"),
        Option("Temp", "float", 0.5, sets="temperature", low=0, high=2),
        Option("Book File", "string", "none", sets="book"),
    ], ignored=["Hash"])
    assert table.declarations() == [
        "option name Depth type spin default 3 min 1 max 9",
        "option name Fast type check default false",
        "option name Temp type string default 0.5",  # UCI has no float type
        "option name Book File type string default none",
    ]
    assert table.defaults() == {"depth": 3, "fast": False, "temperature": 0.5, "book": "none"}
    assert table.parse(SetOption("depth", "9")) == ("depth", 9)
    assert table.parse(SetOption("FAST", "true")) == ("fast", True)
    assert table.parse(SetOption("Temp", "1.5")) == ("temperature", 1.5)
    assert table.parse(SetOption("BookFile", "my book.bin")) == ("book", "my book.bin")  # spaces do not matter
    assert table.parse(SetOption("Hash", "64")) is None  # accepted, ignored
    for name, value, fault in [("Depth", "10", "[1, 9]"), ("Depth", "x", "not an integer"),
                               ("Fast", "yes", "true or false"), ("Temp", "2", "(0, 2)"),
                               ("Temp", "hot", "not a number"),
                               ("Nodes", "5", "unknown option 'Nodes' (known: Depth, Fast, Temp, Book File)")]:
        with pytest.raises(ValueError) as error:
            table.parse(SetOption(name, value))
        assert fault in str(error.value), (name, value, str(error.value))


def test_engine_option_tables() -> None:
    threads_max = max(1, os.cpu_count() or 1)
    assert NETWORK_OPTIONS.declarations() == [  # what the network engine always announced
        "option name Nodes type spin default 400 min 1 max 1000000000",
        "option name CPuct type string default 1.25",
        f"option name PolicyTemperature type string default {DEFAULT_POLICY_TEMPERATURE}",
        f"option name FPUReduction type string default {DEFAULT_FPU_REDUCTION}",
        f"option name Threads type spin default 1 min 1 max {threads_max}",
        "option name MultiPV type spin default 1 min 1 max 64",
        "option name Move Overhead type spin default 50 min 0 max 10000",
        "option name Ponder type check default false",
    ]
    assert NETWORK_OPTIONS.parse(SetOption("Move Overhead", "20")) == ("move_overhead_ms", 20)
    assert NETWORK_OPTIONS.parse(SetOption("MoveOverhead", "20")) == ("move_overhead_ms", 20)
    assert NETWORK_OPTIONS.parse(SetOption("Hash", "64")) is None
    assert AB_OPTIONS.parse(SetOption("Hash", "64")) == ("hash_mb", 64)
    assert AB_OPTIONS.parse(SetOption("Threads", "4")) is None
    with pytest.raises(ValueError):
        AB_OPTIONS.parse(SetOption("Nodes", "5"))


def test_replies() -> None:
    e2e4, e7e5 = chess.Move.from_uci("e2e4"), chess.Move.from_uci("e7e5")
    assert format_info(depth=3, seldepth=None, score="mate -2", pv=[e2e4, "e7e5"]) == "info depth 3 score mate -2 pv e2e4 e7e5"
    assert format_info(depth=0, score="cp 0", pv=[]) == "info depth 0 score cp 0"
    assert format_bestmove(e2e4, e7e5) == "bestmove e2e4 ponder e7e5"
    assert format_bestmove(None, e7e5) == "bestmove 0000"


# --------------------------------------------------------------------------------------------------
# Limits on their own: explicit clock readings, no threads


def test_limits_from_go() -> None:
    limits = Limits.from_go(parse_go("movetime 500".split()), chess.WHITE, 50, 100.0, default_nodes=400)
    assert limits.nodes is None and limits.deadline == pytest.approx(100.45) and limits.has_limit
    assert limits.remaining(100.25) == pytest.approx(0.2) and limits.remaining(101.0) == 0.0
    assert not limits.reached(1000, 100.44)
    assert not limits.reached(3, 100.45, min_nodes=4)  # a timed search waits for its minimum
    assert limits.reached(4, 100.45, min_nodes=4)
    # the default applies only to a go without any limit
    assert Limits.from_go(GoParams(), chess.WHITE, 50, 0.0, default_nodes=400).nodes == 400
    assert not Limits.from_go(GoParams(), chess.WHITE, 50, 0.0).has_limit
    for text in ("depth 3", "infinite", "wtime 1000", "movetime 0"):
        assert Limits.from_go(parse_go(text.split()), chess.WHITE, 50, 0.0, default_nodes=400).nodes is None, text
    # the other side's clock is no limit
    assert not Limits.from_go(parse_go("btime 1000".split()), chess.WHITE, 50, 0.0).has_limit
    nodes = Limits.from_go(parse_go("nodes 10".split()), chess.WHITE, 50, 0.0)
    assert not nodes.reached(9, 1e9) and nodes.reached(10, 0.0)


def test_limits_ponder_and_infinite() -> None:
    limits = Limits.from_go(parse_go("ponder wtime 3000 btime 3000".split()), chess.WHITE, 0, 10.0)
    assert limits.unbounded and limits.deadline is None
    assert not limits.reached(10**9, 1e9)
    limits.ponderhit(10.04)
    assert not limits.unbounded and limits.clock_start == 10.04
    assert limits.soft_deadline == pytest.approx(10.1)  # 3000 / 30 ms, the 40 ms pondered counted as thought
    assert limits.deadline == pytest.approx(10.34)  # the hard limit, three soft ones, from the ponderhit
    limits.ponderhit(13.0)  # a second ponderhit changes nothing
    assert limits.soft_deadline == pytest.approx(10.1)
    assert limits.reached(4, 10.1)
    long_ponder = Limits.from_go(parse_go("ponder wtime 3000 btime 3000".split()), chess.WHITE, 0, 10.0)
    long_ponder.ponderhit(12.0)  # pondered 2 s, more than the 100 ms the move may take: answer now
    assert long_ponder.soft_deadline == long_ponder.deadline == 12.0 and long_ponder.reached(4, 12.0)
    endless = Limits.from_go(parse_go("ponder infinite".split()), chess.WHITE, 0, 0.0)
    endless.ponderhit(1.0)
    assert endless.unbounded and not endless.ponder  # go ponder infinite stays infinite
    assert not Limits.from_go(parse_go(["infinite"]), chess.WHITE, 0, 0.0).reached(10**9, 1e9)


# --------------------------------------------------------------------------------------------------
# Through python-chess's UCI client


def test_identifies_itself(engine: chess.engine.SimpleEngine) -> None:
    assert "AlphaZero" in engine.id["name"]
    assert engine.id.get("author")
    for option in ("Nodes", "CPuct", "Threads", "Move Overhead", "MultiPV"):
        assert option in engine.options
    assert engine.options["Threads"].min == 1


@pytest.mark.parametrize("fen", POSITIONS)
def test_play_nodes(engine: chess.engine.SimpleEngine, fen: str) -> None:
    board = chess.Board(fen)
    result = engine.play(board, chess.engine.Limit(nodes=50), info=chess.engine.INFO_ALL)
    assert result.move in board.legal_moves
    assert result.info["nodes"] == 50
    assert_legal_line(board, result.info["pv"])
    assert result.info["pv"][0] == result.move
    if result.ponder is not None:
        assert result.info["pv"][1] == result.ponder


def test_analyse_time(engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board(POSITIONS[1])
    started = time.monotonic()
    info = engine.analyse(board, chess.engine.Limit(time=0.3))
    assert time.monotonic() - started < 3
    assert isinstance(info["score"], chess.engine.PovScore) and info["score"].turn == chess.BLACK
    assert info["nodes"] >= 4 and info["depth"] >= 1 and info["seldepth"] >= info["depth"]
    assert info["pv"][0] in board.legal_moves
    assert_legal_line(board, info["pv"])


def test_movetime_honoured(engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board()
    started = time.monotonic()
    result = engine.play(board, chess.engine.Limit(time=0.5), info=chess.engine.INFO_BASIC)
    elapsed = time.monotonic() - started
    assert result.move in board.legal_moves
    assert 0.5 - DEFAULT_MOVE_OVERHEAD_MS / 1000 - 0.05 <= elapsed < 3
    assert 400 <= result.info["time"] * 1000 <= 1500  # the engine's own clock: the budget, not more


@pytest.mark.parametrize("fen", [POSITIONS[0], POSITIONS[1]])
def test_clock_limits(engine: chess.engine.SimpleEngine, fen: str) -> None:
    board = chess.Board(fen)
    limit = chess.engine.Limit(white_clock=5, black_clock=5, white_inc=0.1, black_inc=0.1)
    started = time.monotonic()
    result = engine.play(board, limit)
    assert time.monotonic() - started < 3  # budget 5000/30 + 75 - 50 ms ~ 0.19 s
    assert result.move in board.legal_moves


def test_infinite_until_stop(engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board(POSITIONS[1])
    analysis = engine.analysis(board)

    def late_info() -> dict | None:
        """The first periodic info line from a second or more into the search; None if it ended first."""
        for info in analysis:
            if info.get("time", 0) >= 1.0 and "pv" in info:
                return info
        return None

    waiter = concurrent.futures.ThreadPoolExecutor(1)  # an engine that falls silent fails, not hangs
    try:
        info = waiter.submit(late_info).result(timeout=60)
        # still searching a second in (no bestmove), printing periodic info lines meanwhile
        assert info is not None, "the infinite search ended by itself"
        assert info["nodes"] > 0 and "score" in info and info["pv"][0] in board.legal_moves
        nodes_before = info["nodes"]
    finally:
        stopped = time.monotonic()
        analysis.stop()
        waiter.shutdown(wait=False)
    best = analysis.wait()
    assert time.monotonic() - stopped < 3  # searched in chunks of ~50 ms: stop is read between them
    assert best.move in board.legal_moves
    assert analysis.info["nodes"] >= nodes_before


def test_game_over_and_single_move_positions(engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board(ONE_MOVE)
    assert board.legal_moves.count() == 1
    result = engine.play(board, chess.engine.Limit(nodes=100))
    assert result.move == next(iter(board.legal_moves))
    # drawn by insufficient material yet with legal moves: still a legal move
    board = chess.Board("8/8/8/8/8/8/k7/7K w - - 0 1")
    assert engine.play(board, chess.engine.Limit(nodes=10)).move in board.legal_moves


@pytest.mark.engine
def test_full_game_against_stockfish(engine: chess.engine.SimpleEngine) -> None:
    stockfish = chess.engine.SimpleEngine.popen_uci(STOCKFISH, timeout=30)
    try:
        stockfish.configure({"Skill Level": 0, "Threads": 1, "Hash": 16})
        board = chess.Board()
        game = object()
        while not board.is_game_over(claim_draw=True) and board.ply() < 60:
            if board.turn == chess.WHITE:
                result = engine.play(board, chess.engine.Limit(nodes=16), game=game)
            else:
                result = stockfish.play(board, chess.engine.Limit(depth=1), game=game)
            assert result.move in board.legal_moves, (board.fen(), result.move)
            board.push(result.move)
        assert board.ply() == 60 or board.is_game_over(claim_draw=True)
    finally:
        stockfish.quit()


# --------------------------------------------------------------------------------------------------
# Raw text through a subprocess


class RawEngine:
    """The engine as a subprocess with a reader thread, so reads can time out (``queue.Empty``: a
    hung engine fails the test, it never hangs it). ``arrived`` is when the last line read came in."""

    def __init__(self, network_path: Path | None = None, argv: list[str] | None = None) -> None:
        argv = argv if argv is not None else [sys.executable, "-c", ENGINE_SCRIPT, str(network_path)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            cwd=str(REPO), env=_env(),
        )
        self.lines: queue.Queue[tuple[float, str | None]] = queue.Queue()
        self.arrived = 0.0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line.rstrip("\n")))
        self.lines.put((time.monotonic(), None))

    def send(self, *lines: str) -> float:
        """Write the lines; returns when the write began (an answer can arrive before ``flush`` returns)."""
        started = time.monotonic()
        for line in lines:
            self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return started

    def read_until(self, prefix: str, timeout: float = 20) -> list[str]:
        out, deadline = [], time.monotonic() + timeout
        while True:
            self.arrived, line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"engine exited; output so far: {out}"
            out.append(line)
            if line.startswith(prefix):
                return out

    def latency_ms(self, command: str, reply: str, timeout: float = 20) -> float:
        """Milliseconds from writing ``command`` to the arrival of the line starting with ``reply``."""
        sent = self.send(command)
        self.read_until(reply, timeout)
        return (self.arrived - sent) * 1000

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("quit")
                self.proc.wait(timeout=10)
        except Exception:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def test_malformed_commands_are_reported_and_ignored(network_path: Path) -> None:
    raw = RawEngine(network_path)
    try:
        raw.send("uci")
        assert "uciok" in raw.read_until("uciok")
        bad = ["position fen not-a-fen", "frobnicate", "setoption name", "position", "position startpos junk",
               "setoption name Nodes value -3", "setoption name Foo value 1", "debug maybe"]
        raw.send("position startpos moves e2e4", "isready")
        assert raw.read_until("readyok") == ["readyok"]
        for line in bad:
            raw.send(line, "isready")
            reply = raw.read_until("readyok")
            assert reply[-1] == "readyok"
            assert len(reply) == 2 and reply[0].startswith("info string "), (line, reply)
        raw.send("", "   ", "isready")  # blank lines are no commands
        assert raw.read_until("readyok") == ["readyok"]
        raw.send("go nodes 20")  # no valid position since e2e4: the bad ones must have kept it
        reply = raw.read_until("bestmove")
        assert not any(line.startswith("info string") for line in reply), reply
        board = chess.Board()
        board.push_uci("e2e4")
        best = chess.Move.from_uci(reply[-1].split()[1])
        assert best in board.legal_moves  # a Black move: the bad position commands changed nothing
        info = [line for line in reply if line.startswith("info depth")][-1].split()
        assert info[info.index("nodes") + 1] == "20"
        # an illegal move ends the list (Stockfish's rule): the position before it stands
        raw.send("position startpos moves e2e4 e7e5 e1e8 g1f3", "go nodes 5")
        reply = raw.read_until("bestmove")
        assert reply[0].startswith("info string") and "e1e8" in reply[0]
        after_e5 = chess.Board()
        after_e5.push_uci("e2e4")
        after_e5.push_uci("e7e5")
        assert chess.Move.from_uci(reply[-1].split()[1]) in after_e5.legal_moves  # White to move, e5 played
        raw.send("position fen not-a-fen", "position startpos moves e2e4", "go nodes 20")
        reply = raw.read_until("bestmove")
        assert sum(line.startswith("info string") for line in reply) == 1
        assert chess.Move.from_uci(reply[-1].split()[1]) in board.legal_moves
        # the engine still serves: an unknown token before a command is skipped, the command obeyed
        raw.send("joho isready")
        reply = raw.read_until("readyok")
        assert reply[0].startswith("info string") and reply[-1] == "readyok"
        raw.send("quit")
        assert raw.proc.wait(timeout=10) == 0
    finally:
        raw.close()


def test_terminal_positions_raw(network_path: Path) -> None:
    raw = RawEngine(network_path)
    try:
        raw.send("uci")
        raw.read_until("uciok")
        raw.send(f"position fen {MATED}", "go nodes 10")
        reply = raw.read_until("bestmove")
        assert reply[-1] == "bestmove 0000" and "info depth 0 score mate 0" in reply
        raw.send(f"position fen {STALEMATED}", "go movetime 50")
        reply = raw.read_until("bestmove")
        assert reply[-1] == "bestmove 0000" and "info depth 0 score cp 0" in reply
        # a quit during a search ends the process promptly
        raw.send("position startpos", "go infinite", "isready")
        raw.read_until("readyok")  # the go was read: the search thread runs
        started = time.monotonic()
        raw.send("quit")
        assert raw.proc.wait(timeout=5) == 0
        assert time.monotonic() - started < 3
    finally:
        raw.close()


# --------------------------------------------------------------------------------------------------
# In-process, through blocking stream stand-ins


class LineInput:
    """A blocking ``readline`` over a queue (``""`` is end of input)."""

    def __init__(self) -> None:
        self.queue: queue.Queue[str] = queue.Queue()

    def readline(self) -> str:
        return self.queue.get()

    def send(self, *lines: str) -> None:
        for line in lines:
            self.queue.put(line + "\n")


class LineOutput:
    """Collects written lines; counts flushes so unflushed output would show."""

    def __init__(self) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.buffer = ""
        self.pending = ""
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.pending += text
        return len(text)

    def flush(self) -> None:
        with self.lock:
            self.buffer += self.pending
            self.pending = ""
            *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            self.queue.put(line)

    def read_until(self, prefix: str, timeout: float = 20) -> list[str]:
        out, deadline = [], time.monotonic() + timeout
        while True:
            line = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            out.append(line)
            if line.startswith(prefix):
                return out


@contextlib.contextmanager
def serving(searcher):
    """``UCIEngine(searcher)`` running on a thread; its (input, output) stand-ins; quit at the end."""
    stdin, stdout = LineInput(), LineOutput()
    engine = UCIEngine(searcher, stdin, stdout)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(engine.run()), daemon=True)
    thread.start()
    try:
        yield stdin, stdout
    finally:
        stdin.send("quit")
        thread.join(timeout=30)
        assert not thread.is_alive() and codes == [0]


def collect(stdout: LineOutput, seconds: float) -> list[str]:
    """Every line written within ``seconds``."""
    out, deadline = [], time.monotonic() + seconds
    while True:
        try:
            out.append(stdout.queue.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            return out


@pytest.fixture
def inproc(net: PolicyValueNet):
    with serving(net) as streams:
        yield streams


def test_isready_and_go_while_searching(inproc) -> None:
    stdin, stdout = inproc
    stdin.send("position startpos moves d2d4", "go infinite")
    stdout.read_until("info depth")  # the search is under way
    stdin.send("isready")
    assert stdout.read_until("readyok")[-1] == "readyok"  # answered mid-search, before any bestmove
    stdin.send("go nodes 5")
    reply = stdout.read_until("info string")
    assert "already" in reply[-1]
    stdin.send("stop")
    reply = stdout.read_until("bestmove")
    board = chess.Board()
    board.push_uci("d2d4")
    assert chess.Move.from_uci(reply[-1].split()[1]) in board.legal_moves
    # stop immediately followed by go: the new search starts once the old one has answered
    stdin.send("go infinite", "isready")
    stdout.read_until("readyok")  # the search thread runs
    stdin.send("stop", "go nodes 8")
    first = stdout.read_until("bestmove")
    second = stdout.read_until("bestmove")
    assert not any("already" in line for line in first + second)
    assert "nodes 8 " in [line for line in second if line.startswith("info depth")][-1]


def test_stop_before_first_chunk_still_gives_a_legal_move(inproc) -> None:
    stdin, stdout = inproc
    board = chess.Board(POSITIONS[3])
    stdin.send("ucinewgame", f"position fen {board.fen()}", "go infinite", "stop")
    reply = stdout.read_until("bestmove")
    assert chess.Move.from_uci(reply[-1].split()[1]) in board.legal_moves


def test_tree_reuse_between_moves(inproc) -> None:
    stdin, stdout = inproc
    stdin.send("debug on", "ucinewgame", "position startpos moves e2e4", "go nodes 200")
    reply = stdout.read_until("bestmove")
    assert not any("reused" in line for line in reply)
    words = reply[-1].split()
    assert words[2] == "ponder"  # 200 simulations give a two-move principal variation
    stdin.send(f"position startpos moves e2e4 {words[1]} {words[3]}", "go nodes 10")
    reply = stdout.read_until("bestmove")
    reused = [line for line in reply if "reused tree" in line]
    assert reused and int(reused[0].split()[-2]) > 10  # the subtree's visits came along
    board = parse_position(f"startpos moves e2e4 {words[1]} {words[3]}".split())
    assert chess.Move.from_uci(reply[-1].split()[1]) in board.legal_moves
    # a new game forgets the tree
    stdin.send("ucinewgame", f"position startpos moves e2e4 {words[1]} {words[3]}", "go nodes 10")
    reply = stdout.read_until("bestmove")
    assert not any("reused" in line for line in reply)
    # an unrelated position does not reuse either
    stdin.send(f"position fen {POSITIONS[2]}", "go nodes 10")
    assert not any("reused" in line for line in stdout.read_until("bestmove"))


def test_ponderhit_turns_into_timed_search(inproc) -> None:
    stdin, stdout = inproc
    stdin.send("setoption name MoveOverhead value 0", "position startpos", "go ponder movetime 200")
    with pytest.raises(queue.Empty):  # pondering goes on past its movetime until ponderhit
        stdout.read_until("bestmove", timeout=0.6)
    hit = time.monotonic()
    stdin.send("ponderhit")
    reply = stdout.read_until("bestmove")
    assert time.monotonic() - hit < 5  # pondered longer than its 200 ms: it answers at once (a busy machine may lag)
    assert chess.Move.from_uci(reply[-1].split()[1]) in chess.Board().legal_moves
    # a ponderhit that comes early leaves the rest of the time to think
    stdin.send("position startpos moves e2e4", "go ponder movetime 800")
    hit = time.monotonic()
    stdin.send("ponderhit")
    reply = stdout.read_until("bestmove")
    assert 0.4 <= time.monotonic() - hit < 5


def test_network_engine_answers_go_mate_and_searchmoves(inproc) -> None:
    """The tree search has neither: it says so and searches with its default limits, never forever."""
    stdin, stdout = inproc
    stdin.send(f"position fen {POSITIONS[2]}", "go mate 2 searchmoves e1g1")
    reply = stdout.read_until("bestmove", timeout=60)
    assert any("go mate is not supported" in line for line in reply)
    assert any("go searchmoves is not supported" in line for line in reply)
    assert chess.Move.from_uci(reply[-1].split()[1]) in chess.Board(POSITIONS[2]).legal_moves


def test_policy_temperature_reaches_the_network_calls(net) -> None:
    """``setoption name PolicyTemperature``: the next search's network calls divide the logits by it, so
    the root's priors are softmax(logits / T); a value at or below 0 is refused with an ``info string``."""
    searcher = NetworkSearcher(net)
    with serving(searcher) as (stdin, stdout):
        stdin.send("position startpos", "go nodes 8")
        stdout.read_until("bestmove")
        assert searcher.evaluator.policy_temperature == DEFAULT_POLICY_TEMPERATURE
        stdin.send("setoption name PolicyTemperature value 2.5", "ucinewgame", "position startpos", "go nodes 8")
        stdout.read_until("bestmove")
        assert searcher.evaluator.policy_temperature == 2.5
        stdin.send("setoption name PolicyTemperature value 0")
        assert stdout.read_until("info string")[-1].startswith("info string setoption")


def test_fpu_reduction_reaches_the_search(net) -> None:
    """``setoption name FPUReduction``: an unvisited move's first value is its parent's less this. Far below
    zero every simulation tries a new root move; far above, the search stays on the few it has visited."""
    searcher = NetworkSearcher(net)
    spread = {}
    with serving(searcher) as (stdin, stdout):
        for fpu in (-0.9, 1.9):
            stdin.send(f"setoption name FPUReduction value {fpu}", "ucinewgame", "position startpos", "go nodes 16")
            stdout.read_until("bestmove")
            tree = searcher._tree
            assert tree is not None
            spread[fpu] = sum(1 for visits in tree.root.child_visits if visits > 0)
        stdin.send("setoption name FPUReduction value 2")
        assert stdout.read_until("info string")[-1].startswith("info string setoption")
    assert spread[-0.9] >= 12 and spread[1.9] <= 4, spread


def test_setoption_values(inproc) -> None:
    stdin, stdout = inproc
    stdin.send("setoption name Nodes value 12", "setoption name CPuct value 2.5", "setoption name Threads value 1",
               "setoption name Move Overhead value 20", "setoption name Hash value 64", "setoption name Ponder value true",
               "position startpos", "go")
    reply = stdout.read_until("bestmove")
    assert not any(line.startswith("info string") for line in reply), reply
    assert "nodes 12 " in [line for line in reply if line.startswith("info depth")][-1]  # Nodes is the default limit
    for bad in ["setoption name Threads value 0", "setoption name CPuct value -1", "setoption name Nodes value x",
                "setoption name Ponder value maybe"]:
        stdin.send(bad)
        assert stdout.read_until("info string")[-1].startswith("info string setoption")


# --------------------------------------------------------------------------------------------------
# --player ab:material: alpha-beta through the same protocol

MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8#
BLACK_MATE_IN_ONE = "r5k1/5ppp/8/8/8/8/5PPP/6K1 b - - 0 1"  # ...Ra1#
CUT_SHORT = re.compile(r"info depth \d+ nodes \d+ time \d+ pv [a-h][1-8][a-h][1-8][qrbn]?")
AB_INFO = re.compile(r"info depth \d+ seldepth \d+ score (cp|mate) -?\d+ nodes \d+ nps \d+ time \d+ pv( [a-h][1-8][a-h][1-8][qrbn]?)+")
AB_ARGV = [sys.executable, "-m", "commands.main", "uci", "--player", "ab:material"]


@pytest.fixture(scope="session")
def ab_compiled() -> None:
    """Compile (or load from numba's cache) the alpha-beta search once, before any engine needs it:
    a cold compilation takes up to a minute on a loaded machine, a cached load about a second."""
    from alphazero.search.alphabeta import AlphaBeta

    AlphaBeta("material", tt_mb=1).search(chess.Board(MATE_IN_ONE), depth=2)


@pytest.fixture(scope="module")
def ab_engine(ab_compiled):
    engine = chess.engine.SimpleEngine.popen_uci(AB_ARGV, timeout=120, cwd=str(REPO), env=_env())
    try:
        yield engine
    finally:
        try:
            engine.quit()
        except Exception:
            engine.close()


def test_ab_finds_mate_in_one_with_depth_3(ab_engine: chess.engine.SimpleEngine) -> None:
    assert "ab:material" in ab_engine.id["name"]
    assert {"Hash", "Move Overhead", "Ponder", "MultiPV"} <= set(ab_engine.options) and "Nodes" not in ab_engine.options
    for fen, mate in [(MATE_IN_ONE, "a1a8"), (BLACK_MATE_IN_ONE, "a8a1")]:
        board = chess.Board(fen)
        result = ab_engine.play(board, chess.engine.Limit(depth=3), info=chess.engine.INFO_ALL)
        assert result.move == chess.Move.from_uci(mate)
        info = result.info
        assert info["score"].relative == chess.engine.Mate(1)
        assert info["depth"] >= 1 and info["seldepth"] >= 1 and info["nodes"] > 0
        assert "nps" in info and "time" in info
        assert info["pv"][0] == result.move


def test_ab_reports_every_iteration(ab_engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board(POSITIONS[1])  # Black to move
    with ab_engine.analysis(board, chess.engine.Limit(depth=5)) as analysis:
        infos = [info for info in analysis if "depth" in info]
        best = analysis.wait()
    assert [info["depth"] for info in infos] == [1, 2, 3, 4, 5]
    for info in infos:
        assert info["score"].turn == chess.BLACK and info["nodes"] > 0 and info["seldepth"] >= 1
        assert_legal_line(board, info["pv"])
    assert [info["nodes"] for info in infos] == sorted(info["nodes"] for info in infos)
    assert best.move == infos[-1]["pv"][0]


def test_ab_respects_time_nodes_and_clock(ab_engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board()
    started = time.monotonic()
    result = ab_engine.play(board, chess.engine.Limit(time=0.2))
    elapsed = time.monotonic() - started
    assert result.move in board.legal_moves
    # budget 200 - 50 ms overhead; the search starts no iteration after 60% of it and stops at the end
    assert 0.08 <= elapsed < 3
    result = ab_engine.play(board, chess.engine.Limit(nodes=3000), info=chess.engine.INFO_ALL)
    assert result.info["nodes"] <= 3000  # the spec's default (100 ms) would search ten times more
    started = time.monotonic()
    result = ab_engine.play(board, chess.engine.Limit(white_clock=3, black_clock=3, white_inc=0, black_inc=0))
    assert time.monotonic() - started < 3  # 3000 / 30 - 50 = 50 ms
    assert result.move in board.legal_moves


def test_ab_analysis_infinite_until_stop(ab_engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board(POSITIONS[1])
    analysis = ab_engine.analysis(board)  # go infinite
    try:
        while analysis.info.get("depth", 0) < 4:
            analysis.get()
    finally:
        stopped = time.monotonic()
        analysis.stop()
    waiter = concurrent.futures.ThreadPoolExecutor(1)  # a search that ignores stop fails, not hangs
    try:
        best = waiter.submit(analysis.wait).result(timeout=20)
    finally:
        waiter.shutdown(wait=False)
    assert time.monotonic() - stopped < 3  # the running (shallow) iteration finishes first
    assert best.move in board.legal_moves and best.move == analysis.info["pv"][0]


def test_ab_plans_go_limits(ab_compiled) -> None:
    searcher = AlphaBetaSearcher("ab:material?depth=7")

    def plan(text: str, turn: chess.Color = chess.WHITE) -> dict:
        return searcher.plan(Limits.from_go(parse_go(text.split()), turn, DEFAULT_MOVE_OVERHEAD_MS, 0.0), 0.0)

    none = {"soft_ms": None, "movetime_ms": None}
    assert plan("depth 3") == {"depth": 3, "nodes": None, **none}
    assert plan("nodes 500") == {"depth": None, "nodes": 500, **none}
    assert plan("movetime 300")["movetime_ms"] == pytest.approx(250)
    assert plan("movetime 300")["soft_ms"] == pytest.approx(250)  # a fixed time: iterations start until its end
    clock = plan("wtime 60050 btime 1000 winc 1050 binc 0")
    assert clock["soft_ms"] == pytest.approx(0.6 * (2000 + 750))  # the clock's: no iteration starts after 0.6 of it
    assert clock["movetime_ms"] == pytest.approx(3 * (2000 + 750))  # the hard limit
    assert plan("wtime 60000 btime 3050 movestogo 2", chess.BLACK)["movetime_ms"] == pytest.approx(1000)
    assert plan("wtime 10")["movetime_ms"] == pytest.approx(1.0)  # an exhausted clock still gets an answer
    assert plan("") == {"depth": 7, "nodes": None, **none}  # no limit: the spec's
    assert plan("infinite") == {"depth": searcher.max_depth, "nodes": None, **none}
    assert plan("ponder movetime 300")["movetime_ms"] is None  # until ponderhit
    assert plan("mate 2") == {"depth": 8, "nodes": None, **none}  # a mate search ends somewhere
    assert plan("mate 2 depth 3")["depth"] == 3
    assert plan("movetime 300 wtime 60050 btime 1000 winc 1050")["soft_ms"] == pytest.approx(250)  # movetime binds
    assert plan("movetime 9000 wtime 60050 btime 1000 winc 1050")["soft_ms"] == pytest.approx(0.6 * (2000 + 750))
    shared = AlphaBetaSearcher("ab:material?depth=7&share=0.5")  # the spec's share of a fixed time
    assert shared.plan(Limits.from_go(parse_go(["movetime", "300"]), chess.WHITE, 50, 0.0), 0.0)["soft_ms"] == 125
    default = AlphaBetaSearcher("ab:material")
    assert default.plan(Limits.from_go(GoParams(), chess.WHITE, 50, 0.0), 0.0)["movetime_ms"] == 100
    assert default.plan(Limits.from_go(GoParams(), chess.WHITE, 50, 0.0), 0.0)["soft_ms"] == 100  # the whole of it
    with pytest.raises(ValueError, match="unknown evaluation"):
        AlphaBetaSearcher("ab:nonsense")


def test_ab_spends_a_go_movetime_whole_and_its_spec_share_of_it(ab_compiled) -> None:
    """A fixed move time is spent whole, as Stockfish spends it: iterations start until its end and the hard
    limit cuts the last; with ``share=S`` in the spec none starts after S of it. (With the clock's 0.6 share
    of the whole time the answer would come when the first iteration begun after 150 ms ends.)"""
    for spec, earliest in (("ab:material", 0.245), ("ab:material?share=0.02", 0.0)):
        times = []
        with serving(AlphaBetaSearcher(spec)) as (stdin, stdout):
            stdin.send("setoption name MoveOverhead value 0", "isready")
            stdout.read_until("readyok", timeout=60)
            for fen in POSITIONS:
                stdin.send(f"position fen {fen}", "go movetime 250")
                started = time.monotonic()
                stdout.read_until("bestmove")
                times.append(time.monotonic() - started)
        assert all(earliest <= t < 3 for t in times), (spec, times)
        if earliest == 0.0:
            assert min(times) < 0.2, times  # a share of 5 ms stops after an early iteration


def test_ab_infinite_and_ponder_wait_for_the_gui(ab_compiled) -> None:
    with serving(AlphaBetaSearcher("ab:material")) as (stdin, stdout):
        stdin.send(f"position fen {MATE_IN_ONE}", "go infinite")
        stdout.read_until("info depth 3")  # the mate is proven and the search ends, yet...
        assert not any(line.startswith("bestmove") for line in collect(stdout, 0.5))  # ...it waits for stop
        stdin.send("stop")
        assert stdout.read_until("bestmove")[-1] == "bestmove a1a8"
        stdin.send("setoption name MoveOverhead value 0", "position startpos moves e2e4", "go ponder movetime 200")
        lines = stdout.read_until("info depth", timeout=30)  # the ponder search is under way...
        lines += collect(stdout, 0.6)
        assert not any(line.startswith("bestmove") for line in lines)  # ...and goes on past its movetime
        hit = time.monotonic()
        stdin.send("ponderhit")
        lines += stdout.read_until("bestmove", timeout=30)
        assert time.monotonic() - hit < 5  # pondered past its movetime: it answers at once
        infos = [line for line in lines if line.startswith("info depth")]
        if CUT_SHORT.fullmatch(infos[-1]):  # the iteration the ponderhit stopped found a better move
            infos = infos[:-1]
        for line in infos:
            assert AB_INFO.fullmatch(line), line
        depths = [int(line.split()[2]) for line in infos]
        assert depths == list(range(1, len(depths) + 1))  # one search, never restarted
        after = chess.Board()
        after.push_uci("e2e4")
        assert chess.Move.from_uci(lines[-1].split()[1]) in after.legal_moves


def test_ab_hash_option_and_new_game(ab_compiled) -> None:
    searcher = AlphaBetaSearcher("ab:material?hash=4")
    with serving(searcher) as (stdin, stdout):
        stdin.send("uci")
        assert "option name Hash type spin default 4 min 1 max 65536" in stdout.read_until("uciok")
        stdin.send("setoption name Hash value 1", "setoption name Hash value 0", "setoption name Nodes value 5", "isready")
        reply = stdout.read_until("readyok")
        assert len(reply) == 3 and all(line.startswith("info string setoption") for line in reply[:2])
        assert searcher.alphabeta.tt.nbytes <= 2**20  # the new size, allocated before readyok, not at the go
        stdin.send("position startpos", "go depth 4")
        assert stdout.read_until("bestmove")[-1].split()[1] in {move.uci() for move in chess.Board().legal_moves}
        used = int((searcher.alphabeta.tt[:, 1] != 0).sum())
        stdin.send("ucinewgame", "go depth 1")
        stdout.read_until("bestmove")
        assert int((searcher.alphabeta.tt[:, 1] != 0).sum()) < used  # the table was cleared first
        stdin.send(f"position fen {MATED}", "go depth 3")
        assert stdout.read_until("bestmove")[-2:] == ["info depth 0 score mate 0", "bestmove 0000"]


def test_ab_nnue_file_is_read_once(ab_compiled, tmp_path: Path) -> None:
    """An ``ab:NET`` engine searches with the NNUE it read at start: a new ``Hash`` rebuilds the table
    around the same net, even after the file is gone (retrained over, moved away)."""
    from alphazero.nets.nnue_file import random_nnue, save_nnue

    net = random_nnue("all", "perspective", l1=32, seed=4)
    path = tmp_path / "eval.nnue"
    save_nnue(path, net.arrays, net.meta)
    searcher = AlphaBetaSearcher(f"ab:{path}?nodes=2000&hash=1")
    path.unlink()
    with serving(searcher) as (stdin, stdout):
        stdin.send("setoption name Hash value 2", "position startpos", "go nodes 2000")
        reply = stdout.read_until("bestmove")
    assert not any(line.startswith("info string") for line in reply), reply
    assert chess.Move.from_uci(reply[-1].split()[1]) in chess.Board().legal_moves
    assert searcher.alphabeta.tt.nbytes == 2 * 2**20  # the table was rebuilt at the new size


# --------------------------------------------------------------------------------------------------
# What a GUI relies on: answers within milliseconds during any search, MultiPV, searchmoves, go mate,
# a bestmove for every go, and a clock that is never exceeded

NNUE_FILE = REPO / "docs" / "nets" / "nnue-all-128.npz"
MORPHY = "kbK5/pp6/1P6/8/8/8/8/R7 w - - 0 1"  # mate in two: 1.Ra6
LATENCY_GOAL_MS = 10  # what the engine is built for (docs/RESULTS.md has the figures)
LATENCY_BOUND_MS = 250  # what a loaded two-core CI machine is held to
BACKSTOP_S = 60  # python-chess waits without a deadline unless the limit has a time: with one it fails, not hangs


def _engine_argv(which: str, network_path: Path) -> list[str]:
    if which == "network":
        return [sys.executable, "-c", ENGINE_SCRIPT, str(network_path)]
    return [sys.executable, "-m", "commands.main", "uci", "--player", which]


@pytest.mark.parametrize("which", ["ab:material", f"ab:{NNUE_FILE}", "network"])
def test_stop_isready_and_ponderhit_answer_at_once_while_searching(
        ab_compiled, network_path: Path, which: str, record_property) -> None:
    """Raw protocol, as a GUI drives it: during ``go infinite`` (iterations of a second or more for
    alpha-beta) ``isready`` and ``stop`` are answered within milliseconds, and so is ``ponderhit``
    (with ``movetime 10`` after it, so the bestmove is due 10 ms later)."""
    raw = RawEngine(argv=_engine_argv(which, network_path))
    figures: dict[str, float] = {}
    try:
        raw.send("uci")
        raw.read_until("uciok", timeout=60)
        raw.send("setoption name Move Overhead value 0", "isready")
        raw.read_until("readyok", timeout=120)  # loads (or compiles) the kernels: before readyok
        deep = "info depth" if which == "network" else "info depth 7"
        raw.send("position startpos", "go infinite")
        raw.read_until(deep, timeout=60)  # it is searching (alpha-beta: in an iteration of a second or more)
        time.sleep(0.2)
        figures["isready"] = raw.latency_ms("isready", "readyok")
        figures["stop"] = raw.latency_ms("stop", "bestmove")
        raw.send("position startpos moves e2e4", "go ponder movetime 10")
        raw.read_until(deep, timeout=60)
        time.sleep(0.2)
        figures["isready_pondering"] = raw.latency_ms("isready", "readyok")
        figures["ponderhit_movetime_10"] = raw.latency_ms("ponderhit", "bestmove")
        after = chess.Board()
        after.push_uci("e2e4")
        raw.send("isready")
        raw.read_until("readyok")
    finally:
        raw.close()
    for name, value in figures.items():
        record_property(f"{name}_ms", round(value, 2))
    print(f"{which}: " + ", ".join(f"{name} {value:.1f} ms" for name, value in figures.items()))
    bounds = {"isready": LATENCY_BOUND_MS, "stop": LATENCY_BOUND_MS, "isready_pondering": LATENCY_BOUND_MS,
              "ponderhit_movetime_10": 10 + LATENCY_BOUND_MS}
    for name, bound in bounds.items():
        assert figures[name] < bound, (which, figures)


def test_multipv_through_python_chess(ab_engine: chess.engine.SimpleEngine, engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board(POSITIONS[2])
    for client, limit in [(ab_engine, chess.engine.Limit(depth=4, time=BACKSTOP_S)), (engine, chess.engine.Limit(nodes=64, time=BACKSTOP_S))]:
        lines = client.analyse(board, limit, multipv=3)
        assert len(lines) == 3
        firsts = [info["pv"][0] for info in lines]
        assert len(set(firsts)) == 3 and all(move in board.legal_moves for move in firsts)
        assert all("score" in info for info in lines) and [info["multipv"] for info in lines] == [1, 2, 3]
        for info in lines:
            assert_legal_line(board, info["pv"])
    # alpha-beta's lines come best first, and the first is the move it plays
    lines = ab_engine.analyse(board, chess.engine.Limit(depth=4, time=BACKSTOP_S), multipv=3)
    scores = [info["score"].relative.score(mate_score=100_000) for info in lines]
    assert scores == sorted(scores, reverse=True)
    assert ab_engine.play(board, chess.engine.Limit(depth=4, time=BACKSTOP_S)).move == lines[0]["pv"][0]


def test_searchmoves_and_go_mate(ab_engine: chess.engine.SimpleEngine) -> None:
    board = chess.Board()
    allowed = [chess.Move.from_uci("a2a3"), chess.Move.from_uci("h2h3")]
    assert ab_engine.play(board, chess.engine.Limit(depth=4, time=BACKSTOP_S), root_moves=allowed).move in allowed
    info = ab_engine.analyse(board, chess.engine.Limit(depth=3, time=BACKSTOP_S), root_moves=allowed[1:])
    assert info["pv"][0] == allowed[1]
    # in a mate in one, searchmoves without the mating move must play another
    quiet = [chess.Move.from_uci("g1f1"), chess.Move.from_uci("h2h3")]
    assert ab_engine.play(chess.Board(MATE_IN_ONE), chess.engine.Limit(depth=3, time=BACKSTOP_S), root_moves=quiet).move in quiet
    # go mate 2 on Morphy's problem: the mate, and the search stops once it is proven
    started = time.monotonic()
    info = ab_engine.analyse(chess.Board(MORPHY), chess.engine.Limit(mate=2, time=BACKSTOP_S))
    assert info["pv"][0] == chess.Move.from_uci("a1a6") and info["score"].relative.mate() == 2
    assert time.monotonic() - started < 20


def test_every_go_ends_in_a_bestmove(ab_compiled) -> None:
    """Malformed ``go`` lines are searched with what can be read (Stockfish 15.1 also skips unknown
    tokens); depth or nodes 0 answer at once (Stockfish 15.1 reads 0 as no limit and waits for stop)."""
    raw = RawEngine(argv=AB_ARGV)
    try:
        raw.send("uci")
        raw.read_until("uciok", timeout=60)
        raw.send("isready")
        raw.read_until("readyok", timeout=120)
        raw.send("position startpos moves e2e4")
        board = chess.Board()
        board.push_uci("e2e4")
        for line, note in [("go foo 5", "unknown token(s) 'foo 5'"), ("go depth 0", "read as depth 1"),
                           ("go nodes 0", "read as nodes 1"), ("go depth x", "'x' is not an integer"),
                           ("go movetime -5", "read as 0"), ("go nodes", "nothing follows"),
                           ("go mate 0", "mate 0 ignored"), ("go searchmoves e2e5 depth 2", "e2e5 not legal"),
                           ("go wtime 0 btime 0", None), ("go wtime -100 btime 50 winc -3", "read as 0")]:
            started = raw.send(line)
            reply = raw.read_until("bestmove", timeout=10)
            assert time.monotonic() - started < 5, line
            assert chess.Move.from_uci(reply[-1].split()[1]) in board.legal_moves, (line, reply)
            if note is not None:
                assert any(text.startswith("info string") and note in text for text in reply), (line, reply)
        raw.send("position startpos moves e2e4 e7e5 e1e8 g1f3", "go depth 2")  # an illegal move ends the list
        reply = raw.read_until("bestmove", timeout=10)
        assert any("'e1e8' is not legal" in text for text in reply)
        board.push_uci("e7e5")
        assert chess.Move.from_uci(reply[-1].split()[1]) in board.legal_moves  # White to move after 1.e4 e5
    finally:
        raw.close()


def test_clock_is_never_exceeded(ab_engine: chess.engine.SimpleEngine) -> None:
    """A short game of the engine against itself at 1 s + 0.01 s, the clocks kept from wall time as a
    GUI keeps them (``tools/uci_clock_match.py`` plays whole matches): no move may overdraw a clock."""
    from tools.uci_clock_match import play_game

    record = play_game(ab_engine, ab_engine, base=1.0, inc=0.01, opening=chess.Board(), max_plies=30)
    assert record["termination"] != "time forfeit" and record["min_left"] > 0, record
    # movestogo 1 on a short clock: all it may spend is the clock less the overhead
    started = time.monotonic()
    ab_engine.play(chess.Board(), chess.engine.Limit(white_clock=0.3, black_clock=0.3, remaining_moves=1))
    assert time.monotonic() - started < 0.3 + 0.2


# --------------------------------------------------------------------------------------------------
# --player with any other spec: choose_moves, then bestmove

HANGING_QUEEN = "4k3/8/8/3q4/4P3/8/8/4K3 w - - 0 1"  # exd5 is the only capture


def test_other_player_specs_answer_through_choose_moves() -> None:
    with serving(make_searcher("greedy")) as (stdin, stdout):
        stdin.send("uci")
        reply = stdout.read_until("uciok")
        assert "greedy" in reply[0] and [line for line in reply if line.startswith("option")] == [
            "option name Ponder type check default false"]
        stdin.send(f"position fen {HANGING_QUEEN}", "go depth 5")
        assert stdout.read_until("bestmove")[-1] == "bestmove e4d5"
        stdin.send(f"position fen {STALEMATED}", "go")
        assert stdout.read_until("bestmove")[-2:] == ["info depth 0 score cp 0", "bestmove 0000"]
        stdin.send("position startpos", "go infinite")
        assert not any(line.startswith("bestmove") for line in collect(stdout, 0.3))
        stdin.send("stop")
        assert chess.Move.from_uci(stdout.read_until("bestmove")[-1].split()[1]) in chess.Board().legal_moves
        stdin.send("setoption name Hash value 4", "setoption name Nodes value 3", "isready")
        reply = stdout.read_until("readyok")
        assert len(reply) == 2 and "unknown option 'Nodes'" in reply[0]


def test_cli_uci_wants_one_source_and_a_valid_spec(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    from commands.main import main

    for argv in (["uci"], ["uci", "--player", "greedy", "--checkpoint", "net.pt"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
    capsys.readouterr()
    for spec, fault in [("ab:nonsense", "unknown evaluation 'nonsense'"), ("frob:x", "unknown kind 'frob'"),
                        ("ab:material?depth=x", "depth='x'")]:
        assert main(["uci", "--player", spec]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("alphazero uci: error: ") and fault in err[0], err
    with pytest.raises(InputError, match="random"):
        run_uci_player("random?x=1")
    # a device this machine does not have is the user's to fix, said before a network is loaded
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for argv, fault in [(["--player", "greedy", "--device", "banana"], "--device 'banana': expected one of cpu, cuda, auto"),
                        (["--checkpoint", "missing.pt", "--device", "cuda"], "--device cuda: this machine has no CUDA GPU")]:
        assert main(["uci", *argv]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("alphazero uci: error: ") and fault in err[0], err
