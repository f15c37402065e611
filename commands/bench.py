"""``alphazero bench``: throughput of encoding, network and search (``alphazero.bench.suite``), or of self-play
with N actors on a local Ray (``workers.bench``)."""

from __future__ import annotations

import argparse
import json

from alphazero.config import load_config
from alphazero.errors import InputError
from commands.options import add_config_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmark encoding, network and search (prints figures)")
    add_config_args(bench, required=False)  # default: configs/default.yaml
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.add_argument("--seconds", type=float, default=None,
                       help="time per measurement (default 3; 120 per actor count with --selfplay)")
    bench.add_argument("--threads", type=int, default=1, help="torch threads")
    bench.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                       help="where the network runs (with --selfplay: each actor asks Ray for workers.selfplay_gpus of "
                            "a GPU, or 1/N of one when the config says 0)")
    bench.add_argument("--selfplay", default="", metavar="N[,M...]",
                       help="instead: self-play throughput on a local Ray with N (then M...) actors for --seconds each")
    bench.add_argument("--network", default=None, metavar="PATH",
                       help="with --selfplay: the actors play with this network (a trained one; its own shape) "
                            "instead of random weights of the config's shape")
    bench.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.bench.shared import default_config_path
    from alphazero.bench.suite import run_benchmarks

    config = load_config(args.config or default_config_path(), args.overrides)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError(f"--device cuda: torch {torch.__version__} sees no CUDA device on this machine "
                             "(no GPU, or a CPU build of torch); use --device cpu")
    if args.network and not args.selfplay:
        raise InputError("--network goes with --selfplay (the other benchmarks time the config's network)")
    if args.selfplay:
        from workers.bench import selfplay_throughput

        net = None
        if args.network:
            from dataclasses import replace

            from alphazero.nets.network import load_network

            net = load_network(args.network)
            config = replace(config, network=net.config)
        counts = _actor_counts(args.selfplay)
        # Games take minutes each: a window much shorter than two minutes counts too few to mean anything.
        seconds = args.seconds if args.seconds is not None else 120.0
        rows = [selfplay_throughput(config, n, seconds=seconds, device=args.device, net=net) for n in counts]
        figures = {"network": f"{config.network.blocks}x{config.network.channels}",
                   "num_simulations": config.search.num_simulations, "device": args.device,
                   "games_per_actor": config.selfplay.games_per_worker, "weights": args.network or "random",
                   "runs": rows}
        if len(rows) > 1:
            figures["speedup"] = round(rows[-1]["positions_per_s"] / rows[0]["positions_per_s"], 2)
        print(json.dumps(figures) if args.json else json.dumps(figures, indent=1))
        return 0
    figures = run_benchmarks(config, seconds=args.seconds if args.seconds is not None else 3.0,
                             threads=args.threads, device=args.device)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:28s} {value}")
    return 0


def _actor_counts(text: str) -> list[int]:
    """``--selfplay N[,M...]`` as positive actor counts."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise InputError(f"--selfplay needs actor counts N[,M...] (e.g. 1,2), got {text!r}") from None
    if min(counts) < 1:
        raise InputError(f"--selfplay actor counts must be positive, got {text!r}")
    return counts
