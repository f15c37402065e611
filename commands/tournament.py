"""``alphazero tournament``: a round robin of player specs on one Elo scale (``alphazero.judge.tournament``);
with ``--workers K`` every match's game pairs run as Ray tasks on one private local Ray."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from commands.options import PLAYER_SPECS


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tournament", help="round robin of players: maximum-likelihood Elo with 95%% intervals",
                            description=PLAYER_SPECS)
    parser.add_argument("players", nargs="+", metavar="SPEC", help="player specs (two or more)")
    parser.add_argument("--games", type=int, required=True, help="games per pair, even (each opening with both colours)")
    parser.add_argument("--openings", default=None, metavar="FILE", help="polyglot book (.bin) or EPD/FEN file (default: random first plies)")
    parser.add_argument("--opening-plies", type=int, default=None, help="book moves (default 8) or random plies (default 4) per opening")
    parser.add_argument("--max-plies", type=int, default=400, help="longer games are drawn")
    parser.add_argument("--anchor", action="append", default=[], metavar="SPEC[@ELO]",
                        help="SPEC: the player at 0 Elo (default: the first); SPEC@ELO (repeatable): players pinned at "
                             "those ratings, e.g. a Stockfish UCI_Elo level at its UCI_Elo")
    parser.add_argument("--out", default=None, metavar="FILE.jsonl",
                        help="append each finished match here; a rerun plays only the missing pairs")
    parser.add_argument("--workers", type=int, default=1, help="K > 1: play game pairs as tasks on a private local Ray")
    parser.add_argument("--seed", type=int, default=0, help="openings and random players")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.judge.tournament import run_tournament

    def report(match: dict) -> None:
        if not args.json:
            print(f"{match['a']} vs {match['b']}: {match['wins']}/{match['draws']}/{match['losses']} "
                  f"({100 * match['score']:.1f}%)", file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        runner = None
        if args.workers > 1:
            import functools

            import ray

            from workers.arena import play_chunks_on_ray
            from workers.cluster import start_ray

            if start_ray(None, args.workers, object_store_memory_mb=128, log_to_driver=False):
                stack.callback(ray.shutdown)  # one Ray for every match, not one per pair
            runner = functools.partial(play_chunks_on_ray, workers=args.workers)
        result = run_tournament(args.players, args.games, out=args.out, openings_path=args.openings,
                                opening_plies=args.opening_plies, max_plies=args.max_plies, seed=args.seed,
                                anchors=args.anchor, chunk_runner=runner, parallelism=args.workers, on_match=report)
    print(json.dumps(result) if args.json else result["table"])
    return 0
