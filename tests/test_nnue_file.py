"""The NNUE file: round trips, refusals of bad input, and the quantised network against the float one."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import chess
import numpy as np
import pytest

from alphazero.errors import InputError
from alphazero.nets.features import parse_features, reference_features
from alphazero.nets.nnue_file import (
    ARCHS,
    NNUE_FORMAT_VERSION,
    QA,
    QB,
    FloatNNUE,
    expected_shapes,
    load_nnue,
    output_bucket,
    output_buckets,
    quantise,
    random_nnue,
    save_nnue,
)


def _positions(count: int, seed: int = 0) -> list[chess.Board]:
    """``count`` positions from random games: openings to bare endgames, both sides to move."""
    rng = np.random.default_rng(seed)
    boards: list[chess.Board] = []
    while len(boards) < count:
        board = chess.Board()
        for _ in range(int(rng.integers(20, 200))):
            moves = list(board.legal_moves)
            if not moves or board.is_insufficient_material():
                break
            captures = [m for m in moves if board.is_capture(m)]
            pool = captures if captures and rng.random() < 0.3 else moves  # thin the material out
            board.push(pool[int(rng.integers(len(pool)))])
            if rng.random() < 0.15:
                boards.append(board.copy(stack=False))
    return boards[:count]


@pytest.mark.parametrize("buckets", [1, 8])
@pytest.mark.parametrize("arch", ARCHS)
def test_round_trip_keeps_arrays_and_meta(tmp_path, arch, buckets):
    net = random_nnue("all+pv", arch, l1=16, l2=4, activation="screlu", seed=3, buckets=buckets)
    meta = dict(net.meta, training={"epochs": 2, "loss": 0.1})
    path = tmp_path / "any-name.bin"  # the path is whatever the trainer was told
    save_nnue(path, net.arrays, meta)
    loaded = load_nnue(path)
    shapes = expected_shapes(arch, 768 + 1152, 16, 4 if arch == "layered" else 0, buckets)
    assert set(loaded.arrays) == set(shapes)
    assert shapes["out_bias"] == (buckets,) and len(shapes["out_weight"]) == (1 if buckets == 1 else 2)
    for name, array in net.arrays.items():
        assert loaded.arrays[name].dtype == np.float32 and np.array_equal(loaded.arrays[name], array)
    # A net without buckets stays a version-1 file, which programs from before buckets still read.
    assert loaded.meta["kind"] == "nnue" and loaded.meta["format_version"] == (1 if buckets == 1 else NNUE_FORMAT_VERSION)
    assert loaded.buckets == buckets
    assert loaded.meta["training"] == {"epochs": 2, "loss": 0.1} and loaded.features.spec == "all+pv"
    assert loaded.l2 == (4 if arch == "layered" else 0) and loaded.scale == 400
    assert list(tmp_path.iterdir()) == [path]  # written atomically: no temp file left beside it


def test_output_buckets_split_the_men_on_the_board_as_bullets_material_count():
    # bullet's MaterialCount<K>: (men - 2) / ceil(32 / K); eight buckets of four men each
    table = {2: 0, 5: 0, 6: 1, 9: 1, 10: 2, 17: 3, 18: 4, 29: 6, 30: 7, 32: 7}
    assert {men: output_bucket(men, 8) for men in table} == table
    assert [output_bucket(men, 3) for men in (2, 12, 13, 23, 24, 32)] == [0, 0, 1, 1, 2, 2]  # ceil(32 / 3) = 11
    assert {output_bucket(men, 1) for men in range(2, 33)} == {0}
    assert output_buckets(np.array(list(table)), 8).tolist() == list(table.values())
    net = random_nnue("all", "perspective", l1=8, buckets=8, seed=1)
    assert net.bucket(32) == 7 and net.bucket(3) == 0
    with pytest.raises(ValueError, match="number of pieces"):
        net.bucket(None)


def test_save_canonicalises_the_feature_spec_and_takes_float64(tmp_path):
    net = random_nnue("all", "simple", l1=8)
    arrays = {name: array.astype(np.float64) for name, array in net.arrays.items()}
    save_nnue(tmp_path / "n.npz", arrays, dict(net.meta, features=" ALL "))
    assert load_nnue(tmp_path / "n.npz").meta["features"] == "all"


@pytest.mark.parametrize("change,message", [
    (lambda a, m: a.pop("out_bias"), "missing out_bias"),
    (lambda a, m: a.update(extra=np.zeros(3)), "unexpected extra"),
    (lambda a, m: a.update(ft_weight=np.zeros((10, 8))), "ft_weight has shape [10, 8], expected [768, 8]"),
    (lambda a, m: a.update(out_weight=np.zeros(8)), "out_weight has shape [8], expected [16]"),
    (lambda a, m: a["ft_bias"].__setitem__(0, np.nan), "ft_bias holds a NaN"),
    (lambda a, m: m.update(arch="deep"), "meta 'arch' must be one of"),
    (lambda a, m: m.update(activation="relu"), "meta 'activation' must be one of"),
    (lambda a, m: m.update(l1=0), "meta 'l1' must be a positive integer"),
    (lambda a, m: m.update(features="all+zz"), "unknown block 'zz'"),
    (lambda a, m: m.update(scale=-1), "meta 'scale' must be a positive number"),
    (lambda a, m: m.update(kind="policy-value"), "meta kind 'policy-value'"),
    (lambda a, m: m.update(buckets=8), "out_weight has shape [16], expected [8, 16]"),
    (lambda a, m: m.update(buckets=0), "meta 'buckets' must be a positive integer"),
    (lambda a, m: m.update(buckets=33), "meta 'buckets' must be at most 32"),
])
def test_save_refuses_arrays_that_disagree_with_the_meta(tmp_path, change, message):
    net = random_nnue("all", "perspective", l1=8)
    arrays = {name: array.copy() for name, array in net.arrays.items()}
    meta = dict(net.meta)
    change(arrays, meta)
    with pytest.raises(InputError) as error:
        save_nnue(tmp_path / "n.npz", arrays, meta)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not list(tmp_path.iterdir())  # nothing written


def _policy_value_checkpoint(path):
    torch = pytest.importorskip("torch")
    from alphazero.config import NetworkConfig
    from alphazero.nets.network import PolicyValueNet, save_network

    torch.manual_seed(0)
    save_network(PolicyValueNet(NetworkConfig(blocks=1, channels=8)), path)


def _npz(path, arrays: dict[str, Any]) -> None:
    """An .npz written directly, bypassing ``save_nnue``'s checks."""
    np.savez(path, **arrays)


def test_load_refuses_what_is_not_an_nnue_with_one_line(tmp_path):
    net = random_nnue("all", "simple", l1=8)
    cases = {}
    cases["missing.npz"] = "not found"
    (tmp_path / "text.txt").write_text("hello\n")
    cases["text.txt"] = "not an NNUE file"
    _policy_value_checkpoint(tmp_path / "net.pt")
    cases["net.pt"] = "not an NNUE file"
    np.save(tmp_path / "one.npy", np.zeros(3))
    cases["one.npy"] = "a single .npy array"
    np.savez(tmp_path / "plain.npz", a=np.zeros(3))
    cases["plain.npz"] = "without NNUE meta"
    for name, meta in [("kind.npz", dict(net.meta, kind="policy-value")),
                       ("newer.npz", dict(net.meta, format_version=NNUE_FORMAT_VERSION + 1))]:
        _npz(tmp_path / name, dict(net.arrays, meta=np.array(json.dumps(meta))))
    cases["kind.npz"] = "meta kind 'policy-value'"
    cases["newer.npz"] = f"format_version {NNUE_FORMAT_VERSION + 1} is newer"
    _npz(tmp_path / "json.npz", dict(net.arrays, meta=np.array("{not json")))
    cases["json.npz"] = "not an NNUE file (JSONDecodeError"
    _npz(tmp_path / "shape.npz", dict(net.arrays, ft_bias=np.zeros(9, np.float32), meta=np.array(json.dumps(net.meta))))
    cases["shape.npz"] = "ft_bias has shape [9]"
    save_nnue(tmp_path / "good.npz", net.arrays, net.meta)
    (tmp_path / "torn.npz").write_bytes((tmp_path / "good.npz").read_bytes()[:300])
    cases["torn.npz"] = "not an NNUE file"
    (tmp_path / "dir.npz").mkdir()
    cases["dir.npz"] = "not a file"
    for name, message in cases.items():
        with pytest.raises(InputError) as error:
            load_nnue(tmp_path / name)
        text = str(error.value)
        assert message in text and name in text and "\n" not in text, (name, text)
    assert zipfile.is_zipfile(tmp_path / "net.pt")  # a torch checkpoint is a zip too: meta tells them apart


def test_loading_does_not_import_torch(tmp_path):
    net = random_nnue("all", "perspective", l1=8)
    save_nnue(tmp_path / "n.npz", net.arrays, net.meta)
    code = ("import sys; from alphazero.nets.nnue_file import load_nnue, quantise; "
            f"quantise(load_nnue({str(tmp_path / 'n.npz')!r})); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_quantised_arrays_follow_the_scales():
    net = random_nnue("all", "layered", l1=16, l2=4, seed=1)
    q = quantise(net)
    a = net.arrays
    assert q.arrays["ft_weight"].dtype == np.int16 and q.arrays["out_bias"].dtype == np.int32
    assert np.array_equal(q.arrays["ft_weight"], np.rint(a["ft_weight"].astype(np.float64) * QA).astype(np.int16))
    assert np.array_equal(q.arrays["l2_weight"], np.rint(a["l2_weight"].astype(np.float64) * QB).astype(np.int16))
    assert np.array_equal(q.arrays["l2_bias"], np.rint(a["l2_bias"].astype(np.float64) * QA * QB).astype(np.int32))
    assert q.accumulator_bound <= 32767  # this net's accumulator cannot wrap


def test_quantise_refuses_a_weight_beyond_int16():
    net = random_nnue("all", "simple", l1=8)
    arrays = dict(net.arrays, ft_weight=net.arrays["ft_weight"].copy())
    arrays["ft_weight"][5, 3] = 200.0  # 200 * 255 > 32767
    with pytest.raises(InputError, match="ft_weight does not fit int16"):
        quantise(FloatNNUE.from_arrays(arrays, net.meta))


def test_the_accumulator_wraps_as_int16_in_any_order():
    """Adds and subtracts in int16 wrap, so an incremental row equals a refresh even through an overflow."""
    net = random_nnue("all", "simple", l1=4)
    arrays = dict(net.arrays, ft_weight=np.full((768, 4), 100.0, np.float32))  # 25500 a feature
    q = quantise(FloatNNUE.from_arrays(arrays, net.meta))
    row = q.accumulator([1, 2])  # 2 * 25500 + bias: beyond 32767, wrapped
    assert row.dtype == np.int16
    incremental = q.accumulator([1, 2, 3]).astype(np.int64) - q.arrays["ft_weight"][3]
    assert np.array_equal(incremental.astype(np.int16), row)


def _error_bound(net: FloatNNUE, stm: list[int], nstm: list[int]) -> float:
    """A rigorous bound on |quantised cp - float cp|: rounding errors of at most half a unit per weight
    (1/(2 QA) in the transformer, 1/(2 QB) after it), propagated through the layers (clamp is
    1-Lipschitz, the square 2-Lipschitz on [0, 1]), plus every floor division of the integer path
    (less than one unit each) and the final centipawn floor."""
    a = {name: array.astype(np.float64) for name, array in net.arrays.items()}
    q = {name: array.astype(np.float64) for name, array in quantise(net).arrays.items()}
    screlu = net.activation == "screlu"
    lip = 2.0 if screlu else 1.0
    sides = [stm] if net.arch == "simple" else [stm, nstm]
    hidden = np.concatenate([np.clip(net.accumulator(s), 0, 1) ** (2 if screlu else 1) for s in sides])
    e_hidden = np.concatenate([np.full(net.l1, lip * (len(s) + 1) * 0.5 / QA) for s in sides])
    if net.arch == "layered":
        z = a["l2_weight"] @ hidden + a["l2_bias"]
        e_z = (np.abs(q["l2_weight"]) / QB @ e_hidden + 0.5 / QB * np.abs(hidden).sum()
               + 0.5 / (QA * QB) + 2.0 / QA + (1.0 / (QA * QB) if screlu else 0.0))
        hidden = np.clip(z, 0, 1) ** (2 if screlu else 1)
        e_hidden = lip * e_z + (1.0 / QA if screlu else 0.0)
        floors = 0.0
    else:
        floors = 1.0 / (QA * QB) if screlu else 0.0
    e_y = np.abs(q["out_weight"]) / QB @ e_hidden + 0.5 / QB * np.abs(hidden).sum() + 0.5 / (QA * QB) + floors
    return net.scale * e_y + 1.0


def _dequantised(net: FloatNNUE) -> FloatNNUE:
    """The float net whose weights are the quantised ones divided by their scales."""
    q = quantise(net).arrays
    scales = {"ft_weight": QA, "ft_bias": QA, "out_weight": QB, "l2_weight": QB, "out_bias": QA * QB,
              "l2_bias": QA * QB}
    return FloatNNUE.from_arrays({name: q[name] / scales[name] for name in q}, net.meta)


def _floor_bound(net: FloatNNUE) -> float:
    """|integer cp - dequantised float cp|: the floor divisions alone (each less than one unit)."""
    if net.arch != "layered":
        return 1.0 + (net.scale / (QA * QB) if net.activation == "screlu" else 0.0)
    screlu = net.activation == "screlu"
    e_z = 2.0 / QA + (1.0 / (QA * QB) if screlu else 0.0)
    e_h2 = (2.0 if screlu else 1.0) * e_z + (1.0 / QA if screlu else 0.0)
    return net.scale * e_h2 * np.abs(quantise(net).arrays["out_weight"]).sum() / QB + 1.0


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("activation", ["crelu", "screlu"])
def test_quantised_evaluation_is_within_the_quantisation_error_of_the_float_one(arch, activation, positions):
    """On 1000 positions: the integer path equals the float net with the quantised weights up to its
    floor divisions (exact arithmetic), and the float net itself within the rounding error's bound."""
    net = random_nnue("all", arch, l1=32, l2=8, activation=activation, seed=7)
    q = quantise(net)
    dequantised = _dequantised(net)
    assert q.accumulator_bound <= 32767
    floors = _floor_bound(net)
    errors, bounds, values = [], [], []
    for stm, nstm in positions:
        exact = net.evaluate(stm, nstm)
        quantised = q.evaluate(stm, nstm)
        assert isinstance(quantised, int)
        assert abs(quantised - dequantised.evaluate(stm, nstm)) <= floors + 1e-3
        errors.append(quantised - exact)
        bounds.append(_error_bound(net, stm, nstm))
        values.append(exact)
    errors_, bounds_ = np.abs(np.array(errors)), np.array(bounds)
    assert (errors_ <= bounds_).all(), (errors_ - bounds_).max()
    assert np.std(values) > 20  # the net tells positions apart: the comparison is not of constants
    assert errors_.mean() < 0.25 * np.std(values)  # and quantisation keeps most of what it tells
    print(f"{arch} {activation}: |error| mean {errors_.mean():.2f} cp, max {errors_.max():.2f} cp, "
          f"bound mean {bounds_.mean():.1f} cp, floors {floors:.1f} cp, eval std {np.std(values):.0f} cp")


@pytest.fixture(scope="module")
def positions():
    fs = parse_features("all")
    return [reference_features(board, fs) for board in _positions(1000)]


def test_an_nnue_file_given_as_a_policy_value_network_is_named_as_such(tmp_path, capsys):
    from commands.main import main

    path = tmp_path / "eval.npz"
    net = random_nnue("all", "perspective", 8, seed=0)
    save_nnue(path, net.arrays, net.meta)
    puzzles = tmp_path / "puzzles.csv"
    puzzles.write_text("fen,best_uci\n6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1,a1a8\n")
    assert main(["puzzles", str(puzzles), "--player", f"mcts:{path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "NNUE" in err and f"ab:{path}" in err and len(err.splitlines()) == 1


SHIPPED_NNUE = sorted(path.name for path in (Path(__file__).resolve().parent.parent / "docs" / "nets").glob("*.npz"))


def test_the_shipped_nnue_nets_are_found() -> None:
    assert {"nnue-all-128.npz", "nnue-own-gen8.npz"} <= set(SHIPPED_NNUE)


@pytest.mark.parametrize("name", SHIPPED_NNUE)
def test_the_shipped_nets_load_and_know_material(name: str) -> None:
    """docs/nets/ (the nets docs/RESULTS.md measures: Stockfish's labels, and our own games only): the
    quantised net says the start is about level, a queen up is winning for whoever has it, from either
    side to move."""
    net = load_nnue(Path(__file__).resolve().parent.parent / "docs" / "nets" / name)
    assert (net.meta["features"], net.arch, net.l1) == ("all", "perspective", 128)
    q = quantise(net)
    fs = parse_features("all")

    def cp(fen: str) -> int:
        return q.evaluate(*reference_features(chess.Board(fen), fs))

    assert abs(cp(chess.STARTING_FEN)) < 100
    queen_up = "rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"  # Black's queen is gone
    assert cp(queen_up) > 500 and cp(queen_up.replace(" w ", " b ")) < -500
