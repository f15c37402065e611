"""PUCT Monte Carlo tree search over many games at once.

Owns the search trees and the selection / expansion / backup loop. Knows nothing about torch: it
sees the network only through an ``Evaluator`` (``alphazero.nets.evaluator``), and it calls that
evaluator once per round with the leaves of *every* running game (and, with virtual loss, several
leaves per game), as mctx does over its batch dimension.

Perspective: every value stored in a node is for the side to move at that node. A leaf's value
(network or true result) is for its mover and is negated at each step on the way up.

Selection maximises ``Q(s, a) + U(s, a)`` with

    U(s, a) = c(s) * P(s, a) * sqrt(N(s)) / (1 + N(s, a)),
    c(s)    = c_puct + log((N(s) + c_puct_base + 1) / c_puct_base)   (log term only if base > 0),

where ``N(s)`` counts the visits of the node itself (so the first choice already follows the
priors) and an unvisited child has the first-play-urgency value ``Q(s) - fpu_reduction``.

``algorithm: gumbel`` is Gumbel AlphaZero (Danihelka et al., ICLR 2022; mctx's
``gumbel_muzero_policy``). At the root: Gumbel-top-k sampling of ``m = min(gumbel_considered, K)``
actions and sequential halving of the budget over them (each simulation visits the considered action
with the highest ``g + logits + sigma(q)`` among those with the scheduled visit count); the move
played is the best survivor by the same score. Below the root, deterministic selection of
``argmax_a pi'(a) - N(a) / (1 + sum_b N(b))`` with ``pi' = softmax(logits + sigma(completed q))``.
The policy target is ``pi'`` at the root: ``completed q`` is Q for visited actions and, for
unvisited ones, the mixed value ``(v + sum_b N(b) * sum_{b visited} P(b) Q(b) / sum_{b visited} P(b))
/ (1 + sum_b N(b))``; q is min-max normalised over the actions and ``sigma(q) = (c_visit +
max_b N(b)) * c_scale * q``. No Dirichlet noise and no tree reuse (the schedule assumes a fresh
root). Every sum over unvisited actions is taken in closed form (they share one completed value),
so selection still scores only the tried moves plus the best untried one.

Terminal nodes hold the true result (checkmate, stalemate, insufficient material, fifty moves,
threefold repetition). As in lc0, a position that repeats one earlier *in the same tree* is also
scored a draw (``twofold_draw``): the side that is better then looks for progress instead of
shuffling, and the worse side for the repetition it could force.

Mate in one (``mate_in_one``, on by default): when a node is first reached its moves are tested for
checkmate (``movegen.mating_move_index``: a cheap check filter, then an exact test). Below the root a
node whose mover can mate is a proven win, scored +1 without a network call, exactly as a checkmate
one ply further down would be once found; so the search sees at once which of its moves allow a mate.
At the root the mating move is the only one searched, so it is played and is the whole policy
target. Without it a low-prior mate is never tried: in a won position every tried move's Q is near
+1 and first-play urgency puts the untried ones below them (docs/RESULTS.md "Mate in one").

Cost: python-chess dominates. Each game keeps one board; the search descends with push/pop, lists
legal moves once per node (at expansion, with ``alphazero.board.movegen``) and keeps child statistics in
small lists over the legal moves only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import chess
import numpy as np
import numpy.typing as npt

from alphazero.board.game import terminal_status
from alphazero.board.movegen import legal_moves, mating_move_index
from alphazero.config import SearchConfig


class Evaluator(Protocol):
    """The seam between search and network.

    ``prepare`` is called once per leaf while ``board`` stands at that leaf (it must copy what it
    needs: the board moves on afterwards); ``evaluate`` gets the prepared requests of one round and
    returns ``priors`` (one ``float32 [len(moves)]`` array per request, summing to 1, over the legal
    moves in the order given) and ``values`` (``float32 [B]`` in [-1, 1], for the side to move).
    """

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> Any: ...

    def evaluate(self, requests: list[Any]) -> tuple[list[np.ndarray], np.ndarray]: ...


class Node:
    """One position in a tree. Edge statistics live in the parent, over its legal moves only.

    Statistics are plain Python lists (scalar updates on numpy arrays cost more than the maths).
    ``order`` lists the moves by descending prior and ``tried`` the moves visited so far: every
    untried move has the same first-play-urgency value, so the best untried move is the untried
    one with the highest prior, and selection scores only ``tried`` plus that one move instead of
    every legal move.
    """

    __slots__ = (
        "moves", "priors", "children", "child_visits", "child_values", "visits", "value_sum",
        "terminal_value", "pending", "prior_list", "order", "tried", "cursor", "key", "raw_value", "win_index",
    )

    def __init__(self) -> None:
        self.moves: list[chess.Move] | None = None  # legal moves, set when first reached
        self.priors: np.ndarray | None = None  # float32 [K]; None until the network has answered
        self.children: list[Node | None] = []  # [K], None until the move is first tried
        self.child_visits: list[int] = []  # [K], N(s, a), virtual visits included
        self.child_values: list[float] = []  # [K], W(s, a) for this node's mover
        self.visits = 0  # N(s)
        self.value_sum = 0.0  # for this node's mover
        self.terminal_value: float | None = None  # true result for the mover when the game is over
        self.pending = False  # waiting for the network in the current round
        self.prior_list: list[float] = []  # [K], the priors selection uses (noisy at a self-play root)
        self.order: list[int] = []  # move indices by descending ``prior_list``
        self.tried: list[int] = []  # indices of the moves with a child node, in the order first tried
        self.cursor = 0  # position in ``order`` before which every move has been tried
        self.key: tuple | None = None  # ``position_key`` of the position, set when first reached
        self.raw_value = 0.0  # the network's value for this node's mover (Gumbel's mixed value)
        self.win_index: int | None = None  # a root's mating move (mate_in_one), the only move it searches

    def expand(self, priors: np.ndarray, value: float = 0.0) -> None:
        assert self.moves is not None, "a node is expanded once its moves are known"
        count = len(self.moves)
        self.priors = priors
        self.raw_value = value
        self.children = [None] * count
        self.child_visits = [0] * count
        self.child_values = [0.0] * count
        self.tried = []
        self.set_selection_priors(priors)
        self.pending = False

    def set_selection_priors(self, priors: np.ndarray) -> None:
        """Use ``priors`` ``[K]`` for selection from now on (the root's noisy priors, or the clean ones)."""
        self.prior_list = priors.tolist()
        self.order = np.argsort(-np.asarray(priors, dtype=np.float64), kind="stable").tolist()
        self.cursor = 0

    @property
    def value(self) -> float:
        """Mean value for this node's mover (0 before any visit)."""
        return self.value_sum / self.visits if self.visits else 0.0


class GameTree:
    """One game being searched: its board (with its move history), its tree, its own random stream.

    Each tree draws its Dirichlet noise and samples its moves from its own generator, so a game's
    search does not depend on which other games share the batch.
    """

    def __init__(self, board: chess.Board | None = None, seed: int | np.random.Generator | None = None) -> None:
        self.board = board.copy() if board is not None else chess.Board()
        self.root = Node()
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.root_priors: np.ndarray | None = None  # the root's priors with this search's noise
        # Gumbel search: the root's Gumbel draw [K] and visit schedule of the current search.
        self.gumbel: np.ndarray | None = None
        self.considered_visits: tuple[int, ...] = ()

    def advance(self, move: chess.Move, reuse: bool = True) -> None:
        """Play ``move`` and keep its subtree as the new root when ``reuse`` (noise is redrawn later)."""
        root = self.root
        child = None
        if reuse and root.priors is not None and root.moves is not None:
            try:
                child = root.children[root.moves.index(move)]
            except ValueError:
                child = None
        self.board.push(move)
        self.root = child if child is not None else Node()
        self.root_priors = None


@dataclass(frozen=True)
class SearchResult:
    """What one search of one game produced."""

    move: chess.Move  # the move chosen (sampled at temperature > 0, else the most visited)
    moves: list[chess.Move]  # the root's legal moves
    visit_counts: np.ndarray  # int64 [K]
    pi: np.ndarray  # float32 [K], the policy target over ``moves``, sums to 1 (visits; Gumbel: pi')
    root_value: float  # mean search value for the side to move at the root, in [-1, 1]
    priors: np.ndarray  # float32 [K], the network's priors at the root (no noise)

    target_counts: np.ndarray  # int64 [K], the target as the replay stores it (uint16 weights; see GUMBEL_TARGET_TOTAL)


# A Gumbel policy target is dense over the legal moves; the replay stores it as integer weights scaled
# to this total (uint16), so a move whose weight is below 1 / (2 * total) drops out.
GUMBEL_TARGET_TOTAL = 60_000


def considered_visit_sequence(num_considered: int, num_simulations: int) -> tuple[int, ...]:
    """Sequential halving's schedule (mctx ``get_sequence_of_considered_visits``).

    Entry ``k`` is the visit count that the root action chosen by simulation ``k`` has before it:
    ``num_considered`` actions get equal visits in each of ``ceil(log2 m)`` phases, then the better
    half goes on, down to two.
    """
    if num_considered <= 1:
        return tuple(range(num_simulations))
    log2max = int(math.ceil(math.log2(num_considered)))
    sequence: list[int] = []
    visits = [0] * num_considered
    considered = num_considered
    while len(sequence) < num_simulations:
        extra = max(1, int(num_simulations / (log2max * considered)))
        for _ in range(extra):
            sequence.extend(visits[:considered])
            for i in range(considered):
                visits[i] += 1
        considered = max(2, considered // 2)
    return tuple(sequence[:num_simulations])


def completed_q_transform(priors: npt.ArrayLike, visit_counts: npt.ArrayLike, value_sums: npt.ArrayLike, raw_value: float,
                          c_visit: float, c_scale: float) -> np.ndarray:
    """``sigma(completed q)`` ``float64 [K]`` for the mover at a node (mctx ``qtransform_completed_by_mix_value``).

    ``priors``, ``visit_counts``, ``value_sums`` are ``[K]`` over the node's legal moves (values for
    the node's mover); ``raw_value`` is the network's value of the node.
    """
    visits = np.asarray(visit_counts, dtype=np.float64)
    visited = visits > 0
    q = np.where(visited, np.asarray(value_sums, dtype=np.float64) / np.maximum(visits, 1.0), 0.0)
    total = visits.sum()
    mixed = float(raw_value)
    if total > 0:
        p = np.maximum(np.asarray(priors, dtype=np.float64), np.finfo(np.float64).tiny)
        weighted_q = float((p[visited] * q[visited]).sum() / p[visited].sum())
        mixed = (raw_value + total * weighted_q) / (total + 1.0)
    completed = np.where(visited, q, mixed)
    low, high = completed.min(), completed.max()
    completed = (completed - low) / max(high - low, 1e-8)
    return (c_visit + visits.max(initial=0.0)) * c_scale * completed


def gumbel_policy(priors: npt.ArrayLike, sigma_q: np.ndarray) -> np.ndarray:
    """``softmax(log P + sigma(completed q))`` ``float32 [K]``: Gumbel AlphaZero's improved policy."""
    logits = np.log(np.maximum(np.asarray(priors, dtype=np.float64), 1e-30)) + sigma_q
    logits -= logits.max()
    weights = np.exp(logits)
    return (weights / weights.sum()).astype(np.float32)


def choose_move_index(visit_counts: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """Index of the move to play: argmax visits at temperature 0, else sample ``N^(1/T)``."""
    counts = np.asarray(visit_counts, dtype=np.float64)
    if temperature <= 0:
        return int(np.argmax(counts))
    if counts.max(initial=0) <= 0:
        return int(rng.integers(len(counts)))
    weights = (counts / counts.max()) ** (1.0 / temperature)  # scaled first: no overflow at small T
    return int(rng.choice(len(weights), p=weights / weights.sum()))


class MCTS:
    """Batched PUCT search: ``search(trees)`` advances every game's search and returns one result each."""

    def __init__(self, evaluator: Evaluator, config: SearchConfig = SearchConfig()) -> None:
        self.evaluator = evaluator
        self.config = config

    def search(
        self,
        trees: Sequence[GameTree],
        add_noise: bool | Sequence[bool] = False,
        temperature: float | Sequence[float] = 0.0,
        num_simulations: int | Sequence[int] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[SearchResult]:
        """Run ``num_simulations`` (one budget, or one per tree) new simulations in every tree.

        ``should_stop`` (a UCI engine's stop flag) is asked after every network call: when it says
        yes, the simulations not yet begun are dropped and the trees are returned as they stand.

        The network sees all games' leaves per call. ``add_noise``: PUCT mixes Dirichlet noise into
        each root's priors, Gumbel draws the root's Gumbel variables (without it they are 0 and the
        search is deterministic). ``temperature`` (one value, or one per tree) picks PUCT's move
        from the visit counts; Gumbel picks the best survivor of sequential halving.
        """
        config = self.config
        gumbel = config.algorithm == "gumbel"
        budget = config.num_simulations if num_simulations is None else num_simulations
        budgets = [int(b) for b in _one_per_tree(budget, len(trees))]
        temperatures = [float(t) for t in _one_per_tree(temperature, len(trees))]
        noises = [bool(n) for n in _one_per_tree(add_noise, len(trees))]
        if not len(temperatures) == len(budgets) == len(noises) == len(trees):
            raise ValueError("one temperature, one budget and one noise flag per tree are needed")
        if gumbel:  # sequential halving's schedule assumes a root without visits
            for tree in trees:
                if tree.root.priors is not None and sum(tree.root.child_visits) > 0:
                    tree.root = Node()
        self._expand_roots(trees)
        for tree, tree_budget, noise in zip(trees, budgets, noises):
            root = tree.root
            assert root.moves is not None and root.priors is not None  # _expand_roots saw to both
            count = len(root.moves)
            root_priors = root.priors
            if gumbel:
                tree.gumbel = tree.rng.gumbel(size=count) if noise else np.zeros(count)
                tree.considered_visits = considered_visit_sequence(min(config.gumbel_considered, count), tree_budget)
            elif noise and config.dirichlet_epsilon > 0 and count > 1:
                dirichlet = tree.rng.dirichlet(np.full(count, config.dirichlet_alpha))
                root_priors = ((1 - config.dirichlet_epsilon) * root.priors + config.dirichlet_epsilon * dirichlet).astype(np.float32)
            tree.root_priors = root_priors
            root.set_selection_priors(root_priors)
        # A root with one legal move needs no search: pi is certain whatever the simulations say.
        remaining = [b if len(tree.root.moves or ()) > 1 else 0 for tree, b in zip(trees, budgets)]
        active = [i for i, left in enumerate(remaining) if left > 0]
        while active:
            requests: list[Any] = []
            leaves: list[tuple[Node, list[tuple[Node, int]]]] = []
            for index in active:
                tree = trees[index]
                collected = 0
                while remaining[index] > 0 and collected < config.leaves_per_game:
                    outcome = self._select(tree)
                    if outcome is None:  # collision with a leaf already waiting: stop this game's round
                        break
                    leaf, path, request = outcome
                    if request is None:  # terminal: the true result backs up at once
                        assert leaf.terminal_value is not None
                        self._backup(leaf, path, leaf.terminal_value)
                        remaining[index] -= 1
                    else:
                        requests.append(request)
                        leaves.append((leaf, path))
                        remaining[index] -= 1
                        collected += 1
            if requests:
                priors, values = self.evaluator.evaluate(requests)
                for (leaf, path), leaf_priors, value in zip(leaves, priors, values):
                    leaf.expand(leaf_priors, float(value))
                    self._backup(leaf, path, float(value))
            active = [i for i in active if remaining[i] > 0]
            if should_stop is not None and should_stop():
                break
        return [self._result(tree, temp) for tree, temp in zip(trees, temperatures)]

    # -- internals ------------------------------------------------------------------------------

    def _expand_roots(self, trees: Sequence[GameTree]) -> None:
        """Evaluate every root the network has not seen yet, in one call."""
        requests, roots = [], []
        for tree in trees:
            root = tree.root
            if root.priors is not None:
                continue
            moves = legal_moves(tree.board)
            if terminal_status(tree.board, moves) is not None:
                raise ValueError(f"cannot search a finished game: {tree.board.fen()}")
            # A reused node may have been a draw by repetition inside the old tree; as a root it is not.
            root.terminal_value, root.visits, root.value_sum = None, 0, 0.0
            root.moves = moves
            root.key = position_key(tree.board)
            root.win_index = mating_move_index(tree.board, moves) if self.config.mate_in_one else None
            requests.append(self.evaluator.prepare(tree.board, moves))
            roots.append(root)
        if requests:
            priors, values = self.evaluator.evaluate(requests)
            for root, root_priors, value in zip(roots, priors, values):
                root.expand(root_priors, float(value))
                root.visits += 1
                root.value_sum += float(value)

    def _select(self, tree: GameTree) -> tuple[Node, list[tuple[Node, int]], Any] | None:
        """Descend from the root to a leaf, adding virtual visits on the way.

        Returns ``(leaf, path, request)``: ``request`` is ``None`` when the leaf is terminal. Returns
        ``None`` (and undoes the virtual visits) when the leaf is already waiting for the network.
        """
        config = self.config
        board = tree.board
        node = tree.root
        path: list[tuple[Node, int]] = []
        virtual_loss = config.virtual_loss
        c_puct, c_base, fpu_reduction = config.c_puct, config.c_puct_base, config.fpu_reduction
        log, sqrt = math.log, math.sqrt
        twofold = config.twofold_draw
        mate_in_one = config.mate_in_one
        gumbel = config.algorithm == "gumbel"
        request = None
        while True:
            if node.terminal_value is not None:
                break
            if node.priors is None:
                if node.pending:
                    for parent, index in path:
                        parent.visits -= 1
                        parent.child_visits[index] -= 1
                        parent.child_values[index] += virtual_loss
                    self._unwind(board, len(path))
                    return None
                if node.moves is None:
                    moves = legal_moves(board)
                    node.moves = moves
                    status = terminal_status(board, moves)
                    if status is not None:
                        node.terminal_value = status[0]
                        break
                    node.key = position_key(board)
                    if twofold and self._repeats_in_tree(node.key, path, board.halfmove_clock):
                        node.terminal_value = 0.0
                        break
                    if mate_in_one and mating_move_index(board, moves) is not None:
                        node.terminal_value = 1.0  # a proven win for the mover (module docs)
                        break
                node.pending = True
                request = self.evaluator.prepare(board, node.moves)
                break
            node_moves = node.moves  # known: the node has priors
            assert node_moves is not None
            if node.win_index is not None or gumbel:
                if node.win_index is not None:
                    best_index = node.win_index
                elif node is tree.root:
                    best_index = self._gumbel_root_index(tree)
                else:
                    best_index = self._gumbel_interior_index(node)
                children = node.children
                if children[best_index] is None:
                    node.tried.append(best_index)
                    children[best_index] = Node()
                node.visits += 1
                node.child_visits[best_index] += 1
                node.child_values[best_index] -= virtual_loss
                path.append((node, best_index))
                board.push(node_moves[best_index])
                child = children[best_index]
                assert child is not None
                node = child
                continue
            # PUCT: Q + U over the tried moves and the best untried one (all untried share the FPU).
            parent_visits = node.visits
            c = c_puct + log((parent_visits + c_base + 1) / c_base) if c_base > 0 else c_puct
            scale = c * sqrt(parent_visits)
            visits, values, priors = node.child_visits, node.child_values, node.prior_list
            best_index, best_score = -1, -math.inf
            for i in node.tried:
                n = visits[i]
                score = (values[i] / n if n else 0.0) + scale * priors[i] / (1 + n)
                if score > best_score:
                    best_index, best_score = i, score
            children, order, cursor = node.children, node.order, node.cursor
            count = len(order)
            while cursor < count and children[order[cursor]] is not None:
                cursor += 1
            node.cursor = cursor
            if cursor < count:
                i = order[cursor]
                if node.value_sum / parent_visits - fpu_reduction + scale * priors[i] > best_score:
                    best_index = i
                    node.tried.append(i)
                    children[i] = Node()
            node.visits += 1
            visits[best_index] += 1
            values[best_index] -= virtual_loss
            path.append((node, best_index))
            board.push(node_moves[best_index])
            child = children[best_index]
            assert child is not None
            node = child
        self._unwind(board, len(path))
        return node, path, request

    def _gumbel_root_index(self, tree: GameTree) -> int:
        """The considered root action with the scheduled visit count and the best ``g + logits + sigma(q)``."""
        root = tree.root
        visits = np.asarray(root.child_visits, dtype=np.int64)
        simulation = int(visits.sum())
        schedule = tree.considered_visits
        target = schedule[simulation] if simulation < len(schedule) else int(visits.max())
        score = self._gumbel_scores(tree)
        score[visits != target] = -np.inf
        return int(np.argmax(score))

    def _gumbel_scores(self, tree: GameTree) -> np.ndarray:
        """``g + logits + sigma(completed q)`` ``[K]`` at the root (logits shifted to max 0, floored at -1e9)."""
        root, config = tree.root, self.config
        assert root.priors is not None and tree.gumbel is not None
        sigma_q = completed_q_transform(root.priors, root.child_visits, root.child_values, root.raw_value,
                                        config.gumbel_c_visit, config.gumbel_c_scale)
        logits = np.log(np.maximum(np.asarray(root.priors, dtype=np.float64), 1e-30))
        return np.maximum(-1e9, tree.gumbel + (logits - logits.max()) + sigma_q)

    def _gumbel_interior_index(self, node: Node) -> int:
        """``argmax pi'(a) - N(a) / (1 + sum N)`` below the root, scoring the tried moves and the best untried one.

        Untried moves share the mixed value as completed Q, so their total weight in the softmax
        is ``(1 - sum of tried priors) * exp(sigma(v_mix))`` and the best of them is the one with
        the highest prior.
        """
        config = self.config
        visits, values, priors, tried = node.child_visits, node.child_values, node.prior_list, node.tried
        children, order, cursor = node.children, node.order, node.cursor
        count = len(order)
        while cursor < count and children[order[cursor]] is not None:
            cursor += 1
        node.cursor = cursor
        if not tried:
            return order[cursor]
        total = 0
        prior_tried = weighted = 0.0
        max_visits = 0
        qs = []
        for i in tried:
            n = visits[i]
            q = values[i] / n if n else 0.0
            qs.append(q)
            total += n
            if n > max_visits:
                max_visits = n
            if n:
                prior_tried += priors[i]
                weighted += priors[i] * q
        mixed = node.raw_value
        if total and prior_tried > 0:
            mixed = (node.raw_value + total * weighted / prior_tried) / (total + 1)
        untried = cursor < count
        low = min(qs) if not untried else min(min(qs), mixed)
        high = max(qs) if not untried else max(max(qs), mixed)
        scale = (config.gumbel_c_visit + max_visits) * config.gumbel_c_scale / max(high - low, 1e-8)
        sigmas = [(q - low) * scale for q in qs]
        sigma_mixed = (mixed - low) * scale
        top = max(max(sigmas), sigma_mixed if untried else -math.inf)
        exp = math.exp
        weights = [priors[i] * exp(sigma - top) for i, sigma in zip(tried, sigmas)]
        untried_weight = max(0.0, 1.0 - sum(priors[i] for i in tried)) * exp(sigma_mixed - top) if untried else 0.0
        norm = sum(weights) + untried_weight
        if norm <= 0:
            norm = 1.0
        best_index, best_score = -1, -math.inf
        for i, weight in zip(tried, weights):
            score = weight / norm - visits[i] / (1 + total)
            if score > best_score:
                best_index, best_score = i, score
        if untried:
            i = order[cursor]
            if priors[i] * exp(sigma_mixed - top) / norm > best_score:
                best_index = i
        return best_index

    @staticmethod
    def _repeats_in_tree(key: tuple, path: list[tuple[Node, int]], halfmove_clock: int) -> bool:
        """True when the position ``key`` (at the end of ``path``) occurred at an ancestor in this tree.

        Only ancestors within the halfmove clock can match (a pawn move or capture in between makes
        a repetition impossible), and only at even distances of at least 4 plies (same side to move).
        """
        depth = len(path)
        for distance in range(4, min(depth, halfmove_clock) + 1, 2):
            if path[depth - distance][0].key == key:
                return True
        return False

    @staticmethod
    def _unwind(board: chess.Board, plies: int) -> None:
        for _ in range(plies):
            board.pop()

    def _backup(self, leaf: Node, path: list[tuple[Node, int]], value: float) -> None:
        """Add ``value`` (for the leaf's mover) to the leaf and, negated at each step, to its ancestors."""
        virtual_loss = self.config.virtual_loss
        leaf.visits += 1
        leaf.value_sum += value
        for node, index in reversed(path):
            value = -value
            node.child_values[index] += virtual_loss + value
            node.value_sum += value

    def _result(self, tree: GameTree, temperature: float) -> SearchResult:
        root = tree.root
        assert root.moves is not None and root.priors is not None  # a searched root is expanded
        counts = np.array(root.child_visits, dtype=np.int64)
        if counts.sum() == 0:  # a single legal move: nothing was searched
            counts = np.ones(len(root.moves), dtype=np.int64) if len(root.moves) == 1 else counts
        pi = (counts / counts.sum()).astype(np.float32)
        if self.config.algorithm == "gumbel" and len(root.moves) > 1:
            config = self.config
            sigma_q = completed_q_transform(root.priors, root.child_visits, root.child_values, root.raw_value,
                                            config.gumbel_c_visit, config.gumbel_c_scale)
            pi = gumbel_policy(root.priors, sigma_q)
            target_counts = np.rint(pi.astype(np.float64) * GUMBEL_TARGET_TOTAL).astype(np.int64)
            # The move: the best survivor (most visited) by g + logits + sigma(q).
            score = self._gumbel_scores(tree)
            score[counts != counts.max()] = -np.inf
            index = int(np.argmax(score))
        else:
            index = choose_move_index(counts, temperature, tree.rng)
            target_counts = counts
        return SearchResult(
            move=root.moves[index],
            moves=list(root.moves),
            visit_counts=counts,
            pi=pi,
            root_value=float(np.clip(root.value, -1.0, 1.0)),
            priors=np.asarray(root.priors, dtype=np.float32),
            target_counts=target_counts,
        )


def _one_per_tree(value: Any, count: int) -> list[Any]:
    """A search argument for each of ``count`` trees: a scalar repeated, or a sequence (or array) as it is."""
    return [value] * count if np.ndim(value) == 0 else list(value)


def position_key(board: chess.Board) -> tuple:
    """What makes two positions with the same side to move a repetition, within one halfmove clock.

    Pieces and castling rights; the side to move is implied by comparing at even distances, and no
    en passant right survives a window without pawn moves.
    """
    return (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
            board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK], board.castling_rights)


def principal_variation(root: Node, max_length: int = 20) -> list[chess.Move]:
    """The line of most-visited children from ``root`` (stops at an unexpanded or unvisited node)."""
    line: list[chess.Move] = []
    node: Node | None = root
    while node is not None and node.priors is not None and node.moves is not None and len(line) < max_length:
        if max(node.child_visits, default=0) <= 0:
            break
        index = int(np.argmax(node.child_visits))
        line.append(node.moves[index])
        node = node.children[index]
    return line


def value_to_centipawns(value: float) -> int:
    """Search value in [-1, 1] for the side to move -> centipawns, as lc0 does: ``111.714640912 * tan(1.5620688421 * v)``.

    Clipped to +-12800 so a near-certain result stays a finite UCI score.
    """
    value = max(-1.0, min(1.0, float(value)))
    return int(max(-12800, min(12800, round(111.714640912 * math.tan(1.5620688421 * value)))))
