"""The training driver: self-play actors -> replay shards -> learner -> arena -> promotion.

Runs in the process of ``alphazero train``. It owns the run directory's state and the only writes
of replay shards and arena games; actors only compute. Self-play and learning run concurrently:
the driver reacts to whichever call finishes first (``ray.wait``, with every other result already in: the
self-play results of one pass are written together), one handler per kind of result,
bounded by ``train.max_sample_reuse`` (trained samples <= reuse x positions generated). Every
``arena.steps_per_generation`` learner steps the learner's weights become a candidate that plays
the best in an arena; a score >= threshold promotes it and the self-play actors switch to it
between moves.

The decisions are the core's, with their unit tests: when to train, when an arena is due and when
the run stops (``alphazero.learn.run``), what a resume checks (``read_for_resume``), how an arena is
scored and what a promotion changes (``alphazero.judge.promotion``). This module applies them to
actors and files: it owns the main loop, the learner and arena actors, and what happens when one of
them dies; the self-play actors are ``workers.pool.SelfPlayPool``'s.

What a cluster does to a run, and what the driver does about it:

- **Kill of the driver (preemption)**: everything is on disk (``alphazero.checkpoint``); ``--resume``
  goes on from there: the self-play games in flight (saved after every play call, at most 15 s old)
  and the arena in flight (each game saved as it ends) continue where they were.
- **Ctrl-C, ``max_minutes``, ``max_generations``**: the loop stops, the learner call in flight is
  waited for (its steps are saved), the state is written, and the actors are stopped. A resume of a run
  that has reached its end, with no arena pending or due, says so and stops before Ray starts.
- **Two drivers**: the run directory's lock (``RUN/.train.lock``) admits one; the second exits 2
  naming the host and PID of the first.
- **A dead actor or a lost node**: ``SelfPlayPool`` replaces dead self-play actors without
  blocking; a replacement that cannot be placed waits in Ray's queue while the run goes on with the
  actors that fit, and starts by itself when a node with room joins. Status line and
  ``events.jsonl`` say how many are running. A dead learner is replaced (it reloads its last save);
  a dead arena worker is replaced and plays the games still missing; after ``ACTOR_START_ATTEMPTS``
  deaths in a row, or an error in its code, the arena is abandoned and the next candidate's arena gets a
  new worker (otherwise one worker plays every arena of the run).
- **A config that does not fit** the machine of an embedded Ray is refused before anything starts
  (``workers.cluster.check_fits``), unless the user asks to oversubscribe (CPUs only: GPU shares Ray
  cannot place are always refused, on a joined cluster too, ``check_cluster_gpus``, before any actor).
- **A failed write** (full disk, I/O error) stops the run with one line naming the file; every
  earlier file is intact and ``--resume`` works once there is room again.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from alphazero.checkpoint import PendingArena, RunDirectory, RunState, config_changes
from alphazero.config import RunConfig
from alphazero.fileio import DirectoryLock, LockedError, atomic_write_text
from alphazero.judge.elo import elo_text
from alphazero.judge.plots import plot_arena_history
from alphazero.judge.promotion import (
    arena_game_line,
    decide_arena,
    missing_games,
    pending_arena,
    promote,
    record_arena,
)
from alphazero.learn.curves import Curves
from alphazero.learn.pretrain import first_learner, load_init_network
from alphazero.learn.replay import following_shard_path, next_shard_path, read_inflight, write_inflight, write_shard
from alphazero.learn.run import (
    GameStats,
    arena_due,
    deal_inflight,
    final_arena_due,
    finished,
    first_arena_step,
    may_train,
    read_for_resume,
    run_progress,
    stop_reason,
    time_up,
)
from alphazero.nets.network import atomic_torch_save, safe_torch_load, save_network
from workers.actors import ArenaGames, ArenaWorker, LearnerWorker, SelfPlayWorker
from workers.cluster import (
    ACTOR_START_ATTEMPTS,
    RunError,
    check_cluster_gpus,
    check_fits,
    machine_gpus,
    start_actor,
    start_ray,
)
from workers.pool import PLAY_CALL_SECONDS, SelfPlayPool
from workers.progress import Progress, Rates


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


class Driver:
    """Runs one training run to its configured end; see the module docstring.

    The constructor takes the run directory's lock and reads and checks everything the run needs
    before Ray starts (a refused run writes nothing); ``train`` runs it on the Ray this process has.
    ``selfplay_class``: the self-play actors' class (``SelfPlayPool``'s ``actor_class``).
    """

    def __init__(self, config: RunConfig, run_dir: str | Path, resume: bool,
                 progress: Progress | None = None, init: str | Path | None = None,
                 selfplay_class: type = SelfPlayWorker) -> None:
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
                self.state = read_for_resume(self.run, config)
            elif self.run.exists():
                raise RunError(f"{self.run.path} already holds a run; pass --resume to continue it or pick a new --run-dir")
            else:
                self.state = RunState()
        except BaseException:
            self.close()
            raise
        self.config = config
        self.resume = resume
        self.pending: dict[Any, tuple[str, int]] = {}  # refs the main loop waits for -> (kind, index)
        self.pool = SelfPlayPool(config, self.submit, self.run.log_event, self.progress.message, selfplay_class)
        # Ray actor handles and object refs (their methods are called through .remote, which Ray's stubs do not type).
        self.learner: Any = None
        self.train_ref: Any = None  # the learner call in flight ...
        self.train_learner: Any = None  # ... and the learner it went to
        self.shard_learners: dict[Any, Any] = {}  # add_shards calls in flight -> the learner each went to
        self.arena_worker: Any = None  # the actor that plays the arenas (None until the first, or after a death)
        self.arena_failures = 0  # deaths of the pending arena's workers in a row
        self.last_losses: dict[str, float] = {}
        self.rates = Rates()
        self.game_stats = GameStats()  # since the last arena
        self.curves = Curves(self.run.tensorboard_dir)
        self.next_shard: Path | None = None  # the next shard's path, once this driver has written one

    def close(self) -> None:
        """Release the run directory (also done by the kernel if the process dies)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def submit(self, ref: Any, kind: str, index: int) -> None:
        """Wait for ``ref`` in the main loop; its result goes to the handler of ``kind``."""
        self.pending[ref] = (kind, index)

    # -- learner ----------------------------------------------------------------------------------

    def _here(self) -> NodeAffinitySchedulingStrategy:
        return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)

    def _new_learner(self) -> Any:
        """A learner actor, created (it loads ``learner.pt`` and the newest shards); ``_make_learner`` waits for it."""
        workers = self.config.workers
        cls = ray.remote(num_cpus=workers.learner_cpus, num_gpus=workers.learner_gpus, max_restarts=0)(LearnerWorker)
        threads = max(1, int(workers.learner_cpus) or 1)
        return cls.options(scheduling_strategy=self._here()).remote(str(self.run.path), self.config, threads)

    def _make_learner(self, first: Any = None) -> tuple[Any, dict]:
        """A started learner and its ``info()``: ``first`` (already created) or a new one, retried if it dies
        starting (``start_actor``)."""
        learner, info = start_actor("learner", self._new_learner, timeout=600, log_event=self.run.log_event, first=first)
        self.run.log_event("learner_started", **info)
        if info.get("warning"):
            self.progress.message(f"warning: {info['warning']}")
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
        """Snapshot the learner as the next candidate and start its arena (with ``arena.games`` 0, promote it
        at once); False if the learner died."""
        state, run = self.state, self.run
        generation = state.generation + 1
        path = run.network_path(generation)
        if self._learner_call("save_network", str(path), {"generation": generation, "learner_step": state.learner_step}) is None:
            return False  # the learner was restarted from its last save; try again next round
        state.candidate_step = state.learner_step
        if self.config.arena.games == 0:
            self._promote_ungated(generation)
            return True
        # Games of an earlier, abandoned arena of this generation number belong to another candidate.
        run.arena_games_path(generation).unlink(missing_ok=True)
        run.arena_inflight_path(generation).unlink(missing_ok=True)
        pending = state.pending_arena = pending_arena(run, state, self.config)
        run.write_state(state)
        run.log_event("arena_started", generation=generation, learner_step=state.learner_step, games=pending.num_games)
        self.progress.message(f"[gen {generation}] arena: candidate at step {state.learner_step} vs "
                              f"gen-{state.best_generation:04d} ({pending.num_games} games)")
        self._play_arena()
        return True

    def _log_selfplay_stats(self, generation: int, learner_step: int) -> None:
        """How the self-play games since the last generation ended (events and curves), then count afresh."""
        summary = self.game_stats.summary()
        self.run.log_event("selfplay_stats", generation=generation, **summary)
        self.curves.add("value_targets", learner_step,
                        {k: v for k, v in summary.items() if k not in ("games", "resign_playouts")})
        self.game_stats = GameStats()

    def _promote_ungated(self, generation: int) -> None:
        """``arena.games`` 0: the candidate just saved is the next generation and the best, with no games."""
        state, run = self.state, self.run
        state.generation = generation
        promote(state, generation)
        run.write_state(state)
        run.log_event("promoted", generation=generation, learner_step=state.learner_step, gated=False)
        self._log_selfplay_stats(generation, state.learner_step)
        self.progress.message(f"[gen {generation}] candidate at step {state.learner_step} promoted (arena.games 0: "
                              "no gating)")
        self.pool.set_weights(state.network_version, ray.put(safe_torch_load(run.network_path(generation))))

    def _pending_arena(self) -> PendingArena:
        """The arena in progress (the arena handlers run only while there is one)."""
        pending = self.state.pending_arena
        assert pending is not None
        return pending

    def _play_arena(self) -> None:
        """The pending arena's missing games (all of them, or what a stop or a death left) to the arena worker,
        started first if there is none."""
        pending, run = self._pending_arena(), self.run
        done = run.read_arena_games(pending.generation)
        schedule = missing_games(pending, done)
        if not schedule:
            self._decide_arena()
            return
        if done or run.arena_inflight_path(pending.generation).exists():
            self.progress.message(f"[gen {pending.generation}] arena: continuing, {len(done)} of "
                                  f"{pending.num_games} games finished, the others from where they were")
        arena = ArenaGames(safe_torch_load(run.networks_dir / pending.candidate),
                           safe_torch_load(run.networks_dir / pending.best), pending.generation, schedule,
                           run.read_arena_inflight(pending.generation))
        self.submit(self._arena_actor().play.remote(PLAY_CALL_SECONDS, arena), "arena", pending.generation)

    def _arena_actor(self) -> Any:
        """The arena worker, started if there is none: one plays arena after arena, until it dies or fails."""
        if self.arena_worker is None:
            workers = self.config.workers
            cls = ray.remote(num_cpus=workers.arena_cpus, num_gpus=workers.arena_gpus, max_restarts=0)(ArenaWorker)
            self.arena_worker = cls.remote(self.config, workers.torch_threads_per_worker)
        return self.arena_worker

    def _on_arena(self, ref: Any) -> None:
        pending, run = self._pending_arena(), self.run
        try:
            games, finished, in_flight = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            self.arena_failures += 1
            self.arena_worker = None
            run.log_event("arena_worker_died", generation=pending.generation, error=str(error)[:500])
            if self.arena_failures < ACTOR_START_ATTEMPTS:
                self.progress.message(f"[gen {pending.generation}] arena worker died; continuing with a new one")
                self._play_arena()
                return
            self._abandon_arena(error)
            return
        except ray.exceptions.RayTaskError as error:  # a bug or bad input, not a lost process: retrying won't help
            self._abandon_arena(error)
            return
        self.arena_failures = 0
        for game in games:
            run.append_arena_game(pending.generation, arena_game_line(game, pid=os.getpid(), time=time.time()))
        # After the finished games: a game in both files counts as finished (its index is done).
        run.write_arena_inflight(pending.generation, in_flight)
        if finished:
            self._decide_arena()
        else:
            self.submit(self.arena_worker.play.remote(PLAY_CALL_SECONDS), "arena", pending.generation)

    def _abandon_arena(self, error: BaseException) -> None:
        generation = self._pending_arena().generation
        ray.kill(self.arena_worker)  # one that failed in its code may be in any state: the next arena gets a new one
        self.arena_worker = None
        self.run.log_event("arena_failed", generation=generation, error=str(error)[:2000])
        self.progress.message(f"[gen {generation}] arena failed ({type(error).__name__}); the next candidate gets a new one")
        self.state.pending_arena = None
        self.run.write_state(self.state)

    def _decide_arena(self) -> None:
        """Score the pending arena from its saved games (those of every process that played it)."""
        state, run = self.state, self.run
        pending = self._pending_arena()
        games = [game for _, game in sorted(run.read_arena_games(pending.generation).items())]
        decision = decide_arena(pending, games, self.config.arena.threshold)
        record, promoted = decision.record, decision.promoted
        atomic_write_text(run.arena_pgn_path(pending.generation), decision.pgn)
        record_arena(state, record)
        weights_ref = ray.put(safe_torch_load(run.networks_dir / pending.candidate)) if promoted else None
        run.write_state(state)
        run.arena_inflight_path(pending.generation).unlink(missing_ok=True)
        plot_arena_history(state, run.path / "arena.png")
        run.log_event("arena", **asdict(record), terminations=decision.terminations, processes=decision.processes)
        self._log_selfplay_stats(record.generation, record.learner_step)
        best_elo = sum(a.elo for a in state.arenas if a.promoted)
        self.curves.add("arena", record.learner_step, {"elo": record.elo, "elo_low": record.elo_low,
                                                       "elo_high": record.elo_high, "score": record.score,
                                                       "promoted": int(promoted), "best_elo_chained": best_elo})
        self.progress.message(
            f"[gen {record.generation}] arena {record.wins}-{record.draws}-{record.losses} score {record.score:.3f} "
            f"{elo_text(record.elo, record.elo_low, record.elo_high, digits=0)} -> "
            f"{'PROMOTED' if promoted else 'kept best'} gen-{state.best_generation:04d}")
        if promoted:
            self.pool.set_weights(state.network_version, weights_ref)

    # -- main loop --------------------------------------------------------------------------------

    def _on_plays(self, calls: list[tuple[int, Any]]) -> None:
        """Finished play calls (slot index, ref), handled together: one in-flight write, one shard, one
        state write and one learner call for all of them, so the driver's cost per position falls as the
        results it finds waiting grow (measured: docs/RESULTS.md, "Scale simulated on one machine")."""
        state, run = self.state, self.run
        games: list = []
        handled = []
        for index, ref in calls:
            result = self.pool.on_play(index, ref, state.games)
            if result is None:  # the actor died; its replacement is on its way
                continue
            handled.append(index)
            games += result[0]
            self.rates.add(len(result[0]), result[1]["positions"])
            # Its next call now, so the actor plays while this pass writes (the writes cost the driver
            # more the more actors there are; an actor waiting for them would idle).
            self.pool.play(index)
        if not handled:
            return
        # Games in flight first, finished games second: a kill in between loses these calls' finished
        # games, but no game can ever be both finished on disk and continued again.
        write_inflight(run.inflight_path, self.pool.inflight)
        self.game_stats.add(games)
        self.curves.add("selfplay", state.learner_step, {"games_per_s": self.rates.games_per_s(),
                                                         "positions_per_s": self.rates.positions_per_s(),
                                                         "actors_running": self.pool.num_running})
        if games:
            # Listed once per driver, then counted: this driver is the only writer (the run's lock), and a
            # listing per shard grows with the run (thousands of shards an hour at 20,000 positions/s).
            path = self.next_shard or next_shard_path(run.replay_dir)
            write_shard(path, games)
            self.next_shard = following_shard_path(path)
            state.games += len(games)
            state.positions += sum(g.num_positions for g in games)
            run.write_state(state)
            # Not waited for: the call queues behind the learner's call in flight (an actor runs its calls in
            # order, so the learner still sees every shard before its next training call), and the driver goes
            # on taking results meanwhile. Waiting here held the driver for the rest of each training call and
            # left the learner idle for each pass's writes (on one GPU it trained 10 steps/s of its 74).
            # A restarted learner reads the newest shards from disk.
            ref = self.learner.add_shards.remote([str(path)])
            self.shard_learners[ref] = self.learner
            self.submit(ref, "shards", 0)

    def _on_shards(self, ref: Any) -> None:
        learner = self.shard_learners.pop(ref)
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError as error:
            if learner is self.learner:  # not already replaced after another call
                self._restart_learner(error)

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
                      if arena else "none (no gating)" if config.arena.games == 0 else "none yet")
        if state.pending_arena is not None:
            played = len(self.run.read_arena_games(state.pending_arena.generation))
            arena_text += f"; gen {state.pending_arena.generation} playing {played}/{state.pending_arena.num_games}"
        loss_text = (f"loss {losses['loss']:.3f} (v {losses['value_loss']:.3f} p {losses['policy_loss']:.3f}"
                     + (f" m {losses['material_loss']:.3f}" if losses.get("material_loss") else "")
                     + (f" left {losses['moves_left_loss']:.3f}" if losses.get("moves_left_loss") else "") + ")"
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

    def _start(self) -> None:
        """For a new run, generation 0, the learner's first save and the first state.json; then the learner, the
        self-play actors and the arena worker, started side by side (each loads torch and more: seconds)."""
        config, state, run = self.config, self.state, self.run
        _check_learner_fits(config)
        check_cluster_gpus(config)
        if not self.resume:
            run.write_config(config)
            run.log_event("run_started", config=str(run.config_path), init=None if self.init is None else str(self.init))
            first = first_learner(config, self.init_payload)
            save_network(first.candidate_network(), run.network_path(0), {"generation": 0})
            atomic_torch_save(first.state_dict(), run.learner_path)
            # state.json is written last: until it exists the directory holds no run (a new run may reuse it).
            run.write_state(state)
        else:
            changes = config_changes(run.read_config(), config)
            run.log_event("run_resumed", generation=state.generation, games=state.games, positions=state.positions,
                          pending_arena=state.pending_arena.generation if state.pending_arena else None,
                          config_changes=changes)
            if changes:
                self.progress.message(f"resuming with {len(changes)} setting(s) other than {run.config_path}'s "
                                      "(the config given, not the run's own, is what runs): " + "; ".join(changes))
        learner = self._new_learner()  # asked for first: on a node the actors share, it is placed first
        self.pool.set_weights(state.network_version, ray.put(safe_torch_load(run.network_path(state.best_generation))))
        inflight = deal_inflight(read_inflight(run.inflight_path), config.workers.num_selfplay_workers)
        if any(inflight):
            run.log_event("inflight_restored", games=sum(len(slot) for slot in inflight))
        self.pool.start_all(state.games, inflight)
        if config.arena.games > 0:
            self._arena_actor()  # loaded by the first arena, which then starts at once
        self.learner, info = self._make_learner(learner)
        state.learner_step, state.samples_trained = info["step"], info["samples_trained"]
        self.rates = Rates()

    def _handle_ready(self) -> None:
        """Wait up to a second for a result, then handle it and every other result already in."""
        ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=1.0)
        if ready and len(self.pending) > 1:  # and every other result already in, handled in this pass
            first = set(ready)
            others = [ref for ref in self.pending if ref not in first]
            ready += ray.wait(others, num_returns=len(others), timeout=0)[0]
        plays = []
        for ref in ready:
            kind, index = self.pending.pop(ref)
            if kind == "start":
                self.pool.on_start(index, ref)
            elif kind == "play":
                plays.append((index, ref))
            elif kind == "train":
                self._on_train(ref)
            elif kind == "shards":
                self._on_shards(ref)
            elif kind == "arena":
                self._on_arena(ref)
        if plays:
            self._on_plays(plays)

    def _final_arena(self, last_arena_step: int, elapsed: Callable[[], float]) -> None:
        """``arena.final``, once ``max_minutes`` is up: self-play stops (its games in flight stay in the in-flight
        file, as at any stop), the learner call in flight and the arena in progress end, then the learner's
        weights since the last candidate play one last arena. A stop in between leaves what any stop leaves:
        a resume finishes the pending arena and then plays the last one."""
        config, state = self.config, self.state
        self.pool.kill_all()
        self.pending = {ref: job for ref, job in self.pending.items() if job[0] in ("train", "shards", "arena")}
        self.progress.message("max_minutes reached: self-play stopped; arena.final: the arena in progress ends, then "
                              "the learner's newest weights get a last one")
        while True:
            if self.train_ref is None and final_arena_due(config, state, max(last_arena_step, state.candidate_step)):
                if not self._begin_arena():
                    continue  # the learner died and was restarted from its last save: due again if it is newer
            if not self.pending:
                break
            self._handle_ready()
            state.elapsed_s = elapsed()
            self.progress.update(self._status())

    def _train(self) -> RunState:
        config, state, run = self.config, self.state, self.run
        self._start()
        if state.pending_arena is not None:
            self._play_arena()  # the arena a stop interrupted goes on with its missing games
        last_arena_step = first_arena_step(config, state)
        started = time.monotonic()
        elapsed_before = state.elapsed_s
        reason = stop_reason(config, state)
        try:
            while reason is None:
                # Arena: once the learner is far enough past the last candidate, snapshot it between
                # two learner calls (training pauses only for that save, not for the games).
                due = arena_due(config, state, last_arena_step)
                if due and self.train_ref is None:
                    if self._begin_arena():
                        last_arena_step = state.learner_step
                        due = False
                # Learner: train when there is enough data and the reuse bound allows another call.
                if self.train_ref is None and not due and may_train(config, state):
                    self.train_ref = self.learner.train.remote(config.train.steps_per_call, run_progress(config, state))
                    self.train_learner = self.learner
                    self.submit(self.train_ref, "train", 0)

                self._handle_ready()
                self.pool.tick(state.games)
                state.elapsed_s = elapsed_before + time.monotonic() - started
                reason = stop_reason(config, state)
                self.progress.update(self._status())
            if config.arena.final and time_up(config, state):
                self._final_arena(last_arena_step, lambda: elapsed_before + time.monotonic() - started)
        except KeyboardInterrupt:
            reason = "interrupted"
        finally:
            state.elapsed_s = elapsed_before + time.monotonic() - started
            try:  # after the call it is on (an actor's calls run in order): the steps it has saved
                info = ray.get(self.learner.info.remote(), timeout=600)
                state.learner_step, state.samples_trained = info["step"], info["samples_trained"]
            except Exception:
                pass  # a dead learner: its last save is what a resume reloads
            try:
                run.write_state(state)
            except OSError:
                pass  # the write that failed first is the error the user sees
            self.pool.kill_all()
            ray.kill(self.learner)
            if self.arena_worker is not None:
                ray.kill(self.arena_worker)
            self.curves.close()
        self.progress.message(self._status())
        self.progress.message(f"stopped: {reason}; run directory {run.path}")
        run.log_event("run_stopped", reason=reason, generation=state.generation, games=state.games)
        return state


def run_training(config: RunConfig, run_dir: str | Path, resume: bool = False, address: str | None = None,
                 progress: Progress | None = None, oversubscribe: bool = False, init: str | Path | None = None) -> RunState:
    """``alphazero train``: check the config fits, start or join Ray, run the driver, shut down what we started.

    ``init``: a network file (``alphazero pretrain``) a new run starts from, as generation 0 and as the
    learner's weights, instead of a random network.
    """
    cpus = check_fits(config, oversubscribe) if address is None else 0
    driver = Driver(config, run_dir, resume, progress, init)
    reason = finished(config, driver.state)
    if reason is not None:  # nothing to start Ray and the actors for; nothing is written
        driver.progress.message(f"stopped: {reason}, nothing left to do (raise it with --set to go on); "
                                f"run directory {driver.run.path}")
        driver.close()
        return driver.state
    try:
        started = start_ray(address, cpus, config.workers.object_store_memory_mb,
                            num_gpus=machine_gpus() if address is None else None)
    except BaseException:
        driver.close()
        raise
    try:
        return driver.train()
    finally:
        if started or ray.is_initialized():
            ray.shutdown()
