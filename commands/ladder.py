"""``alphazero ladder``: one player's Elo on Stockfish's ``UCI_Elo`` scale (``alphazero.judge.ladder``); with
``--workers K`` each round's games run as Ray tasks (``workers.ladder``) on one private local Ray."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from commands.options import PLAYER_SPECS


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ladder", help="a player's Elo on Stockfish's UCI_Elo scale: levels bracket it, links below the floor",
                            description=PLAYER_SPECS)
    parser.add_argument("player", metavar="SPEC", help="the player to rate")
    parser.add_argument("--games", type=int, default=200, help="games the player plays in all (default 200)")
    parser.add_argument("--openings", default=None, metavar="BOOK", help="polyglot book (.bin) or EPD/FEN file (default: random first plies)")
    parser.add_argument("--opening-plies", type=int, default=None, help="book moves (default 8) or random plies (default 4) per opening")
    parser.add_argument("--out", default=None, metavar="FILE.jsonl",
                        help="append each game here; a rerun goes on where it stopped, and another player's ladder reuses the links")
    parser.add_argument("--workers", type=int, default=1, help="K > 1: play each round's games as tasks on a private local Ray")
    parser.add_argument("--engine", default=None, metavar="COMMAND",
                        help="the UCI engine whose UCI_Elo levels are the scale (default: stockfish, /usr/games/stockfish)")
    parser.add_argument("--movetime", type=float, default=100.0, metavar="MS", help="the levels' time a move (default 100)")
    parser.add_argument("--link", action="append", default=None, metavar="SPEC",
                        help="a player below the engine's floor, laddered once and then played by weaker players "
                             "(repeatable, strongest first; default ab:material?depth=1; 'none' for no link)")
    parser.add_argument("--link-games", type=int, default=200, help="games of each link against the levels (default 200)")
    parser.add_argument("--guess", type=float, default=1500.0, metavar="ELO", help="the first round's level (default 1500)")
    parser.add_argument("--precision", type=float, default=None, metavar="ELO",
                        help="stop early once the 95%% interval's half width is at most ELO")
    parser.add_argument("--batch", type=int, default=None, help="games a round, even (default max(10, 2K))")
    parser.add_argument("--step", type=int, default=50, metavar="ELO", help="the levels' grid (default 50)")
    parser.add_argument("--max-plies", type=int, default=400, help="longer games are drawn")
    parser.add_argument("--adjudicate", action="store_true",
                        help="end a game once both players' own scores agree (fishtest's rules: a win when each side's last 3 "
                            "moves were scored >= 600 cp for the same side; a draw from move 34 when each side's last 8 were "
                            "within 20 cp); players that report no score (mcts, random, greedy) are never adjudicated")
    parser.add_argument("--seed", type=int, default=0, help="openings and random players")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.errors import InputError
    from alphazero.judge.arena import Adjudication
    from alphazero.judge.ladder import DEFAULT_LINKS, LadderSettings, format_ladder_report, play_here, run_ladder

    if args.workers < 1:
        raise InputError(f"--workers must be positive, got {args.workers}")
    links = DEFAULT_LINKS if args.link is None else [link for link in args.link if link.strip().lower() != "none"]
    batch = args.batch if args.batch is not None else max(10, 2 * args.workers)
    settings = LadderSettings(batch=batch, guess=args.guess, step=args.step, link_games=args.link_games,
                              openings=args.openings, opening_plies=args.opening_plies, max_plies=args.max_plies,
                              seed=args.seed, adjudication=Adjudication() if args.adjudicate else None)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        runner = play_here
        if args.workers > 1:
            settings.check()  # before Ray starts
            import functools

            import ray

            from workers.cluster import start_ray
            from workers.ladder import play_on_ray

            if start_ray(None, args.workers, object_store_memory_mb=128, log_to_driver=False):
                stack.callback(ray.shutdown)  # one Ray for every round
            runner = functools.partial(play_on_ray, workers=args.workers)
        try:
            report = run_ladder(args.player, args.games, out=args.out, engine=args.engine, movetime_ms=args.movetime,
                                links=links, settings=settings, precision=args.precision, runner=runner, log=log)
        except KeyboardInterrupt:
            where = f"; the same command goes on from {args.out}" if args.out else " (no --out: its games are lost)"
            print(f"alphazero ladder: stopped{where}", file=sys.stderr)
            return 130
    print(json.dumps(report) if args.json else format_ladder_report(report))
    return 0
