"""The learner: loss, optimizer step, and the state a resume needs.

loss = (z - v)^2 + cross_entropy(pi, p) + L2 (with ``network.wdl_head``, the value term is the cross-entropy
of the win/draw/loss logits with the same target as a distribution: ``wdl_target``), with L2 applied as SGD weight decay
(``weight_decay * theta`` added to each gradient, i.e. ``weight_decay / 2 * |theta|^2`` in the loss;
with ``train.optimizer = adamw`` the decay is decoupled from the gradient, as AdamW defines it).
With ``train.q_weight = w > 0`` the value target is ``(1 - w) * z + w * q``, q being the root search
value stored with each position, so games drawn by the length limit still teach the value head what
the search saw. Games stopped at ``selfplay.max_plies`` have no result (a length limit is not a
draw): with ``train.value_from_unfinished = false`` their positions train the policy only; with
``true`` their value target is the root search value q alone, the best estimate of a result that was
never played out (counting them as draws buries the few decisive games of early self-play under zeros).
A network with ``material_head`` adds ``material_weight * (m - material)^2``, material being the
balance ``material_horizon`` plies later in the game (``alphazero.learn.replay.material_targets``),
known for every game, finished or not. A network with ``moves_left_head`` adds lc0's moves-left loss,
``moves_left_weight * Huber(plies_left / MOVES_LEFT_SCALE, head output; delta 10 plies)`` over the positions
of finished games (``moves_left_loss``).

With ``train.precision = bf16`` the forward pass runs under ``torch.autocast`` to bfloat16 while the
weights, their gradients and the optimizer stay fp32 and every loss is taken in fp32 (``compute_loss``
casts the heads' outputs): the mixed precision lc0 and KataGo train with, on a CPU with bf16 arithmetic as
on a GPU. ``auto`` (the default, for ``channels_last`` too) is resolved once for the learner's device
(``resolve_precision``).

``Learner`` owns the network being trained, its optimizer and schedule, the replay window and the
random state; ``state_dict`` / ``load_state_dict`` round-trip all of it through safe formats.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from alphazero.config import TrainConfig
from alphazero.errors import InputError
from alphazero.learn.replay import ReplayWindow, read_shard
from alphazero.nets.inference import cpu_computes_bf16
from alphazero.nets.network import (
    MOVES_LEFT_SCALE,
    NetworkConfig,
    PolicyValueNet,
    net_from_payload,
    net_to_payload,
)

LEARNER_FORMAT = "alphazero-chess-learner"
LEARNER_FORMAT_VERSION = 1


@dataclass(frozen=True)
class StepStats:
    step: int
    loss: float
    value_loss: float
    policy_loss: float
    material_loss: float  # 0 without network.material_head
    learning_rate: float
    samples_per_s: float
    soft_policy_loss: float = 0.0  # 0 without network.soft_policy_head
    moves_left_loss: float = 0.0  # 0 without network.moves_left_head


class Losses(NamedTuple):
    total: torch.Tensor
    value: torch.Tensor
    policy: torch.Tensor
    material: torch.Tensor  # 0 without the material head or targets
    soft_policy: torch.Tensor  # 0 without the soft policy head or a weight
    moves_left: torch.Tensor  # 0 without the moves-left head or targets


def soft_policy_target(pi: torch.Tensor, temperature: float) -> torch.Tensor:
    """``pi ** (1 / T)`` renormalised per row (KataGo's soft policy target); a row of zeros stays zeros."""
    soft = pi.clamp(min=0.0) ** (1.0 / temperature)
    return soft / soft.sum(dim=1, keepdim=True).clamp(min=1e-12)


def wdl_target(z: torch.Tensor, draw: torch.Tensor | None = None) -> torch.Tensor:
    """The WDL head's target ``[B, 3]`` (win, draw, loss) whose expected result W - L is ``z`` ``[B]``, with
    ``draw`` ``[B]`` (default 0) of its mass on the draw: ``((1 - d + z) / 2, d, (1 - d - z) / 2)``."""
    d = torch.zeros_like(z) if draw is None else draw
    return torch.stack(((1.0 - d + z) / 2, d, (1.0 - d - z) / 2), dim=1).clamp(min=0.0)


MOVES_LEFT_HUBER_PLIES = 10.0  # lc0's Huber delta for the moves-left loss, in plies


def moves_left_loss(predicted: torch.Tensor, plies_left: torch.Tensor) -> torch.Tensor:
    """lc0's moves-left loss: Huber (delta ``MOVES_LEFT_HUBER_PLIES``) between the head's output and
    ``plies_left / MOVES_LEFT_SCALE``, both in the head's unit, averaged over the positions whose target is
    known (``plies_left >= 0``); 0 when none is."""
    known = plies_left >= 0
    if not bool(known.any()):
        return torch.zeros((), device=predicted.device)
    return F.huber_loss(predicted[known], plies_left[known] / MOVES_LEFT_SCALE,
                        delta=MOVES_LEFT_HUBER_PLIES / MOVES_LEFT_SCALE)


def compute_loss(net: PolicyValueNet, planes: torch.Tensor, pi: torch.Tensor, z: torch.Tensor,
                 value_weight: torch.Tensor | None = None, material: torch.Tensor | None = None,
                 material_weight: float = 1.0, soft_policy_weight: float = 0.0,
                 soft_policy_temperature: float = 4.0, draw: torch.Tensor | None = None,
                 moves_left: torch.Tensor | None = None, moves_left_weight: float = 1.0) -> Losses:
    """(total, value, policy, material, soft policy, moves left) losses: planes ``uint8 [B,24,8,8]``, pi
    ``[B,4672]``, z ``[B]``; ``moves_left`` ``[B]``: plies to the game's end, -1 where unknown.

    The value term is ``(z - v)^2``, or with the WDL head the cross-entropy of its logits with
    ``wdl_target(z, draw)`` (``draw`` ``[B]``: the target's share of draws, from ``draw_targets``).
    ``value_weight`` ``[B]`` (0 or 1) drops positions from the value term (mean over the rest). The
    material term counts only when both the network has the head and ``material`` targets are given
    (otherwise it is 0), the moves-left term likewise; the soft policy term only when the network has its
    head and the weight is positive.
    """
    soft_wanted = soft_policy_weight > 0 and net.soft_policy_out is not None
    heads = net.forward_training(planes, soft_policy=soft_wanted)
    # Every loss in fp32 (under autocast the heads may come out in bf16; for fp32 outputs .float() is a no-op).
    logits, value, predicted, soft_logits, wdl_logits, plies_out = (None if h is None else h.float() for h in heads)
    assert logits is not None and value is not None
    if wdl_logits is not None:
        per_position = -(wdl_target(z, draw) * F.log_softmax(wdl_logits, dim=1)).sum(dim=1)
    else:
        per_position = (value - z) ** 2
    if value_weight is None:
        value_loss = per_position.mean()
    else:
        value_loss = (value_weight * per_position).sum() / value_weight.sum().clamp(min=1.0)
    policy_loss = -(pi * F.log_softmax(logits, dim=1)).sum(dim=1).mean()
    total = value_loss + policy_loss
    material_loss = torch.zeros((), device=value.device)
    if predicted is not None and material is not None:
        material_loss = F.mse_loss(predicted, material)
        total = total + material_weight * material_loss
    soft_loss = torch.zeros((), device=value.device)
    if soft_logits is not None:
        target = soft_policy_target(pi, soft_policy_temperature)
        soft_loss = -(target * F.log_softmax(soft_logits, dim=1)).sum(dim=1).mean()
        total = total + soft_policy_weight * soft_loss
    left_loss = torch.zeros((), device=value.device)
    if plies_out is not None and moves_left is not None:
        left_loss = moves_left_loss(plies_out, moves_left)
        total = total + moves_left_weight * left_loss
    return Losses(total, value_loss, policy_loss, material_loss, soft_loss, left_loss)


def value_targets(z: np.ndarray, q: np.ndarray, known: np.ndarray,
                  config: TrainConfig) -> tuple[np.ndarray, torch.Tensor | None]:
    """The value head's target and per-position loss weight (None: all count) for a sampled batch.

    Finished games: ``(1 - q_weight) * z + q_weight * q``. Games stopped at the length limit: weight 0
    (``value_from_unfinished = false``) or the root search value q alone (``true``)."""
    target = ((1.0 - config.q_weight) * z + config.q_weight * q).astype(np.float32)
    if not config.value_from_unfinished:
        return target, torch.from_numpy(known.astype(np.float32))
    return np.where(known, target, q).astype(np.float32), None


def draw_targets(z: np.ndarray, known: np.ndarray, config: TrainConfig) -> np.ndarray:
    """The WDL head's share of draws in ``value_targets``' target: ``1 - q_weight`` for a drawn finished game
    (q counts as a win/loss split), 0 otherwise (a game stopped at the length limit had no result)."""
    return ((1.0 - config.q_weight) * (known & (z == 0))).astype(np.float32)


def make_optimizer(net: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """``train.optimizer``: ``sgd`` (Nesterov momentum, L2 as weight decay, as AlphaZero) or ``adamw``
    (decoupled weight decay; learns faster from the little data of a small run)."""
    if config.optimizer == "adamw":
        return torch.optim.AdamW(net.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    return torch.optim.SGD(net.parameters(), lr=config.learning_rate, momentum=config.momentum,
                           weight_decay=config.weight_decay, nesterov=config.momentum > 0)


def anneal_factor(config: TrainConfig, progress: float | None) -> float:
    """The learning rate's factor at ``progress`` (0-1) of the run: 1 until the last ``lr_anneal_fraction``
    of it, then a half cosine from 1 down to ``lr_anneal_floor`` at the end; 1 with no progress or annealing."""
    fraction = config.lr_anneal_fraction
    if progress is None or fraction <= 0:
        return 1.0
    t = min(max((progress - (1.0 - fraction)) / fraction, 0.0), 1.0)
    floor = config.lr_anneal_floor
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * t))


def resolve_precision(config: TrainConfig, device: torch.device) -> TrainConfig:
    """``config`` with ``precision`` and ``channels_last`` resolved for ``device``: ``auto`` is bf16 with
    channels-last on a CPU that computes bf16 natively (``cpu_computes_bf16``; measured to pay there), fp32
    and contiguous elsewhere (on CUDA too, where it is not measured)."""
    bf16 = device.type == "cpu" and cpu_computes_bf16()
    precision = ("bf16" if bf16 else "fp32") if config.precision == "auto" else config.precision
    channels_last = (precision == "bf16" and device.type == "cpu") if config.channels_last == "auto" else config.channels_last
    return replace(config, precision=precision, channels_last=bool(channels_last))


def check_learner_state(state: Any, source: str = "learner state") -> None:
    """Raise ``InputError`` naming ``source`` unless ``state`` is a learner state file of this version
    (its header only: ``Learner.load_state_dict`` checks the rest when it loads it)."""
    if not isinstance(state, dict) or state.get("format") != LEARNER_FORMAT:
        raise InputError(f"{source}: not a learner state file")
    if state.get("format_version") != LEARNER_FORMAT_VERSION:
        raise InputError(f"{source}: learner format_version {state.get('format_version')!r}, expected {LEARNER_FORMAT_VERSION}")


class Learner:
    """Trains a ``PolicyValueNet`` on uniform samples from a window of recent self-play positions."""

    def __init__(self, network: NetworkConfig, config: TrainConfig, seed: int = 0) -> None:
        device = config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.config = resolve_precision(config, self.device)
        torch.manual_seed(seed)
        self.net = self._placed(PolicyValueNet(network))
        self.optimizer = make_optimizer(self.net, config)
        self.step = 0
        self.samples_trained = 0
        self.rng = np.random.default_rng(seed)
        self.window = ReplayWindow(config.window_positions, config.material_horizon)
        self.shards_loaded: list[str] = []
        self.ema = self._new_ema(self.net)
        self.anneal = 1.0  # the learning rate's annealing factor at the last train call's progress

    def _placed(self, net: PolicyValueNet) -> PolicyValueNet:
        """``net`` on the learner's device, in channels-last memory format with ``train.channels_last``."""
        net = net.to(self.device)
        return net.to(memory_format=torch.channels_last) if self.config.channels_last else net  # type: ignore[call-overload]  # torch's stubs omit this form

    def _new_ema(self, net: PolicyValueNet) -> AveragedModel | None:
        """torch's exponential moving average of ``net`` (parameters and buffers), or None when off."""
        if self.config.ema_decay <= 0:
            return None
        return AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(self.config.ema_decay), use_buffers=True)

    # -- data -------------------------------------------------------------------------------------

    def add_shards(self, paths: Sequence[str | Path]) -> int:
        """Load new shards into the window (already loaded ones are skipped); returns window size."""
        for path in paths:
            name = Path(path).name
            if name in self.shards_loaded:
                continue
            self.window.add(read_shard(path))
            self.shards_loaded.append(name)
        return self.window.num_positions

    # -- training ---------------------------------------------------------------------------------

    def learning_rate(self) -> float:
        """``learning_rate``, times ``lr_gamma`` per milestone passed, times the annealing factor at the run
        progress the last ``train`` call was given (``anneal_factor``)."""
        drops = sum(1 for milestone in self.config.lr_milestones if self.step >= milestone)
        return self.config.learning_rate * self.config.lr_gamma**drops * self.anneal

    def train(self, num_steps: int, progress: float | None = None) -> StepStats:
        """Run ``num_steps`` optimizer steps; returns the mean losses over them. ``progress``: the share of
        the run's wall time gone (the driver's; None outside a timed run), which ``train.lr_anneal_fraction``
        anneals the learning rate by."""
        if self.window.num_positions == 0:
            raise ValueError("cannot train: the replay window is empty")
        self.anneal = anneal_factor(self.config, progress)
        self.net.train()
        totals = np.zeros(6)
        start = time.perf_counter()
        for _ in range(num_steps):
            rate = self.learning_rate()
            for group in self.optimizer.param_groups:
                group["lr"] = rate
            batch = self.window.sample(self.config.batch_size, self.rng)
            target, weight = value_targets(batch.z, batch.q, batch.known, self.config)
            draw_t = (torch.from_numpy(draw_targets(batch.z, batch.known, self.config)).to(self.device)
                      if self.net.config.wdl_head else None)
            planes_t = torch.from_numpy(batch.planes).to(self.device)
            pi_t = torch.from_numpy(batch.pi).to(self.device)
            z_t = torch.from_numpy(target).to(self.device)
            material_t = torch.from_numpy(batch.material).to(self.device)
            moves_left_t = torch.from_numpy(batch.moves_left).to(self.device)
            if weight is not None:
                weight = weight.to(self.device)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.config.precision == "bf16"):
                loss, value_loss, policy_loss, material_loss, soft_loss, left_loss = compute_loss(
                    self.net, planes_t, pi_t, z_t, weight, material_t, self.config.material_weight,
                    self.config.soft_policy_weight, self.config.soft_policy_temperature, draw_t,
                    moves_left_t, self.config.moves_left_weight)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            if self.ema is not None:
                self.ema.update_parameters(self.net)
            totals += (loss.item(), value_loss.item(), policy_loss.item(), material_loss.item(), soft_loss.item(),
                       left_loss.item())
            self.step += 1
            self.samples_trained += self.config.batch_size
        elapsed = time.perf_counter() - start
        mean = totals / max(num_steps, 1)
        return StepStats(
            step=self.step, loss=float(mean[0]), value_loss=float(mean[1]), policy_loss=float(mean[2]),
            material_loss=float(mean[3]), soft_policy_loss=float(mean[4]), moves_left_loss=float(mean[5]),
            learning_rate=self.learning_rate(), samples_per_s=num_steps * self.config.batch_size / max(elapsed, 1e-9),
        )

    # -- weights and state ------------------------------------------------------------------------

    def get_weights(self) -> dict[str, Any]:
        """The network as a safe payload (``alphazero.nets.network.net_to_payload``)."""
        return net_to_payload(self.net)

    def get_network(self) -> PolicyValueNet:
        return net_from_payload(self.get_weights())

    def candidate_network(self) -> PolicyValueNet:
        """The network a generation's candidate is: the moving average with ``train.ema_decay``, else
        the weights as trained (a CPU copy either way)."""
        if self.ema is None:
            return self.get_network()
        module = self.ema.module
        assert isinstance(module, PolicyValueNet)
        return net_from_payload(net_to_payload(module))

    def set_weights(self, payload: dict[str, Any]) -> None:
        """The network's weights from ``payload``; the moving average (if on) starts again from them."""
        self.net.load_state_dict(net_from_payload(payload).state_dict())
        self.ema = self._new_ema(self.net)

    def state_dict(self) -> dict[str, Any]:
        """Everything a resume needs, as tensors and primitives (loadable with ``weights_only=True``)."""
        rng_state = self.rng.bit_generator.state
        return {
            "format": LEARNER_FORMAT,
            "format_version": LEARNER_FORMAT_VERSION,
            "network": self.get_weights(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "samples_trained": self.samples_trained,
            "numpy_rng": {"state": int(rng_state["state"]["state"]), "inc": int(rng_state["state"]["inc"]),
                          "has_uint32": int(rng_state["has_uint32"]), "uinteger": int(rng_state["uinteger"])},
            "torch_rng": torch.get_rng_state(),
            "shards_loaded": list(self.shards_loaded),
            "ema": None if self.ema is None else self.ema.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any], source: str = "learner state") -> None:
        check_learner_state(state, source)
        # Build everything in fresh objects first, so a bad file leaves this learner untouched.
        try:
            net = net_from_payload(state["network"], source)
            scratch = self._placed(PolicyValueNet(self.net.config))
            scratch.load_state_dict(net.state_dict())  # RuntimeError when the shapes differ
            optimizer = make_optimizer(scratch, self.config)
            if not isinstance(state["optimizer"], dict):
                raise TypeError("optimizer state is not a mapping")
            optimizer.load_state_dict(state["optimizer"])
            step, samples = int(state["step"]), int(state["samples_trained"])
            rng = state["numpy_rng"]
            rng_state = {
                "bit_generator": "PCG64", "state": {"state": int(rng["state"]), "inc": int(rng["inc"])},
                "has_uint32": int(rng["has_uint32"]), "uinteger": int(rng["uinteger"]),
            }
            torch_rng = state["torch_rng"]
            if not isinstance(torch_rng, torch.Tensor) or torch_rng.shape != torch.get_rng_state().shape:
                raise TypeError("torch_rng is not a torch random state")
            # The average goes on from the saved one; a state saved without one (the average was off, or
            # a file from before it existed) starts it from the loaded weights.
            ema = self._new_ema(scratch)
            if ema is not None and state.get("ema") is not None:
                ema.load_state_dict(state["ema"])
        except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as error:
            raise InputError(f"{source}: incomplete learner state: {error}") from None
        self.net.load_state_dict(scratch.state_dict())
        self.optimizer.load_state_dict(optimizer.state_dict())
        self.ema = None if ema is None else self._new_ema(self.net)
        if self.ema is not None and ema is not None:
            self.ema.load_state_dict(ema.state_dict())
        self.step, self.samples_trained = step, samples
        self.rng.bit_generator.state = rng_state
        torch.set_rng_state(torch_rng)
