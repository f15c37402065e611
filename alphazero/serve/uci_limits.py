"""UCI search limits: the arguments of ``go`` and the stop rules they imply, with no threads.

Owns ``GoParams`` (one ``go`` command, parsed by ``parse_go``), the time manager (``time_budget``),
the depth-to-simulations map of the tree search (``depth_to_nodes``) and ``Limits``: the stop rules
of one running search as a plain object that the caller asks, with its own clock readings, "stop
now?" (``reached``) and "how long is left?" (``remaining``). Knows nothing of threads,
streams, networks or boards beyond the side to move; the engine (``alphazero.serve.uci``) owns those and
guards a shared ``Limits`` with its lock, because ``ponderhit`` changes it mid-search.

Rules (several limits may be given; the first reached ends the search):

* ``nodes N``: N nodes (simulations for the tree search, nodes for alpha-beta).
* ``movetime MS``: ``MS - MoveOverhead`` milliseconds.
* ``wtime/btime/winc/binc/movestogo``: for the side to move,
  ``min(remaining / (movestogo or 30) + 0.75 * increment - MoveOverhead, remaining / 3)``.
* ``depth D``: D plies for alpha-beta; the tree search maps it to ``depth_to_nodes(D)`` simulations.
* ``infinite`` / ``ponder``: no limit applies until ``stop``; ``ponderhit`` turns a ponder search into
  the search its other limits describe, its clock starting at the ``ponderhit``.
* none of these: the engine's default (``Limits.has_limit`` is false).

Times here are seconds of ``time.monotonic()``; ``GoParams`` keeps the milliseconds as sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import chess

DEFAULT_MOVES_TO_GO = 30
INCREMENT_SHARE = 0.75
MAX_NODES = 1_000_000_000

GO_INT_PARAMS = ("wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate", "movetime")
GO_FLAGS = ("infinite", "ponder")
GO_KEYWORDS = set(GO_INT_PARAMS) | set(GO_FLAGS) | {"searchmoves"}


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
    the smaller wins. Never below zero (an engine's minimum search still runs).
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
    """Simulations standing in for ``go depth D`` in the tree search: ``2 ** (D + 3)``, capped at ``MAX_NODES``."""
    return min(MAX_NODES, 2 ** min(depth + 3, 40))


@dataclass
class Limits:
    """The stop rules of one search. Mutable only through ``ponderhit``; every query takes ``now``.

    ``depth``/``nodes`` are ``None`` when unlimited; ``deadline`` is absolute (monotonic seconds) and
    ``None`` while pondering or without a time limit; ``clock_start`` is when the time started
    counting (the ``go``, or the ``ponderhit``).
    """

    params: GoParams
    turn: chess.Color
    move_overhead_ms: float
    clock_start: float
    depth: int | None
    nodes: int | None
    deadline: float | None
    infinite: bool
    ponder: bool

    @classmethod
    def from_go(cls, params: GoParams, turn: chess.Color, move_overhead_ms: float, now: float,
                default_nodes: int | None = None) -> Limits:
        """The limits of ``go params`` for ``turn`` received at ``now``; ``default_nodes`` applies
        when the command sets no depth, nodes, time or ``infinite`` (also after a ``ponderhit``)."""
        budget = time_budget(params, turn, move_overhead_ms)
        nodes = params.nodes
        if nodes is None and params.depth is None and budget is None and not params.infinite:
            nodes = default_nodes
        return cls(params=params, turn=turn, move_overhead_ms=move_overhead_ms, clock_start=now,
                   depth=params.depth, nodes=nodes,
                   deadline=None if budget is None or params.ponder else now + budget,
                   infinite=params.infinite, ponder=params.ponder)

    @property
    def unbounded(self) -> bool:
        """True while the search must go on until ``stop`` (infinite, or pondering before ``ponderhit``)."""
        return self.infinite or self.ponder

    @property
    def has_limit(self) -> bool:
        """Whether any depth, node or time limit is set (pondering aside)."""
        return (self.depth is not None or self.nodes is not None
                or time_budget(self.params, self.turn, self.move_overhead_ms) is not None)

    def ponderhit(self, now: float) -> None:
        """The opponent played the expected move: the search obeys its other limits from ``now`` on."""
        if not self.ponder:
            return
        self.ponder = False
        self.infinite = self.params.infinite
        budget = time_budget(self.params, self.turn, self.move_overhead_ms)
        self.clock_start = now
        self.deadline = None if budget is None else now + budget

    def remaining(self, now: float) -> float | None:
        """Seconds left before the deadline (never negative), ``None`` without one."""
        return None if self.deadline is None else max(0.0, self.deadline - now)

    def reached(self, nodes_done: int, now: float, min_nodes: int = 0) -> bool:
        """Whether a search that has done ``nodes_done`` nodes must stop at ``now``. The time limit
        waits for ``min_nodes`` (a timed move is never a pure guess); an unbounded search never stops here."""
        if self.unbounded:
            return False
        if self.nodes is not None and nodes_done >= self.nodes:
            return True
        return self.deadline is not None and now >= self.deadline and nodes_done >= min_nodes
