"""``alphazero nnue train``: train an NNUE (``alphazero.learn.nnue_train``) from labelled positions, PGN games
or a run's self-play replay, into the NNUE file the ``ab:`` player loads."""

from __future__ import annotations

import argparse
import json

# Kept light: ``alphazero --help`` must not import torch. The defaults live in
# ``alphazero.learn.nnue_train.TrainOptions``; an option left out is not passed, and the help texts
# below quote those defaults (tests/test_nnue_train.py checks that they agree).
ARCHS = ("simple", "perspective", "layered")
ACTIVATIONS = ("crelu", "screlu")
LOSSES = ("sigmoid-mse", "score", "pqr")


def add_parser(sub: argparse._SubParsersAction) -> None:
    nnue = sub.add_parser("nnue", help="NNUE evaluation nets: train one (nnue train)",
                          description="NNUE nets for the alpha-beta player (ab:PATH).")
    actions = nnue.add_subparsers(dest="nnue_command", required=True)
    train = actions.add_parser(
        "train", help="train an NNUE from a label CSV, bullet text, PGN games or a run's replay; resumable",
        description="Features are computed once per data file and cached (--cache-dir). Progress and one line "
                    "per epoch on stderr, a JSON summary on stdout; NAME.train/ beside --out holds the resumable "
                    "state, metrics.jsonl and losses.png. Running the same command again resumes.")
    train.add_argument("--data", action="append", required=True, metavar="FILE",
                       help="a labelled CSV (fen and score_cp/cp_stm/mate columns, optional result, as `alphazero label` "
                            "and `datagen` write), bullet's text format (FEN | score | result, White's view), a .pgn "
                            "file (value: the results) or a run directory (its self-play replay: z and q); repeatable")
    train.add_argument("--out", required=True, metavar="NET", help="the NNUE file to write (.npz)")
    train.add_argument("--features", metavar="SPEC",
                       help="feature set, blocks joined by '+', e.g. all, all+pv, ka (default all)")
    train.add_argument("--arch", choices=ARCHS, help="network (default perspective: F -> L1x2 -> 1)")
    train.add_argument("--l1", type=int, help="accumulator width (default 128)")
    train.add_argument("--l2", type=int, help="hidden layer width of the layered net (default 32)")
    train.add_argument("--activation", choices=ACTIVATIONS, help="default crelu")
    train.add_argument("--buckets", type=int, metavar="K",
                       help="output buckets by material (bullet's MaterialCount): K output rows, a position's row "
                            "chosen by its number of men (default 1: none; 8 is bullet's usual)")
    train.add_argument("--loss", choices=LOSSES,
                       help="sigmoid-mse (bullet: score/result blend), score (thesis target-score loss), pqr "
                            "(thesis PQR triples; with --init, fine-tuning)")
    train.add_argument("--wdl-lambda", type=float, metavar="L",
                       help="sigmoid-mse target = L * sigmoid(cp/400) + (1 - L) * result; positions without a result "
                            "use the score, without a score the result (default 1.0; datagen's games and played label "
                            "files have results)")
    train.add_argument("--epochs", type=int, help="total passes over the training positions (default 10)")
    train.add_argument("--lr", type=float, help="AdamW learning rate (default 1e-3)")
    train.add_argument("--lr-decay", type=float, help="learning rate factor per epoch (default 0.95)")
    train.add_argument("--batch-size", type=int, help="positions per step (default 4096)")
    train.add_argument("--held-out", type=float, metavar="FRACTION",
                       help="share held out: by game for PGN and replay, by row for a CSV (default 0.1)")
    train.add_argument("--threads", type=int, help="torch threads (default 1)")
    train.add_argument("--seed", type=int, help="initialisation, split and batch order (default 0)")
    train.add_argument("--init", metavar="NET", help="start from this NNUE file (fine-tuning)")
    train.add_argument("--cache-dir", metavar="DIR", help="feature cache (default: nnue-cache/ beside --out)")
    train.add_argument("--restart", action="store_true", help="ignore a saved training state and start over")
    train.add_argument("--keep-noisy", action="store_true",
                       help="also train on noisy positions (side to move in check, or the best/played move captures "
                            "or promotes); by default they are left out, as nnue-pytorch's smart FEN skipping does")
    train.add_argument("--mirror", action="store_true",
                       help="also train on every position without castling rights flipped left-right (files a <-> h; "
                            "chess is symmetric under that flip): twice the positions for the same labels")
    train.set_defaults(func=run)


OPTIONS = ("features", "arch", "l1", "l2", "activation", "buckets", "loss", "wdl_lambda", "epochs", "lr", "lr_decay", "batch_size",
           "held_out", "threads", "seed", "init", "cache_dir")
"""``TrainOptions`` fields the parser fills only when given (None: the trainer's default)."""


def run(args: argparse.Namespace) -> int:
    from alphazero.learn.nnue_train import TrainOptions, train_nnue

    given = {name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None}
    options = TrainOptions(data=tuple(args.data), out=args.out, restart=args.restart, keep_noisy=args.keep_noisy,
                           mirror=args.mirror, **given)
    print(json.dumps(train_nnue(options)))
    return 0
