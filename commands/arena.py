"""``alphazero arena``: a match between two player specs (``alphazero.judge.match``); with
``--workers K`` its game pairs run as Ray tasks (``workers.arena``)."""

from __future__ import annotations

import argparse
import json
import sys

from commands.options import PLAYER_SPECS


def add_parser(sub: argparse._SubParsersAction) -> None:
    arena = sub.add_parser("arena", help="a match between two players: W/D/L, Elo with 95%% CI, LOS, SPRT, PGN",
                           description=PLAYER_SPECS)
    arena.add_argument("player_a", metavar="A", help="player spec (results are from A's side)")
    arena.add_argument("player_b", metavar="B", help="player spec")
    arena.add_argument("--games", type=int, required=True, help="number of games, even (each opening with both colours)")
    arena.add_argument("--openings", default=None, metavar="FILE", help="polyglot book (.bin) or EPD/FEN file (default: random first plies)")
    arena.add_argument("--opening-plies", type=int, default=None, help="book moves (default 8) or random plies (default 4) per opening")
    arena.add_argument("--max-plies", type=int, default=400, help="longer games are drawn, termination 'max length'")
    arena.add_argument("--adjudicate", action="store_true",
                       help="end a game once both players' own scores agree (fishtest's rules: a win when each side's last 3 "
                            "moves were scored >= 600 cp for the same side; a draw from move 34 when each side's last 8 were "
                            "within 20 cp); players that report no score (mcts, random, greedy) are never adjudicated")
    arena.add_argument("--pgn", default=None, metavar="OUT", help="write every game to this PGN file")
    arena.add_argument("--out", default=None, metavar="FILE.jsonl",
                       help="keep every finished game here as it ends; the same command with the same file plays only "
                            "the game pairs not yet complete (a stopped match goes on; more --games extend a finished one)")
    arena.add_argument("--sprt", default=None, metavar="ELO0,ELO1", help="stop when an SPRT (alpha=beta=0.05) decides")
    arena.add_argument("--workers", type=int, default=1, help="K > 1: play game pairs as tasks on a private local Ray")
    arena.add_argument("--seed", type=int, default=0, help="openings and random players")
    arena.add_argument("--json", action="store_true", help="print one JSON object")
    arena.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.judge.arena import Adjudication
    from alphazero.judge.match import format_arena_report, parse_sprt, run_arena

    sprt = parse_sprt(args.sprt) if args.sprt else None
    runner = None
    if args.workers > 1:
        import functools

        from workers.arena import play_chunks_on_ray

        runner = functools.partial(play_chunks_on_ray, workers=args.workers)
    try:
        report = run_arena(args.player_a, args.player_b, args.games, openings_path=args.openings,
                           opening_plies=args.opening_plies, max_plies=args.max_plies, seed=args.seed, sprt=sprt,
                           pgn_path=args.pgn, progress=_progress(args.json), chunk_runner=runner,
                           parallelism=args.workers, adjudication=Adjudication() if args.adjudicate else None,
                           out=args.out)
    except KeyboardInterrupt:
        where = f"; the same command goes on from {args.out}" if args.out else " (no --out: its games are lost)"
        print(f"alphazero arena: stopped{where}", file=sys.stderr)
        return 130
    print(json.dumps(report) if args.json else format_arena_report(report))
    return 0


def _progress(json_output: bool) -> str:
    """A rewritten line on a terminal (none under --json, whose stdout may be that terminal); whole
    lines now and then where stderr is a file or a pipe, so a long match run from a script is not blind."""
    if sys.stderr.isatty():
        return "off" if json_output else "tty"
    return "lines"
