"""``alphazero diagnose``: the learning-health report of a run (``alphazero.learn.diagnose``)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    diag = sub.add_parser("diagnose", help="learning-health report of a run: value targets, held-out losses (slow)")
    diag.add_argument("run_dir", help="run directory")
    diag.add_argument("--steps", type=int, default=150, help="training steps per round")
    diag.add_argument("--rounds", type=int, default=6, help="rounds of training + held-out scoring")
    diag.add_argument("--max-shards", type=int, default=None, help="use only the newest N shards")
    diag.add_argument("--threads", type=int, default=1, help="torch threads")
    diag.add_argument("--json", action="store_true", help="print one JSON object")
    diag.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from alphazero.learn.diagnose import diagnose

    torch.set_num_threads(args.threads)
    report = diagnose(args.run_dir, steps=args.steps, rounds=args.rounds, max_shards=args.max_shards)
    if args.json:
        print(json.dumps(report))
        return 0
    for key, value in report["data"].items():
        print(f"{key:28s} {value}")
    print("step  train_v  held_v  var(z)  train_p  held_p")
    for row in report["generalisation"]:
        print(f"{row['step']:5d}  {row['train_value_loss']:.4f}  {row['held_value_loss']:.4f}  {row['held_z_variance']:.4f}"
              f"  {row['train_policy_loss']:.3f}   {row['held_policy_loss']:.3f}")
    return 0
