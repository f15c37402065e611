"""Scale simulated on one machine (issue 24 part 4): the driver's ingestion, the learner's sampling and the
weight broadcast, on a Ray cluster of several small loopback nodes (``workers.scale``).

    python tools/scale.py --nodes 8 --actors 8,16,32 --rate 625 --seconds 60 \
        --broadcast 1,2,4,8,16,32,64 --window 1000000 --json

Prints one JSON object: ``ingestion`` (one row per actor count: offered and ingested positions/s, the
driver's busy share and time per result by stage, memory over the run), ``sampling`` (batches/s and
positions/s of the replay window) and ``broadcast`` (seconds per actor count, growth per added actor, the
estimate for 1,000). ``--parts`` picks some of them. Starts the cluster and stops every process it started.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alphazero.bench.scale import sampling_rate  # noqa: E402
from alphazero.config import NetworkConfig, load_config  # noqa: E402

PARTS = ("ingestion", "sampling", "broadcast")


def _counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The figures of ``args``' parts (what ``main`` prints)."""
    from workers.scale import local_cluster, measure_broadcast, measure_ingestion

    parts = args.parts.split(",")
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"--parts: unknown {sorted(unknown)}; choose from {', '.join(PARTS)}")
    config = load_config(args.config or ROOT / "configs" / "default.yaml", args.overrides)
    figures: dict[str, Any] = {"nodes": args.nodes, "rate_per_actor": args.rate, "game_positions": args.game_positions,
                               "games_per_call": config.selfplay.games_per_call,
                               "games_per_actor": config.selfplay.games_per_worker}
    if "sampling" in parts:
        figures["sampling"] = sampling_rate(args.window, config.train.batch_size, args.sampling_seconds,
                                            args.game_positions, config.selfplay.games_per_call,
                                            config.search.num_simulations)
    if "ingestion" in parts or "broadcast" in parts:
        with local_cluster(args.nodes, args.cpus_per_node, args.object_store_mb), \
                tempfile.TemporaryDirectory(prefix="scale-") as tmp:
            if "ingestion" in parts:
                rows = []
                for number, actors in enumerate(_counts(args.actors)):
                    row = measure_ingestion(config, Path(tmp) / f"run-{number}", actors, args.rate, args.game_positions,
                                            args.seconds, interval=args.interval)
                    if not args.samples:
                        row.pop("samples")
                    rows.append(row)
                figures["ingestion"] = rows
            if "broadcast" in parts:
                network = NetworkConfig(blocks=args.blocks, channels=args.channels)
                figures["broadcast"] = measure_broadcast(_counts(args.broadcast), network, args.repeats)
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=None, help="the run's config (default configs/default.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--parts", default=",".join(PARTS), help="which measurements (default: all three)")
    p.add_argument("--nodes", type=int, default=8, help="simulated nodes, the head included")
    p.add_argument("--cpus-per-node", type=float, default=1.0, help="logical CPUs per node (actors take 0.01)")
    p.add_argument("--object-store-mb", type=int, default=100, help="object store of each node")
    p.add_argument("--actors", default="8,16,32", help="synthetic self-play actor counts, one driver run each")
    p.add_argument("--rate", type=float, default=625.0, help="positions/s per synthetic actor while it plays")
    p.add_argument("--game-positions", type=int, default=150, help="positions per synthetic game")
    p.add_argument("--seconds", type=float, default=60.0, help="run time of each driver run")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between memory samples")
    p.add_argument("--samples", action="store_true", help="print every memory sample too")
    p.add_argument("--window", type=int, default=1_000_000, help="replay window positions for the sampling rate")
    p.add_argument("--sampling-seconds", type=float, default=10.0)
    p.add_argument("--broadcast", default="1,2,4,8,16,32,64", help="receiver counts of the weight broadcast")
    p.add_argument("--blocks", type=int, default=10, help="broadcast network's residual blocks")
    p.add_argument("--channels", type=int, default=128, help="broadcast network's channels")
    p.add_argument("--repeats", type=int, default=3, help="broadcasts per receiver count (median)")
    p.add_argument("--json", action="store_true", help="one line of JSON (default: indented)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    figures = run(args)
    print(json.dumps(figures) if args.json else json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
