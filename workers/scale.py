"""Scale simulated on one machine (issue 24 part 4): where the driver, the replay and the broadcast stop scaling.

A Ray cluster of several small nodes on loopback (``local_cluster``: ``ray.cluster_utils.Cluster``, node IP
``127.0.0.2``, a small object store each), and three measurements on it (``tools/scale.py`` prints them):

- ``measure_ingestion``: the real ``workers.driver.Driver`` (its pool, in-flight file, shard writes, state
  writes, learner ``add_shards``, curves) fed by ``SyntheticSelfPlayWorker``s, actors with the self-play
  actor's methods that return synthetic games (``alphazero.bench.scale.SyntheticGames``) at a set rate of
  positions/s while a play call runs, and idle between calls as a real actor is. The learner never trains
  (``train.min_positions`` out of reach), so the figure is the ingestion path alone. Reported: the offered and
  the ingested positions/s, the driver's busy share and its time per handled result by stage, and the
  driver's, the learner's and the object store's memory sampled over the run.
- ``measure_broadcast``: one ``ray.put`` of a network's weights, then ``set_weights`` on N receivers spread
  over the nodes, timed until every one holds them; the growth per added actor is fitted, so the time for
  1,000 actors is an estimate. Receivers get the weights as numpy arrays (the same bytes as the torch
  payload, which would make each receiver import torch, ~190 MB a process, too much for 64 on one machine);
  what turning them into a network costs each actor is measured apart (``local_load_s``).
- the learner's sampling rate is ``alphazero.bench.scale.sampling_rate`` (no Ray).

Every process this starts, it stops (``local_cluster``'s exit). Figures: docs/RESULTS.md, "Scale simulated on
one machine (issue 24)".
"""

from __future__ import annotations

import _thread
import contextlib
import os
import re
import signal
import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import ray

from alphazero.bench.scale import SyntheticGames
from alphazero.config import NetworkConfig, RunConfig
from workers.cluster import LOOPBACK_NODE_IP

# A measurement whose actors are not all running after this long stops anyway (and says how many ran).
ACTORS_START_TIMEOUT = 600.0


class SyntheticSelfPlayWorker:
    """A self-play actor (``workers.actors.SelfPlayWorker``'s methods) that makes synthetic games.

    It produces ``positions_per_s`` positions per second of play-call time, ``game_positions`` to a game, in
    ``selfplay.games_per_worker`` staggered games; between calls it is idle, as a real actor is, so a driver
    that falls behind lowers what the actors produce. ``synthetic_worker_class`` sets the two rates.
    """

    positions_per_s: float = 500.0
    game_positions: int = 150

    def __init__(self, config: RunConfig, weights: Any, version: int, seed: int,
                 inflight: list[dict] | None = None) -> None:
        self.games = SyntheticGames(self.game_positions, config.search.num_simulations, seed)
        self.concurrent = config.selfplay.games_per_worker
        self.version = version
        self.played_s = 0.0  # play-call time so far: what the games have advanced by
        self.returned = 0  # finished games handed back
        self.positions = 0  # positions counted so far

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def set_weights(self, version: int, weights: Any) -> int:
        self.version = version
        return version

    def play(self, min_games: int, max_seconds: float | None = None) -> tuple[list, dict[str, Any]]:
        """Sleep as long as playing ``min_games`` games takes at the set rate (at most ``max_seconds``), then
        return the games finished by then, the positions played, and the games in flight."""
        game_s = self.game_positions / self.positions_per_s
        wait = max(0.0, (self.returned + min_games) * game_s - self.played_s)
        if max_seconds is not None:
            wait = min(wait, max_seconds)
        time.sleep(wait)
        self.played_s += wait
        finished = int(self.played_s / game_s + 1e-9) - self.returned
        games = self.games.finished(finished, self.version, self.returned)
        self.returned += finished
        positions = int(self.played_s * self.positions_per_s) - self.positions
        self.positions += positions
        # Each of the concurrent games advances at positions_per_s / concurrent.
        progress = self.played_s * self.positions_per_s / self.concurrent / self.game_positions
        return games, {"positions": positions, "version": self.version,
                       "inflight": self.games.inflight(self.concurrent, progress, self.version)}


def synthetic_worker_class(positions_per_s: float, game_positions: int) -> type:
    """``SyntheticSelfPlayWorker`` producing ``positions_per_s`` positions/s in games of ``game_positions``."""
    return type("SyntheticSelfPlayWorker", (SyntheticSelfPlayWorker,),
                {"positions_per_s": float(positions_per_s), "game_positions": int(game_positions)})


class WeightsReceiver:
    """A tiny actor that takes a network's weights as the self-play actors' ``set_weights`` does."""

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def set_weights(self, version: int, weights: dict[str, Any]) -> int:
        """The bytes received (the weights arrive resolved from their ObjectRef, zero-copy from the node's store)."""
        return int(sum(array.nbytes for array in weights["state_dict"].values()))


@contextlib.contextmanager
def local_cluster(num_nodes: int, cpus_per_node: float = 1.0, object_store_mb: int = 100) -> Iterator[Any]:
    """A head and ``num_nodes - 1`` worker nodes on loopback, this process connected; all stopped on exit.

    Each node has ``cpus_per_node`` logical CPUs (fractional actors fit many on one) and an object store of
    ``object_store_mb``. Token authentication is off (``RAY_AUTH_MODE=disabled``, set here if unset): a
    simulated cluster on one machine, whose nodes inherit this process's environment.
    """
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    node: dict[str, Any] = {"node_ip_address": LOOPBACK_NODE_IP, "object_store_memory": object_store_mb * 1024 * 1024,
            "num_cpus": cpus_per_node}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        for _ in range(num_nodes - 1):
            cluster.add_node(**node)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)  # no runtime_env: actors take prestarted workers
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def rss_mb(pid: int | None = None) -> float | None:
    """Resident memory of process ``pid`` (this one if None) in MB; None if it is gone."""
    try:
        status = Path(f"/proc/{pid or 'self'}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return round(int(match.group(1)) / 1024, 1) if match else None


def object_store_mib() -> float | None:
    """Object store memory in use over all nodes (Ray's memory summary), MiB; None if Ray does not say."""
    from ray._private.internal_api import memory_summary

    try:
        summary = memory_summary(address=ray.get_runtime_context().gcs_address, stats_only=True)
        match = re.search(r"Plasma memory usage (\d+) MiB", summary)
    except Exception:
        return None
    return float(match.group(1)) if match else None


@contextlib.contextmanager
def _timed(owner: Any, name: str, totals: dict[str, list[float]]) -> Iterator[None]:
    """Replace ``owner.name`` by a wrapper that adds each call's time to ``totals[name]`` (count, seconds)."""
    original: Callable[..., Any] = getattr(owner, name)
    own = name in getattr(owner, "__dict__", {})  # a module's function, or a method looked up on the class
    totals[name] = [0, 0.0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[name][0] += 1
            totals[name][1] += time.perf_counter() - start

    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


def _span(values: list[Any]) -> dict[str, Any]:
    """First, largest and last of the sampled values (None where a sample had none)."""
    known = [v for v in values if v is not None]
    return {"first": known[0], "max": max(known), "last": known[-1]} if known else {"first": None, "max": None, "last": None}


def measure_ingestion(config: RunConfig, run_dir: str | Path, num_actors: int, positions_per_s: float,
                      game_positions: int, seconds: float, actor_cpus: float = 0.01,
                      interval: float = 2.0) -> dict[str, Any]:
    """The real driver fed by ``num_actors`` synthetic actors of ``positions_per_s`` each, for ``seconds``
    from the moment every actor runs (actors take seconds to start: their imports).

    The run is stopped as Ctrl-C stops one (``KeyboardInterrupt`` in this thread, from the sampling thread),
    so the stop is the driver's own. ``run_dir`` must not hold a run. Returns the offered and ingested positions/s (the ingested rate from the
    moment every actor runs), the driver's busy share (time in its play-result handler / wall), its time per
    handled result by stage (ms; ``_on_plays`` is the whole handler, ``on_play`` taking one result from Ray),
    the results it found waiting per pass, the in-flight file's size, and memory over time: the driver's RSS, the
    learner's RSS and the object store in use (first, largest and last sample, and every sample).
    """
    import workers.driver
    from workers.progress import Progress

    config = replace(config, max_minutes=0.0, max_generations=0,
                     train=replace(config.train, min_positions=10**12),  # ingestion only: the learner never trains
                     workers=replace(config.workers, num_selfplay_workers=num_actors, cpus_per_selfplay_worker=actor_cpus,
                                     learner_cpus=0.0, arena_cpus=0.0, selfplay_gpus=0.0, learner_gpus=0.0,
                                     arena_gpus=0.0))
    with open(os.devnull, "w") as quiet:
        driver = workers.driver.Driver(config, run_dir, resume=False, progress=Progress(stream=quiet),
                                       selfplay_class=synthetic_worker_class(positions_per_s, game_positions))
        samples: list[dict[str, Any]] = []
        stop = threading.Event()
        start = time.monotonic()

        def sample() -> None:
            learner_pid, all_running = None, None
            while not stop.wait(interval):
                if all_running is None and driver.pool.num_running == num_actors:
                    all_running = time.monotonic()
                started_late = all_running is None and time.monotonic() - start >= ACTORS_START_TIMEOUT
                if started_late or (all_running is not None and time.monotonic() - all_running >= seconds):
                    stop.set()
                    _thread.interrupt_main()  # the driver's Ctrl-C path: it stops, saves and kills its actors
                if learner_pid is None and driver.learner is not None:
                    with contextlib.suppress(Exception):
                        learner_pid = ray.get(driver.learner.info.remote(), timeout=10)["pid"]
                samples.append({"t": round(time.monotonic() - start, 1), "positions": driver.state.positions,
                                "games": driver.state.games, "running": driver.pool.num_running,
                                "busy_s": round(totals["_on_plays"][1], 3),
                                "driver_rss_mb": rss_mb(), "learner_rss_mb": rss_mb(learner_pid) if learner_pid else None,
                                "object_store_mib": object_store_mib()})

        totals: dict[str, list[float]] = {"_on_plays": [0, 0.0]}
        sampler = threading.Thread(target=sample, daemon=True)
        with contextlib.ExitStack() as stack:
            # One pass's results, handled together (a driver before that change: one result at a time).
            handler = "_on_plays" if hasattr(driver, "_on_plays") else "_on_play"
            stack.enter_context(_timed(driver, handler, totals))
            totals["_on_plays"] = totals[handler]
            stack.enter_context(_timed(driver.pool, "on_play", totals))  # each result
            stack.enter_context(_timed(workers.driver, "write_inflight", totals))
            stack.enter_context(_timed(workers.driver, "write_shard", totals))
            stack.enter_context(_timed(driver.run, "write_state", totals))
            stack.enter_context(_timed(driver, "_learner_call", totals))
            # interrupt_main raises KeyboardInterrupt only under Python's own SIGINT handler (a background job
            # started by a shell without job control ignores SIGINT).
            stack.callback(signal.signal, signal.SIGINT, signal.signal(signal.SIGINT, signal.default_int_handler))
            sampler.start()
            try:
                state = driver.train()
            finally:
                stop.set()
                sampler.join()
    steady = [s for s in samples if s["running"] == num_actors and s["positions"] > 0]
    rate = games_rate = busy_share = None
    if len(steady) >= 2:
        span = steady[-1]["t"] - steady[0]["t"]
        rate = round((steady[-1]["positions"] - steady[0]["positions"]) / span)
        games_rate = round((steady[-1]["games"] - steady[0]["games"]) / span, 2)
        busy_share = round((steady[-1]["busy_s"] - steady[0]["busy_s"]) / span, 3)
    passes = totals["_on_plays"][0]
    handled = totals["on_play"][0]
    wall = time.monotonic() - start
    per_result = {name: round(1000 * total / max(1, handled), 2) for name, (count, total) in totals.items()}
    inflight = driver.run.inflight_path
    return {
        "actors": num_actors, "offered_positions_per_s": round(num_actors * positions_per_s),
        "positions_per_s": rate, "games_per_s": games_rate, "positions": state.positions, "games": state.games,
        "results_handled": int(handled), "results_per_pass": round(handled / max(1, passes), 2),
        "positions_per_result": round(state.positions / max(1, handled), 1),
        "driver_busy": busy_share, "ms_per_result": per_result,
        "inflight_file_kb": round(inflight.stat().st_size / 1024, 1) if inflight.exists() else None,
        "driver_rss_mb": _span([s["driver_rss_mb"] for s in steady or samples]),
        "learner_rss_mb": _span([s["learner_rss_mb"] for s in steady or samples]),
        "object_store_mib": _span([s["object_store_mib"] for s in steady or samples]),
        "seconds": round(wall, 1), "samples": samples,
    }


def numpy_payload(network: NetworkConfig) -> dict[str, Any]:
    """A ``PolicyValueNet`` of ``network``'s shape as ``net_to_payload`` gives it, its tensors as numpy arrays."""
    from alphazero.nets.network import PolicyValueNet, net_to_payload

    payload = net_to_payload(PolicyValueNet(network))
    return {**payload, "state_dict": {key: value.numpy() for key, value in payload["state_dict"].items()}}


def local_load_s(network: NetworkConfig, repeats: int = 3) -> float:
    """Seconds one actor takes to turn a received torch payload into a network (``net_from_payload``), here."""
    from alphazero.nets.network import PolicyValueNet, net_from_payload, net_to_payload

    payload = net_to_payload(PolicyValueNet(network))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        net_from_payload(payload)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 3)


def measure_broadcast(counts: list[int], network: NetworkConfig, repeats: int = 3,
                      actor_cpus: float = 0.01) -> dict[str, Any]:
    """Seconds from ``ray.put`` of ``network``'s weights until ``N`` receivers hold them, for each N of ``counts``.

    The receivers (``max(counts)``, spread over the nodes, ``actor_cpus`` each) are started first; each
    broadcast puts a new object (so every node fetches it anew) and calls ``set_weights`` on the first N.
    The median of ``repeats`` per N; then a least-squares line through (N, seconds), whose slope is the
    growth per added actor and whose value at 1,000 is the estimate for 1,000 actors.
    """
    payload = numpy_payload(network)
    megabytes = sum(a.nbytes for a in payload["state_dict"].values()) / 1e6
    cls = ray.remote(num_cpus=actor_cpus, max_restarts=0)(WeightsReceiver)
    receivers: list[Any] = [cls.options(scheduling_strategy="SPREAD").remote() for _ in range(max(counts))]
    started = time.perf_counter()
    infos = ray.get([r.info.remote() for r in receivers], timeout=600)
    start_s = time.perf_counter() - started
    rows = []
    version = 0
    try:
        for n in counts:
            times, put_times = [], []
            for _ in range(repeats):
                version += 1
                start = time.perf_counter()
                ref = ray.put(payload)
                put_times.append(time.perf_counter() - start)
                received = ray.get([r.set_weights.remote(version, ref) for r in receivers[:n]], timeout=600)
                times.append(time.perf_counter() - start)
                assert all(b == received[0] for b in received) and received[0] > 0
                del ref
            nodes = len({info["node_id"] for info in infos[:n]})
            rows.append({"actors": n, "nodes": nodes, "seconds": round(statistics.median(times), 3),
                         "put_s": round(statistics.median(put_times), 3)})
    finally:
        for receiver in receivers:
            ray.kill(receiver)
    xs, ys = [r["actors"] for r in rows], [r["seconds"] for r in rows]
    slope = intercept = None
    if len(rows) >= 2:
        mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
        intercept = mean_y - slope * mean_x
    return {"network": f"{network.blocks}x{network.channels}", "megabytes": round(megabytes, 1),
            "receivers_start_s": round(start_s, 1), "runs": rows,
            "seconds_per_added_actor": None if slope is None else round(slope, 4),
            "estimate_1000_actors_s": None if slope is None or intercept is None else round(intercept + 1000 * slope, 1),
            "local_load_s": local_load_s(network)}
