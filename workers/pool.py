"""The self-play actors of a run: ``SelfPlayPool`` keeps them playing, replaces the dead, never blocks.

A replacement is created at once; if the cluster has no room for it (a node was lost), Ray keeps it
queued and places it when room appears (a node joins), while the run goes on with the actors that
are running. Only an actor that dies ``ACTOR_START_ATTEMPTS`` times in a row before it answers ends
the run (that is a broken actor, not a lost node).

The pool gets what it needs and nothing else: the run's config, the network version and weights
(``set_weights``), the games in flight each slot continues, the games played so far (its seeds), and
three callables of the driver's: ``submit`` (wait for a ref in the main loop), ``log_event`` (the
run's ``events.jsonl``) and ``message`` (a line for the person watching). It writes no file.
``actor_class`` is ``workers.actors.SelfPlayWorker`` in a run; the scale simulation (``workers.scale``)
gives one with the same methods that makes synthetic games, to load the real driver without a search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import ray

from alphazero.config import RunConfig
from workers.actors import SelfPlayWorker
from workers.cluster import ACTOR_START_ATTEMPTS, RunError

# A self-play or arena call returns at least this often, finished games or not, so progress never
# goes silent, new weights reach the actors between moves, and finished arena games reach the disk.
PLAY_CALL_SECONDS = 15.0
# A self-play actor not running after this long is reported as waiting for resources.
WAITING_NOTICE_SECONDS = 10.0


@dataclass
class _Slot:
    """One self-play actor the run wants: running, starting (or waiting for room), or between tries."""

    actor: Any = None
    running: bool = False
    since: float = 0.0  # when the current start began
    failures: int = 0  # consecutive starts that died before answering
    version: int = -1  # network version the actor plays with
    retry_at: float | None = None  # a failed start is tried again at this time


class SelfPlayPool:
    """Keeps ``config.workers.num_selfplay_workers`` self-play actors playing; see the module docstring."""

    def __init__(self, config: RunConfig, submit: Callable[[Any, str, int], None], log_event: Callable[..., None],
                 message: Callable[[str], None], actor_class: type = SelfPlayWorker) -> None:
        self.config = config
        self.actor_class = actor_class
        self.submit, self.log_event, self.message = submit, log_event, message
        self.slots = [_Slot() for _ in range(config.workers.num_selfplay_workers)]
        # Per slot: the games in flight at its last play call, which a replacement continues.
        self.inflight: list[list[dict]] = [[] for _ in self.slots]
        self.version = 0  # the network version the actors should play with ...
        self.weights_ref: Any = None  # ... and an ObjectRef of its weights (ray.put once per version)
        self.waiting_reported = False
        self.warned = False  # an actor's device warning (a GPU it cannot use) is shown once per run
        self.announced = False  # how the actors run their network (machine-dependent under auto): once per run
        self.stopped = False  # kill_all was called

    @property
    def num_running(self) -> int:
        return sum(slot.running for slot in self.slots)

    def set_weights(self, version: int, weights_ref: Any) -> None:
        """Play network ``version`` from now on: running actors get it now, starting ones when they answer."""
        self.version, self.weights_ref = version, weights_ref
        for slot in self.slots:
            if slot.running and slot.version != version:
                slot.actor.set_weights.remote(version, weights_ref)
                slot.version = version

    def start_all(self, games: int, inflight: list[list[dict]]) -> None:
        """Start every actor; slot ``i`` continues the games ``inflight[i]``; ``games`` played so far seed them."""
        self.inflight = inflight
        for index in range(len(self.slots)):
            self.start(index, games)

    def start(self, index: int, games: int) -> None:
        config, slot = self.config, self.slots[index]
        cls: Any = ray.remote(num_cpus=config.workers.cpus_per_selfplay_worker, num_gpus=config.workers.selfplay_gpus,
                         max_restarts=0)(self.actor_class)
        seed = config.seed * 1_000_003 + games * 7919 + index
        slot.actor = cls.options(scheduling_strategy="SPREAD").remote(
            config, self.weights_ref, self.version, seed, self.inflight[index])
        slot.version = self.version
        slot.running, slot.since, slot.retry_at = False, time.monotonic(), None
        self.submit(slot.actor.info.remote(), "start", index)

    def on_start(self, index: int, ref: Any) -> None:
        slot = self.slots[index]
        try:
            info = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            ray.kill(slot.actor, no_restart=True)
            slot.actor, slot.failures = None, slot.failures + 1
            self.log_event("actor_start_failed", actor=f"self-play {index}", attempt=slot.failures, error=str(error)[:500])
            if slot.failures >= ACTOR_START_ATTEMPTS:
                raise RunError(f"the self-play {index} actor failed to start {slot.failures} times; last error: {error}") from error
            slot.retry_at = time.monotonic() + 2.0 * slot.failures
            return
        slot.running, slot.failures = True, 0
        self.log_event("selfplay_started", worker=index, **info)
        if "precision" in info and not self.announced:
            self.announced = True
            self.message(f"self-play network: {info['device']} {info['precision']} ({info['backend']})")
        if info.get("warning") and not self.warned:
            self.warned = True
            self.message(f"warning: {info['warning']} (every actor alike is logged in events.jsonl)")
        self.play(index)

    def play(self, index: int) -> None:
        """The next play call of actor ``index``, after the newest weights if it has older ones."""
        slot = self.slots[index]
        if slot.version != self.version:
            slot.actor.set_weights.remote(self.version, self.weights_ref)
            slot.version = self.version
        self.submit(slot.actor.play.remote(self.config.selfplay.games_per_call, PLAY_CALL_SECONDS), "play", index)

    def on_play(self, index: int, ref: Any, games: int) -> tuple[list, dict] | None:
        """The games and counters of a finished play call (its games in flight kept for the slot); None,
        and a replacement seeded by ``games`` on its way, if the actor died."""
        try:
            result = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            self.log_event("selfplay_died", worker=index, error=str(error)[:500])
            self.message(f"self-play worker {index} died; starting a replacement")
            self.start(index, games)
            return None
        self.inflight[index] = result[1]["inflight"]
        return result

    def tick(self, games: int) -> None:
        """Retry failed starts that are due; report waiting for room once, and the recovery."""
        now = time.monotonic()
        for index, slot in enumerate(self.slots):
            if slot.actor is None and slot.retry_at is not None and now >= slot.retry_at:
                self.start(index, games)
        waiting = any(not slot.running and now - slot.since >= WAITING_NOTICE_SECONDS for slot in self.slots)
        if waiting and not self.waiting_reported:
            self.waiting_reported = True
            self.log_event("selfplay_waiting", running=self.num_running, wanted=len(self.slots))
            self.message(f"{self.status()}; the run goes on with them")
        elif self.waiting_reported and self.num_running == len(self.slots):
            self.waiting_reported = False
            self.log_event("selfplay_recovered", running=self.num_running, wanted=len(self.slots))
            self.message(f"all {len(self.slots)} self-play actors running again")

    def status(self) -> str:
        if self.stopped:
            return "stopped"
        if self.num_running == len(self.slots):
            return f"{len(self.slots)} actors"
        now = time.monotonic()
        if any(not slot.running and now - slot.since >= WAITING_NOTICE_SECONDS for slot in self.slots):
            resources = "CPUs and GPUs" if self.config.workers.selfplay_gpus > 0 else "CPUs"
            return f"{self.num_running} of {len(self.slots)} actors running: waiting for {resources}"
        return f"{self.num_running} of {len(self.slots)} actors running, the others starting"

    def kill_all(self) -> None:
        """Stop every actor (the run's end, or self-play's at ``arena.final``); the pool plays no more."""
        for slot in self.slots:
            if slot.actor is not None:
                ray.kill(slot.actor)
            slot.actor, slot.running = None, False
        self.stopped = True
