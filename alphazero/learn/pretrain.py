"""Supervised training of the policy/value network from labelled positions or PGN games, and ``--init``.

Owns the supervised data set (``SupervisedData``), its held-out split and the pretraining loop. The
optimisation step is the self-play learner's own (``alphazero.learn.train.Learner.train`` and
``compute_loss``, same optimizer, same loss), fed by ``EpochSampler`` in place of a replay window.
Knows nothing of engines or Ray.

Targets, both for the side to move in the position:

- **labelled CSV** (``alphazero label``'s columns; any CSV with ``fen``, ``best_uci`` and a score
  column ``score_cp`` or ``cp_stm`` works too): policy one-hot on ``best_uci``; value the engine's
  expected score mapped to [-1, 1]: ``(win - loss) / 1000`` from WDL when the row has it, else +1 /
  -1 for a mate for / against the side to move, else ``2 / (1 + exp(-0.00368208 * cp)) - 1`` =
  ``tanh(0.00184104 * cp)`` (Lichess's win-probability model of centipawns). A row with no score
  trains the policy only.
- **PGN** (``.pgn``): policy one-hot on the move played; value the game's result (1-0, 0-1, 1/2-1/2);
  games with result ``*`` train the policy only.

The held-out split is seeded and by game for PGN (positions of one game are never on both sides), by
row for CSV. A malformed data line raises ``InputError`` naming the file and line: training on a
silently shortened file is worse than stopping.

``load_init_network`` is what ``alphazero train --init NET`` checks: the network must have the config's
shape (``ConfigError`` naming both otherwise). ``first_learner`` is every new run's learner at step 0,
from that network or from the seed.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import chess
import numpy as np
import torch

from alphazero.board import encoding
from alphazero.board.game import RESULT_VALUES
from alphazero.config import NetworkConfig, RunConfig
from alphazero.errors import ConfigError, InputError
from alphazero.fileio import input_file, output_file, text_lines
from alphazero.learn.positions import position_and_move, raise_bad, read_pgn_games, split_held_out
from alphazero.learn.replay import Batch, material_targets
from alphazero.learn.train import Learner
from alphazero.nets.network import PolicyValueNet, load_network, net_to_payload, save_network

CP_SCALE = 0.00184104  # tanh(CP_SCALE * cp) = 2 / (1 + exp(-0.00368208 cp)) - 1 (Lichess win probability)
VALUE_SOURCES = ("wdl", "cp")  # a label row's value: its WDL when present, or its centipawns only


@dataclass
class SupervisedData:
    """Positions with one target move and a value, all for the side to move."""

    planes: np.ndarray  # uint8 [P, 122], packed (alphazero.board.encoding)
    actions: np.ndarray  # int64 [P]: the target move's action
    values: np.ndarray  # float32 [P] in [-1, 1]
    known: np.ndarray  # bool [P]: False where there is no value target
    groups: np.ndarray  # int64 [P]: the unit of the held-out split (game for PGN, row for CSV)
    kind: str = "csv"

    @property
    def num_positions(self) -> int:
        return int(self.actions.shape[0])

    def subset(self, index: np.ndarray) -> "SupervisedData":
        return SupervisedData(self.planes[index], self.actions[index], self.values[index], self.known[index],
                              self.groups[index], self.kind)


class _Builder:
    """Collects positions, packing the encoder's feature rows a chunk at a time (bounded memory)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.rows: list[list[int]] = []
        self.packed: list[np.ndarray] = []
        self.actions: list[int] = []
        self.values: list[float] = []
        self.known: list[bool] = []
        self.groups: list[int] = []

    def add(self, board: chess.Board, move: chess.Move, value: float | None, group: int) -> None:
        self.rows.append(encoding.board_features(board))
        self.actions.append(encoding.move_to_action(board, move))
        self.values.append(0.0 if value is None else value)
        self.known.append(value is not None)
        self.groups.append(group)
        if len(self.rows) >= 4096:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.packed.append(encoding.packed_from_features(self.rows))
            self.rows = []

    def build(self, path: Path) -> SupervisedData:
        self._flush()
        if not self.actions:
            raise InputError(f"{path}: no positions to train on")
        return SupervisedData(np.concatenate(self.packed), np.array(self.actions, dtype=np.int64),
                              np.array(self.values, dtype=np.float32), np.array(self.known, dtype=bool),
                              np.array(self.groups, dtype=np.int64), self.kind)


def _row_value(row: list[str], column: dict[str, int], where: str, value_from: str = "wdl") -> float | None:
    """The value target of one CSV row (module docstring), or None when it has no score."""

    def field(name: str) -> str:
        return row[column[name]].strip() if name in column else ""

    try:
        wdl = [field(name) for name in ("wdl_win", "wdl_draw", "wdl_loss")]
        if value_from == "wdl" and all(wdl):
            win, draw, loss = (int(text) for text in wdl)
            if min(win, draw, loss) < 0 or win + draw + loss <= 0:
                raise ValueError(f"WDL {win}/{draw}/{loss} is not a distribution")
            return (win - loss) / (win + draw + loss)
        if field("mate"):
            return 1.0 if int(field("mate")) > 0 else -1.0
        cp = field("score_cp") or field("cp_stm")
        if cp:
            return math.tanh(CP_SCALE * float(cp))
    except ValueError as error:
        raise InputError(f"{where}: bad score ({error})") from None
    return None


def read_labelled_csv(path: str | os.PathLike, value_from: str = "wdl") -> SupervisedData:
    """A CSV of ``fen,best_uci`` and scores (module docstring) -> data; a bad line raises ``InputError``."""
    if value_from not in VALUE_SOURCES:
        raise InputError(f"the value target comes from one of {', '.join(VALUE_SOURCES)}, not {value_from!r}")
    path = Path(path)
    builder = _Builder("csv")
    with contextlib.closing(text_lines(path, "training CSV")) as lines:
        reader = csv.reader(lines)
        header = next(reader, None)
        if header is None or "fen" not in header or "best_uci" not in header:
            raise InputError(f"{path}:1: a training CSV needs a header with 'fen' and 'best_uci' columns, got {header!r}")
        column = {name: index for index, name in enumerate(header)}
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if not row:
                continue
            if len(row) != len(header):
                raise InputError(f"{where}: {len(row)} fields, expected {len(header)} ({','.join(header)})")
            board, move = position_and_move(row[column["fen"]], row[column["best_uci"]], where)
            builder.add(board, move, _row_value(row, column, where, value_from), reader.line_num)
    return builder.build(path)


def read_pgn_data(path: str | os.PathLike) -> SupervisedData:
    """Every move of every game in a PGN file -> data (policy: the move played, value: the result)."""
    path = Path(path)
    builder = _Builder("pgn")
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, (_, game) in enumerate(read_pgn_games(handle, str(path), raise_bad)):
            white_value = RESULT_VALUES.get(game.headers.get("Result", "*"))
            board = game.board()
            for move in game.mainline_moves():
                value = None if white_value is None else (white_value if board.turn == chess.WHITE else -white_value)
                builder.add(board, move, value, number)
                board.push(move)
    return builder.build(path)


def read_data(path: str | os.PathLike, value_from: str = "wdl") -> SupervisedData:
    """A ``.pgn`` file as games, anything else as a labelled CSV (values per ``value_from``)."""
    path = input_file(path, "training data")
    return read_pgn_data(path) if path.suffix.lower() == ".pgn" else read_labelled_csv(path, value_from)


class EpochSampler:
    """The data as ``Learner.train`` samples a replay window, but in passes: batches walk a permutation
    reshuffled with the learner's generator each pass, so ``ceil(P / B)`` steps see every position once."""

    def __init__(self, data: SupervisedData) -> None:
        self.data = data
        self.order = np.zeros(0, dtype=np.int64)
        self.cursor = 0

    @property
    def num_positions(self) -> int:
        return self.data.num_positions

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """What ``ReplayWindow.sample`` returns: pi one-hot on the labelled move, z and q both the value
        target, the material target the position's own balance (a labelled position has no future)."""
        parts = []
        needed = batch_size
        while needed > 0:
            if self.cursor >= len(self.order):
                self.order, self.cursor = rng.permutation(self.data.num_positions), 0
            take = self.order[self.cursor:self.cursor + needed]
            self.cursor += len(take)
            needed -= len(take)
            parts.append(take)
        index = np.concatenate(parts)
        data = self.data
        pi = np.zeros((batch_size, encoding.NUM_ACTIONS), dtype=np.float32)
        pi[np.arange(batch_size), data.actions[index]] = 1.0
        z = data.values[index]
        packed = data.planes[index]
        material = material_targets(packed, np.ones(batch_size, dtype=np.int64), horizon=0)
        unknown_plies = np.full(batch_size, -1.0, dtype=np.float32)  # labelled positions: no game to count to
        return Batch(encoding.unpack_planes(packed), pi, z, z.copy(), data.known[index], material, unknown_plies)


def evaluate(net: PolicyValueNet, data: SupervisedData, device: torch.device | str = "cpu",
             batch_size: int = 512) -> dict[str, float]:
    """Mean policy loss (cross-entropy with the one-hot target, as ``compute_loss``), value loss (squared
    error over positions with a value) and top-1 policy agreement on ``data``, in eval mode."""
    net.eval()
    policy_sum = value_sum = agree = 0.0
    value_count = 0
    with torch.no_grad():
        for start in range(0, data.num_positions, batch_size):
            part = slice(start, start + batch_size)
            planes = torch.from_numpy(encoding.unpack_planes(data.planes[part])).to(device)
            actions = torch.from_numpy(data.actions[part]).to(device)
            logits, value = net(planes)
            log_probs = torch.log_softmax(logits, dim=1)
            policy_sum += -log_probs.gather(1, actions[:, None]).sum().item()
            agree += (logits.argmax(dim=1) == actions).sum().item()
            known = torch.from_numpy(data.known[part]).to(device)
            z = torch.from_numpy(data.values[part]).to(device)
            value_sum += (((value - z) ** 2) * known).sum().item()
            value_count += int(known.sum().item())
    count = max(data.num_positions, 1)
    return {"policy_loss": policy_sum / count, "value_loss": value_sum / value_count if value_count else float("nan"),
            "policy_accuracy": agree / count}


def _rounded(metrics: dict[str, float] | None) -> dict[str, float | None] | None:
    if metrics is None:
        return None
    return {key: (round(value, 4) if math.isfinite(value) else None) for key, value in metrics.items()}


def pretrain(data_path: str | os.PathLike, config: RunConfig, out: str | os.PathLike, epochs: int = 1,
             held_out: float = 0.1, seed: int | None = None, log: Callable[[str], None] | None = None,
             value_from: str = "wdl") -> dict[str, Any]:
    """``alphazero pretrain``: train ``config.network`` on ``data_path`` for ``epochs`` passes, save it to ``out``.

    Uses ``config.train`` (optimizer, learning rate, weight decay, batch size, device) as the
    self-play learner does. Logs one line per epoch (and one before training); returns the summary.
    """
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    if epochs < 1:
        raise InputError(f"--epochs must be at least 1, got {epochs}")
    output_file(out, "--out")
    seed = config.seed if seed is None else seed
    started = time.perf_counter()
    data = read_data(data_path, value_from)
    train_data, held_data = split_held_out(data, held_out, seed)
    batch_size = min(config.train.batch_size, train_data.num_positions)
    # Positions without a value target train the policy only (the learner's value weights).
    train_config = replace(config.train, batch_size=batch_size, value_from_unfinished=False, q_weight=0.0)
    learner = Learner(config.network, train_config, seed=seed)
    # Learner.train reads only num_positions and sample(): the epoch sampler stands in for the window.
    learner.window = EpochSampler(train_data)  # type: ignore[assignment]
    steps = math.ceil(train_data.num_positions / batch_size)
    log(f"pretrain: {data.num_positions} positions from {data_path} ({data.kind}), {train_data.num_positions} train, "
        f"{held_data.num_positions if held_data else 0} held out; {steps} steps of {batch_size} per epoch")
    check = held_data or train_data
    initial = evaluate(learner.net, check, learner.device)
    log(f"epoch 0/{epochs}  {'held-out' if held_data else 'train'} p {initial['policy_loss']:.3f} "
        f"v {initial['value_loss']:.4f} acc {initial['policy_accuracy']:.3f}")
    history = []
    final_held: dict[str, float | None] | None = None
    for epoch in range(1, epochs + 1):
        epoch_start = time.perf_counter()
        stats = learner.train(steps)
        held = evaluate(learner.net, held_data, learner.device) if held_data else None
        seconds = time.perf_counter() - epoch_start
        record = {"epoch": epoch, "step": stats.step, "train_policy_loss": round(stats.policy_loss, 4),
                  "train_value_loss": round(stats.value_loss, 4), "held_out": _rounded(held),
                  "seconds": round(seconds, 2)}
        history.append(record)
        final_held = _rounded(held)
        held_text = (f" | held-out p {held['policy_loss']:.3f} v {held['value_loss']:.4f} acc {held['policy_accuracy']:.3f}"
                     if held else "")
        log(f"epoch {epoch}/{epochs}  train p {stats.policy_loss:.3f} v {stats.value_loss:.4f}{held_text} | "
            f"{steps * batch_size / seconds:.0f} pos/s {seconds:.1f} s")
    metadata = {"pretrained_from": str(data_path), "data_kind": data.kind, "positions": data.num_positions,
                "epochs": epochs, "learner_step": learner.step,
                "held_out_policy_loss": final_held["policy_loss"] if final_held else None,
                "held_out_value_loss": final_held["value_loss"] if final_held else None}
    save_network(learner.candidate_network(), out, metadata)
    return {"out": str(out), "data": str(data_path), "kind": data.kind, "positions": data.num_positions,
            "train_positions": train_data.num_positions, "held_out_positions": held_data.num_positions if held_data else 0,
            "network": f"{config.network.blocks}x{config.network.channels}", "epochs": epochs, "steps": learner.step,
            "batch_size": batch_size, "initial": _rounded(initial), "final": history[-1],
            "seconds": round(time.perf_counter() - started, 2)}


# ---- train --init -----------------------------------------------------------------------------


def describe_shape(network: NetworkConfig) -> str:
    return (f"{network.blocks}x{network.channels} (blocks={network.blocks}, channels={network.channels}, "
            f"policy_channels={network.policy_channels}, value_channels={network.value_channels}, "
            f"value_hidden={network.value_hidden})")


def load_init_network(path: str | os.PathLike, network: NetworkConfig) -> dict[str, Any]:
    """The network file ``path`` as a payload, checked to have the shape ``network`` (the run's config)."""
    try:
        net = load_network(path)
    except ValueError as error:
        raise InputError(f"--init: {error}") from None
    if net.config != network:
        raise ConfigError(f"--init {path}: the network is {describe_shape(net.config)} but the config's network is "
                          f"{describe_shape(network)}; use a config with the network's shape (--set network.KEY=VALUE) "
                          "or pretrain one with this config")
    return net_to_payload(net, {"init": str(path)})


def first_learner(config: RunConfig, payload: dict[str, Any] | None = None) -> Learner:
    """A new run's learner at step 0, on the CPU, with a new optimizer: the network ``config.seed`` makes, or
    the weights of ``payload`` (``--init``). Its state is the run's first ``learner.pt``, its candidate
    network generation 0."""
    learner = Learner(config.network, replace(config.train, device="cpu"), seed=config.seed)
    if payload is not None:
        learner.set_weights(payload)
    return learner
