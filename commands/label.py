"""``alphazero label``: label positions with a UCI engine or our alpha-beta, the ``--labeller``
(``alphazero.learn.label``); with
``--workers K`` one engine per Ray actor (``workers.label``)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    label = sub.add_parser(
        "label", help="label positions (a run, PGN, EPD/FEN lines, bullet text, a book's games) into a resumable file",
        description="Writes fen,score_cp,mate,best_uci,wdl_win,wdl_draw,wdl_loss,result, scores from the side to move "
                    "(result: a played game's, 1/0.5/0); a .txt --out is bullet's text format (a book's games only). "
                    "Appends to --out and skips positions already in it; bad input lines are reported and skipped.")
    label.add_argument("positions", metavar="POSITIONS",
                       help="a run directory (its replay games), a .pgn file (every position), a .csv with a fen "
                            "column, bullet text (FEN | score | result), an EPD / one-FEN-per-line file, or a "
                            "polyglot book (.bin: the labeller plays games from its openings)")
    labeller = label.add_mutually_exclusive_group(required=True)
    labeller.add_argument("--labeller", metavar="SPEC",
                          help='who labels: a UCI engine, uci:COMMAND?Option Name=value&depth=D&nodes=N&movetime=MS, or our '
                               'alpha-beta, ab:material|NNUE?nodes=N&depth=D&movetime=MS, '
                               'e.g. "uci:/usr/games/stockfish?depth=12"')
    labeller.add_argument("--engine", help=argparse.SUPPRESS)  # the old name of --labeller, refused by name in run()
    label.add_argument("--out", required=True, metavar="FILE.csv|FILE.txt",
                       help="label file (appended to; created if missing; .txt: bullet's text format)")
    label.add_argument("--workers", type=int, default=1, help="K > 1: K engines as actors on a private local Ray")
    label.add_argument("--limit", type=int, default=None, metavar="N",
                       help="only the first N distinct positions of the input (a book: stop after N new positions)")
    label.add_argument("--minutes", type=float, default=None, metavar="M",
                       help="hand out no new work after M minutes (what is under way is finished and written)")
    label.add_argument("--random-moves", type=int, default=5, metavar="K",
                       help="a book: K uniformly random moves in the first 24 plies of each game (default 5, "
                            "Stockfish gensfen's)")
    label.add_argument("--seed", type=int, default=None,
                       help="a book: openings and random moves (default: the number of rows already in --out)")
    label.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.errors import InputError
    from alphazero.learn.label import run_label

    if args.engine is not None:
        raise InputError(f"--engine is now --labeller: --labeller {shlex.quote(args.engine)}")
    if args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}")
    runner = None
    if args.workers > 1:
        import functools

        from workers.label import label_on_ray

        runner = functools.partial(label_on_ray, workers=args.workers)
    try:
        summary = run_label(args.positions, args.labeller, args.out, limit=args.limit, runner=runner,
                            progress=sys.stderr.isatty(), minutes=args.minutes, random_moves=args.random_moves,
                            seed=args.seed)
    except KeyboardInterrupt:
        print(f"alphazero label: interrupted; the rows in {args.out} are kept, the same command continues", file=sys.stderr)
        return 130
    print(json.dumps(summary))
    return 0
