"""The NNUE trainer: ``alphazero nnue train``, resumable, with held-out losses, metrics and a plot.

Owns the training loop of an NNUE (``alphazero.nets.nnue``) on cached feature rows
(``alphazero.learn.nnue_data``) and the training directory beside the network it writes. Knows nothing
of search or Ray; the network file itself is ``alphazero.nets.nnue_file``'s.

Files, for ``--out DIR/NAME.EXT``:

- ``DIR/NAME.EXT``: the trained net (``save_nnue``), written once training ends; its meta's
  ``training`` records the options, the data, the final losses and the net's unit against PeSTO's
  (``pesto_slope``, ``alphazero.learn.nnue_scale``). With ``init`` and zero epochs it is that net as it
  was, measured on the data (its held-out loss and unit there).
- ``DIR/NAME.train/state.pt``: model, optimizer and history after the last finished epoch, written
  atomically every epoch (``torch.save``; read back with ``weights_only=True``). Running the same command
  again resumes from it; a larger ``--epochs`` continues a finished run; other options are refused
  (``--restart`` starts over).
- ``DIR/NAME.train/metrics.jsonl``: one record per epoch (epoch 0: the untrained net), rewritten
  atomically from the state; ``DIR/NAME.train/losses.png``: train and held-out loss by epoch.
- ``DIR/nnue-cache/`` (``--cache-dir``): the data's feature rows, reused by any later run.

Optimisation as bullet and nnue-pytorch do it: AdamW (beta 0.9 / 0.999, weight decay 0.01), learning
rate ``lr * lr_decay ** (epoch - 1)``, every weight clipped to +-1.98 after each step (so the
quantised file stays in range), mini-batches of a seeded permutation per epoch. Deterministic under
``seed`` for a given number of threads: the net's initialisation comes from ``torch.manual_seed(seed)``,
epoch e's order from ``numpy.random.default_rng([seed, e])``, so a resumed run equals an uninterrupted
one. The held-out split (by game for PGN and replay, by blocks of consecutive rows for a CSV or bullet
text: ``nnue_data.row_blocks``) is seeded the same way.

Losses (``--loss``): ``sigmoid-mse`` (default; bullet's, against ``wdl_lambda * sigmoid(cp / 400) +
(1 - wdl_lambda) * (result + 1) / 2``; positions without a result use the score, positions without a
score the result; default lambda 1.0: a labelled CSV has no results), ``score`` (the thesis's target-score
loss; needs scores) and ``pqr`` (the thesis's PQR loss over (parent, observed child, random child)
triples; from scratch, or fine-tuning a score-trained net with ``--init NET``).
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from alphazero.errors import InputError
from alphazero.fileio import atomic_write, atomic_write_text, output_file
from alphazero.learn.nnue_data import Dataset, FeatureRows, PQRData, load_data
from alphazero.learn.nnue_scale import pesto_slope
from alphazero.learn.positions import split_held_out
from alphazero.nets.network import safe_torch_load
from alphazero.nets.nnue import FT_INIT_BOUND, SCALE, NNUEConfig, NNUENet, pqr_loss, sigmoid_mse_loss, target_score_loss
from alphazero.nets.nnue_file import output_buckets

STATE_FORMAT_VERSION = 1
LOSSES = ("sigmoid-mse", "score", "pqr")
DEFAULT_FEATURES = "all"
DEFAULT_ARCH = "perspective"
DEFAULT_L1 = 128  # measured: 128 beats 256 at 0.7-1.5M labels (docs/RESULTS.md)
DEFAULT_L2 = 32
DEFAULT_ACTIVATION = "crelu"
DEFAULT_BUCKETS = 1
DEFAULT_BATCH_SIZE = 4096
PROGRESS_SECONDS = 10.0

Log = Callable[[str], None]


@dataclass(frozen=True)
class TrainOptions:
    """What ``alphazero nnue train`` was asked. The net's shape (``features`` .. ``buckets``) may be
    None: the defaults above, or with ``init`` the shape of the net it starts from."""

    data: tuple[str, ...]
    out: str
    features: str | None = None
    arch: str | None = None
    l1: int | None = None
    l2: int | None = None
    activation: str | None = None
    buckets: int | None = None
    loss: str = "sigmoid-mse"
    wdl_lambda: float = 1.0
    lr: float = 1e-3
    lr_decay: float = 0.95
    weight_decay: float = 0.01
    batch_size: int = DEFAULT_BATCH_SIZE
    epochs: int = 10
    held_out: float = 0.1
    threads: int = 1
    seed: int = 0
    init: str | None = None
    cache_dir: str | None = None
    restart: bool = False
    keep_noisy: bool = False  # false: train on quiet positions only (nnue_data.is_noisy), as nnue-pytorch does
    mirror: bool = False  # add each position without castling rights flipped left-right (nnue_data)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _check_numbers(options: TrainOptions) -> None:
    problems = []
    if options.loss not in LOSSES:
        problems.append(f"--loss {options.loss!r}: expected one of {', '.join(LOSSES)}")
    if options.epochs < (0 if options.init else 1):
        problems.append(f"--epochs must be at least {0 if options.init else 1}"
                        f"{' (0 with --init: that net as it is, measured on --data)' if options.init else ''}, "
                        f"got {options.epochs}")
    if options.batch_size < 1:
        problems.append(f"--batch-size must be at least 1, got {options.batch_size}")
    if options.threads < 1:
        problems.append(f"--threads must be at least 1, got {options.threads}")
    if not (options.lr > 0 and math.isfinite(options.lr)):
        problems.append(f"--lr must be positive, got {options.lr}")
    if not 0 < options.lr_decay <= 1:
        problems.append(f"--lr-decay must be in (0, 1], got {options.lr_decay}")
    if not 0 <= options.wdl_lambda <= 1:
        problems.append(f"--wdl-lambda must be in [0, 1], got {options.wdl_lambda}")
    if not 0 <= options.held_out < 1:
        problems.append(f"--held-out must be in [0, 1), got {options.held_out}")
    if not options.data:
        problems.append("--data: give at least one data file")
    if problems:
        raise InputError("; ".join(problems))
    # Before the data is read and trained on: the net, its training state and the cache have somewhere to go.
    output_file(options.out, "--out")
    output_file(train_dir(options.out) / "state.pt", "--out's training state")
    if options.cache_dir is not None and Path(options.cache_dir).exists() and not Path(options.cache_dir).is_dir():
        raise InputError(f"--cache-dir {options.cache_dir} is not a directory")


def resolve_config(options: TrainOptions) -> tuple[NNUEConfig, dict[str, np.ndarray] | None]:
    """The net's shape from the options (and ``--init``'s file), and the initial arrays (None: random)."""
    from alphazero.nets.features import parse_features
    from alphazero.nets.nnue_file import load_nnue

    wanted: dict[str, Any] = {"features": options.features, "arch": options.arch, "l1": options.l1, "l2": options.l2,
              "activation": options.activation, "buckets": options.buckets}
    init_arrays = None
    if options.init is not None:
        nnue = load_nnue(options.init)
        held: dict[str, Any] = {"features": nnue.features.spec, "arch": nnue.arch, "l1": nnue.l1, "l2": nnue.l2 or DEFAULT_L2,
                "activation": nnue.activation, "buckets": nnue.buckets}
        if wanted["features"] is not None:
            wanted["features"] = parse_features(str(wanted["features"])).spec
        # A wider --l1 grows the net (``widen``), and so does a feature set that adds blocks after the
        # net's own (``all`` -> ``all+kb``: ``add_features``); every other difference is a clash.
        grows = wanted["l1"] is not None and wanted["l1"] > held["l1"]
        extends = wanted["features"] is not None and str(wanted["features"]).startswith(held["features"] + "+")
        clashes = [f"--{key} {value} (the net has {held[key]})" for key, value in wanted.items()
                   if value is not None and value != held[key] and not (key == "l2" and nnue.arch != "layered")
                   and not (key == "l1" and grows) and not (key == "features" and extends)]
        if clashes:
            raise InputError(f"--init {options.init}: {', '.join(clashes)}; leave them out to fine-tune the net as it "
                             f"is (--l1 may only grow it, --features only add blocks after its own)")
        init_arrays = nnue.arrays
        if grows:
            init_arrays = widen(init_arrays, nnue.arch, int(wanted["l1"]), options.seed)
            held["l1"] = wanted["l1"]
        if extends:
            init_arrays = add_features(init_arrays, parse_features(str(wanted["features"])).size)
            held["features"] = wanted["features"]
        wanted = dict(held)
    defaults: dict[str, Any] = {"features": DEFAULT_FEATURES, "arch": DEFAULT_ARCH, "l1": DEFAULT_L1, "l2": DEFAULT_L2,
                "activation": DEFAULT_ACTIVATION, "buckets": DEFAULT_BUCKETS}
    shape = {key: defaults[key] if value is None else value for key, value in wanted.items()}
    feature_set = parse_features(str(shape["features"]))
    try:
        config = NNUEConfig(features=feature_set.spec, num_features=feature_set.size, arch=str(shape["arch"]),
                            l1=int(shape["l1"]), l2=int(shape["l2"]), activation=str(shape["activation"]),
                            buckets=int(shape["buckets"]))
    except ValueError as error:
        raise InputError(str(error)) from None
    return config, init_arrays


# ---- batches and losses -----------------------------------------------------------------------


def _csr(index: np.ndarray, offsets: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(index.astype(np.int64)), torch.from_numpy(offsets.astype(np.int64, copy=False))


def logits(net: NNUENet, rows: FeatureRows) -> torch.Tensor:
    """The net's output ``y`` [P] for feature rows (each position from its own side to move)."""
    stm = _csr(rows.stm_index, rows.stm_offsets)
    nstm = _csr(rows.nstm_index, rows.nstm_offsets) if net.config.arch != "simple" else (None, None)
    bucket = None
    if net.config.buckets > 1:
        bucket = torch.from_numpy(output_buckets(rows.pieces, net.config.buckets))
    return net(*stm, *nstm, bucket=bucket)


@torch.no_grad()
def net_centipawns(net: NNUENet, rows: FeatureRows, batch_size: int = 16384) -> np.ndarray:
    """The float net's centipawns for the side to move [P] (float64)."""
    net.eval()
    parts = [logits(net, rows.take(np.arange(start, min(start + batch_size, rows.num_positions)))).numpy()
             for start in range(0, rows.num_positions, batch_size)]
    return np.concatenate(parts).astype(np.float64) * SCALE if parts else np.zeros(0)


def batch_loss(net: NNUENet, batch: Dataset, loss: str, wdl_lambda: float) -> torch.Tensor:
    """The mean loss of one batch (module docstring)."""
    if isinstance(batch, PQRData):
        n = batch.num_positions
        y = logits(net, FeatureRows.concat([batch.p, batch.q, batch.r])) * SCALE  # one call for P, Q and R
        return pqr_loss(y[:n], y[n:2 * n], y[2 * n:])
    y = logits(net, batch.features)
    score = torch.from_numpy(batch.score_cp)
    if loss == "score":
        return target_score_loss(y * SCALE, score)
    return sigmoid_mse_loss(y, score, torch.from_numpy(batch.result), wdl_lambda)


@torch.no_grad()
def evaluate(net: NNUENet, data: Dataset, loss: str, wdl_lambda: float, batch_size: int = 8192) -> dict[str, float]:
    """Mean loss over ``data`` (and, for PQR triples, the share with f(R) > f(Q) and the mean |p + q|)."""
    net.eval()
    total = order = balance = 0.0
    for start in range(0, data.num_positions, batch_size):
        rows = np.arange(start, min(start + batch_size, data.num_positions))
        batch = data.subset(rows)
        if isinstance(batch, PQRData):
            y = logits(net, FeatureRows.concat([batch.p, batch.q, batch.r])) * SCALE
            f_p, f_q, f_r = torch.chunk(y, 3)
            total += float(pqr_loss(f_p, f_q, f_r)) * len(rows)
            p, q, r = (2.0 * torch.sigmoid(part / SCALE) - 1.0 for part in (f_p, f_q, f_r))
            order += float((r > q).sum())
            balance += float((p + q).abs().sum())
        else:
            total += float(batch_loss(net, batch, loss, wdl_lambda)) * len(rows)
    count = max(data.num_positions, 1)
    metrics = {"loss": total / count}
    if isinstance(data, PQRData):
        metrics.update(r_above_q=order / count, mean_abs_p_plus_q=balance / count)
    return metrics


def keep_trainable(data: Dataset, loss: str, keep_noisy: bool = True) -> tuple[Dataset, dict[str, int]]:
    """The positions that have a target under ``loss`` (all PQR triples), without the noisy ones
    (in check, or a capture or promotion to follow) unless ``keep_noisy``: the evaluation scores
    the quiet leaves of a quiescence search, and a noisy position's score is about its tactic.
    Also how many were dropped, by reason: ``without a target`` and ``noisy`` (noisy ones with a target)."""
    if isinstance(data, PQRData):
        return data, {}
    has_score = ~np.isnan(data.score_cp)
    has_target = has_score if loss == "score" else has_score | ~np.isnan(data.result)
    keep = has_target if keep_noisy else has_target & ~data.noisy
    dropped = {"without a target": int((~has_target).sum()), "noisy": int((has_target & ~keep).sum())}
    return (data if keep.all() else data.subset(np.flatnonzero(keep))), dropped


def widen(arrays: dict[str, np.ndarray], arch: str, l1: int, seed: int) -> dict[str, np.ndarray]:
    """The same net with an accumulator ``l1`` wide, computing the same function (Net2Net's "wider", Chen et
    al. 2016, in its simplest form): the new accumulator units get the fresh net's random input weights and
    zero bias, and every weight that reads them (the output layer's, or the layered net's second layer's) is
    zero, so they start silent and learn from the first step (their outgoing weights' gradient is their
    activation). Lets a net that has learned at one width keep it and grow when its data does."""
    old = arrays["ft_weight"].shape[1]
    if l1 <= old:
        raise ValueError(f"widen: {l1} is not wider than {old}")
    generator = torch.Generator().manual_seed(seed)
    fresh = (torch.rand(arrays["ft_weight"].shape[0], l1 - old, generator=generator) * 2 - 1) * FT_INIT_BOUND
    grown = dict(arrays)
    grown["ft_weight"] = np.concatenate([arrays["ft_weight"], fresh.numpy().astype(np.float32)], axis=1)
    grown["ft_bias"] = np.concatenate([arrays["ft_bias"], np.zeros(l1 - old, np.float32)])
    reader = "l2_weight" if arch == "layered" else "out_weight"
    weight = np.asarray(arrays[reader], dtype=np.float32)
    halves = 1 if arch == "simple" else 2  # the perspective nets read [stm L1, other side's L1]
    parts = np.split(weight, halves, axis=-1)
    pad = [(0, 0)] * (weight.ndim - 1) + [(0, l1 - old)]
    grown[reader] = np.concatenate([np.pad(part, pad) for part in parts], axis=-1)
    return grown


def add_features(arrays: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """The same net reading ``size`` input features, the first ones its own: the new features' rows of the
    feature transformer are zero, so the net starts as the same function and each new row learns from the
    first step (a row's gradient does not depend on its value). Lets a net grow king buckets (``all`` ->
    ``all+kb``, the ``all`` block then their shared part) without losing what it learned."""
    old = arrays["ft_weight"].shape[0]
    if size <= old:
        raise ValueError(f"add_features: {size} features is not more than {old}")
    grown = dict(arrays)
    grown["ft_weight"] = np.concatenate([arrays["ft_weight"], np.zeros((size - old, arrays["ft_weight"].shape[1]),
                                                                        np.float32)])
    return grown


class Trainer:
    """A net, its optimizer and the epoch loop over a training set (module docstring)."""

    def __init__(self, config: NNUEConfig, options: TrainOptions, init_arrays: dict[str, np.ndarray] | None = None) -> None:
        self.config = config
        self.options = options
        torch.manual_seed(options.seed)
        self.net = NNUENet.from_arrays(init_arrays, config) if init_arrays is not None else NNUENet(config)
        self.optimizer = torch.optim.AdamW(self.net.parameters(), lr=options.lr, betas=(0.9, 0.999),
                                           weight_decay=options.weight_decay)
        self.epoch = 0
        self.history: list[dict[str, Any]] = []

    def learning_rate(self, epoch: int) -> float:
        return self.options.lr * self.options.lr_decay ** (epoch - 1)

    def step(self, batch: Dataset) -> float:
        """One optimizer step on ``batch``; returns its loss."""
        self.net.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = batch_loss(self.net, batch, self.options.loss, self.options.wdl_lambda)
        loss.backward()
        self.optimizer.step()
        self.net.clip_weights()
        return float(loss.detach())

    def train_epoch(self, data: Dataset, log: Log | None = None) -> dict[str, float]:
        """One pass over ``data`` in a seeded order; the next epoch's number, mean loss, speed."""
        epoch = self.epoch + 1
        lr = self.learning_rate(epoch)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        order = np.random.default_rng([self.options.seed, epoch]).permutation(data.num_positions)
        batch_size = min(self.options.batch_size, data.num_positions)
        started = last_report = time.perf_counter()
        total = 0.0
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            total += self.step(data.subset(rows)) * len(rows)
            now = time.perf_counter()
            if log is not None and now - last_report >= PROGRESS_SECONDS:
                done = start + len(rows)
                log(f"  epoch {epoch}: {done}/{len(order)} ({100 * done / len(order):.0f}%), loss {total / done:.5f}, "
                    f"{done / (now - started):.0f} pos/s")
                last_report = now
        seconds = time.perf_counter() - started
        self.epoch = epoch
        return {"train_loss": total / max(len(order), 1), "lr": lr, "seconds": seconds,
                "positions_per_s": len(order) / seconds if seconds > 0 else 0.0}

    def state_dict(self, training: dict[str, Any]) -> dict[str, Any]:
        return {"format_version": STATE_FORMAT_VERSION, "training": training, "epoch": self.epoch,
                "net": self.net.state_dict(), "optimizer": self.optimizer.state_dict(), "history": self.history}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = int(state["epoch"])
        self.history = list(state["history"])


# ---- files --------------------------------------------------------------------------------------


def train_dir(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.parent / f"{out.stem}.train"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    return value


def write_state(path: Path, state: dict[str, Any]) -> None:
    def write(handle: Any) -> None:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        handle.write(buffer.getvalue())

    atomic_write(path, write)


def read_state(path: Path) -> dict[str, Any]:
    try:
        state = safe_torch_load(path)
    except InputError as error:  # a torn or foreign file: say which and how to go on
        raise InputError(f"{error}; remove it or pass --restart") from None
    if not isinstance(state, dict) or state.get("format_version") != STATE_FORMAT_VERSION:
        raise InputError(f"{path}: not a training state of format {STATE_FORMAT_VERSION}; remove it or pass --restart")
    return state


def plot_losses(history: list[dict[str, Any]], path: Path, title: str) -> None:
    """Train and held-out loss by epoch (PNG, atomic)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(figsize=(7, 4.2))
    trained = [record for record in history if record.get("train_loss") is not None]
    if trained:
        axes.plot([r["epoch"] for r in trained], [r["train_loss"] for r in trained], "o-", label="train")
    held = [record for record in history if record.get("held_out_loss") is not None]
    if held:
        axes.plot([r["epoch"] for r in held], [r["held_out_loss"] for r in held], "s-", label="held out")
    axes.set_xlabel("epoch")
    axes.set_ylabel("loss")
    axes.set_title(title, fontsize="medium")
    axes.grid(alpha=0.3)
    axes.legend()
    fig.tight_layout()
    try:
        atomic_write(path, lambda handle: fig.savefig(handle, dpi=100, format="png"))
    finally:
        plt.close(fig)


def _training_record(options: TrainOptions, config: NNUEConfig, sources: list[dict[str, Any]]) -> dict[str, Any]:
    """What a resumed run must agree on: everything that changes the result except ``epochs``."""
    keep = ("loss", "wdl_lambda", "lr", "lr_decay", "weight_decay", "batch_size", "held_out", "seed", "init",
            "keep_noisy", "mirror")
    record = {key: value for key, value in asdict(options).items() if key in keep}
    record["net"] = config.as_dict()
    record["data"] = [s["key"] for s in sources]  # path, size, modification time (nnue_data.source_key)
    return record


def train_nnue(options: TrainOptions, log: Log | None = None) -> dict[str, Any]:
    """``alphazero nnue train``: train (or resume) and write ``options.out``; returns the summary.

    Every check that can fail on bad input (the feature spec, the numbers, ``--init``, every data line)
    runs before anything is written."""
    log = log or _stderr
    _check_numbers(options)
    config, init_arrays = resolve_config(options)
    from alphazero.nets.features import parse_features
    from alphazero.nets.nnue_file import save_nnue

    out = Path(options.out)
    directory = train_dir(out)
    cache_dir = Path(options.cache_dir) if options.cache_dir is not None else out.parent / "nnue-cache"
    what = "pqr" if options.loss == "pqr" else "positions"
    started = time.perf_counter()
    feature_set = parse_features(config.features)
    data, sources, write_caches = load_data(options.data, feature_set, cache_dir, what,
                                            options.seed, log, mirror=options.mirror)
    total = data.num_positions
    data, dropped = keep_trainable(data, options.loss, options.keep_noisy)
    log(f"nnue data: {data.num_positions} of {total} positions trainable"
        + ("" if options.keep_noisy else " (quiet positions only; --keep-noisy keeps the others)"))
    if data.num_positions == 0:
        raise InputError(f"{', '.join(options.data)}: no positions with a target for --loss {options.loss}"
                         + (" (it needs engine scores: a labelled CSV or a run's replay)" if options.loss == "score" else ""))
    train_data, held_data = split_held_out(data, options.held_out, options.seed)
    training = _training_record(options, config, sources)

    torch.set_num_threads(options.threads)
    trainer = Trainer(config, options, init_arrays)
    state_path = directory / "state.pt"
    if state_path.is_file() and not options.restart:
        state = read_state(state_path)
        if state["training"] != training:
            differ = sorted(key for key in set(training) | set(state["training"])
                            if training.get(key) != state["training"].get(key))
            raise InputError(f"{state_path}: a training run with other {', '.join(differ)}; pass --restart to start "
                             f"over, or another --out")
        if int(state["epoch"]) > options.epochs:
            raise InputError(f"{state_path}: already {state['epoch']} epochs, more than --epochs {options.epochs}; "
                             "pass --restart to start over")
        trainer.load_state_dict(state)
        log(f"nnue train: resuming {directory} after epoch {trainer.epoch}")
    kind = "triples" if what == "pqr" else "positions"
    log(f"nnue train: {config.describe()}, {config.arch}; {total} {kind} ({data.kind}), {train_data.num_positions} train, "
        f"{held_data.num_positions if held_data else 0} held out"
        + "".join(f", {count} {reason} dropped" for reason, count in dropped.items() if count)
        + f"; loss {options.loss}, batch {min(options.batch_size, train_data.num_positions)}, {options.threads} thread(s)")
    check = held_data if held_data is not None else train_data
    label = "held-out" if held_data is not None else "train"
    if not trainer.history:
        initial = evaluate(trainer.net, check, options.loss, options.wdl_lambda)
        trainer.history.append(_rounded({"epoch": 0, "train_loss": None, "held_out_loss": initial["loss"],
                                         **{f"held_out_{k}": v for k, v in initial.items() if k != "loss"}}))
        log(f"epoch 0/{options.epochs}  {label} loss {initial['loss']:.5f}")
    write_caches()  # every check passed: from here on files are written
    directory.mkdir(parents=True, exist_ok=True)
    while trainer.epoch < options.epochs:
        stats = trainer.train_epoch(train_data, log)
        held = evaluate(trainer.net, check, options.loss, options.wdl_lambda)
        record: dict[str, Any] = {"epoch": trainer.epoch, "train_loss": stats["train_loss"], "held_out_loss": held["loss"],
                  **{f"held_out_{k}": v for k, v in held.items() if k != "loss"},
                  "lr": stats["lr"], "seconds": stats["seconds"], "positions_per_s": stats["positions_per_s"]}
        if held_data is None:
            record["held_out_note"] = "nothing held out: held_out_loss is on the training set"
        trainer.history.append(_rounded(record))
        write_state(state_path, trainer.state_dict(training))
        atomic_write_text(directory / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in trainer.history))
        plot_losses(trainer.history, directory / "losses.png", f"{config.describe()}, {options.loss}")
        extra = f", R above Q {held['r_above_q']:.3f}" if "r_above_q" in held else ""
        log(f"epoch {trainer.epoch}/{options.epochs}  train loss {stats['train_loss']:.5f} | {label} loss "
            f"{held['loss']:.5f}{extra} | lr {stats['lr']:.2e} | {stats['positions_per_s']:.0f} pos/s {stats['seconds']:.1f} s")
    final = trainer.history[-1]
    unit = pesto_slope(check.p if isinstance(check, PQRData) else check.features, feature_set,
                       lambda part: net_centipawns(trainer.net, part))
    if unit is not None:
        unit = _rounded(unit)
        log(f"nnue train: the net reads {unit['slope']:.3f} times PeSTO's centipawns over {unit['positions']} {label} "
            "positions (pesto_slope)")
    meta = {**config.meta(), "training": {
        "data": [s["path"] for s in sources], "kind": data.kind, "positions": total,
        "train_positions": train_data.num_positions, "held_out_positions": held_data.num_positions if held_data else 0,
        "epochs": trainer.epoch, "loss": options.loss, "wdl_lambda": options.wdl_lambda, "lr": options.lr,
        "lr_decay": options.lr_decay, "batch_size": options.batch_size, "seed": options.seed, "init": options.init,
        "final_train_loss": final.get("train_loss"), "final_held_out_loss": final.get("held_out_loss"),
        "pesto_slope": unit}}
    save_nnue(out, trainer.net.to_arrays(), meta)
    return {"out": str(out), "train_dir": str(directory), "net": config.describe(), "arch": config.arch,
            "loss": options.loss, "data": [s["path"] for s in sources], "kind": data.kind, "positions": total,
            "train_positions": train_data.num_positions, "held_out_positions": held_data.num_positions if held_data else 0,
            "cached": all(s["cached"] for s in sources), "epochs": trainer.epoch,
            "initial": trainer.history[0], "final": final, "pesto_slope": unit,
            "seconds": round(time.perf_counter() - started, 2)}
