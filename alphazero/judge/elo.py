"""Match statistics for judging engines: Elo, intervals, LOS, SPRT and multi-player ratings.

This module owns every number the project reports about playing strength, computed the way
engine developers do: a single match as cutechess-cli reports it (trinomial W/D/L statistics),
game pairs with colours swapped as fishtest counts them (pentanomial statistics), the sequential
probability ratio test (SPRT) with logistic Elo bounds used by fishtest and cutechess-cli, and
Bradley-Terry maximum-likelihood ratings over many players as Ordo and BayesElo compute them (the
scale fixed by one anchor, the mean, or players pinned at calibrated ratings; Wald or profile-likelihood
intervals), and the Wilson interval of a share (puzzles solved); and how a match's Elo is said (``elo_text``: a bound as a
bound, never the clamp). Everything is pure computation on counts (numpy and ``math`` only); nothing runs at import time.
Bad input (negative counts, no games, unknown players) raises ``ValueError``.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

SCORE_EPSILON = 1e-6
"""Scores are clamped into [SCORE_EPSILON, 1 - SCORE_EPSILON] before conversion to Elo."""

ELO_LIMIT = 400.0 * math.log10((1.0 - SCORE_EPSILON) / SCORE_EPSILON)
"""Largest Elo difference ``score_to_elo`` returns (about 2400), the Elo of the clamped score."""

Z_95 = 1.959964
"""Two-sided 95% quantile of the standard normal distribution."""

LOGISTIC_SCALE = math.log(10.0) / 400.0
"""Natural-log slope of the Elo logistic: elo_to_score(d) = 1 / (1 + exp(-LOGISTIC_SCALE * d))."""

MAX_NEWTON_STEP = 400.0
"""The most any rating moves in one Newton step of ``fit_ratings`` (a trust region). Far from the optimum a
player whose games are all against much weaker or stronger opponents has almost no curvature, and a full
Newton step throws it thousands of Elo away, where its curvature underflows and the system turns singular."""

SPRT_REGULARISATION = 1e-3
"""Fishtest's regulariser (SPRT with prior_observations = 0): an empty cell counts as this many."""

PAIR_SUMS = (0.0, 0.5, 1.0, 1.5, 2.0)
"""Summed score of a game pair for each of the five pentanomial cells."""


# --------------------------------------------------------------------------------------------
# Elo <-> score


def elo_to_score(elo: float) -> float:
    """Expected score of a player ``elo`` points stronger than the opponent.

    E(d) = 1 / (1 + 10^(-d/400)), evaluated in a form that cannot overflow for any finite d
    (for d < 0 it uses t / (1 + t) with t = 10^(d/400)).
    """
    elo = float(elo)
    if math.isnan(elo):
        raise ValueError("elo must be a number, got NaN")
    if elo >= 0:
        return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))
    power = 10.0 ** (elo / 400.0)
    return power / (1.0 + power)


def score_to_elo(score: float) -> float:
    """Elo difference whose expected score is ``score``, the inverse of ``elo_to_score``.

    d(s) = 400 * log10(s / (1 - s)). The score is first clamped into [1e-6, 1 - 1e-6]
    (``SCORE_EPSILON``), so a perfect score, a zero score and interval bounds that spill outside
    [0, 1] all map to the finite +-``ELO_LIMIT`` (about 2400 Elo, exactly symmetric) instead of
    infinities.
    """
    score = float(score)
    if math.isnan(score):
        raise ValueError("score must be a number, got NaN")
    if score <= SCORE_EPSILON:
        return -ELO_LIMIT
    if score >= 1.0 - SCORE_EPSILON:
        return ELO_LIMIT
    return 400.0 * math.log10(score / (1.0 - score))


def _count(value: object, name: str) -> int:
    """A non-negative integer count, or ValueError naming ``name``."""
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if count < 0:
        raise ValueError(f"{name} must be non-negative, got {count}")
    return count


def _normal_cdf(value: float) -> float:
    """Standard normal cumulative distribution Phi(x) = (1 + erf(x / sqrt 2)) / 2."""
    return 0.5 * (1.0 + math.erf(value / math.sqrt(2.0)))


def _mean_and_variance(counts: Sequence[float], values: Sequence[float]) -> tuple[float, float, float]:
    """Total N, mean and population variance of a distribution given as counts over ``values``."""
    weights = np.asarray(counts, dtype=float)
    points = np.asarray(values, dtype=float)
    total = float(weights.sum())
    mean = float(weights @ points) / total
    variance = float(weights @ (points - mean) ** 2) / total
    return total, mean, max(variance, 0.0)


def _elo_interval(score: float, variance: float, samples: float) -> tuple[float, float]:
    """95% normal interval on a sample mean score, mapped to Elo: s +- 1.959964 sqrt(var / N).

    Where every sample scored 1 (or 0) the variance is 0 and the normal interval collapses onto the
    clamped +-``ELO_LIMIT``; there the bound on the open side is the exact (Clopper-Pearson) one
    for N successes in N trials, p >= 0.025^(1/N) (100 games won: p >= 0.964, +570 Elo).
    """
    if variance == 0.0 and score in (0.0, 1.0):
        bound = score_to_elo(0.025 ** (1.0 / samples))
        return (bound, ELO_LIMIT) if score == 1.0 else (-ELO_LIMIT, -bound)
    half_width = Z_95 * math.sqrt(variance / samples)
    return score_to_elo(score - half_width), score_to_elo(score + half_width)


def _format_elo(value: float, digits: int = 1) -> str:
    return f"{value:+.{digits}f}"


def elo_text(elo: float, low: float, high: float, digits: int = 1, interval: bool = True) -> str:
    """An Elo difference with its 95% interval as every printer of a match result says it:
    ``Elo +x [low, high] (95%)``. At a score of 100% (0%) there is only a lower (upper) bound, and it
    is said as one, ``Elo >= low (95%; every game won: no upper bound)``; an interval end at the clamp
    (``ELO_LIMIT``, the normal interval spilling past a score of 1 or 0) reads ``no upper bound``
    (``no lower bound``), not a number. ``interval`` False: the estimate alone (``Elo +x``), or the
    bound at a score of 100% or 0% (``Elo >= low``); ``digits`` after the point."""
    if elo >= ELO_LIMIT:
        return f"Elo >= {_format_elo(low, digits)}" + (" (95%; every game won: no upper bound)" if interval else "")
    if elo <= -ELO_LIMIT:
        return f"Elo <= {_format_elo(high, digits)}" + (" (95%; every game lost: no lower bound)" if interval else "")
    if not interval:
        return f"Elo {_format_elo(elo, digits)}"
    lower = _format_elo(low, digits) if low > -ELO_LIMIT else "no lower bound"
    upper = _format_elo(high, digits) if high < ELO_LIMIT else "no upper bound"
    return f"Elo {_format_elo(elo, digits)} [{lower}, {upper}] (95%)"


# --------------------------------------------------------------------------------------------
# Trinomial match statistics


@dataclass(frozen=True)
class MatchResult:
    """Trinomial statistics of a match between A and B, counted from A's point of view.

    With n = w + d + l games, score s = (w + d/2) / n and Elo = 400 log10(s / (1 - s)). The
    per-game score takes the values 1, 1/2, 0 with frequencies w/n, d/n, l/n, so its variance is
    var = (w (1 - s)^2 + d (1/2 - s)^2 + l s^2) / n; the 95% interval is the normal interval
    s +- 1.959964 sqrt(var / n) mapped through ``score_to_elo`` (as cutechess-cli does); at a 100% or
    0% score, where that interval collapses, the open side's bound is the exact binomial one
    (``_elo_interval``), and every value stays finite. LOS, the likelihood of superiority, ignores draws:
    LOS = (1 + erf((w - l) / sqrt(2 (w + l)))) / 2, and 1/2 when there are no decisive games.
    """

    wins: int
    draws: int
    losses: int
    games: int = field(init=False)
    score: float = field(init=False)
    draw_ratio: float = field(init=False)
    elo: float = field(init=False)
    elo_low: float = field(init=False)
    elo_high: float = field(init=False)
    los: float = field(init=False)

    def __post_init__(self) -> None:
        wins = _count(self.wins, "wins")
        draws = _count(self.draws, "draws")
        losses = _count(self.losses, "losses")
        games = wins + draws + losses
        if games == 0:
            raise ValueError("a match result needs at least one game, got 0/0/0")
        _, score, variance = _mean_and_variance((wins, draws, losses), (1.0, 0.5, 0.0))
        elo_low, elo_high = _elo_interval(score, variance, games)
        decisive = wins + losses
        los = 0.5 if decisive == 0 else _normal_cdf((wins - losses) / math.sqrt(decisive))
        derived = dict(wins=wins, draws=draws, losses=losses, games=games, score=score,
                       draw_ratio=draws / games, elo=score_to_elo(score), elo_low=elo_low,
                       elo_high=elo_high, los=los)
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def __str__(self) -> str:
        return (f"W/D/L {self.wins}/{self.draws}/{self.losses}, score {self.score:.3f}, "
                f"{elo_text(self.elo, self.elo_low, self.elo_high)}, LOS {100.0 * self.los:.1f}%")


def match_result(wins: int, draws: int, losses: int) -> MatchResult:
    """Statistics of a W/D/L result from A's point of view; see ``MatchResult`` for the formulas."""
    return MatchResult(wins, draws, losses)


# --------------------------------------------------------------------------------------------
# Pentanomial (game pair) statistics


def pentanomial(pair_scores: Iterable[float]) -> list[int]:
    """Count game pairs by their summed score 0, 0.5, 1, 1.5, 2 into a five-element list.

    Each entry of ``pair_scores`` is the total score A made over the two games of one pair (same
    opening, colours swapped), so it must be one of 0, 0.5, 1, 1.5, 2; cell i counts pairs with
    sum i/2, which is the layout fishtest uses.
    """
    counts = [0] * len(PAIR_SUMS)
    for pair_score in pair_scores:
        doubled = 2.0 * float(pair_score)
        cell = round(doubled)
        if not 0 <= cell <= 4 or abs(doubled - cell) > 1e-9:
            raise ValueError(f"a pair score must be one of 0, 0.5, 1, 1.5, 2, got {pair_score!r}")
        counts[cell] += 1
    return counts


def _pentanomial_counts(counts: Sequence[int]) -> tuple[int, ...]:
    if len(counts) != len(PAIR_SUMS):
        raise ValueError(f"pentanomial counts need 5 cells (pair sums 0..2), got {len(counts)}")
    return tuple(_count(value, f"pentanomial count [{index}]") for index, value in enumerate(counts))


@dataclass(frozen=True)
class PentanomialResult:
    """Pentanomial statistics of N game pairs, counted from A's point of view.

    Cell i of ``counts`` holds the pairs in which A scored i/2 points out of 2, so a pair's score
    per game is x_i = i/4. Then s = sum(c_i x_i) / N, var = sum(c_i (x_i - s)^2) / N (the variance
    over pairs, as fishtest takes it, which accounts for the correlation between the two games of
    a pair), the 95% interval is s +- 1.959964 sqrt(var / N) mapped through ``score_to_elo``, and
    LOS = (1 + erf((s - 1/2) / sqrt(2 var / N))) / 2 (1/2 when var = 0 and s = 1/2, otherwise 1 or
    0 when var = 0).
    """

    counts: tuple[int, ...]
    pairs: int = field(init=False)
    score: float = field(init=False)
    elo: float = field(init=False)
    elo_low: float = field(init=False)
    elo_high: float = field(init=False)
    los: float = field(init=False)

    def __post_init__(self) -> None:
        counts = _pentanomial_counts(self.counts)
        pairs = sum(counts)
        if pairs == 0:
            raise ValueError("a pentanomial result needs at least one game pair, got none")
        _, score, variance = _mean_and_variance(counts, [pair_sum / 2.0 for pair_sum in PAIR_SUMS])
        elo_low, elo_high = _elo_interval(score, variance, pairs)
        if variance > 0.0:
            los = _normal_cdf((score - 0.5) / math.sqrt(variance / pairs))
        elif math.isclose(score, 0.5):
            los = 0.5
        else:
            los = 1.0 if score > 0.5 else 0.0
        derived = dict(counts=counts, pairs=pairs, score=score, elo=score_to_elo(score),
                       elo_low=elo_low, elo_high=elo_high, los=los)
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def games(self) -> int:
        """Number of games, two per pair."""
        return 2 * self.pairs

    def __str__(self) -> str:
        cells = ", ".join(str(count) for count in self.counts)
        return (f"Pairs [{cells}], score {self.score:.3f}, {elo_text(self.elo, self.elo_low, self.elo_high)}, "
                f"LOS {100.0 * self.los:.1f}%")


def pentanomial_result(counts: Sequence[int]) -> PentanomialResult:
    """Statistics of five pentanomial cell counts; see ``PentanomialResult`` for the formulas."""
    return PentanomialResult(tuple(counts))


# --------------------------------------------------------------------------------------------
# Sequential probability ratio test


@dataclass(frozen=True)
class SPRTStatus:
    """Where an SPRT stands: log-likelihood ratio, its two bounds and the decision (or None)."""

    llr: float
    lower_bound: float
    upper_bound: float
    decision: str | None


@dataclass(frozen=True)
class SPRT:
    """Generalised SPRT of H0: Elo = elo0 against H1: Elo = elo1 (logistic Elo, as fishtest).

    The test stops when the log-likelihood ratio leaves (log(beta / (1 - alpha)),
    log((1 - beta) / alpha)): above it accepts H1, below it accepts H0. The LLR uses the normal
    approximation of fishtest and cutechess-cli: with s0 = E(elo0), s1 = E(elo1) and the mean s and
    population variance var of the per-game score (trinomial: 1, 1/2, 0) or of the per-pair score
    divided by 2 (pentanomial: 0, 1/4, ..., 1) over N games or pairs,
    LLR = N (s1 - s0) (2 s - s0 - s1) / (2 var); with no games the LLR is 0 (no information).
    Regularisation: s and var are taken after adding ``prior_observations`` virtual games (pairs)
    spread evenly over the outcome cells (mean 1/2), while N stays the real count. Without it a
    one-sided start (say three wins) has var ~ 0 and the LLR explodes; fishtest's own fix (an empty
    cell counts as 1e-3, used when prior_observations = 0) is meant for large batches and, checked
    after every game, decides after the very first one. Simulated at elo0 and elo1 with draw
    ratios 0 to 0.6, the default of 2 keeps both error rates within about a point of alpha, beta.
    """

    elo0: float
    elo1: float
    alpha: float = 0.05
    beta: float = 0.05
    prior_observations: float = 2.0

    def __post_init__(self) -> None:
        for name in ("elo0", "elo1", "alpha", "beta", "prior_observations"):
            value = float(getattr(self, name))
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value}")
            object.__setattr__(self, name, value)
        if not self.elo0 < self.elo1:
            raise ValueError(f"SPRT needs elo0 < elo1, got elo0={self.elo0}, elo1={self.elo1}")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not 0.0 < value < 0.5:
                raise ValueError(f"SPRT needs 0 < {name} < 0.5, got {value}")
        if self.prior_observations < 0.0:
            raise ValueError(f"prior_observations must be non-negative, got {self.prior_observations}")

    @property
    def lower_bound(self) -> float:
        """log(beta / (1 - alpha)): at or below it the test accepts H0."""
        return math.log(self.beta / (1.0 - self.alpha))

    @property
    def upper_bound(self) -> float:
        """log((1 - beta) / alpha): at or above it the test accepts H1."""
        return math.log((1.0 - self.beta) / self.alpha)

    def _llr(self, counts: Sequence[int], values: Sequence[float]) -> float:
        samples: float = sum(counts)
        if samples == 0:
            return 0.0
        if self.prior_observations > 0.0:
            spread = self.prior_observations / len(counts)
            _, score, variance = _mean_and_variance([count + spread for count in counts], values)
        else:
            regularised = [count if count > 0 else SPRT_REGULARISATION for count in counts]
            samples, score, variance = _mean_and_variance(regularised, values)
        if variance <= 0.0:
            return 0.0
        score0, score1 = elo_to_score(self.elo0), elo_to_score(self.elo1)
        return samples * (score1 - score0) * (2.0 * score - score0 - score1) / (2.0 * variance)

    def llr_trinomial(self, wins: int, draws: int, losses: int) -> float:
        """LLR of a W/D/L result from A's point of view (per-game scores 1, 1/2, 0)."""
        counts = (_count(wins, "wins"), _count(draws, "draws"), _count(losses, "losses"))
        return self._llr(counts, (1.0, 0.5, 0.0))

    def llr_pentanomial(self, counts: Sequence[int]) -> float:
        """LLR of pentanomial pair counts (cell i: pairs where A scored i/2 of 2, value i/4)."""
        return self._llr(_pentanomial_counts(counts), [pair_sum / 2.0 for pair_sum in PAIR_SUMS])

    def decide(self, llr: float) -> str | None:
        """Return "H1" (accept elo1: A is stronger) when llr >= upper_bound, "H0" (accept elo0) when
        llr <= lower_bound, and None while the test must continue."""
        if llr >= self.upper_bound:
            return "H1"
        if llr <= self.lower_bound:
            return "H0"
        return None

    def status(self, wins: int, draws: int, losses: int) -> SPRTStatus:
        """LLR, bounds and decision for a W/D/L result."""
        llr = self.llr_trinomial(wins, draws, losses)
        return SPRTStatus(llr, self.lower_bound, self.upper_bound, self.decide(llr))

    def status_pentanomial(self, counts: Sequence[int]) -> SPRTStatus:
        """LLR, bounds and decision for pentanomial pair counts."""
        llr = self.llr_pentanomial(counts)
        return SPRTStatus(llr, self.lower_bound, self.upper_bound, self.decide(llr))


# --------------------------------------------------------------------------------------------
# Binomial shares


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial share: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    if trials <= 0:
        raise ValueError("the Wilson interval needs at least one trial")
    share = successes / trials
    denominator = 1.0 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1.0 - share) / trials + z * z / (4 * trials * trials)) / denominator
    # At 0 or n successes the bound is exactly 0 or 1; say so rather than trust the rounding.
    low = 0.0 if successes == 0 else max(0.0, min(share, centre - half))
    high = 1.0 if successes == trials else min(1.0, max(share, centre + half))
    return low, high


# --------------------------------------------------------------------------------------------
# Bradley-Terry ratings of many players


@dataclass(frozen=True)
class Rating:
    """One player's fitted rating: Elo with its 95% interval, games played and score fraction."""

    name: str
    elo: float
    elo_low: float
    elo_high: float
    games: int
    score: float


def _components(adjacency: np.ndarray) -> list[list[int]]:
    """Connected components of an undirected graph given as a boolean adjacency matrix."""
    size = adjacency.shape[0]
    seen = [False] * size
    components = []
    for start in range(size):
        if seen[start]:
            continue
        seen[start] = True
        component, queue = [], deque([start])
        while queue:
            node = queue.popleft()
            component.append(node)
            for neighbour in np.flatnonzero(adjacency[node]):
                if not seen[neighbour]:
                    seen[neighbour] = True
                    queue.append(int(neighbour))
        components.append(sorted(component))
    return components


def _reachable(adjacency: np.ndarray, start: int) -> np.ndarray:
    """Boolean mask of nodes reachable from ``start`` along directed edges."""
    reached = np.zeros(adjacency.shape[0], dtype=bool)
    reached[start] = True
    frontier = reached.copy()
    while frontier.any():
        frontier = adjacency[frontier].any(axis=0) & ~reached
        reached |= frontier
    return reached


def _aggregate(games: Iterable[tuple[str, str, float]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Player names (first-seen order), games matrix n[i, j] and points matrix s[i, j] of i vs j."""
    index: dict[str, int] = {}
    pair_totals: dict[tuple[int, int], list[float]] = {}
    for number, game in enumerate(games):
        try:
            player, opponent, score = game
        except (TypeError, ValueError):
            raise ValueError(f"game {number} must be (player_a, player_b, score_of_a), "
                             f"got {game!r}") from None
        if player == opponent:
            raise ValueError(f"game {number}: {player!r} cannot play itself")
        score = float(score)
        if score not in (0.0, 0.5, 1.0):
            raise ValueError(f"game {number}: score of A must be 0, 0.5 or 1, got {score!r}")
        first = index.setdefault(player, len(index))
        second = index.setdefault(opponent, len(index))
        totals = pair_totals.setdefault((first, second), [0.0, 0.0])
        totals[0] += 1.0
        totals[1] += score
    if not index:
        raise ValueError("fit_ratings needs at least one game, got none")
    size = len(index)
    games_matrix = np.zeros((size, size))
    points_matrix = np.zeros((size, size))
    for (first, second), (count, points) in pair_totals.items():
        games_matrix[first, second] += count
        games_matrix[second, first] += count
        points_matrix[first, second] += points
        points_matrix[second, first] += count - points
    return list(index), games_matrix, points_matrix


def player_groups(games: Iterable[tuple[str, str, float]]) -> list[set[str]]:
    """Players linked by games, one set per group (the connected components of who played whom).

    ``games`` as for ``fit_ratings``; ratings compare only players within one group, so a rating
    list needs exactly one. No games: no groups.
    """
    games = list(games)
    if not games:
        return []
    names, games_matrix, _ = _aggregate(games)
    return [{names[player] for player in component} for component in _components(games_matrix > 0)]


def _log_likelihood(ratings: np.ndarray, points: np.ndarray) -> float:
    """sum over ordered pairs of s[i, j] log P(i beats j), P = 1 / (1 + exp(-c (r_i - r_j)))."""
    differences = LOGISTIC_SCALE * (ratings[:, None] - ratings[None, :])
    return float(-(points * np.logaddexp(0.0, -differences)).sum())


def _gradient_and_hessian(ratings: np.ndarray, games: np.ndarray,
                          points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of the log-likelihood and Hessian of the negative log-likelihood (in Elo units).

    g_i = c sum_j (s_ij - n_ij p_ij); H = c^2 (diag(sum_j w_ij) - w) with w_ij = n_ij p_ij (1 - p_ij).
    """
    differences = LOGISTIC_SCALE * (ratings[:, None] - ratings[None, :])
    probabilities = 0.5 * (1.0 + np.tanh(0.5 * differences))
    gradient = LOGISTIC_SCALE * (points - games * probabilities).sum(axis=1)
    weights = games * probabilities * (1.0 - probabilities)
    hessian = LOGISTIC_SCALE ** 2 * (np.diag(weights.sum(axis=1)) - weights)
    return gradient, hessian


def _newton(games: np.ndarray, points: np.ndarray, fixed: np.ndarray,
            start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximise the log-likelihood over the players not ``fixed`` (a boolean mask, at least one True),
    starting from ``start`` (the fixed players keep their values there), by damped Newton steps of at most
    ``MAX_NEWTON_STEP`` Elo.

    Returns the ratings and the Hessian of the negative log-likelihood at the optimum.
    """
    size = games.shape[0]
    free = np.flatnonzero(~fixed)
    ratings = np.array(start, dtype=float)
    likelihood = _log_likelihood(ratings, points)
    for _ in range(200):
        gradient, hessian = _gradient_and_hessian(ratings, games, points)
        if free.size == 0:
            return ratings, hessian
        step = np.zeros(size)
        step[free] = np.linalg.solve(hessian[np.ix_(free, free)], gradient[free])
        largest = float(np.abs(step).max())
        if largest > MAX_NEWTON_STEP:  # still an ascent direction: a positive multiple of Newton's
            step *= MAX_NEWTON_STEP / largest
        slope = float(gradient @ step)
        length = 1.0
        while True:
            candidate = ratings + length * step
            candidate_likelihood = _log_likelihood(candidate, points)
            if candidate_likelihood >= likelihood + 1e-4 * length * slope or length < 1e-10:
                break
            length *= 0.5
        ratings, likelihood = candidate, candidate_likelihood
        if float(np.abs(length * step).max()) < 1e-9:
            break
    gradient, hessian = _gradient_and_hessian(ratings, games, points)
    return ratings, hessian


def _profile_bound(games: np.ndarray, points: np.ndarray, fixed: np.ndarray, ratings: np.ndarray,
                   player: int, direction: float, first_step: float) -> float:
    """Where the profile log-likelihood of ``player`` has fallen by Z_95^2 / 2 from its maximum, on the side
    ``direction`` (+1 above the estimate, -1 below); +-inf when it never falls that far within ELO_LIMIT.

    The profile at x: ``player`` held at x, every other free player refitted (``_newton``), so the
    uncertainty of the players it was rated through (a link below the pinned ones) widens the interval.
    """
    target = _log_likelihood(ratings, points) - 0.5 * Z_95 ** 2
    held = fixed.copy()
    held[player] = True
    start = ratings.copy()

    def profile(offset: float) -> float:
        start[player] = ratings[player] + direction * offset
        fitted, _ = _newton(games, points, held, start)
        start[:] = fitted  # a warm start for the next point
        return _log_likelihood(fitted, points)

    inside, outside = 0.0, max(first_step, 1.0)
    while profile(outside) > target:
        inside, outside = outside, 2.0 * outside
        if inside > ELO_LIMIT:
            return direction * math.inf
    while outside - inside > 0.01:  # bisection to a hundredth of an Elo
        middle = 0.5 * (inside + outside)
        inside, outside = (middle, outside) if profile(middle) > target else (inside, middle)
    return float(ratings[player] + direction * 0.5 * (inside + outside))


def fit_ratings(games: Iterable[tuple[str, str, float]], anchor: str | None = None,
                anchor_elo: float = 0.0, prior_games: float = 1.0, pinned: Mapping[str, float] | None = None,
                intervals: str = "wald") -> dict[str, Rating]:
    """Bradley-Terry maximum-likelihood Elo ratings of every player from (a, b, score of a) games.

    Model: P(a beats b) = 1 / (1 + 10^((r_b - r_a)/400)); a draw counts as half a win for each
    side (as Ordo). Games are first aggregated into pairwise games n_ij and points s_ij, and the
    log-likelihood sum_{i != j} s_ij log P(i beats j) is maximised by damped Newton steps. The
    regularising prior adds ``prior_games`` virtual draws to every pair of players who actually
    played each other (n_ij += prior, s_ij += prior/2), which keeps a 100% or 0% score finite while
    barely moving well-sampled ratings; prior_games = 0 gives the plain maximum likelihood and
    raises ValueError when it does not exist.

    The scale (Elo is defined up to a constant) is fixed one of three ways: ``pinned`` {name: Elo}
    holds one or more players at given ratings and fits the rest (Ordo's multiple anchors: a
    calibrated scale such as Stockfish's ``UCI_Elo`` levels); else ``anchor`` has ``anchor_elo``; else
    the mean rating is ``anchor_elo`` (0 by default). Every group of players connected by games needs
    a pinned player (with ``pinned``), else ValueError naming the players cut off.

    95% intervals, ``intervals="wald"``: r +- 1.959964 sqrt(C_ii), with C the inverse of the Hessian of the
    negative log-likelihood (prior included) with the gauge fixed: the anchor's (pinned players') rows
    and columns are dropped (so their intervals have zero width), and with no anchor that covariance is
    mapped through the centring matrix J = I - 11^T/k (C = J C_anchored J), the covariance of mean-fixed
    ratings. ``intervals="profile"`` (needs an anchor or pins): the profile-likelihood interval, every r
    whose profile log-likelihood (the others refitted with r held) is within 1.959964^2 / 2 of the
    maximum; it is asymmetric where the likelihood is (a lopsided score) and is +-inf on a side where
    the likelihood never falls that far. ``games`` and ``score`` in each ``Rating`` count real games only.
    """
    prior_games = float(prior_games)
    if not math.isfinite(prior_games) or prior_games < 0.0:
        raise ValueError(f"prior_games must be a finite non-negative number, got {prior_games}")
    anchor_elo = float(anchor_elo)
    if not math.isfinite(anchor_elo):
        raise ValueError(f"anchor_elo must be finite, got {anchor_elo}")
    if intervals not in ("wald", "profile"):
        raise ValueError(f"intervals must be 'wald' or 'profile', got {intervals!r}")
    pins = {name: float(elo) for name, elo in (pinned or {}).items()}
    if pins and anchor is not None:
        raise ValueError("give an anchor or pinned players, not both")
    if not all(math.isfinite(elo) for elo in pins.values()):
        raise ValueError(f"pinned ratings must be finite, got {pins}")
    if intervals == "profile" and anchor is None and not pins:
        raise ValueError("profile intervals need an anchor or pinned players (the mean-fixed scale has none)")
    names, games_matrix, points_matrix = _aggregate(games)
    for name in [anchor] if anchor is not None else pins:
        if name not in names:
            raise ValueError(f"unknown player {name!r}: the {'anchor' if anchor is not None else 'pinned player'} "
                             "played no game")
    size = len(names)
    fixed = np.zeros(size, dtype=bool)
    start = np.zeros(size)
    if pins:
        for name, elo in pins.items():
            fixed[names.index(name)] = True
            start[names.index(name)] = elo
        start[~fixed] = float(np.mean(list(pins.values())))
    else:
        fixed[names.index(anchor) if anchor is not None else 0] = True

    played = games_matrix > 0
    components = _components(played)
    if pins:
        cut_off = sorted(str(names[player]) for component in components if not fixed[component].any()
                         for player in component)
        if cut_off:
            raise ValueError("players not connected by games to a pinned player, ratings are undefined: "
                             + ", ".join(cut_off))
    elif len(components) > 1:
        reference = int(np.flatnonzero(fixed)[0])
        main = next(component for component in components if reference in component) \
            if anchor is not None else max(components, key=len)
        outside = sorted(str(names[player]) for component in components
                         if component is not main for player in component)
        raise ValueError("players not connected by games to the rest, ratings are undefined: "
                         + ", ".join(outside))
    if prior_games == 0.0:
        # Pinned players are one node here: the likelihood is bounded iff, in the graph of who scored
        # against whom, every node reaches every other.
        nodes = np.where(fixed, int(np.flatnonzero(fixed)[0]), np.arange(size))
        membership = np.zeros((size, size))
        membership[np.arange(size), nodes] = 1.0
        scored = (membership.T @ (points_matrix > 0) @ membership) > 0
        kept = np.unique(nodes)
        scored = scored[np.ix_(kept, kept)]
        if not (_reachable(scored, 0).all() and _reachable(scored.T, 0).all()):
            raise ValueError("maximum-likelihood ratings are infinite: some group of players scored "
                             "100% or 0% against the rest; use prior_games > 0")

    effective_games = games_matrix + prior_games * played
    effective_points = points_matrix + 0.5 * prior_games * played
    ratings, hessian = _newton(effective_games, effective_points, fixed, start)

    free = np.flatnonzero(~fixed)
    covariance = np.zeros((size, size))
    if free.size:
        covariance[np.ix_(free, free)] = np.linalg.inv(hessian[np.ix_(free, free)])
    if anchor is None and not pins:
        centring = np.eye(size) - 1.0 / size
        covariance = centring @ covariance @ centring
        ratings = ratings - ratings.mean() + anchor_elo
    elif anchor is not None:
        ratings = ratings - ratings[fixed][0] + anchor_elo
    half_widths = Z_95 * np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    if anchor is not None or pins:
        half_widths[fixed] = 0.0
    lows, highs = ratings - half_widths, ratings + half_widths
    if intervals == "profile":
        for player in free:
            lows[player] = _profile_bound(effective_games, effective_points, fixed, ratings, int(player), -1.0,
                                          float(half_widths[player]))
            highs[player] = _profile_bound(effective_games, effective_points, fixed, ratings, int(player), 1.0,
                                           float(half_widths[player]))

    games_played = games_matrix.sum(axis=1)
    points_scored = points_matrix.sum(axis=1)
    return {
        name: Rating(name=name, elo=float(ratings[player]), elo_low=float(lows[player]), elo_high=float(highs[player]),
                     games=int(round(games_played[player])),
                     score=float(points_scored[player] / games_played[player]))
        for player, name in enumerate(names)
    }


def format_ratings_table(ratings: dict[str, Rating]) -> str:
    """A plain-text table of ratings, best first: rank, name, Elo, 95% interval, games, score%."""
    ordered = sorted(ratings.values(), key=lambda rating: (-rating.elo, str(rating.name)))
    header = ("Rank", "Name", "Elo", "95% interval", "Games", "Score")
    rows = [(str(rank), str(rating.name), _format_elo(rating.elo),
             f"[{_format_elo(rating.elo_low)}, {_format_elo(rating.elo_high)}]",
             str(rating.games), f"{100.0 * rating.score:.1f}%")
            for rank, rating in enumerate(ordered, start=1)]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    left_aligned = {1}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) if column in left_aligned else cell.rjust(width)
                         for column, (cell, width) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join(line(cells) for cells in [header, *rows])
