"""Preemption experiment: a training run SIGKILLed at random moments and resumed each time.

    python tools/preemption.py --config configs/default.yaml --run-dir checkpoints/preempt \
        --kill-minutes 27 --min-gap 1 --max-gap 5 --seed 0

Starts ``alphazero train`` in a session of its own, kills the whole session (driver, Ray, actors)
with SIGKILL after a random 1-5 minutes, resumes with ``--resume``, and repeats until
``--kill-minutes`` of wall time have passed; then lets the run reach its ``max_minutes``. With
``--kill-minutes 0`` it is the same run without kills, for comparison. Prints one JSON object:
kills, arenas decided (and how many were finished by a later process than began them), promotions,
games and positions, and whether the state's counters equal what the replay shards hold.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alphazero.checkpoint import RunDirectory, read_jsonl  # noqa: E402
from alphazero.learn.replay import read_shard, shard_paths  # noqa: E402
from tools.sessions import kill_session  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--kill-minutes", type=float, default=27.0, help="kill during the first N minutes of wall time")
    parser.add_argument("--min-gap", type=float, default=1.0, help="minutes between kills, at least")
    parser.add_argument("--max-gap", type=float, default=5.0, help="minutes between kills, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--log", default=None, help="the runs' standard error goes here (default RUN_DIR.log)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    run_dir = Path(args.run_dir)
    log = open(args.log or f"{run_dir}.log", "a")
    sets = [part for item in args.overrides for part in ("--set", item)]
    command = [sys.executable, "-m", "commands.main", "train", "--run-dir", str(run_dir), "--config", args.config, *sets]
    started = time.monotonic()
    kills, resumed = 0, False
    while True:
        process = subprocess.Popen(command + (["--resume"] if resumed else []), cwd=ROOT, stdout=log, stderr=log,
                                   start_new_session=True)
        remaining = args.kill_minutes * 60 - (time.monotonic() - started)
        gap = rng.uniform(args.min_gap, args.max_gap) * 60
        if remaining > 0 and gap <= remaining:
            try:
                process.wait(timeout=gap)
                break  # the run ended by itself
            except subprocess.TimeoutExpired:
                kill_session(process, timeout=60)
                kills += 1
                print(f"kill {kills} at {(time.monotonic() - started) / 60:.1f} min", file=log, flush=True)
                resumed = True
                continue
        process.wait()
        break
    wall = time.monotonic() - started

    run = RunDirectory(run_dir)
    state = run.read_state()
    shards = [read_shard(path) for path in shard_paths(run.replay_dir)]
    events = read_jsonl(run.events_path)
    arenas = [e for e in events if e["event"] == "arena"]
    print(json.dumps({
        "kills": kills, "wall_minutes": round(wall / 60, 1), "run_minutes": round(state.elapsed_s / 60, 1),
        "exit": process.returncode, "generation": state.generation, "best_generation": state.best_generation,
        "arenas": len(state.arenas), "promoted": sum(a.promoted for a in state.arenas),
        "arenas_finished_across_a_kill": sum(1 for e in arenas if e.get("processes", 1) > 1),
        "arena_minutes": [round((a.time - events[0]["time"]) / 60, 1) for a in state.arenas],
        "games": state.games, "positions": state.positions, "learner_step": state.learner_step,
        "counters_match_shards": state.games == sum(s.num_games for s in shards)
        and state.positions == sum(s.num_positions for s in shards),
        "shards": len(shards),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
