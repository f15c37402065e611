"""Thin Ray wrappers around the core classes: self-play, learner and arena.

Each class here is plain Python around an ``alphazero`` core object; ``workers.driver`` (and
``workers.pool`` for self-play) turns them into actors with ``ray.remote(**options)(Class)``. An actor
keeps no state Ray must restore: a new self-play actor starts from the weights it is given, a new
learner reloads ``learner.pt``, a new arena worker gets the games still missing.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

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


class SelfPlayWorker:
    """Plays self-play games with the newest promoted weights it was given."""

    def __init__(self, config: RunConfig, weights: dict[str, Any], version: int, seed: int,
                 inflight: list[dict] | None = None) -> None:
        torch.set_num_threads(config.workers.torch_threads_per_worker)
        self.evaluator = NetworkEvaluator(net_from_payload(weights), device="auto", backend=config.search.backend)
        self.player = SelfPlayer(self.evaluator, config.search, config.selfplay, seed=seed, network_version=version)
        if inflight:  # games a stopped run or a dead actor left unfinished
            self.player.restore(inflight)
        self.version = version

    def info(self) -> dict[str, Any]:
        return _node_info()

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
        self.learner = Learner(config.network, config.train, seed=config.seed)
        self.curves = Curves(self.run.tensorboard_dir)
        if self.run.learner_path.exists():
            self.learner.load_state_dict(safe_torch_load(self.run.learner_path), str(self.run.learner_path))
        self._load_recent_shards()

    def info(self) -> dict[str, Any]:
        return {**_node_info(), "step": self.learner.step, "samples_trained": self.learner.samples_trained}

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

    def train(self, num_steps: int) -> dict[str, Any]:
        stats = self.learner.train(num_steps)
        self.save()
        record = {
            "step": stats.step, "loss": stats.loss, "value_loss": stats.value_loss,
            "policy_loss": stats.policy_loss, "material_loss": stats.material_loss, "learning_rate": stats.learning_rate,
            "samples_per_s": stats.samples_per_s, "samples_trained": self.learner.samples_trained,
            "window": self.learner.window.num_positions,
        }
        append_jsonl(self.run.metrics_path, record)
        self.curves.add("learner", stats.step, {key: value for key, value in record.items() if key != "step"})
        return record

    def save_network(self, path: str, metadata: dict[str, Any]) -> str:
        save_network(self.learner.get_network(), path, metadata)
        return path


class ArenaWorker:
    """Plays one arena (candidate = A against best = B) a slice of time at a time.

    ``schedule`` holds the games still to play (all of them for a new arena, the missing ones for a
    resumed arena) and ``played`` the moves its unfinished games had reached, so the driver can save
    every game as it ends and every game in flight after each call, and a stopped arena goes on
    where it was. Holds no state Ray must restore: a new worker gets all of that from the driver.
    """

    def __init__(self, candidate: dict[str, Any], best: dict[str, Any], config: RunConfig, generation: int,
                 schedule: list[ScheduledGame], torch_threads: int = 1,
                 played: dict[int, list[str]] | None = None) -> None:
        torch.set_num_threads(max(1, torch_threads))
        search = replace(config.search, num_simulations=config.arena.num_simulations)
        player_a = MCTSPlayer(net_from_payload(candidate), search, name=f"gen-{generation:04d}", device="auto")
        player_b = MCTSPlayer(net_from_payload(best), search, name="best", device="auto")
        self.match = Match(player_a, player_b, schedule, max_plies=config.arena.max_plies,
                           concurrency=config.arena.concurrency, event=f"arena gen {generation}", played=played)

    def info(self) -> dict[str, Any]:
        return _node_info()

    def play(self, max_seconds: float) -> tuple[list[GameResult], bool, dict[int, list[str]]]:
        """The next games to end (or none, after about ``max_seconds``), whether the arena is finished,
        and the moves of the games still running (which a new worker continues from)."""
        games = self.match.advance(max_seconds)
        return games, self.match.done, self.match.in_flight()
