"""Games of the UCI engine against itself on a real clock, through python-chess: does it lose on time?

Starts two engine processes (``alphazero uci --player SPEC``, by default ``ab:material`` on both
sides) and plays ``--games`` games at ``--base`` seconds plus ``--inc`` a move (1 s + 0.01 s by
default), each from a few random opening plies (seeded), colours alternating. The clocks are kept
here as a GUI keeps them: the wall time around each ``engine.play(board, Limit(white_clock=...,
black_clock=..., white_inc=..., black_inc=...))`` call (the pipe, python-chess and the engine all
count) is taken from the mover's clock, then the increment is added. A clock below zero loses the
game on time. Games end by the rules (threefold and fifty moves claimed) or at ``--max-plies``
(a draw).

    .venv/bin/python tools/uci_clock_match.py --games 100            # one JSON line per game, then a summary
    .venv/bin/python tools/uci_clock_match.py --games 20 --spec "ab:docs/nets/nnue-all-128.npz"

The summary: games, losses on time, results, the least time left on any clock after a move and
the longest single move, in seconds, and the machine's load average at the start and the end. ``tests/test_uci.py`` plays a few moves with ``play_game``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import chess
import chess.engine

REPO = Path(__file__).resolve().parents[1]


def engine_argv(spec: str) -> list[str]:
    """The command line of an ``alphazero uci --player SPEC`` engine, with this interpreter."""
    return [sys.executable, "-m", "commands.main", "uci", "--player", spec]


def random_opening(rng: random.Random, plies: int) -> chess.Board:
    board = chess.Board()
    for _ in range(plies):
        moves = list(board.legal_moves)
        if not moves or board.is_game_over():
            break
        board.push(rng.choice(moves))
    return board


def play_game(white: chess.engine.SimpleEngine, black: chess.engine.SimpleEngine, base: float, inc: float,
              opening: chess.Board, max_plies: int = 400, game_id: object = None) -> dict[str, Any]:
    """One game from ``opening`` on a clock of ``base`` seconds plus ``inc`` a move for each side.

    Returns ``result`` ("1-0", "0-1", "1/2-1/2"), ``termination`` ("time forfeit", "checkmate", ...),
    ``plies`` played here, ``min_left`` (the least time any clock kept after a move, seconds; negative
    on a loss on time) and ``max_move`` (the longest move, seconds)."""
    board = opening.copy()
    clocks = {chess.WHITE: base, chess.BLACK: base}
    engines = {chess.WHITE: white, chess.BLACK: black}
    game = game_id if game_id is not None else object()
    min_left, max_move, plies = base, 0.0, 0
    while plies < max_plies:
        outcome = board.outcome(claim_draw=True)
        if outcome is not None:
            return {"result": outcome.result(), "termination": outcome.termination.name.lower(), "plies": plies,
                    "min_left": round(min_left, 4), "max_move": round(max_move, 4)}
        side = board.turn
        limit = chess.engine.Limit(white_clock=clocks[chess.WHITE], black_clock=clocks[chess.BLACK],
                                   white_inc=inc, black_inc=inc)
        started = time.monotonic()
        played = engines[side].play(board, limit, game=game)
        elapsed = time.monotonic() - started
        clocks[side] -= elapsed
        max_move = max(max_move, elapsed)
        min_left = min(min_left, clocks[side])
        if clocks[side] < 0:
            return {"result": "0-1" if side == chess.WHITE else "1-0", "termination": "time forfeit",
                    "plies": plies, "min_left": round(min_left, 4), "max_move": round(max_move, 4),
                    "loser": "white" if side == chess.WHITE else "black"}
        clocks[side] += inc
        if played.move is None or played.move not in board.legal_moves:
            raise RuntimeError(f"illegal or no move {played.move} in {board.fen()}")
        board.push(played.move)
        plies += 1
    return {"result": "1/2-1/2", "termination": "max plies", "plies": plies, "min_left": round(min_left, 4),
            "max_move": round(max_move, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--base", type=float, default=1.0, help="seconds on each clock at the start")
    parser.add_argument("--inc", type=float, default=0.01, help="seconds added after each move")
    parser.add_argument("--spec", default="ab:material", help="the player spec both engines serve")
    parser.add_argument("--opening-plies", type=int, default=4, help="random plies before the clock starts")
    parser.add_argument("--max-plies", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    engines = [chess.engine.SimpleEngine.popen_uci(engine_argv(args.spec), cwd=str(REPO), timeout=120)
               for _ in range(2)]
    summary: dict[str, Any] = {"spec": args.spec, "base": args.base, "inc": args.inc, "games": 0,
                               "time_losses": 0, "results": {}, "min_left": args.base, "max_move": 0.0,
                               "load_start": os.getloadavg()[0]}
    try:
        for index in range(args.games):
            first, second = (engines[0], engines[1]) if index % 2 == 0 else (engines[1], engines[0])
            record = play_game(first, second, args.base, args.inc, random_opening(rng, args.opening_plies),
                               args.max_plies, game_id=index)
            record["game"] = index
            print(json.dumps(record), flush=True)
            summary["games"] += 1
            summary["time_losses"] += record["termination"] == "time forfeit"
            summary["results"][record["termination"]] = summary["results"].get(record["termination"], 0) + 1
            summary["min_left"] = min(summary["min_left"], record["min_left"])
            summary["max_move"] = max(summary["max_move"], record["max_move"])
    finally:
        for engine in engines:
            try:
                engine.quit()
            except Exception:
                engine.close()
    summary["load_end"] = os.getloadavg()[0]  # the machine's own load: stalls of a busy machine cost time too
    print(json.dumps({"summary": summary}), flush=True)
    return 1 if summary["time_losses"] else 0


if __name__ == "__main__":
    sys.exit(main())
