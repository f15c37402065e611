"""The roots of the compiled search: noise in, statistics and the move out (mctx's ``policies``).

Owns what happens at the roots only, between the rounds of selection: the number of legal moves of
each root (``root_sizes``), the root's selection priors with Dirichlet noise mixed in as numpy mixes
it (``set_root_priors``), each root's moves, visit counts, ``pi``, priors and value
(``root_statistics``, as ``MCTS._result``) and the move played (``choose_moves``, as
``choose_move_index``: the first most visited at temperature 0, else ``N^(1/T)`` sampled with a
uniform draw the driver takes from the tree's generator). Reads the tree layout of ``tree``; knows
nothing of selection, networks, torch or Ray.

Arrays over the games of one search (``G`` of them, ``j`` the game's index, ``slots[j]`` its slot)
=============== ================= =====================================================================
``slots``       [G] int64         each game's slot in the forest
``offsets``     [G + 1] int64     game j's root moves are ``[offsets[j], offsets[j + 1])`` of the flat
                                  arrays below (``moves`` int32, ``visits`` int64, ``pi`` and
                                  ``priors`` float32) and of ``draws`` (float64 Dirichlet noise; an
                                  empty range there: no noise)
=============== ================= =====================================================================
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from alphazero.board.kernel import MAX_MOVES
from alphazero.search.compiled.expansion import sort_by_prior
from alphazero.search.compiled.sums import pairwise_sum
from alphazero.search.compiled.tree import (
    EF_PRIOR,
    EF_SEL_PRIOR,
    EI_MOVE,
    EI_VISITS,
    EXPANDED,
    NF_VALUE_SUM,
    NI_CURSOR,
    NI_EDGE_START,
    NI_NUM_EDGES,
    NI_STATE,
    NI_VISITS,
)


@njit(cache=True)
def root_sizes(slots, nodes_i, sizes):
    """``sizes[j]``: the legal moves of game j's root once expanded, else 0."""
    for j in range(len(slots)):
        sizes[j] = nodes_i[slots[j], 0, NI_NUM_EDGES] if nodes_i[slots[j], 0, NI_STATE] == EXPANDED else 0


@njit(cache=True)
def set_root_priors(slots, draws, offsets, epsilon, nodes_i, edges_i, edges_f):
    """Each root's selection priors, then its prior order again from the first move (``set_selection_priors``).

    Where ``draws[offsets[j]:offsets[j + 1]]`` (Dirichlet noise, float64) is not empty the priors are
    ``((1 - epsilon) * priors + epsilon * noise).astype(float32)`` as numpy evaluates it (the first
    product in float32: a Python float times a float32 array), else the network's own.
    """
    keep = np.float32(1.0 - epsilon)
    for j in range(len(slots)):
        g = slots[j]
        start = nodes_i[g, 0, NI_EDGE_START]
        count = nodes_i[g, 0, NI_NUM_EDGES]
        noisy = offsets[j + 1] - offsets[j] == count
        for k in range(count):
            prior = edges_f[g, start + k, EF_PRIOR]
            if noisy:
                kept = np.float64(keep * np.float32(prior))
                prior = np.float64(np.float32(kept + epsilon * draws[offsets[j] + k]))
            edges_f[g, start + k, EF_SEL_PRIOR] = prior
        sort_by_prior(edges_i, edges_f, g, start, count)
        nodes_i[g, 0, NI_CURSOR] = 0


@njit(cache=True)
def root_statistics(slots, nodes_i, nodes_f, edges_i, edges_f, offsets, moves, visits, pi, priors, root_values,
                    most_visits):
    """Each root's moves, visit counts (1 for a lone move never searched), ``pi`` (float32 share of the
    visits), network priors (all flat over ``offsets`` [G + 1]), mean value clipped to [-1, 1] and
    largest visit count; as ``MCTS._result`` computes them."""
    for j in range(len(slots)):
        g = slots[j]
        start = nodes_i[g, 0, NI_EDGE_START]
        first = offsets[j]
        count = offsets[j + 1] - first
        total = 0
        most = 0
        for k in range(count):
            moves[first + k] = edges_i[g, start + k, EI_MOVE]
            visits[first + k] = edges_i[g, start + k, EI_VISITS]
            priors[first + k] = np.float32(edges_f[g, start + k, EF_PRIOR])
            total += visits[first + k]
            most = max(most, visits[first + k])
        if total == 0 and count == 1:
            visits[first] = 1
            total = most = 1
        for k in range(count):
            pi[first + k] = np.float32(visits[first + k] / total) if total else np.float32(np.nan)
        most_visits[j] = most
        n = nodes_i[g, 0, NI_VISITS]
        value = nodes_f[g, 0, NF_VALUE_SUM] / n if n else 0.0
        root_values[j] = min(max(value, -1.0), 1.0)


@njit(cache=True)
def choose_moves(visits, offsets, temperatures, uniforms, chosen):
    """Each game's move index from its visit counts, as ``choose_move_index``: the first most visited
    at temperature 0, else ``rng.choice`` over ``N^(1/T)`` replayed with the uniform draw
    ``uniforms[j]`` (the cumulative sum normalised by its last entry, the first entry above the draw).
    ``chosen[j]`` is left alone where the counts are all 0 (the driver draws the move itself)."""
    weights = np.zeros(MAX_MOVES, np.float64)
    for j in range(len(temperatures)):
        first = offsets[j]
        count = offsets[j + 1] - first
        most = 0
        best = 0
        for k in range(count):
            if visits[first + k] > most:
                most = visits[first + k]
                best = k
        temperature = temperatures[j]
        if temperature <= 0:
            chosen[j] = best
            continue
        if most <= 0:
            continue
        power = 1.0 / temperature
        for k in range(count):
            x = visits[first + k] / most
            if power == 1.0:
                weights[k] = x
            elif power == 2.0:
                weights[k] = x * x
            elif power == 0.5:
                weights[k] = math.sqrt(x)
            else:
                weights[k] = x ** power
        total = pairwise_sum(weights, 0, count)  # np.sum: pairwise over all (reduceat starts from the first)
        cumulative = 0.0
        for k in range(count):  # p = weights / total, cdf = cumsum(p)
            cumulative += weights[k] / total
            weights[k] = cumulative
        last = weights[count - 1]
        index = count
        for k in range(count):
            if weights[k] / last > uniforms[j]:
                index = k
                break
        chosen[j] = index
