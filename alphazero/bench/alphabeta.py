"""Benchmarks of the compiled board and the alpha-beta search, one core, one process.

Owns the figures ``alphazero bench --json`` reports for them:
``perft_nodes_per_s`` (leaves per second of a perft, bulk counted: the last ply's moves are counted,
not played), ``ab_nodes_per_s`` (``ab:material`` searching ``positions.MIDDLEGAMES`` to a fixed depth, each
from an empty table), ``nodes_to_depth`` (the same search's node count, how pruning is judged),
``ab_nnue_nodes_per_s`` (the same positions searched with the default NNUE, ``DEFAULT_NNUE``: features
``all``, arch perspective, L1 128, crelu, quantised; random weights of that shape unless a file is
given, since the rate depends on the shape, not on what the weights learnt; a node budget per
position rather than a depth, as a random net's tree has no typical size) and ``startup_seconds``
(a fresh interpreter's import plus first call, compiling or loading the cache).

Rates are per CPU second of this (single-threaded) process, ``time.process_time``: one core's
figure, which a busy machine sharing its cores does not halve as it halves a wall-clock rate.
Run ``python -m alphazero.bench.alphabeta`` for all of them as one JSON object.
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

import chess

from alphazero.bench.positions import KIWIPETE, MIDDLEGAMES
from alphazero.bench.shared import startup_seconds

DEFAULT_NNUE: dict[str, Any] = {"features": "all", "arch": "perspective", "l1": 128, "activation": "crelu"}


def perft_nodes_per_s(fen: str = chess.STARTING_FEN, depth: int = 5, bulk: bool = True) -> float:
    """Perft leaves per second (start position depth 5: 4,865,609 leaves), after a warm-up call."""
    from alphazero.board.position import Position

    position = Position.from_fen(fen)
    position.perft(2, bulk)  # compile or load the cache outside the timing
    started = time.process_time()
    leaves = position.perft(depth, bulk)
    return leaves / (time.process_time() - started)


def _search_all(depth: int, techniques: Mapping[str, bool] | None = None) -> tuple[int, float, list[str]]:
    from alphazero.search.alphabeta import AlphaBeta

    search = AlphaBeta("material", techniques=techniques)
    search.search(chess.Board(), depth=2)  # compile or load the cache outside the timing
    nodes, seconds, moves = 0, 0.0, []
    for fen in MIDDLEGAMES:
        search.clear()
        started = time.process_time()
        move, info = search.search(chess.Board(fen), depth=depth)
        seconds += time.process_time() - started
        nodes += info.nodes
        moves.append(move.uci())
    return nodes, seconds, moves


def ab_nodes_per_s(depth: int = 8) -> float:
    """Search nodes (interior and quiescence) per second of ``ab:material`` over ``MIDDLEGAMES``."""
    nodes, seconds, _ = _search_all(depth)
    return nodes / seconds


def nodes_to_depth(depth: int = 8, techniques: Mapping[str, bool] | None = None) -> dict:
    """Total nodes, seconds and chosen moves searching ``MIDDLEGAMES`` to ``depth`` with the default
    techniques changed by ``techniques`` (name -> on): how much a pruning shrinks the tree (whether
    it pays is an SPRT's question: ``arena --sprt``)."""
    nodes, seconds, moves = _search_all(depth, techniques)
    return {"depth": depth, "techniques": dict(techniques or {}), "nodes": nodes, "seconds": round(seconds, 3),
            "moves": moves}


def ab_nnue_nodes_per_s(nodes: int = 200_000, path: str | None = None) -> float:
    """Search nodes per second of alpha-beta with an NNUE (``path``, else ``DEFAULT_NNUE`` with random
    weights) over ``MIDDLEGAMES``, ``nodes`` a position, each from an empty table."""
    from alphazero.nets.nnue_file import load_nnue, quantise, random_nnue
    from alphazero.search.alphabeta import AlphaBeta

    net = load_nnue(path) if path else random_nnue(**DEFAULT_NNUE)
    search = AlphaBeta(quantise(net))
    search.search(chess.Board(), depth=2)  # compile or load the cache outside the timing
    total, seconds = 0, 0.0
    for fen in MIDDLEGAMES:
        search.clear()
        started = time.process_time()
        _, info = search.search(chess.Board(fen), nodes=nodes)
        seconds += time.process_time() - started
        total += info.nodes
    return total / seconds


# A fresh interpreter's import of the alpha-beta search and the board, a first search and a perft.
FIRST_SEARCH = ("import chess\n"
                "from alphazero.search.alphabeta import AlphaBeta\n"
                "AlphaBeta().search(chess.Board(), depth=3)\n"
                "from alphazero.board.position import Position\n"
                "Position.from_fen(chess.STARTING_FEN).perft(3)")


def main() -> None:
    report = {
        "perft_nodes_per_s": round(perft_nodes_per_s()),
        "perft_full_nodes_per_s": round(perft_nodes_per_s(KIWIPETE, 4, bulk=False)),
        "ab_nodes_per_s": round(ab_nodes_per_s()),
        "ab_nnue_nodes_per_s": round(ab_nnue_nodes_per_s()),
        "startup_seconds": startup_seconds(FIRST_SEARCH, digits=3),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
