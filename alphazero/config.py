"""Run configuration: every section's frozen, typed value, loaded once at the edge.

This module is the one place a config section is defined (``NetworkConfig``, ``SearchConfig``,
``SelfPlayConfig``, ``TrainConfig``, ``ArenaConfig``, ``WorkersConfig`` and ``RunConfig`` holding them),
so it sits on the ground floor with ``errors`` and ``fileio``: it imports nothing else of the project,
and the floors above (``board < nets < search < judge < learn``) take their section from here.

``load_config(path, overrides)`` reads a YAML file, applies ``section.key=value`` overrides and
builds a ``RunConfig``; an unknown key, a wrong type or a bad value raises ``ConfigError`` naming
the key. Components receive the narrowest piece they need (``config.search``, ``config.train``...).

The dataclass defaults are ``configs/default.yaml``, the measured CPU setup (a test keeps them
equal): a config file states only what it changes, and ``RunConfig()`` is the default run.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from alphazero.errors import ConfigError as ConfigError  # re-exported: raised and caught as alphazero.config.ConfigError
from alphazero.fileio import read_text


@dataclass(frozen=True)
class NetworkConfig:
    """Shape of the residual tower and heads. The defaults are ``configs/default.yaml``'s network (3x32,
    fast on one CPU thread); other shapes live in their configs (``configs/large.yaml``: 10x128 for a GPU)."""

    blocks: int = 3
    channels: int = 32
    value_channels: int = 4
    value_hidden: int = 64
    policy_channels: int = 32
    # The policy head's first convolution: 3 (3x3, as AlphaZero's chess head) or 1 (1x1, as KataGo's policy head;
    # 11% fewer multiply-adds for the 3x32). Measured: docs/RESULTS.md "A 1x1 policy convolution at equal wall time".
    policy_kernel: int = 3
    # A second value-head output, the material balance some plies ahead, and its share u of the value the
    # searches read, (1 - u) * v + u * m. Measured: docs/RESULTS.md "The material head".
    material_head: bool = True
    material_utility: float = 0.5
    # KataGo's auxiliary soft policy head: a second policy output, trained toward pi ** (1 / T) renormalised
    # (train.soft_policy_temperature, weight train.soft_policy_weight), which searches never read.
    soft_policy_head: bool = False
    # > 0: every residual block ends in lc0's squeeze-excitation (global pooling: the board's mean of each
    # channel -> FC to channels / se_ratio -> ReLU -> FC to a scale and a bias per channel); 0: plain blocks
    se_ratio: int = 0
    # lc0's WDL value head: three logits (win, draw, loss for the side to move) trained by cross-entropy toward
    # the game's result (and q, as a win/loss split, by train.q_weight); the searches read W - L. False: one
    # tanh output trained by squared error, as AlphaZero.
    wdl_head: bool = False
    # lc0's moves-left head: a third value-head output, the plies until the game ends (trained toward the
    # games played that finished, weight train.moves_left_weight), and its utility u: the value the searches
    # read falls by u * log(1 + plies left / 10) when winning (rises when losing), scaled as lc0 scales it by
    # how decided the value is (alphazero.nets.network.moves_left_adjustment): the shorter win is preferred.
    moves_left_head: bool = False
    moves_left_utility: float = 0.0


# What changed in the schema since files were saved with it (a network's config, a run directory's
# config.yaml), by section. Added later: a saved section that lacks the key was made before it existed,
# and the value given rebuilds what the file holds. Renamed: a saved file's old name reads as the new
# one; in a config a user writes, the old name is an error that names the new one.
KEYS_ADDED_LATER: dict[str, dict[str, Any]] = {"network": {"material_head": False, "material_utility": 0.0,
                                                           "soft_policy_head": False, "se_ratio": 0,
                                                           "wdl_head": False, "moves_left_head": False,
                                                           "moves_left_utility": 0.0, "policy_kernel": 3}}
KEYS_RENAMED: dict[str, dict[str, str]] = {"search": {"engine": "implementation"}}


def saved_section(section: str, saved: Mapping[str, Any]) -> dict[str, Any]:
    """One section of a config read from a file the project wrote, in the current schema."""
    renamed = KEYS_RENAMED.get(section, {})
    return {**KEYS_ADDED_LATER.get(section, {}), **{renamed.get(key, key): value for key, value in saved.items()}}


def saved_config(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A whole config read from a run directory, every section in the current schema."""
    return {key: saved_section(key, value) if isinstance(value, Mapping) else value for key, value in saved.items()}


@dataclass(frozen=True)
class SearchConfig:
    """A search's budget, algorithm and constants (AlphaZero's and mctx's defaults where they had one). The
    defaults are self-play's: Gumbel at 32 simulations; a player's search starts from PUCT instead
    (``alphazero.judge.players.PLAYER_SEARCH``, what its figures were measured with)."""

    num_simulations: int = 32  # configs/default.yaml's budget (AlphaZero: 800)
    c_puct: float = 1.25
    c_puct_base: float = 19652.0  # 0 disables the log growth of c
    # The network's policy logits are divided by this before the softmax over the legal moves (lc0's
    # PolicyTemperature; > 1 flattens an overconfident policy). Self-play keeps 1.0.
    policy_temperature: float = 1.0
    fpu_reduction: float = 0.25
    dirichlet_alpha: float = 0.3
    dirichlet_epsilon: float = 0.25
    leaves_per_game: int = 1  # > 1 collects several leaves per game per network call (virtual loss)
    virtual_loss: float = 1.0
    # PUCT keeps the played move's subtree and its statistics; Gumbel starts its statistics afresh and keeps
    # only the subtree's network evaluations (the compiled search; alphazero.search.compiled.tree).
    reuse_tree: bool = True
    twofold_draw: bool = True  # a position repeating one earlier in the same tree is a draw (as lc0)
    mate_in_one: bool = True  # a node whose mover can mate is a proven win; a root plays its mate (module docs)
    algorithm: str = "gumbel"  # gumbel (Gumbel AlphaZero, sequential halving) or puct (AlphaZero)
    gumbel_considered: int = 16  # m: root actions sampled by Gumbel-top-k (mctx's default)
    gumbel_c_visit: float = 50.0  # sigma(q) = (c_visit + max N) * c_scale * q
    gumbel_c_scale: float = 0.1
    # Which implementation runs the search: ``compiled`` (numba, alphazero.search.compiled: the same
    # PUCT and Gumbel, 4-6 us of overhead per simulation instead of 80-130), ``python``
    # (alphazero.search.mcts), or ``auto``: compiled with a network evaluator, Python otherwise.
    implementation: str = "auto"
    # Where the network runs for the search (alphazero.nets.inference): ``torch`` (eager), ``onnx`` (ONNX
    # Runtime, CPU only, fp32; 1.4-6x torch's positions/s on one thread, self-play 1.6-3.2x, docs/RESULTS.md),
    # ``openvino`` (OpenVINO Runtime, CPU only; fp32, or bf16 on a CPU that computes it natively: its ``auto``
    # precision; on AMD Zen 5 self-play 1.34x ONNX Runtime's) or ``auto``: on the CPU openvino where the CPU
    # computes bf16 natively (in bf16), onnx elsewhere (on an AVX2 Zen 3 1.16x OpenVINO's fp32), torch for what
    # only torch runs; torch on CUDA.
    backend: str = "auto"
    # How the torch backend runs the network on its device (alphazero.nets.inference.InferenceSettings):
    # ``precision`` fp32, fp16 or bf16 (autocast), ``channels_last`` true or false (the conv tower's memory
    # format), ``pin_memory`` true or false (planes and outputs pass through reused page-locked host buffers,
    # copied with non_blocking; on the cpu the buffers cannot be pinned and the same staging runs unpinned).
    # ``auto``: on CUDA fp16, channels-last and pinned (measured on an H200: docs/RESULTS.md "GPU self-play,
    # measured"); on the CPU contiguous, no staging, and fp32 (torch, onnx) or the CPU's native precision
    # (openvino: bf16 where it computes bf16 natively). ``int8``: ONNX Runtime's static int8, calibrated on the
    # latest 512 positions the evaluator was asked about (each new self-play network on its own games' latest
    # positions); on an AMD Zen 5 (VNNI) self-play 1.42x OpenVINO bf16 with a trained 3x32, the same network -19
    # Elo [-48, +9] against its bf16 self, 50 minutes of training +81 [+22, +146] over bf16's (docs/RESULTS.md
    # "int8 self-play"); on a Zen 4 (VNNI) self-play 1.31x bf16 (docs/RESULTS.md "int8 self-play on a Zen 4").
    # Slower than fp32 without VNNI. So self-play's ``auto`` is int8 on a CPU with VNNI (``avx512_vnni``,
    # ``avx_vnni`` or AMX) when backend is auto or onnx; players (``mcts:`` specs, the UCI engine, arenas) keep
    # auto's float precision, the one their figures were measured at (``precision=int8`` asks for it).
    precision: str = "auto"
    channels_last: bool | str = "auto"
    pin_memory: bool | str = "auto"

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "torch", "onnx", "openvino"):
            raise ValueError(f"search.backend must be auto, torch, onnx or openvino, got {self.backend!r}")
        if self.precision not in ("auto", "fp32", "fp16", "bf16", "int8"):
            raise ValueError(f"search.precision must be auto, fp32, fp16, bf16 or int8, got {self.precision!r}")
        if self.precision == "int8" and (self.backend not in ("auto", "onnx") or self.channels_last is True
                                         or self.pin_memory is True):
            raise ValueError("search.precision int8 runs in the onnx backend (ONNX Runtime, CPU), contiguous and "
                             "unstaged: set search.backend to onnx or auto")
        for key in ("channels_last", "pin_memory"):
            if getattr(self, key) not in (True, False, "auto"):
                raise ValueError(f"search.{key} must be true, false or auto, got {getattr(self, key)!r}")
        if self.backend == "onnx" and (self.precision in ("fp16", "bf16") or self.channels_last is True):
            raise ValueError("search.precision fp16/bf16 and search.channels_last run in the torch backend; "
                             "set search.backend to torch or auto")
        if self.backend == "openvino" and (self.precision == "fp16" or self.channels_last is True
                                           or self.pin_memory is True):
            raise ValueError("search.backend openvino runs fp32 or bf16, contiguous and unstaged: "
                             "search.precision fp16, channels_last and pin_memory run in the torch backend")
        if self.implementation not in ("auto", "compiled", "python"):
            raise ValueError(f"search.implementation must be auto, compiled or python, got {self.implementation!r}")
        if self.algorithm not in ("puct", "gumbel"):
            raise ValueError(f"search.algorithm must be puct or gumbel, got {self.algorithm!r}")
        if self.gumbel_considered < 1:
            raise ValueError("search.gumbel_considered must be >= 1")
        if self.gumbel_c_visit < 0 or self.gumbel_c_scale <= 0:
            raise ValueError("search.gumbel_c_visit must be >= 0 and search.gumbel_c_scale > 0")
        if self.num_simulations < 1:
            raise ValueError("search.num_simulations must be >= 1")
        if self.leaves_per_game < 1:
            raise ValueError("search.leaves_per_game must be >= 1")
        if self.c_puct <= 0:
            raise ValueError("search.c_puct must be > 0")
        if not self.policy_temperature > 0:
            raise ValueError(f"search.policy_temperature must be > 0, got {self.policy_temperature!r}")
        if not 0 <= self.dirichlet_epsilon <= 1:
            raise ValueError("search.dirichlet_epsilon must be in [0, 1]")
        if self.dirichlet_alpha <= 0:
            raise ValueError("search.dirichlet_alpha must be > 0")


@dataclass(frozen=True)
class SelfPlayConfig:
    """How self-play actors play their games."""

    games_per_worker: int = 48  # concurrent games in one actor: the network batch of its search
    temperature_plies: int = 30  # sample moves at temperature 1 for this many plies, then greedy
    max_plies: int = 200  # a game reaching this length is adjudicated a draw
    random_opening_plies: int = 2  # uniformly random first plies, not recorded, for variety
    games_per_call: int = 8  # an actor returns to the driver when this many games have finished
    # Playout cap randomisation (KataGo): this share of moves gets the full search and is recorded as
    # a training position; the others get ``fast_simulations``, no root noise, and are only played.
    full_search_fraction: float = 1.0
    fast_simulations: int = 8
    # Resignation: the side to move resigns when its root value stays below ``resign_threshold`` for
    # ``resign_moves`` of its own moves in a row (-1 disables); ``resign_playout_fraction`` of the
    # games never resign and measure how often a resignation would have been wrong.
    resign_threshold: float = -1.0
    resign_moves: int = 3
    resign_playout_fraction: float = 0.1


@dataclass(frozen=True)
class TrainConfig:
    """The learner: loss = (z - v)^2 + CE(pi, p) + weight_decay * |theta|^2 (L2 through SGD weight decay)."""

    batch_size: int = 256
    optimizer: str = "sgd"  # sgd (Nesterov momentum) or adamw
    # 0.05 led at 30 minutes (+60 head to head) and was level at 45 (-21); 0.01 lost at 30 (-67)
    # (docs/RESULTS.md "The learning rate at thirty and forty-five minutes"); 0.05 dropped to 0.02 at step 30,000
    # was level at two hours ("A learning-rate schedule for two hours").
    learning_rate: float = 0.02
    momentum: float = 0.9  # sgd only
    weight_decay: float = 1e-4
    lr_milestones: tuple[int, ...] = ()  # learning rate is multiplied by lr_gamma at these steps
    lr_gamma: float = 0.1
    # > 0: over the last this share of the run's wall time (max_minutes), the learning rate falls along a
    # half cosine to lr_anneal_floor times its value (a fixed-length run ends on weights trained at a small
    # step, as supervised schedules do); 0: no annealing. Needs max_minutes > 0.
    lr_anneal_fraction: float = 0.0
    lr_anneal_floor: float = 0.1
    # Sample uniformly from the newest this many positions (about 2.5 minutes of a Zen 5's self-play); 500,000 lost
    # the hour by -108 and gained nothing at two hours (docs/RESULTS.md "A window of 500,000 positions").
    window_positions: int = 150_000
    min_positions: int = 10_000  # no training before the window holds this many
    # Trained samples <= this x positions generated. 4 with q_weight 0.8 (docs/RESULTS.md "Training each position
    # more than once"): the passes teach the policy, the q-heavy target keeps them from teaching the value head
    # the window's results (at 6 with q_weight 0.5 it memorised them).
    max_sample_reuse: float = 4.0
    q_weight: float = 0.8  # value target = (1 - q_weight) * z + q_weight * root search value
    value_from_unfinished: bool = False  # false: games stopped at max_plies train the policy only
    # With network.material_head: loss += material_weight * (m - tanh(balance / 5))^2, the balance taken
    # material_horizon plies later in the game (alphazero.learn.replay.material_targets).
    material_weight: float = 1.0
    material_horizon: int = 8
    steps_per_call: int = 50  # steps per learner call (a save point)
    device: str = "auto"  # auto: cuda when present, else cpu
    # fp32, or bf16: forward and loss under torch.autocast to bfloat16 (weights, gradients and the optimizer
    # stay fp32; bf16 needs no loss scaling). On a CPU with AMX (amx_bf16) a step costs 0.4-0.5x fp32's
    # (docs/RESULTS.md "No gating and a bigger network for the hour"), on an AMD Zen 5 (avx512_bf16, no AMX)
    # 0.61x with channels-last (docs/RESULTS.md "OpenVINO in bf16"); on a CPU without bf16 arithmetic it is
    # emulated and does not pay. channels_last: the network's memory format in training (a further 0.8-0.9x
    # with bf16). auto (both): bf16 with channels-last on a CPU that computes bf16 natively
    # (alphazero.nets.inference.cpu_computes_bf16), fp32 and contiguous elsewhere (CUDA too: not measured).
    precision: str = "auto"
    channels_last: bool | str = "auto"
    # > 0: the arena's candidates are an exponential moving average of the learner's weights (and batch-norm
    # statistics), updated each step with this decay (0.99: about the last 100 steps); 0: the weights as trained
    ema_decay: float = 0.0
    # With network.soft_policy_head: loss += soft_policy_weight * CE(pi ** (1 / T) renormalised, soft policy),
    # T = soft_policy_temperature (KataGo: T 4, weight 8, which offsets the soft target's small gradients)
    soft_policy_weight: float = 8.0
    soft_policy_temperature: float = 4.0
    # With network.moves_left_head: loss += moves_left_weight * Huber(plies left / 20, head; delta 0.5), lc0's
    # moves-left loss, over positions of games that finished (a game stopped at max_plies has no end to count to)
    moves_left_weight: float = 1.0


@dataclass(frozen=True)
class ArenaConfig:
    """Gating: the candidate plays the best every ``steps_per_generation`` training steps."""

    steps_per_generation: int = 300
    # Played as pairs: each opening with both colours. 0: no gating (AlphaZero's continual update, as lc0 and
    # KataGo train): every steps_per_generation steps the learner's weights are promoted without games.
    games: int = 0
    threshold: float = 0.55  # promote when (wins + draws / 2) / games >= threshold
    num_simulations: int = 64
    random_opening_plies: int = 8  # without a book, openings are this many random plies
    opening_book: str = ""  # a polyglot .bin or an EPD/FEN file; empty: random plies
    max_plies: int = 300
    concurrency: int = 64  # games played at once (one search batch); fewer bounds the arena's memory
    # When max_minutes ends the run: self-play stops, the arena in progress ends, and the learner's weights
    # since the last candidate play one last arena (the run then takes that much longer than max_minutes).
    # Without it a timed run's last training (up to steps_per_generation steps; with
    # train.lr_anneal_fraction, the most annealed weights) never reaches an arena.
    final: bool = False


@dataclass(frozen=True)
class WorkersConfig:
    """Ray placement and sizes.

    ``*_gpus`` is the share of a GPU each actor asks Ray for: 0 (the default) runs it on the CPU, a fraction
    in (0, 1] shares one GPU (0.25: four actors on a GPU; Ray packs fractions onto one device), a whole
    number > 1 takes that many GPUs. An actor Ray gave a GPU runs its network on CUDA; one whose process
    sees no CUDA (a CPU build of torch, a logical GPU) falls back to the CPU with a warning in the run's
    events and on the console (``workers.actors.actor_device``).
    """

    num_selfplay_workers: int = 2
    cpus_per_selfplay_worker: float = 1.0
    torch_threads_per_worker: int = 1
    learner_cpus: float = 0.0  # 0: the learner shares the CPUs of the self-play actors
    arena_cpus: float = 0.0  # 0: the arena shares the CPUs of the others
    object_store_memory_mb: int = 256  # for the embedded local Ray
    selfplay_gpus: float = 0.0  # per self-play actor
    learner_gpus: float = 0.0  # the learner (on the driver's node); with train.device auto it trains on CUDA only given one
    arena_gpus: float = 0.0


GPU_KEYS = ("selfplay_gpus", "learner_gpus", "arena_gpus")


def gpu_share_error(key: str, value: float) -> str | None:
    """Why ``value`` is not a GPU share Ray can place (``workers.KEY``), or None: a fraction in [0, 1] in
    steps of 0.0001 (Ray's resolution), or a whole number of GPUs."""
    if not math.isfinite(value) or value < 0:
        return f"workers.{key} must be a number >= 0 (0: the CPU), got {value!r}"
    if value > 1 and not value.is_integer():
        return (f"workers.{key} must be a fraction of one GPU (at most 1) or a whole number of GPUs, got {value!r}; "
                "Ray cannot split an actor over GPUs")
    if abs(value * 10_000 - round(value * 10_000)) > 1e-6:
        return f"workers.{key} has more than 4 decimal places ({value!r}); Ray places GPU shares in steps of 0.0001"
    return None


@dataclass(frozen=True)
class RunConfig:
    seed: int = 0
    max_generations: int = 0  # stop after this many arena decisions; 0 = no limit
    max_minutes: float = 60.0  # stop after this wall time; 0 = no limit
    network: NetworkConfig = field(default_factory=NetworkConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    arena: ArenaConfig = field(default_factory=ArenaConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)


def _coerce(value: Any, annotation: Any, key: str) -> Any:
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _build(annotation, value, key)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        inner = typing.get_args(annotation)[0]
        return tuple(_coerce(item, inner, f"{key}[{i}]") for i, item in enumerate(value))
    if isinstance(annotation, types.UnionType) and set(typing.get_args(annotation)) == {bool, str}:
        if not isinstance(value, (bool, str)):
            raise ConfigError(f"{key}: expected true, false or a word, got {value!r}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {annotation!r}")


def _build(cls: type, values: Any, prefix: str) -> Any:
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in values.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if key in KEYS_RENAMED.get(prefix, {}):
            raise ConfigError(f"config key {full!r} is now {prefix}.{KEYS_RENAMED[prefix][key]}")
        if key not in names:
            raise ConfigError(f"unknown config key {full!r} (known in {prefix or 'top level'}: {', '.join(names)})")
        kwargs[key] = _coerce(value, hints[key], full)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except ValueError as error:
        raise ConfigError(f"{prefix or 'config'}: {error}") from None


def config_from_dict(data: Mapping[str, Any]) -> RunConfig:
    """Build and validate a ``RunConfig`` from nested mappings."""
    config = _build(RunConfig, data, "")
    _validate(config)
    return config


def config_to_dict(config: Any) -> dict[str, Any]:
    """Nested plain dict of a config (tuples become lists), as written to ``config.yaml``."""
    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    return plain(dataclasses.asdict(config))


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings (values parsed as YAML) to nested dict ``data`` in place."""
    for override in overrides:
        if "=" not in override:
            raise ConfigError(f"override {override!r} is not of the form section.key=value")
        dotted, raw = override.split("=", 1)
        parts = [part for part in dotted.strip().split(".") if part]
        if not parts:
            raise ConfigError(f"override {override!r} names no key")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {override!r}: {part!r} is not a section")
            node = child
        node[parts[-1]] = value
    return data


def load_config(path: str | os.PathLike | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Read YAML ``path`` (or defaults when ``None``), apply ``overrides``, validate."""
    data: Any = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            data = yaml.safe_load(read_text(path, "config file")) or {}
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path} is not valid YAML: {error}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: expected a mapping at the top level")
    return config_from_dict(apply_overrides(data, overrides))


def _validate(config: RunConfig) -> None:
    checks = [
        (config.selfplay.games_per_worker >= 1, "selfplay.games_per_worker must be >= 1"),
        (config.selfplay.games_per_call >= 1, "selfplay.games_per_call must be >= 1"),
        (config.selfplay.max_plies >= 1, "selfplay.max_plies must be >= 1"),
        (0 < config.selfplay.full_search_fraction <= 1, "selfplay.full_search_fraction must be in (0, 1]"),
        (config.selfplay.fast_simulations >= 1, "selfplay.fast_simulations must be >= 1"),
        (-1 <= config.selfplay.resign_threshold <= 1, "selfplay.resign_threshold must be in [-1, 1] (-1: never resign)"),
        (config.selfplay.resign_moves >= 1, "selfplay.resign_moves must be >= 1"),
        (0 <= config.selfplay.resign_playout_fraction <= 1, "selfplay.resign_playout_fraction must be in [0, 1]"),
        (config.train.batch_size >= 1, "train.batch_size must be >= 1"),
        (config.train.learning_rate > 0, "train.learning_rate must be > 0"),
        (config.train.window_positions >= config.train.batch_size, "train.window_positions must be >= train.batch_size"),
        (config.train.min_positions >= 1, "train.min_positions must be >= 1"),
        (config.train.max_sample_reuse > 0, "train.max_sample_reuse must be > 0"),
        (0 <= config.train.q_weight <= 1, "train.q_weight must be in [0, 1]"),
        (config.train.material_weight >= 0 and config.train.material_horizon >= 0,
         "train.material_weight and train.material_horizon must be >= 0"),
        (0 <= config.network.material_utility <= 1, "network.material_utility must be in [0, 1]"),
        (config.network.material_utility == 0 or config.network.material_head,
         "network.material_utility needs network.material_head: true"),
        (0 <= config.network.moves_left_utility <= 1, "network.moves_left_utility must be in [0, 1]"),
        (config.network.moves_left_utility == 0 or config.network.moves_left_head,
         "network.moves_left_utility needs network.moves_left_head: true"),
        (config.train.moves_left_weight >= 0, "train.moves_left_weight must be >= 0"),
        (config.network.policy_kernel in (1, 3), "network.policy_kernel must be 1 or 3 (the policy head's first convolution)"),
        (0 <= config.network.se_ratio <= config.network.channels,
         "network.se_ratio must be in [0, network.channels] (0: no squeeze-excitation)"),
        (config.train.steps_per_call >= 1, "train.steps_per_call must be >= 1"),
        (0 <= config.train.ema_decay < 1, "train.ema_decay must be in [0, 1) (0: no average)"),
        (config.train.soft_policy_weight >= 0 and config.train.soft_policy_temperature >= 1,
         "train.soft_policy_weight must be >= 0 and train.soft_policy_temperature >= 1"),
        (config.train.device in ("auto", "cpu", "cuda"), "train.device must be auto, cpu or cuda"),
        (config.train.precision in ("auto", "fp32", "bf16"), "train.precision must be auto, fp32 or bf16"),
        (config.train.channels_last in (True, False, "auto"), "train.channels_last must be true, false or auto"),
        (config.train.optimizer in ("sgd", "adamw"), "train.optimizer must be sgd or adamw"),
        (list(config.train.lr_milestones) == sorted(config.train.lr_milestones), "train.lr_milestones must be increasing"),
        (0 <= config.train.lr_anneal_fraction <= 1 and 0 <= config.train.lr_anneal_floor <= 1,
         "train.lr_anneal_fraction and train.lr_anneal_floor must be in [0, 1]"),
        (config.train.lr_anneal_fraction == 0 or config.max_minutes > 0,
         "train.lr_anneal_fraction anneals over the run's wall time: it needs max_minutes > 0"),
        (not config.arena.final or config.max_minutes > 0,
         "arena.final plays a last arena when max_minutes ends the run: it needs max_minutes > 0"),
        (config.arena.games >= 0 and config.arena.games % 2 == 0,
         "arena.games must be an even number >= 2, or 0 for no gating"),
        (0 < config.arena.threshold <= 1, "arena.threshold must be in (0, 1]"),
        (config.arena.steps_per_generation >= 1, "arena.steps_per_generation must be >= 1"),
        (config.arena.num_simulations >= 1, "arena.num_simulations must be >= 1"),
        (config.arena.concurrency >= 1, "arena.concurrency must be >= 1"),
        (config.workers.num_selfplay_workers >= 1, "workers.num_selfplay_workers must be >= 1"),
        (config.workers.torch_threads_per_worker >= 1, "workers.torch_threads_per_worker must be >= 1"),
        (config.network.blocks >= 0 and config.network.channels >= 1, "network.blocks >= 0 and network.channels >= 1"),
        (config.max_generations >= 0, "max_generations must be >= 0"),
        (config.max_minutes >= 0, "max_minutes must be >= 0"),
        (config.selfplay.temperature_plies >= 0, "selfplay.temperature_plies must be >= 0"),
        (config.selfplay.random_opening_plies >= 0, "selfplay.random_opening_plies must be >= 0"),
        (config.arena.random_opening_plies >= 0, "arena.random_opening_plies must be >= 0"),
        (config.network.value_channels >= 1 and config.network.policy_channels >= 1 and config.network.value_hidden >= 1,
         "network.value_channels, network.policy_channels and network.value_hidden must be >= 1"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    for key in GPU_KEYS:
        error = gpu_share_error(key, getattr(config.workers, key))
        if error:
            raise ConfigError(error)
