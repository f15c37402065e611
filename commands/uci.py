"""``alphazero uci``: serve a network or any player spec as a UCI engine (``alphazero.serve.uci``)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    uci = sub.add_parser("uci", help="serve a network (or any player spec) as a UCI chess engine on stdin/stdout")
    served = uci.add_mutually_exclusive_group(required=True)
    served.add_argument("--checkpoint", help="network file, or run directory (its best network): tree search")
    served.add_argument("--player", metavar="SPEC",
                        help="any player spec, e.g. ab:material (alpha-beta with info lines), greedy, mcts:PATH")
    uci.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    uci.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.player is not None:
        from alphazero.serve.uci import run_uci_player

        return run_uci_player(args.player, device=args.device)
    from alphazero.serve.uci import run_uci

    return run_uci(args.checkpoint, device=args.device)
