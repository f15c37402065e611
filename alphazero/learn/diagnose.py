"""Learning-health report of a run (``alphazero diagnose RUN_DIR``): is there anything to learn, and is it learned?

What a run's games say about its value targets (how games end, how many positions carry a real
result, how much of the result material explains) and whether a network trained on them
generalises: a fresh learner trains on the shards of 80% of the games and is scored on the other
20%. A held-out value loss that never goes below the variance of z means the value head memorises
games instead of learning positions. This is slow (a minute or more): it trains a network.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import torch

from alphazero.board import encoding
from alphazero.board.game import MAX_LENGTH
from alphazero.checkpoint import RunDirectory
from alphazero.errors import RunStateError
from alphazero.learn.replay import ReplayWindow, read_shard, shard_paths
from alphazero.learn.train import Learner, compute_loss, draw_targets, value_targets

_DIFF_BYTE = len(encoding.BIT_PLANES) * 8 + encoding.CONSTANT_PLANES.index(15)  # material difference + 128


def data_report(shards: list) -> dict[str, Any]:
    """How games end and how informative their value targets are."""
    terminations: collections.Counter = collections.Counter()
    plies, diffs, z, known, capped_final = [], [], [], [], []
    for shard in shards:
        terminations.update(shard.terminations)
        plies.extend(shard.plies)
        shard_diff = shard.planes[:, _DIFF_BYTE].astype(np.int64) - 128
        diffs.append(shard_diff)
        z.append(shard.z.astype(np.float64))
        known.append(shard.result_known)
        last = np.cumsum(shard.game_positions) - 1  # each game's last stored position
        capped = np.array([t == MAX_LENGTH for t in shard.terminations], dtype=bool) & (shard.game_positions > 0)
        capped_final.append(shard_diff[last[capped]])
    diff, zs, ks = np.concatenate(diffs), np.concatenate(z), np.concatenate(known)
    at_cap = np.abs(np.concatenate(capped_final))
    games = sum(terminations.values())
    report: dict[str, Any] = {
        "games": games,
        "positions": int(len(zs)),
        "mean_plies": round(float(np.mean(plies)), 1),
        "terminations": {k: round(v / games, 3) for k, v in terminations.most_common()},
        "positions_with_result": round(float(ks.mean()), 3),
        "decisive_share_of_those": round(float((zs[ks] != 0).mean()), 3) if ks.any() else 0.0,
        # Games stopped at the length limit with one side 5+ points (a rook) ahead at their last stored
        # position: wins not converted, whose positions teach the value head nothing (resignation ends them).
        "capped_games_5_points_ahead": round(float((at_cap >= 5).mean()), 3) if len(at_cap) else None,
    }
    if ks.sum() > 2 and zs[ks].std() > 0 and diff[ks].std() > 0:
        report["corr_material_z"] = round(float(np.corrcoef(diff[ks], zs[ks])[0, 1]), 3)
        big = ks & (np.abs(diff) >= 6)
        report["mean_z_when_6_points_ahead"] = round(float((zs[big] * np.sign(diff[big])).mean()), 3) if big.any() else None
    return report


def generalisation_report(config, shards: list, steps: int, rounds: int, seed: int = 0) -> list[dict[str, float]]:
    """Train a fresh learner on 80% of the shards, score value and policy loss on the rest each round."""
    rng = np.random.default_rng(seed)
    held_out = set(rng.choice(len(shards), size=max(1, len(shards) // 5), replace=False).tolist())
    learner = Learner(config.network, config.train, seed=seed)
    held = ReplayWindow(10**9, config.train.material_horizon)
    for index, shard in enumerate(shards):
        (held if index in held_out else learner.window).add(shard)
    planes, pi, z, q, known, *_ = held.sample(min(4096, max(256, held.num_positions)), np.random.default_rng(seed + 1))
    draw = torch.from_numpy(draw_targets(z, known, config.train))
    z, weight = value_targets(z, q, known, config.train)
    counted = z[known] if weight is not None else z
    target_variance = float(counted.var()) if counted.size else float("nan")
    rows = []
    for _ in range(rounds):
        stats = learner.train(steps)
        learner.net.eval()
        with torch.no_grad():
            losses = compute_loss(learner.net, torch.from_numpy(planes), torch.from_numpy(pi), torch.from_numpy(z),
                                  weight, draw=draw)
            value_loss, policy_loss = losses.value, losses.policy
        rows.append({"step": stats.step, "train_value_loss": round(stats.value_loss, 4),
                     "held_value_loss": round(value_loss.item(), 4), "held_z_variance": round(target_variance, 4),
                     "train_policy_loss": round(stats.policy_loss, 3), "held_policy_loss": round(policy_loss.item(), 3)})
    return rows


def diagnose(run_dir: str | Path, steps: int = 150, rounds: int = 6, max_shards: int | None = None) -> dict[str, Any]:
    run = RunDirectory(run_dir)
    config = run.read_config()
    paths = shard_paths(run.replay_dir)
    if max_shards:
        paths = paths[-max_shards:]
    if len(paths) < 2:
        raise RunStateError(f"{run.replay_dir}: needs at least two replay shards")
    shards = [read_shard(path) for path in paths]
    return {"data": data_report(shards), "generalisation": generalisation_report(config, shards, steps, rounds)}
