"""``alphazero datagen``: NNUE training data from our own games (``alphazero.learn.label``'s played games with
an ``ab:`` player); with ``--workers K`` one player per Ray actor (``workers.label``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEFAULT_BOOK = "/usr/share/games/gnuchess/book.bin"
DEFAULT_PLAYER = "ab:material?nodes=5000"


def add_parser(sub: argparse._SubParsersAction) -> None:
    datagen = sub.add_parser(
        "datagen", help="NNUE training data from games our alpha-beta plays against itself (resumable)",
        description="A player plays itself (or an --opponent) from polyglot-book openings plus a few random "
                    "moves; every position it searches is written with its own search score and the game's result. "
                    "A .txt --out is bullet's text format (FEN | score | result, White's view); anything else a CSV "
                    "(fen,score_cp,mate,best_uci,...,result, the side to move's view). Appends to --out and never "
                    "writes a position twice; the same command continues a stopped run.")
    datagen.add_argument("--player", default=DEFAULT_PLAYER, metavar="SPEC",
                         help=f"who plays and scores: ab:material|NNUE?nodes=N&depth=D&movetime=MS, or a uci: engine "
                              f"(default {DEFAULT_PLAYER}: a fixed node count makes the data the same on any machine)")
    datagen.add_argument("--opponent", default="", metavar="SPEC",
                         help="a player for the other side of every game (the --player takes White and Black in "
                              "turn); only the --player's positions are written, with its scores, so the data is "
                              "the --player's labels in positions it would not steer to itself")
    datagen.add_argument("--out", required=True, metavar="FILE.txt|FILE.csv", help="appended to; created if missing")
    datagen.add_argument("--book", default=DEFAULT_BOOK, metavar="BOOK.bin",
                         help=f"polyglot book of openings, 8 plies each, weighted walks (default {DEFAULT_BOOK})")
    datagen.add_argument("--games", type=int, default=None, metavar="N", help="play N games (this run)")
    datagen.add_argument("--positions", type=int, default=None, metavar="N",
                         help="play until --out holds N positions (resumable: the same command finishes it)")
    datagen.add_argument("--minutes", type=float, default=None, metavar="M",
                         help="start no new game after M minutes (games under way are finished and written)")
    datagen.add_argument("--random-moves", type=int, default=5, metavar="K",
                         help="K uniformly random moves in the first 24 plies after the book (default 5)")
    datagen.add_argument("--workers", type=int, default=1, help="K > 1: K players as actors on a private local Ray")
    datagen.add_argument("--seed", type=int, default=None,
                         help="openings and random moves (default: the number of positions already in --out)")
    datagen.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.errors import InputError
    from alphazero.learn.label import run_label

    if args.games is None and args.minutes is None and args.positions is None:
        raise InputError("say how much to play: --games N, --positions N or --minutes M")
    if args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}")
    if not Path(args.book).is_file():
        hint = " (Debian: apt-get install gnuchess-book)" if args.book == DEFAULT_BOOK else ""
        raise InputError(f"--book {args.book}: no such file{hint}")
    if Path(args.book).suffix.lower() != ".bin":
        raise InputError(f"--book {args.book}: expected a polyglot book (.bin)")
    runner = None
    if args.workers > 1:
        import functools

        from workers.label import label_on_ray

        runner = functools.partial(label_on_ray, workers=args.workers)
    try:
        summary = run_label(args.book, args.player, args.out, runner=runner, progress=False, minutes=args.minutes,
                            random_moves=args.random_moves, seed=args.seed, games=args.games,
                            file_positions=args.positions, opponent=args.opponent)
    except KeyboardInterrupt:
        print(f"alphazero datagen: interrupted; the positions in {args.out} are kept, the same command continues",
              file=sys.stderr)
        return 130
    print(json.dumps(summary))
    return 0
