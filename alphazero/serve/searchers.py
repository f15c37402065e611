"""The searchers a UCI engine serves: each turns a position and the limits of one ``go`` into a ``bestmove``.

Owns the contract between the command loop (``alphazero.serve.uci``) and a search: ``Job`` (one
running search: its position, limits, settings, stop flag and output) and ``Searcher`` (an engine
kind: its name, its option table, how it reads ``go`` limits, and its search), and the three kinds:
``NetworkSearcher`` (a policy/value network with the tree search), ``AlphaBetaSearcher`` (an ``ab:``
spec) and ``PlayerSearcher`` (any other player spec); ``make_searcher`` picks one for a spec. Knows
nothing of the streams, the command grammar or the search thread: the loop owns those, hands a
searcher a ``Job``, and prints what it returns. A search runs only in a position with legal moves
(the loop answers the others itself).

Options
=======

Each engine kind announces its own table (declared once each below, ``OptionTable``):

===================== ======== ======== ============ =================================================
name                  type     default  engines      meaning
===================== ======== ======== ============ =================================================
``Nodes``             spin     400      network      simulations of a ``go`` with no limit at all
``CPuct``             string   1.25     network      PUCT exploration constant (a float; UCI has no float type)
``PolicyTemperature`` string   2.0      network      the policy's logits are divided by this before the softmax
                                                     (lc0's PolicyTemperature; self-play's is 1.0,
                                                     ``search.policy_temperature``)
``FPUReduction``      string   0.25     network      first-play urgency: an unvisited move's value is its parent's
                                                     less this (lc0's FPU reduction, ``search.fpu_reduction``)
``Threads``           spin     1        network      torch intra-op threads
``Hash``              spin     16       ab           transposition table, MB (default: the spec's ``hash``)
``MultiPV``           spin     1        network, ab  lines reported (``info ... multipv K``), best first
``Move Overhead``     spin     50       network, ab  milliseconds kept back from every timed search
``Ponder``            check    false    all          accepted (pondering works whenever the GUI sends ``go ponder``)
===================== ======== ======== ============ =================================================

Names GUIs send unasked (``Hash``, ``Threads``, ``UCI_AnalyseMode``, ``UCI_ShowWDL`` where the engine
has no such option) are accepted and ignored; option names match without spaces and case
(``MoveOverhead`` is ``Move Overhead``). Any other name gets an ``info string``. ``Threads`` of an
``ab:`` engine is accepted and ignored: it searches on one thread (Lazy SMP did not pay on two
shared cores; docs/RESULTS.md).

Before ``readyok``
==================

``ready`` (the engine calls it at ``isready``, ``setoption`` and ``ucinewgame``, and before a ``go``,
whenever no search runs) does what would otherwise land in the first search: an ``ab:`` engine
allocates and writes a new ``Hash`` table there, clears the table after ``ucinewgame`` and, the
first time, searches the start position to depth 2 on a scratch table, which loads (or, with no
cache, compiles) the numba kernels.

The network engine (``--checkpoint``): tree search
===================================================

The search thread calls ``MCTS.search`` on one ``GameTree`` in chunks of simulations sized to take
about 50 ms each and checks its limits between chunks (``Limits.reached``, the soft deadline); the
stop flag and a ``ponderhit`` are also read after every network call inside a chunk. Limits as
in ``alphazero.serve.uci_limits``; ``nodes`` counts new simulations (a reused subtree's earlier visits do
not count), ``depth D`` maps to ``depth_to_nodes(D) = 2 ** (D + 3)`` simulations, a timed search always
runs at least ``MIN_SIMULATIONS`` simulations, and with no limit at all it runs ``Nodes``. The tree
is capped at ``MAX_TREE_VISITS`` root visits (memory); an infinite search that reaches it idles until
``stop``.

While searching it prints, about every ``INFO_INTERVAL`` seconds and once more before ``bestmove``::

    info depth D seldepth S nodes N nps X score cp C time T pv m1 m2 ...

``depth`` is the length of the principal variation (the most-visited line, ``principal_variation``),
at least 1; ``seldepth`` is the deepest ply the search handed to the network; ``nodes`` counts this
search's simulations; ``score cp`` is ``value_to_centipawns`` of the root's mean value (side to move's
view), or ``score mate K`` when the principal variation ends in checkmate and the root value agrees
on who wins. With ``MultiPV`` K above 1 the final report has K lines, ``multipv k`` the root move
with the k-th most visits, its score from its own mean value. ``searchmoves`` and ``mate`` are not
supported by the tree search (an ``info string`` says so; the rest of the ``go`` is obeyed). ``bestmove`` is the most visited root move (ties go to the higher prior), with
``ponder`` the reply the principal variation expects; if no simulation finished (``stop`` came first)
it is the highest-prior move. A position already drawn by rule (insufficient material, fifty moves,
threefold repetition) but with legal moves gets the raw policy's move.

Between moves of one game the tree is reused: when the new position is the last searched position
plus moves, the subtree under those moves becomes the new root (``debug on`` reports it).

``--player ab:EVAL?...``: alpha-beta
=====================================

``AlphaBeta.search`` (compiled, iterative deepening) with ``go depth`` as its depth, ``go nodes`` as
its node limit, the soft and hard time limits of ``alphazero.serve.uci_limits`` (no iteration starts
after ``ITERATION_SHARE`` of a clock's soft limit, or after the spec's ``share`` of a fixed ``movetime``,
by default all of it, as Stockfish spends a ``go movetime``; the hard limit aborts the running iteration), ``MultiPV``,
``searchmoves`` and ``mate`` (``depth``/``nodes``/``movetime`` of the spec apply to a ``go`` with no
limit; ``hash`` sizes the table). An NNUE file named by the spec is read once, when the searcher is
made. Every completed iteration prints (``multipv k`` only when ``MultiPV`` is above 1, one line each)::

    info depth D seldepth S [multipv k] score cp X|mate M nodes N nps R time T pv m1 m2 ...

and ``bestmove`` is the best move of the deepest iteration (``ponder``: the second move of its PV),
or the move of an iteration cut short by ``stop`` or the clock when it was fully searched and beat
that one (then an ``info depth D+1 nodes N time T pv m`` line says so before the ``bestmove``).
The compiled iterations run without the GIL and read a stop flag at every node, so ``stop``,
``isready`` and ``ponderhit`` are answered within milliseconds during any search: ``stop`` sets the
flag (``AlphaBeta.abort``), ``ponderhit`` hands the running search the limits of its ``go``
(``AlphaBeta.retarget``: it goes on from where it is, under the new depth, node and time limits).
``infinite`` and ``ponder`` search to the maximum depth, then wait for ``stop`` / ``ponderhit``.

``--player SPEC`` (any other spec: ``random``, ``greedy``, ``uci:...``, ``mcts:...``, ``policy:...``)
========================================================================================================

``go`` calls ``choose_moves([board])`` and replies ``bestmove``: the player's own spec sets how long
it thinks; the limits of ``go`` are not used (``debug on`` says so) and ``stop`` cannot cut a move
short (with ``infinite``/``ponder`` the ``bestmove`` still waits for ``stop``/``ponderhit``).
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import chess
import numpy as np

from alphazero import __version__
from alphazero.board.game import terminal_status
from alphazero.config import SearchConfig
from alphazero.search.mcts import (
    MCTS,
    GameTree,
    Node,
    principal_variation,
    value_to_centipawns,
)
from alphazero.serve.uci_limits import ITERATION_SHARE, MAX_NODES, GoParams, Limits, depth_to_nodes
from alphazero.serve.uci_protocol import Option, OptionTable, format_info, format_info_string, format_score

if TYPE_CHECKING:
    from alphazero.nets.evaluator import NetworkEvaluator
    from alphazero.nets.network import PolicyValueNet
    from alphazero.nets.nnue_file import QuantisedNNUE
    from alphazero.search.alphabeta import SearchInfo

ENGINE_NAME = f"AlphaZero-chess {__version__}"

DEFAULT_NODES = 400
DEFAULT_C_PUCT = SearchConfig().c_puct
# Play flattens the policy where self-play (search.policy_temperature, 1.0) does not: the amx hour's network at
# 200 simulations, temperature 2 against 1: +196 Elo [+132, +274] in 100 book games (docs/RESULTS.md).
DEFAULT_POLICY_TEMPERATURE = 2.0
# search.fpu_reduction's 0.25. At PolicyTemperature 2 and 200 simulations, 0 beat it head to head (+58 Elo
# [+16, +102], amx-2h.pt) and was level against Stockfish 1350 (800 games over two networks, 36.6% against
# 36.7%): the outside measure decides, as it did for Gumbel at play time (docs/RESULTS.md, "First-play urgency").
DEFAULT_FPU_REDUCTION = SearchConfig().fpu_reduction
DEFAULT_THREADS = 1
MAX_THREADS = max(1, os.cpu_count() or 1)
DEFAULT_MOVE_OVERHEAD_MS = 50
DEFAULT_HASH_MB = 16
MAX_MULTIPV = 64

MIN_SIMULATIONS = 4  # a timed search runs at least this many (a move is never a pure guess)
CHUNK_SECONDS = 0.05  # aim of one search chunk: the reaction time to stop / deadlines
MAX_CHUNK = 2048
INFO_INTERVAL = 0.5  # seconds between periodic info lines
PV_LENGTH = 30
MAX_TREE_VISITS = 1_000_000  # ~ a few GB of python objects; bounds an endless analysis
MIN_MOVETIME_MS = 1.0  # an exhausted clock still gets a (depth 1) alpha-beta answer

# Each option declared once; the tables below pick theirs.
NODES = Option("Nodes", "spin", DEFAULT_NODES, sets="nodes", low=1, high=MAX_NODES,
               help="simulations of a go with no limit at all")
C_PUCT = Option("CPuct", "float", DEFAULT_C_PUCT, sets="c_puct", low=0, high=1e6, help="PUCT exploration constant")
POLICY_TEMPERATURE = Option("PolicyTemperature", "float", DEFAULT_POLICY_TEMPERATURE, sets="policy_temperature", low=0,
                            high=100, help="policy logits divided by this before the softmax")
FPU_REDUCTION = Option("FPUReduction", "float", DEFAULT_FPU_REDUCTION, sets="fpu_reduction", low=-1, high=2,
                       help="an unvisited move's value is its parent's less this")
THREADS = Option("Threads", "spin", DEFAULT_THREADS, sets="threads", low=1, high=MAX_THREADS,
                 help="torch intra-op threads")
HASH = Option("Hash", "spin", DEFAULT_HASH_MB, sets="hash_mb", low=1, high=65536, help="transposition table, MB")
MOVE_OVERHEAD = Option("Move Overhead", "spin", DEFAULT_MOVE_OVERHEAD_MS, sets="move_overhead_ms", low=0, high=10000,
                       help="milliseconds kept back from every timed search")
PONDER = Option("Ponder", "check", False, sets="ponder", help="accepted; pondering follows go ponder")
MULTIPV = Option("MultiPV", "spin", 1, sets="multipv", low=1, high=MAX_MULTIPV, help="lines reported, best first")

NETWORK_OPTIONS = OptionTable([NODES, C_PUCT, POLICY_TEMPERATURE, FPU_REDUCTION, THREADS, MULTIPV, MOVE_OVERHEAD, PONDER],
                              ignored=["Hash", "UCI_AnalyseMode", "UCI_ShowWDL"])
AB_OPTIONS = OptionTable([HASH, MULTIPV, MOVE_OVERHEAD, PONDER], ignored=["Threads", "UCI_AnalyseMode", "UCI_ShowWDL"])
PLAYER_OPTIONS = OptionTable([PONDER], ignored=["Hash", "Threads", "MoveOverhead", "UCI_AnalyseMode", "UCI_ShowWDL"])


# --------------------------------------------------------------------------------------------------
# One search


@dataclass
class Job:
    """One running search: its position, limits, settings and stop flag.

    ``limits`` changes under ``lock`` (``ponderhit``); read it through ``snapshot``. ``state`` is the
    searcher's own (the network searcher's tree and game number).
    """

    board: chess.Board
    limits: Limits
    settings: dict[str, Any]
    start: float
    send: Callable[[str], None]
    debug: bool = False
    searchmoves: list[chess.Move] = field(default_factory=list)  # legal ones only; empty: all
    state: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def snapshot(self) -> Limits:
        with self.lock:
            return copy.copy(self.limits)

    def ponderhit(self, now: float) -> None:
        with self.lock:
            self.limits.ponderhit(now)

    def unbounded(self) -> bool:
        """True while the search must go on until stop (infinite, or pondering before ponderhit)."""
        with self.lock:
            return self.limits.unbounded

    def wait_for_release(self) -> None:
        """Block until ``stop`` or until the limits are no longer unbounded (``ponderhit``)."""
        while self.unbounded() and not self.stop.wait(0.02):
            pass

    def elapsed_ms(self) -> int:
        return int(round((time.monotonic() - self.start) * 1000))


class Searcher:
    """What an engine kind supplies: its name, options, limits and search. ``prepare`` runs on the
    command thread as the ``go`` is accepted; ``search`` on the search thread, in a position with
    legal moves, returning (bestmove, ponder move or None, lines to print before ``bestmove``)."""

    name = ENGINE_NAME
    options = PLAYER_OPTIONS
    supports_searchmoves = False
    supports_mate = False

    def make_limits(self, params: GoParams, turn: chess.Color, settings: dict[str, Any], now: float) -> Limits:
        return Limits.from_go(params, turn, settings.get("move_overhead_ms", 0), now)

    def apply(self, setting: str, value: Any) -> None:
        """Side effects of a ``setoption`` beyond the stored setting."""

    def new_game(self) -> None:
        pass

    def ready(self) -> None:
        """Do now, while no search runs, what would otherwise delay a search (allocations, compiling)."""

    def prepare(self, job: Job) -> list[str]:
        """Set up ``job``; returns debug notes."""
        return []

    def interrupt(self, job: Job) -> None:
        """``stop`` came (from the command thread; ``job.stop`` is set already)."""

    def limits_changed(self, job: Job) -> None:
        """``ponderhit`` came and changed ``job.limits`` (from the command thread)."""

    def search(self, job: Job) -> tuple[chess.Move, chess.Move | None, list[str]]:
        raise NotImplementedError

    def finish(self, job: Job) -> None:
        """Called after every search, also a failed one."""

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------------
# The network with the tree search


class _DepthTracker:
    """An evaluator wrapper that remembers the deepest leaf (move-stack length) it was shown."""

    def __init__(self, inner: NetworkEvaluator) -> None:
        self.inner = inner
        self.max_stack = 0

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> Any:
        depth = len(board.move_stack)
        self.max_stack = max(self.max_stack, depth)
        return self.inner.prepare(board, moves)

    def evaluate(self, requests: list[Any]) -> tuple[list[np.ndarray], np.ndarray]:
        return self.inner.evaluate(requests)


@dataclass
class _TreeState:
    tree: GameTree
    game: int


class NetworkSearcher(Searcher):
    """MCTS with a policy/value network on one tree, reused between the moves of a game.

    The tree handed back by a search (``finish``) and the game counter are guarded by the
    engine's lock, under which ``prepare``, ``finish`` and ``new_game`` run."""

    options = NETWORK_OPTIONS

    def __init__(self, network: PolicyValueNet | str | os.PathLike, device: str = "cpu") -> None:
        import torch  # here, not at import: an ab: engine never loads torch (its uciok comes seconds sooner)

        from alphazero.judge.players import resolve_network_path
        from alphazero.nets.evaluator import NetworkEvaluator
        from alphazero.nets.network import PolicyValueNet, load_network

        if not isinstance(network, PolicyValueNet):
            network = load_network(resolve_network_path(os.fspath(network)))
        self.evaluator = NetworkEvaluator(network, device=device)
        self._tracker = _DepthTracker(self.evaluator)
        self._tree: GameTree | None = None  # last searched tree, for reuse
        self._game = 0
        torch.set_num_threads(DEFAULT_THREADS)

    def make_limits(self, params: GoParams, turn: chess.Color, settings: dict[str, Any], now: float) -> Limits:
        limits = Limits.from_go(params, turn, settings["move_overhead_ms"], now, default_nodes=settings["nodes"])
        if params.depth is not None:  # no depth-first search here: depth stands for simulations
            limits.nodes = min(limits.nodes or MAX_NODES, depth_to_nodes(params.depth))
        return limits

    def apply(self, setting: str, value: Any) -> None:
        if setting == "threads":
            import torch

            torch.set_num_threads(value)

    def new_game(self) -> None:
        self._tree = None
        self._game += 1  # a search still running will not hand its tree on

    def prepare(self, job: Job) -> list[str]:
        tree, reused = self._tree_for(job.board)
        self._tree = None
        job.state = _TreeState(tree, self._game)
        return [f"reused tree with {tree.root.visits} visits"] if reused else []

    def finish(self, job: Job) -> None:
        state: _TreeState = job.state
        if state.game == self._game and state.tree.root.terminal_value is None:
            self._tree = state.tree

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

    def search(self, job: Job) -> tuple[chess.Move, chess.Move | None, list[str]]:
        import torch

        torch.set_num_threads(job.settings["threads"])
        tree = job.state.tree
        board = tree.board
        moves = list(board.legal_moves)
        status = terminal_status(board, moves)
        if status is not None:  # drawn by rule, yet the GUI wants a move: the raw policy's
            _, priors, _ = self.evaluator.policy([board])[0]
            move = moves[int(np.argmax(priors))]
            job.wait_for_release()
            return move, None, [
                format_info_string(f"position is drawn ({status[1]}); move from the raw policy"),
                format_info(depth=1, seldepth=1, nodes=0, score="cp 0", time=job.elapsed_ms(), pv=[move])]

        # PUCT: an anytime search, grown in chunks until a limit (Gumbel's sequential halving needs its budget
        # before it starts).
        self.evaluator.policy_temperature = job.settings["policy_temperature"]  # read by every network call
        mcts = MCTS(self._tracker, SearchConfig(algorithm="puct", num_simulations=1, c_puct=job.settings["c_puct"],
                                                 fpu_reduction=job.settings["fpu_reduction"]))
        root_stack = len(board.move_stack)
        self._tracker.max_stack = root_stack
        searchable = len(moves) > 1
        base = sum(tree.root.child_visits) if tree.root.priors is not None else 0
        sims = 0
        chunk = 4
        search_start = time.monotonic()
        last_info = search_start
        while not job.stop.is_set():
            limits = job.snapshot()
            now = time.monotonic()
            expanded = tree.root.priors is not None
            done = expanded and (not searchable or tree.root.visits >= MAX_TREE_VISITS)
            if not limits.unbounded:
                if limits.reached(sims, now, MIN_SIMULATIONS) or done:
                    break
            elif done:
                job.stop.wait(0.02)
                continue
            size = chunk
            if not limits.unbounded:
                if limits.nodes is not None:
                    size = min(size, limits.nodes - sims)
                if limits.soft_deadline is not None and sims >= MIN_SIMULATIONS:
                    rate = sims / max(now - search_start, 1e-6)
                    size = min(size, max(1, int(rate * (limits.soft_deadline - now))))

            def should_stop(unbounded: bool = limits.unbounded) -> bool:
                return job.stop.is_set() or (unbounded and not job.unbounded())

            mcts.search([tree], add_noise=False, temperature=0.0, num_simulations=max(1, size),
                        should_stop=should_stop)
            if searchable:
                sims = sum(tree.root.child_visits) - base
            now = time.monotonic()
            rate = sims / max(now - search_start, 1e-6)
            chunk = int(min(MAX_CHUNK, max(1, rate * CHUNK_SECONDS)))
            if now - last_info >= INFO_INTERVAL:
                job.send(self._info_line(job, sims, now - search_start, root_stack))
                last_info = now
        job.wait_for_release()
        root = tree.root
        if root.priors is not None:
            move = root.moves[_root_choice(root)]
        else:  # stopped before the root was expanded
            _, priors, _ = self.evaluator.policy([board])[0]
            move = moves[int(np.argmax(priors))]
        lines = []
        ponder = None
        if root.priors is not None:
            elapsed = time.monotonic() - search_start
            multipv = min(job.settings.get("multipv", 1), len(root.moves))
            if multipv > 1:
                lines += [self._info_line(job, sims, elapsed, root_stack, rank) for rank in range(1, multipv + 1)]
            else:
                lines.append(self._info_line(job, sims, elapsed, root_stack))
            pv = _principal_variation(root, max_length=2)
            if len(pv) == 2 and pv[0] == move:
                ponder = pv[1]
        return move, ponder, lines

    def _info_line(self, job: Job, sims: int, elapsed: float, root_stack: int, rank: int | None = None) -> str:
        """The ``info`` line of the search so far: the best line, or (``rank`` k) the line of the root
        move with the k-th most visits, scored from that child's mean value, with ``multipv k``."""
        tree = job.state.tree
        root = tree.root
        if rank is None or rank == 1:
            pv = _principal_variation(root, max_length=PV_LENGTH)
            value = root.value
        else:
            index = _root_ranking(root)[rank - 1]
            child = root.children[index]
            pv = [root.moves[index], *(principal_variation(child, PV_LENGTH - 1) if child is not None else [])]
            visits = root.child_visits[index]
            value = root.child_values[index] / visits if visits else root.value  # W(s, a): the root mover's
        depth = max(1, len(pv))
        seldepth = max(depth, self._tracker.max_stack - root_stack)
        value = float(np.clip(value, -1.0, 1.0))
        cp, mate = value_to_centipawns(value), None
        if pv:
            line = tree.board.copy()
            for move in pv:
                line.push(move)
            if line.is_checkmate():
                if len(pv) % 2 == 1 and value > 0:
                    mate = (len(pv) + 1) // 2
                elif len(pv) % 2 == 0 and value < 0:
                    mate = -(len(pv) // 2)
        nps = int(sims / elapsed) if elapsed > 0 else 0
        return format_info(depth=depth, seldepth=seldepth, multipv=rank, nodes=sims, nps=nps,
                           score=format_score(cp, mate), time=job.elapsed_ms(), pv=pv)


def _root_choice(root: Node) -> int:
    """Index of the move to play from an expanded root: most visits, ties (or no visits) to the higher prior."""
    assert root.priors is not None
    return int(np.argmax(np.asarray(root.child_visits) + 0.5 * root.priors))  # priors lie in [0, 1]: they only break ties


def _root_ranking(root: Node) -> list[int]:
    """Root move indices, most visited first (ties to the higher prior): the order of MultiPV lines."""
    assert root.priors is not None
    keys = np.asarray(root.child_visits) + 0.5 * root.priors
    return [int(i) for i in np.argsort(-keys, kind="stable")]


def _principal_variation(root: Node, max_length: int) -> list[chess.Move]:
    """The bestmove followed by the most-visited line below it (``principal_variation``)."""
    if root.priors is None or not root.moves:
        return []
    index = _root_choice(root)
    child = root.children[index] if root.children else None
    rest = principal_variation(child, max_length - 1) if child is not None and max_length > 1 else []
    return [root.moves[index], *rest]


# --------------------------------------------------------------------------------------------------
# Alpha-beta (``ab:`` specs)


class AlphaBetaSearcher(Searcher):
    """``AlphaBeta`` on the compiled board, made from an ``ab:`` spec (``ValueError`` if it is bad).

    The transposition table lives from move to move; after ``ucinewgame`` it is cleared, and after a
    new ``Hash`` allocated, at the next ``ready`` (never under a running search)."""

    options = AB_OPTIONS
    supports_searchmoves = True
    supports_mate = True

    def __init__(self, spec: str) -> None:
        from alphazero.search.ab_player import (  # numba loads only when asked for
            DEFAULT_MOVETIME_MS,
            parse_ab_spec,
        )
        from alphazero.search.alphabeta import MAX_PLY, AlphaBeta

        kwargs = parse_ab_spec(spec)
        self.spec = spec.strip()
        self.name = f"{ENGINE_NAME} {self.spec}"
        self.eval_name: str = kwargs["eval_name"]
        # the NNUE the spec names, read once (parse_ab_spec loaded and checked it): a Hash change
        # rebuilds the table only, and the warm-up searches with the same net, never the file again
        self.evaluation: str | QuantisedNNUE = kwargs["nnue"] if kwargs["nnue"] is not None else self.eval_name
        self.depth: int | None = kwargs["depth"]
        self.nodes: int | None = kwargs["nodes"]
        self.movetime_ms: float | None = kwargs["movetime_ms"]
        self.share: float = kwargs["share"]  # of a fixed move time, after which no iteration starts
        if self.depth is None and self.nodes is None and self.movetime_ms is None:
            self.movetime_ms = DEFAULT_MOVETIME_MS
        self.max_depth = MAX_PLY - 8
        self.hash_mb = float(kwargs["hash_mb"])
        self.options = OptionTable([replace(HASH, default=max(1, round(self.hash_mb))), MULTIPV, MOVE_OVERHEAD,
                                    PONDER], ignored=AB_OPTIONS.ignored)
        self.techniques: dict[str, bool] = kwargs["techniques"]
        self.alphabeta = AlphaBeta(self.evaluation, tt_mb=self.hash_mb, techniques=self.techniques)
        self._table_mb = self.hash_mb
        self._clear = False
        self._warm = False

    def apply(self, setting: str, value: Any) -> None:
        if setting == "hash_mb":
            self.hash_mb = float(value)

    def new_game(self) -> None:
        self._clear = True

    def ready(self) -> None:
        if self.hash_mb != self._table_mb:
            self.alphabeta.resize(self.hash_mb)
            self._table_mb = self.hash_mb
            self._clear = False
        if self._clear:  # ucinewgame: a large table takes a while to clear
            self.alphabeta.clear()
            self._clear = False
        if not self._warm:
            from alphazero.search.alphabeta import AlphaBeta

            AlphaBeta(self.evaluation, tt_mb=1).search(chess.Board(), depth=2)  # load or compile the kernels
            self._warm = True

    def prepare(self, job: Job) -> list[str]:
        self.ready()  # a GUI that sent no isready since its setoption or ucinewgame
        self.alphabeta.reset_abort()  # from here on a stop aborts this job's search
        return []

    def interrupt(self, job: Job) -> None:
        self.alphabeta.abort()

    def limits_changed(self, job: Job) -> None:
        self._retarget(job.snapshot())

    def _retarget(self, limits: Limits) -> None:
        plan = self.plan(limits, time.monotonic())
        now_ns = time.monotonic_ns()
        self.alphabeta.retarget(
            depth=plan["depth"], nodes=plan["nodes"],
            deadline_ns=None if plan["movetime_ms"] is None else now_ns + int(plan["movetime_ms"] * 1e6),
            soft_deadline_ns=None if plan["soft_ms"] is None else now_ns + int(plan["soft_ms"] * 1e6))

    def plan(self, limits: Limits, now: float) -> dict[str, Any]:
        """``AlphaBeta.search`` limits for ``limits`` at ``now``: ``depth``, ``nodes``, ``movetime_ms``
        (the hard limit) and ``soft_ms`` (no iteration starts after it)."""
        if limits.unbounded:
            return {"depth": self.max_depth, "nodes": None, "movetime_ms": None, "soft_ms": None}
        if not limits.has_limit:
            return {"depth": self.depth, "nodes": self.nodes, "movetime_ms": self.movetime_ms,
                    "soft_ms": None if self.movetime_ms is None else self.share * self.movetime_ms}
        depth = limits.depth
        mate = limits.params.mate
        if mate is not None and depth is None and limits.nodes is None and limits.deadline is None:
            depth = 2 * mate + 4  # a mate search with nothing else to end it
        hard, soft = limits.remaining(now), limits.soft_remaining(now)
        share = self.share if limits.fixed_time else ITERATION_SHARE
        return {"depth": min(depth, self.max_depth) if depth is not None else None,
                "nodes": limits.nodes,
                "movetime_ms": None if hard is None else max(MIN_MOVETIME_MS, hard * 1000),
                "soft_ms": None if soft is None else max(MIN_MOVETIME_MS, share * soft * 1000)}

    def search(self, job: Job) -> tuple[chess.Move, chess.Move | None, list[str]]:
        limits = job.snapshot()
        planned_unbounded = limits.unbounded
        multipv = job.settings.get("multipv", 1)

        def on_iteration(info: SearchInfo) -> None:
            nonlocal planned_unbounded
            for rank, line in enumerate(info.lines, start=1):
                job.send(format_info(depth=line.depth, seldepth=line.seldepth, multipv=rank if multipv > 1 else None,
                                     score=format_score(line.score_cp, line.mate), nodes=info.nodes, nps=info.nps,
                                     time=int(info.time_s * 1000), pv=line.pv))
            if planned_unbounded and not job.unbounded():  # a ponderhit came before the search had begun
                planned_unbounded = False
                self._retarget(job.snapshot())

        reported: list[str] = []  # the first move of the last line printed

        def on_line(info: SearchInfo) -> None:
            reported[:] = info.pv[:1]
            on_iteration(info)

        move, last = self.alphabeta.search(job.board, **self.plan(limits, time.monotonic()), multipv=multipv,
                                           searchmoves=job.searchmoves or None, mate=limits.params.mate,
                                           on_iteration=on_line)
        lines = []
        if reported and reported[0] != move.uci():  # a stopped iteration found a better move: say so
            lines.append(format_info(depth=last.depth + 1, nodes=last.nodes, time=int(last.time_s * 1000), pv=[move]))
        job.wait_for_release()
        ponder = None
        if len(last.pv) >= 2 and last.pv[0] == move.uci():
            ponder = chess.Move.from_uci(last.pv[1])
        return move, ponder, lines


# --------------------------------------------------------------------------------------------------
# Any other player spec


class PlayerSearcher(Searcher):
    """Any ``alphazero.judge.players`` player: ``go`` asks ``choose_moves`` (the spec sets its limits)."""

    options = PLAYER_OPTIONS

    def __init__(self, player: Any, spec: str) -> None:
        self.player = player
        self.name = f"{ENGINE_NAME} {spec.strip()}"

    def prepare(self, job: Job) -> list[str]:
        if job.limits.has_limit:
            return ["the limits of go are not used: the player spec sets how long it thinks"]
        return []

    def search(self, job: Job) -> tuple[chess.Move, chess.Move | None, list[str]]:
        move = self.player.choose_moves([job.board])[0]
        job.wait_for_release()
        return move, None, []

    def close(self) -> None:
        self.player.close()


# --------------------------------------------------------------------------------------------------
# A searcher for a spec


def make_searcher(spec: str, device: str = "cpu") -> Searcher:
    """The searcher for a player spec: ``AlphaBetaSearcher`` for ``ab:``, else ``PlayerSearcher``
    around ``make_player(spec)``. ``InputError`` naming the fault of a bad spec."""
    if spec.strip().partition(":")[0].lower() == "ab":
        return AlphaBetaSearcher(spec)
    from alphazero.judge.players import make_player

    return PlayerSearcher(make_player(spec, device=device), spec)

