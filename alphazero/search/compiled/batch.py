"""The compiled search's driver: ``CompiledMCTS``, ``MCTS.search``'s interface over a batch of games.

Owns the Python loop around the compiled rooms (mctx's ``search``): each call attaches the games'
trees to its ``Forest``, expands the roots that need it in one network call, mixes in the roots'
noise (PUCT: Dirichlet; Gumbel: the Gumbel draw, ``log P`` and the halving schedule, taken with numpy
as ``mcts`` takes them), then runs rounds of ``selection.collect_leaves`` (a leaf in every game with
budget left) and ``expansion.expand_leaves`` (one network call for all of them: the only
synchronisation point) until every budget is spent, and reads the results off the roots (``root``;
Gumbel's improved policy and best survivor: ``gumbel``). Owns the seam to the network,
a *plane evaluator* (``forward(planes) -> (logits, values)``, which ``NetworkEvaluator`` already is),
and the buffers the round's leaves are encoded into (``planes`` [R, 24, 8, 8] uint8, written as its
``rows`` view, see ``expansion``). Knows nothing of torch or Ray.

Cost: about 4 microseconds of one CPU per simulation with a free evaluator, encoding, Python driver
and ``advance`` included (``alphazero.bench.search``; the Python search: 80-115).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import chess
import numpy as np

from alphazero.board.encode_kernel import NUM_ACTIONS, plane_rows
from alphazero.board.kernel import MAX_MOVES
from alphazero.config import SearchConfig
from alphazero.search.compiled.expansion import collect_roots, expand_leaves
from alphazero.search.compiled.gumbel import normalise_policy, policy_logits, restart_searched_roots, root_priors
from alphazero.search.compiled.root import choose_moves, root_sizes, root_statistics, set_root_priors
from alphazero.search.compiled.selection import MAX_DEPTH, collect_leaves
from alphazero.search.compiled.tree import (
    NUM_PARAMS,
    P_C_BASE,
    P_C_PUCT,
    P_C_SCALE,
    P_C_VISIT,
    P_FPU,
    P_GUMBEL,
    P_LEAVES_PER_GAME,
    P_MATE_IN_ONE,
    P_TWOFOLD,
    P_VIRTUAL_LOSS,
    T_NUM_EDGES,
    T_NUM_NODES,
    CompiledGameTree,
    Forest,
    move_table,
)
from alphazero.search.mcts import GUMBEL_TARGET_TOTAL, SearchResult, considered_visit_sequence


class PlaneEvaluator(Protocol):
    """The compiled search's seam to the network: planes in, logits and values out.

    ``forward(planes)``: ``uint8 [R, 24, 8, 8]`` (``alphazero.board.encoding``'s planes, side-to-move
    frame; the array is the search's buffer, valid only during the call) -> ``(logits float32 [R,
    4672], values float32 [R])``, values in [-1, 1] for the side to move; the outputs may be the evaluator's
    own buffers, valid until its next call. The search softmaxes each leaf's logits over its legal moves
    itself (as ``masked_softmax``). ``NetworkEvaluator`` is one.
    """

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


class UniformPlaneEvaluator:
    """Logits 0 (equal priors over the legal moves) and value 0 for every position, at no cost.

    ``UniformEvaluator``'s twin behind the plane seam: the benchmark of the search's own cost.
    """

    def __init__(self) -> None:
        self._logits = np.zeros((0, NUM_ACTIONS), np.float32)
        self._values = np.zeros(0, np.float32)

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        count = len(planes)
        if len(self._logits) < count:
            self._logits = np.zeros((count, NUM_ACTIONS), np.float32)
            self._values = np.zeros(count, np.float32)
        return self._logits[:count], self._values[:count]


class CompiledMCTS:
    """Batched PUCT or Gumbel search in compiled code: ``search(trees)`` as ``MCTS.search``.

    ``evaluator`` is a ``PlaneEvaluator`` (``NetworkEvaluator``, ``UniformPlaneEvaluator``); trees
    are ``CompiledGameTree``s (``new_tree`` makes one).
    """

    def __init__(self, evaluator: PlaneEvaluator, config: SearchConfig = SearchConfig()) -> None:
        if config.algorithm not in ("puct", "gumbel"):
            raise ValueError(f"the compiled search implements search.algorithm puct and gumbel, not {config.algorithm!r}")
        if not hasattr(evaluator, "forward"):
            raise TypeError("the compiled search needs an evaluator with forward(planes) -> (logits, values)")
        self.evaluator = evaluator
        self.config = config
        self.forest = Forest()
        self.params = np.zeros(NUM_PARAMS, np.float64)
        self.params[P_C_PUCT] = config.c_puct
        self.params[P_C_BASE] = config.c_puct_base
        self.params[P_FPU] = config.fpu_reduction
        self.params[P_VIRTUAL_LOSS] = config.virtual_loss
        self.params[P_TWOFOLD] = 1.0 if config.twofold_draw else 0.0
        self.params[P_LEAVES_PER_GAME] = config.leaves_per_game
        self.params[P_MATE_IN_ONE] = 1.0 if config.mate_in_one else 0.0
        self.params[P_GUMBEL] = 1.0 if config.algorithm == "gumbel" else 0.0
        self.params[P_C_VISIT] = config.gumbel_c_visit
        self.params[P_C_SCALE] = config.gumbel_c_scale
        self._planes = np.zeros((0, 24, 8, 8), np.uint8)
        self._rows = plane_rows(self._planes)
        self._request_slots = np.zeros(0, np.int64)
        self._request_nodes = np.zeros(0, np.int64)
        self._request_rows = np.zeros(0, np.int64)
        self._moves = np.zeros(MAX_MOVES, np.int32)
        self._softmax = np.zeros(MAX_MOVES, np.float64)
        self._alphas: dict[int, np.ndarray] = {}  # Dirichlet parameters by number of moves
        self._schedules: dict[tuple[int, int], np.ndarray] = {}  # Gumbel's halving schedules by (m, budget)
        self._scratch = np.zeros((3, MAX_MOVES), np.float64)

    @staticmethod
    def new_tree(board: chess.Board | None = None, seed: int | np.random.Generator | None = None) -> CompiledGameTree:
        return CompiledGameTree(board, seed)

    def _buffers(self, requests: int) -> None:
        if len(self._planes) < requests:
            self._planes = np.zeros((requests, 24, 8, 8), np.uint8)
            self._rows = plane_rows(self._planes)  # the same memory, a rank at a time
            self._request_slots = np.zeros(requests, np.int64)
            self._request_nodes = np.zeros(requests, np.int64)
            self._request_rows = np.zeros(requests, np.int64)

    def _evaluate(self, count: int, rows: int) -> None:
        """The network on the round's ``rows`` planes (in chunks of the evaluator's ``max_batch``; none when
        every leaf of the round was kept), then the expansion and backup of its ``count`` leaves."""
        step = getattr(self.evaluator, "max_batch", None) or rows
        if rows == 0:
            logits, values = np.zeros((0, NUM_ACTIONS), np.float32), np.zeros(0, np.float32)
        elif rows <= step:
            logits, values = self.evaluator.forward(self._planes[:rows])
        else:
            # Copies: an evaluator's outputs are valid until its next call only.
            parts = [tuple(np.array(part) for part in self.evaluator.forward(self._planes[start:min(start + step, rows)]))
                     for start in range(0, rows, step)]
            logits = np.concatenate([part[0] for part in parts])
            values = np.concatenate([np.asarray(part[1]).reshape(-1) for part in parts])
        logits = np.ascontiguousarray(logits, dtype=np.float32)
        values = np.ascontiguousarray(values, dtype=np.float32).reshape(rows)
        f = self.forest
        expand_leaves(count, self._request_slots, self._request_nodes, self._request_rows, logits, values, self.params,
                      f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, self._softmax)

    def search(
        self,
        trees: Sequence[CompiledGameTree],
        add_noise: bool | Sequence[bool] = False,
        temperature: float | Sequence[float] = 0.0,
        num_simulations: int | Sequence[int] | None = None,
    ) -> list[SearchResult]:
        """Run ``num_simulations`` (one budget, or one per tree) new simulations in every tree.

        As ``MCTS.search``: one network call per round for the leaves of every game. ``add_noise``:
        PUCT mixes Dirichlet noise into each root's priors, Gumbel draws the root's Gumbel variables;
        ``temperature`` picks PUCT's move from the visit counts (Gumbel plays the best survivor); one
        value, or one per tree, for each.
        """
        config = self.config
        count = len(trees)
        budget = config.num_simulations if num_simulations is None else num_simulations
        budgets = [int(b) for b in np.broadcast_to(np.asarray(budget), (count,))]
        temperatures = [float(t) for t in np.broadcast_to(np.asarray(temperature, dtype=np.float64), (count,))]
        noises = [bool(n) for n in np.broadcast_to(np.asarray(add_noise, dtype=bool), (count,))]
        if not len(temperatures) == len(budgets) == len(noises) == count:
            raise ValueError("one temperature, one budget and one noise flag per tree are needed")
        if count == 0:
            return []
        forest = self.forest
        slots = np.array([tree.attach(forest) for tree in trees], dtype=np.int64)
        if len(set(slots.tolist())) != count:
            raise ValueError("a tree appears twice in one search")
        try:
            return self._search(trees, slots, budgets, temperatures, noises)
        except BaseException:
            # A search cut short leaves leaves waiting for the network: these trees start afresh next time.
            for tree in trees:
                tree.forget()
            raise

    def _search(self, trees, slots, budgets, temperatures, noises) -> list[SearchResult]:
        config = self.config
        count = len(trees)
        f = self.forest
        gumbel = config.algorithm == "gumbel"
        if gumbel:  # statistics afresh: sequential halving's schedule assumes a root without visits
            restart_searched_roots(slots, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, f.trees, config.reuse_tree)
        # Each simulation adds at most one node; each leaf at most MAX_MOVES edges.
        nodes_needed = int(f.trees[slots, T_NUM_NODES].max()) + max(budgets) + 2
        f.reserve(nodes_needed, int(f.trees[slots, T_NUM_EDGES].max()) + MAX_MOVES)
        self._buffers(count * config.leaves_per_game)
        requests, finished = collect_roots(slots, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, f.trees, f.bb, f.sq, f.st,
                                           f.keys, f.undo, self._rows, self._request_slots, self._request_nodes,
                                           self._request_rows, self._moves, self.config.mate_in_one)
        if finished >= 0:
            raise ValueError(f"cannot search a finished game: {trees[finished].board.fen()}")
        if requests:
            self._evaluate(requests, requests)
        sizes = np.zeros(count, np.int64)
        root_sizes(slots, f.nodes_i, sizes)
        offsets = np.zeros(count + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        if gumbel:
            draws, draw_offsets = np.zeros(0, np.float64), np.zeros(count + 1, np.int64)
            log_priors, root_scores, schedule, schedule_offsets = self._gumbel_roots(trees, slots, sizes, offsets,
                                                                                     noises, budgets)
        else:
            draws, draw_offsets = self._root_noise(trees, slots, sizes, noises)
            log_priors = root_scores = np.zeros(0, np.float64)
            schedule, schedule_offsets = np.zeros(0, np.int64), np.zeros(count + 1, np.int64)
        set_root_priors(slots, draws, draw_offsets, config.dirichlet_epsilon, f.nodes_i, f.edges_i, f.edges_f)
        # A root with one legal move needs no search: pi is certain whatever the simulations say.
        remaining = np.array([b if s > 1 else 0 for b, s in zip(budgets, sizes.tolist())], dtype=np.int64)
        left = bool((remaining > 0).any())
        leaves_per_round = config.leaves_per_game * MAX_MOVES
        most_edges = int(f.trees[slots, T_NUM_EDGES].max())
        while left:
            if most_edges + leaves_per_round > f.num_edges:
                f.reserve(f.num_nodes, most_edges + leaves_per_round)
            requests, rows, left, most_edges = collect_leaves(
                slots, remaining, self.params, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, f.trees, f.bb, f.sq,
                f.st, f.keys, f.undo, self._rows, self._request_slots, self._request_nodes, self._request_rows,
                self._moves, root_scores, offsets, schedule, schedule_offsets, self._scratch)
            if requests:
                self._evaluate(requests, rows)
            elif left:  # every game collided with a leaf no network call will answer
                raise RuntimeError("the search stalled on leaves waiting for the network")
        if (remaining < 0).any():
            raise RuntimeError(f"search deeper than {MAX_DEPTH} plies below the root")
        return self._results(trees, slots, sizes, offsets, temperatures, log_priors if gumbel else None, root_scores)

    def _gumbel_roots(self, trees, slots, sizes, offsets, noises, budgets) -> tuple[np.ndarray, ...]:
        """Gumbel's root arrays (``gumbel``'s layout): ``log_priors`` and ``root_scores`` ``float64 [sum K]``
        computed with numpy as ``MCTS._gumbel_scores`` computes them, the Gumbel variables drawn from each
        tree's generator in the order and number ``MCTS.search`` draws them (every root with noise, a
        lone move's too), and the halving schedules with their offsets ``[G + 1]``."""
        config = self.config
        f = self.forest
        total = int(offsets[-1])
        priors = np.zeros(total, np.float64)
        root_priors(slots, f.nodes_i, f.edges_f, offsets, priors)
        log_priors = np.log(np.maximum(priors, 1e-30))
        maxima = np.maximum.reduceat(log_priors, offsets[:-1]) if total else np.zeros(0)
        draws = np.zeros(total, np.float64)
        schedules = []
        schedule_offsets = np.zeros(len(trees) + 1, np.int64)
        bounds = offsets.tolist()
        for j, (tree, noise, size, budget) in enumerate(zip(trees, noises, sizes.tolist(), budgets)):
            if noise:
                draws[bounds[j]:bounds[j + 1]] = tree.rng.gumbel(size=size)
            schedule = np.zeros(0, np.int64)
            if size > 1:
                key = (min(config.gumbel_considered, size), budget)
                schedule = self._schedules.get(key)  # type: ignore[assignment]
                if schedule is None:
                    schedule = self._schedules[key] = np.array(considered_visit_sequence(*key), np.int64)
            schedules.append(schedule)
            schedule_offsets[j + 1] = schedule_offsets[j] + len(schedule)
        root_scores = draws + (log_priors - np.repeat(maxima, sizes))
        return log_priors, root_scores, np.concatenate(schedules), schedule_offsets

    def _root_noise(self, trees, slots, sizes, noises) -> tuple[np.ndarray, np.ndarray]:
        """Dirichlet draws ``float64 [sum K]`` for the roots that get noise, from each tree's generator
        as ``MCTS.search`` draws them, and their ``offsets`` ``[G + 1]`` (an empty range: no noise)."""
        config = self.config
        offsets = np.zeros(len(trees) + 1, np.int64)
        if config.dirichlet_epsilon <= 0 or not any(noises):
            return np.zeros(0, np.float64), offsets
        alphas = self._alphas
        parts = []
        total = 0
        for j, (tree, noise, size) in enumerate(zip(trees, noises, sizes.tolist())):
            if noise and size > 1:
                alpha = alphas.get(size)
                if alpha is None:
                    alpha = alphas[size] = np.full(size, config.dirichlet_alpha)
                parts.append(tree.rng.dirichlet(alpha))
                total += size
            offsets[j + 1] = total
        return (np.concatenate(parts) if parts else np.zeros(0, np.float64)), offsets

    def _results(self, trees, slots, sizes, offsets, temperatures, log_priors, root_scores) -> list[SearchResult]:
        """Each root's result (``MCTS._result``); ``log_priors`` and ``root_scores`` are Gumbel's (None: PUCT)."""
        f = self.forest
        count = len(trees)
        total = int(offsets[-1])
        moves = np.zeros(total, np.int32)
        visits = np.zeros(total, np.int64)
        pi = np.zeros(total, np.float32)
        priors = np.zeros(total, np.float32)
        root_values = np.zeros(count, np.float64)
        most = np.zeros(count, np.int64)
        root_statistics(slots, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, offsets, moves, visits, pi, priors,
                        root_values, most)
        # The move: drawn from each tree's generator in the order and number MCTS draws (Gumbel plays the
        # best survivor without a draw, except at a lone move).
        gumbel = log_priors is not None
        uniforms = np.zeros(count, np.float64)
        chosen = np.zeros(count, np.int64)
        for j, (tree, temperature, top, size) in enumerate(zip(trees, temperatures, most.tolist(), sizes.tolist())):
            if temperature > 0 and not (gumbel and size > 1):
                if top > 0:
                    uniforms[j] = tree.rng.random()
                else:
                    chosen[j] = int(tree.rng.integers(int(sizes[j])))
        choose_moves(visits, offsets, np.asarray(temperatures, np.float64), uniforms, chosen)
        targets = visits
        if gumbel:  # pi' = softmax(log P + sigma(completed q)), its exp taken with numpy as gumbel_policy takes it
            logits = np.zeros(total, np.float64)
            config = self.config
            policy_logits(slots, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, offsets, log_priors, root_scores,
                          config.gumbel_c_visit, config.gumbel_c_scale, self._scratch, logits, chosen)
            normalise_policy(offsets, np.exp(logits), pi)
            searched = np.repeat(sizes > 1, sizes)
            targets = visits.copy()
            targets[searched] = np.rint(pi[searched].astype(np.float64) * GUMBEL_TARGET_TOTAL).astype(np.int64)
        table = move_table()
        results = []
        bounds = offsets.tolist()
        for j, (index, value) in enumerate(zip(chosen.tolist(), root_values.tolist())):
            a, b = bounds[j], bounds[j + 1]
            counts = visits[a:b]
            root_moves = [table[m] for m in moves[a:b].tolist()]
            results.append(SearchResult(move=root_moves[index], moves=root_moves, visit_counts=counts, pi=pi[a:b],
                                        root_value=value, priors=priors[a:b], target_counts=targets[a:b]))
        return results
