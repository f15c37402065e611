"""``alphazero play``: a person plays a network or any player spec in the terminal (``alphazero.serve.play``)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    play = sub.add_parser("play", help="play a network or any player in the terminal (moves in SAN or UCI on standard input)")
    source = play.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="network file, or run directory (its best network), searched with --sims")
    source.add_argument("--player", metavar="SPEC", help="any player spec (ab:material?movetime=500, uci:..., greedy, ...)")
    play.add_argument("--color", choices=["white", "black"], default="white", help="your colour")
    play.add_argument("--sims", type=int, default=100, help="the network's simulations per move (--checkpoint)")
    play.add_argument("--pgn", default=None, metavar="OUT", help="where the game is saved (default game-YYYYmmdd-HHMMSS.pgn)")
    play.add_argument("--unicode", action="store_true", help="draw pieces as unicode symbols")
    play.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import chess

    from alphazero.serve.play import play_human

    play_human(args.checkpoint, chess.WHITE if args.color == "white" else chess.BLACK, sims=args.sims,
               pgn_path=args.pgn, unicode=args.unicode, player=args.player)
    return 0
