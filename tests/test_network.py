"""Tests for the policy/value network and its safe file format (``alphazero.nets.network``)."""

from __future__ import annotations

import dataclasses
import math
import pathlib
import pickle

import chess
import numpy as np
import pytest
import torch

from alphazero.board import encoding
from alphazero.nets.network import (
    MOVES_LEFT_SCALE,
    NetworkConfig,
    PolicyValueNet,
    fuse_for_inference,
    load_network,
    moves_left_adjustment,
    net_from_payload,
    net_to_payload,
    save_network,
)

torch.set_num_threads(1)

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)


def _planes(count: int = 6, seed: int = 0) -> torch.Tensor:
    """Real encoded positions from a short random game."""
    rng = np.random.default_rng(seed)
    board = chess.Board()
    boards = []
    while len(boards) < count:
        boards.append(board.copy())
        moves = list(board.legal_moves)
        if not moves:
            board = chess.Board()
            continue
        board.push(moves[int(rng.integers(len(moves)))])
    return torch.from_numpy(encoding.encode_boards(boards))


def _net_with_nontrivial_batchnorm(seed: int = 0, config: NetworkConfig = TINY) -> PolicyValueNet:
    """A tiny net whose BatchNorm statistics and affine parameters are far from their defaults."""
    torch.manual_seed(seed)
    net = PolicyValueNet(config)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                n = module.num_features
                module.running_mean.copy_(torch.randn(n, generator=generator) * 0.5)
                module.running_var.copy_(torch.rand(n, generator=generator) * 2 + 0.2)
                module.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                module.bias.copy_(torch.randn(n, generator=generator) * 0.3)
    return net


# -- forward ----------------------------------------------------------------------------------------


def test_forward_shapes_and_value_range():
    net = PolicyValueNet(TINY).eval()
    planes = _planes(5)
    logits, value = net(planes)
    assert logits.shape == (5, encoding.NUM_ACTIONS) == (5, 4672)
    assert value.shape == (5,)
    assert logits.dtype == torch.float32 and value.dtype == torch.float32
    assert torch.isfinite(logits).all()
    assert ((value >= -1) & (value <= 1)).all()


def test_value_stays_in_range_for_extreme_weights_and_inputs():
    torch.manual_seed(3)
    net = PolicyValueNet(TINY).eval()
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.mul_(50.0)
    planes = torch.randint(0, 256, (8, encoding.NUM_PLANES, 8, 8), dtype=torch.uint8)
    _, value = net(planes)
    assert ((value >= -1) & (value <= 1)).all()
    assert value.abs().max() > 0.5  # the weights really were extreme


def test_train_mode_forward_gives_the_same_shapes():
    net = PolicyValueNet(TINY).train()
    logits, value = net(_planes(2))
    assert logits.shape == (2, 4672) and value.shape == (2,)


def test_output_is_per_position():
    net = _net_with_nontrivial_batchnorm().eval()
    planes = _planes(4)
    logits, value = net(planes)
    logits_one, value_one = net(planes[2:3])
    torch.testing.assert_close(logits_one[0], logits[2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(value_one[0], value[2], rtol=1e-5, atol=1e-5)


# -- save / load ----------------------------------------------------------------------------------------


def test_save_load_round_trip_gives_equal_outputs(tmp_path):
    net = _net_with_nontrivial_batchnorm().eval()
    path = tmp_path / "nets" / "gen-0001.pt"
    save_network(net, path, {"generation": 1})
    loaded = load_network(path).eval()
    assert loaded.config == TINY
    planes = _planes(6)
    with torch.no_grad():
        a_logits, a_value = net(planes)
        b_logits, b_value = loaded(planes)
    assert torch.equal(a_logits, b_logits)
    assert torch.equal(a_value, b_value)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind


def test_save_replaces_an_existing_file(tmp_path):
    path = tmp_path / "net.pt"
    first = _net_with_nontrivial_batchnorm(seed=1).eval()
    second = _net_with_nontrivial_batchnorm(seed=2).eval()
    save_network(first, path)
    save_network(second, path)
    planes = _planes(3)
    with torch.no_grad():
        assert torch.equal(load_network(path).eval()(planes)[0], second(planes)[0])


def test_load_missing_file_names_it(tmp_path):
    path = tmp_path / "absent.pt"
    with pytest.raises(ValueError) as error:
        load_network(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_load_damaged_file_names_it(tmp_path, damage):
    path = tmp_path / "net.pt"
    save_network(PolicyValueNet(TINY), path)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    else:
        path.write_bytes(b"")
    with pytest.raises(ValueError) as error:
        load_network(path)
    assert str(path) in str(error.value)


def test_a_corrupt_network_file_is_one_short_line(one_line_error, tmp_path):
    """torch's refusal of a foreign file is a paragraph advising weights_only=False; the user gets one short line."""
    path = tmp_path / "net.pt"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    message = one_line_error("export", "--onnx", str(path), "--out", str(tmp_path / "net.onnx"))
    assert f"{path}: not a torch file, or a damaged one" in message and len(message) - len(str(path)) < 90
    assert "weights_only" not in message and not (tmp_path / "net.onnx").exists()


def test_load_a_torch_file_that_is_not_a_network_names_it(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(ValueError) as error:
        load_network(path)
    assert str(path) in str(error.value)


def test_load_weights_of_another_shape_is_refused(tmp_path):
    path = tmp_path / "net.pt"
    save_network(PolicyValueNet(TINY), path)
    payload = torch.load(path, weights_only=True)
    payload["config"] = dataclasses.asdict(dataclasses.replace(TINY, channels=16))
    torch.save(payload, path)
    with pytest.raises(ValueError) as error:
        load_network(path)
    assert str(path) in str(error.value)


class _Exploit:
    """Unpickling this object creates ``marker`` (a stand-in for arbitrary code execution)."""

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_pickled_object_is_refused_without_running_code(tmp_path):
    # Control: the payload really does run code when unpickled without restrictions.
    control = tmp_path / "control-marker"
    pickle.loads(pickle.dumps(_Exploit(control)))
    assert control.exists()

    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    good = PolicyValueNet(TINY)
    save_network(good, tmp_path / "good.pt")
    payload = torch.load(tmp_path / "good.pt", weights_only=True)
    payload["metadata"] = {"note": _Exploit(marker)}  # otherwise a valid network file
    torch.save(payload, path)
    assert not marker.exists()
    with pytest.raises(ValueError) as error:
        load_network(path)
    assert str(path) in str(error.value)
    assert not marker.exists()


def test_bare_pickled_object_is_refused_without_running_code(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    torch.save(_Exploit(marker), path)
    with pytest.raises(ValueError):
        load_network(path)
    assert not marker.exists()


# -- inference fusion -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [TINY, dataclasses.replace(TINY, se_ratio=2), dataclasses.replace(TINY, policy_kernel=1)],
                         ids=["plain", "squeeze-excitation", "1x1-policy"])
def test_fuse_for_inference_matches_eval_mode(config):
    net = _net_with_nontrivial_batchnorm(seed=5, config=config)
    net.train()  # fusion must use the running statistics, whatever mode the source is in
    fused = fuse_for_inference(net)
    planes = _planes(8, seed=2)
    with torch.no_grad():
        expected_logits, expected_value = net.eval()(planes)
        fused_logits, fused_value = fused(planes)
    torch.testing.assert_close(fused_logits, expected_logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fused_value, expected_value, rtol=1e-4, atol=1e-4)
    # The batch statistics of train mode give different outputs: the comparison above is meaningful.
    with torch.no_grad():
        train_logits, _ = net.train()(planes)
    assert not torch.allclose(train_logits, expected_logits, atol=1e-3)


def test_squeeze_excitation_lets_a_square_see_the_whole_board(tmp_path):
    """One block: the convolutions reach 4 squares (stem, two in the block, the policy head's 3x3), so a
    rook on a1 or b1 cannot change the policy logits of moves from h8 (7 squares away) through them; with
    squeeze-excitation's board-wide mean it does. The net saves, loads and exports as any other."""
    from alphazero.nets.inference import INPUT_NAME, export_onnx, onnx_session

    kings = chess.Board(None)
    kings.set_piece_at(chess.E4, chess.Piece(chess.KING, chess.WHITE))
    kings.set_piece_at(chess.E6, chess.Piece(chess.KING, chess.BLACK))
    on_a1, on_b1 = kings.copy(), kings.copy()  # the same material (whose planes are board-wide constants)
    on_a1.set_piece_at(chess.A1, chess.Piece(chess.ROOK, chess.WHITE))
    on_b1.set_piece_at(chess.B1, chess.Piece(chess.ROOK, chess.WHITE))
    planes = torch.from_numpy(encoding.encode_boards([on_a1, on_b1]))
    h8 = [plane * 64 + chess.H8 for plane in range(73)]
    differences = {}
    for ratio in (0, 2):
        torch.manual_seed(3)
        net = PolicyValueNet(dataclasses.replace(TINY, se_ratio=ratio)).eval()
        with torch.no_grad():
            logits, _ = net(planes)
        differences[ratio] = (logits[0, h8] - logits[1, h8]).abs().max().item()
    assert differences[0] == 0.0 and differences[2] > 1e-6, differences  # exactly none without the pooling
    path = tmp_path / "se.pt"
    save_network(net, path)
    loaded = load_network(path)
    assert loaded.config.se_ratio == 2 and all(block.se is not None for block in loaded.tower)
    session = onnx_session(export_onnx(loaded), threads=1)
    onnx_logits, _ = session.run(None, {INPUT_NAME: planes.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(onnx_logits, loaded.eval()(planes)[0].numpy(), atol=1e-4)
    payload = net_to_payload(PolicyValueNet(TINY))
    del payload["config"]["se_ratio"]  # a network saved before the key existed has plain blocks
    assert all(block.se is None for block in net_from_payload(payload).tower)


def test_a_1x1_policy_convolution_narrows_what_a_move_sees_and_saves_as_any_other(tmp_path):
    """One block: stem and block reach 3 squares, the policy head's 3x3 a fourth. A knight on a1 or a2 (what it
    stands on and attacks is 4 or more squares from g5) changes the logits of moves from g5 with the 3x3 head
    and exactly not with the 1x1 one."""
    from alphazero.nets.inference import INPUT_NAME, export_onnx, onnx_session

    kings = chess.Board(None)
    kings.set_piece_at(chess.H8, chess.Piece(chess.KING, chess.WHITE))
    kings.set_piece_at(chess.H6, chess.Piece(chess.KING, chess.BLACK))
    on_a1, on_a2 = kings.copy(), kings.copy()
    on_a1.set_piece_at(chess.A1, chess.Piece(chess.KNIGHT, chess.WHITE))
    on_a2.set_piece_at(chess.A2, chess.Piece(chess.KNIGHT, chess.WHITE))
    planes = torch.from_numpy(encoding.encode_boards([on_a1, on_a2]))
    g5 = [plane * 64 + chess.G5 for plane in range(73)]
    differences = {}
    for kernel in (3, 1):
        torch.manual_seed(4)
        net = PolicyValueNet(dataclasses.replace(TINY, policy_kernel=kernel)).eval()
        with torch.no_grad():
            logits, _ = net(planes)
        differences[kernel] = (logits[0, g5] - logits[1, g5]).abs().max().item()
    assert differences[1] == 0.0 and differences[3] > 1e-6, differences
    assert net.policy_head[0].kernel_size == (1, 1)
    path = tmp_path / "p1.pt"
    save_network(net, path)
    loaded = load_network(path)
    assert loaded.config.policy_kernel == 1
    session = onnx_session(export_onnx(loaded), threads=1)
    onnx_logits, _ = session.run(None, {INPUT_NAME: planes.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(onnx_logits, loaded.eval()(planes)[0].numpy(), atol=1e-4)
    payload = net_to_payload(PolicyValueNet(TINY))
    del payload["config"]["policy_kernel"]  # a network saved before the key existed has the 3x3 head
    assert net_from_payload(payload).policy_head[0].kernel_size == (3, 3)


def test_fused_copy_has_no_batchnorm_and_leaves_the_source_alone():
    net = _net_with_nontrivial_batchnorm(seed=6)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    fused = fuse_for_inference(net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
    assert not fused.training
    for key, value in net.state_dict().items():
        assert torch.equal(value, before[key]), key
    planes = _planes(3)
    with torch.no_grad():
        reference = fused(planes)[0].clone()
        for parameter in net.parameters():
            parameter.add_(1.0)
        assert torch.equal(fused(planes)[0], reference)  # a copy, not a view of the source


def test_material_utility_mixes_the_material_output_into_the_searched_value():
    torch.manual_seed(0)
    plain = PolicyValueNet(dataclasses.replace(TINY, material_head=True, material_utility=0.0)).eval()
    mixed = PolicyValueNet(dataclasses.replace(TINY, material_head=True, material_utility=0.25)).eval()
    mixed.load_state_dict(plain.state_dict())
    with torch.no_grad():  # large random weights so that v and m differ clearly
        for parameter in plain.parameters():
            parameter.normal_(0, 0.5)
        mixed.load_state_dict(plain.state_dict())
        planes = torch.from_numpy(encoding.encode_boards([chess.Board(), chess.Board("4k3/8/8/8/8/8/8/QQQQK3 w - - 0 1")]))
        logits, v, m = plain.forward_heads(planes)
        assert m is not None and (v - m).abs().max() > 0.05
        assert torch.equal(plain(planes)[1], v)  # material_utility 0: the value is v alone
        mixed_logits, value = mixed(planes)
        assert torch.allclose(value, 0.75 * v + 0.25 * m, atol=1e-6)
        assert torch.equal(mixed_logits, logits)
        fused_logits, fused_value = fuse_for_inference(mixed)(planes)  # what the searches run
    assert torch.allclose(fused_value, value, atol=1e-5) and torch.allclose(fused_logits, logits, atol=1e-4)


def test_moves_left_adjustment_prefers_the_short_win_and_the_long_loss():
    # lc0's scaling: 0 at |v| <= 0.5, 1 at |v| = 1 (1.6521 q - 0.6521 q^2 at q = 0.5: 0.663025).
    value = torch.tensor([1.0, -1.0, 0.5, 0.75, 1.0, 1.0])
    plies = torch.tensor([20.0, 20.0, 20.0, 20.0, 0.0, 100.0])
    got = moves_left_adjustment(value, plies / MOVES_LEFT_SCALE, 0.1)
    expected = [0.1 * math.log(3), -0.1 * math.log(3), 0.0, 0.1 * 0.663025 * math.log(3), 0.0, 0.1 * math.log(11)]
    assert got.tolist() == pytest.approx(expected, abs=1e-6)
    # Winning, the value searched falls as the plies left grow; losing, it rises.
    more = moves_left_adjustment(value[:2], torch.tensor([2.0, 2.0]), 0.1)
    assert (value[0] - more[0]) < (value[0] - got[0]) and (value[1] - more[1]) > (value[1] - got[1])


def test_moves_left_utility_takes_its_adjustment_off_the_searched_value():
    torch.manual_seed(0)
    config = dataclasses.replace(TINY, material_head=True, material_utility=0.5, moves_left_head=True)
    plain = PolicyValueNet(dataclasses.replace(config, moves_left_utility=0.0)).eval()
    adjusted = PolicyValueNet(dataclasses.replace(config, moves_left_utility=0.2)).eval()
    with torch.no_grad():  # large weights: values near +-1, so the utility is not 0 (|v| <= 0.5 leaves it out)
        for parameter in plain.parameters():
            parameter.normal_(0, 1.0)
    adjusted.load_state_dict(plain.state_dict())
    planes = _planes(16, seed=2)
    with torch.no_grad():
        heads = plain.forward_training(planes)
        assert heads.moves_left is not None and (heads.moves_left >= 0).all()
        mixed = 0.5 * heads.value + 0.5 * heads.material
        assert torch.allclose(plain(planes)[1], mixed, atol=1e-6)  # utility 0: the value as before
        value = adjusted(planes)[1]
        want = mixed - moves_left_adjustment(heads.value, heads.moves_left, 0.2)
        assert torch.allclose(value, want, atol=1e-6) and float((value - mixed).abs().max()) > 0.01
        fused = fuse_for_inference(adjusted)(planes)[1]  # what the searches run
    assert torch.allclose(fused, value, atol=1e-5)


def test_moves_left_head_round_trips_and_old_files_load_without_it(tmp_path):
    net = PolicyValueNet(dataclasses.replace(TINY, moves_left_head=True, moves_left_utility=0.1))
    save_network(net, tmp_path / "m.pt")
    loaded = load_network(tmp_path / "m.pt")
    assert loaded.config == net.config and loaded.moves_left_out is not None
    payload = net_to_payload(PolicyValueNet(TINY))
    for key in ("moves_left_head", "moves_left_utility"):  # a file written before the head existed
        del payload["config"][key]
    assert net_from_payload(payload).moves_left_out is None


def test_material_head_round_trips_and_old_files_load_without_it(tmp_path):
    net = PolicyValueNet(dataclasses.replace(TINY, material_head=True, material_utility=0.5))
    save_network(net, tmp_path / "m.pt")
    loaded = load_network(tmp_path / "m.pt")
    assert loaded.config == net.config and loaded.material_out is not None
    payload = net_to_payload(PolicyValueNet(dataclasses.replace(TINY, material_head=False, material_utility=0.0)))
    for key in ("material_head", "material_utility"):  # a file written before the head existed
        del payload["config"][key]
    assert net_from_payload(payload).material_out is None


def test_the_shipped_one_hour_network_loads_and_knows_a_queen_is_worth_having():
    # docs/nets/default-1h.pt is the network docs/RESULTS.md measures ("One hour ... with the material head").
    net = load_network(pathlib.Path(__file__).resolve().parent.parent / "docs" / "nets" / "default-1h.pt").eval()
    assert net.config.material_head and net.config.material_utility == 0.5
    _assert_a_queen_is_worth_having(net)


def _assert_a_queen_is_worth_having(net: PolicyValueNet) -> None:
    """White to move a queen up: value and material head well above 0; a queen down: well below."""
    up = chess.Board("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
    down = chess.Board("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNB1KBNR w KQkq - 0 1")
    with torch.no_grad():
        _, value, material = net.forward_heads(torch.from_numpy(encoding.encode_boards([up, down])))
    assert material is not None
    assert value[0] > 0.3 > -0.3 > value[1] and material[0] > 0.5 > -0.5 > material[1]


def test_the_shipped_supervised_network_fits_its_config_and_knows_openings():
    # docs/nets/supervised-6x64.pt is the network docs/RESULTS.md measures ("Supervised start, second attempt"):
    # it has configs/supervised.yaml's shape (so `train --init` takes it), values material and a mate threat,
    # and its policy opens as engines do.
    from alphazero.config import load_config

    root = pathlib.Path(__file__).resolve().parent.parent
    net = load_network(root / "docs" / "nets" / "supervised-6x64.pt").eval()
    assert net.config == load_config(root / "configs" / "supervised.yaml").network
    up = chess.Board("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
    down = chess.Board("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNB1KBNR w KQkq - 0 1")
    mate = chess.Board("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1")  # Ra8#
    start = chess.Board()
    with torch.no_grad():
        logits, value = net(torch.from_numpy(encoding.encode_boards([up, down, mate, start])))
    assert value[0] > 0.5 > -0.5 > value[1] and value[2] > 0.5 and abs(value[3]) < 0.2
    legal = sorted(start.legal_moves, key=lambda move: -logits[3, encoding.move_to_action(start, move)].item())
    assert {move.uci() for move in legal[:4]} == {"e2e4", "d2d4", "c2c4", "g1f3"}


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("default-2h.pt", "default.yaml"),
        ("default-1h-zen5.pt", "default.yaml"),
        ("default-1h-bf16.pt", "default.yaml"),
        ("default-2h-bf16.pt", "default.yaml"),
        ("amx-1h.pt", "amx.yaml"),
        ("amx-2h.pt", "amx.yaml"),
        ("amx-4h.pt", "amx.yaml"),
        ("int8-2h.pt", "int8.yaml"),
    ],
)
def test_the_shipped_networks_have_their_configs_shape_and_know_a_queen_is_worth_having(name: str, config: str):
    # The from-scratch networks docs/RESULTS.md measures: default-2h.pt ("Two hours of four passes with q 0.8"),
    # default-1h-zen5.pt ("The default's hour on a faster machine"), default-1h-bf16.pt ("OpenVINO in bf16"),
    # default-2h-bf16.pt ("Two hours of the bf16 default"), amx-1h/2h/4h.pt ("No gating and a bigger
    # network for the hour", "Two hours of a 4x48 network in bf16 with the new learning", "Four hours of
    # configs/amx.yaml"), int8-2h.pt ("Two hours of the 4x48 with int8 self-play"). Each has its config's
    # shape (so `train --init` and the config take it) and values material.
    from alphazero.config import load_config

    root = pathlib.Path(__file__).resolve().parent.parent
    net = load_network(root / "docs" / "nets" / name).eval()
    assert net.config == load_config(root / "configs" / config).network
    _assert_a_queen_is_worth_having(net)
