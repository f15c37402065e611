"""Self-play throughput on Ray: N self-play actors for a fixed time, no learner (``alphazero bench --selfplay``).

On ``device`` cuda each actor asks Ray for ``workers.selfplay_gpus`` of a GPU (1/N of one when the config
says 0, so N actors share it); on the cpu for none."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import ray

from alphazero.config import RunConfig
from alphazero.nets.network import PolicyValueNet, net_to_payload
from workers.actors import SelfPlayWorker
from workers.cluster import check_fits, machine_gpus, start_ray


def bench_gpu_share(config: RunConfig, num_actors: int, device: str) -> float:
    """Each actor's GPU share: none on the cpu; on cuda the config's, or an equal share of one GPU."""
    if device != "cuda":
        return 0.0
    if config.workers.selfplay_gpus > 0:
        return config.workers.selfplay_gpus
    return min(1.0, (10_000 // num_actors) / 10_000)  # Ray's resolution: 1/10,000 of a GPU


def selfplay_throughput(config: RunConfig, num_actors: int, seconds: float, warmup: float = 10.0,
                        device: str = "cpu", net: PolicyValueNet | None = None) -> dict[str, Any]:
    """Positions/s and games/hour of ``num_actors`` self-play actors (one CPU each; a GPU share each on
    ``device`` cuda, see the module docstring) over ``seconds``, playing with ``net`` (default: random weights
    of the config's shape; a trained network's games are shorter and its int8 form quantises fully).

    Positions count every move searched and played, finished game or not, so long games do not
    make the figure lumpy; games/hour counts the games that finished inside the window.
    """
    share = bench_gpu_share(config, num_actors, device)
    config = replace(config, workers=replace(config.workers, num_selfplay_workers=num_actors, learner_cpus=0.0,
                                             selfplay_gpus=share, learner_gpus=0.0, arena_gpus=0.0))
    # A benchmark of N actors asks for N CPUs on purpose, however many the machine has (GPUs are checked).
    started = start_ray(None, check_fits(config, oversubscribe=True), config.workers.object_store_memory_mb,
                        num_gpus=machine_gpus())
    try:
        weights = ray.put(net_to_payload(net if net is not None else PolicyValueNet(config.network)))
        cls = ray.remote(num_cpus=config.workers.cpus_per_selfplay_worker, num_gpus=share)(SelfPlayWorker)
        # Ray actor handles: their methods are called through .remote, which Ray's stubs do not type.
        actors: list[Any] = [cls.remote(config, weights, 0, seed) for seed in range(num_actors)]
        infos = ray.get([a.info.remote() for a in actors], timeout=300)
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
            "gpu_share": share,
            "devices": sorted({f"{info['device']} {info['precision']} ({info['backend']})" for info in infos}),
            "seconds": round(elapsed, 1),
            "positions_per_s": round(positions / elapsed, 1),
            "games_per_hour": round(games / elapsed * 3600),
            "simulations_per_s": round(positions * config.search.num_simulations / elapsed),
        }
    finally:
        if started:
            ray.shutdown()
