"""NNUE networks in torch, for training: the sparse feature transformer, three architectures, the losses.

Owns the trainable form of an NNUE and its losses; the on-disk form (``.npz``, numpy only) is
``alphazero.nets.nnue_file`` and inference in search is ``alphazero.search.nnue_eval``: they never
import this module. ``NNUENet.to_arrays`` / ``from_arrays`` convert between the two with the array names
of the file format (float32).

Inputs are sparse: the active feature indices of each position, once from the side to move's
perspective (``stm``) and once from the opponent's (``nstm``), in CSR layout
(``alphazero.nets.features.FeatureBatch``)::

    stm_index    int64 [T]      active features of the side to move's view, position after position
    stm_offsets  int64 [B + 1]  position b owns stm_index[stm_offsets[b]:stm_offsets[b + 1]]
    nstm_index / nstm_offsets   the same from the opponent's view

The feature transformer is one ``nn.EmbeddingBag(F, L1, mode="sum")`` shared by both perspectives (as
nnue-pytorch's CPU path does), plus a bias: ``acc = ft_bias + sum of ft_weight[i] over active i``.
Activations ``crelu(x) = clamp(x, 0, 1)`` and ``screlu(x) = clamp(x, 0, 1) ** 2``.

Architectures (the output ``y`` [B] is a logit for the side to move: centipawns ``= 400 * y``, win
probability ``= sigmoid(y)``):

- ``simple``: F -> L1 -> 1 from the side to move's view only (bullet's 768 -> N -> 1):
  ``y = out_weight . a(acc_stm) + out_bias``
- ``perspective``: F -> L1 x 2 -> 1 (bullet's 768 -> Nx2 -> 1), side to move's half first:
  ``y = out_weight . [a(acc_stm), a(acc_nstm)] + out_bias``
- ``layered``: F -> L1 x 2 -> L2 -> 1 (the thesis's net, L1 = 512, L2 = 32 there):
  ``h = a(l2_weight @ [a(acc_stm), a(acc_nstm)] + l2_bias)``, ``y = out_weight . h + out_bias``

With ``buckets`` K > 1 the output layer has K rows (bullet's output buckets by material): a position
uses row ``alphazero.nets.nnue_file.output_bucket(pieces, K)``, so ``forward`` takes each position's
bucket.

Losses (means over the rows that have a target):

- ``sigmoid_mse_loss`` (bullet's guide): ``(sigmoid(y) - t) ** 2`` with
  ``t = lambda * sigmoid(cp / 400) + (1 - lambda) * (result + 1) / 2``
- ``target_score_loss`` (the thesis): ``|sigmoid(score / 410) - sigmoid(f / 361)| ** 2.6``, ``f = 400 y``
- ``pqr_loss`` (the thesis, after Bernhardsson 2014): for a parent P, the child Q the game (or the
  label) played and a random other child R, each scored from its own side to move and mapped through
  ``2 sigmoid(f / 400) - 1``: ``-log sigmoid(r - q) - log sigmoid(p + q) - log sigmoid(-(p + q))``
  (R is worse than Q for the player who moved, and f(P) = -f(Q)).

Scores are centipawns for the side to move, float: NaN where a position has none, +-inf for a mate
(probability 1 / 0). Results are +1 / 0 / -1 for the side to move, NaN where unknown.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from alphazero.nets.nnue_file import MAX_BUCKETS

ARCHS = ("simple", "perspective", "layered")
ACTIVATIONS = ("crelu", "screlu")
SCALE = 400.0  # centipawns per logit unit of the output
# bullet initialises the input layer as if ~32 inputs were active: the accumulator starts in the
# activation's working range whatever the feature set's size.
FT_INIT_BOUND = 1.0 / math.sqrt(32.0)
WEIGHT_CLIP = 1.98  # bullet's clipping: every weight stays representable after quantisation (1.98 * QB fits int16)


@dataclass(frozen=True)
class NNUEConfig:
    """The shape of a net. ``features`` is the canonical feature-set spec, ``num_features`` its size."""

    features: str = "all"
    num_features: int = 768
    arch: str = "perspective"
    l1: int = 128
    l2: int = 32
    activation: str = "crelu"
    buckets: int = 1

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"arch {self.arch!r}: expected one of {', '.join(ARCHS)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r}: expected one of {', '.join(ACTIVATIONS)}")
        if self.l1 < 1 or self.l2 < 1 or self.num_features < 1:
            raise ValueError(f"l1, l2 and num_features must be positive, got {self.l1}, {self.l2}, {self.num_features}")
        if not 1 <= self.buckets <= MAX_BUCKETS:
            raise ValueError(f"buckets must be between 1 and {MAX_BUCKETS}, got {self.buckets}")

    def meta(self) -> dict[str, Any]:
        """The network's part of the file's ``meta`` (``alphazero.nets.nnue_file``)."""
        return {"features": self.features, "arch": self.arch, "l1": self.l1, "l2": self.l2,
                "activation": self.activation, "scale": int(SCALE), "buckets": self.buckets}

    def describe(self) -> str:
        hidden = f"{self.l1}" if self.arch == "simple" else f"{self.l1}x2"
        if self.arch == "layered":
            hidden += f" -> {self.l2}"
        out = "1" if self.buckets == 1 else f"1 of {self.buckets} buckets"
        return f"{self.features} ({self.num_features}) -> {hidden} -> {out}, {self.activation}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def activate(x: torch.Tensor, activation: str) -> torch.Tensor:
    clipped = torch.clamp(x, 0.0, 1.0)
    return clipped * clipped if activation == "screlu" else clipped


class NNUENet(nn.Module):
    """An NNUE over sparse inputs (module docstring); ``forward`` returns the logit ``y`` [B]."""

    def __init__(self, config: NNUEConfig) -> None:
        super().__init__()
        self.config = config
        self.ft = nn.EmbeddingBag(config.num_features, config.l1, mode="sum", include_last_offset=True)
        self.ft_bias = nn.Parameter(torch.zeros(config.l1))
        nn.init.uniform_(self.ft.weight, -FT_INIT_BOUND, FT_INIT_BOUND)
        width = config.l1 if config.arch == "simple" else 2 * config.l1
        self.l2: nn.Linear | None = None
        if config.arch == "layered":
            self.l2 = nn.Linear(width, config.l2)
            width = config.l2
        self.out = nn.Linear(width, config.buckets)

    def accumulate(self, index: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """``[B, L1]`` accumulators (before the activation) of one perspective's CSR features."""
        return self.ft(index, offsets) + self.ft_bias

    def forward(self, stm_index: torch.Tensor, stm_offsets: torch.Tensor,
                nstm_index: torch.Tensor | None = None, nstm_offsets: torch.Tensor | None = None,
                bucket: torch.Tensor | None = None) -> torch.Tensor:
        """``y`` [B]; ``bucket`` int64 [B], each position's output row, is needed with buckets only."""
        # One EmbeddingBag call per perspective: measured faster on CPU than one call over both (2B bags).
        activation = self.config.activation
        hidden = activate(self.accumulate(stm_index, stm_offsets), activation)
        if self.config.arch != "simple":
            if nstm_index is None or nstm_offsets is None:
                raise ValueError(f"a {self.config.arch} net needs both perspectives' features")
            other = activate(self.accumulate(nstm_index, nstm_offsets), activation)
            hidden = torch.cat((hidden, other), dim=1)
        if self.l2 is not None:
            hidden = activate(self.l2(hidden), activation)
        out = self.out(hidden)
        if self.config.buckets == 1:
            return out.squeeze(1)
        if bucket is None:
            raise ValueError(f"a net of {self.config.buckets} output buckets needs each position's bucket")
        return out.gather(1, bucket.reshape(-1, 1)).squeeze(1)

    @torch.no_grad()
    def clip_weights(self) -> None:
        """Keep every weight within +-WEIGHT_CLIP (after each optimizer step), as bullet does."""
        for parameter in self.parameters():
            parameter.clamp_(-WEIGHT_CLIP, WEIGHT_CLIP)

    # -- the file's arrays ------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """float32 arrays named as in the NNUE file: ``ft_weight [F, L1]``, ``ft_bias [L1]``, ``out_weight``
        (``[L1]`` simple, ``[2 L1]`` perspective, ``[L2]`` layered; ``[K, width]`` with K buckets),
        ``out_bias [K]``; layered also ``l2_weight [L2, 2 L1]``, ``l2_bias [L2]``."""

        def array(tensor: torch.Tensor) -> np.ndarray:
            return tensor.detach().cpu().numpy().astype(np.float32, copy=True)

        arrays = {"ft_weight": array(self.ft.weight), "ft_bias": array(self.ft_bias),
                  "out_weight": array(self.out.weight).reshape(-1) if self.config.buckets == 1 else array(self.out.weight),
                  "out_bias": array(self.out.bias).reshape(self.config.buckets)}
        if self.l2 is not None:
            arrays["l2_weight"] = array(self.l2.weight)
            arrays["l2_bias"] = array(self.l2.bias)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], config: NNUEConfig) -> "NNUENet":
        """The net whose parameters are ``arrays`` (``to_arrays``' names); ``ValueError`` on a shape mismatch."""
        net = cls(config)
        targets: dict[str, tuple[torch.Tensor, tuple[int, ...]]] = {
            "ft_weight": (net.ft.weight, (config.num_features, config.l1)),
            "ft_bias": (net.ft_bias, (config.l1,)),
            "out_weight": (net.out.weight, (net.out.in_features,) if config.buckets == 1
                           else (config.buckets, net.out.in_features)),
            "out_bias": (net.out.bias, (config.buckets,)),
        }
        if net.l2 is not None:
            targets["l2_weight"] = (net.l2.weight, (config.l2, 2 * config.l1))
            targets["l2_bias"] = (net.l2.bias, (config.l2,))
        with torch.no_grad():
            for name, (parameter, shape) in targets.items():
                if name not in arrays:
                    raise ValueError(f"NNUE arrays lack {name!r} ({config.arch} net)")
                value = np.asarray(arrays[name], dtype=np.float32)
                if value.shape != shape:
                    raise ValueError(f"NNUE array {name!r} has shape {value.shape}, expected {shape} for {config.describe()}")
                parameter.copy_(torch.from_numpy(value).reshape(parameter.shape))
        return net


# ---- losses -----------------------------------------------------------------------------------


def score_probability(score_cp: torch.Tensor, scale: float = SCALE) -> torch.Tensor:
    """``sigmoid(score / scale)``; +-inf (a mate) gives exactly 1 / 0. NaN stays NaN."""
    return torch.sigmoid(score_cp / scale)


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    count = mask.to(values.dtype).sum().clamp(min=1.0)
    return torch.where(mask, values, torch.zeros_like(values)).sum() / count


def sigmoid_mse_targets(score_cp: torch.Tensor, result: torch.Tensor, wdl_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(target win probability [B], has-a-target mask [B]): ``lambda * sigmoid(cp / 400) + (1 - lambda) *
    (result + 1) / 2``; the score alone where there is no result, the result alone where there is no score."""
    has_score = ~torch.isnan(score_cp)
    has_result = ~torch.isnan(result)
    from_score = score_probability(torch.where(has_score, score_cp, torch.zeros_like(score_cp)))
    from_result = (torch.where(has_result, result, torch.zeros_like(result)) + 1.0) / 2.0
    blended = wdl_lambda * from_score + (1.0 - wdl_lambda) * from_result
    target = torch.where(has_score & has_result, blended, torch.where(has_score, from_score, from_result))
    return target, has_score | has_result


def sigmoid_mse_loss(y: torch.Tensor, score_cp: torch.Tensor, result: torch.Tensor, wdl_lambda: float) -> torch.Tensor:
    """Mean ``(sigmoid(y) - t) ** 2`` over rows with a target (``sigmoid_mse_targets``); ``y`` is the net's logit."""
    target, known = sigmoid_mse_targets(score_cp, result, wdl_lambda)
    return _masked_mean((torch.sigmoid(y) - target) ** 2, known)


def target_score_loss(f_cp: torch.Tensor, score_cp: torch.Tensor) -> torch.Tensor:
    """Mean ``|sigmoid(score / 410) - sigmoid(f / 361)| ** 2.6`` over rows with a score (the thesis's
    target-score loss; both in centipawns for the side to move)."""
    known = ~torch.isnan(score_cp)
    target = score_probability(torch.where(known, score_cp, torch.zeros_like(score_cp)), 410.0)
    return _masked_mean(torch.abs(target - torch.sigmoid(f_cp / 361.0)) ** 2.6, known)


def pqr_loss(p_cp: torch.Tensor, q_cp: torch.Tensor, r_cp: torch.Tensor) -> torch.Tensor:
    """The thesis's PQR loss (module docstring) on the net's centipawns for P, Q and R, each for its own
    side to move: mean ``-log sig(r - q) - log sig(p + q) - log sig(-(p + q))`` with x -> 2 sig(x / 400) - 1."""
    p, q, r = (2.0 * torch.sigmoid(x / SCALE) - 1.0 for x in (p_cp, q_cp, r_cp))
    return (-F.logsigmoid(r - q) - F.logsigmoid(p + q) - F.logsigmoid(-(p + q))).mean()
