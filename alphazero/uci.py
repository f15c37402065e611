"""UCI front-end: ``alphazero uci --checkpoint PATH`` speaks the Universal Chess Interface on stdin/stdout.

``run_uci(path)`` loads a network (a network file, or a run directory meaning its current best) and
serves UCI until ``quit`` or end of input. ``UCIEngine`` does the work on any pair of text streams,
so tests (and other programs) can drive it in-process too.

Commands
========

``uci``, ``debug on|off``, ``isready`` (answered at once, also while searching), ``setoption``,
``register`` (ignored), ``ucinewgame`` (drops the search tree), ``position startpos|fen FEN [moves
...]``, ``go``, ``stop``, ``ponderhit``, ``quit``. A line whose first token is unknown is searched for
a known command further on, as the UCI spec asks ("joho debug on" switches debug on); a line with no
known command at all, or with bad arguments, is answered with ``info string <explanation>`` and
otherwise ignored: a bad ``position`` keeps the previous position, a bad ``go`` starts no search (so
it prints no ``bestmove``), and the engine keeps serving.

Options
=======

================ ======== ======== ==============================================================
name             type     default  meaning
================ ======== ======== ==============================================================
``Nodes``        spin     400      simulations of a ``go`` with no limit at all
``CPuct``        string   1.25     PUCT exploration constant ``c_puct`` (a float; UCI has no float type)
``Threads``      spin     1        torch intra-op threads
``MoveOverhead`` spin     50       milliseconds kept back from every timed search (GUI and pipe lag)
``Ponder``       check    false    accepted (pondering works whenever the GUI sends ``go ponder``)
================ ======== ======== ==============================================================

``Hash``, ``UCI_AnalyseMode`` and ``UCI_ShowWDL`` are accepted and ignored; ``MoveOverhead`` is also
accepted as ``Move Overhead``. Any other name gets an ``info string``.

Search
======

Every ``go`` runs in a background thread, so ``stop``, ``isready``, ``ponderhit`` and ``quit`` are read
while it searches (a second ``go`` meanwhile gets an ``info string``). The thread calls
``MCTS.search`` on one ``GameTree`` in chunks of simulations sized to take about 50 ms each and
checks its limits and the stop flag between chunks. Limits (several may be given; the first reached
ends the search):

* ``nodes N``: N new simulations (a reused subtree's earlier visits do not count).
* ``movetime MS``: ``MS - MoveOverhead`` milliseconds.
* ``wtime/btime/winc/binc/movestogo``: for the side to move,
  ``min(remaining / (movestogo or 30) + 0.75 * increment - MoveOverhead, remaining / 3)``
  (see ``time_budget``); a timed search always runs at least ``MIN_SIMULATIONS`` simulations.
* ``depth D``: no depth-first search here, so depth maps to simulations: ``2 ** (D + 3)``
  (depth 1 -> 16, depth 5 -> 256, depth 10 -> 8192), see ``depth_to_nodes``.
* ``infinite`` / ``ponder``: until ``stop`` (``ponderhit`` turns a ponder search into a timed one
  whose clock starts at the ``ponderhit``). ``mate`` and ``searchmoves`` are not supported: an
  ``info string`` says so and the rest of the command is obeyed.
* none of these: ``Nodes`` simulations.

The tree is also capped at ``MAX_TREE_VISITS`` root visits (memory); an infinite search that reaches
it idles until ``stop``.

While searching the engine prints, about every ``INFO_INTERVAL`` seconds and once more before
``bestmove``::

    info depth D seldepth S nodes N nps X score cp C time T pv m1 m2 ...

``depth`` is the length of the principal variation (the most-visited line, ``principal_variation``),
at least 1; ``seldepth`` is the deepest ply the search handed to the network; ``nodes`` counts this
search's simulations; ``score cp`` is ``value_to_centipawns`` of the root's mean value (side to move's
view), or ``score mate K`` when the principal variation ends in checkmate and the root value agrees
on who wins. ``bestmove`` is the most visited root move (ties go to the higher prior), with
``ponder`` the reply the principal variation expects; if no simulation finished (``stop`` came first)
it is the highest-prior move. A position without legal moves gets ``bestmove 0000``; one already
drawn by rule (insufficient material, fifty moves, threefold repetition) but with legal moves gets
the raw policy's move.

Between moves of one game the tree is reused: when the new position is the last searched position
plus moves, the subtree under those moves becomes the new root (``debug on`` reports it).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable

import chess
import numpy as np
import torch

from alphazero import __version__
from alphazero.encoding import board_from_fen
from alphazero.evaluator import NetworkEvaluator
from alphazero.game import terminal_status
from alphazero.mcts import MCTS, GameTree, Node, SearchConfig, principal_variation, value_to_centipawns
from alphazero.network import PolicyValueNet, load_network
from alphazero.players import resolve_network_path

ENGINE_NAME = f"AlphaZero-chess {__version__}"
ENGINE_AUTHOR = "the alphazero-chess authors"

DEFAULT_NODES = 400
DEFAULT_C_PUCT = SearchConfig().c_puct
DEFAULT_THREADS = 1
MAX_THREADS = max(1, os.cpu_count() or 1)
DEFAULT_MOVE_OVERHEAD_MS = 50
MAX_NODES = 1_000_000_000

MIN_SIMULATIONS = 4  # a timed search runs at least this many (a move is never a pure guess)
DEFAULT_MOVES_TO_GO = 30
INCREMENT_SHARE = 0.75
CHUNK_SECONDS = 0.05  # aim of one search chunk: the reaction time to stop / deadlines
MAX_CHUNK = 2048
INFO_INTERVAL = 0.5  # seconds between periodic info lines
PV_LENGTH = 30
MAX_TREE_VISITS = 1_000_000  # ~ a few GB of python objects; bounds an endless analysis

IGNORED_OPTIONS = {"hash", "ucianalysemode", "ucishowwdl"}

GO_INT_PARAMS = ("wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate", "movetime")
GO_FLAGS = ("infinite", "ponder")
GO_KEYWORDS = set(GO_INT_PARAMS) | set(GO_FLAGS) | {"searchmoves"}


# --------------------------------------------------------------------------------------------------
# Parsing and time management (pure functions)


@dataclass
class GoParams:
    """The arguments of one ``go`` command (times in milliseconds, as sent)."""

    wtime: int | None = None
    btime: int | None = None
    winc: int | None = None
    binc: int | None = None
    movestogo: int | None = None
    depth: int | None = None
    nodes: int | None = None
    mate: int | None = None
    movetime: int | None = None
    infinite: bool = False
    ponder: bool = False
    searchmoves: list[str] = field(default_factory=list)


def parse_go(args: list[str]) -> GoParams:
    """The tokens after ``go`` -> ``GoParams``; ``ValueError`` explaining the first bad token."""
    params = GoParams()
    i = 0
    while i < len(args):
        token = args[i].lower()
        if token in GO_FLAGS:
            setattr(params, token, True)
            i += 1
        elif token in GO_INT_PARAMS:
            if i + 1 >= len(args):
                raise ValueError(f"go: {token} needs a number")
            raw = args[i + 1]
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"go: {token} {raw!r} is not an integer") from None
            if token in ("depth", "nodes", "movestogo", "mate") and value < 1:
                raise ValueError(f"go: {token} must be at least 1, got {value}")
            if token in ("winc", "binc", "movetime") and value < 0:
                raise ValueError(f"go: {token} must not be negative, got {value}")
            setattr(params, token, value)  # a negative wtime/btime (a GUI behind on the clock) is kept
            i += 2
        elif token == "searchmoves":
            i += 1
            while i < len(args) and args[i].lower() not in GO_KEYWORDS:
                params.searchmoves.append(args[i])
                i += 1
        else:
            raise ValueError(f"go: unknown parameter {args[i]!r}")
    return params


def time_budget(params: GoParams, turn: chess.Color, move_overhead_ms: float) -> float | None:
    """Seconds to think for ``turn`` under ``params`` (``None``: no time limit).

    ``movetime`` gives ``movetime - overhead``; a clock gives
    ``min(remaining / (movestogo or 30) + 0.75 * increment - overhead, remaining / 3)``; with both
    the smaller wins. Never below zero (the minimum simulations still run).
    """
    budgets: list[float] = []
    if params.movetime is not None:
        budgets.append(params.movetime - move_overhead_ms)
    remaining = params.wtime if turn == chess.WHITE else params.btime
    if remaining is not None:
        increment = (params.winc if turn == chess.WHITE else params.binc) or 0
        moves_to_go = params.movestogo or DEFAULT_MOVES_TO_GO
        remaining = max(0, remaining)
        share = remaining / moves_to_go + INCREMENT_SHARE * increment - move_overhead_ms
        budgets.append(min(share, remaining / 3))
    if not budgets:
        return None
    return max(0.0, min(budgets)) / 1000.0


def depth_to_nodes(depth: int) -> int:
    """Simulations standing in for ``go depth D``: ``2 ** (D + 3)``, capped at ``MAX_NODES``."""
    return min(MAX_NODES, 2 ** min(depth + 3, 40))


def parse_position(args: list[str]) -> chess.Board:
    """The tokens after ``position`` -> the board (with its moves on the stack); ``ValueError`` if bad."""
    if not args:
        raise ValueError("position: expected 'startpos' or 'fen <FEN>'")
    kind = args[0].lower()
    if kind == "startpos":
        board = chess.Board()
        rest = args[1:]
    elif kind == "fen":
        fields: list[str] = []
        i = 1
        while i < len(args) and args[i].lower() != "moves":
            fields.append(args[i])
            i += 1
        if not fields:
            raise ValueError("position fen: missing FEN")
        if len(fields) > 6:
            raise ValueError(f"position fen: too many FEN fields in {' '.join(fields)!r}")
        board = board_from_fen(" ".join(fields))
        rest = args[i:]
    else:
        raise ValueError(f"position: expected 'startpos' or 'fen', got {args[0]!r}")
    if not rest:
        return board
    if rest[0].lower() != "moves":
        raise ValueError(f"position: expected 'moves', got {rest[0]!r}")
    for ply, token in enumerate(rest[1:], start=1):
        try:
            move = board.parse_uci(token)
        except ValueError:
            raise ValueError(f"position: move {ply} {token!r} is not legal in {board.fen()}") from None
        if not move:
            raise ValueError(f"position: move {ply} is a null move (0000)")
        board.push(move)
    return board


# --------------------------------------------------------------------------------------------------
# The engine


class _DepthTracker:
    """An evaluator wrapper that remembers the deepest leaf (move-stack length) it was shown."""

    def __init__(self, inner: NetworkEvaluator) -> None:
        self.inner = inner
        self.max_stack = 0

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> Any:
        depth = len(board.move_stack)
        if depth > self.max_stack:
            self.max_stack = depth
        return self.inner.prepare(board, moves)

    def evaluate(self, requests: list[Any]) -> tuple[list[np.ndarray], np.ndarray]:
        return self.inner.evaluate(requests)


@dataclass
class _Job:
    """One running search. ``deadline``/``infinite``/``ponder`` change under the engine lock (ponderhit)."""

    tree: GameTree
    params: GoParams
    game: int
    start: float
    nodes: int | None
    deadline: float | None
    infinite: bool
    ponder: bool
    c_puct: float
    threads: int
    overhead_ms: float
    stop: threading.Event = field(default_factory=threading.Event)


class UCIEngine:
    """A UCI engine around one network; ``run()`` serves commands from ``stdin`` until ``quit`` or EOF.

    ``network`` is a ``PolicyValueNet`` or a path for ``resolve_network_path`` (a network file or a run
    directory). Every line written to ``stdout`` is flushed at once; writes from the search thread
    and the command loop never interleave.
    """

    def __init__(
        self,
        network: PolicyValueNet | str | os.PathLike,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
        device: str = "cpu",
    ) -> None:
        if not isinstance(network, PolicyValueNet):
            network = load_network(resolve_network_path(os.fspath(network)))
        self.evaluator = NetworkEvaluator(network, device=device)
        self._tracker = _DepthTracker(self.evaluator)
        self.stdin = stdin if stdin is not None else sys.stdin
        self.stdout = stdout if stdout is not None else sys.stdout
        self.nodes = DEFAULT_NODES
        self.c_puct = DEFAULT_C_PUCT
        self.threads = DEFAULT_THREADS
        self.move_overhead_ms = DEFAULT_MOVE_OVERHEAD_MS
        self.ponder = False
        self.debug = False
        self.board = chess.Board()
        self._lock = threading.Lock()  # board, tree, job, game counter
        self._out_lock = threading.Lock()
        self._tree: GameTree | None = None  # last searched tree, for reuse
        self._game = 0
        self._job: _Job | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        torch.set_num_threads(self.threads)
        self._commands: dict[str, Callable[[list[str]], bool | None]] = {
            "uci": self._cmd_uci,
            "debug": self._cmd_debug,
            "isready": self._cmd_isready,
            "setoption": self._cmd_setoption,
            "register": lambda args: None,
            "ucinewgame": self._cmd_ucinewgame,
            "position": self._cmd_position,
            "go": self._cmd_go,
            "stop": self._cmd_stop,
            "ponderhit": self._cmd_ponderhit,
            "quit": self._cmd_quit,
        }

    # -- I/O ------------------------------------------------------------------------------------

    def send(self, line: str) -> None:
        """Write one line and flush (a closed output ends the session quietly)."""
        with self._out_lock:
            if self._closed:
                return
            try:
                self.stdout.write(line + "\n")
                self.stdout.flush()
            except (OSError, ValueError):
                self._closed = True

    def info_string(self, text: str) -> None:
        self.send("info string " + " ".join(text.split()))

    def run(self) -> int:
        """Serve until ``quit`` or end of input; stops any search first. Returns the exit status (0)."""
        while not self._closed:
            try:
                line = self.stdin.readline()
            except (OSError, ValueError):
                break
            if not line:
                break
            if not self.handle(line):
                break
        self._stop_and_join()
        return 0

    def handle(self, line: str) -> bool:
        """Execute one input line; ``False`` once the engine should exit (``quit``)."""
        tokens = line.split()
        if not tokens:
            return True
        for index, token in enumerate(tokens):
            command = self._commands.get(token.lower())
            if command is None:
                continue
            if index:
                self.info_string(f"ignored unknown token(s) {' '.join(tokens[:index])!r}")
            try:
                return command(tokens[index + 1 :]) is not False
            except Exception as error:  # a bug in one command must not end the session
                self.info_string(f"error in {token!r}: {type(error).__name__}: {error}")
                return True
        self.info_string(f"unknown command {line.strip()!r}")
        return True

    # -- commands -------------------------------------------------------------------------------

    def _cmd_uci(self, args: list[str]) -> None:
        self.send(f"id name {ENGINE_NAME}")
        self.send(f"id author {ENGINE_AUTHOR}")
        self.send(f"option name Nodes type spin default {DEFAULT_NODES} min 1 max {MAX_NODES}")
        self.send(f"option name CPuct type string default {DEFAULT_C_PUCT}")
        self.send(f"option name Threads type spin default {DEFAULT_THREADS} min 1 max {MAX_THREADS}")
        self.send(f"option name MoveOverhead type spin default {DEFAULT_MOVE_OVERHEAD_MS} min 0 max 10000")
        self.send("option name Ponder type check default false")
        self.send("uciok")

    def _cmd_debug(self, args: list[str]) -> None:
        if len(args) != 1 or args[0].lower() not in ("on", "off"):
            self.info_string("debug: expected 'debug on' or 'debug off'")
            return
        self.debug = args[0].lower() == "on"

    def _cmd_isready(self, args: list[str]) -> None:
        self.send("readyok")

    def _cmd_setoption(self, args: list[str]) -> None:
        lowered = [a.lower() for a in args]
        if not args or lowered[0] != "name" or len(args) < 2 or lowered[1] == "value":
            self.info_string("setoption: expected 'setoption name <id> [value <x>]'")
            return
        if "value" in lowered:
            at = lowered.index("value")
            name, value = " ".join(args[1:at]), " ".join(args[at + 1 :])
        else:
            name, value = " ".join(args[1:]), ""
        key = name.replace(" ", "").lower()
        try:
            if key == "nodes":
                self.nodes = _int_in(value, 1, MAX_NODES, name)
            elif key == "cpuct":
                try:
                    c_puct = float(value)
                except ValueError:
                    raise ValueError(f"{name} value {value!r} is not a number") from None
                if not 0 < c_puct < 1e6:
                    raise ValueError(f"{name} must be positive, got {value!r}")
                self.c_puct = c_puct
            elif key == "threads":
                self.threads = _int_in(value, 1, MAX_THREADS, name)
                torch.set_num_threads(self.threads)
            elif key == "moveoverhead":
                self.move_overhead_ms = _int_in(value, 0, 10000, name)
            elif key == "ponder":
                if value.lower() not in ("true", "false"):
                    raise ValueError(f"{name} value must be true or false, got {value!r}")
                self.ponder = value.lower() == "true"
            elif key in IGNORED_OPTIONS:
                pass
            else:
                self.info_string(f"setoption: unknown option {name!r} (known: Nodes, CPuct, Threads, MoveOverhead, Ponder)")
        except ValueError as error:
            self.info_string(f"setoption: {error}")

    def _cmd_ucinewgame(self, args: list[str]) -> None:
        with self._lock:
            self._tree = None
            self._game += 1  # a search still running will not hand its tree on

    def _cmd_position(self, args: list[str]) -> None:
        try:
            board = parse_position(args)
        except ValueError as error:
            self.info_string(f"{error}; position unchanged")
            return
        with self._lock:
            self.board = board

    def _cmd_go(self, args: list[str]) -> None:
        try:
            params = parse_go(args)
        except ValueError as error:
            self.info_string(f"{error}; no search started")
            return
        start = time.monotonic()
        with self._lock:
            job, thread = self._job, self._thread
        if job is not None and job.stop.is_set() and thread is not None:
            thread.join(timeout=30)  # told to stop, about to print its bestmove: let it finish first
        with self._lock:
            if self._job is not None:
                self.info_string("go: a search is already running (send stop first); ignored")
                return
            board = self.board.copy()
            tree, reused = self._tree_for(board)
            self._tree = None
            job = self._make_job(tree, params, start)
            self._job = job
        if params.mate is not None:
            self.info_string("go mate is not supported; searching with the other limits")
        if params.searchmoves:
            self.info_string("go searchmoves is not supported; searching all moves")
        if self.debug:
            if reused:
                self.info_string(f"reused tree with {tree.root.visits} visits")
            budget = None if job.deadline is None else round((job.deadline - start) * 1000)
            self.info_string(f"search plan: nodes {job.nodes} time budget ms {budget} infinite {job.infinite} ponder {job.ponder}")
        thread = threading.Thread(target=self._search_thread, args=(job,), name="uci-search", daemon=True)
        self._thread = thread
        thread.start()

    def _cmd_stop(self, args: list[str]) -> None:
        with self._lock:
            job = self._job
        if job is not None:
            job.stop.set()

    def _cmd_ponderhit(self, args: list[str]) -> None:
        with self._lock:
            job = self._job
            if job is None or not job.ponder:
                return
            job.ponder = False
            job.infinite = job.params.infinite
            budget = time_budget(job.params, job.tree.board.turn, job.overhead_ms)
            job.deadline = None if budget is None else time.monotonic() + budget

    def _cmd_quit(self, args: list[str]) -> bool:
        return False

    # -- search ---------------------------------------------------------------------------------

    def _tree_for(self, board: chess.Board) -> tuple[GameTree, bool]:
        """A tree for ``board``: the last tree advanced along the new moves when it is an ancestor."""
        old = self._tree
        if old is not None:
            old_stack, new_stack = old.board.move_stack, board.move_stack
            if (
                len(new_stack) >= len(old_stack)
                and new_stack[: len(old_stack)] == old_stack
                and old.board.root() == board.root()
            ):
                for move in new_stack[len(old_stack) :]:
                    old.advance(move, reuse=True)
                if old.board == board and old.root.terminal_value is None:
                    return old, old.root.priors is not None
        return GameTree(board, seed=0), False

    def _make_job(self, tree: GameTree, params: GoParams, start: float) -> _Job:
        budget = time_budget(params, tree.board.turn, self.move_overhead_ms)
        nodes = params.nodes
        if params.depth is not None:
            nodes = min(nodes or MAX_NODES, depth_to_nodes(params.depth))
        if nodes is None and budget is None and not params.infinite:
            nodes = self.nodes  # also what a ponder search obeys after ponderhit
        return _Job(
            tree=tree,
            params=params,
            game=self._game,
            start=start,
            nodes=nodes,
            deadline=None if budget is None or params.ponder else start + budget,
            infinite=params.infinite,
            ponder=params.ponder,
            c_puct=self.c_puct,
            threads=self.threads,
            overhead_ms=self.move_overhead_ms,
        )

    def _stop_and_join(self) -> None:
        with self._lock:
            job, thread = self._job, self._thread
        if job is not None:
            job.stop.set()
        if thread is not None:
            thread.join(timeout=30)

    def _unbounded(self, job: _Job) -> bool:
        """True while the search must go on until stop (infinite, or pondering before ponderhit)."""
        with self._lock:
            return job.infinite or job.ponder

    def _wait_for_release(self, job: _Job) -> None:
        while self._unbounded(job) and not job.stop.wait(0.02):
            pass

    def _search_thread(self, job: _Job) -> None:
        lines: list[str] = []
        move: chess.Move | None = None
        try:
            torch.set_num_threads(job.threads)
            move, lines = self._search(job)
        except Exception as error:  # never leave the GUI without a bestmove
            lines = [f"info string search failed: {type(error).__name__}: {' '.join(str(error).split())}"]
            moves = list(job.tree.board.legal_moves)
            move = moves[0] if moves else None
            self._wait_for_release(job)
        ponder_move = None
        if move is not None and job.tree.root.priors is not None:
            pv = _principal_variation(job.tree.root, max_length=2)
            if len(pv) == 2 and pv[0] == move:
                ponder_move = pv[1]
        with self._lock:
            if job.game == self._game and job.tree.root.terminal_value is None:
                self._tree = job.tree
            self._job = None
        best = "0000" if move is None else move.uci()
        lines.append(f"bestmove {best}" + (f" ponder {ponder_move.uci()}" if ponder_move else ""))
        for line in lines:
            self.send(line)

    def _search(self, job: _Job) -> tuple[chess.Move | None, list[str]]:
        """Run the search of ``job``; returns (best move or None, lines to print before bestmove)."""
        tree = job.tree
        board = tree.board
        moves = list(board.legal_moves)
        if not moves:
            self._wait_for_release(job)
            score = "mate 0" if board.is_check() else "cp 0"
            return None, [f"info depth 0 score {score}"]
        status = terminal_status(board, moves)
        if status is not None:  # drawn by rule, yet the GUI wants a move: the raw policy's
            _, priors, _ = self.evaluator.policy([board])[0]
            move = moves[int(np.argmax(priors))]
            self._wait_for_release(job)
            return move, [f"info string position is drawn ({status[1]}); move from the raw policy",
                          f"info depth 1 seldepth 1 nodes 0 score cp 0 time {self._ms(job)} pv {move.uci()}"]

        mcts = MCTS(self._tracker, SearchConfig(num_simulations=1, c_puct=job.c_puct))
        root_stack = len(board.move_stack)
        self._tracker.max_stack = root_stack
        searchable = len(moves) > 1
        sims = 0
        chunk = 4
        search_start = time.monotonic()
        last_info = search_start
        while not job.stop.is_set():
            with self._lock:
                deadline, unbounded = job.deadline, job.infinite or job.ponder
            now = time.monotonic()
            expanded = tree.root.priors is not None
            full = tree.root.visits >= MAX_TREE_VISITS
            if not unbounded:
                if job.nodes is not None and sims >= job.nodes:
                    break
                if deadline is not None and now >= deadline and sims >= MIN_SIMULATIONS:
                    break
                if expanded and (not searchable or full):
                    break
            elif expanded and (not searchable or full):
                job.stop.wait(0.02)
                continue
            size = chunk
            if not unbounded:
                if job.nodes is not None:
                    size = min(size, job.nodes - sims)
                if deadline is not None and sims >= MIN_SIMULATIONS:
                    rate = sims / max(now - search_start, 1e-6)
                    size = min(size, max(1, int(rate * (deadline - now))))
            mcts.search([tree], add_noise=False, temperature=0.0, num_simulations=max(1, size))
            if searchable:
                sims += max(1, size)
            now = time.monotonic()
            rate = sims / max(now - search_start, 1e-6)
            chunk = int(min(MAX_CHUNK, max(1, rate * CHUNK_SECONDS)))
            if now - last_info >= INFO_INTERVAL:
                self.send(self._info_line(job, sims, now - search_start, root_stack))
                last_info = now
        self._wait_for_release(job)
        move = self._best_move(tree, board, moves)
        lines = []
        if tree.root.priors is not None:
            lines.append(self._info_line(job, sims, time.monotonic() - search_start, root_stack))
        return move, lines

    def _best_move(self, tree: GameTree, board: chess.Board, moves: list[chess.Move]) -> chess.Move:
        root = tree.root
        if root.priors is not None:
            return root.moves[_root_choice(root)]
        _, priors, _ = self.evaluator.policy([board])[0]  # stopped before the root was expanded
        return moves[int(np.argmax(priors))]

    def _info_line(self, job: _Job, sims: int, elapsed: float, root_stack: int) -> str:
        tree = job.tree
        root = tree.root
        pv = _principal_variation(root, max_length=PV_LENGTH)
        depth = max(1, len(pv))
        seldepth = max(depth, self._tracker.max_stack - root_stack)
        value = float(np.clip(root.value, -1.0, 1.0))
        score = f"cp {value_to_centipawns(value)}"
        if pv:
            line = tree.board.copy()
            for move in pv:
                line.push(move)
            if line.is_checkmate():
                if len(pv) % 2 == 1 and value > 0:
                    score = f"mate {(len(pv) + 1) // 2}"
                elif len(pv) % 2 == 0 and value < 0:
                    score = f"mate -{len(pv) // 2}"
        nps = int(sims / elapsed) if elapsed > 0 else 0
        text = f"info depth {depth} seldepth {seldepth} nodes {sims} nps {nps} score {score} time {self._ms(job)}"
        if pv:
            text += " pv " + " ".join(move.uci() for move in pv)
        return text

    @staticmethod
    def _ms(job: _Job) -> int:
        return int(round((time.monotonic() - job.start) * 1000))


def _root_choice(root: Node) -> int:
    """Index of the move to play from an expanded root: most visits, ties (or no visits) to the higher prior."""
    return int(np.argmax(np.asarray(root.child_visits) + 0.5 * root.priors))  # priors lie in [0, 1]: they only break ties


def _principal_variation(root: Node, max_length: int) -> list[chess.Move]:
    """The bestmove followed by the most-visited line below it (``principal_variation``)."""
    if root.priors is None or not root.moves:
        return []
    index = _root_choice(root)
    child = root.children[index] if root.children else None
    rest = principal_variation(child, max_length - 1) if child is not None and max_length > 1 else []
    return [root.moves[index], *rest]


def _int_in(value: str, low: int, high: int, name: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} value {value!r} is not an integer") from None
    if not low <= number <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {number}")
    return number


def run_uci(
    checkpoint_path: str,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    device: str = "cpu",
) -> int:
    """Load the network at ``checkpoint_path`` (file or run directory) and serve UCI; the exit status.

    A missing or unreadable network prints one line to stderr and returns 2.
    """
    try:
        net = load_network(resolve_network_path(checkpoint_path))
    except ValueError as error:
        print(f"alphazero uci: error: {error}", file=sys.stderr)
        return 2
    return UCIEngine(net, stdin, stdout, device=device).run()
