"""An NNUE's centipawn measured against PeSTO's: the `pesto_slope` of `alphazero nnue train` (alphazero.learn.nnue_scale)."""

from __future__ import annotations

from pathlib import Path

import chess
import numpy as np
import pytest

from alphazero.board.position import Position
from alphazero.errors import InputError
from alphazero.learn.nnue_data import featurise
from alphazero.learn.nnue_scale import SLOPE_LIMIT_CP, pesto_cp, pesto_slope
from alphazero.learn.nnue_train import net_centipawns
from alphazero.nets.features import parse_features
from alphazero.nets.nnue import NNUEConfig, NNUENet
from alphazero.nets.nnue_file import load_nnue
from alphazero.search.evals import material
from tests.test_nnue_train import EVALS, SMALL, evals_head, nnue_train

# Beyond the data's middlegames: Black to move, an early extra queen each (phase above 24), bare kings,
# a lone knight, pawns about to promote.
ODD = ["rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
       "rnbqkbnQ/ppppp1p1/8/8/8/8/PPPPP1P1/RNBQKBNq w Qq - 0 9",
       "8/8/4k3/8/8/3K4/8/8 w - - 0 1",
       "8/8/4k3/8/8/3K4/8/6n1 b - - 0 1",
       "8/1P4k1/8/8/8/8/5p2/3K4 w - - 0 1"]


def fens(count: int) -> list[str]:
    return [line.split(",")[0] for line in EVALS.read_text().splitlines()[1:count + 1]] + ODD


@pytest.mark.parametrize("spec", ["all", "h+kb", "ka", "mc+all+pv"])
def test_pesto_read_from_the_features_is_the_searchs_pesto(spec) -> None:
    """Whichever piece-square block the set has and wherever it stands, the features give PeSTO's score
    for the side to move exactly as the search computes it from the board."""
    positions = fens(300)
    fs = parse_features(spec)
    expected = []
    for fen in positions:
        position = Position.from_fen(fen)
        expected.append(int(material(position.bb, position.st)))
    got = pesto_cp(featurise(positions, fs), fs)
    assert got.tolist() == expected
    assert got[-2] > 200  # a lone knight, Black to move: about a knight for Black


def test_the_slope_is_least_squares_through_the_origin_within_the_limit() -> None:
    fs = parse_features("all")
    rows = featurise(fens(400), fs)
    pesto = pesto_cp(rows, fs).astype(float)
    inside = np.abs(pesto) <= SLOPE_LIMIT_CP
    assert 100 < inside.sum() < len(pesto)  # some positions are left out
    # A net that reads 1.5 PeSTO plus noise inside the limit and nonsense beyond it.
    noise = np.random.default_rng(0).normal(0, 30, len(pesto))

    def net_cp(part):  # the rows the slope reads are the positions inside the limit, in order
        assert part.num_positions == inside.sum()
        return 1.5 * pesto[inside] + noise[inside]

    result = pesto_slope(rows, fs, net_cp)
    x, y = pesto[inside], 1.5 * pesto[inside] + noise[inside]
    assert result == {"slope": pytest.approx(float(x @ y / (x @ x)), rel=1e-12), "positions": int(inside.sum())}
    assert result["slope"] == pytest.approx(1.5, abs=0.02)
    # No piece-square block, or too few positions: no slope (the trainer reports None), and PeSTO itself is refused.
    assert pesto_slope(featurise(fens(400), parse_features("h+v")), parse_features("h+v"), net_cp) is None
    assert pesto_slope(rows.take(np.arange(50)), fs, net_cp) is None
    start = featurise([chess.STARTING_FEN] * 150, fs)  # PeSTO 0 everywhere: no slope, not a division by zero
    assert pesto_slope(start, fs, lambda part: np.ones(part.num_positions)) is None
    with pytest.raises(InputError, match="feature set 'h\\+v': PeSTO's score is read from a piece-square block"):
        pesto_cp(rows, parse_features("h+v"))


def pesto_csv(path: Path, count: int, factor: float) -> Path:
    """Positions of evals-dev scored ``factor`` times PeSTO: data in a known unit."""
    positions = fens(count)[:count]
    fs = parse_features("all")
    scores = factor * pesto_cp(featurise(positions, fs), fs)
    path.write_text("fen,score_cp,mate,best_uci,wdl_win,wdl_draw,wdl_loss\n"
                    + "".join(f"{fen},{int(score)},,,,,\n" for fen, score in zip(positions, scores)))
    return path


def test_a_net_trained_on_wider_scores_reads_a_wider_unit(tmp_path, capsys) -> None:
    """The same positions scored once and twice PeSTO's: the net on the doubled scores reads a clearly
    wider unit (1.53 times after these 12 epochs; a small net on 1,500 positions learns the material part
    of the scale first), and the slope is in the summary, the log and the file."""
    slopes = {}
    for factor in (1.0, 2.0):
        data = pesto_csv(tmp_path / f"x{factor}.csv", 1500, factor)
        out = tmp_path / f"x{factor}.npz"
        code, summary, text = nnue_train(capsys, "--data", str(data), "--out", str(out), "--epochs", "12", "--lr", "1e-2",
                                         "--lr-decay", "0.9", "--l1", "32", "--batch-size", "64", "--keep-noisy")
        assert code == 0, text
        unit = summary["pesto_slope"]
        assert unit["positions"] > 100 and load_nnue(out).meta["training"]["pesto_slope"] == unit
        assert f"the net reads {unit['slope']:.3f} times PeSTO's centipawns over {unit['positions']} held-out" in text
        slopes[factor] = unit["slope"]
    assert 0.4 < slopes[1.0] < 1.2 and slopes[2.0] / slopes[1.0] > 1.3


def test_zero_epochs_from_init_writes_that_net_measured_on_the_data(tmp_path, capsys) -> None:
    data = evals_head(tmp_path / "evals.csv", 300)
    common = ["--data", str(data), "--held-out", "0", *SMALL]
    plain = tmp_path / "plain.npz"
    code, first, text = nnue_train(capsys, *common, "--out", str(plain), "--epochs", "3", "--lr", "3e-3")
    assert code == 0, text
    code, summary, text = nnue_train(capsys, *common, "--out", str(tmp_path / "copy.npz"), "--epochs", "0", "--init",
                                     str(plain))
    assert code == 0 and summary["epochs"] == 0, text
    a, b = load_nnue(plain), load_nnue(tmp_path / "copy.npz")
    assert all(np.array_equal(a.arrays[name], b.arrays[name]) for name in a.arrays)
    # The same held-out rows: the loss and the slope the training ended with.
    assert summary["final"]["held_out_loss"] == pytest.approx(first["final"]["held_out_loss"], abs=1e-6)
    assert summary["pesto_slope"] == first["pesto_slope"]
    # That slope is the written net's, over these positions (nothing held out: the training ones).
    nnue = load_nnue(plain)
    config = NNUEConfig(features="all", num_features=768, arch=nnue.arch, l1=nnue.l1, activation=nnue.activation)
    net = NNUENet.from_arrays(nnue.arrays, config)
    fs = parse_features("all")
    rows = featurise(fens(300)[:300], fs)
    expected = pesto_slope(rows, fs, lambda part: net_centipawns(net, part))
    assert summary["pesto_slope"] == {"slope": pytest.approx(expected["slope"], abs=2e-6), "positions": expected["positions"]}
    assert f"over {expected['positions']} train positions" in text
    code, _, text = nnue_train(capsys, *common, "--out", str(tmp_path / "out" / "net.npz"), "--epochs", "0")
    assert code == 2 and "--epochs must be at least 1, got 0" in text and not (tmp_path / "out").exists()
