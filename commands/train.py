"""``alphazero train``: self-play training on Ray (``workers.driver``)."""

from __future__ import annotations

import argparse
import json

from alphazero.config import ConfigError, load_config
from commands.options import add_config_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser("train", help="train by self-play on Ray (embedded local Ray, or --address to join a cluster)")
    add_config_args(train, required=False)
    train.add_argument("--run-dir", required=True, help="run directory (checkpoints/NAME)")
    train.add_argument("--resume", action="store_true", help="continue the run in --run-dir, with its own config.yaml (plus --set), or with --config's settings "
                            "where given (its network shape, seed and optimizer must be the run's; each other "
                            "setting that differs is printed)")
    train.add_argument("--address", default=None, help="Ray cluster to join: 'auto' or HOST:PORT (default: start a local Ray)")
    train.add_argument("--oversubscribe", action="store_true",
                       help="run a config that asks for more CPUs than this machine has anyway (local Ray only; slower)")
    train.add_argument("--init", default=None, metavar="NET",
                       help="start a new run from this network file (alphazero pretrain) instead of a random one; "
                            "its shape must be the config's network")
    train.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.checkpoint import RunDirectory

    if args.config is None:
        if not args.resume:
            raise ConfigError("--config is required for a new run")
        saved = RunDirectory(args.run_dir).config_path
        config = load_config(saved, args.overrides)
    else:
        config = load_config(args.config, args.overrides)
    from workers.driver import run_training  # a RunError is a UserError: one line, exit 2

    state = run_training(config, args.run_dir, resume=args.resume, address=args.address,
                         oversubscribe=args.oversubscribe, init=args.init)
    print(json.dumps({"generation": state.generation, "best_generation": state.best_generation,
                      "games": state.games, "positions": state.positions, "learner_step": state.learner_step}))
    return 0
