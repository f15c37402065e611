"""Thin Ray wrappers around the core classes: self-play, learner and arena.

Each class here is plain Python around an ``alphazero`` core object; ``workers.driver`` (and
``workers.pool`` for self-play) turns them into actors with ``ray.remote(**options)(Class)``. An actor
keeps no state Ray must restore: a new self-play actor starts from the weights it is given, a new
learner reloads ``learner.pt``, a new arena worker gets the games still missing.

Where each runs its network is ``actor_device``'s decision: CUDA only when the config gave the actor a
GPU share, Ray assigned it a GPU and torch sees CUDA in its process; otherwise the CPU, with a warning
when a GPU was asked for (``info()["warning"]``, which the driver logs and prints). An actor with no GPU
share never touches a GPU it can see (Ray 2.60 leaves ``CUDA_VISIBLE_DEVICES`` alone for actors that ask
for none), so Ray's accounting of GPUs stays true.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Sequence

import torch

from alphazero.checkpoint import RunDirectory, append_jsonl
from alphazero.config import RunConfig
from alphazero.judge.arena import GameResult, Match, ScheduledGame
from alphazero.judge.players import MCTSPlayer
from alphazero.learn.curves import Curves
from alphazero.learn.replay import shard_paths
from alphazero.learn.train import Learner
from alphazero.nets.evaluator import NetworkEvaluator
from alphazero.nets.network import (
    atomic_torch_save,
    net_from_payload,
    safe_torch_load,
    save_network,
)
from alphazero.search.selfplay import SelfPlayer


def _node_info() -> dict[str, Any]:
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # outside Ray
        node = None
    return {"pid": os.getpid(), "node_id": node}


def _gpu_ids() -> list:
    """The GPUs Ray assigned this process (none outside Ray)."""
    try:
        import ray

        return list(ray.get_gpu_ids()) if ray.is_initialized() else []
    except Exception:  # outside a Ray worker
        return []


def actor_device(what: str, wanted_gpus: float, gpu_ids: Sequence, cuda_available: bool) -> tuple[str, str | None]:
    """(``"cuda"`` or ``"cpu"``, a warning or None) for an actor (``what``, e.g. "self-play actor") that asked
    Ray for ``wanted_gpus`` and was given ``gpu_ids``, in a process where torch does (not) see CUDA.

    CUDA only when all three agree (``"cuda"`` is the first device Ray made visible, the one it assigned).
    Asked for a GPU but given none (outside Ray), or given one torch cannot use (a CPU build of torch, a
    logical GPU declared with ``--num-gpus`` on a machine without one): the CPU, and a warning that says
    so, since a run that silently plays on the CPU what was meant for a GPU is many times slower.
    """
    if wanted_gpus <= 0:
        return "cpu", None
    if not gpu_ids:
        return "cpu", f"the {what} asked for {wanted_gpus:g} GPU but Ray gave it none; it runs on the CPU"
    if not cuda_available:
        import torch

        return "cpu", (f"the {what} was given GPU {', '.join(str(i) for i in gpu_ids)} by Ray, but torch "
                       f"{torch.__version__} sees no CUDA device in its process (a CPU build of torch, or a GPU "
                       "declared where there is none); it runs on the CPU")
    return "cuda", None


def _device_info(device: str, warning: str | None) -> dict[str, Any]:
    return {"device": device, "gpu_ids": [str(i) for i in _gpu_ids()], **({"warning": warning} if warning else {})}


class SelfPlayWorker:
    """Plays self-play games with the newest promoted weights it was given."""

    def __init__(self, config: RunConfig, weights: dict[str, Any], version: int, seed: int,
                 inflight: list[dict] | None = None) -> None:
        torch.set_num_threads(config.workers.torch_threads_per_worker)
        self.device, self.warning = actor_device("self-play actor", config.workers.selfplay_gpus, _gpu_ids(),
                                                 torch.cuda.is_available())
        # One network call per search round: every game's leaves at once, however many games that is.
        round_size = config.selfplay.games_per_worker * config.search.leaves_per_game
        self.evaluator = NetworkEvaluator.for_search(net_from_payload(weights), config.search, device=self.device,
                                                     max_batch=max(1024, round_size), selfplay=True)
        self.player = SelfPlayer(self.evaluator, config.search, config.selfplay, seed=seed, network_version=version)
        if inflight:  # games a stopped run or a dead actor left unfinished
            self.player.restore(inflight)
        self.version = version

    def info(self) -> dict[str, Any]:
        return {**_node_info(), **_device_info(self.device, self.warning),
                "precision": self.evaluator.settings.precision, "backend": self.evaluator.backend}

    def set_weights(self, version: int, weights: dict[str, Any]) -> int:
        """Use ``weights`` (network ``version``) from the next move on; games in flight continue with it."""
        if version != self.version:
            self.evaluator.set_network(net_from_payload(weights))
            self.player.set_network_version(version)
            self.version = version
        return version

    def play(self, min_games: int, max_seconds: float | None = None) -> tuple[list, dict[str, Any]]:
        """Play until ``min_games`` games finish or ``max_seconds`` pass.

        Returns the finished ``GameRecord``s and counters, with ``inflight``: the games still being
        played (``SelfPlayer.snapshot``), which the driver saves so a stop loses none of them.
        """
        before = self.player.positions_played
        games = self.player.play(min_games, max_seconds)
        return games, {"positions": self.player.positions_played - before, "version": self.version,
                       "inflight": self.player.snapshot()}


class LearnerWorker:
    """The learner over the run directory: loads ``learner.pt`` if present, saves after every call."""

    def __init__(self, run_dir: str, config: RunConfig, torch_threads: int = 1) -> None:
        torch.set_num_threads(max(1, torch_threads))
        self.run = RunDirectory(run_dir)
        self.config = config
        # train.device auto: CUDA when Ray gave the learner a GPU (workers.learner_gpus), else the CPU.
        self.device, self.warning = actor_device("learner", config.workers.learner_gpus, _gpu_ids(),
                                                 torch.cuda.is_available())
        train = config.train if config.train.device != "auto" else replace(config.train, device=self.device)
        self.learner = Learner(config.network, train, seed=config.seed)
        self.curves = Curves(self.run.tensorboard_dir)
        if self.run.learner_path.exists():
            self.learner.load_state_dict(safe_torch_load(self.run.learner_path), str(self.run.learner_path))
        self._load_recent_shards()

    def info(self) -> dict[str, Any]:
        return {**_node_info(), **_device_info(str(self.learner.device), self.warning), "step": self.learner.step,
                "samples_trained": self.learner.samples_trained, "precision": self.learner.config.precision,
                "channels_last": self.learner.config.channels_last}

    def _load_recent_shards(self) -> None:
        """Fill the window with the newest shards on disk (what a resume needs)."""
        from alphazero.learn.replay import read_shard

        chosen, total = [], 0
        for path in reversed(shard_paths(self.run.replay_dir)):
            shard = read_shard(path)
            chosen.append(shard)
            total += shard.num_positions
            if total >= self.config.train.window_positions:
                break
        for shard in reversed(chosen):
            self.learner.window.add(shard)
            self.learner.shards_loaded.append(shard.path.name)

    def add_shards(self, paths: list[str]) -> int:
        return self.learner.add_shards(paths)

    def window_size(self) -> int:
        return self.learner.window.num_positions

    def save(self) -> None:
        atomic_torch_save(self.learner.state_dict(), self.run.learner_path)

    def train(self, num_steps: int, progress: float | None = None) -> dict[str, Any]:
        stats = self.learner.train(num_steps, progress)
        self.save()
        record = {
            "step": stats.step, "loss": stats.loss, "value_loss": stats.value_loss,
            "policy_loss": stats.policy_loss, "material_loss": stats.material_loss,
            "soft_policy_loss": stats.soft_policy_loss, "moves_left_loss": stats.moves_left_loss,
            "learning_rate": stats.learning_rate,
            "samples_per_s": stats.samples_per_s, "samples_trained": self.learner.samples_trained,
            "window": self.learner.window.num_positions,
        }
        append_jsonl(self.run.metrics_path, record)
        self.curves.add("learner", stats.step, {key: value for key, value in record.items() if key != "step"})
        return record

    def save_network(self, path: str, metadata: dict[str, Any]) -> str:
        save_network(self.learner.candidate_network(), path, metadata)
        return path


@dataclass
class ArenaGames:
    """An arena for ``ArenaWorker.play`` to begin: the candidate's and the best network's payloads, its
    generation, the games still to play (all of them for a new arena, the missing ones for a resumed
    one) and the moves its unfinished games had reached."""

    candidate: dict[str, Any]
    best: dict[str, Any]
    generation: int
    schedule: list[ScheduledGame]
    played: dict[int, list[str]] | None = None


class ArenaWorker:
    """Plays a run's arenas (candidate = A against best = B), a slice of time at a time.

    One worker plays one arena after another: a new process costs seconds (torch, the compiled search)
    and an arena is often shorter. The first ``play`` call of an arena brings it (``ArenaGames``); the
    driver saves every game as it ends and every game in flight after each call, so a stopped arena goes
    on where it was. Holds no state Ray must restore: a new worker gets all of that from the driver.
    """

    def __init__(self, config: RunConfig, torch_threads: int = 1) -> None:
        torch.set_num_threads(max(1, torch_threads))
        self.config = config
        self.search = replace(config.search, num_simulations=config.arena.num_simulations)
        self.device, self.warning = actor_device("arena worker", config.workers.arena_gpus, _gpu_ids(),
                                                 torch.cuda.is_available())
        self.match: Match | None = None

    def info(self) -> dict[str, Any]:
        return {**_node_info(), **_device_info(self.device, self.warning)}

    def _begin(self, arena: ArenaGames) -> Match:
        self.match = None  # the last arena's networks go before the next ones load
        player_a = MCTSPlayer(net_from_payload(arena.candidate), self.search, name=f"gen-{arena.generation:04d}",
                              device=self.device)
        player_b = MCTSPlayer(net_from_payload(arena.best), self.search, name="best", device=self.device)
        return Match(player_a, player_b, arena.schedule, max_plies=self.config.arena.max_plies,
                     concurrency=self.config.arena.concurrency, event=f"arena gen {arena.generation}",
                     played=arena.played)

    def play(self, max_seconds: float,
             arena: ArenaGames | None = None) -> tuple[list[GameResult], bool, dict[int, list[str]]]:
        """Begin ``arena`` if given, then the next games to end (or none, after about ``max_seconds``), whether
        the arena is finished, and the moves of the games still running (which a new worker continues from)."""
        if arena is not None:
            self.match = self._begin(arena)
        if self.match is None:
            raise RuntimeError("ArenaWorker.play: no arena in progress (the first call of an arena brings it)")
        match = self.match
        games = match.advance(max_seconds)
        if match.done:
            self.match = None  # an idle worker holds no networks
        return games, match.done, match.in_flight()
