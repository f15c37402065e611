"""UCI search limits: the arguments of ``go`` and the stop rules they imply, with no threads.

Owns ``GoParams`` (one ``go`` command, parsed by ``parse_go``), the time manager (``time_limits``:
a soft and a hard limit), the depth-to-simulations map of the tree search (``depth_to_nodes``) and
``Limits``: the stop rules of one running search as a plain object that the caller asks, with its
own clock readings, "stop now?" (``reached``) and "how long is left?" (``remaining``). Knows nothing
of threads, streams, networks or boards beyond the side to move; the engine (``alphazero.serve.uci``)
owns those and guards a shared ``Limits`` with its lock, because ``ponderhit`` changes it mid-search.

Rules (several limits may be given; the first reached ends the search):

* ``nodes N``: N nodes (simulations for the tree search, nodes for alpha-beta).
* ``movetime MS``: ``MS - Move Overhead`` milliseconds, soft and hard limit alike: a fixed time, which
  the engine spends whole, as Stockfish does (``Limits.fixed_time``; alpha-beta starts iterations until
  its spec's ``share`` of it, by default all of it).
* ``wtime/btime/winc/binc/movestogo``: for the side to move, with ``spare = max(0, remaining -
  Move Overhead)`` (what the engine may spend, the overhead kept for the pipe, the GUI and a busy
  machine), the soft limit (the time the move should take: the tree search stops there, alpha-beta
  starts no iteration after ``ITERATION_SHARE`` of it) is
  ``min(spare / (movestogo or 30) + 0.75 * max(0, increment - Move Overhead), spare / 3)`` and the
  hard limit (alpha-beta aborts the running iteration there) ``min(HARD_FACTOR * soft, spare / 3)``,
  or ``min(HARD_FACTOR * soft, spare)`` when ``movestogo`` is 1. Neither is ever more than
  ``spare``: the engine answers before its clock would fall. The overhead is kept back from the
  clock once, not from every move's share (at 1 s + 0.01 s a share less 50 ms would be nothing from
  the first move on), and from every increment, since each move's pipe and GUI time is paid from
  it: so when the clock runs low the engine spends less than its increment and the clock climbs
  back to a floor of about ``30 * (increment - latency)`` above the overhead, instead of settling
  just above the overhead, where one stall of a busy machine loses on time (docs/RESULTS.md).
* ``depth D``: D plies for alpha-beta; the tree search maps it to ``depth_to_nodes(D)`` simulations.
* ``mate N``: alpha-beta stops once it proves a mate in N moves or fewer (and, with no other limit,
  after depth ``2N + 4``: unlike Stockfish, which searches on until ``stop``).
* ``searchmoves m1 m2 ...``: only these root moves (the engine drops the illegal ones, saying so).
* ``infinite`` / ``ponder``: no limit applies until ``stop``; ``ponderhit`` turns a ponder search into
  the search its other limits describe, the time it pondered counted as time thought: a search that
  pondered for its soft limit or longer answers at once (Stockfish 15.1 answers a ``ponderhit`` after
  a long ponder within a millisecond too).
* none of these: the engine's default (``Limits.has_limit`` is false).

Malformed arguments never cost the ``bestmove`` (Stockfish 15.1 also searches on after an unknown
token). ``parse_go`` never raises: an unknown token, a keyword without its number or with a
non-integer one is skipped, and ``GoParams.notes`` says so; ``depth``/``nodes`` below 1 become 1
(Stockfish 15.1 reads 0 as "no limit" and searches until ``stop``; a prompt answer serves a GUI
better), a negative ``movetime``, ``winc`` or ``binc`` 0, and ``movestogo``/``mate`` below 1 are
ignored.

Times here are seconds of ``time.monotonic()``; ``GoParams`` keeps the milliseconds as sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import chess

DEFAULT_MOVES_TO_GO = 30
INCREMENT_SHARE = 0.75
HARD_FACTOR = 3.0  # the hard limit, in soft limits
ITERATION_SHARE = 0.6  # alpha-beta starts no iteration after this share of the clock's soft limit
MAX_NODES = 1_000_000_000

GO_INT_PARAMS = ("wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate", "movetime")
GO_FLAGS = ("infinite", "ponder")
GO_KEYWORDS = set(GO_INT_PARAMS) | set(GO_FLAGS) | {"searchmoves"}


@dataclass
class GoParams:
    """The arguments of one ``go`` command (times in milliseconds, as sent); ``notes`` what
    ``parse_go`` skipped or changed, for ``info string`` lines."""

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
    notes: list[str] = field(default_factory=list)


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def parse_go(args: list[str]) -> GoParams:
    """The tokens after ``go`` -> ``GoParams``. Never raises: what it skips or changes is in ``notes``."""
    params = GoParams()
    unknown: list[str] = []
    i = 0
    while i < len(args):
        token = args[i].lower()
        if token in GO_FLAGS:
            setattr(params, token, True)
            i += 1
        elif token in GO_INT_PARAMS:
            value = _integer(args[i + 1]) if i + 1 < len(args) else None
            if value is None:
                follows = i + 1 < len(args) and args[i + 1].lower() not in GO_KEYWORDS
                got = f"{args[i + 1]!r} is not an integer" if follows else "nothing follows"
                params.notes.append(f"go: {token} needs an integer ({got}); ignored")
                i += 2 if follows else 1  # a keyword that follows is read as one
                continue
            i += 2
            if token in ("depth", "nodes") and value < 1:
                params.notes.append(f"go: {token} {value} read as {token} 1")
                value = 1
            elif token in ("movestogo", "mate") and value < 1:
                params.notes.append(f"go: {token} {value} ignored (must be at least 1)")
                continue
            elif token in ("winc", "binc", "movetime") and value < 0:
                params.notes.append(f"go: {token} {value} read as 0")
                value = 0
            setattr(params, token, value)  # a negative wtime/btime (a GUI behind on the clock) is kept
        elif token == "searchmoves":
            i += 1
            while i < len(args) and args[i].lower() not in GO_KEYWORDS:
                params.searchmoves.append(args[i])
                i += 1
        else:
            unknown.append(args[i])
            i += 1
    if unknown:
        params.notes.append(f"go: ignored unknown token(s) {' '.join(unknown)!r}")
    return params


def time_limits(params: GoParams, turn: chess.Color, move_overhead_ms: float) -> tuple[float, float] | None:
    """``(soft, hard)`` seconds to think for ``turn`` under ``params`` (``None``: no time limit);
    the rules in the module docstring. Never below zero (an engine's minimum search still runs)."""
    limits: list[tuple[float, float]] = []
    if params.movetime is not None:
        budget = params.movetime - move_overhead_ms
        limits.append((budget, budget))
    remaining = params.wtime if turn == chess.WHITE else params.btime
    if remaining is not None:
        increment = (params.winc if turn == chess.WHITE else params.binc) or 0
        moves_to_go = params.movestogo or DEFAULT_MOVES_TO_GO
        spare = max(0.0, remaining - move_overhead_ms)
        soft = min(spare / moves_to_go + INCREMENT_SHARE * max(0.0, increment - move_overhead_ms), spare / 3)
        hard = min(HARD_FACTOR * soft, spare if moves_to_go == 1 else spare / 3)
        limits.append((min(soft, hard), hard))
    if not limits:
        return None
    soft = max(0.0, min(limit[0] for limit in limits))
    hard = max(0.0, min(limit[1] for limit in limits))
    return soft / 1000.0, hard / 1000.0


def time_budget(params: GoParams, turn: chess.Color, move_overhead_ms: float) -> float | None:
    """The soft limit of ``time_limits`` in seconds (``None``: no time limit)."""
    limits = time_limits(params, turn, move_overhead_ms)
    return None if limits is None else limits[0]


def depth_to_nodes(depth: int) -> int:
    """Simulations standing in for ``go depth D`` in the tree search: ``2 ** (D + 3)``, capped at ``MAX_NODES``."""
    return min(MAX_NODES, 2 ** min(depth + 3, 40))


@dataclass
class Limits:
    """The stop rules of one search. Mutable only through ``ponderhit``; every query takes ``now``.

    ``depth``/``nodes`` are ``None`` when unlimited; ``soft_deadline`` and ``deadline`` (the hard
    limit) are absolute (monotonic seconds) and ``None`` while pondering or without a time limit;
    ``clock_start`` is when the time started counting (the ``go``, or the ``ponderhit``).
    """

    params: GoParams
    turn: chess.Color
    move_overhead_ms: float
    clock_start: float
    depth: int | None
    nodes: int | None
    soft_deadline: float | None
    deadline: float | None
    infinite: bool
    ponder: bool

    @classmethod
    def from_go(cls, params: GoParams, turn: chess.Color, move_overhead_ms: float, now: float,
                default_nodes: int | None = None) -> Limits:
        """The limits of ``go params`` for ``turn`` received at ``now``; ``default_nodes`` applies
        when the command sets no depth, nodes, time or ``infinite`` (also after a ``ponderhit``)."""
        times = time_limits(params, turn, move_overhead_ms)
        nodes = params.nodes
        if nodes is None and params.depth is None and times is None and not params.infinite:
            nodes = default_nodes  # also with mate alone: a searcher without mate search needs an end
        limits = cls(params=params, turn=turn, move_overhead_ms=move_overhead_ms, clock_start=now,
                     depth=params.depth, nodes=nodes, soft_deadline=None, deadline=None,
                     infinite=params.infinite, ponder=params.ponder)
        if times is not None and not params.ponder:
            limits.soft_deadline, limits.deadline = now + times[0], now + times[1]
        return limits

    @property
    def unbounded(self) -> bool:
        """True while the search must go on until ``stop`` (infinite, or pondering before ``ponderhit``)."""
        return self.infinite or self.ponder

    @property
    def fixed_time(self) -> bool:
        """Whether the soft limit is ``movetime``'s (a fixed time, spent whole) rather than the time manager's
        share of a clock (the move's expected share, which an iteration may overrun up to the hard limit)."""
        if self.params.movetime is None:
            return False
        clock = time_limits(replace(self.params, movetime=None), self.turn, self.move_overhead_ms)
        return clock is None or max(0.0, self.params.movetime - self.move_overhead_ms) / 1000.0 < clock[0]

    @property
    def has_limit(self) -> bool:
        """Whether any depth, node, mate or time limit is set (pondering aside)."""
        return (self.depth is not None or self.nodes is not None or self.params.mate is not None
                or time_limits(self.params, self.turn, self.move_overhead_ms) is not None)

    def ponderhit(self, now: float) -> None:
        """The opponent played the expected move: the search obeys its other limits from ``now`` on,
        its pondering counted as thinking (as Stockfish counts it): a search that has pondered for its
        soft limit or longer stops at once; one that has not may use the rest of its soft limit, and
        its hard limit counts from ``now``."""
        if not self.ponder:
            return
        self.ponder = False
        self.infinite = self.params.infinite
        times = time_limits(self.params, self.turn, self.move_overhead_ms)
        pondered = now - self.clock_start
        self.clock_start = now
        if times is None:
            self.soft_deadline = self.deadline = None
        elif pondered >= times[0]:
            self.soft_deadline = self.deadline = now
        else:
            self.soft_deadline, self.deadline = now + times[0] - pondered, now + times[1]

    def remaining(self, now: float) -> float | None:
        """Seconds left before the hard deadline (never negative), ``None`` without one."""
        return None if self.deadline is None else max(0.0, self.deadline - now)

    def soft_remaining(self, now: float) -> float | None:
        """Seconds left before the soft deadline (never negative), ``None`` without one."""
        return None if self.soft_deadline is None else max(0.0, self.soft_deadline - now)

    def reached(self, nodes_done: int, now: float, min_nodes: int = 0) -> bool:
        """Whether a search that has done ``nodes_done`` nodes must stop at ``now`` (the soft
        deadline: a search that can stop at any moment stops there). The time limit waits for
        ``min_nodes`` (a timed move is never a pure guess); an unbounded search never stops here."""
        if self.unbounded:
            return False
        if self.nodes is not None and nodes_done >= self.nodes:
            return True
        return self.soft_deadline is not None and now >= self.soft_deadline and nodes_done >= min_nodes
