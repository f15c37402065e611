"""``alphazero ratings``: Elo of every generation of a run, and of anchor players (``alphazero.judge.ratings``)."""

from __future__ import annotations

import argparse
import json
import sys

from commands.options import PLAYER_SPECS


def add_parser(sub: argparse._SubParsersAction) -> None:
    ratings = sub.add_parser("ratings", help="Elo of every generation of a run (and anchors), maximum likelihood",
                             description=PLAYER_SPECS)
    ratings.add_argument("run_dir", help="run directory")
    ratings.add_argument("--anchor", action="append", default=[], metavar="SPEC[@ELO]",
                         help="anchor player, plays --games against the first, best and last generation (repeatable); "
                              "SPEC@ELO pins it at ELO (e.g. a Stockfish UCI_Elo level at its UCI_Elo), else the first is 0 Elo")
    ratings.add_argument("--games", type=int, default=20, help="games per extra match")
    ratings.add_argument("--sims", type=int, default=None, help="simulations of the generations (default: the run's arena setting)")
    ratings.add_argument("--max-plies", type=int, default=400, help="longer games are drawn")
    ratings.add_argument("--plot", default=None, metavar="OUT.png", help="plot path (default RUN_DIR/ratings/elo.png)")
    ratings.add_argument("--seed", type=int, default=0)
    ratings.add_argument("--json", action="store_true", help="print one JSON object")
    ratings.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.judge.ratings import run_ratings

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    report = run_ratings(args.run_dir, anchors=args.anchor, games=args.games, sims=args.sims,
                         max_plies=args.max_plies, seed=args.seed, plot_path=args.plot, log=log)
    if args.json:
        print(json.dumps({key: value for key, value in report.items() if key != "table"}))
    else:
        print(report["table"])
        print(f"anchor {report['scale']} Elo; {report['games']} games ({report['new_games']} new); plot {report['plot']}")
    return 0
