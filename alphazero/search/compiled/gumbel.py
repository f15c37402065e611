"""Gumbel AlphaZero's rules in the compiled search (mctx's ``gumbel_muzero_policy``).

Owns ``alphazero.search.mcts``'s Gumbel formulas (its docstring has them), operation for operation:
``sigma(completed q)`` over a node's moves (``completed_q``: the mixed value for unvisited moves, q
min-max normalised, ``sigma = (c_visit + max N) * c_scale * q``); the root's choice, the considered
move with the scheduled visit count and the best ``g + logits + sigma(q)`` (``root_index``); the
deterministic choice below the root, ``argmax pi'(a) - N(a) / (1 + sum N)`` over the tried moves and
the best untried one (``interior_index``); the roots that must start afresh (``restart_searched_roots``:
no statistics reused, the network's evaluations kept with ``reuse_tree``) and, after the search, the improved policy's logits and the best survivor played
(``policy_logits``) and its softmax (``normalise_policy``). Reads the tree layout of ``tree``; knows
nothing of networks, torch or Ray.

Bit for bit with the Python search: sums over moves are numpy's pairwise sums where ``mcts`` sums an
array and sequential where it sums a list, and the ``exp``/``log`` that ``mcts`` takes with numpy are
left to the driver (numpy has its own vectorised ones: on an AVX-512 machine its float64 ``exp`` and
``log`` differ from the C library's, which numba calls, in the last bit for about 5% and 0.4% of
arguments): it computes ``log P`` and the root's scores with numpy before the search and the
policy's ``exp`` after it. ``interior_index``'s ``exp`` is the C library's, as ``math.exp`` is.

Arrays over the games of one search (``G`` of them, ``j`` the game's index, ``slots[j]`` its slot)
==================== ============= ================================================================
``offsets``          [G + 1] int64 game j's root moves are ``[offsets[j], offsets[j + 1])`` of:
``log_priors``       [sum K] f64   ``log(max(P, 1e-30))`` of the root's network priors
``root_scores``      [sum K] f64   ``g + log P - max log P`` (g the root's Gumbel draw, 0 without
                                   noise): the root's score before ``sigma(q)``
``schedule_offsets`` [G + 1] int64 game j's halving schedule is ``[schedule_offsets[j],
                                   schedule_offsets[j + 1])`` of ``schedule`` (int64: entry k is the
                                   visit count the root move of simulation k has before it,
                                   ``mcts.considered_visit_sequence``)
``logits``, ``pi``   [sum K] f64,  after the search: ``log P + sigma(completed q)`` shifted to a
                     f32           maximum of 0, and ``pi'`` (games with one move: left alone)
``chosen``           [G] int64     the move played, a local index (games with one move: left alone)
``scratch``          [3, M] f64    M = ``MAX_MOVES``: per-move scratch space
==================== ============= ================================================================
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from alphazero.search.compiled.sums import pairwise_sum
from alphazero.search.compiled.tree import (
    EF_PRIOR,
    EF_SEL_PRIOR,
    EF_VALUE,
    EI_CHILD,
    EI_ORDER,
    EI_TRIED,
    EI_VISITS,
    EXPANDED,
    NF_RAW,
    NI_CURSOR,
    NI_EDGE_START,
    NI_NUM_EDGES,
    NI_NUM_TRIED,
    NI_STATE,
    clear_tree,
    keep_evaluations,
)

TINY = np.finfo(np.float64).tiny  # ``completed_q_transform``'s floor of the priors
LOGIT_FLOOR = -1e9  # the root's scores are floored here (``MCTS._gumbel_scores``)


@njit(cache=True)
def completed_q(nodes_f, edges_i, edges_f, g, node, start, count, c_visit, c_scale, sigma, products, weights):
    """``sigma(completed q)`` ``[count]`` of a node's moves into ``sigma`` (``completed_q_transform``), for
    its mover: q = W / N for the visited moves, the mixed value ``(v + sum N * sum_visited P q /
    sum_visited P) / (1 + sum N)`` for the others, min-max normalised and scaled by ``(c_visit + max N)
    * c_scale``. Returns the node's ``sum N`` (virtual visits included). ``products``, ``weights``: scratch."""
    total = 0
    most = 0
    visited = 0
    for k in range(count):
        n = edges_i[g, start + k, EI_VISITS]
        total += n
        if n > most:
            most = n
        if n > 0:
            q = edges_f[g, start + k, EF_VALUE] / n
            p = max(edges_f[g, start + k, EF_PRIOR], TINY)
            products[visited] = p * q
            weights[visited] = p
            visited += 1
            sigma[k] = q
    mixed = nodes_f[g, node, NF_RAW]
    if total > 0:
        weighted = pairwise_sum(products, 0, visited) / pairwise_sum(weights, 0, visited)
        mixed = (mixed + total * weighted) / (total + 1.0)
    low = np.inf
    high = -np.inf
    for k in range(count):
        if edges_i[g, start + k, EI_VISITS] <= 0:
            sigma[k] = mixed
        low = min(low, sigma[k])
        high = max(high, sigma[k])
    spread = max(high - low, 1e-8)
    scale = (c_visit + most) * c_scale
    for k in range(count):
        sigma[k] = scale * ((sigma[k] - low) / spread)
    return total


@njit(cache=True)
def root_index(nodes_f, edges_i, edges_f, g, start, count, c_visit, c_scale, root_scores, first, schedule,
               schedule_first, schedule_length, scratch):
    """The root's move for the next simulation (``MCTS._gumbel_root_index``): among the moves whose visit
    count is the one the schedule gives this simulation (``schedule[schedule_first + sum N]``; past its
    end the largest count), the first with the best ``max(-1e9, root_scores[first + k] + sigma(q))``."""
    sigma = scratch[0]
    simulation = completed_q(nodes_f, edges_i, edges_f, g, 0, start, count, c_visit, c_scale, sigma, scratch[1],
                             scratch[2])
    if simulation < schedule_length:
        target = schedule[schedule_first + simulation]
    else:
        target = 0
        for k in range(count):
            target = max(target, edges_i[g, start + k, EI_VISITS])
    best = 0
    best_score = -np.inf
    for k in range(count):
        if edges_i[g, start + k, EI_VISITS] == target:
            score = max(LOGIT_FLOOR, root_scores[first + k] + sigma[k])
            if score > best_score:
                best = k
                best_score = score
    return best


@njit(cache=True)
def interior_index(nodes_i, nodes_f, edges_i, edges_f, g, node, start, count, c_visit, c_scale, scratch):
    """``argmax pi'(a) - N(a) / (1 + sum N)`` below the root (``MCTS._gumbel_interior_index``), scored over
    the tried moves (in the order first tried) and the best untried one, whose completed Q is the
    mixed value they share; ties to the earlier. Moves ``NI_CURSOR`` on as PUCT does."""
    cursor = nodes_i[g, node, NI_CURSOR]
    while cursor < count and edges_i[g, start + edges_i[g, start + cursor, EI_ORDER], EI_CHILD] >= 0:
        cursor += 1
    nodes_i[g, node, NI_CURSOR] = cursor
    tried = nodes_i[g, node, NI_NUM_TRIED]
    if tried == 0:
        return edges_i[g, start + cursor, EI_ORDER]
    total = 0
    most = 0
    prior_tried = 0.0
    weighted = 0.0
    low = np.inf
    high = -np.inf
    for j in range(tried):
        edge = start + edges_i[g, start + j, EI_TRIED]
        n = edges_i[g, edge, EI_VISITS]
        q = edges_f[g, edge, EF_VALUE] / n if n else 0.0
        scratch[0, j] = q
        if j == 0 or q < low:
            low = q
        if j == 0 or q > high:
            high = q
        total += n
        if n > most:
            most = n
        if n:
            prior_tried += edges_f[g, edge, EF_SEL_PRIOR]
            weighted += edges_f[g, edge, EF_SEL_PRIOR] * q
    raw = nodes_f[g, node, NF_RAW]
    mixed = raw
    if total and prior_tried > 0:
        mixed = (raw + total * weighted / prior_tried) / (total + 1)
    untried = cursor < count
    if untried:
        if mixed < low:
            low = mixed
        if mixed > high:
            high = mixed
    spread = high - low
    if 1e-8 > spread:
        spread = 1e-8
    scale = (c_visit + most) * c_scale / spread
    top = -np.inf
    for j in range(tried):
        sigma = (scratch[0, j] - low) * scale
        scratch[0, j] = sigma
        if j == 0 or sigma > top:
            top = sigma
    sigma_mixed = (mixed - low) * scale
    if untried and sigma_mixed > top:
        top = sigma_mixed
    norm = 0.0
    tried_priors = 0.0
    for j in range(tried):
        prior = edges_f[g, start + edges_i[g, start + j, EI_TRIED], EF_SEL_PRIOR]
        weight = prior * math.exp(scratch[0, j] - top)
        scratch[0, j] = weight
        norm += weight
        tried_priors += prior
    if untried:
        rest = 1.0 - tried_priors
        norm += (rest if rest > 0.0 else 0.0) * math.exp(sigma_mixed - top)
    if norm <= 0:
        norm = 1.0
    best = -1
    best_score = -np.inf
    for j in range(tried):
        i = edges_i[g, start + j, EI_TRIED]
        score = scratch[0, j] / norm - edges_i[g, start + i, EI_VISITS] / (1 + total)
        if score > best_score:
            best = i
            best_score = score
    if untried:
        i = edges_i[g, start + cursor, EI_ORDER]
        if edges_f[g, start + i, EF_SEL_PRIOR] * math.exp(sigma_mixed - top) / norm > best_score:
            best = i
    return best


@njit(cache=True)
def restart_searched_roots(slots, nodes_i, nodes_f, edges_i, edges_f, trees, keep):
    """Statistics afresh for every game whose root has visited moves (``MCTS.search``: sequential halving's
    schedule assumes a root without visits): with ``keep`` (``reuse_tree``) the tree's network evaluations
    stay for the new search to reuse (``tree.keep_evaluations``), else a fresh tree; a kept root that was
    expanded but never searched stays as it is."""
    for j in range(len(slots)):
        g = slots[j]
        if nodes_i[g, 0, NI_STATE] != EXPANDED:
            continue
        start = nodes_i[g, 0, NI_EDGE_START]
        for k in range(nodes_i[g, 0, NI_NUM_EDGES]):
            if edges_i[g, start + k, EI_VISITS] > 0:
                if keep:
                    keep_evaluations(nodes_i, nodes_f, edges_i, edges_f, trees, g)
                else:
                    clear_tree(nodes_i, nodes_f, trees, g)
                break


@njit(cache=True)
def root_priors(slots, nodes_i, edges_f, offsets, priors):
    """The network's priors of every root (expanded), flat over ``offsets``, as float64 of the float32 values."""
    for j in range(len(slots)):
        g = slots[j]
        start = nodes_i[g, 0, NI_EDGE_START]
        for k in range(offsets[j + 1] - offsets[j]):
            priors[offsets[j] + k] = edges_f[g, start + k, EF_PRIOR]


@njit(cache=True)
def policy_logits(slots, nodes_i, nodes_f, edges_i, edges_f, offsets, log_priors, root_scores, c_visit, c_scale,
                  scratch, logits, chosen):
    """For each root with more than one move (``MCTS._result``): ``log P + sigma(completed q)`` shifted to
    a maximum of 0 into ``logits`` (flat over ``offsets``; the driver takes their ``exp``), and in
    ``chosen[j]`` the move played: the best survivor, the first most visited move with the best
    ``max(-1e9, root_scores + sigma(q))``. Other games are left alone."""
    sigma = scratch[0]
    for j in range(len(slots)):
        first = offsets[j]
        count = offsets[j + 1] - first
        if count <= 1:
            continue
        g = slots[j]
        start = nodes_i[g, 0, NI_EDGE_START]
        completed_q(nodes_f, edges_i, edges_f, g, 0, start, count, c_visit, c_scale, sigma, scratch[1], scratch[2])
        top = -np.inf
        most = 0
        for k in range(count):
            x = log_priors[first + k] + sigma[k]
            logits[first + k] = x
            top = max(top, x)
            most = max(most, edges_i[g, start + k, EI_VISITS])
        for k in range(count):
            logits[first + k] -= top
        best = 0
        best_score = -np.inf
        for k in range(count):
            if edges_i[g, start + k, EI_VISITS] == most:
                score = max(LOGIT_FLOOR, root_scores[first + k] + sigma[k])
                if score > best_score:
                    best = k
                    best_score = score
        chosen[j] = best


@njit(cache=True)
def normalise_policy(offsets, weights, pi):
    """``pi'`` of each root with more than one move: its ``weights`` (the ``exp`` of ``policy_logits``)
    over their pairwise sum, rounded to float32 (``gumbel_policy``). Other games are left alone."""
    for j in range(len(offsets) - 1):
        first = offsets[j]
        count = offsets[j + 1] - first
        if count <= 1:
            continue
        total = pairwise_sum(weights, first, count)
        for k in range(count):
            pi[first + k] = np.float32(weights[first + k] / total)
