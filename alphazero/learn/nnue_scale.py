"""An NNUE's centipawn measured against PeSTO's: the ``pesto_slope`` that ``alphazero nnue train`` reports.

A net trained on its own search's scores learns a wider scale than it had. The score of a 5,000-node
search is on average 1.09 times the same net's depth-1 score of the position (an advantage grows as
the search sees it converted), and the loop's nets read 1.10, 1.35 and 1.71 times PeSTO's centipawns
on generation 5's positions at generations 1, 3 and 5 (docs/RESULTS.md, "The NNUE's centipawn"). The
search's margins (reverse futility, futility, the null move's) are fixed centipawns, so the unit is
part of how a net plays: generation 5 scaled back to PeSTO's unit played 30 Elo worse, scaled 1.25
times wider level. The trainer reports the slope so that a net's unit is in its file and its log.

``pesto_slope`` is the least-squares slope through the origin of the net's centipawns on PeSTO's over
the check positions (the held-out ones, else the training ones) that PeSTO scores within
``SLOPE_LIMIT_CP``. PeSTO is read from the features themselves, so nothing but the cached rows is
needed: every piece-square block (``all``, ``ka``, ``kb``) names each piece and its square from the
side to move's view, which is the board of an equivalent position with White to move
(``alphazero.nets.features``), where PeSTO (``alphazero.search.evals.material``, symmetric under that
mirror) scores the same.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from alphazero.errors import InputError
from alphazero.learn.nnue_data import FeatureRows
from alphazero.nets.features import BLOCK_NAMES, FeatureSet
from alphazero.search.evals import EG_TABLE, MG_TABLE, PHASE
from alphazero.search.nnue_eval import PIECE_SQUARE_BLOCKS

SLOPE_LIMIT_CP = 1000  # positions PeSTO scores beyond this (decided ones) do not set the slope
MIN_SLOPE_POSITIONS = 100


def piece_square_block(fs: FeatureSet) -> int | None:
    """The index in ``fs.blocks`` of its first piece-square block (None: it has none)."""
    return next((i for i, block_id in enumerate(fs.block_ids) if block_id in PIECE_SQUARE_BLOCKS), None)


def pesto_cp(rows: FeatureRows, fs: FeatureSet) -> np.ndarray:
    """PeSTO's tapered score for the side to move of each position [P] (int64), from its side-to-move
    features' first piece-square block; ``InputError`` if ``fs`` has none."""
    block = piece_square_block(fs)
    if block is None:
        names = ", ".join(BLOCK_NAMES[b] for b in PIECE_SQUARE_BLOCKS)
        raise InputError(f"feature set {fs.spec!r}: PeSTO's score is read from a piece-square block ({names}), "
                         "and it has none")
    first = fs.offsets[block]
    last = fs.offsets[block + 1] if block + 1 < len(fs.blocks) else fs.size
    index = rows.stm_index.astype(np.int64)
    position = np.repeat(np.arange(rows.num_positions), np.diff(rows.stm_offsets))
    keep = (index >= first) & (index < last)
    piece_square = (index[keep] - first) % 768  # ka / kb: 768 per king bucket, the all-index within
    piece, square = piece_square // 64, piece_square % 64  # piece: 6 * (0 mover, 1 other) + role
    where = position[keep]
    count = rows.num_positions
    mg = np.bincount(where, MG_TABLE[piece, square], count)
    eg = np.bincount(where, EG_TABLE[piece, square], count)
    phase = np.minimum(np.bincount(where, PHASE[piece], count), 24)
    total = np.rint(mg * phase + eg * (24 - phase)).astype(np.int64)
    return np.sign(total) * (np.abs(total) // 24)  # toward zero, as ``material``


def pesto_slope(rows: FeatureRows, fs: FeatureSet,
                net_cp: Callable[[FeatureRows], np.ndarray]) -> dict[str, Any] | None:
    """``{"slope", "positions"}``: the least-squares slope through the origin of a net's centipawns
    (``net_cp(rows)``) on PeSTO's over the positions of ``rows`` that PeSTO scores within
    ``SLOPE_LIMIT_CP``; None if ``fs`` has no piece-square block, fewer than ``MIN_SLOPE_POSITIONS``
    positions are inside the limit, or PeSTO scores every one of them 0 (nothing to measure against)."""
    if piece_square_block(fs) is None:
        return None
    pesto = pesto_cp(rows, fs).astype(np.float64)
    keep = np.flatnonzero(np.abs(pesto) <= SLOPE_LIMIT_CP)
    x = pesto[keep]
    if keep.size < MIN_SLOPE_POSITIONS or not x.any():
        return None
    y = np.asarray(net_cp(rows.take(keep)), np.float64)
    return {"slope": float(np.dot(x, y)) / float(np.dot(x, x)), "positions": int(keep.size)}
