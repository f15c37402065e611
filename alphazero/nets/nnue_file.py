"""The NNUE file format, its quantisation, and the slow numpy reference evaluations.

Owns the on-disk NNUE (``save_nnue`` / ``load_nnue``), the float network it holds (``FloatNNUE``),
the integer network the search runs (``quantise`` -> ``QuantisedNNUE``) and one numpy evaluation of
each, the references that the trainer (float) and the compiled search (quantised) are checked
against. numpy only: no torch (the ``ab:`` player loads nets without it), no numba.

File: an ``.npz`` (whatever its name), written atomically and read with ``allow_pickle=False``.
Arrays, float32 (``F`` = the feature set's size):

=============== ============== ===========================================================
array           shape          arch
=============== ============== ===========================================================
``ft_weight``   [F, L1]        all: the feature transformer, accumulator = bias + rows
``ft_bias``     [L1]           all
``l2_weight``   [L2, 2 * L1]   layered only (side-to-move half of the inputs first)
``l2_bias``     [L2]           layered only
``out_weight``  [L1]           simple (the side to move's accumulator only)
                [2 * L1]       perspective (side-to-move half first)
                [L2]           layered
                [K, width]     with K > 1 output buckets: one row of the above per bucket
``out_bias``    [1]            all; [K] with K > 1 output buckets
``meta``        0-d unicode    JSON: {"kind": "nnue", "format_version": 1 (2 with buckets),
                               "features": spec, "arch", "l1", "l2", "activation", "scale",
                               "buckets" (K, default 1), "training": {...}}
=============== ============== ===========================================================

Output buckets (bullet's ``MaterialCount<K>``): the output layer has K rows, and a position uses row
``bucket = min((pieces - 2) // ceil(32 / K), K - 1)``, ``pieces`` the men on the board, kings
included (``output_bucket``). Eight buckets split a game into phases of four men each.

Perspectives: index lists come as (side to move, opponent), each sorted, as
``alphazero.nets.features`` makes them. The output y is a logit for the side to move:
centipawns = scale * y, win probability = sigmoid(y). Activations (on the accumulators and on L2):
crelu = clamp(x, 0, 1), screlu = clamp(x, 0, 1) ** 2.

Quantisation (bullet's scheme), QA = 255, QB = 256 (bullet's examples use 64; on our trained nets,
whose output weights are small, 256 cuts the mean error against the float net from 14 to 5 cp):
``ft_weight`` and ``ft_bias`` int16 round(x * QA); ``out_weight`` and ``l2_weight`` int16
round(x * QB); ``out_bias`` and ``l2_bias`` int32 round(x * QA * QB). The accumulator is int16 and wraps (adds and subtracts in any order give
the same row, so an incremental update equals a refresh bit for bit; a position whose true sum
leaves the int16 range would wrap, ``QuantisedNNUE.accumulator_bound`` says whether any can).
With a = clamp(acc, 0, QA) (int64 from here on):
crelu out = sum(a * ow) + ob; screlu out = sum(a * a * ow) // QA + ob;
layered: h2 = clamp(sum(a * w2) // QB + b2 // QB, 0, QA) (screlu: the sum of a * a * w2 is first
// QA, and h2 = clamp(...) ** 2 // QA), then out = sum(h2 * ow) + ob.
Centipawns = out * scale // (QA * QB), scale rounded to an integer. Every division floors (numpy's and numba's ``//``).
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from alphazero.errors import InputError
from alphazero.fileio import atomic_write
from alphazero.nets.features import FeatureSet, parse_features

NNUE_FORMAT_VERSION = 2  # 2: output buckets (a file without them is still written as version 1)
NNUE_KIND = "nnue"
QA = 255
QB = 256
ARCHS = ("simple", "perspective", "layered")
ACTIVATIONS = ("crelu", "screlu")
DEFAULT_SCALE = 400.0
_INT16 = 32767
_INT32 = 2**31 - 1
MAX_BUCKETS = 32  # one per number of men on the board is already more than any net uses


def output_bucket(pieces: int, buckets: int) -> int:
    """The output row of a position with ``pieces`` men (kings included) in a net of ``buckets`` rows."""
    return min(max(pieces - 2, 0) // ((32 + buckets - 1) // buckets), buckets - 1)


def output_buckets(pieces: np.ndarray, buckets: int) -> np.ndarray:
    """``output_bucket`` of many positions at once: int64 [P]."""
    pieces = np.asarray(pieces, np.int64)
    return np.minimum(np.maximum(pieces - 2, 0) // ((32 + buckets - 1) // buckets), buckets - 1)


def expected_shapes(arch: str, num_features: int, l1: int, l2: int, buckets: int = 1) -> dict[str, tuple[int, ...]]:
    """The array names and shapes a net of this shape holds (the table in the module docstring)."""
    shapes: dict[str, tuple[int, ...]] = {"ft_weight": (num_features, l1), "ft_bias": (l1,)}
    width = l1 if arch == "simple" else 2 * l1 if arch == "perspective" else l2
    if arch == "layered":
        shapes["l2_weight"] = (l2, 2 * l1)
        shapes["l2_bias"] = (l2,)
    shapes["out_weight"] = (width,) if buckets == 1 else (buckets, width)
    shapes["out_bias"] = (buckets,)
    return shapes


def _positive_int(meta: dict, key: str, where: str) -> int:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise InputError(f"{where}: meta {key!r} must be a positive integer, got {value!r}")
    return int(value)


def check_meta(meta: Any, where: str = "NNUE") -> dict:
    """A copy of ``meta`` with ``kind``, ``format_version``, the canonical ``features`` spec, ``l2``
    (0 unless layered) and ``scale`` filled in; ``InputError`` naming ``where`` and the key if wrong."""
    if not isinstance(meta, dict):
        raise InputError(f"{where}: meta must be a JSON object, got {type(meta).__name__}")
    meta = dict(meta)
    kind = meta.setdefault("kind", NNUE_KIND)
    if kind != NNUE_KIND:
        raise InputError(f"{where}: not an NNUE file (meta kind {kind!r}, expected {NNUE_KIND!r})")
    version = meta.setdefault("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"{where}: meta format_version must be a positive integer, got {version!r}")
    if version > NNUE_FORMAT_VERSION:
        raise InputError(f"{where}: NNUE format_version {version} is newer than this program reads "
                         f"({NNUE_FORMAT_VERSION}); update alphazero-chess")
    spec = meta.get("features")
    if not isinstance(spec, str):
        raise InputError(f"{where}: meta 'features' must be a feature-set spec string, got {spec!r}")
    meta["features"] = parse_features(spec).spec
    if meta.get("arch") not in ARCHS:
        raise InputError(f"{where}: meta 'arch' must be one of {', '.join(ARCHS)}, got {meta.get('arch')!r}")
    if meta.get("activation") not in ACTIVATIONS:
        raise InputError(f"{where}: meta 'activation' must be one of {', '.join(ACTIVATIONS)}, "
                         f"got {meta.get('activation')!r}")
    meta["l1"] = _positive_int(meta, "l1", where)
    if meta["arch"] == "layered":
        meta["l2"] = _positive_int(meta, "l2", where)
    else:
        meta["l2"] = 0
    meta.setdefault("buckets", 1)
    meta["buckets"] = _positive_int(meta, "buckets", where)
    if meta["buckets"] > MAX_BUCKETS:
        raise InputError(f"{where}: meta 'buckets' must be at most {MAX_BUCKETS}, got {meta['buckets']}")
    # A net with buckets is a version 2 file (an older program refuses it by its version, not by a shape).
    meta["format_version"] = max(version, 2) if meta["buckets"] > 1 else version
    scale = meta.setdefault("scale", DEFAULT_SCALE)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"{where}: meta 'scale' must be a positive number, got {scale!r}")
    training = meta.setdefault("training", {})
    if not isinstance(training, dict):
        raise InputError(f"{where}: meta 'training' must be a JSON object, got {type(training).__name__}")
    return meta


def _check_arrays(arrays: dict[str, np.ndarray], meta: dict, where: str) -> dict[str, np.ndarray]:
    """The arrays as float32, exactly the names and shapes ``meta`` asks for, all finite."""
    fs = parse_features(meta["features"])
    shapes = expected_shapes(meta["arch"], fs.size, meta["l1"], meta["l2"], meta["buckets"])
    missing = [name for name in shapes if name not in arrays]
    extra = [name for name in arrays if name not in shapes]
    if missing or extra:
        raise InputError(f"{where}: arch {meta['arch']!r} needs arrays {', '.join(shapes)}"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unexpected {', '.join(extra)}" if extra else ""))
    checked = {}
    for name, shape in shapes.items():
        array = np.asarray(arrays[name])
        if array.shape != shape:
            raise InputError(f"{where}: {name} has shape {list(array.shape)}, expected {list(shape)} "
                             f"(features {meta['features']!r}, arch {meta['arch']!r}, l1 {meta['l1']}, l2 {meta['l2']}, "
                             f"buckets {meta['buckets']})")
        if not np.issubdtype(array.dtype, np.floating) and not np.issubdtype(array.dtype, np.integer):
            raise InputError(f"{where}: {name} has dtype {array.dtype}, expected float32")
        array = np.ascontiguousarray(array, dtype=np.float32)
        if not np.isfinite(array).all():
            raise InputError(f"{where}: {name} holds a NaN or an infinity")
        checked[name] = array
    return checked


def _activate(x: np.ndarray, activation: str) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x if activation == "screlu" else x


class _Shape:
    """The network's shape, read from its header (``meta``), for both the float and the integer form."""

    meta: dict

    @property
    def arch(self) -> str:
        return str(self.meta["arch"])

    @property
    def activation(self) -> str:
        return str(self.meta["activation"])

    @property
    def l1(self) -> int:
        return int(self.meta["l1"])

    @property
    def l2(self) -> int:
        return int(self.meta["l2"])

    @property
    def scale(self) -> float:
        return float(self.meta["scale"])

    @property
    def buckets(self) -> int:
        return int(self.meta["buckets"])

    def bucket(self, pieces: int | None) -> int:
        """The output row for a position of ``pieces`` men; ``pieces`` may be None only without buckets."""
        if self.buckets == 1:
            return 0
        if pieces is None:
            raise ValueError(f"a net of {self.buckets} output buckets needs the position's number of pieces")
        return output_bucket(int(pieces), self.buckets)

    def out_weight(self, arrays: dict[str, np.ndarray], bucket: int) -> np.ndarray:
        """The output layer's weights for ``bucket`` ([width])."""
        weight = arrays["out_weight"]
        return weight if weight.ndim == 1 else weight[bucket]


@dataclass(frozen=True)
class FloatNNUE(_Shape):
    """A float network as the file holds it. ``arrays``: float32 by the names in the module
    docstring; ``meta``: checked (``check_meta``); ``features``: the parsed feature set."""

    arrays: dict[str, np.ndarray]
    meta: dict
    features: FeatureSet

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict, where: str = "NNUE") -> FloatNNUE:
        """Check ``meta`` and ``arrays`` against each other (``InputError`` naming ``where``)."""
        meta = check_meta(meta, where)
        return cls(_check_arrays(arrays, meta, where), meta, parse_features(meta["features"]))

    def accumulator(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """[L1] float64: ``ft_bias`` plus the rows of the active features."""
        rows = self.arrays["ft_weight"][np.asarray(indices, np.int64)].astype(np.float64)
        return self.arrays["ft_bias"].astype(np.float64) + rows.sum(axis=0)

    def logit(self, stm_indices: Sequence[int] | np.ndarray, nstm_indices: Sequence[int] | np.ndarray,
              pieces: int | None = None) -> float:
        """The output y for the side to move (win probability sigmoid(y)); slow, numpy float64.
        ``pieces``: the men on the board (kings included), which pick the output bucket of a net with buckets."""
        a = self.arrays
        bucket = self.bucket(pieces)
        hidden = _activate(self.accumulator(stm_indices), self.activation)
        if self.arch != "simple":
            hidden = np.concatenate([hidden, _activate(self.accumulator(nstm_indices), self.activation)])
        if self.arch == "layered":
            hidden = _activate(a["l2_weight"].astype(np.float64) @ hidden + a["l2_bias"], self.activation)
        return float(hidden @ self.out_weight(a, bucket).astype(np.float64) + float(a["out_bias"][bucket]))

    def evaluate(self, stm_indices: Sequence[int] | np.ndarray, nstm_indices: Sequence[int] | np.ndarray,
                 pieces: int | None = None) -> float:
        """Centipawns (float) for the side to move: ``scale * logit``."""
        return self.scale * self.logit(stm_indices, nstm_indices, pieces)


def save_nnue(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Check ``arrays`` against ``meta`` (``InputError`` if they disagree) and write the file atomically."""
    nnue = FloatNNUE.from_arrays(arrays, meta, where=f"NNUE {path}")
    payload: dict[str, Any] = dict(nnue.arrays)
    payload["meta"] = np.array(json.dumps(nnue.meta))
    atomic_write(path, lambda handle: np.savez(handle, **payload))


def load_nnue(path: str | os.PathLike) -> FloatNNUE:
    """Read a file ``save_nnue`` wrote. ``InputError`` (one line naming the file) for a missing
    file, a file that is not an ``.npz``, one that is not an NNUE (e.g. a policy/value ``.pt``),
    a newer ``format_version`` or arrays that disagree with the meta."""
    path = Path(path)
    where = f"NNUE file {str(path)!r}"
    if not path.exists():
        raise InputError(f"{where}: not found")
    if not path.is_file():
        raise InputError(f"{where}: not a file")
    try:
        with open(path, "rb") as handle:
            magic = handle.read(6)
        if magic == b"\x93NUMPY":
            raise InputError(f"{where}: not an NNUE file (a single .npy array, not an .npz)")
        if not magic.startswith(b"PK\x03\x04"):
            raise InputError(f"{where}: not an NNUE file (not an .npz archive)")
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise InputError(f"{where}: not an NNUE file (a single .npy array, not an .npz)")
        with data:
            if "meta" not in data.files:
                raise InputError(f"{where}: not an NNUE file (a zip archive without NNUE meta; "
                                 "a policy/value network?)")
            text = data["meta"]
            if text.shape != () or text.dtype.kind != "U":
                raise InputError(f"{where}: not an NNUE file (meta is not a JSON string)")
            meta = check_meta(json.loads(str(text[()])), where)
            arrays = {name: data[name] for name in data.files if name != "meta"}
    except InputError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as error:
        # json.JSONDecodeError is a ValueError; np.load refuses pickles (a legacy torch file) likewise.
        raise InputError(f"{where}: not an NNUE file ({type(error).__name__}: {error})") from None
    return FloatNNUE.from_arrays(arrays, meta, where)


def random_nnue(features: str = "all", arch: str = "perspective", l1: int = 256, l2: int = 32,
                activation: str = "crelu", seed: int = 0, scale: float = DEFAULT_SCALE, buckets: int = 1) -> FloatNNUE:
    """A net of random weights of this shape, sized so that activations are neither all clamped nor
    all zero: for tests, and the default NNUE that speed figures are measured with."""
    rng = np.random.default_rng(seed)
    fs = parse_features(features)
    meta = {"features": fs.spec, "arch": arch, "l1": l1, "l2": l2, "activation": activation, "scale": scale,
            "buckets": buckets, "training": {"random_seed": seed}}
    shapes = expected_shapes(arch, fs.size, l1, l2 if arch == "layered" else 0, buckets)
    spread = 0.5 / math.sqrt(max(fs.max_active, 1))
    arrays = {
        "ft_weight": rng.normal(0.0, spread, shapes["ft_weight"]),
        "ft_bias": rng.uniform(0.0, 0.6, shapes["ft_bias"]),
        "out_weight": rng.normal(0.0, 1.0 / math.sqrt(shapes["out_weight"][-1]), shapes["out_weight"]),
        "out_bias": rng.normal(0.0, 0.1, shapes["out_bias"]),
    }
    if arch == "layered":
        arrays["l2_weight"] = rng.normal(0.0, 1.0 / math.sqrt(2 * l1), shapes["l2_weight"])
        arrays["l2_bias"] = rng.uniform(0.0, 0.5, shapes["l2_bias"])
    return FloatNNUE.from_arrays({k: v.astype(np.float32) for k, v in arrays.items()}, meta)


# ----------------------------------------------------------------------------------------------
# Quantised


def _round(x: np.ndarray, factor: float, bound: int, dtype: type, name: str, where: str) -> np.ndarray:
    scaled = np.rint(x.astype(np.float64) * factor)
    worst = float(np.abs(scaled).max()) if scaled.size else 0.0
    if worst > bound:
        raise InputError(f"{where}: {name} does not fit {np.dtype(dtype).name} after quantisation "
                         f"(|x| must stay below {bound / factor:.3g}, largest {worst / factor:.3g})")
    return scaled.astype(dtype)


def quantise(nnue: FloatNNUE, where: str = "NNUE") -> QuantisedNNUE:
    """The integer network (scales in the module docstring); ``InputError`` if a weight does not fit."""
    a = nnue.arrays
    q = {
        "ft_weight": _round(a["ft_weight"], QA, _INT16, np.int16, "ft_weight", where),
        "ft_bias": _round(a["ft_bias"], QA, _INT16, np.int16, "ft_bias", where),
        "out_weight": _round(a["out_weight"], QB, _INT16, np.int16, "out_weight", where),
        "out_bias": _round(a["out_bias"], QA * QB, _INT32, np.int32, "out_bias", where),
    }
    if nnue.arch == "layered":
        q["l2_weight"] = _round(a["l2_weight"], QB, _INT16, np.int16, "l2_weight", where)
        q["l2_bias"] = _round(a["l2_bias"], QA * QB, _INT32, np.int32, "l2_bias", where)
    return QuantisedNNUE({k: np.ascontiguousarray(v) for k, v in q.items()}, dict(nnue.meta), nnue.features)


@dataclass(frozen=True)
class QuantisedNNUE(_Shape):
    """The integer network: ``arrays`` int16 (weights, ``ft_bias``) and int32 (``out_bias``,
    ``l2_bias``), same names and shapes as the float file; ``meta`` and ``features`` as ``FloatNNUE``'s.
    ``evaluate`` is the reference the compiled search (``alphazero.search.nnue_eval``) must equal."""

    arrays: dict[str, np.ndarray]
    meta: dict
    features: FeatureSet

    @property
    def accumulator_bound(self) -> int:
        """The largest |accumulator| entry any ``max_active`` features could sum to (a bound, not a
        position): at most 32767 means the int16 accumulator can never wrap."""
        weights = np.abs(self.arrays["ft_weight"].astype(np.int32))
        count = min(self.features.max_active, weights.shape[0])
        if count == 0:
            top = np.zeros(weights.shape[1], np.int64)
        else:
            top = -np.partition(-weights, count - 1, axis=0)[:count].sum(axis=0)
        return int((np.abs(self.arrays["ft_bias"].astype(np.int64)) + top).max())

    def accumulator(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """[L1] int16: ``ft_bias`` plus the rows of the active features, wrapping as int16 does."""
        rows = self.arrays["ft_weight"][np.asarray(indices, np.int64)].astype(np.int64)
        return (self.arrays["ft_bias"].astype(np.int64) + rows.sum(axis=0)).astype(np.int16)

    def output(self, stm_accumulator: np.ndarray, nstm_accumulator: np.ndarray, bucket: int = 0) -> int:
        """The raw output (QA * QB units) from the two int16 accumulators (side to move first), through
        output bucket ``bucket``."""
        a = self.arrays
        ow = self.out_weight(a, bucket).astype(np.int64)
        ob = int(a["out_bias"][bucket])
        screlu = self.activation == "screlu"
        hidden = np.clip(stm_accumulator.astype(np.int64), 0, QA)
        if self.arch != "simple":
            hidden = np.concatenate([hidden, np.clip(nstm_accumulator.astype(np.int64), 0, QA)])
        if self.arch == "layered":
            w2 = a["l2_weight"].astype(np.int64)
            sums = w2 @ (hidden * hidden) // QA if screlu else w2 @ hidden
            h2 = np.clip(sums // QB + a["l2_bias"].astype(np.int64) // QB, 0, QA)
            if screlu:
                h2 = h2 * h2 // QA
            return int(h2 @ ow + ob)
        if screlu:
            return int((hidden * hidden) @ ow // QA + ob)
        return int(hidden @ ow + ob)

    @property
    def scale_int(self) -> int:
        """``scale`` rounded to an integer (at least 1): integer arithmetic all the way to centipawns."""
        return max(1, int(round(self.scale)))

    def centipawns(self, output: int) -> int:
        """``output * scale // (QA * QB)``, floored."""
        return int(output * self.scale_int // (QA * QB))

    def evaluate(self, stm_indices: Sequence[int] | np.ndarray, nstm_indices: Sequence[int] | np.ndarray,
                 pieces: int | None = None) -> int:
        """Centipawns (int) for the side to move; slow, numpy, exact integer arithmetic. ``pieces`` as
        ``FloatNNUE.logit``'s."""
        return self.centipawns(self.output(self.accumulator(stm_indices), self.accumulator(nstm_indices),
                                           self.bucket(pieces)))
