"""Starting or joining Ray, and starting an actor on it, the one way every entry point does it.

An embedded Ray binds to a loopback address (``127.0.0.2``: Ray rewrites ``127.0.0.1`` to the
machine's network address) with the dashboard off, and is as large as the config asks only if the
machine has the CPUs and the GPUs (``check_fits``; its GPUs are the CUDA devices torch sees here);
``address`` joins a running cluster instead, whose GPUs ``check_cluster_gpus`` checks once joined.
GPU shares are checked as Ray places them (``gpu_placement_error``): a fraction must fit on one GPU
beside the others there, a whole number takes idle GPUs of one node, the learner's on the driver's
node; a config that cannot be placed would otherwise wait forever for its actors. ``start_actor``
waits for a new actor to answer and retries one that dies on the way (a lost node, a killed import).
``RunError`` is the error of a run that cannot start or continue.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import threading
import time
from typing import Any, Callable, Iterator, Sequence

import ray

from alphazero.config import RunConfig
from alphazero.errors import UserError

LOOPBACK_NODE_IP = "127.0.0.2"
# Attempts at starting one actor before the run gives up (consecutive failures, see start_actor).
ACTOR_START_ATTEMPTS = 3


class RunError(UserError):
    """A run that cannot start or continue (the config does not fit, an actor cannot start, the run
    directory cannot be used, a write failed); the message says why and what to do."""


def start_ray(address: str | None, num_cpus: int, object_store_memory_mb: int = 256,
              log_to_driver: bool = True, num_gpus: int | None = None) -> bool:
    """Start a private local Ray of ``num_cpus`` CPUs (``address`` None) or join ``address``.

    ``num_gpus``: the private Ray's GPUs (None: Ray's own detection). Returns True when this call
    started Ray (the caller shuts it down). A Ray already initialised in this process is used as it is.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    with _keeping_sigterm_handler():
        return _init_ray(address, num_cpus, object_store_memory_mb, log_to_driver, num_gpus)


@contextlib.contextmanager
def _keeping_sigterm_handler() -> Iterator[None]:
    """``ray.init`` sets the driver's SIGTERM handler to ``sys.exit``; a handler the process installed itself
    (the command line's: SIGTERM stops a command as Ctrl-C does) is put back."""
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if callable(handler) and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)


def _init_ray(address: str | None, num_cpus: int, object_store_memory_mb: int, log_to_driver: bool,
              num_gpus: int | None) -> bool:
    # No job-level runtime_env: with one (even env_vars alone) Ray cannot hand an actor a worker it prestarted
    # for the job, and every actor waited for a new one (an actor's start 1.8-2.3 s without, 3.4-4.1 s with,
    # on an AVX2 Zen 3; docs/RESULTS.md, "The Zen 3 again"). The workers inherit the raylet's environment.
    if address is None:
        ray.init(
            address="local",  # never attach silently to a cluster that happens to run here
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            include_dashboard=False,
            object_store_memory=object_store_memory_mb * 1024 * 1024,
            _node_ip_address=LOOPBACK_NODE_IP,
            log_to_driver=log_to_driver,
        )
        return True
    ray.init(address=address, log_to_driver=log_to_driver)
    return False


def available_cpus() -> int:
    """CPUs this process may use (its affinity mask, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def wanted_cpus(config: RunConfig) -> float:
    workers = config.workers
    return workers.num_selfplay_workers * workers.cpus_per_selfplay_worker + workers.learner_cpus + workers.arena_cpus


def machine_gpus() -> int:
    """CUDA devices torch sees in this process (0 with a CPU build of torch): an embedded Ray's GPUs."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def wanted_gpus(config: RunConfig) -> float:
    workers = config.workers
    return workers.num_selfplay_workers * workers.selfplay_gpus + workers.learner_gpus + workers.arena_gpus


# Ray counts GPU shares in steps of 1/10,000 of a GPU (config.gpu_share_error keeps shares on that grid).
_GPU_UNITS = 10_000


def _place(free: list[list[int]], units: int, nodes: Sequence[int]) -> bool:
    """Take ``units`` of GPU from ``free`` (per node, per GPU) on one of ``nodes`` as Ray would: a fraction
    on the first GPU with room for it, a whole number on that many idle GPUs of one node."""
    if units <= 0:
        return True
    for node in nodes:
        gpus = free[node]
        if units >= _GPU_UNITS:
            idle = [index for index, left in enumerate(gpus) if left == _GPU_UNITS]
            if len(idle) >= units // _GPU_UNITS:
                for index in idle[: units // _GPU_UNITS]:
                    gpus[index] = 0
                return True
        else:
            for index, left in enumerate(gpus):
                if left >= units:
                    gpus[index] -= units
                    return True
    return False


def _shares(config: RunConfig) -> tuple[int, list[int]]:
    """The learner's GPU share and the others' (arena, self-play actors), largest first, in Ray's units."""
    workers = config.workers
    others = [round(workers.arena_gpus * _GPU_UNITS)] + [round(workers.selfplay_gpus * _GPU_UNITS)] * workers.num_selfplay_workers
    return round(workers.learner_gpus * _GPU_UNITS), sorted(others, reverse=True)


def _unplaced(config: RunConfig, node_gpus: Sequence[float], driver_node: int) -> str | None:
    """``"learner"`` or ``"others"``: what does not fit on nodes of ``node_gpus`` GPUs; None when all fit."""
    learner, others = _shares(config)
    free = [[_GPU_UNITS] * int(n) for n in node_gpus]
    if not _place(free, learner, [driver_node] if node_gpus else []):
        return "learner"
    return None if all(_place(free, share, range(len(free))) for share in others) else "others"


def gpu_placement_error(config: RunConfig, node_gpus: Sequence[float], driver_node: int = 0,
                        where: str = "the cluster") -> str | None:
    """Why the config's GPU shares cannot all be placed on nodes of ``node_gpus`` GPUs each (the learner on
    ``driver_node``), with the numbers and the fixes; None when they can (or when it asks for no GPU).

    Placement is first fit, largest share first, as Ray packs fractional GPUs: four actors of 0.25 share
    one GPU, three of 0.6 need three. ``where`` names the nodes in the message ("this machine").
    """
    workers = config.workers
    if wanted_gpus(config) <= 0:
        return None
    unplaced = _unplaced(config, node_gpus, driver_node)
    if unplaced is None:
        return None
    if unplaced == "learner" and sum(int(n) for n in node_gpus) > 0:  # GPUs elsewhere, none for the learner
        driver_gpus = int(node_gpus[driver_node]) if node_gpus else 0
        return (f"the learner asks for {_gpus(workers.learner_gpus)} on the driver's node (it reads the run directory), "
                f"which has {driver_gpus}; lower workers.learner_gpus (0: the CPU), or run the driver on a node with a GPU")
    learner, others = _shares(config)
    unlimited = [[_GPU_UNITS] * (math.ceil(wanted_gpus(config)) + len(others) + 1)]
    for share in [learner, *others]:
        _place(unlimited, share, [0])
    needed = sum(left < _GPU_UNITS for left in unlimited[0])  # GPUs of one node the whole config would take
    selfplay = round(workers.selfplay_gpus * _GPU_UNITS)
    per_gpu = f"; at most {_GPU_UNITS // selfplay} self-play actors share a GPU" if 0 < 2 * selfplay <= _GPU_UNITS else ""
    fit = 0
    while fit < workers.num_selfplay_workers:  # the most self-play actors that fit beside the learner and arena
        fewer = dataclasses.replace(workers, num_selfplay_workers=fit + 1)
        if _unplaced(dataclasses.replace(config, workers=fewer), node_gpus, driver_node) is not None:
            break
        fit += 1
    fix = f"--set workers.num_selfplay_workers={fit} to fit, " if fit >= 1 else ""
    have = sum(int(n) for n in node_gpus)
    per_node = f" ({', '.join(str(int(n)) for n in node_gpus)} per node)" if len(node_gpus) > 1 else ""
    fixes = (f"use {fix}a smaller workers.selfplay_gpus (0: the CPU)" if have else
             "set workers.selfplay_gpus, learner_gpus and arena_gpus to 0 to run on the CPU")
    return (f"the config asks for {_gpus(wanted_gpus(config))} ({workers.num_selfplay_workers} self-play x "
            f"{workers.selfplay_gpus:g} + learner {workers.learner_gpus:g} + arena {workers.arena_gpus:g}), which Ray "
            f"places on {_gpus(needed)}{per_gpu}, but {where} has {_gpus(have)}{per_node}; {fixes}, "
            "or --address to join a Ray cluster with more GPUs")


def _gpus(count: float) -> str:
    count = round(count, 4)  # 4 x 0.15 is 1.0000000000000002
    return f"{count:g} GPU" + ("" if count == 1 else "s")


def check_cluster_gpus(config: RunConfig) -> None:
    """On a Ray this process has joined: refuse a config whose GPU shares its alive nodes cannot place
    (``gpu_placement_error``; the learner on this driver's node)."""
    if wanted_gpus(config) <= 0:
        return
    here = ray.get_runtime_context().get_node_id()
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    nodes.sort(key=lambda node: node.get("NodeID") != here)  # the driver's node first
    error = gpu_placement_error(config, [node.get("Resources", {}).get("GPU", 0.0) for node in nodes], 0)
    if error:
        raise RunError(error)


def check_fits(config: RunConfig, oversubscribe: bool = False, cpus: int | None = None, gpus: int | None = None) -> int:
    """The CPUs an embedded Ray gets; refuses a config that does not fit this machine (``cpus``: the
    machine's, ``available_cpus()`` unless given; ``gpus``: its CUDA devices, ``machine_gpus()`` unless given).

    Ray would otherwise start every actor the config asks for on however few cores there are (38
    processes on two cores for ``configs/large.yaml``), and the machine thrashes before the first
    status line. ``oversubscribe`` runs it anyway, with a Ray as large as the config. GPUs are never
    oversubscribed: an actor whose GPU share Ray cannot place waits forever, so such a config is refused.
    """
    if config.train.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RunError("train.device is cuda but this machine has no CUDA GPU; use --set train.device=auto, "
                           "or --address to join a cluster that has one")
    if wanted_gpus(config) > 0:
        gpus = machine_gpus() if gpus is None else gpus
        error = gpu_placement_error(config, [gpus], 0, where="this machine")
        if error:
            raise RunError(error)
    cpus = available_cpus() if cpus is None else cpus
    workers = config.workers
    wanted = wanted_cpus(config)
    if wanted > cpus + 1e-9 and not oversubscribe:
        room = cpus - workers.learner_cpus - workers.arena_cpus
        fit = int(room // workers.cpus_per_selfplay_worker) if workers.cpus_per_selfplay_worker > 0 else 0
        fix = f"--set workers.num_selfplay_workers={fit} to fit, " if fit >= 1 else ""
        raise RunError(
            f"the config asks for {wanted:g} CPUs ({workers.num_selfplay_workers} self-play x "
            f"{workers.cpus_per_selfplay_worker:g} + learner {workers.learner_cpus:g} + arena {workers.arena_cpus:g}) "
            f"but this machine has {cpus}; use {fix}--address to join a Ray cluster, or --oversubscribe to run it anyway")
    return max(cpus, math.ceil(wanted))


def start_actor(what: str, create: Callable[[], Any], timeout: float, log_event: Callable[..., None],
                retry_delay: float = 2.0, first: Any = None) -> tuple[Any, dict]:
    """Create an actor and wait for its ``info()``; an actor that dies before answering is retried.

    For an actor the run cannot go on without (the learner). A node lost during start-up, or a
    worker process killed while importing, should not end a run of many hours. Every actor builds
    itself from its arguments and the run directory, so a second attempt is safe; the attempts wait
    ``retry_delay`` x attempt seconds apart, each failure goes to ``log_event`` (``actor_start_failed``),
    and the last one is the run's error, with Ray's reason. ``first``: the first attempt, already made by
    ``create`` (so that the caller could start other actors while this one loads).
    """
    for attempt in range(1, ACTOR_START_ATTEMPTS + 1):
        actor = first if attempt == 1 and first is not None else create()
        try:
            return actor, ray.get(actor.info.remote(), timeout=timeout)
        except ray.exceptions.GetTimeoutError as error:
            ray.kill(actor, no_restart=True)
            raise RunError(f"the {what} actor did not start within {timeout:g} s; can the cluster give it "
                           "the CPUs the config asks for?") from error
        except ray.exceptions.RayActorError as error:
            ray.kill(actor, no_restart=True)
            log_event("actor_start_failed", actor=what, attempt=attempt, error=str(error)[:500])
            if attempt == ACTOR_START_ATTEMPTS:
                raise RunError(f"the {what} actor failed to start {attempt} times; last error: {error}") from error
            time.sleep(retry_delay * attempt)
    raise AssertionError("unreachable")
