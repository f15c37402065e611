"""Compile every numba kernel a game or an engine runs, once, into numba's on-disk cache.

Owns ``warm_up``: ``make setup`` runs it (``python -m alphazero.search.warmup``) so that a fresh
clone's first game, first ``go`` or first self-play move loads machine code (about a second) instead
of compiling it (close to a minute on two cores; docs/RESULTS.md). It runs, on toy inputs, the
board kernel (a perft), the alpha-beta search with PeSTO and with an NNUE (one specialisation
serves both, but the NNUE path is run too) and the compiled tree search, PUCT and Gumbel, with a
uniform evaluator. Knows nothing of torch: the NNUE is random, the evaluator a stand-in.

Where the cache goes: every kernel is ``@njit(cache=True)``, and numba writes its ``.nbi``/``.nbc``
files to the ``__pycache__`` folder beside each source file (the checkout itself, for the editable
install ``make setup`` makes; ``.gitignore`` keeps them out of git), or, where that folder cannot be
written, under ``NUMBA_CACHE_DIR`` or the user's cache folder. An entry is checked against its own
source file only: after editing the board kernel, delete the caches (``find alphazero -name
'*.nb[ic]' -delete``) and run this again.
"""

from __future__ import annotations

import time


def warm_up() -> dict[str, float]:
    """Run each compiled path once; seconds per part (compiling, or loading what is cached)."""
    import chess

    seconds: dict[str, float] = {}

    def timed(name: str, fn) -> None:
        started = time.perf_counter()
        fn()
        seconds[name] = round(time.perf_counter() - started, 2)

    def board() -> None:
        from alphazero.board.position import Position

        Position.from_board(chess.Board()).perft(3)

    def alphabeta() -> None:
        from alphazero.nets.nnue_file import random_nnue
        from alphazero.search.alphabeta import AlphaBeta

        AlphaBeta("material", tt_mb=1).search(chess.Board(), depth=3)
        AlphaBeta(random_nnue("all", "perspective", l1=32, seed=0), tt_mb=1).search(chess.Board(), depth=3)

    def tree_search() -> None:
        from alphazero.config import SearchConfig
        from alphazero.search.compiled.batch import CompiledMCTS, UniformPlaneEvaluator

        for algorithm in ("puct", "gumbel"):
            search = CompiledMCTS(UniformPlaneEvaluator(), SearchConfig(algorithm=algorithm, num_simulations=16))
            trees = [search.new_tree(chess.Board(), seed=0), search.new_tree(chess.Board(), seed=1)]
            search.search(trees, add_noise=True, temperature=1.0)
            trees[0].advance(chess.Move.from_uci("e2e4"))  # tree reuse
            search.search(trees[:1], add_noise=False, temperature=0.0)

    timed("board", board)
    timed("alphabeta", alphabeta)
    timed("tree_search", tree_search)
    return seconds


def main() -> None:
    started = time.perf_counter()
    seconds = warm_up()
    parts = ", ".join(f"{name} {value:.1f} s" for name, value in seconds.items())
    print(f"numba kernels compiled and cached in {time.perf_counter() - started:.1f} s ({parts})")


if __name__ == "__main__":
    main()
