"""Evaluators: the seam between search and network (see ``alphazero.search.mcts.Evaluator``).

``NetworkEvaluator`` runs a ``PolicyValueNet`` on a batch of leaves: one numpy pass to build the
planes, one forward call (through an inference backend, ``alphazero.nets.inference``: torch eager or
ONNX Runtime), and a softmax over each leaf's legal moves only. ``UniformEvaluator``
(equal priors, value 0) is the oracle-free evaluator the search tests use.
"""

from __future__ import annotations

from typing import Sequence

import chess
import numpy as np
import torch

from alphazero.board import encoding
from alphazero.config import SearchConfig
from alphazero.nets.inference import make_backend, resolve_inference
from alphazero.nets.network import PolicyValueNet


class UniformEvaluator:
    """Equal priors over the legal moves and value 0 for every position."""

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> int:
        return len(moves)

    def evaluate(self, requests: list[int]) -> tuple[list[np.ndarray], np.ndarray]:
        priors = [np.full(count, 1.0 / count, dtype=np.float32) for count in requests]
        return priors, np.zeros(len(requests), dtype=np.float32)


def masked_softmax(logits: np.ndarray, actions: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Row ``i`` of ``logits`` ``[B, 4672]`` restricted to ``actions[i]`` and softmaxed -> ``float32 [K_i]`` each."""
    lengths = np.fromiter((len(a) for a in actions), dtype=np.int64, count=len(actions))
    if lengths.sum() == 0:
        return [np.zeros(0, dtype=np.float32) for _ in actions]
    rows = np.repeat(np.arange(len(actions)), lengths)
    flat = logits[rows, np.concatenate(actions)].astype(np.float64)  # [sum K]
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    nonempty = lengths > 0
    maxima = np.zeros(len(actions))
    maxima[nonempty] = np.maximum.reduceat(flat, starts[nonempty])
    exp = np.exp(flat - np.repeat(maxima, lengths))
    sums = np.zeros(len(actions))
    sums[nonempty] = np.add.reduceat(exp, starts[nonempty])
    probs = (exp / np.repeat(np.where(sums > 0, sums, 1.0), lengths)).astype(np.float32)
    return np.split(probs, np.cumsum(lengths)[:-1])


class NetworkEvaluator:
    """A ``PolicyValueNet`` behind the search seam; batches every request of a round into one call.

    The network is copied with its BatchNorms folded (inference only). ``max_batch`` splits very
    large rounds so memory stays bounded; ``device`` is ``"cpu"``, ``"cuda"`` or ``"auto"``;
    ``backend`` is ``"torch"``, ``"onnx"`` or ``"openvino"`` (both cpu only) or ``"auto"`` (on the cpu openvino
    where the CPU computes bf16 natively, onnx elsewhere, torch for settings only torch runs: ``resolve_backend``);
    ``self.backend`` is the one chosen.
    ``precision``, ``channels_last`` and ``pin_memory`` are ``search``'s keys of the same names
    (``alphazero.nets.inference.resolve_settings``; ``self.settings`` holds them resolved); ``auto_int8``: the
    ``auto`` precision may be int8 where the CPU has VNNI (self-play's evaluators: ``resolve_inference``).
    ``policy_temperature`` T divides every logit ``forward`` returns (so both searches' priors are
    ``softmax(logits / T)`` over the legal moves; ``search.policy_temperature``).
    ``forward``'s logits are valid until its next call (the torch backend may reuse its buffers).
    """

    def __init__(self, net: PolicyValueNet, device: str = "cpu", max_batch: int = 1024, backend: str = "auto",
                 precision: str = "auto", channels_last: bool | str = "auto", pin_memory: bool | str = "auto",
                 policy_temperature: float = 1.0, auto_int8: bool = False) -> None:
        if not policy_temperature > 0:
            raise ValueError(f"policy_temperature must be > 0, got {policy_temperature!r}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.backend, self.settings = resolve_inference(self.device, backend, precision, channels_last, pin_memory,
                                                          auto_int8)
        self.max_batch = max_batch
        self.policy_temperature = float(policy_temperature)
        self.num_positions = 0
        self.num_calls = 0
        self._run = make_backend(self.backend, net, self.device, self.settings)

    @classmethod
    def for_search(cls, net: PolicyValueNet, search: SearchConfig, device: str = "cpu",
                   max_batch: int = 1024, selfplay: bool = False) -> NetworkEvaluator:
        """The evaluator ``search``'s keys ask for (backend, precision, channels_last, pin_memory,
        policy_temperature) on ``device``; ``selfplay``: for self-play, where ``auto`` precision may be int8."""
        return cls(net, device=device, max_batch=max_batch, backend=search.backend, precision=search.precision,
                   channels_last=search.channels_last, pin_memory=search.pin_memory,
                   policy_temperature=search.policy_temperature, auto_int8=selfplay)

    def set_network(self, net: PolicyValueNet) -> None:
        """Swap in new weights (a new version) for the next call (the onnx backend exports them again; in int8
        it calibrates them on the positions the previous weights were last asked about)."""
        recent = getattr(self._run, "recent_planes", None)
        self._run = make_backend(self.backend, net, self.device, self.settings,
                                 calibration=recent() if recent is not None else None)

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> tuple[list[int], np.ndarray]:
        return encoding.board_features(board), encoding.moves_to_actions(board, moves)

    def evaluate(self, requests: list[tuple[list[int], np.ndarray]]) -> tuple[list[np.ndarray], np.ndarray]:
        if not requests:
            return [], np.zeros(0, dtype=np.float32)
        priors: list[np.ndarray] = []
        values: list[np.ndarray] = []
        for start in range(0, len(requests), self.max_batch):
            chunk = requests[start : start + self.max_batch]
            planes = encoding.planes_from_features([features for features, _ in chunk])
            logits, value = self.forward(planes)  # logits valid until the next forward: used at once
            priors.extend(masked_softmax(logits, [actions for _, actions in chunk]))
            values.append(value)
        return priors, np.concatenate(values)

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """planes ``uint8 [B, 24, 8, 8]`` -> (logits ``float32 [B, 4672]``, values ``float32 [B]``)."""
        self.num_calls += 1
        self.num_positions += len(planes)
        logits, values = self._run(planes)
        if self.policy_temperature != 1.0:
            logits = logits / np.float32(self.policy_temperature)
        return logits, values

    def policy(self, boards: Sequence[chess.Board]) -> list[tuple[list[chess.Move], np.ndarray, float]]:
        """Raw network policy (no search) for each board: (legal moves, priors ``[K]``, value)."""
        requests, move_lists = [], []
        for board in boards:
            moves = list(board.legal_moves)
            move_lists.append(moves)
            requests.append(self.prepare(board, moves))
        priors, values = self.evaluate(requests)
        return [(moves, p, float(v)) for moves, p, v in zip(move_lists, priors, values)]
