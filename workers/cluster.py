"""Starting or joining Ray, and starting an actor on it, the one way every entry point does it.

An embedded Ray binds to a loopback address (``127.0.0.2``: Ray rewrites ``127.0.0.1`` to the
machine's network address) with the dashboard off, and is as large as the config asks only if the
machine has the CPUs (``check_fits``); ``address`` joins a running cluster instead. ``start_actor``
waits for a new actor to answer and retries one that dies on the way (a lost node, a killed import).
``RunError`` is the error of a run that cannot start or continue.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable

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
              log_to_driver: bool = True) -> bool:
    """Start a private local Ray of ``num_cpus`` CPUs (``address`` None) or join ``address``.

    Returns True when this call started Ray (the caller shuts it down). A Ray already initialised in
    this process is used as it is.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    runtime_env = {"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}}
    if address is None:
        ray.init(
            address="local",  # never attach silently to a cluster that happens to run here
            num_cpus=num_cpus,
            include_dashboard=False,
            object_store_memory=object_store_memory_mb * 1024 * 1024,
            _node_ip_address=LOOPBACK_NODE_IP,
            log_to_driver=log_to_driver,
            runtime_env=runtime_env,
        )
        return True
    ray.init(address=address, runtime_env=runtime_env, log_to_driver=log_to_driver)
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


def check_fits(config: RunConfig, oversubscribe: bool = False, cpus: int | None = None) -> int:
    """The CPUs an embedded Ray gets; refuses a config that does not fit this machine (``cpus``: the
    machine's, ``available_cpus()`` unless given).

    Ray would otherwise start every actor the config asks for on however few cores there are (38
    processes on two cores for ``configs/large.yaml``), and the machine thrashes before the first
    status line. ``oversubscribe`` runs it anyway, with a Ray as large as the config.
    """
    if config.train.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RunError("train.device is cuda but this machine has no CUDA GPU; use --set train.device=auto, "
                           "or --address to join a cluster that has one")
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
                retry_delay: float = 2.0) -> tuple[Any, dict]:
    """Create an actor and wait for its ``info()``; an actor that dies before answering is retried.

    For an actor the run cannot go on without (the learner). A node lost during start-up, or a
    worker process killed while importing, should not end a run of many hours. Every actor builds
    itself from its arguments and the run directory, so a second attempt is safe; the attempts wait
    ``retry_delay`` x attempt seconds apart, each failure goes to ``log_event`` (``actor_start_failed``),
    and the last one is the run's error, with Ray's reason.
    """
    for attempt in range(1, ACTOR_START_ATTEMPTS + 1):
        actor = create()
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
