"""The training driver: self-play actors -> replay shards -> learner -> arena -> promotion.

Runs in the process of ``alphazero train``. It owns the run directory's state and the only writes
of replay shards and arena games; actors only compute. Self-play and learning run concurrently:
the driver reacts to whichever call finishes first (``ray.wait``), one handler per kind of result,
bounded by ``train.max_sample_reuse`` (trained samples <= reuse x positions generated). Every
``arena.steps_per_generation`` learner steps the learner's weights become a candidate that plays
the best in an arena; a score >= threshold promotes it and the self-play actors switch to it
between moves.

What a cluster does to a run, and what the driver does about it:

- **Kill of the driver (preemption)**: everything is on disk (``alphazero.checkpoint``); ``--resume``
  goes on from there: the self-play games in flight (saved after every play call, at most 15 s old)
  and the arena in flight (each game saved as it ends) continue where they were.
- **Two drivers**: the run directory's lock (``RUN/.train.lock``) admits one; the second exits 2
  naming the host and PID of the first.
- **A dead actor or a lost node**: ``SelfPlayPool`` replaces dead self-play actors without
  blocking; a replacement that cannot be placed waits in Ray's queue while the run goes on with the
  actors that fit, and starts by itself when a node with room joins. Status line and
  ``events.jsonl`` say how many are running. A dead learner is replaced (it reloads its last save);
  a dead arena worker is replaced and plays the games still missing.
- **A config that does not fit** the machine of an embedded Ray is refused before anything starts
  (``check_fits``), unless the user asks to oversubscribe.
- **A failed write** (full disk, I/O error) stops the run with one line naming the file; every
  earlier file is intact and ``--resume`` works once there is room again.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from alphazero.board.game import MAX_LENGTH, RESIGNATION
from alphazero.checkpoint import (
    ArenaRecord,
    PendingArena,
    RunDirectory,
    RunState,
    resume_conflicts,
)
from alphazero.config import RunConfig
from alphazero.errors import UserError
from alphazero.fileio import DirectoryLock, LockedError, atomic_write_text
from alphazero.judge.arena import Opening, match_schedule
from alphazero.judge.elo import elo_text, match_result
from alphazero.judge.plots import plot_arena_history
from alphazero.learn.curves import Curves
from alphazero.learn.pretrain import init_learner_state, load_init_network
from alphazero.learn.replay import (
    next_shard_path,
    read_inflight,
    read_shard,
    shard_paths,
    write_inflight,
    write_shard,
)
from alphazero.nets.network import atomic_torch_save, net_from_payload, safe_torch_load
from workers import cluster
from workers.actors import ArenaWorker, LearnerWorker, SelfPlayWorker, arena_openings

# A self-play or arena call returns at least this often, finished games or not, so progress never
# goes silent, new weights reach the actors between moves, and finished arena games reach the disk.
PLAY_CALL_SECONDS = 15.0
# Attempts at starting one actor before the run gives up (consecutive failures, see _start_actor).
ACTOR_START_ATTEMPTS = 3
# A self-play actor not running after this long is reported as waiting for resources.
WAITING_NOTICE_SECONDS = 10.0


class RunError(UserError):
    """A run that cannot start or continue (the config does not fit, the run directory cannot be
    resumed, a write failed); the message says why and what to do."""


def available_cpus() -> int:
    """CPUs this process may use (its affinity mask, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def wanted_cpus(config: RunConfig) -> float:
    workers = config.workers
    return workers.num_selfplay_workers * workers.cpus_per_selfplay_worker + workers.learner_cpus + workers.arena_cpus


def check_fits(config: RunConfig, oversubscribe: bool = False) -> int:
    """The CPUs an embedded Ray gets; refuses a config that does not fit this machine.

    Ray would otherwise start every actor the config asks for on however few cores there are (38
    processes on two cores for ``configs/large.yaml``), and the machine thrashes before the first
    status line. ``oversubscribe`` runs it anyway, with a Ray as large as the config.
    """
    if config.train.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RunError("train.device is cuda but this machine has no CUDA GPU; use --set train.device=auto, "
                           "or --address to join a cluster that has one")
    cpus = available_cpus()
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


def _check_learner_fits(config: RunConfig) -> None:
    """The learner lives on the driver's node (it reads the run directory): that node must have room."""
    node_id = ray.get_runtime_context().get_node_id()
    node = next((n for n in ray.nodes() if n.get("NodeID") == node_id), None)
    cpus = (node or {}).get("Resources", {}).get("CPU", 0.0)
    if config.workers.learner_cpus > cpus + 1e-9:
        raise RunError(f"the learner needs {config.workers.learner_cpus:g} CPUs on the driver's node, which has {cpus:g}; "
                       "run the driver on a larger node or lower workers.learner_cpus")


def _cause(error: BaseException) -> BaseException:
    """The original exception of an error raised in a Ray worker (``RayTaskError.cause``)."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


class Progress:
    """One status line: rewritten in place on a terminal, printed every ``interval`` s otherwise."""

    def __init__(self, stream=sys.stderr, interval: float = 10.0) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.interval = 1.0 if self.tty else interval
        self.last = 0.0

    def update(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        self.stream.flush()


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
    """Keeps ``config.workers.num_selfplay_workers`` self-play actors, replacing the dead, never blocking.

    A replacement is created at once; if the cluster has no room for it (a node was lost), Ray keeps
    it queued and places it when room appears (a node joins), while the run goes on with the actors
    that are running. Only an actor that dies ``ACTOR_START_ATTEMPTS`` times in a row before it
    answers ends the run (that is a broken actor, not a lost node).
    """

    def __init__(self, driver: "Driver") -> None:
        self.driver = driver
        self.slots = [_Slot() for _ in range(driver.config.workers.num_selfplay_workers)]
        self.waiting_reported = False

    @property
    def num_running(self) -> int:
        return sum(slot.running for slot in self.slots)

    def start(self, index: int) -> None:
        driver, config = self.driver, self.driver.config
        slot = self.slots[index]
        cls = ray.remote(num_cpus=config.workers.cpus_per_selfplay_worker, max_restarts=0)(SelfPlayWorker)
        seed = config.seed * 1_000_003 + driver.state.games * 7919 + index
        slot.actor = cls.options(scheduling_strategy="SPREAD").remote(
            config, driver.best_ref, driver.state.network_version, seed, driver.inflight[index])
        slot.version = driver.state.network_version
        slot.running, slot.since, slot.retry_at = False, time.monotonic(), None
        driver.submit(slot.actor.info.remote(), "start", index)

    def start_all(self) -> None:
        for index in range(len(self.slots)):
            self.start(index)

    def on_start(self, index: int, ref: Any) -> None:
        slot = self.slots[index]
        try:
            info = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            ray.kill(slot.actor, no_restart=True)
            slot.actor, slot.failures = None, slot.failures + 1
            self.driver.run.log_event("actor_start_failed", actor=f"self-play {index}", attempt=slot.failures,
                                      error=str(error)[:500])
            if slot.failures >= ACTOR_START_ATTEMPTS:
                raise RunError(f"the self-play {index} actor failed to start {slot.failures} times; last error: {error}") from error
            slot.retry_at = time.monotonic() + 2.0 * slot.failures
            return
        slot.running, slot.failures = True, 0
        self.driver.run.log_event("selfplay_started", worker=index, **info)
        self.play(index)

    def play(self, index: int) -> None:
        """The next play call of actor ``index``, after the newest weights if it has older ones."""
        driver, slot = self.driver, self.slots[index]
        if slot.version != driver.state.network_version:
            slot.actor.set_weights.remote(driver.state.network_version, driver.best_ref)
            slot.version = driver.state.network_version
        driver.submit(slot.actor.play.remote(driver.config.selfplay.games_per_call, PLAY_CALL_SECONDS), "play", index)

    def on_play(self, index: int, ref: Any) -> tuple[list, dict] | None:
        """The games of a finished play call; None (and a replacement on its way) if the actor died."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as error:
            self.driver.run.log_event("selfplay_died", worker=index, error=str(error)[:500])
            self.driver.progress.message(f"self-play worker {index} died; starting a replacement")
            self.start(index)
            return None

    def new_weights(self) -> None:
        """Send the newest best network to every running actor (starting ones get it when they answer)."""
        driver = self.driver
        for slot in self.slots:
            if slot.running and slot.version != driver.state.network_version:
                slot.actor.set_weights.remote(driver.state.network_version, driver.best_ref)
                slot.version = driver.state.network_version

    def tick(self) -> None:
        """Retry failed starts that are due; report waiting for room once, and the recovery."""
        now = time.monotonic()
        for index, slot in enumerate(self.slots):
            if slot.actor is None and slot.retry_at is not None and now >= slot.retry_at:
                self.start(index)
        waiting = any(not slot.running and now - slot.since >= WAITING_NOTICE_SECONDS for slot in self.slots)
        if waiting and not self.waiting_reported:
            self.waiting_reported = True
            self.driver.run.log_event("selfplay_waiting", running=self.num_running, wanted=len(self.slots))
            self.driver.progress.message(f"{self.status()}; the run goes on with them")
        elif self.waiting_reported and self.num_running == len(self.slots):
            self.waiting_reported = False
            self.driver.run.log_event("selfplay_recovered", running=self.num_running, wanted=len(self.slots))
            self.driver.progress.message(f"all {len(self.slots)} self-play actors running again")

    def status(self) -> str:
        if self.num_running == len(self.slots):
            return f"{len(self.slots)} actors"
        now = time.monotonic()
        if any(not slot.running and now - slot.since >= WAITING_NOTICE_SECONDS for slot in self.slots):
            return f"{self.num_running} of {len(self.slots)} actors running: waiting for CPUs"
        return f"{self.num_running} of {len(self.slots)} actors running, the others starting"

    def kill_all(self) -> None:
        for slot in self.slots:
            if slot.actor is not None:
                ray.kill(slot.actor)


class _GameStats:
    """How self-play games ended since the last arena: what the value head learns from, and resignation."""

    def __init__(self) -> None:
        self.games = self.decisive = self.max_length = self.resigned = self.plies = 0
        self.playouts = self.would_resign = self.false_resign = 0

    def add(self, games: list) -> None:
        for game in games:
            self.games += 1
            self.plies += game.plies
            self.decisive += game.result != "1/2-1/2"
            self.max_length += game.termination == MAX_LENGTH
            self.resigned += game.termination == RESIGNATION
            self.playouts += bool(game.extra.get("resign_playout"))
            self.would_resign += bool(game.extra.get("would_resign"))
            self.false_resign += bool(game.extra.get("false_resign"))

    def summary(self) -> dict[str, float | int | None]:
        share = (lambda count: round(count / self.games, 4)) if self.games else (lambda count: None)
        return {
            "games": self.games, "decisive": share(self.decisive), "max_length": share(self.max_length),
            "resigned": share(self.resigned), "mean_plies": round(self.plies / self.games, 1) if self.games else None,
            "resign_playouts": self.playouts, "would_resign": self.would_resign,
            "false_resign_rate": round(self.false_resign / self.would_resign, 4) if self.would_resign else None,
        }


class Driver:
    """Runs one training run to its configured end; see the module docstring."""

    # Set by _train once Ray runs.
    arena_worker: Any  # the pending arena's Ray actor (its methods are called through .remote)
    arena_failures: int
    last_losses: dict[str, float]
    game_stats: _GameStats
    curves: Curves

    def __init__(self, config: RunConfig, run_dir: str | Path, resume: bool,
                 progress: Progress | None = None, init: str | Path | None = None) -> None:
        self.run = RunDirectory(run_dir)
        self.progress = progress or Progress()
        self.lock: DirectoryLock | None = None
        if init is not None and resume:
            raise RunError("--init starts a new run from a network; a resumed run goes on from its own")
        # A new run from a given network (alphazero pretrain): its shape is checked before anything starts.
        self.init, self.init_payload = init, (load_init_network(init, config.network) if init is not None else None)
        if resume and not self.run.state_path.exists():
            raise RunError(f"--resume: {self.run.path} holds no run (no state.json)")
        try:  # before anything is read: another driver may be writing
            self.lock = self.run.lock()
        except LockedError as error:
            raise RunError(str(error)) from None
        try:
            if resume:
                self._read_for_resume(config)
            else:
                if self.run.exists():
                    raise RunError(f"{self.run.path} already holds a run; pass --resume to continue it or pick a new --run-dir")
                self.state = RunState()
        except BaseException:
            self.close()
            raise
        self.config = config
        self.resume = resume
        self.pending: dict[Any, tuple[str, int]] = {}
        self.best_ref: Any = None

    def _read_for_resume(self, config: RunConfig) -> None:
        saved = self.run.read_config()
        conflicts = resume_conflicts(saved, config)
        if conflicts:
            raise RunError("cannot resume with this config: " + "; ".join(conflicts))
        self.state = self.run.read_state()
        # Read everything a resume depends on now, before Ray starts: a damaged file fails here
        # with its name, and nothing is written until all of them have been read.
        best = self.run.network_path(self.state.best_generation)
        net_from_payload(safe_torch_load(best), str(best))
        if self.state.pending_arena is not None:
            candidate = self.run.networks_dir / self.state.pending_arena.candidate
            net_from_payload(safe_torch_load(candidate), str(candidate))
            self.run.read_arena_games(self.state.pending_arena.generation)
        try:
            read_inflight(self.run.inflight_path)
        except ValueError as error:
            raise RunError(f"{error}; delete it to resume without the games it holds") from None
        learner_state = safe_torch_load(self.run.learner_path)
        if not isinstance(learner_state, dict) or learner_state.get("format") != "alphazero-chess-learner":
            raise RunError(f"{self.run.learner_path}: not a learner state file")
        self._recount_replay()

    def close(self) -> None:
        """Release the run directory (also done by the kernel if the process dies)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def _recount_replay(self) -> None:
        """Games and positions come from the shards on disk (the truth after a kill)."""
        games = positions = 0
        for path in shard_paths(self.run.replay_dir):
            shard = read_shard(path)
            games += shard.num_games
            positions += shard.num_positions
        self.state.games, self.state.positions = games, positions

    def _deal_inflight(self) -> list[list[dict]]:
        """The saved games in flight, dealt round-robin to this run's self-play slots (their number may have changed)."""
        games = [game for slot in read_inflight(self.run.inflight_path) for game in slot]
        slots: list[list[dict]] = [[] for _ in range(self.config.workers.num_selfplay_workers)]
        for number, game in enumerate(games):
            slots[number % len(slots)].append(game)
        if games:
            self.run.log_event("inflight_restored", games=len(games))
        return slots

    def submit(self, ref: Any, kind: str, index: int) -> None:
        """Wait for ``ref`` in the main loop; its result goes to the handler of ``kind``."""
        self.pending[ref] = (kind, index)

    # -- actors -----------------------------------------------------------------------------------

    def _here(self) -> NodeAffinitySchedulingStrategy:
        return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)

    def _start_actor(self, what: str, create: Callable[[], Any], timeout: float) -> tuple[Any, dict]:
        """Create an actor and wait for its ``info()``; an actor that dies before answering is retried.

        For the learner, which the run cannot go on without. A node lost during start-up, or a
        worker process killed while importing, should not end a run of many hours. Every actor
        builds itself from its arguments and the run directory, so a second attempt is safe; the
        last failure is the run's error, with Ray's reason.
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
                self.run.log_event("actor_start_failed", actor=what, attempt=attempt, error=str(error)[:500])
                if attempt == ACTOR_START_ATTEMPTS:
                    raise RunError(f"the {what} actor failed to start {attempt} times; last error: {error}") from error
                time.sleep(2.0 * attempt)
        raise AssertionError("unreachable")

    def _make_learner(self):
        workers = self.config.workers
        cls = ray.remote(num_cpus=workers.learner_cpus, max_restarts=0)(LearnerWorker)
        threads = max(1, int(workers.learner_cpus) or 1)
        learner, info = self._start_actor("learner", lambda: cls.options(scheduling_strategy=self._here()).remote(
            str(self.run.path), self.config, threads), timeout=600)
        self.run.log_event("learner_started", **info)
        return learner, info

    def _restart_learner(self, error: Exception) -> None:
        """Replace a dead learner; the new one reloads learner.pt and the newest shards."""
        self.run.log_event("learner_died", error=str(error)[:500])
        self.progress.message("learner died; restarting it from its last save")
        self.learner, info = self._make_learner()
        self.state.learner_step, self.state.samples_trained = info["step"], info["samples_trained"]

    def _learner_call(self, method: str, *args: Any) -> Any:
        """A blocking learner call; on the learner's death, restart it and return None."""
        try:
            return ray.get(getattr(self.learner, method).remote(*args), timeout=600)
        except ray.exceptions.RayActorError as error:
            self._restart_learner(error)
            return None

    # -- arena ------------------------------------------------------------------------------------

    def _begin_arena(self) -> bool:
        """Snapshot the learner as the next candidate and start its arena; False if the learner died."""
        state, run, config = self.state, self.run, self.config
        generation = state.generation + 1
        path = run.network_path(generation)
        if self._learner_call("save_network", str(path), {"generation": generation, "learner_step": state.learner_step}) is None:
            return False  # the learner was restarted from its last save; try again next round
        # Games of an earlier, abandoned arena of this generation number belong to another candidate.
        run.arena_games_path(generation).unlink(missing_ok=True)
        run.arena_inflight_path(generation).unlink(missing_ok=True)
        openings = arena_openings(config, generation)
        state.pending_arena = PendingArena(
            generation=generation, candidate=path.name, best=run.network_path(state.best_generation).name,
            best_generation=state.best_generation, learner_step=state.learner_step,
            openings=[[o.name, o.fen, list(o.moves)] for o in openings])
        run.write_state(state)
        run.log_event("arena_started", generation=generation, learner_step=state.learner_step, games=2 * len(openings))
        self.progress.message(f"[gen {generation}] arena: candidate at step {state.learner_step} vs "
                              f"gen-{state.best_generation:04d} ({2 * len(openings)} games)")
        self._start_arena_worker()
        return True

    def _pending_arena(self) -> PendingArena:
        """The arena in progress (the arena handlers run only while there is one)."""
        pending = self.state.pending_arena
        assert pending is not None
        return pending

    def _start_arena_worker(self) -> None:
        """An arena worker for the pending arena's missing games (all of them, or what a stop left)."""
        pending, run, config = self._pending_arena(), self.run, self.config
        done = run.read_arena_games(pending.generation)
        openings = [Opening(name, fen, tuple(moves)) for name, fen, moves in pending.openings]
        schedule = [entry for entry in match_schedule(openings) if entry[0] not in done]
        if not schedule:
            self._decide_arena()
            return
        if done or run.arena_inflight_path(pending.generation).exists():
            self.progress.message(f"[gen {pending.generation}] arena: continuing, {len(done)} of "
                                  f"{pending.num_games} games finished, the others from where they were")
        candidate = safe_torch_load(run.networks_dir / pending.candidate)
        best = safe_torch_load(run.networks_dir / pending.best)
        cls = ray.remote(num_cpus=config.workers.arena_cpus, max_restarts=0)(ArenaWorker)
        played = run.read_arena_inflight(pending.generation)
        self.arena_worker = cls.remote(candidate, best, config, pending.generation, schedule,
                                       config.workers.torch_threads_per_worker, played)
        self.submit(self.arena_worker.play.remote(PLAY_CALL_SECONDS), "arena", pending.generation)

    def _on_arena(self, ref: Any) -> None:
        pending, run = self._pending_arena(), self.run
        try:
            games, finished, in_flight = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            self.arena_failures += 1
            run.log_event("arena_worker_died", generation=pending.generation, error=str(error)[:500])
            if self.arena_failures < ACTOR_START_ATTEMPTS:
                self.progress.message(f"[gen {pending.generation}] arena worker died; continuing with a new one")
                self._start_arena_worker()
                return
            self._abandon_arena(error)
            return
        except ray.exceptions.RayTaskError as error:  # a bug or bad input, not a lost process: retrying won't help
            self._abandon_arena(error)
            return
        self.arena_failures = 0
        for game in games:
            run.append_arena_game(pending.generation, {
                "index": game.index, "result": game.result, "termination": game.termination, "plies": game.plies,
                "a_is_white": game.a_is_white, "white": game.white, "black": game.black,
                "opening": game.opening.name, "pgn": game.pgn, "pid": os.getpid(), "time": time.time()})
        # After the finished games: a game in both files counts as finished (its index is done).
        run.write_arena_inflight(pending.generation, in_flight)
        if finished:
            ray.kill(self.arena_worker)
            self._decide_arena()
        else:
            self.submit(self.arena_worker.play.remote(PLAY_CALL_SECONDS), "arena", pending.generation)

    def _abandon_arena(self, error: BaseException) -> None:
        generation = self._pending_arena().generation
        self.run.log_event("arena_failed", generation=generation, error=str(error)[:2000])
        self.progress.message(f"[gen {generation}] arena failed ({type(error).__name__}); the next candidate gets a new one")
        self.state.pending_arena = None
        self.run.write_state(self.state)

    def _decide_arena(self) -> None:
        """Score the pending arena from its saved games (those of every process that played it)."""
        state, run, config = self.state, self.run, self.config
        pending = self._pending_arena()
        games = [game for _, game in sorted(run.read_arena_games(pending.generation).items())]
        scores = [{"1-0": 1.0, "0-1": 0.0}.get(g["result"], 0.5) for g in games]
        scores = [s if g["a_is_white"] else 1.0 - s for s, g in zip(scores, games)]
        wins, draws, losses = scores.count(1.0), scores.count(0.5), scores.count(0.0)
        stats = match_result(wins, draws, losses)
        promoted = stats.score >= config.arena.threshold
        record = ArenaRecord(
            generation=pending.generation, candidate=pending.candidate, best=pending.best,
            wins=wins, draws=draws, losses=losses, score=stats.score, elo=_finite(stats.elo),
            elo_low=_finite(stats.elo_low), elo_high=_finite(stats.elo_high), promoted=promoted,
            learner_step=pending.learner_step,
        )
        atomic_write_text(run.arena_pgn_path(pending.generation), "\n\n".join(g["pgn"] for g in games) + "\n")
        terminations: dict[str, int] = {}
        for game in games:
            terminations[game["termination"]] = terminations.get(game["termination"], 0) + 1
        state.arenas.append(record)
        state.generation = pending.generation
        state.pending_arena = None
        if promoted:
            state.best_generation = pending.generation
            state.network_version += 1
            self.best_ref = ray.put(safe_torch_load(run.networks_dir / pending.candidate))
        run.write_state(state)
        run.arena_inflight_path(pending.generation).unlink(missing_ok=True)
        plot_arena_history(state, run.path / "arena.png")
        run.log_event("arena", **asdict(record), terminations=terminations,
                      processes=len({g.get("pid") for g in games}))
        games_summary = self.game_stats.summary()
        run.log_event("selfplay_stats", generation=record.generation, **games_summary)
        self.game_stats = _GameStats()
        best_elo = sum(a.elo for a in state.arenas if a.promoted)
        self.curves.add("arena", record.learner_step, {"elo": record.elo, "elo_low": record.elo_low,
                                                       "elo_high": record.elo_high, "score": record.score,
                                                       "promoted": int(promoted), "best_elo_chained": best_elo})
        self.curves.add("value_targets", record.learner_step,
                        {k: v for k, v in games_summary.items() if k not in ("games", "resign_playouts")})
        self.progress.message(
            f"[gen {record.generation}] arena {record.wins}-{record.draws}-{record.losses} score {record.score:.3f} "
            f"{elo_text(record.elo, record.elo_low, record.elo_high, digits=0)} -> "
            f"{'PROMOTED' if promoted else 'kept best'} gen-{state.best_generation:04d}")
        if promoted:
            self.pool.new_weights()

    # -- main loop --------------------------------------------------------------------------------

    def _on_play(self, index: int, ref: Any) -> None:
        result = self.pool.on_play(index, ref)
        if result is None:
            return
        games, counters = result
        state, run = self.state, self.run
        # Games in flight first, finished games second: a kill in between loses this call's finished
        # games, but no game can ever be both finished on disk and continued again.
        self.inflight[index] = counters["inflight"]
        write_inflight(run.inflight_path, self.inflight)
        self.rates.add(len(games), counters["positions"])
        self.game_stats.add(games)
        self.curves.add("selfplay", state.learner_step, {"games_per_s": self.rates.games_per_s(),
                                                         "positions_per_s": self.rates.positions_per_s(),
                                                         "actors_running": self.pool.num_running})
        if games:
            path = next_shard_path(run.replay_dir)
            write_shard(path, games)
            state.games += len(games)
            state.positions += sum(g.num_positions for g in games)
            run.write_state(state)
            self._learner_call("add_shards", [str(path)])  # a restarted learner reads it from disk
        self.pool.play(index)

    def _on_train(self, ref: Any) -> None:
        self.train_ref = None
        try:
            record = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            if self.train_learner is self.learner:  # not already replaced by another call
                self._restart_learner(error)
            return
        self.last_losses = record
        self.state.learner_step, self.state.samples_trained = record["step"], record["samples_trained"]
        self.run.write_state(self.state)

    def _status(self) -> str:
        state, config, losses = self.state, self.config, self.last_losses
        arena = state.arenas[-1] if state.arenas else None
        arena_text = (f"{arena.wins}-{arena.draws}-{arena.losses} {elo_text(arena.elo, arena.elo_low, arena.elo_high, 0, False)} "
                      f"{'promoted' if arena.promoted else 'kept'}"
                      if arena else "none yet")
        if state.pending_arena is not None:
            played = len(self.run.read_arena_games(state.pending_arena.generation))
            arena_text += f"; gen {state.pending_arena.generation} playing {played}/{state.pending_arena.num_games}"
        loss_text = (f"loss {losses['loss']:.3f} (v {losses['value_loss']:.3f} p {losses['policy_loss']:.3f}"
                     + (f" m {losses['material_loss']:.3f}" if losses.get("material_loss") else "") + ")"
                     if losses else "loss -")
        return (f"gen {state.generation} best gen-{state.best_generation:04d} v{state.network_version} | "
                f"self-play {self.pool.status()} | games {state.games} ({self.rates.games_per_s():.2f}/s) | "
                f"pos {state.positions} (moves {self.rates.positions_per_s():.0f}/s) | "
                f"window {min(state.positions, config.train.window_positions)} | step {state.learner_step} {loss_text} | "
                f"arena {arena_text}")

    def train(self) -> RunState:
        """Run to the configured end; a failed write ends the run with a ``RunError`` naming the file."""
        try:
            return self._train()
        except OSError as error:
            cause = _cause(error)
            raise RunError(f"{cause}; the run stopped, every earlier file is intact: make room and continue "
                           "with --resume") from None
        except ray.exceptions.RayTaskError as error:
            cause = _cause(error)
            if isinstance(cause, OSError):
                raise RunError(f"{cause}; the run stopped, every earlier file is intact: make room and continue "
                               "with --resume") from None
            raise
        finally:
            self.close()

    def _train(self) -> RunState:
        config, state, run = self.config, self.state, self.run
        _check_learner_fits(config)
        if not self.resume:
            run.write_config(config)
            run.log_event("run_started", config=str(run.config_path), init=None if self.init is None else str(self.init))
            if self.init_payload is not None:  # the learner starts from it, and saves it as generation 0 below
                atomic_torch_save(init_learner_state(config, self.init_payload), run.learner_path)
        else:
            run.log_event("run_resumed", generation=state.generation, games=state.games, positions=state.positions,
                          pending_arena=state.pending_arena.generation if state.pending_arena else None)
        self.learner, info = self._make_learner()
        if not self.resume:
            # state.json is written last: until it exists the directory holds no run (a new run may reuse it).
            ray.get(self.learner.save_network.remote(str(run.network_path(0)), {"generation": 0}), timeout=300)
            ray.get(self.learner.save.remote(), timeout=300)
            run.write_state(state)
        state.learner_step, state.samples_trained = info["step"], info["samples_trained"]
        self.best_ref = ray.put(safe_torch_load(run.network_path(state.best_generation)))
        self.inflight = self._deal_inflight()
        self.pool = SelfPlayPool(self)
        self.pool.start_all()
        self.train_ref = self.train_learner = None
        self.arena_failures = 0
        self.last_losses = {}
        self.rates = _Rates()
        self.game_stats = _GameStats()
        self.curves = Curves(run.tensorboard_dir)
        if state.pending_arena is not None:
            last_arena_step = state.pending_arena.learner_step
            self._start_arena_worker()  # the arena a stop interrupted goes on with its missing games
        else:
            last_arena_step = state.learner_step - (state.learner_step % config.arena.steps_per_generation)
            if state.arenas:
                last_arena_step = max(last_arena_step, state.arenas[-1].learner_step)
        started = time.monotonic()
        elapsed_before = state.elapsed_s
        stop_reason = None

        def goal_reached() -> str | None:
            if config.max_generations and state.generation >= config.max_generations:
                return f"reached max_generations={config.max_generations}"
            if config.max_minutes and state.elapsed_s >= config.max_minutes * 60:
                return f"reached max_minutes={config.max_minutes}"
            return None

        stop_reason = goal_reached()
        try:
            while stop_reason is None:
                # Arena: once the learner is far enough past the last candidate, snapshot it between
                # two learner calls (training pauses only for that save, not for the games).
                arena_due = (state.pending_arena is None
                             and state.learner_step - last_arena_step >= config.arena.steps_per_generation)
                if arena_due and self.train_ref is None:
                    if self._begin_arena():
                        last_arena_step = state.learner_step
                        arena_due = False
                # Learner: train when there is enough data and the reuse bound allows another call.
                if self.train_ref is None and not arena_due:
                    steps = config.train.steps_per_call
                    allowed = config.train.max_sample_reuse * state.positions
                    enough = min(state.positions, config.train.window_positions) >= config.train.min_positions
                    if enough and state.samples_trained + steps * config.train.batch_size <= allowed:
                        self.train_ref = self.learner.train.remote(steps)
                        self.train_learner = self.learner
                        self.submit(self.train_ref, "train", 0)

                ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    kind, index = self.pending.pop(ref)
                    if kind == "start":
                        self.pool.on_start(index, ref)
                    elif kind == "play":
                        self._on_play(index, ref)
                    elif kind == "train":
                        self._on_train(ref)
                    elif kind == "arena":
                        self._on_arena(ref)
                self.pool.tick()
                state.elapsed_s = elapsed_before + time.monotonic() - started
                stop_reason = goal_reached()
                self.progress.update(self._status())
        except KeyboardInterrupt:
            stop_reason = "interrupted"
        finally:
            state.elapsed_s = elapsed_before + time.monotonic() - started
            if self.train_ref is not None:
                try:  # let the learner finish and save the steps it is on
                    record = ray.get(self.train_ref, timeout=600)
                    state.learner_step, state.samples_trained = record["step"], record["samples_trained"]
                except Exception:
                    pass
            try:
                run.write_state(state)
            except OSError:
                pass  # the write that failed first is the error the user sees
            self.pool.kill_all()
            ray.kill(self.learner)
            self.curves.close()
        self.progress.message(self._status())
        self.progress.message(f"stopped: {stop_reason}; run directory {run.path}")
        run.log_event("run_stopped", reason=stop_reason, generation=state.generation, games=state.games)
        return state


class _Rates:
    """Games and positions per second over the last few minutes."""

    def __init__(self, horizon: float = 120.0) -> None:
        self.horizon = horizon
        self.events: list[tuple[float, int, int]] = []
        self.start = time.monotonic()

    def add(self, games: int, positions: int) -> None:
        now = time.monotonic()
        self.events.append((now, games, positions))
        self.events = [e for e in self.events if now - e[0] <= self.horizon]

    def _span(self) -> float:
        now = time.monotonic()
        return max(1e-9, min(self.horizon, now - self.start))

    def games_per_s(self) -> float:
        return sum(e[1] for e in self.events) / self._span()

    def positions_per_s(self) -> float:
        return sum(e[2] for e in self.events) / self._span()


def _finite(value: float) -> float:
    return float(value) if math.isfinite(value) else (1e4 if value > 0 else -1e4)


def run_training(config: RunConfig, run_dir: str | Path, resume: bool = False, address: str | None = None,
                 progress: Progress | None = None, oversubscribe: bool = False, init: str | Path | None = None) -> RunState:
    """``alphazero train``: check the config fits, start or join Ray, run the driver, shut down what we started.

    ``init``: a network file (``alphazero pretrain``) a new run starts from, as generation 0 and as the
    learner's weights, instead of a random network.
    """
    cpus = check_fits(config, oversubscribe) if address is None else 0
    driver = Driver(config, run_dir, resume, progress, init)
    try:
        started = cluster.start_ray(address, cpus, config.workers.object_store_memory_mb)
    except BaseException:
        driver.close()
        raise
    try:
        return driver.train()
    finally:
        if started or ray.is_initialized():
            ray.shutdown()
