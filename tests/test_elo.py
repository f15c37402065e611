"""Tests of alphazero.judge.elo: expectations come from theory or from independent computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphazero.judge.elo import (
    SPRT,
    MatchResult,
    PentanomialResult,
    elo_text,
    elo_to_score,
    fit_ratings,
    format_ratings_table,
    match_result,
    pentanomial,
    pentanomial_result,
    player_groups,
    score_to_elo,
    wilson_interval,
)

Z_95 = 1.959964
LOGISTIC_SCALE = math.log(10.0) / 400.0


# --------------------------------------------------------------------------------------------
# Elo <-> score


def test_elo_and_score_are_inverses() -> None:
    for elo in (-1500.0, -400.0, -37.5, 0.0, 12.0, 190.0, 800.0, 1500.0):
        assert score_to_elo(elo_to_score(elo)) == pytest.approx(elo, abs=1e-9)
    for score in (0.01, 0.2, 0.5, 0.64, 0.99):
        assert elo_to_score(score_to_elo(score)) == pytest.approx(score, abs=1e-12)


def test_known_elo_values() -> None:
    assert score_to_elo(0.5) == pytest.approx(0.0, abs=1e-12)
    assert score_to_elo(0.75) == pytest.approx(400.0 * math.log10(3.0), abs=1e-9)
    assert score_to_elo(0.75) == pytest.approx(190.85, abs=0.01)
    assert elo_to_score(400.0) == pytest.approx(10.0 / 11.0)
    assert elo_to_score(-400.0) == pytest.approx(1.0 / 11.0)


def test_extreme_values_stay_finite() -> None:
    assert math.isfinite(score_to_elo(0.0)) and math.isfinite(score_to_elo(1.0))
    assert score_to_elo(1.0) == -score_to_elo(0.0) > 2000.0
    assert score_to_elo(1.7) == score_to_elo(1.0)  # clamped like an interval bound past 1
    assert elo_to_score(-1e6) == pytest.approx(0.0) and elo_to_score(1e6) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# Trinomial match results


def test_match_result_matches_independent_computation() -> None:
    wins, draws, losses = 12, 5, 3
    per_game = np.array([1.0] * wins + [0.5] * draws + [0.0] * losses)
    mean, variance = per_game.mean(), per_game.var()
    half_width = Z_95 * math.sqrt(variance / per_game.size)
    result = match_result(wins, draws, losses)
    assert isinstance(result, MatchResult)
    assert result.games == 20
    assert result.score == pytest.approx(0.725)
    assert result.draw_ratio == pytest.approx(0.25)
    assert result.elo == pytest.approx(400.0 * math.log10(mean / (1.0 - mean)))
    low_score, high_score = mean - half_width, mean + half_width
    assert result.elo_low == pytest.approx(400.0 * math.log10(low_score / (1.0 - low_score)))
    assert result.elo_high == pytest.approx(400.0 * math.log10(high_score / (1.0 - high_score)))
    assert result.los == pytest.approx(0.5 * (1.0 + math.erf(9.0 / math.sqrt(30.0))))


def test_match_result_is_symmetric() -> None:
    forward, backward = match_result(17, 9, 6), match_result(6, 9, 17)
    assert backward.elo == pytest.approx(-forward.elo)
    assert backward.elo_low == pytest.approx(-forward.elo_high)
    assert backward.elo_high == pytest.approx(-forward.elo_low)
    assert backward.los == pytest.approx(1.0 - forward.los)


def test_interval_contains_estimate_and_shrinks_with_games() -> None:
    small, large = match_result(30, 40, 20), match_result(120, 160, 80)
    for result in (small, large):
        assert result.elo_low < result.elo < result.elo_high
    assert small.elo == pytest.approx(large.elo)
    ratio = (large.elo_high - large.elo_low) / (small.elo_high - small.elo_low)
    assert 0.45 < ratio < 0.55  # four times the games, about half the width


def test_los() -> None:
    assert match_result(10, 7, 10).los == pytest.approx(0.5)
    assert match_result(0, 8, 0).los == pytest.approx(0.5)
    assert match_result(30, 0, 5).los > 0.99
    assert match_result(5, 0, 30).los < 0.01


def test_perfect_score_is_finite() -> None:
    result = match_result(10, 0, 0)
    values = (result.elo, result.elo_low, result.elo_high, result.los)
    assert all(math.isfinite(value) for value in values)
    assert result.elo > 1000.0 and result.elo_low <= result.elo <= result.elo_high
    text = str(result)
    assert "W/D/L 10/0/0" in text and "nan" not in text.lower() and "inf" not in text.lower()


@pytest.mark.parametrize("games", [10, 100])
def test_perfect_and_zero_scores_have_an_exact_one_sided_bound(games: int) -> None:
    """No variance, so no normal interval: the bound is Clopper-Pearson's for n wins in n games,
    p >= 0.025^(1/n); the open side stays at the clamp and the text says there is no bound there."""
    won, lost = match_result(games, 0, 0), match_result(0, 0, games)
    p = 0.025 ** (1.0 / games)
    assert won.elo_low == pytest.approx(400 * math.log10(p / (1 - p)))
    assert lost.elo_high == pytest.approx(-won.elo_low) and lost.elo_low == -won.elo_high
    assert won.elo_low < won.elo_high and (games == 100) == (won.elo_low > 400)
    assert str(won).startswith(f"W/D/L {games}/0/0, score 1.000, Elo >= {won.elo_low:+.1f} (95%; every game won")
    assert f"Elo <= {lost.elo_high:+.1f} (95%; every game lost" in str(lost)
    pairs = pentanomial_result([0, 0, 0, 0, games // 2])
    assert pairs.elo_low == pytest.approx(score_to_elo(0.025 ** (1.0 / (games // 2))))
    assert "Elo >= " in str(pairs)
    # One draw is enough for the normal interval again.
    assert "[" in str(match_result(games - 1, 1, 0))


def test_an_interval_end_past_the_clamp_reads_as_no_bound() -> None:
    """3/1/0: the normal interval's upper end spills past a score of 1; it is no bound, not +2400."""
    text = str(match_result(3, 1, 0))
    assert "Elo +338.0 [+117.4, no upper bound] (95%)" in text and "2400" not in text
    assert "Elo -338.0 [no lower bound, -117.4] (95%)" in str(match_result(0, 1, 3))
    won = match_result(4, 0, 0)  # the training's status line: the bound, not the clamped estimate
    assert elo_text(won.elo, won.elo_low, won.elo_high, digits=0, interval=False) == "Elo >= -72"
    assert elo_text(won.elo, won.elo_low, won.elo_high, digits=0) == "Elo >= -72 (95%; every game won: no upper bound)"


def test_match_result_string_format() -> None:
    text = str(match_result(12, 5, 3))
    assert text.startswith("W/D/L 12/5/3, score 0.725, Elo +168.4 [")
    assert text.endswith("(95%), LOS 99.0%")


def test_match_result_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        match_result(0, 0, 0)
    with pytest.raises(ValueError):
        match_result(-1, 3, 2)
    with pytest.raises(ValueError):
        match_result(1, -3, 2)
    with pytest.raises(ValueError):
        match_result(1.5, 3, 2)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Pentanomial statistics


def test_pentanomial_counting() -> None:
    assert pentanomial([0, 0.5, 1, 1.0, 1.5, 2, 2.0, 1]) == [1, 1, 3, 1, 2]
    assert pentanomial([]) == [0, 0, 0, 0, 0]
    with pytest.raises(ValueError):
        pentanomial([0.25])
    with pytest.raises(ValueError):
        pentanomial([2.5])


def test_pentanomial_result_matches_independent_computation() -> None:
    counts = [3, 10, 40, 25, 7]
    per_pair = np.repeat([0.0, 0.25, 0.5, 0.75, 1.0], counts)
    mean, variance = per_pair.mean(), per_pair.var()
    result = pentanomial_result(counts)
    assert isinstance(result, PentanomialResult)
    assert result.pairs == 85 and result.games == 170 and result.counts == tuple(counts)
    assert result.score == pytest.approx(mean)
    assert result.elo == pytest.approx(score_to_elo(mean))
    half_width = Z_95 * math.sqrt(variance / per_pair.size)
    assert result.elo_low == pytest.approx(score_to_elo(mean - half_width))
    assert result.elo_high == pytest.approx(score_to_elo(mean + half_width))
    z = (mean - 0.5) / math.sqrt(variance / per_pair.size)
    assert result.los == pytest.approx(0.5 * (1.0 + math.erf(z / math.sqrt(2.0))))


def test_pentanomial_interval_narrower_for_correlated_pairs() -> None:
    # Mostly "win one, lose one" pairs: the two games of a pair are anti-correlated, which the
    # trinomial view of the same games cannot see.
    pair_scores = [1.0] * 60 + [1.5] * 25 + [0.5] * 15
    pairs = pentanomial_result(pentanomial(pair_scores))
    # Same games, trinomially: a 1.0 pair is W+L, a 1.5 pair W+D, a 0.5 pair D+L.
    games = match_result(wins=60 + 25, draws=25 + 15, losses=60 + 15)
    assert pairs.score == pytest.approx(games.score)
    assert pairs.elo == pytest.approx(games.elo)
    assert pairs.elo_high - pairs.elo_low < 0.6 * (games.elo_high - games.elo_low)


def test_pentanomial_degenerate_cases() -> None:
    balanced = pentanomial_result([0, 0, 12, 0, 0])
    assert balanced.los == 0.5 and balanced.elo == pytest.approx(0.0)
    winning = pentanomial_result([0, 0, 0, 0, 4])
    assert winning.los == 1.0 and math.isfinite(winning.elo_low) and math.isfinite(winning.elo)
    assert pentanomial_result([4, 0, 0, 0, 0]).los == 0.0
    with pytest.raises(ValueError):
        pentanomial_result([0, 0, 0, 0, 0])
    with pytest.raises(ValueError):
        pentanomial_result([1, 2, 3])
    with pytest.raises(ValueError):
        pentanomial_result([1, -2, 3, 0, 0])


# --------------------------------------------------------------------------------------------
# SPRT


def _sprt_run(test: SPRT, true_elo: float, rng: np.random.Generator, max_games: int = 2000,
              draw_ratio: float = 0.3) -> tuple[str | None, int]:
    """Play games one by one at a true Elo difference until the SPRT decides or max_games."""
    expected = elo_to_score(true_elo)
    win_probability = expected - draw_ratio / 2.0
    loss_probability = 1.0 - expected - draw_ratio / 2.0
    outcomes = rng.choice(3, size=max_games, p=[win_probability, draw_ratio, loss_probability])
    counts = [0, 0, 0]
    for played, outcome in enumerate(outcomes, start=1):
        counts[outcome] += 1
        decision = test.decide(test.llr_trinomial(*counts))
        if decision is not None:
            return decision, played
    return None, max_games


def test_sprt_bounds_and_validation() -> None:
    test = SPRT(0.0, 50.0)
    assert test.lower_bound == pytest.approx(math.log(0.05 / 0.95))
    assert test.upper_bound == pytest.approx(math.log(0.95 / 0.05))
    assert test.decide(test.upper_bound + 0.01) == "H1"
    assert test.decide(test.lower_bound - 0.01) == "H0"
    assert test.decide(0.0) is None
    assert test.llr_trinomial(0, 0, 0) == 0.0
    for arguments in ((50.0, 0.0), (10.0, 10.0), (0.0, 5.0, 0.0), (0.0, 5.0, 0.05, 0.5)):
        with pytest.raises(ValueError):
            SPRT(*arguments)
    with pytest.raises(ValueError):
        test.llr_trinomial(-1, 0, 3)
    with pytest.raises(ValueError):
        test.llr_pentanomial([1, 2, 3, 4])


def _normal_llr(scores: np.ndarray, weights: np.ndarray, samples: float, elo0: float,
                elo1: float) -> float:
    """N (s1 - s0)(2 s - s0 - s1) / (2 var), mean and variance of ``scores`` under ``weights``."""
    s0, s1 = 1.0 / (1.0 + 10.0 ** (-elo0 / 400.0)), 1.0 / (1.0 + 10.0 ** (-elo1 / 400.0))
    mean = np.average(scores, weights=weights)
    variance = np.average((scores - mean) ** 2, weights=weights)
    return samples * (s1 - s0) * (2.0 * mean - s0 - s1) / (2.0 * variance)


def test_sprt_llr_matches_normal_approximation() -> None:
    # Unregularised (all cells filled): the plain sample mean and variance of the games.
    plain = SPRT(-10.0, 20.0, prior_observations=0.0)
    per_game = np.array([1.0] * 140 + [0.5] * 100 + [0.0] * 110)
    expected = _normal_llr(per_game, np.ones(per_game.size), per_game.size, -10.0, 20.0)
    assert plain.llr_trinomial(140, 100, 110) == pytest.approx(expected)
    per_pair = np.repeat([0.0, 0.25, 0.5, 0.75, 1.0], [5, 30, 60, 40, 15])
    expected = _normal_llr(per_pair, np.ones(per_pair.size), per_pair.size, -10.0, 20.0)
    assert plain.llr_pentanomial([5, 30, 60, 40, 15]) == pytest.approx(expected)
    # Default: two virtual observations spread evenly over the cells shape s and var, N stays real.
    regularised = SPRT(-10.0, 20.0)
    weights = np.array([140, 100, 110]) + 2.0 / 3.0
    expected = _normal_llr(np.array([1.0, 0.5, 0.0]), weights, 350, -10.0, 20.0)
    assert regularised.llr_trinomial(140, 100, 110) == pytest.approx(expected)
    expected = _normal_llr(np.arange(5) / 4.0, np.array([5, 30, 60, 40, 15]) + 0.4, 150, -10.0, 20.0)
    assert regularised.llr_pentanomial([5, 30, 60, 40, 15]) == pytest.approx(expected)


def test_sprt_does_not_decide_on_a_lucky_start() -> None:
    test = SPRT(0.0, 50.0)
    for counts in ((1, 0, 0), (0, 0, 1), (3, 0, 0), (0, 2, 0), (2, 1, 0)):
        assert test.status(*counts).decision is None
    assert test.status_pentanomial([0, 0, 0, 0, 1]).decision is None
    assert test.llr_trinomial(3, 0, 0) > 0.0 > test.llr_trinomial(0, 0, 3)


def test_sprt_false_positive_rate_near_alpha() -> None:
    rng = np.random.default_rng(99)
    test = SPRT(0.0, 50.0)
    decisions = [_sprt_run(test, 0.0, rng)[0] for _ in range(40)]
    assert decisions.count("H1") <= 6  # about 2 expected at alpha = 0.05; P(more than 6) < 0.5%
    assert decisions.count(None) == 0


def test_sprt_accepts_h1_for_a_much_stronger_player() -> None:
    rng = np.random.default_rng(2024)
    test = SPRT(0.0, 50.0)
    decisions = [_sprt_run(test, 200.0, rng)[0] for _ in range(20)]
    assert decisions.count("H1") >= 19


def test_sprt_accepts_h0_for_a_weaker_player() -> None:
    rng = np.random.default_rng(7)
    test = SPRT(0.0, 50.0)
    decisions = [_sprt_run(test, -100.0, rng)[0] for _ in range(20)]
    assert decisions.count("H0") >= 19


def test_sprt_needs_many_games_between_the_hypotheses() -> None:
    rng = np.random.default_rng(11)
    test = SPRT(0.0, 50.0)
    easy = [_sprt_run(test, 200.0, rng)[1] for _ in range(20)]
    hard = [_sprt_run(test, 25.0, rng)[1] for _ in range(20)]
    # Zero drift at the midpoint: a random walk of per-game LLR variance (s1 - s0)^2 / var takes
    # on the order of bound^2 / that variance, about 300 games here, to leave the bounds.
    assert np.mean(hard) > 100.0
    assert np.mean(hard) > 5.0 * np.mean(easy)


def test_sprt_pentanomial_decides_for_a_stronger_player() -> None:
    test = SPRT(0.0, 50.0)
    assert test.status_pentanomial([2, 10, 40, 60, 30]).decision == "H1"
    assert test.status_pentanomial([30, 60, 40, 10, 2]).decision == "H0"
    assert test.status(300, 200, 100).decision == "H1"


# --------------------------------------------------------------------------------------------
# Bradley-Terry ratings


def _round_robin(true_elos: dict[str, float], games_per_pair: int,
                 rng: np.random.Generator) -> list[tuple[str, str, float]]:
    names = list(true_elos)
    games = []
    for first_index, first in enumerate(names):
        for second in names[first_index + 1:]:
            expected = elo_to_score(true_elos[first] - true_elos[second])
            for number, won in enumerate(rng.random(games_per_pair) < expected):
                # Alternate who is listed first; the score is always the listed player's.
                games.append((first, second, float(won)) if number % 2 == 0
                             else (second, first, 1.0 - float(won)))
    return games


def test_fit_ratings_recovers_true_elos() -> None:
    true_elos = {"zero": 0.0, "two": 200.0, "four": 400.0, "eight": 800.0}
    games = _round_robin(true_elos, 400, np.random.default_rng(5))
    ratings = fit_ratings(games, anchor="zero")
    assert ratings["zero"].elo == pytest.approx(0.0, abs=1e-9)
    assert ratings["zero"].elo_low == ratings["zero"].elo_high == pytest.approx(0.0, abs=1e-9)
    for name in ("two", "four", "eight"):
        rating = ratings[name]
        standard_error = (rating.elo_high - rating.elo_low) / (2.0 * Z_95)
        assert 0.0 < standard_error < 60.0
        assert abs(rating.elo - true_elos[name]) < 3.0 * standard_error
        assert rating.games == 1200
    assert sorted(ratings, key=lambda name: ratings[name].elo) == ["zero", "two", "four", "eight"]
    assert sum(rating.score * rating.games for rating in ratings.values()) == pytest.approx(len(games))


def test_two_player_fit_matches_closed_form() -> None:
    # 300 of 400 points plus one virtual draw: the MLE difference is score_to_elo(300.5 / 401),
    # and the Fisher information of the difference is c^2 n p (1 - p).
    games = [("a", "b", 1.0)] * 250 + [("b", "a", 0.5)] * 100 + [("a", "b", 0.0)] * 50
    ratings = fit_ratings(games, anchor="b", anchor_elo=1000.0)
    probability = 300.5 / 401.0
    difference = score_to_elo(probability)
    standard_error = 1.0 / (LOGISTIC_SCALE * math.sqrt(401.0 * probability * (1.0 - probability)))
    assert ratings["b"].elo == pytest.approx(1000.0)
    assert ratings["a"].elo == pytest.approx(1000.0 + difference, abs=1e-6)
    assert ratings["a"].elo_high - ratings["a"].elo == pytest.approx(Z_95 * standard_error, rel=1e-6)
    assert ratings["a"].score == pytest.approx(0.75) and ratings["b"].score == pytest.approx(0.25)
    # With the mean fixed instead, each rating is +- difference / 2 with half the standard error.
    centred = fit_ratings(games)
    assert centred["a"].elo == pytest.approx(difference / 2.0, abs=1e-6)
    assert centred["b"].elo == pytest.approx(-difference / 2.0, abs=1e-6)
    centred_half_width = centred["a"].elo_high - centred["a"].elo
    assert centred_half_width == pytest.approx(Z_95 * standard_error / 2.0, rel=1e-6)


def test_fit_without_prior_is_plain_maximum_likelihood() -> None:
    games = [("a", "b", 1.0)] * 30 + [("a", "b", 0.0)] * 10
    ratings = fit_ratings(games, anchor="b", prior_games=0.0)
    assert ratings["a"].elo == pytest.approx(score_to_elo(0.75), abs=1e-6)
    with pytest.raises(ValueError):
        fit_ratings([("a", "b", 1.0)] * 5, prior_games=0.0)


def test_perfect_score_gets_a_finite_rating_above_the_rest() -> None:
    rng = np.random.default_rng(3)
    games = _round_robin({"p": 0.0, "q": 100.0, "r": 200.0}, 40, rng)
    games += [("champion", opponent, 1.0) for opponent in ("p", "q", "r") for _ in range(20)]
    ratings = fit_ratings(games)
    champion = ratings["champion"]
    assert all(math.isfinite(value) for value in (champion.elo, champion.elo_low, champion.elo_high))
    assert champion.score == 1.0
    assert all(champion.elo > ratings[name].elo + 200.0 for name in ("p", "q", "r"))
    assert sum(rating.elo for rating in ratings.values()) == pytest.approx(0.0, abs=1e-6)


def test_fit_ratings_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="loner"):
        fit_ratings([("a", "b", 1.0), ("b", "c", 0.5), ("loner", "other", 1.0)], anchor="a")
    with pytest.raises(ValueError):
        fit_ratings([])
    with pytest.raises(ValueError, match="nobody"):
        fit_ratings([("a", "b", 1.0)], anchor="nobody")
    with pytest.raises(ValueError):
        fit_ratings([("a", "b", 0.7)])
    with pytest.raises(ValueError):
        fit_ratings([("a", "a", 1.0)])
    with pytest.raises(ValueError):
        fit_ratings([("a", "b", 1.0)], prior_games=-1.0)


def test_fit_ratings_many_players() -> None:
    rng = np.random.default_rng(17)
    players = 50
    true_elos = rng.normal(0.0, 200.0, players)
    first = rng.integers(0, players, 10_000)
    second = (first + rng.integers(1, players, 10_000)) % players
    wins = rng.random(10_000) < 1.0 / (1.0 + 10.0 ** ((true_elos[second] - true_elos[first]) / 400.0))
    games = [(f"p{a}", f"p{b}", float(won)) for a, b, won in zip(first, second, wins)]
    ratings = fit_ratings(games)
    fitted = np.array([ratings[f"p{player}"].elo for player in range(players)])
    assert np.corrcoef(fitted, true_elos)[0, 1] > 0.95
    assert fitted.mean() == pytest.approx(0.0, abs=1e-6)


# A tiny ladder: two levels pinned at 1350 and 1500, a link "k" that played both, a player "p" that played
# the link and the lower level. (a, b, wins, draws, losses of a.)
LADDER_TABLE = [("k", "L1350", 5, 3, 4), ("k", "L1500", 2, 2, 6), ("p", "k", 3, 2, 7), ("p", "L1350", 1, 1, 6)]
LADDER_PINS = {"L1350": 1350.0, "L1500": 1500.0}


def _ladder_games() -> list[tuple[str, str, float]]:
    return [(a, b, score) for a, b, *counts in LADDER_TABLE
            for score, count in zip((1.0, 0.5, 0.0), counts) for _ in range(count)]


def _log_likelihood_grid(p: np.ndarray, k: np.ndarray, prior: float) -> np.ndarray:
    """The log-likelihood of LADDER_TABLE, written out game by game, on a grid of (p, k) ratings: each game
    scores s log E + (1 - s) log(1 - E), E = 1 / (1 + 10^((r_b - r_a) / 400)); ``prior`` draws per pair."""
    ratings = {"p": p, "k": k, **LADDER_PINS}
    total = np.zeros(np.broadcast(p, k).shape)
    for a, b, wins, draws, losses in LADDER_TABLE:
        expected = 1.0 / (1.0 + 10.0 ** ((ratings[b] - ratings[a]) / 400.0))
        points, games = wins + 0.5 * (draws + prior), wins + draws + losses + prior
        total = total + points * np.log(expected) + (games - points) * np.log(1.0 - expected)
    return total


@pytest.mark.parametrize("prior", [0.0, 1.0])
def test_pinned_fit_is_the_hand_computed_maximum_likelihood(prior: float) -> None:
    fitted = fit_ratings(_ladder_games(), pinned=LADDER_PINS, prior_games=prior)
    assert fitted["L1350"].elo == 1350.0 and fitted["L1500"].elo == 1500.0
    assert fitted["L1350"].elo_low == fitted["L1350"].elo_high == 1350.0  # pinned: no width
    # Grid search, coarse then fine (0.1 Elo), independent of the fit's Newton steps.
    centre = np.array([1300.0, 1300.0])
    for half, step in ((600.0, 5.0), (10.0, 0.1)):
        axis_p = np.arange(centre[0] - half, centre[0] + half + step / 2, step)
        axis_k = np.arange(centre[1] - half, centre[1] + half + step / 2, step)
        grid = _log_likelihood_grid(axis_p[:, None], axis_k[None, :], prior)
        row, column = np.unravel_index(np.argmax(grid), grid.shape)
        centre = np.array([axis_p[row], axis_k[column]])
    assert fitted["p"].elo == pytest.approx(centre[0], abs=0.15)
    assert fitted["k"].elo == pytest.approx(centre[1], abs=0.15)


def test_profile_interval_is_where_the_profile_likelihood_falls_by_1_92() -> None:
    fitted = fit_ratings(_ladder_games(), pinned=LADDER_PINS, prior_games=0.0, intervals="profile")
    wald = fit_ratings(_ladder_games(), pinned=LADDER_PINS, prior_games=0.0)
    links = np.arange(900.0, 1700.0, 0.05)

    def profile(rating: float) -> float:  # the link refitted by a fine grid for each rating of p
        return float(_log_likelihood_grid(np.array(rating), links, 0.0).max())

    best = profile(fitted["p"].elo)
    for bound in (fitted["p"].elo_low, fitted["p"].elo_high):
        assert best - profile(bound) == pytest.approx(Z_95 ** 2 / 2.0, abs=0.01)
    # A lopsided score (4/19 against the link): the interval is asymmetric, unlike the Wald interval.
    below, above = fitted["p"].elo - fitted["p"].elo_low, fitted["p"].elo_high - fitted["p"].elo
    assert abs(below - above) > 5.0
    assert wald["p"].elo == pytest.approx(fitted["p"].elo)
    assert wald["p"].elo_high - wald["p"].elo == pytest.approx(wald["p"].elo - wald["p"].elo_low)


def test_a_ladder_whose_new_player_starts_far_from_its_rating_is_fitted() -> None:
    """The shared ladder file that broke the fit (``Singular matrix``), cut down to the players it needs:
    a new player's first round, 1/0/9 against the 1350 level, started at the mean of the levels (1717);
    its first full Newton step threw it to about -6700 Elo, where its curvature underflows. With the
    steps capped, the fit is the maximum: the new player where its own 1-in-10 score against the pinned
    1350 puts it (the rest of the file does not touch it), and the gradient zero for everyone."""
    rows = [("P0", "L1950", 6, 3, 11), ("P0", "L1850", 16, 0, 4), ("link", "L1350", 71, 18, 111),
            ("P10", "link", 0, 12, 188), ("P12", "link", 25, 59, 106), ("new", "L1350", 1, 0, 9)]
    games = [(a, b, score) for a, b, w, d, lost in rows for score, count in ((1.0, w), (0.5, d), (0.0, lost))
             for _ in range(count)]
    fitted = fit_ratings(games, pinned={"L1950": 1950.0, "L1850": 1850.0, "L1350": 1350.0})
    # prior_games 1 (a draw against each opponent): 1.5 points in 11 games against L1350 alone
    assert fitted["new"].elo == pytest.approx(1350.0 + 400.0 * np.log10(1.5 / 9.5), abs=0.01)
    assert fitted["new"].elo_low < fitted["new"].elo < fitted["new"].elo_high < 1350.0
    assert fitted["P10"].elo < fitted["link"].elo < 1350.0 < fitted["P0"].elo


def test_pinned_fit_rejects_what_it_cannot_rate() -> None:
    games = _ladder_games()
    with pytest.raises(ValueError, match="loner"):
        fit_ratings(games + [("loner", "other", 1.0)], pinned=LADDER_PINS)
    with pytest.raises(ValueError, match="played no game"):
        fit_ratings(games, pinned={**LADDER_PINS, "L2000": 2000.0})
    with pytest.raises(ValueError, match="not both"):
        fit_ratings(games, anchor="k", pinned=LADDER_PINS)
    with pytest.raises(ValueError, match="profile"):
        fit_ratings(games, intervals="profile")
    with pytest.raises(ValueError, match="infinite"):  # p lost every game: no maximum without the prior
        fit_ratings([("p", "L1350", 0.0)] * 3 + [("k", "L1350", 0.5)], pinned={"L1350": 1350.0}, prior_games=0.0)
    beaten = fit_ratings([("p", "L1350", 0.0)] * 3, pinned={"L1350": 1350.0}, intervals="profile")["p"]
    assert beaten.elo_low < beaten.elo < 1350.0 < beaten.elo_high  # the prior keeps it finite


def test_player_groups_are_the_players_linked_by_games() -> None:
    games = [("a", "b", 1.0), ("c", "b", 0.5), ("d", "e", 0.0)]
    assert sorted(player_groups(games), key=min) == [{"a", "b", "c"}, {"d", "e"}]
    assert player_groups(games + [("e", "a", 1.0)]) == [{"a", "b", "c", "d", "e"}]
    assert player_groups([]) == []
    with pytest.raises(ValueError, match="disconnected|not connected"):
        fit_ratings(games)  # what the groups are for: ratings only exist within one group


def test_format_ratings_table_lists_best_first() -> None:
    games = [("strong", "middle", 1.0)] * 8 + [("middle", "weak", 1.0)] * 8
    games += [("strong", "weak", 0.5), ("weak", "middle", 1.0), ("middle", "strong", 1.0)]
    table = format_ratings_table(fit_ratings(games, anchor="weak"))
    lines = table.splitlines()
    assert len(lines) == 4
    assert "Rank" in lines[0] and "Elo" in lines[0] and "Games" in lines[0]
    names = [line.split()[1] for line in lines[1:]]
    assert names == ["strong", "middle", "weak"]
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3"]
    assert lines[1].rstrip().endswith("%")


# --------------------------------------------------------------------------------------------
# Binomial shares


def test_wilson_interval_matches_the_formula() -> None:
    low, high = wilson_interval(8, 10)
    assert math.isclose(low, 0.4902, abs_tol=1e-3) and math.isclose(high, 0.9433, abs_tol=1e-3)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
