"""The ``ab:`` player: alpha-beta on the compiled board, made from a spec string.

Owns the spec ``ab:EVAL?depth=D&movetime=MS&nodes=N&hash=MB&share=S&TECHNIQUE=0|1``
(``alphazero.judge.players.make_player`` hands it here) and the player that answers
``choose_moves``. ``EVAL`` is an evaluation name (``material``) or else the path of an NNUE file
(what ``alphazero nnue train --out`` wrote, whatever its name), searched with the quantised network;
a missing file or a file of another kind (a policy/value ``.pt``) is an ``InputError`` naming the spec. Knows nothing of torch, so it does not
import ``alphazero.judge.players`` (which does); it satisfies that module's ``Player`` protocol.

Each name of ``alphabeta.TECHNIQUES`` (``lmp``, ``rfp``, ...) turns that technique of the search on (1)
or off (0), from ``DEFAULT_TECHNIQUES``: how an SPRT pits a search against itself without one change.

Limits combine: the search stops at whichever of depth, nodes or move time comes first. With none
given it thinks 100 ms a move, as a ``uci:`` player does. ``share`` S (0 < S <= 1, default
``DEFAULT_SHARE``) is the part of the move time after which no new iteration starts; the move time
itself is the hard limit, which stops an iteration inside (its best move kept where it beat the
last one, see ``AlphaBeta.search``). Games are searched one after another on
one core; the transposition table is kept from move to move (entries age, see ``alphabeta``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import chess

from alphazero.board.game import MATE_CP
from alphazero.errors import InputError
from alphazero.nets.nnue_file import QuantisedNNUE, load_nnue, quantise
from alphazero.search.alphabeta import MAX_PLY, TECHNIQUES, AlphaBeta, SearchInfo
from alphazero.search.evals import EVALS

DEFAULT_MOVETIME_MS = 100.0
# The whole move time, as Stockfish spends a `go movetime`: against 0.6 (AlphaBeta.search's own default, and the
# UCI engine's ITERATION_SHARE of a clock's soft limit) +34 Elo [+14, +54] at 20 ms a move, SPRT H1 in 646 games
# (docs/RESULTS.md). The UCI engine spends a fixed move time up to the same share.
DEFAULT_SHARE = 1.0
_PARAMETERS = {"depth": int, "movetime": float, "nodes": int, "hash": float, "share": float}
_SWITCHES = {"0": False, "1": True, "off": False, "on": True}


class ABPlayer:
    """An alpha-beta searcher as a player; ``last_info()`` reports its last search."""

    def __init__(self, eval_name: str = "material", depth: int | None = None, movetime_ms: float | None = None,
                 nodes: int | None = None, hash_mb: float = 16, name: str | None = None,
                 nnue: QuantisedNNUE | None = None, techniques: Mapping[str, bool] | None = None,
                 share: float = DEFAULT_SHARE) -> None:
        self.name = name or f"ab:{eval_name}"
        if depth is None and movetime_ms is None and nodes is None:
            movetime_ms = DEFAULT_MOVETIME_MS
        self.depth, self.movetime_ms, self.nodes = depth, movetime_ms, nodes
        self.soft_ms = None if movetime_ms is None else share * movetime_ms
        self.search = AlphaBeta(nnue if nnue is not None else eval_name, tt_mb=hash_mb, techniques=techniques)
        self._last = SearchInfo()
        self.last_scores: list[int | None] = []  # the arena's adjudication reads these

    def choose_moves(self, boards: Sequence[chess.Board]) -> list[chess.Move]:
        moves = []
        self.last_scores = []
        for board in boards:
            move, self._last = self.search.search(board, depth=self.depth, nodes=self.nodes,
                                                  movetime_ms=self.movetime_ms, soft_ms=self.soft_ms)
            moves.append(move)
            self.last_scores.append(search_score_cp(self._last))
        return moves

    def last_info(self) -> SearchInfo:
        """Depth, seldepth, score (cp or mate), nodes, nps, time and PV (UCI) of the last search."""
        return self._last

    def close(self) -> None:
        pass


def search_score_cp(info: SearchInfo) -> int:
    """A search's score for the side to move in centipawns; a mate in n moves ``MATE_CP - n``, being mated
    in n ``-MATE_CP + n`` (python-chess's ``Mate.score(mate_score=MATE_CP)``, as a UCI engine's)."""
    if info.mate is not None:
        return MATE_CP - info.mate if info.mate > 0 else -MATE_CP - info.mate
    return int(info.score_cp or 0)


def parse_ab_spec(spec: str) -> dict:
    """``ab:EVAL?key=value&...`` as ``ABPlayer`` keyword arguments; ``InputError`` names the fault.

    ``eval_name`` is the name or path as written; ``nnue`` the quantised network loaded from that
    path (None for a named evaluation)."""
    kind, _, rest = spec.strip().partition(":")
    if kind.lower() != "ab":
        raise InputError(f"player spec {spec!r}: not an ab: spec")
    eval_name, _, query = rest.partition("?")
    eval_name = eval_name.strip()
    if not eval_name:
        raise InputError(f"player spec {spec!r}: missing evaluation (ab:EVAL, EVAL one of {', '.join(EVALS)} "
                         "or an NNUE file)")
    values: dict[str, float | int] = {}
    techniques: dict[str, bool] = {}
    for part in filter(None, query.split("&")):
        key, equals, text = part.partition("=")
        key, text = key.strip(), text.strip()
        if not equals:
            raise InputError(f"player spec {spec!r}: parameter {part!r} is not name=value")
        if key in values or key in techniques:
            raise InputError(f"player spec {spec!r}: {key} is given twice")
        if key in TECHNIQUES:
            if text.lower() not in _SWITCHES:
                raise InputError(f"player spec {spec!r}: {key}={text!r} must be 1 or 0 (on or off)")
            techniques[key] = _SWITCHES[text.lower()]
            continue
        if key not in _PARAMETERS:
            raise InputError(f"player spec {spec!r}: unknown parameter {key!r} "
                             f"(known: {', '.join([*_PARAMETERS, *TECHNIQUES])})")
        kind_of = _PARAMETERS[key]
        try:
            number = kind_of(text)
        except ValueError:
            raise InputError(f"player spec {spec!r}: {key}={text!r} is not a valid {kind_of.__name__}") from None
        if not number > 0 or number == float("inf"):
            raise InputError(f"player spec {spec!r}: {key} must be a positive finite number")
        values[key] = number
    if values.get("share", 0) > 1:
        raise InputError(f"player spec {spec!r}: share must be at most 1 (the part of movetime after which "
                         "no new iteration starts)")
    if values.get("depth", 0) > MAX_PLY - 8:
        raise InputError(f"player spec {spec!r}: depth must be at most {MAX_PLY - 8}")
    nnue = None
    if eval_name not in EVALS:
        if not Path(eval_name).exists():
            raise InputError(f"player spec {spec!r}: unknown evaluation {eval_name!r} (known: {', '.join(EVALS)}, "
                             "or the path of an NNUE file, and there is no such file)")
        try:
            nnue = quantise(load_nnue(eval_name), where=f"NNUE file {eval_name!r}")
        except InputError as error:
            raise InputError(f"player spec {spec!r}: {error}") from None
    return {"eval_name": eval_name, "depth": values.get("depth"), "movetime_ms": values.get("movetime"),
            "nodes": values.get("nodes"), "hash_mb": values.get("hash", 16), "nnue": nnue, "techniques": techniques,
            "share": values.get("share", DEFAULT_SHARE)}


def make_ab_player(spec: str) -> ABPlayer:
    """The player for an ``ab:`` spec (the table row in ``alphazero.judge.players``)."""
    return ABPlayer(**parse_ab_spec(spec), name=spec.strip())
