"""``alphazero nnue train``: train an NNUE (``alphazero.learn.nnue_train``) from labelled positions, PGN games
or a run's self-play replay, into the NNUE file the ``ab:`` player loads; ``alphazero nnue loop``: turns of a
net's own games, it fine-tuned on them and a gauntlet (``alphazero.learn.nnue_loop``)."""

from __future__ import annotations

import argparse
import json

from alphazero.learn.nnue_loop import LoopSettings

# Kept light: ``alphazero --help`` must not import torch. The defaults live in
# ``alphazero.learn.nnue_train.TrainOptions``; an option left out is not passed, and the help texts
# below quote those defaults (tests/test_nnue_train.py checks that they agree).
ARCHS = ("simple", "perspective", "layered")
ACTIVATIONS = ("crelu", "screlu")
LOSSES = ("sigmoid-mse", "score", "pqr")
LOOP = LoopSettings(start="")  # the loop's defaults, quoted by its help texts


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
    train.add_argument("--l1", type=int, help="accumulator width (default 128; with --init, a wider one "
                       "grows that net, computing the same function at the start)")
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
    train.add_argument("--epochs", type=int, help="total passes over the training positions (default 10; 0 with --init: "
                       "that net as it is, its losses and PeSTO slope on --data)")
    train.add_argument("--lr", type=float, help="AdamW learning rate (default 1e-3)")
    train.add_argument("--lr-decay", type=float, help="learning rate factor per epoch (default 0.95)")
    train.add_argument("--batch-size", type=int, help="positions per step (default 4096)")
    train.add_argument("--held-out", type=float, metavar="FRACTION",
                       help="share held out: by game for PGN and replay, by row for a CSV (default 0.1)")
    train.add_argument("--threads", type=int, help="torch threads (default 1)")
    train.add_argument("--seed", type=int, help="initialisation, split and batch order (default 0)")
    train.add_argument("--init", metavar="NET", help="start from this NNUE file (fine-tuning; its shape, "
                       "or a wider --l1)")
    train.add_argument("--cache-dir", metavar="DIR", help="feature cache (default: nnue-cache/ beside --out)")
    train.add_argument("--restart", action="store_true", help="ignore a saved training state and start over")
    train.add_argument("--keep-noisy", action="store_true",
                       help="also train on noisy positions (side to move in check, or the best/played move captures "
                            "or promotes); by default they are left out, as nnue-pytorch's smart FEN skipping does")
    train.add_argument("--mirror", action="store_true",
                       help="also train on every position without castling rights flipped left-right (files a <-> h; "
                            "chess is symmetric under that flip): twice the positions for the same labels")
    train.set_defaults(func=run)

    loop = actions.add_parser(
        "loop", help="the bootstrapping loop, unattended: a net's games -> it fine-tuned on them -> a gauntlet; resumable",
        description="Each turn the current net plays itself (datagen at --nodes; with --opponent-lag K, the net K turns "
                    "older; with --self-positions N, then itself for N positions as well), is fine-tuned on those games (with --window W, on the last W turns' games; --lr, "
                    "--lr-decay, --epochs) and the new net plays a gauntlet against fixed players outside the loop "
                    "(default ab:material) at --movetime; the new net plays the next turn. Turn 0 is the start "
                    "net's gauntlet. --dir holds everything (loop.json, turn-K.csv/.npz/-vs-J.jsonl); the same "
                    "command continues a stopped loop, and a larger --turns extends a finished one.")
    loop.add_argument("--dir", required=True, metavar="DIR", help="the loop's directory (created)")
    loop.add_argument("--start", required=True, metavar="NET", help="the NNUE file that plays the first turn's games")
    loop.add_argument("--turns", type=int, required=True, metavar="N", help="turns after the start")
    loop.add_argument("--positions", type=int, default=LOOP.positions, metavar="N",
                      help=f"positions of games a turn (default {LOOP.positions:,})")
    loop.add_argument("--nodes", type=int, default=LOOP.nodes, help=f"nodes a move in the games (default {LOOP.nodes})")
    loop.add_argument("--random-moves", type=int, default=LOOP.random_moves, metavar="K",
                      help=f"random moves in the first 24 plies after the book (default {LOOP.random_moves})")
    loop.add_argument("--book", default=LOOP.book, metavar="BOOK.bin",
                      help="polyglot book: the games' and the gauntlet's openings (default the gnuchess book)")
    loop.add_argument("--lr", type=float, default=LOOP.lr, help=f"fine-tuning learning rate (default {LOOP.lr:g})")
    loop.add_argument("--lr-decay", type=float, default=LOOP.lr_decay,
                      help=f"its factor per epoch (default {LOOP.lr_decay:g})")
    loop.add_argument("--epochs", type=int, default=LOOP.epochs, help=f"default {LOOP.epochs}")
    loop.add_argument("--batch-size", type=int, default=LOOP.batch_size, help=f"default {LOOP.batch_size}")
    loop.add_argument("--no-mirror", dest="mirror", action="store_false",
                      help="do not also train on each position flipped left-right")
    loop.add_argument("--gauntlet", action="append", metavar="SPEC",
                      help="a fixed player every turn's net plays (repeatable; default ab:material at --movetime)")
    loop.add_argument("--gauntlet-games", type=int, default=LOOP.gauntlet_games,
                      help=f"games against each, even (default {LOOP.gauntlet_games})")
    loop.add_argument("--movetime", type=int, default=LOOP.movetime, metavar="MS",
                      help=f"the net's time a move in the gauntlet (default {LOOP.movetime})")
    loop.add_argument("--gate", action="store_true",
                      help="the best net so far by its gauntlet (the mean Elo over the fixed players) plays each turn's "
                           "games and is fine-tuned on them; without it the newest net does")
    loop.add_argument("--window", type=int, default=LOOP.window, metavar="W",
                      help="each turn's net is fine-tuned on the games of the last W turns, its own among them "
                           f"(default {LOOP.window}: its own games alone); turn 0's games are --start-data")
    loop.add_argument("--start-data", action="append", metavar="FILE",
                      help="a file of positions the start net learned from (CSV or bullet text; repeatable): turn 0's "
                           "games, in the window of the first turns")
    loop.add_argument("--opponent-lag", type=int, default=LOOP.opponent_lag, metavar="K",
                      help="each turn's games are its player against the net of the turn K before the player's "
                           "(datagen --opponent: only the player's positions are written); default "
                           f"{LOOP.opponent_lag}: the player plays itself")
    loop.add_argument("--self-positions", type=int, default=LOOP.self_positions, metavar="N",
                      help="each turn's player also plays itself for N positions (turn-K-self.csv) and is fine-tuned on "
                           "those games with the others: with --opponent-lag, the recipe of generations 6 and 8 "
                           f"(default {LOOP.self_positions}: none)")
    loop.add_argument("--ancestor", dest="ancestors", action="append", metavar="NET",
                      help="a net before --start (repeatable, newest first): the lagged opponents of the first turns")
    loop.add_argument("--workers", type=int, default=1, help="K > 1: games and gauntlets on K actors of a private local Ray")
    loop.add_argument("--json", action="store_true", help="print the loop's state as JSON (default: a table)")
    loop.set_defaults(func=run_loop)


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


def run_loop(args: argparse.Namespace) -> int:
    import functools
    import sys

    from alphazero.errors import InputError
    from alphazero.judge.match import run_arena
    from alphazero.learn.label import run_label
    from alphazero.learn.nnue_loop import Loop, format_loop

    if args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}")
    settings = LoopSettings(start=args.start, positions=args.positions, nodes=args.nodes, random_moves=args.random_moves,
                            book=args.book, lr=args.lr, lr_decay=args.lr_decay, epochs=args.epochs,
                            batch_size=args.batch_size, mirror=args.mirror, gauntlet=tuple(args.gauntlet or ()),
                            gauntlet_games=args.gauntlet_games, movetime=args.movetime, gate=args.gate,
                            window=args.window, start_data=tuple(args.start_data or ()),
                            opponent_lag=args.opponent_lag, ancestors=tuple(args.ancestors or ()),
                            self_positions=args.self_positions)
    label = run_label
    arena = functools.partial(run_arena, progress="lines")
    if args.workers > 1:
        from workers.arena import play_chunks_on_ray
        from workers.label import label_on_ray

        label = functools.partial(run_label, runner=functools.partial(label_on_ray, workers=args.workers))
        arena = functools.partial(arena, chunk_runner=functools.partial(play_chunks_on_ray, workers=args.workers))
    loop = Loop(args.dir, settings, label=label, arena=arena, workers=args.workers)
    try:
        state = loop.run(args.turns)
    except KeyboardInterrupt:
        print(f"alphazero nnue loop: stopped; the same command goes on from {args.dir}", file=sys.stderr)
        return 130
    print(json.dumps(state) if args.json else format_loop(state))
    return 0
