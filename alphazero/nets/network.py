"""The policy/value network and its safe on-disk format.

``PolicyValueNet`` maps planes ``uint8 [B, 24, 8, 8]`` (from ``alphazero.board.encoding``) to policy logits
``float32 [B, 4672]`` (action layout of ``alphazero.board.encoding``) and a value ``float32 [B]`` in [-1, 1]
for the side to move. The fixed input scaling of the encoder's integer planes happens inside
``forward``, so callers pass the stored uint8 planes as they are.

With ``material_head`` the value head's hidden layer also feeds a second tanh output m, trained
(``alphazero.learn.train``) toward the material balance a few plies later in the game that was played
(a self-play target in the manner of KataGo's auxiliary ownership and score heads: it teaches the trunk
which pieces are about to be won or lost). With ``material_utility = u > 0`` the value every search
reads from ``forward`` is ``(1 - u) * v + u * m``, as KataGo's search mixes its score into the winning
chance; ``forward_heads`` gives v and m apart for training. With ``wdl_head`` the value head ends in three
logits (lc0's win/draw/loss) and v is their expected result W - L, so every search reads the same [-1, 1]
value either way; ``forward_training`` gives the logits for the cross-entropy loss.

With ``moves_left_head`` the value head's hidden layer feeds one more output, lc0's moves-left head:
the plies until the game ends, in units of ``MOVES_LEFT_SCALE`` plies (softplus, so never negative),
trained toward the game that was played (``alphazero.learn.replay``). With ``moves_left_utility = u > 0``
the value the searches read prefers the shorter win and the longer loss, as lc0's moves-left utility:
``value - sign(v) * u * s(|v|) * log(1 + plies_left / MOVES_LEFT_PLIES)`` (``moves_left_adjustment``),
where s is lc0's scaling of a decided value (0 below ``MOVES_LEFT_THRESHOLD``, rising to 1 at |v| = 1).
Folded into the value here, it reaches every search and backend (the compiled tree, ONNX) unchanged;
the log makes a ply count more near the end (20 -> 10 plies left is worth what 200 -> 100 is).

Files are written with ``torch.save`` of plain tensors and primitive types and read back with
``torch.load(..., weights_only=True)``: loading a network never executes code from the file.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from alphazero.board import encoding
from alphazero.config import NetworkConfig, saved_section
from alphazero.errors import InputError
from alphazero.fileio import atomic_write

NET_FORMAT = "alphazero-chess-net"
NET_FORMAT_VERSION = 1

# The moves-left head's output unit (lc0 scales its target by 20 plies) and its utility's shape.
MOVES_LEFT_SCALE = 20.0
MOVES_LEFT_PLIES = 10.0  # log(1 + plies / this): the utility's ply count, relative near the end
MOVES_LEFT_THRESHOLD = 0.5  # |v| below this: no moves-left utility (the game is not yet decided)


class SqueezeExcitation(nn.Module):
    """lc0's squeeze-excitation (global pooling): each channel's mean over the board -> FC to
    ``channels // ratio`` -> ReLU -> FC to ``2 * channels``, a scale ``w`` and a bias ``b`` per channel;
    ``y -> sigmoid(w) * y + b``. What one square sees no longer stops at the convolutions' reach."""

    def __init__(self, channels: int, ratio: int) -> None:
        super().__init__()
        self.squeeze = nn.Linear(channels, max(1, channels // ratio))
        self.excite = nn.Linear(max(1, channels // ratio), 2 * channels)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        pooled = y.mean(dim=(2, 3))
        scale, bias = self.excite(F.relu(self.squeeze(pooled))).chunk(2, dim=1)
        return torch.sigmoid(scale)[:, :, None, None] * y + bias[:, :, None, None]


class WDLValue(nn.Module):
    """Win/draw/loss logits ``[B, 3]`` -> the expected result W - L ``[B, 1]`` (the WDL head's last layer)."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        probabilities = torch.softmax(logits, dim=1)
        return probabilities[:, :1] - probabilities[:, 2:]


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, se_ratio: int = 0) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1: nn.Module = nn.BatchNorm2d(channels)  # nn.Identity once folded (fuse_for_inference)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2: nn.Module = nn.BatchNorm2d(channels)
        self.se: nn.Module | None = SqueezeExcitation(channels, se_ratio) if se_ratio > 0 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        if self.se is not None:
            y = self.se(y)
        return F.relu(x + y)


class Heads(NamedTuple):
    """``PolicyValueNet.forward_training``'s outputs for a batch of B positions."""

    policy: torch.Tensor  # logits [B, 4672]
    value: torch.Tensor  # v [B] in [-1, 1] (W - L with the WDL head)
    material: torch.Tensor | None  # m [B]; None without the material head
    soft_policy: torch.Tensor | None  # logits [B, 4672]; None without the head or when not asked
    wdl: torch.Tensor | None  # win/draw/loss logits [B, 3]; None without the WDL head
    moves_left: torch.Tensor | None = None  # plies left / MOVES_LEFT_SCALE [B]; None without the head


class PolicyValueNet(nn.Module):
    """Residual conv tower with AlphaZero's policy (conv, 73 planes) and value (conv, fc, tanh) heads."""

    plane_offset: torch.Tensor  # [1, 24, 1, 1] buffers of the encoder's affine map
    plane_scale: torch.Tensor

    def __init__(self, config: NetworkConfig = NetworkConfig()) -> None:
        super().__init__()
        self.config = config
        c = config.channels
        self.register_buffer("plane_offset", torch.from_numpy(encoding.PLANE_OFFSET).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("plane_scale", torch.from_numpy(encoding.PLANE_SCALE).view(1, -1, 1, 1), persistent=False)
        self.stem = nn.Sequential(
            nn.Conv2d(encoding.NUM_PLANES, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()
        )
        self.tower = nn.Sequential(*[ResidualBlock(c, config.se_ratio) for _ in range(config.blocks)])
        self.policy_head = nn.Sequential(
            nn.Conv2d(c, config.policy_channels, config.policy_kernel, padding=config.policy_kernel // 2, bias=False),
            nn.BatchNorm2d(config.policy_channels),
            nn.ReLU(),
            nn.Conv2d(config.policy_channels, encoding.NUM_ACTIONS // 64, 1),
        )
        self.value_head = nn.Sequential(
            nn.Conv2d(c, config.value_channels, 1, bias=False),
            nn.BatchNorm2d(config.value_channels),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(config.value_channels * 64, config.value_hidden),
            nn.ReLU(),
            nn.Linear(config.value_hidden, 3 if config.wdl_head else 1),
            WDLValue() if config.wdl_head else nn.Tanh(),
        )
        # Reads the value head's hidden layer (value_head[:-2]): one more linear output, no new trunk.
        self.material_out: nn.Module | None = (
            nn.Sequential(nn.Linear(config.value_hidden, 1), nn.Tanh()) if config.material_head else None
        )
        self.moves_left_out: nn.Module | None = (
            nn.Sequential(nn.Linear(config.value_hidden, 1), nn.Softplus()) if config.moves_left_head else None
        )
        # Reads the policy head's hidden features (policy_head[:-1]): a second 73-plane output, for training only.
        self.soft_policy_out: nn.Module | None = (
            nn.Conv2d(config.policy_channels, encoding.NUM_ACTIONS // 64, 1) if config.soft_policy_head else None
        )

    def scale_input(self, planes: torch.Tensor) -> torch.Tensor:
        """``uint8 [B, 24, 8, 8]`` -> ``float32 [B, 24, 8, 8]`` by the encoder's fixed affine map."""
        return (planes.float() - self.plane_offset) * self.plane_scale

    def forward_heads(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """planes -> (policy logits ``[B, 4672]``, value v ``[B]``, material m ``[B]`` or None without the head)."""
        heads = self.forward_training(planes, soft_policy=False)
        return heads.policy, heads.value, heads.material

    def forward_training(self, planes: torch.Tensor, soft_policy: bool = True) -> Heads:
        """Every head's output (``Heads``): the soft policy's only when asked and present."""
        x = self.tower(self.stem(self.scale_input(planes)))
        features = self.policy_head[:-1](x)
        policy = self.policy_head[-1](features).flatten(1)  # [B, 73 * 64]: action = plane * 64 + square
        soft = None
        if soft_policy and self.soft_policy_out is not None:
            soft = self.soft_policy_out(features).flatten(1)
        hidden = self.value_head[:-2](x)
        raw = self.value_head[-2](hidden)
        value = self.value_head[-1](raw).squeeze(1)
        material = self.material_out(hidden).squeeze(1) if self.material_out is not None else None
        moves_left = self.moves_left_out(hidden).squeeze(1) if self.moves_left_out is not None else None
        return Heads(policy, value, material, soft, raw if self.config.wdl_head else None, moves_left)

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """planes ``uint8 [B, 24, 8, 8]`` -> (policy logits ``[B, 4672]``, value ``[B]`` for side to move):
        the value searches use, v mixed with m by ``material_utility``, less the moves-left utility."""
        heads = self.forward_training(planes, soft_policy=False)
        value = heads.value
        utility = self.config.material_utility
        if heads.material is not None and utility > 0:
            value = (1.0 - utility) * value + utility * heads.material
        if heads.moves_left is not None and self.config.moves_left_utility > 0:
            value = value - moves_left_adjustment(heads.value, heads.moves_left, self.config.moves_left_utility)
        return heads.policy, value


def moves_left_adjustment(value: torch.Tensor, moves_left: torch.Tensor, utility: float) -> torch.Tensor:
    """What the moves-left utility takes off the value the searches read: ``sign(v) * u * s(|v|) *
    log(1 + plies_left / MOVES_LEFT_PLIES)``, ``moves_left`` in the head's unit (``MOVES_LEFT_SCALE`` plies).
    s is lc0's scaling of a decided value: with ``q = max(0, |v| - T) / (1 - T)`` (T =
    ``MOVES_LEFT_THRESHOLD``), ``s = 1.6521 q - 0.6521 q^2`` (0 at |v| <= T, 1 at |v| = 1), so a winner's
    value falls with the plies left and a loser's rises: the search prefers the short win, the long loss."""
    q = (value.abs() - MOVES_LEFT_THRESHOLD).clamp(min=0.0) / (1.0 - MOVES_LEFT_THRESHOLD)
    scaling = 1.6521 * q - 0.6521 * q * q
    plies = moves_left.clamp(min=0.0) * MOVES_LEFT_SCALE
    return torch.sign(value) * utility * scaling * torch.log1p(plies / MOVES_LEFT_PLIES)


def fuse_for_inference(net: PolicyValueNet) -> nn.Module:
    """A copy of ``net`` in eval mode with every BatchNorm folded into its conv (fewer ops per call).

    Same outputs as ``net.eval()`` to float rounding; used by the evaluator, never trained.
    """
    fused = PolicyValueNet(net.config)
    fused.load_state_dict(net.state_dict())
    fused.eval()

    def fold(sequence: list[nn.Module]) -> list[nn.Module]:
        out: list[nn.Module] = []
        for module in sequence:
            if isinstance(module, nn.BatchNorm2d) and out and isinstance(out[-1], nn.Conv2d):
                out[-1] = torch.nn.utils.fusion.fuse_conv_bn_eval(out[-1], module)
            else:
                out.append(module)
        return out

    fused.stem = nn.Sequential(*fold(list(fused.stem)))
    fused.policy_head = nn.Sequential(*fold(list(fused.policy_head)))
    fused.value_head = nn.Sequential(*fold(list(fused.value_head)))
    for block in fused.tower:
        assert isinstance(block, ResidualBlock)
        bn1, bn2 = block.bn1, block.bn2
        assert isinstance(bn1, nn.BatchNorm2d) and isinstance(bn2, nn.BatchNorm2d)
        block.conv1 = torch.nn.utils.fusion.fuse_conv_bn_eval(block.conv1, bn1)
        block.bn1 = nn.Identity()
        block.conv2 = torch.nn.utils.fusion.fuse_conv_bn_eval(block.conv2, bn2)
        block.bn2 = nn.Identity()
    for parameter in fused.parameters():
        parameter.requires_grad_(False)
    return fused


def net_to_payload(net: PolicyValueNet, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The network as plain tensors and primitives (what ``save_network`` writes)."""
    return {
        "format": NET_FORMAT,
        "format_version": NET_FORMAT_VERSION,
        "encoding_version": encoding.ENCODING_VERSION,
        "config": dataclasses.asdict(net.config),
        "state_dict": {k: v.detach().cpu().clone() for k, v in net.state_dict().items()},
        "metadata": dict(metadata or {}),
    }


def net_from_payload(payload: Any, source: str = "network") -> PolicyValueNet:
    """Rebuild a network from ``net_to_payload`` output; ``InputError`` naming ``source`` if malformed."""
    if not isinstance(payload, dict) or payload.get("format") != NET_FORMAT:
        raise InputError(f"{source}: not an alphazero-chess network file")
    if payload.get("format_version") != NET_FORMAT_VERSION:
        raise InputError(f"{source}: network format_version {payload.get('format_version')!r}, expected {NET_FORMAT_VERSION}")
    if payload.get("encoding_version") != encoding.ENCODING_VERSION:
        raise InputError(f"{source}: made for encoding version {payload.get('encoding_version')!r}")
    try:
        config = NetworkConfig(**saved_section("network", payload["config"]))
        net = PolicyValueNet(config)
        net.load_state_dict(payload["state_dict"])
    except (KeyError, TypeError, RuntimeError) as error:
        raise InputError(f"{source}: network weights do not match their config: {error}") from None
    return net


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` to ``path`` atomically (``alphazero.fileio.atomic_write``)."""
    atomic_write(path, lambda handle: torch.save(obj, handle))


def safe_torch_load(path: str | os.PathLike) -> Any:
    """``torch.load(weights_only=True)``; a missing, truncated or foreign file raises ``InputError`` naming it
    in one short line (torch's own text for such a file is a paragraph advising ``weights_only=False``,
    which this program never does)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols of foreign files before failing
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several types for damaged archives
        if "Unsupported global" in str(error):
            raise InputError(f"{path}: holds Python objects, not only tensors and plain data; refused unread "
                             "(a file this program writes holds none)") from None
        raise InputError(f"{path}: not a torch file, or a damaged one ({type(error).__name__})") from None


def save_network(net: PolicyValueNet, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
    """Write ``net`` atomically to ``path`` in the safe format."""
    atomic_torch_save(net_to_payload(net, metadata), path)


def _is_nnue_file(path: Path) -> bool:
    """Whether ``path`` is an NNUE file (``alphazero.nets.nnue_file``: an npz with a feature transformer)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return "ft_weight.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def load_network(path: str | os.PathLike) -> PolicyValueNet:
    """Read a network written by ``save_network``; errors name the file."""
    if _is_nnue_file(Path(path)):
        raise InputError(f"{path}: an NNUE evaluation network, not a policy/value network (play it as ab:{path})")
    return net_from_payload(safe_torch_load(path), str(path))
