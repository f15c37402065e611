"""Self-play throughput on Ray: N self-play actors for a fixed time, no learner (``alphazero bench --selfplay``)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import ray

from alphazero.config import RunConfig
from alphazero.nets.network import PolicyValueNet, net_to_payload
from workers.actors import SelfPlayWorker
from workers.cluster import check_fits, start_ray


def selfplay_throughput(config: RunConfig, num_actors: int, seconds: float, warmup: float = 10.0) -> dict[str, Any]:
    """Positions/s and games/hour of ``num_actors`` self-play actors (one CPU each) over ``seconds``.

    Positions count every move searched and played, finished game or not, so long games do not
    make the figure lumpy; games/hour counts the games that finished inside the window.
    """
    config = replace(config, workers=replace(config.workers, num_selfplay_workers=num_actors, learner_cpus=0.0))
    # A benchmark of N actors asks for N CPUs on purpose, however many the machine has.
    started = start_ray(None, check_fits(config, oversubscribe=True), config.workers.object_store_memory_mb)
    try:
        weights = ray.put(net_to_payload(PolicyValueNet(config.network)))
        cls = ray.remote(num_cpus=config.workers.cpus_per_selfplay_worker)(SelfPlayWorker)
        # Ray actor handles: their methods are called through .remote, which Ray's stubs do not type.
        actors: list[Any] = [cls.remote(config, weights, 0, seed) for seed in range(num_actors)]
        ray.get([a.info.remote() for a in actors], timeout=300)
        ray.get([a.play.remote(10**9, warmup) for a in actors], timeout=300 + warmup)
        start = time.perf_counter()
        results = ray.get([a.play.remote(10**9, seconds) for a in actors], timeout=600 + seconds)
        elapsed = time.perf_counter() - start
        positions = sum(counters["positions"] for _, counters in results)
        games = sum(len(finished) for finished, _ in results)
        for actor in actors:
            ray.kill(actor)
        return {
            "selfplay_actors": num_actors,
            "seconds": round(elapsed, 1),
            "positions_per_s": round(positions / elapsed, 1),
            "games_per_hour": round(games / elapsed * 3600),
            "simulations_per_s": round(positions * config.search.num_simulations / elapsed),
        }
    finally:
        if started:
            ray.shutdown()
