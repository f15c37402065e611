"""Tests for game records, the on-disk shard format and the sampling window (``alphazero.learn.replay``).

Real self-play games (uniform evaluator, tiny searches) are written and read back; the window tests
use synthetic shards whose positions are all distinct, so every sampled row can be traced to the
position (and shard) it came from.
"""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import chess
import chess.pgn
import numpy as np
import pytest
import torch

from alphazero.board import encoding
from alphazero.board.game import MAX_LENGTH
from alphazero.config import SearchConfig, SelfPlayConfig
from alphazero.learn import replay
from alphazero.learn.replay import (
    MATERIAL_SCALE,
    GameRecord,
    ReplayWindow,
    material_targets,
    next_shard_path,
    read_shard,
    shard_paths,
    write_shard,
)
from alphazero.nets.evaluator import UniformEvaluator
from alphazero.search.selfplay import SelfPlayer, moves_left_targets

torch.set_num_threads(1)


# -- helpers ------------------------------------------------------------------------------------------


def _play(max_plies: int, games: int = 4, sims: int = 8, seed: int = 11, record_searches: bool = False):
    """Self-play ``games`` games; with ``record_searches`` also every search's (board, result) per game."""
    player = SelfPlayer(
        UniformEvaluator(), SearchConfig(num_simulations=sims),
        SelfPlayConfig(games_per_worker=games, max_plies=max_plies, temperature_plies=max_plies, random_opening_plies=0),
        seed=seed, network_version=3,
    )
    searches: dict[int, tuple] = {}
    if record_searches:
        original = player.mcts.search

        def recording_search(trees, **kwargs):
            boards = [tree.board.copy() for tree in trees]
            results = original(trees, **kwargs)
            for tree, board, result in zip(trees, boards, results):
                searches.setdefault(id(tree), (tree, []))[1].append((board, result))
            return results

        player.mcts.search = recording_search
    finished = player.play(games)
    return finished, list(searches.values())


def _pgn_moves(pgn: str) -> list[chess.Move]:
    game = chess.pgn.read_game(io.StringIO(pgn))
    return list(game.mainline_moves())


def _dense_pi(actions: np.ndarray, counts: np.ndarray) -> np.ndarray:
    pi = np.zeros(encoding.NUM_ACTIONS, dtype=np.float64)
    pi[np.asarray(actions, dtype=np.int64)] = np.asarray(counts, dtype=np.float64) / float(np.sum(counts))
    return pi


@pytest.fixture(scope="module")
def played():
    games, searches = _play(max_plies=30, record_searches=True)
    assert len(games) >= 4
    return games, searches


def _synthetic_record(first_id: int, size: int, z: int, rng: np.random.Generator, known: bool = True):
    """A record of ``size`` distinct random positions; returns (record, {planes bytes: (id, actions, counts, z, q)})."""
    packed = rng.integers(0, 256, (size, encoding.PACKED_SIZE), dtype=np.uint8)
    lengths = rng.integers(1, 6, size)
    actions, counts, table = [], [], {}
    q = rng.uniform(-1, 1, size).astype(np.float16)
    for i in range(size):
        a = rng.choice(encoding.NUM_ACTIONS, size=int(lengths[i]), replace=False).astype(np.uint16)
        c = rng.integers(1, 40, int(lengths[i])).astype(np.uint16)
        actions.append(a)
        counts.append(c)
        key = encoding.unpack_planes(packed[i]).tobytes()
        assert key not in table
        table[key] = (first_id + i, a, c, z, float(q[i]))
    record = GameRecord(
        planes=packed, policy_offsets=np.concatenate(([0], np.cumsum(lengths))),
        policy_actions=np.concatenate(actions), policy_counts=np.concatenate(counts),
        z=np.full(size, z, dtype=np.int8), root_values=q,
        result={1: "1-0", -1: "0-1", 0: "1/2-1/2"}[z], termination="checkmate" if known else MAX_LENGTH,
        network_version=first_id, pgn="*", plies=size,
    )
    return record, table


def _window_of(tmp_path: Path, sizes: list[int], capacity: int, seed: int = 0):
    """Shards of the given sizes (one game each, z cycling 1, 0, -1) added in order to a window."""
    rng = np.random.default_rng(seed)
    window = ReplayWindow(capacity)
    table: dict[bytes, tuple] = {}
    next_id = 0
    for index, size in enumerate(sizes):
        record, entries = _synthetic_record(next_id, size, (1, 0, -1)[index % 3], rng)
        next_id += size
        table.update(entries)
        path = next_shard_path(tmp_path)
        write_shard(path, [record])
        window.add(read_shard(path))
    return window, table


def _sampled_ids(planes: np.ndarray, table: dict) -> np.ndarray:
    return np.array([table[row.tobytes()][0] for row in planes])


# -- shard round trip -----------------------------------------------------------------------------------


def test_shard_reads_back_exactly(tmp_path, played):
    games, _ = played
    games = [dataclasses.replace(game, network_version=3 + i) for i, game in enumerate(games)]
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, games)
    shard = read_shard(path)
    assert shard.num_games == len(games)
    assert shard.num_positions == sum(g.num_positions for g in games)
    np.testing.assert_array_equal(shard.planes, np.concatenate([g.planes for g in games]))
    assert shard.planes.dtype == np.uint8 and shard.planes.shape[1] == encoding.PACKED_SIZE
    np.testing.assert_array_equal(shard.z, np.concatenate([g.z for g in games]))
    np.testing.assert_array_equal(shard.root_values, np.concatenate([g.root_values for g in games]))
    np.testing.assert_array_equal(shard.policy_actions, np.concatenate([g.policy_actions for g in games]))
    np.testing.assert_array_equal(shard.policy_counts, np.concatenate([g.policy_counts for g in games]))
    np.testing.assert_array_equal(shard.game_positions, [g.num_positions for g in games])
    np.testing.assert_array_equal(shard.network_versions, [g.network_version for g in games])
    assert shard.pgns == [g.pgn for g in games]
    assert shard.results == [g.result for g in games]
    assert shard.terminations == [g.termination for g in games]
    assert shard.plies == [g.plies for g in games]
    np.testing.assert_array_equal(shard.moves_left, np.concatenate([g.moves_left for g in games]))
    # Per-position policy slices line up with each game's own offsets.
    position = 0
    for game in games:
        for t in range(game.num_positions):
            lo, hi = shard.policy_offsets[position], shard.policy_offsets[position + 1]
            glo, ghi = game.policy_offsets[t], game.policy_offsets[t + 1]
            np.testing.assert_array_equal(shard.policy_actions[lo:hi], game.policy_actions[glo:ghi])
            np.testing.assert_array_equal(shard.policy_counts[lo:hi], game.policy_counts[glo:ghi])
            position += 1


# -- the moves-left head's target ----------------------------------------------------------------------


def test_moves_left_targets_count_plies_to_the_end_of_finished_games_only():
    assert moves_left_targets([0, 1, 2, 5], 9, finished=True).tolist() == [9, 8, 7, 4]
    assert moves_left_targets([0, 1, 2, 5], 9, finished=False).tolist() == [-1, -1, -1, -1]
    assert moves_left_targets([], 3, finished=True).dtype == np.int16


def test_self_play_records_the_plies_each_position_had_left():
    # From a position with a mate in one (played at once) and from the start (stopped at 12 plies): every
    # recorded position of a finished game knows the plies to its end, read here from its ply plane.
    mates = SelfPlayer(UniformEvaluator(), SearchConfig(num_simulations=8),
                       SelfPlayConfig(games_per_worker=2, max_plies=12, temperature_plies=0, random_opening_plies=0),
                       seed=1, start_fen_fn=lambda rng: "k7/8/1K6/8/3Q4/8/8/8 w - - 0 1")
    capped, _ = _play(max_plies=12, games=2)
    finished = mates.play(2)
    assert {g.termination for g in finished} == {"checkmate"}
    for game in finished + capped:
        ply = game.planes[:, replay._PLY_BYTE].astype(np.int64)
        if game.termination == MAX_LENGTH:
            assert (game.moves_left == -1).all()
        else:
            np.testing.assert_array_equal(game.moves_left, game.plies - ply)
            assert game.moves_left[-1] >= 1
    assert any(g.termination == MAX_LENGTH for g in capped)


def test_a_shard_written_before_the_moves_left_target_reads_it_as_unknown(good_shard):
    with np.load(good_shard) as data:
        arrays = {key: data[key] for key in data.files if key != "moves_left"}
    np.savez_compressed(good_shard, **arrays)
    shard = read_shard(good_shard)
    assert shard.moves_left.shape == shard.z.shape and (shard.moves_left == -1).all()
    window = ReplayWindow(1000)
    window.add(shard)
    assert (window.sample(8, np.random.default_rng(0)).moves_left == -1).all()


def test_window_samples_each_position_with_its_moves_left(tmp_path):
    record, table = _synthetic_record(0, 12, 1, np.random.default_rng(5))
    record.moves_left = np.arange(12, 0, -1).astype(np.int16)
    write_shard(tmp_path / "shard-00000000.npz", [record])
    window = ReplayWindow(1000)
    window.add(read_shard(tmp_path / "shard-00000000.npz"))
    batch = window.sample(64, np.random.default_rng(1))
    ids = _sampled_ids(batch.planes, table)
    np.testing.assert_array_equal(batch.moves_left, 12 - ids)


def test_stored_pi_is_what_the_search_produced(tmp_path, played):
    games, searches = played
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, games)
    shard = read_shard(path)
    position = 0
    for game in games:
        moves = _pgn_moves(game.pgn)
        matching = [log for tree, log in searches if list(tree.board.move_stack) == moves]
        assert len(matching) == 1, "every finished game is one searched game"
        log = matching[0]
        assert len(log) == game.num_positions
        for board, result in log:
            lo, hi = shard.policy_offsets[position], shard.policy_offsets[position + 1]
            stored = _dense_pi(shard.policy_actions[lo:hi], shard.policy_counts[lo:hi])
            searched = _dense_pi(encoding.moves_to_actions(board, result.moves), result.target_counts)
            np.testing.assert_allclose(stored, searched, rtol=0, atol=1e-12)
            np.testing.assert_array_equal(encoding.unpack_planes(shard.planes[position]), encoding.encode_board(board))
            position += 1
    assert position == shard.num_positions


def test_positions_take_little_disk_space(tmp_path):
    games, _ = _play(max_plies=80, seed=5)
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, games[:4])
    positions = sum(g.num_positions for g in games[:4])
    assert positions >= 4 * 40  # games of realistic length
    assert path.stat().st_size / positions < 256


def test_write_shard_leaves_no_temp_file_and_needs_games(tmp_path, played):
    games, _ = played
    write_shard(tmp_path / "replay" / "shard-00000000.npz", games[:1])
    assert os.listdir(tmp_path / "replay") == ["shard-00000000.npz"]
    with pytest.raises(ValueError):
        write_shard(tmp_path / "replay" / "shard-00000001.npz", [])


def test_interrupted_shard_write_keeps_the_previous_file(tmp_path, played, monkeypatch):
    games, _ = played
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, games[:1])
    before = path.read_bytes()

    def half_then_fail(handle, **arrays):
        handle.write(b"PK\x03\x04 partial")
        raise OSError("killed")

    monkeypatch.setattr(replay.np, "savez_compressed", half_then_fail)
    with pytest.raises(OSError):
        write_shard(path, games)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["shard-00000000.npz"]
    assert read_shard(path).num_games == 1


# -- damaged or foreign files --------------------------------------------------------------------------


@pytest.fixture()
def good_shard(tmp_path, played):
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, played[0])
    return path


def _assert_refused(path: Path) -> None:
    with pytest.raises(ValueError) as error:
        read_shard(path)
    assert str(path) in str(error.value)


def test_truncated_shard_is_refused_naming_it(good_shard):
    data = good_shard.read_bytes()
    for keep in (len(data) // 2, len(data) - 10, 30):
        good_shard.write_bytes(data[:keep])
        _assert_refused(good_shard)


def test_random_bytes_and_empty_file_are_refused_naming_them(tmp_path):
    path = tmp_path / "shard-00000000.npz"
    path.write_bytes(np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    _assert_refused(path)
    path.write_bytes(b"")
    _assert_refused(path)


def test_foreign_npz_is_refused_naming_it(tmp_path):
    path = tmp_path / "shard-00000000.npz"
    np.savez(path, weights=np.zeros(3), labels=np.arange(4))
    _assert_refused(path)


def test_shard_of_another_format_version_is_refused_naming_it(good_shard):
    with np.load(good_shard) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["format_version"] = np.array([replay.SHARD_FORMAT_VERSION + 1], dtype=np.int32)
    np.savez_compressed(good_shard, **arrays)
    _assert_refused(good_shard)


def test_shard_with_inconsistent_arrays_is_refused_naming_it(good_shard):
    with np.load(good_shard) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["z"] = arrays["z"][:-1]
    np.savez_compressed(good_shard, **arrays)
    _assert_refused(good_shard)


def test_npy_file_under_a_shard_name_is_refused_naming_it(tmp_path):
    # A plain .npy array (np.load returns an ndarray, not an archive) is a foreign file too.
    path = tmp_path / "shard-00000000.npz"
    with open(path, "wb") as handle:
        np.save(handle, np.arange(10))
    _assert_refused(path)


def test_shard_with_damaged_compressed_data_is_refused_naming_it(good_shard):
    # Bytes overwritten inside the compressed members (bit rot, a bad copy): still a ValueError.
    data = good_shard.read_bytes()
    for start in (len(data) // 3, len(data) // 2):
        damaged = bytearray(data)
        for i in range(start, start + 64):
            damaged[i] ^= 0xFF
        good_shard.write_bytes(bytes(damaged))
        _assert_refused(good_shard)


# -- shard names ------------------------------------------------------------------------------------------


def test_shard_paths_sorts_and_ignores_temp_and_other_files(tmp_path):
    for name in ("shard-00000002.npz", "shard-00000000.npz", "shard-00000010.npz", ".shard-00000011.npz.k2j4.tmp",
                 "shard-00000003.npz.tmp", "notes.txt", "shard-3.npz", "shard-00000004.npy"):
        (tmp_path / name).write_bytes(b"x")
    assert [p.name for p in shard_paths(tmp_path)] == ["shard-00000000.npz", "shard-00000002.npz", "shard-00000010.npz"]


def test_shard_paths_of_missing_directory_is_empty(tmp_path):
    assert shard_paths(tmp_path / "replay") == []
    assert next_shard_path(tmp_path / "replay") == tmp_path / "replay" / "shard-00000000.npz"


def test_next_shard_path_increments(tmp_path, played):
    games, _ = played
    names = []
    for _ in range(3):
        path = next_shard_path(tmp_path)
        write_shard(path, games[:1])
        names.append(path.name)
    assert names == ["shard-00000000.npz", "shard-00000001.npz", "shard-00000002.npz"]
    (tmp_path / ".shard-00000007.npz.abc.tmp").write_bytes(b"partial")  # an interrupted write
    assert next_shard_path(tmp_path).name == "shard-00000003.npz"
    assert shard_paths(tmp_path) == [tmp_path / n for n in names]


# -- the window ------------------------------------------------------------------------------------------


def test_window_samples_only_the_newest_capacity_positions(tmp_path):
    window, table = _window_of(tmp_path, [10, 20, 15], capacity=25)  # ids 0..44, newest 25: 20..44
    assert window.num_positions == 25
    assert all(shard.game_positions.sum() != 10 for shard in window.shards)  # the oldest shard was dropped
    planes, pi, z, q, known, *_ = window.sample(5000, np.random.default_rng(0))
    ids = _sampled_ids(planes, table)
    assert ids.min() >= 20 and ids.max() <= 44
    counts = np.bincount(ids - 20, minlength=25)
    assert (counts > 0).all()  # every position of the window can be drawn
    chi2 = (((counts - 200.0) ** 2) / 200.0).sum()  # 24 degrees of freedom
    assert chi2 < 80, chi2


@pytest.mark.parametrize("capacity, oldest", [(35, 10), (36, 9), (45, 0), (1000, 0)])
def test_window_boundary(tmp_path, capacity, oldest):
    window, table = _window_of(tmp_path, [10, 20, 15], capacity=capacity)
    assert window.num_positions == min(capacity, 45)
    planes, *_ = window.sample(3000, np.random.default_rng(1))
    ids = _sampled_ids(planes, table)
    assert ids.min() == oldest and ids.max() == 44


def test_window_rows_are_the_stored_positions(tmp_path):
    window, table = _window_of(tmp_path, [12, 7, 9], capacity=100)
    planes, pi, z, q, known, *_ = window.sample(400, np.random.default_rng(2))
    assert planes.dtype == np.uint8 and planes.shape == (400, 24, 8, 8)
    assert pi.dtype == np.float32 and pi.shape == (400, 4672)
    assert z.shape == (400,) and q.shape == (400,) and known.shape == (400,)
    np.testing.assert_allclose(pi.sum(axis=1), 1.0, atol=1e-5)
    assert set(np.unique(z)) <= {-1.0, 0.0, 1.0}
    for row in range(400):
        _, actions, counts, z_value, q_value = table[planes[row].tobytes()]
        np.testing.assert_allclose(pi[row], _dense_pi(actions, counts), atol=1e-6)
        assert set(np.flatnonzero(pi[row])) == set(actions.astype(int))
        assert z[row] == z_value
        assert q[row] == pytest.approx(q_value, abs=1e-3)
    assert known.all()


def test_window_sampling_is_uniform_across_shards_of_different_sizes(tmp_path):
    window, table = _window_of(tmp_path, [10, 30], capacity=1000)
    rng = np.random.default_rng(3)
    ids = np.concatenate([_sampled_ids(window.sample(1000, rng)[0], table) for _ in range(8)])
    counts = np.bincount(ids, minlength=40)
    assert counts.sum() == 8000 and len(counts) == 40
    chi2 = (((counts - 200.0) ** 2) / 200.0).sum()  # 39 degrees of freedom: mean 39, sd ~9
    assert chi2 < 100, chi2
    assert abs(counts[:10].sum() / 8000 - 0.25) < 0.03  # the small shard gets its share, not half


def test_window_marks_positions_of_unfinished_games(tmp_path):
    rng = np.random.default_rng(4)
    finished, finished_table = _synthetic_record(0, 6, 1, rng, known=True)
    unfinished, unfinished_table = _synthetic_record(6, 6, 0, rng, known=False)
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, [finished, unfinished])
    window = ReplayWindow(100)
    window.add(read_shard(path))
    planes, _, _, _, known, *_ = window.sample(200, np.random.default_rng(5))
    for row in range(200):
        key = planes[row].tobytes()
        assert known[row] == (key in finished_table)


def test_window_of_real_games(tmp_path, played):
    games, _ = played
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, games)
    window = ReplayWindow(10_000)
    window.add(read_shard(path))
    stored: dict[bytes, set] = {}
    for game in games:
        for t in range(game.num_positions):
            key = encoding.unpack_planes(game.planes[t]).tobytes()
            actions = game.policy_actions[game.policy_offsets[t]:game.policy_offsets[t + 1]]
            stored.setdefault(key, set()).update(actions.astype(int).tolist())
    planes, pi, z, *_ = window.sample(64, np.random.default_rng(6))
    assert planes.shape == (64, 24, 8, 8) and pi.shape == (64, 4672)
    np.testing.assert_allclose(pi.sum(axis=1), 1.0, atol=1e-5)
    assert set(np.unique(z)) <= {-1.0, 0.0, 1.0}
    for row in range(64):
        assert set(np.flatnonzero(pi[row]).tolist()) <= stored[planes[row].tobytes()]


def test_empty_window_cannot_be_sampled():
    with pytest.raises(ValueError):
        ReplayWindow(10).sample(4, np.random.default_rng(0))


_VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


def _balance(board: chess.Board, colour: chess.Color) -> int:
    return sum(_VALUES[p.piece_type] * (1 if p.color == colour else -1) for p in board.piece_map().values())


def test_material_targets_read_the_balance_horizon_plies_ahead_within_each_game():
    # Game one trades and wins pieces (1.e4 d5 2.exd5 Qxd5 3.Nc3 Qxa2? 4.Rxa2 ...); its fourth
    # position is left out, as playout caps leave fast-search positions unrecorded. Game two is
    # shorter than the horizon, so its positions read its own last position, never game one's.
    def boards_of(sans: list[str]) -> list[chess.Board]:
        board, out = chess.Board(), []
        for san in sans:
            out.append(board.copy())
            board.push_san(san)
        return out

    one = boards_of(["e4", "d5", "exd5", "Qxd5", "Nc3", "Qxa2", "Rxa2", "Bg4", "Qxg4", "e5", "Qxg7"])
    del one[3]
    two = boards_of(["Nf3", "e5", "Nxe5"])
    boards = one + two
    packed = encoding.encode_packed(boards)
    for horizon in (0, 1, 4):
        targets = material_targets(packed, np.array([len(one), len(two)]), horizon)
        for game in (one, two):
            offset = 0 if game is one else len(one)
            for t, board in enumerate(game):
                later = next((b for b in game[t:] if b.ply() >= board.ply() + horizon), game[-1])
                expected = np.tanh(_balance(later, board.turn) / MATERIAL_SCALE)
                assert targets[offset + t] == pytest.approx(expected, abs=1e-6), (horizon, t)
    # The data is not flat: a queen and more change hands in game one.
    assert np.ptp(material_targets(packed, np.array([len(one), len(two)]), 4)) > 1.0


def test_window_sample_carries_each_positions_material_target(tmp_path):
    window, table = _window_of(tmp_path, [30, 25], capacity=1000)
    planes, _, _, _, _, material, _ = window.sample(200, np.random.default_rng(7))
    stored = np.concatenate([s.material for s in window.shards])
    flat = np.concatenate([s.planes for s in window.shards])
    index = {row.tobytes(): i for i, row in enumerate(flat)}
    rows = encoding.pack_planes(planes)
    assert np.array_equal(material, stored[[index[row.tobytes()] for row in rows]])


def test_diagnose_counts_capped_games_that_one_side_was_winning_on_material():
    # Three games: capped with White a rook up at its last position, capped level, and finished
    # (checkmate, where the balance does not matter). One of the two capped games is "ahead".
    from types import SimpleNamespace

    from alphazero.learn.diagnose import data_report

    up_a_rook = chess.Board("4k3/8/8/8/8/8/8/R3K3 b - - 0 60")
    level = chess.Board("4k3/4p3/8/8/8/8/4P3/4K3 w - - 0 60")
    boards = [chess.Board(), up_a_rook, chess.Board(), level, chess.Board(), chess.Board()]
    packed = encoding.encode_packed(boards)
    terminations = [MAX_LENGTH, MAX_LENGTH, "checkmate"]
    counts = np.array([2, 2, 2])
    shard = SimpleNamespace(terminations=terminations, plies=[200, 200, 40], planes=packed, game_positions=counts,
                            z=np.array([0, 0, 0, 0, 1, -1], dtype=np.int8),
                            result_known=np.repeat([t != MAX_LENGTH for t in terminations], counts))
    report = data_report([shard])
    assert report["capped_games_5_points_ahead"] == 0.5
    assert report["positions_with_result"] == pytest.approx(1 / 3, abs=1e-3)
    shard.terminations = ["checkmate"] * 3
    assert data_report([shard])["capped_games_5_points_ahead"] is None
