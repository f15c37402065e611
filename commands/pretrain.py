"""``alphazero pretrain``: supervised training of a network from labelled positions or PGN games
(``alphazero.learn.pretrain``), saved as a network file ``train --init``, ``mcts:`` and ``policy:`` load."""

from __future__ import annotations

import argparse
import json

from commands.options import add_config_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    pretrain = sub.add_parser(
        "pretrain", help="train the network from a label CSV (alphazero label) or PGN games, with held-out losses",
        description="CSV: policy toward best_uci, value toward the engine's expected score (WDL, mate, or cp). "
                    "PGN: policy toward the move played, value toward the result. One line per epoch, then a JSON summary.")
    pretrain.add_argument("data", metavar="DATA", help="label CSV (fen,best_uci and scores) or .pgn file")
    add_config_args(pretrain)  # the network's shape and the optimizer (train.*)
    pretrain.add_argument("--out", required=True, metavar="NET", help="network file to write")
    pretrain.add_argument("--epochs", type=int, default=1, help="passes over the training positions")
    pretrain.add_argument("--held-out", type=float, default=0.1, metavar="FRACTION",
                          help="share held out (by game for PGN, by row for CSV), seeded by the config's seed")
    pretrain.add_argument("--value", choices=("wdl", "cp"), default="wdl",
                          help="a CSV's value target: the engine's WDL when the row has it (default), or its "
                               "centipawns through Lichess's win-probability model (keeps the size of an advantage)")
    pretrain.add_argument("--threads", type=int, default=1, help="torch threads")
    pretrain.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from alphazero.config import load_config
    from alphazero.learn.pretrain import pretrain

    config = load_config(args.config, args.overrides)
    torch.set_num_threads(max(1, args.threads))
    summary = pretrain(args.data, config, args.out, epochs=args.epochs, held_out=args.held_out,
                       log=lambda line: print(line, flush=True), value_from=args.value)
    print(json.dumps(summary))
    return 0
