"""Does Lazy SMP pay? Time to depth with a helper thread searching the same position on the same table.

The compiled iterations release the GIL, so a second ``AlphaBeta`` on another thread, sharing the
main search's transposition table (``helper.tt = main.tt``) and nothing else, searches in parallel:
the classic Lazy SMP, in which the helper's entries let the main search cut earlier. This probe times
the main search to ``--depth`` over the benchmark's middlegames (``alphazero.bench.positions``), each
from an empty table, with one thread and with two, alternating ``--rounds`` times, and prints one JSON
line per round. The engine's ``Threads`` option stays accepted and ignored while two threads are not
faster here (docs/RESULTS.md has the figures). An experiment, not the engine: the table's two words
per entry are written without a lock (a torn entry costs at most a wrong cut-off, never an illegal move).

    .venv/bin/python tools/lazy_smp_probe.py --depth 9 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import chess

from alphazero.bench.positions import MIDDLEGAMES
from alphazero.search.alphabeta import AlphaBeta


def time_to_depth(main: AlphaBeta, helper: AlphaBeta | None, depth: int) -> dict[str, float]:
    """Wall seconds and main-search nodes to ``depth`` over ``MIDDLEGAMES``; ``helper`` (sharing
    ``main``'s table) searches beside it until the main search is done."""
    wall, nodes = 0.0, 0
    for fen in MIDDLEGAMES:
        main.clear()
        board = chess.Board(fen)
        thread = None
        if helper is not None:
            helper.history[:] = 0
            helper.reset_abort()
            thread = threading.Thread(target=helper.search, args=(board,), kwargs={"depth": 60})
            thread.start()
        started = time.perf_counter()
        _, info = main.search(board, depth=depth)
        wall += time.perf_counter() - started
        nodes += info.nodes
        if helper is not None and thread is not None:
            helper.abort()
            thread.join()
    return {"wall_s": round(wall, 3), "main_nodes": nodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hash", type=float, default=64, help="MB of the shared table")
    args = parser.parse_args()
    search = AlphaBeta("material", tt_mb=args.hash)
    helper = AlphaBeta("material", tt_mb=1)
    helper.tt = search.tt
    search.search(chess.Board(), depth=2)  # load the kernels outside the timing
    for _ in range(args.rounds):
        for threads in (1, 2):
            row = time_to_depth(search, helper if threads == 2 else None, args.depth)
            print(json.dumps({"threads": threads, "depth": args.depth, **row}), flush=True)


if __name__ == "__main__":
    main()
