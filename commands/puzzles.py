"""``alphazero puzzles``: the share of only-move puzzles a player solves (``alphazero.judge.puzzles``)."""

from __future__ import annotations

import argparse
import json

from commands.options import PLAYER_SPECS


def add_parser(sub: argparse._SubParsersAction) -> None:
    puzzles = sub.add_parser("puzzles", help="share of only-move puzzles a player solves, 95%% Wilson interval",
                             description=PLAYER_SPECS)
    puzzles.add_argument("file", metavar="FILE.csv", help="CSV with header and columns fen,best_uci")
    puzzles.add_argument("--player", required=True, metavar="SPEC", help="player spec")
    puzzles.add_argument("--limit", type=int, default=None, help="only the first N puzzles")
    puzzles.add_argument("--seed", type=int, default=0)
    puzzles.add_argument("--json", action="store_true", help="print one JSON object")
    puzzles.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.judge.puzzles import format_puzzle_report, run_puzzles

    report = run_puzzles(args.file, args.player, limit=args.limit, seed=args.seed)
    print(json.dumps(report) if args.json else format_puzzle_report(report))
    return 0
