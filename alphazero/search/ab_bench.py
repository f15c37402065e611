"""Benchmarks of the compiled board and the alpha-beta search, one core, one process.

Owns the fixed positions and the figures ``alphazero bench --json`` reports for them:
``perft_nodes_per_s`` (leaves per second of a perft, bulk counted: the last ply's moves are counted,
not played), ``ab_nodes_per_s`` (``ab:material`` searching ``MIDDLEGAMES`` to a fixed depth, each
from an empty table), ``nodes_to_depth`` (the same search's node count, how pruning is judged),
``ab_nnue_nodes_per_s`` (the same positions searched with the default NNUE, ``DEFAULT_NNUE``: features
``all``, arch perspective, L1 128, crelu, quantised; random weights of that shape unless a file is
given, since the rate depends on the shape, not on what the weights learnt; a node budget per
position rather than a depth, as a random net's tree has no typical size) and ``startup_seconds``
(a fresh interpreter's import plus first call, compiling or loading the cache).

Rates are per CPU second of this (single-threaded) process, ``time.process_time``: one core's
figure, which a busy machine sharing its cores does not halve as it halves a wall-clock rate.
Run ``python -m alphazero.search.ab_bench`` for all of them as one JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import chess

# Bratko-Kopec middlegames (1-5, 7, 9, 10), "kiwipete" and the sixth perft position of the Chess
# Programming Wiki: open and closed, both sides to move, castled and not.
MIDDLEGAMES = [
    "1k1r4/pp1b1R2/3q2pp/4p3/2B5/4Q3/PPP2B2/2K5 b - - 0 1",
    "3r1k2/4npp1/1ppr3p/p6P/P2PPPP1/1NR5/5K2/2R5 w - - 0 1",
    "2q1rr1k/3bbnnp/p2p1pp1/2pPp3/PpP1P1P1/1P2BNNP/2BQ1PRK/7R b - - 0 1",
    "rnbqkb1r/p3pppp/1p6/2ppP3/3N4/2P5/PPP1QPPP/R1B1KB1R w KQkq - 0 1",
    "r1b2rk1/2q1b1pp/p2ppn2/1p6/3QP3/1BN1B3/PPP3PP/R4RK1 w - - 0 1",
    "1nk1r1r1/pp2n1pp/4p3/q2pPp1N/b1pP1P2/B1P2R2/2P1B1PP/R2Q2K1 w - - 0 1",
    "2kr1bnr/pbpq4/2n1pp2/3p3p/3P1P1B/2N2N1Q/PPP3PP/2KR1B1R w - - 0 1",
    "3rr1k1/pp3pp1/1qn2np1/8/3p4/PP1R1P2/2P1NQPP/R1B3K1 b - - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
]
KIWIPETE = MIDDLEGAMES[8]
DEFAULT_NNUE: dict[str, Any] = {"features": "all", "arch": "perspective", "l1": 128, "activation": "crelu"}


def perft_nodes_per_s(fen: str = chess.STARTING_FEN, depth: int = 5, bulk: bool = True) -> float:
    """Perft leaves per second (start position depth 5: 4,865,609 leaves), after a warm-up call."""
    from alphazero.board.position import Position

    position = Position.from_fen(fen)
    position.perft(2, bulk)  # compile or load the cache outside the timing
    started = time.process_time()
    leaves = position.perft(depth, bulk)
    return leaves / (time.process_time() - started)


def _search_all(depth: int, null_move: bool, lmr: bool) -> tuple[int, float, list[str]]:
    from alphazero.search.alphabeta import AlphaBeta

    search = AlphaBeta("material", null_move=null_move, lmr=lmr)
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
    nodes, seconds, _ = _search_all(depth, True, True)
    return nodes / seconds


def nodes_to_depth(depth: int = 8, null_move: bool = True, lmr: bool = True) -> dict:
    """Total nodes, seconds and chosen moves searching ``MIDDLEGAMES`` to ``depth`` with the given
    pruning: the measure that decides whether null move and LMR pay."""
    nodes, seconds, moves = _search_all(depth, null_move, lmr)
    return {"depth": depth, "null_move": null_move, "lmr": lmr, "nodes": nodes, "seconds": round(seconds, 3),
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


_FIRST_CALL = ("import time; w, c = time.perf_counter(), time.process_time(); import chess; "
               "from alphazero.search.alphabeta import AlphaBeta; "
               "AlphaBeta().search(chess.Board(), depth=3); "
               "from alphazero.board.position import Position; Position.from_fen(chess.STARTING_FEN).perft(3); "
               "print(time.perf_counter() - w, time.process_time() - c)")


def startup_seconds() -> dict:
    """Seconds (wall and CPU) a fresh interpreter takes to import and run a first search and perft:
    ``cold`` with an empty numba cache (everything compiles), ``cached`` the same again (everything
    loads). Uses a temporary ``NUMBA_CACHE_DIR``, leaving the package's own cache alone."""
    figures = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("cold", "cached"):
            result = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True,
                                    check=True)
            wall, cpu = result.stdout.strip().splitlines()[-1].split()
            figures[f"{label}_wall"] = round(float(wall), 3)
            figures[f"{label}_cpu"] = round(float(cpu), 3)
    return figures


def main() -> None:
    report = {
        "perft_nodes_per_s": round(perft_nodes_per_s()),
        "perft_full_nodes_per_s": round(perft_nodes_per_s(KIWIPETE, 4, bulk=False)),
        "ab_nodes_per_s": round(ab_nodes_per_s()),
        "ab_nnue_nodes_per_s": round(ab_nnue_nodes_per_s()),
        "startup_seconds": startup_seconds(),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
