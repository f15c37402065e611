"""Tests for the UCI front-end (``alphazero.uci``).

The engine is driven three ways: as a subprocess through python-chess's UCI client (the client is
the protocol oracle: it rejects malformed replies and illegal best moves), as a subprocess fed raw
text lines (malformed input), and in-process through blocking stream stand-ins (tree reuse,
isready/stop while searching, ponderhit). python-chess decides legality everywhere. A tiny random
network keeps every search cheap; its moves are bad but must always be legal.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import chess
import chess.engine
import pytest
import torch

from alphazero.network import NetworkConfig, PolicyValueNet, save_network
from alphazero.uci import (
    DEFAULT_MOVE_OVERHEAD_MS,
    GoParams,
    UCIEngine,
    depth_to_nodes,
    parse_go,
    parse_position,
    run_uci,
    time_budget,
)

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)
STOCKFISH = "/usr/games/stockfish"
ENGINE_SCRIPT = "import sys; from alphazero.uci import run_uci; sys.exit(run_uci(sys.argv[1]))"

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


@pytest.mark.parametrize("args", ["nodes abc", "nodes", "nodes 0", "movetime -5", "depth 0", "frob 3", "nodes 1.5"])
def test_parse_go_rejects_malformed(args: str) -> None:
    with pytest.raises(ValueError):
        parse_go(args.split())


def test_time_budget_formula() -> None:
    overhead = 50
    # remaining / 30 + 0.75 * inc - overhead
    params = GoParams(wtime=60_000, btime=10_000, winc=1000, binc=0)
    assert time_budget(params, chess.WHITE, overhead) == pytest.approx((2000 + 750 - 50) / 1000)
    assert time_budget(params, chess.BLACK, overhead) == pytest.approx((10_000 / 30 - 50) / 1000)
    # movestogo replaces 30; the cap at a third of the clock applies
    assert time_budget(GoParams(wtime=9000, movestogo=1), chess.WHITE, overhead) == pytest.approx(3.0)
    assert time_budget(GoParams(wtime=9000, movestogo=3), chess.WHITE, overhead) == pytest.approx(2.95)
    # movetime minus overhead; with a clock too, the smaller wins
    assert time_budget(GoParams(movetime=500), chess.BLACK, overhead) == pytest.approx(0.45)
    assert time_budget(GoParams(movetime=5000, btime=3000), chess.BLACK, overhead) == pytest.approx(0.05)
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
    for bad in ["", "startpos e2e4", "startpos moves e2e5", "fen", "fen not-a-fen", "banana",
                "startpos moves 0000", f"fen {MATED} moves h8g8", "fen 8/8/8/8/8/8/8/8 w - - 0 1"]:
        with pytest.raises(ValueError):
            parse_position(bad.split())


def test_run_uci_missing_network(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_uci(str(tmp_path / "missing.pt")) == 2
    assert "missing.pt" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# Through python-chess's UCI client


def test_identifies_itself(engine: chess.engine.SimpleEngine) -> None:
    assert "AlphaZero" in engine.id["name"]
    assert engine.id.get("author")
    for option in ("Nodes", "CPuct", "Threads", "MoveOverhead"):
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
    try:
        time.sleep(1.3)
        # still searching after 1.3 s (no bestmove yet), and periodic info lines arrived meanwhile
        info = analysis.info
        assert info.get("nodes", 0) > 0 and "score" in info and info["pv"][0] in board.legal_moves
        assert info["time"] >= 0.9  # a periodic line from late in the search: it did not end early
        nodes_before = info["nodes"]
    finally:
        stopped = time.monotonic()
        analysis.stop()
    best = analysis.wait()
    assert time.monotonic() - stopped < 1.5
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
    """The engine as a subprocess with a reader thread, so reads can time out."""

    def __init__(self, network_path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ENGINE_SCRIPT, str(network_path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, cwd=str(REPO), env=_env(),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, *lines: str) -> None:
        for line in lines:
            self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read_until(self, prefix: str, timeout: float = 20) -> list[str]:
        out, deadline = [], time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"engine exited; output so far: {out}"
            out.append(line)
            if line.startswith(prefix):
                return out

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
        bad = ["position fen not-a-fen", "position startpos moves e2e5", "go nodes abc", "frobnicate",
               "setoption name", "position", "position startpos junk", "go nodes", "setoption name Nodes value -3",
               "setoption name Foo value 1", "debug maybe"]
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
        # an illegal move late in the list applies none of the list; the brief's order: bad lines, then e2e4
        raw.send("position startpos moves e2e4 e7e5 e1e8", "go nodes 5")
        reply = raw.read_until("bestmove")
        assert reply[0].startswith("info string") and "e1e8" in reply[0]
        assert chess.Move.from_uci(reply[-1].split()[1]) in board.legal_moves  # still after e2e4 alone
        raw.send("position fen not-a-fen", "go nodes abc", "position startpos moves e2e4", "go nodes 20")
        reply = raw.read_until("bestmove")
        assert sum(line.startswith("info string") for line in reply) == 2
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
        raw.send("position startpos", "go infinite")
        time.sleep(0.3)
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


@pytest.fixture
def inproc(net: PolicyValueNet):
    stdin, stdout = LineInput(), LineOutput()
    engine = UCIEngine(net, stdin, stdout)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(engine.run()), daemon=True)
    thread.start()
    try:
        yield stdin, stdout
    finally:
        stdin.send("quit")
        thread.join(timeout=10)
        assert not thread.is_alive() and codes == [0]


def test_isready_and_go_while_searching(inproc) -> None:
    stdin, stdout = inproc
    stdin.send("position startpos moves d2d4", "go infinite")
    time.sleep(0.2)
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
    stdin.send("go infinite")
    time.sleep(0.1)
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
    assert 0.1 <= time.monotonic() - hit < 2
    assert chess.Move.from_uci(reply[-1].split()[1]) in chess.Board().legal_moves


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
