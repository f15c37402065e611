"""``alphazero review``: grade every move of finished games with a UCI engine, Lichess's way, and sum up
each player (``alphazero.judge.review``)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "review", help="grade every move of finished games with Stockfish: ACPL, accuracy, inaccuracies, mistakes, blunders",
        description="Stockfish (or any UCI engine) scores every position after the opening; a move that takes 0.1, 0.2 or "
                    "0.3 off the mover's winning chances (Lichess's fit of centipawns) is an inaccuracy, a mistake or a "
                    "blunder. One row per player over all the games, both colours together.")
    parser.add_argument("games", nargs="+", metavar="FILE",
                        help="games: an arena or ladder --out file (.jsonl) or PGN; book plies are not graded")
    parser.add_argument("--engine", default=None, metavar="COMMAND",
                        help="the UCI engine (default: stockfish, /usr/games/stockfish); one thread a process")
    parser.add_argument("--depth", type=int, default=None, help="search depth a position (default 10)")
    parser.add_argument("--nodes", type=int, default=None, help="nodes a position instead of a depth")
    parser.add_argument("--hash", type=int, default=16, metavar="MB", help="the engine's hash (default 16)")
    parser.add_argument("--workers", type=int, default=1, help="engine processes (default 1)")
    parser.add_argument("--skip-plies", type=int, default=None, metavar="N",
                        help="plies not graded at the start of every game (default: the book moves an arena file "
                             "or this project's PGN names, else 0)")
    parser.add_argument("--out", default=None, metavar="FILE.jsonl",
                        help="append each game's scores here; a rerun reviews only the games not there yet")
    parser.add_argument("--blunders", default=None, metavar="FILE.csv",
                        help="write every blunder: fen, move played, engine's best, scores before and after, player")
    parser.add_argument("--json", action="store_true", help="print one JSON object (without the per-game records)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.fileio import atomic_write_text, output_file
    from alphazero.judge.ladder import default_engine
    from alphazero.judge.review import EngineSettings, blunder_rows, format_review, read_games, run_review

    depth = args.depth if args.depth is not None or args.nodes is not None else 10
    settings = EngineSettings(args.engine or default_engine(), depth=depth, nodes=args.nodes, hash_mb=args.hash)
    settings.check()
    if args.blunders:
        output_file(args.blunders, "blunders file (--blunders)")
    games = [game for path in args.games for game in read_games(path, args.skip_plies)]

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty() or done == total or done % 10 == 0:
            print(f"reviewed {done}/{total} games", file=sys.stderr, flush=True)

    try:
        report = run_review(games, settings, workers=args.workers, out=args.out, progress=progress)
    except KeyboardInterrupt:
        where = f"; the games reviewed are in {args.out}, the same command goes on" if args.out else ""
        print(f"alphazero review: stopped{where}", file=sys.stderr)
        return 130
    if args.blunders:
        fields = ["fen", "played", "best", "before", "after", "player", "source", "move_number"]
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(blunder_rows(report["records"]))
        atomic_write_text(args.blunders, text.getvalue())
    report = {key: value for key, value in report.items() if key != "records"}
    print(json.dumps(report) if args.json else format_review(report))
    return 0
