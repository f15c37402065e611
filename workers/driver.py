"""The training driver: self-play actors -> replay shards -> learner -> arena -> promotion.

Runs in the process of ``alphazero train``. It owns the run directory's state and the only writes
of replay shards; actors only compute. Self-play and learning run concurrently: the driver reacts
to whichever call finishes first (``ray.wait``), bounded by ``train.max_sample_reuse`` (trained
samples <= reuse x positions generated). Every ``arena.steps_per_generation`` learner steps the
learner's weights become a candidate that plays the best in an arena task; a score >= threshold
promotes it and the self-play actors switch to it between moves.

Faults: a self-play actor or the learner that dies is replaced (the learner reloads its last
save) and the run goes on; both are logged in ``events.jsonl``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from alphazero.checkpoint import ArenaRecord, RunDirectory, RunState, resume_conflicts
from alphazero.config import RunConfig
from alphazero.elo import match_result
from alphazero.network import net_from_payload, safe_torch_load
from alphazero.plots import plot_arena_history
from alphazero.replay import next_shard_path, read_shard, shard_paths, write_shard
from workers import cluster
from workers.actors import LearnerWorker, SelfPlayWorker, run_arena


# A self-play call returns at least this often, finished games or not, so progress never goes silent
# and new weights reach the actors between moves even while long games are in flight.
PLAY_CALL_SECONDS = 15.0
# Attempts at starting one actor before the run gives up (see Driver._start_actor).
ACTOR_START_ATTEMPTS = 3


class RunError(RuntimeError):
    """A run that cannot start or continue; the message says why."""


def start_ray(address: str | None, config: RunConfig) -> bool:
    """Start an embedded local Ray sized to the config (``address`` None) or join a cluster; True if we started it."""
    workers = config.workers
    wanted = workers.num_selfplay_workers * workers.cpus_per_selfplay_worker + workers.learner_cpus + workers.arena_cpus
    return cluster.start_ray(address, max(os.cpu_count() or 1, math.ceil(wanted)), workers.object_store_memory_mb)


def _check_resources(config: RunConfig) -> None:
    workers = config.workers
    available = ray.cluster_resources().get("CPU", 0.0)
    largest = max(workers.cpus_per_selfplay_worker, workers.learner_cpus, workers.arena_cpus)
    total = workers.num_selfplay_workers * workers.cpus_per_selfplay_worker + workers.learner_cpus
    if total > available + 1e-9:
        raise RunError(
            f"the Ray cluster has {available:g} CPUs but the config asks for {total:g} "
            f"({workers.num_selfplay_workers} self-play x {workers.cpus_per_selfplay_worker:g} + learner "
            f"{workers.learner_cpus:g}); lower workers.* or add nodes"
        )
    if largest > available:
        raise RunError(f"no node can host an actor needing {largest:g} CPUs")


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


class Driver:
    """Runs one training run to its configured end; see the module docstring."""

    def __init__(self, config: RunConfig, run_dir: str | Path, resume: bool,
                 progress: Progress | None = None) -> None:
        self.run = RunDirectory(run_dir)
        self.progress = progress or Progress()
        if resume:
            if not self.run.state_path.exists():
                raise RunError(f"--resume: {self.run.path} holds no run (no state.json)")
            saved = self.run.read_config()
            conflicts = resume_conflicts(saved, config)
            if conflicts:
                raise RunError("cannot resume with this config: " + "; ".join(conflicts))
            self.state = self.run.read_state()
            # Read everything a resume depends on now, before Ray starts: a damaged file fails here
            # with its name, and nothing is written until all of them have been read.
            best = self.run.network_path(self.state.best_generation)
            net_from_payload(safe_torch_load(best), str(best))
            learner_state = safe_torch_load(self.run.learner_path)
            if not isinstance(learner_state, dict) or learner_state.get("format") != "alphazero-chess-learner":
                raise RunError(f"{self.run.learner_path}: not a learner state file")
            self._recount_replay()
        else:
            if self.run.exists():
                raise RunError(f"{self.run.path} already holds a run; pass --resume to continue it or pick a new --run-dir")
            self.state = RunState()
        self.config = config
        self.resume = resume

    def _recount_replay(self) -> None:
        """Games and positions come from the shards on disk (the truth after a kill)."""
        games = positions = 0
        for path in shard_paths(self.run.replay_dir):
            shard = read_shard(path)
            games += shard.num_games
            positions += shard.num_positions
        self.state.games, self.state.positions = games, positions

    # -- actors -----------------------------------------------------------------------------------

    def _here(self) -> NodeAffinitySchedulingStrategy:
        return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)

    def _start_actor(self, what: str, create: Callable[[], Any], timeout: float) -> tuple[Any, dict]:
        """Create an actor and wait for its ``info()``; an actor that dies before answering is retried.

        A node lost during start-up, or a worker process killed while importing, should not end a
        run of many hours. Every actor builds itself from its arguments and the run directory, so a
        second attempt is safe; the last failure is the run's error, with Ray's reason.
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

    def _make_selfplay(self, index: int, weights_ref, version: int):
        workers = self.config.workers
        cls = ray.remote(num_cpus=workers.cpus_per_selfplay_worker, max_restarts=0)(SelfPlayWorker)
        seed = self.config.seed * 1_000_003 + self.state.games * 7919 + index
        actor, info = self._start_actor(f"self-play {index}", lambda: cls.options(scheduling_strategy="SPREAD").remote(
            self.config, weights_ref, version, seed), timeout=300)
        self.run.log_event("selfplay_started", worker=index, **info)
        return actor

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

    # -- main loop --------------------------------------------------------------------------------

    def train(self) -> RunState:
        config, state, run = self.config, self.state, self.run
        _check_resources(config)
        if not self.resume:
            run.write_config(config)
            run.log_event("run_started", config=str(run.config_path))
        else:
            run.log_event("run_resumed", generation=state.generation, games=state.games, positions=state.positions)
        self.learner, info = self._make_learner()
        learner_call = self._learner_call
        if not self.resume:
            # state.json is written last: until it exists the directory holds no run (a new run may reuse it).
            ray.get(self.learner.save_network.remote(str(run.network_path(0)), {"generation": 0}), timeout=300)
            ray.get(self.learner.save.remote(), timeout=300)
            run.write_state(state)
        state.learner_step, state.samples_trained = info["step"], info["samples_trained"]
        best_ref = ray.put(safe_torch_load(run.network_path(state.best_generation)))
        actors = [self._make_selfplay(i, best_ref, state.network_version) for i in range(config.workers.num_selfplay_workers)]
        versions = [state.network_version] * len(actors)
        pending: dict[Any, tuple[str, int]] = {}
        for i, actor in enumerate(actors):
            pending[actor.play.remote(config.selfplay.games_per_call, PLAY_CALL_SECONDS)] = ("play", i)
        train_ref = None
        arena_ref = None
        arena_candidate: tuple[int, Path, Any, int] | None = None
        last_arena_step = state.learner_step - (state.learner_step % config.arena.steps_per_generation)
        if state.arenas:
            last_arena_step = max(last_arena_step, state.arenas[-1].learner_step)
        last_losses: dict[str, float] = {}
        started = time.monotonic()
        elapsed_before = state.elapsed_s
        rates = _Rates()
        stop_reason = None
        if config.max_generations and state.generation >= config.max_generations:
            stop_reason = f"already at max_generations={config.max_generations}"

        def status() -> str:
            arena = state.arenas[-1] if state.arenas else None
            arena_text = (f"{arena.wins}-{arena.draws}-{arena.losses} {arena.elo:+.0f} Elo {'promoted' if arena.promoted else 'kept'}"
                          if arena else "none yet")
            loss_text = (f"loss {last_losses['loss']:.3f} (v {last_losses['value_loss']:.3f} p {last_losses['policy_loss']:.3f})"
                         if last_losses else "loss -")
            return (f"gen {state.generation} best gen-{state.best_generation:04d} v{state.network_version} | "
                    f"games {state.games} ({rates.games_per_s():.2f}/s) | pos {state.positions} (moves {rates.positions_per_s():.0f}/s) | "
                    f"window {min(state.positions, config.train.window_positions)} | step {state.learner_step} {loss_text} | "
                    f"arena {arena_text}")

        try:
            while stop_reason is None:
                # Arena: once the learner is far enough past the last candidate, snapshot it between
                # two learner calls (training pauses only for that save, not for the games).
                arena_due = arena_ref is None and state.learner_step - last_arena_step >= config.arena.steps_per_generation
                if arena_due and train_ref is None:
                    generation = state.generation + 1
                    path = run.network_path(generation)
                    if learner_call("save_network", str(path), {"generation": generation, "learner_step": state.learner_step}) is None:
                        continue  # the learner was restarted from its last save; try again next round
                    candidate = safe_torch_load(path)
                    best = safe_torch_load(run.network_path(state.best_generation))
                    arena_task = ray.remote(num_cpus=config.workers.arena_cpus, max_retries=2)(run_arena)
                    arena_ref = arena_task.remote(candidate, best, config, generation, config.workers.torch_threads_per_worker)
                    arena_candidate = (generation, path, ray.put(candidate), state.learner_step)
                    pending[arena_ref] = ("arena", generation)
                    last_arena_step = state.learner_step
                    arena_due = False
                    self.progress.message(f"[gen {generation}] arena: candidate at step {state.learner_step} vs gen-{state.best_generation:04d} ({config.arena.games} games)")
                # Learner: train when there is enough data and the reuse bound allows another call.
                if train_ref is None and not arena_due:
                    steps = config.train.steps_per_call
                    allowed = config.train.max_sample_reuse * state.positions
                    enough = min(state.positions, config.train.window_positions) >= config.train.min_positions
                    if enough and state.samples_trained + steps * config.train.batch_size <= allowed:
                        train_ref = self.learner.train.remote(steps)
                        train_learner = self.learner
                        pending[train_ref] = ("train", 0)

                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    kind, index = pending.pop(ref)
                    if kind == "play":
                        try:
                            games, counters = ray.get(ref)
                        except ray.exceptions.RayActorError as error:
                            run.log_event("selfplay_died", worker=index, error=str(error)[:500])
                            self.progress.message(f"self-play worker {index} died; restarting it")
                            actors[index] = self._make_selfplay(index, best_ref, state.network_version)
                            versions[index] = state.network_version
                            pending[actors[index].play.remote(config.selfplay.games_per_call, PLAY_CALL_SECONDS)] = ("play", index)
                            continue
                        rates.add(len(games), counters["positions"])
                        if games:
                            path = next_shard_path(run.replay_dir)
                            write_shard(path, games)
                            state.games += len(games)
                            state.positions += sum(g.num_positions for g in games)
                            run.write_state(state)
                            learner_call("add_shards", [str(path)])  # a restarted learner reads it from disk
                        if versions[index] != state.network_version:
                            actors[index].set_weights.remote(state.network_version, best_ref)
                            versions[index] = state.network_version
                        pending[actors[index].play.remote(config.selfplay.games_per_call, PLAY_CALL_SECONDS)] = ("play", index)
                    elif kind == "train":
                        train_ref = None
                        try:
                            record = ray.get(ref)
                        except ray.exceptions.RayActorError as error:
                            if train_learner is self.learner:  # not already replaced by another call
                                self._restart_learner(error)
                            continue
                        last_losses = record
                        state.learner_step, state.samples_trained = record["step"], record["samples_trained"]
                        run.write_state(state)
                    elif kind == "arena":
                        arena_ref = None
                        generation, path, candidate_ref, candidate_step = arena_candidate
                        try:
                            result = ray.get(ref)
                        except (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError) as error:
                            # Retried by Ray already; the next candidate gets a new arena.
                            run.log_event("arena_failed", generation=generation, error=str(error)[:2000])
                            self.progress.message(f"[gen {generation}] arena failed ({type(error).__name__}); will retry with the next candidate")
                            continue
                        stats = match_result(result["wins"], result["draws"], result["losses"])
                        promoted = stats.score >= config.arena.threshold
                        record = ArenaRecord(
                            generation=generation, candidate=path.name,
                            best=run.network_path(state.best_generation).name,
                            wins=result["wins"], draws=result["draws"], losses=result["losses"],
                            score=stats.score, elo=_finite(stats.elo), elo_low=_finite(stats.elo_low),
                            elo_high=_finite(stats.elo_high), promoted=promoted, learner_step=candidate_step,
                        )
                        state.arenas.append(record)
                        state.generation = generation
                        if promoted:
                            state.best_generation = generation
                            state.network_version += 1
                            best_ref = candidate_ref
                        _write_pgns(run.path / "arena" / f"gen-{generation:04d}.pgn", result["pgns"])
                        run.write_state(state)
                        plot_arena_history(state, run.path / "arena.png")
                        run.log_event("arena", **asdict(record), terminations=result["terminations"])
                        self.progress.message(
                            f"[gen {generation}] arena {record.wins}-{record.draws}-{record.losses} score {record.score:.3f} "
                            f"Elo {record.elo:+.0f} [{record.elo_low:+.0f}, {record.elo_high:+.0f}] -> "
                            f"{'PROMOTED' if promoted else 'kept best'} gen-{state.best_generation:04d}")
                        if promoted:
                            for i, actor in enumerate(actors):
                                actor.set_weights.remote(state.network_version, best_ref)
                                versions[i] = state.network_version
                        if config.max_generations and state.generation >= config.max_generations:
                            stop_reason = f"reached max_generations={config.max_generations}"
                state.elapsed_s = elapsed_before + time.monotonic() - started
                if stop_reason is None and config.max_minutes and state.elapsed_s >= config.max_minutes * 60:
                    stop_reason = f"reached max_minutes={config.max_minutes}"
                self.progress.update(status())
        except KeyboardInterrupt:
            stop_reason = "interrupted"
        finally:
            state.elapsed_s = elapsed_before + time.monotonic() - started
            if train_ref is not None:
                try:  # let the learner finish and save the steps it is on
                    record = ray.get(train_ref, timeout=600)
                    state.learner_step, state.samples_trained = record["step"], record["samples_trained"]
                except Exception:
                    pass
            run.write_state(state)
            for actor in actors:
                ray.kill(actor)
            ray.kill(self.learner)
        self.progress.message(status())
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


def _write_pgns(path: Path, pgns: list[str]) -> None:
    from alphazero.checkpoint import atomic_write_text

    atomic_write_text(path, "\n\n".join(pgns) + "\n")


def run_training(config: RunConfig, run_dir: str | Path, resume: bool = False, address: str | None = None,
                 progress: Progress | None = None) -> RunState:
    """``alphazero train``: start or join Ray, run the driver, shut down what we started."""
    driver = Driver(config, run_dir, resume, progress)
    started = start_ray(address, config)
    try:
        return driver.train()
    finally:
        if started or ray.is_initialized():
            ray.shutdown()
