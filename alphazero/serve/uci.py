"""UCI engine: ``alphazero uci --checkpoint PATH | --player SPEC`` on stdin/stdout.

Owns the engine's state and threads: the command loop, the current position, the settings and the
one search thread. What a ``go`` searches, and how, belongs to a searcher (``alphazero.serve.searchers``:
the network with the tree search, alpha-beta, any other player, each with its option table); the
grammar and the replies' text to ``alphazero.serve.uci_protocol``; the ``go`` arguments and stop
rules to ``alphazero.serve.uci_limits`` (both testable without threads). Knows nothing of how a
searcher finds its move.

``run_uci(path)`` serves a network (a network file, or a run directory meaning its current best)
with the tree search; ``run_uci_player(spec)`` serves any player spec of ``alphazero.judge.players``
(``ab:...`` with iterative deepening and ``info`` lines, any other through ``choose_moves``).
``UCIEngine`` does the work on any pair of text streams, so tests (and other programs) can drive
it in-process too.

Commands
========

``uci``, ``debug on|off``, ``isready`` (answered at once while searching; otherwise after the
searcher's ``ready``: a new ``Hash`` allocated, the kernels loaded, so the next ``go`` starts
searching at once), ``setoption`` (``ready`` too, when no search runs), ``register`` (ignored),
``ucinewgame`` (drops the search tree or the transposition table), ``position``, ``go``, ``stop``,
``ponderhit``, ``quit``. A line with no known command, or with bad arguments, is answered with
``info string <explanation>`` and otherwise ignored: a bad ``position`` keeps the previous position
(a bad move in its list ends the list: the position before it stands, as in Stockfish), and the
engine keeps serving. Every ``go`` ends in a ``bestmove``: what it cannot read is skipped with an
``info string`` (``alphazero.serve.uci_limits``). ``searchmoves`` moves that are not legal are
dropped (all of them: the search takes every move); where a searcher does not support
``searchmoves`` or ``mate`` (the tree search, other players) an ``info string`` says so and the rest
of the command is obeyed.

Every ``go`` runs in a background thread, so ``stop``, ``isready``, ``ponderhit`` and ``quit`` are read
while it searches (a second ``go`` meanwhile gets an ``info string``). With ``infinite`` or
``ponder`` no ``bestmove`` is sent before ``stop`` (or ``ponderhit``), even when the search has
nothing left to do. A position without legal moves gets ``info depth 0 score mate 0`` (or ``cp 0``
for stalemate) and ``bestmove 0000``; a search that fails still answers with a legal ``bestmove``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

import chess

from alphazero.errors import InputError
from alphazero.serve.searchers import Job, NetworkSearcher, Searcher, make_searcher
from alphazero.serve.uci_protocol import (
    Debug,
    Go,
    IsReady,
    PonderHit,
    Position,
    Quit,
    Register,
    SetOption,
    Stop,
    Uci,
    UciNewGame,
    format_bestmove,
    format_info,
    format_info_string,
    parse_line,
)

if TYPE_CHECKING:
    from alphazero.nets.network import PolicyValueNet

ENGINE_AUTHOR = "the alphazero-chess authors"
# Python's thread switch interval in an engine process (from 5 ms): a command that arrives while the
# search thread runs Python (the tree search; alpha-beta between iterations) waits this long for the
# GIL at most. A thread that does not ask for the GIL costs nothing.
SWITCH_INTERVAL_S = 0.001
DEVICES = ("cpu", "cuda", "auto")


# --------------------------------------------------------------------------------------------------
# The engine


class UCIEngine:
    """A UCI engine; ``run()`` serves commands from ``stdin`` until ``quit`` or EOF.

    ``searcher`` is a ``Searcher`` (``PlayerSearcher``, ``AlphaBetaSearcher``, ``NetworkSearcher``), a
    ``PolicyValueNet``, or a path for ``resolve_network_path`` (a network file or a run directory):
    the last two serve the network with the tree search. Every line written to ``stdout`` is flushed
    at once; writes from the search thread and the command loop never interleave.
    """

    def __init__(
        self,
        searcher: Searcher | PolicyValueNet | str | os.PathLike,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
        device: str = "cpu",
    ) -> None:
        if not isinstance(searcher, Searcher):
            searcher = NetworkSearcher(searcher, device=device)
        self.searcher = searcher
        self.stdin = stdin if stdin is not None else sys.stdin
        self.stdout = stdout if stdout is not None else sys.stdout
        self.settings = searcher.options.defaults()
        self.debug = False
        self.board = chess.Board()
        self._lock = threading.Lock()  # board, job, thread
        self._out_lock = threading.Lock()
        self._job: Job | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._last_position: Position | None = None  # the last position command, for the next to extend
        self._handlers: dict[type, Callable[[Any], bool | None]] = {
            Uci: self._on_uci,
            Debug: self._on_debug,
            IsReady: self._on_isready,
            SetOption: self._on_setoption,
            Register: lambda command: None,
            UciNewGame: self._on_ucinewgame,
            Position: self._on_position,
            Go: self._on_go,
            Stop: self._on_stop,
            PonderHit: self._on_ponderhit,
            Quit: lambda command: False,
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
        self.send(format_info_string(text))

    def run(self) -> int:
        """Serve until ``quit`` or end of input; stops any search first. Returns the exit status (0)."""
        try:
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
        finally:
            self.searcher.close()
        return 0

    def handle(self, line: str) -> bool:
        """Execute one input line; ``False`` once the engine should exit (``quit``)."""
        parsed = parse_line(line, self._last_position)
        if parsed is None:
            return True
        if parsed.skipped and (parsed.command is not None or parsed.error is not None):
            self.info_string(f"ignored unknown token(s) {' '.join(parsed.skipped)!r}")
        if parsed.command is None:
            self.info_string(parsed.error or "unknown command")
            return True
        try:
            return self._handlers[type(parsed.command)](parsed.command) is not False
        except Exception as error:  # a bug in one command must not end the session
            word = type(parsed.command).__name__.lower()
            self.info_string(f"error in {word!r}: {type(error).__name__}: {error}")
            return True

    # -- commands -------------------------------------------------------------------------------

    def _on_uci(self, command: Uci) -> None:
        self.send(f"id name {self.searcher.name}")
        self.send(f"id author {ENGINE_AUTHOR}")
        for line in self.searcher.options.declarations():
            self.send(line)
        self.send("uciok")

    def _on_debug(self, command: Debug) -> None:
        self.debug = command.on

    def _make_ready(self) -> None:
        """The searcher's ``ready`` (allocations, compiling), unless a search is running."""
        with self._lock:
            if self._job is None:
                self.searcher.ready()

    def _on_isready(self, command: IsReady) -> None:
        try:
            self._make_ready()
        finally:
            self.send("readyok")

    def _on_setoption(self, command: SetOption) -> None:
        try:
            parsed = self.searcher.options.parse(command)
        except ValueError as error:
            self.info_string(f"setoption: {error}")
            return
        if parsed is not None:
            setting, value = parsed
            self.settings[setting] = value
            self.searcher.apply(setting, value)
            self._make_ready()

    def _on_ucinewgame(self, command: UciNewGame) -> None:
        with self._lock:
            self.searcher.new_game()
        self._make_ready()

    def _on_position(self, command: Position) -> None:
        if command.note:
            self.info_string(command.note)
        with self._lock:
            self.board = command.board
        self._last_position = command

    def _on_go(self, command: Go) -> None:
        params = command.params
        start = time.monotonic()
        with self._lock:
            job, thread = self._job, self._thread
        if job is not None and job.stop.is_set() and thread is not None:
            thread.join(timeout=30)  # told to stop, about to print its bestmove: let it finish first
        for note in params.notes:
            self.info_string(note)
        with self._lock:
            if self._job is not None:
                self.info_string("go: a search is already running (send stop first); ignored")
                return
            board = self.board.copy()
            settings = dict(self.settings)
            limits = self.searcher.make_limits(params, board.turn, settings, start)
            searchmoves = self._searchmoves(board, params.searchmoves)
            job = Job(board=board, limits=limits, settings=settings, start=start, send=self.send, debug=self.debug,
                      searchmoves=searchmoves)
            notes = self.searcher.prepare(job)
            self._job = job
        if params.mate is not None and not self.searcher.supports_mate:
            self.info_string("go mate is not supported by this engine; searching with the other limits")
        if params.searchmoves and searchmoves and not self.searcher.supports_searchmoves:
            self.info_string("go searchmoves is not supported by this engine; searching all moves")
        if self.debug:
            for note in notes:
                self.info_string(note)
            soft = None if limits.soft_deadline is None else round((limits.soft_deadline - start) * 1000)
            hard = None if limits.deadline is None else round((limits.deadline - start) * 1000)
            self.info_string(f"search plan: depth {limits.depth} nodes {limits.nodes} time ms soft {soft} hard {hard} "
                             f"infinite {limits.infinite} ponder {limits.ponder}")
        thread = threading.Thread(target=self._search_thread, args=(job,), name="uci-search", daemon=True)
        self._thread = thread
        thread.start()

    def _searchmoves(self, board: chess.Board, tokens: list[str]) -> list[chess.Move]:
        """The legal moves among ``tokens`` (the others dropped with an ``info string``)."""
        legal, dropped = [], []
        for token in tokens:
            try:
                move = chess.Move.from_uci(token)
            except ValueError:
                move = None
            if move is not None and move in board.legal_moves:
                if move not in legal:
                    legal.append(move)
            else:
                dropped.append(token)
        if dropped:
            rest = "searching all moves" if not legal else "searching the others"
            self.info_string(f"go searchmoves: {' '.join(dropped)} not legal here; {rest}")
        return legal

    def _on_stop(self, command: Stop) -> None:
        with self._lock:
            job = self._job
            if job is not None:
                job.stop.set()
                self.searcher.interrupt(job)

    def _on_ponderhit(self, command: PonderHit) -> None:
        with self._lock:
            job = self._job
            if job is not None:
                job.ponderhit(time.monotonic())
                self.searcher.limits_changed(job)

    # -- search ---------------------------------------------------------------------------------

    def _stop_and_join(self) -> None:
        with self._lock:
            job, thread = self._job, self._thread
        if job is not None:
            job.stop.set()
            self.searcher.interrupt(job)
        if thread is not None:
            thread.join(timeout=30)

    def _search_thread(self, job: Job) -> None:
        lines: list[str] = []
        move: chess.Move | None = None
        ponder: chess.Move | None = None
        try:
            if not any(job.board.legal_moves):
                job.wait_for_release()
                lines = [format_info(depth=0, score="mate 0" if job.board.is_check() else "cp 0")]
            else:
                move, ponder, lines = self.searcher.search(job)
        except Exception as error:  # never leave the GUI without a bestmove
            lines = [format_info_string(f"search failed: {type(error).__name__}: {error}")]
            moves = list(job.board.legal_moves)
            move, ponder = (moves[0] if moves else None), None
            job.wait_for_release()
        with self._lock:
            try:
                self.searcher.finish(job)
            finally:
                self._job = None
        lines.append(format_bestmove(move, ponder))
        for line in lines:
            self.send(line)


# --------------------------------------------------------------------------------------------------
# Entry points


def check_device(device: str) -> str:
    """``device`` if this machine can serve on it, else ``InputError`` (before a network is loaded or
    a player started): one of ``DEVICES``, and ``cuda`` only where torch sees a CUDA GPU."""
    if device not in DEVICES:
        raise InputError(f"--device {device!r}: expected one of {', '.join(DEVICES)}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda: this machine has no CUDA GPU that torch can use; use --device cpu or auto")
    return device


def run_uci(
    checkpoint_path: str,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    device: str = "cpu",
) -> int:
    """Load the network at ``checkpoint_path`` (file or run directory) and serve UCI; the exit status.

    A missing or unreadable network raises ``InputError`` (or ``RunStateError`` for a directory that
    holds no run) before anything is served, as does a ``device`` this machine does not have.
    """
    from alphazero.judge.players import resolve_network_path  # torch loads only for a network
    from alphazero.nets.network import load_network

    check_device(device)
    net = load_network(resolve_network_path(checkpoint_path))
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return UCIEngine(net, stdin, stdout, device=device).run()


def run_uci_player(
    spec: str,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    device: str = "cpu",
) -> int:
    """Serve the player ``spec`` (``alphazero.judge.players``) over UCI; the exit status.

    A bad spec (or a player that cannot start), or a ``device`` this machine does not have, raises
    ``InputError`` before anything is served.
    """
    check_device(device)
    searcher = make_searcher(spec, device=device)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return UCIEngine(searcher, stdin, stdout, device=device).run()
