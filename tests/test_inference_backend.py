"""Inference backends behind the evaluator seam (``alphazero.nets.inference``) and ``alphazero export --onnx``.

The reference is always torch eager on the unfused network in eval mode (or the ``torch`` backend, itself
checked against it in tests/test_evaluator.py): the ONNX Runtime backend, and the OpenVINO backend in
fp32, must give the same logits and values to float rounding, the same priors, and the same searches;
OpenVINO in bf16 the same to bf16's rounding.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from test_evaluator import make_net, random_positions

from alphazero.board import encoding
from alphazero.checkpoint import RunDirectory, RunState
from alphazero.config import ConfigError, SearchConfig, load_config
from alphazero.judge.players import make_player
from alphazero.nets.evaluator import NetworkEvaluator
from alphazero.nets.inference import (
    CALIBRATION_POSITIONS,
    InferenceSettings,
    OnnxBackend,
    OpenVinoBackend,
    available_backends,
    cpu_computes_bf16,
    cpu_computes_int8,
    export_onnx,
    int8_pays,
    native_cpu_precision,
    quantize_int8,
    resolve_backend,
    resolve_inference,
)
from alphazero.nets.network import PolicyValueNet, save_network
from alphazero.search.factory import build_search
from commands.main import main

torch.set_num_threads(1)


def reference(net: PolicyValueNet, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    net.eval()
    with torch.no_grad():
        logits, value = net(torch.from_numpy(planes))
    return logits.numpy(), value.numpy()


def random_planes(count: int, seed: int = 0) -> np.ndarray:
    """Random 0/1 planes (no positions, but every plane in use; the scalar planes' larger values come
    with the real positions below)."""
    return np.random.default_rng(seed).integers(0, 2, (count, encoding.NUM_PLANES, 8, 8), dtype=np.uint8)


@pytest.fixture(scope="module")
def net() -> PolicyValueNet:
    return make_net(0)


@pytest.fixture(scope="module", params=["onnx", "openvino"])
def onnx_evaluator(net, request) -> NetworkEvaluator:
    """The CPU backends that run the exported graph in fp32: ONNX Runtime and OpenVINO."""
    return NetworkEvaluator(net, backend=request.param, precision="fp32")


@pytest.mark.parametrize("native, chosen", [(True, "openvino"), (False, "onnx")])
def test_auto_picks_openvino_where_the_cpu_computes_bf16_and_onnx_elsewhere(monkeypatch, native, chosen) -> None:
    import alphazero.nets.inference as inference

    monkeypatch.setattr(inference, "cpu_computes_bf16", lambda: native)
    cpu = torch.device("cpu")
    assert resolve_backend("auto", cpu) == chosen
    assert resolve_inference(cpu) == (chosen, InferenceSettings("bf16" if native else "fp32"))
    assert NetworkEvaluator(make_net(3)).backend == chosen
    # bf16 asked for runs in OpenVINO on any CPU (only it and torch run bf16 there); fp32 asked for follows the CPU.
    assert resolve_inference(cpu, precision="bf16") == ("openvino", InferenceSettings("bf16"))
    assert resolve_inference(cpu, precision="fp32") == (chosen, InferenceSettings())
    # Without onnxruntime, OpenVINO runs the fp32 too.
    monkeypatch.setattr(inference, "onnx_available", lambda: False)
    assert resolve_backend("auto", cpu) == "openvino"


def test_backend_names_are_checked() -> None:
    cpu = torch.device("cpu")
    assert available_backends(cpu) == ["torch", "onnx", "openvino"]
    assert resolve_backend("torch", cpu) == "torch"
    assert resolve_backend("auto", torch.device("cuda")) == "torch"
    with pytest.raises(ValueError, match="cpu only"):
        resolve_backend("onnx", torch.device("cuda"))
    with pytest.raises(ValueError, match="tensorrt"):
        resolve_backend("tensorrt", cpu)


def test_search_backend_is_a_config_key_checked_by_name() -> None:
    assert load_config(None).search.backend == "auto"
    assert load_config(None, ["search.backend=torch"]).search.backend == "torch"
    with pytest.raises(ConfigError, match="search.backend"):
        load_config(None, ["search.backend=tensorrt"])


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_onnx_outputs_equal_torch_on_random_planes(net, onnx_evaluator, batch) -> None:
    planes = random_planes(batch, seed=batch)
    logits, values = onnx_evaluator.forward(planes)
    want_logits, want_values = reference(net, planes)
    assert logits.dtype == np.float32 and logits.shape == (batch, encoding.NUM_ACTIONS)
    assert values.dtype == np.float32 and values.shape == (batch,)
    np.testing.assert_allclose(logits, want_logits, atol=1e-4, rtol=0)
    np.testing.assert_allclose(values, want_values, atol=1e-4, rtol=0)
    assert float(np.abs(want_logits).max()) > 1.0  # the comparison is not between near-zero outputs


def test_onnx_priors_and_values_equal_torch_on_real_positions(net, onnx_evaluator) -> None:
    boards = random_positions(40, seed=5)
    torch_evaluator = NetworkEvaluator(net, backend="torch")
    requests = [torch_evaluator.prepare(b, list(b.legal_moves)) for b in boards]
    want_priors, want_values = torch_evaluator.evaluate(requests)
    priors, values = onnx_evaluator.evaluate(requests)
    np.testing.assert_allclose(values, want_values, atol=1e-4, rtol=0)
    for got, want, board in zip(priors, want_priors, boards):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=0, err_msg=board.fen())
    planes = encoding.encode_boards(boards)
    for got, want in zip(onnx_evaluator.forward(planes), reference(net, planes)):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_empty_batch(onnx_evaluator) -> None:
    logits, values = onnx_evaluator.forward(np.zeros((0, encoding.NUM_PLANES, 8, 8), np.uint8))
    assert logits.shape == (0, encoding.NUM_ACTIONS) and values.shape == (0,)


def test_compiled_search_visits_the_same_with_every_fp32_backend(net) -> None:
    """Same seed, same visit counts move after move: the backends' outputs differ by ~1e-7, far below
    any difference of PUCT scores these searches compare (the policy/value tests above bound them)."""
    config = SearchConfig(num_simulations=48, implementation="compiled")
    boards = random_positions(16, seed=3)
    visits = {}
    for backend in ("torch", "onnx", "openvino"):
        mcts, new_tree = build_search(NetworkEvaluator(net, backend=backend, precision="fp32"), config)
        trees = [new_tree(board, seed) for seed, board in enumerate(boards)]
        played = []
        for _ in range(3):
            trees = [tree for tree in trees if not tree.board.is_game_over()]
            results = mcts.search(trees, add_noise=True, temperature=1.0)
            played.append([(r.move.uci(), r.visit_counts.tolist()) for r in results])
            for tree, result in zip(trees, results):
                tree.advance(result.move)
        visits[backend] = played
    assert sum(len(row) for row in visits["torch"]) >= 40
    assert visits["onnx"] == visits["torch"]
    assert visits["openvino"] == visits["torch"]


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_set_network_swaps_the_exported_weights(backend) -> None:
    first, second = make_net(1), make_net(2)
    evaluator = NetworkEvaluator(first, backend=backend, precision="fp32")
    planes = random_planes(5, seed=9)
    np.testing.assert_allclose(evaluator.forward(planes)[0], reference(first, planes)[0], atol=1e-4, rtol=0)
    evaluator.set_network(second)
    logits, values = evaluator.forward(planes)
    want_logits, want_values = reference(second, planes)
    np.testing.assert_allclose(logits, want_logits, atol=1e-4, rtol=0)
    np.testing.assert_allclose(values, want_values, atol=1e-4, rtol=0)
    assert float(np.abs(want_logits - reference(first, planes)[0]).max()) > 0.1  # the two nets differ


def test_onnx_session_follows_torch_threads(net) -> None:
    backend = OnnxBackend(net)
    assert backend.threads == torch.get_num_threads() == 1
    planes = random_planes(4, seed=2)
    before = backend(planes)
    torch.set_num_threads(2)
    try:
        after = backend(planes)
        assert backend.threads == 2
        assert backend.session.get_session_options().intra_op_num_threads == 2
    finally:
        torch.set_num_threads(1)
    for a, b in zip(before, after):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_openvino_follows_torch_threads_and_keeps_its_values(net) -> None:
    backend = OpenVinoBackend(net, "fp32")
    assert backend.threads == torch.get_num_threads() == 1
    planes = random_planes(4, seed=2)
    before_logits, before_values = (np.array(a) for a in backend(planes))
    torch.set_num_threads(2)
    try:
        after_logits, after_values = backend(planes)
        assert backend.threads == 2
        assert backend.request.get_compiled_model().get_property("INFERENCE_NUM_THREADS") == 2
    finally:
        torch.set_num_threads(1)
    np.testing.assert_allclose(after_logits, before_logits, atol=1e-5, rtol=0)
    np.testing.assert_allclose(after_values, before_values, atol=1e-5, rtol=0)
    # The values are a copy (the logits are the plugin's buffer, valid until the next call, as documented).
    _, kept = backend(planes)
    backend(random_planes(4, seed=3))
    np.testing.assert_array_equal(kept, before_values)


@pytest.mark.parametrize("flags, native", [
    ("fpu sse avx2 avx512f avx512_bf16 avx512_vnni", True),  # AMD Zen 4/5, Intel Cooper Lake
    ("fpu sse avx2 avx512f amx_tile amx_bf16", True),  # Intel Sapphire Rapids and later
    ("fpu sse avx2 fma avx512f avx512_vnni", False),  # AVX-512 without bf16 arithmetic
    ("fpu sse avx2 fma", False),
])
def test_cpu_computes_bf16_reads_the_cpu_flags(tmp_path, flags, native) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: some cpu\nflags\t\t: {flags}\nbugs\t\t: avx512_bf16\n")
    assert cpu_computes_bf16(str(cpuinfo)) is native
    assert cpu_computes_bf16(str(tmp_path / "missing")) is False  # not Linux: no bf16 assumed


@pytest.mark.parametrize("flags, computes", [
    ("fpu sse avx2 avx512f avx512_bf16 avx512_vnni", True),  # AMD Zen 4/5, Intel Cascade Lake and later
    ("fpu sse avx2 fma avx_vnni", True),  # Intel Alder Lake: VNNI on AVX2
    ("fpu sse avx2 avx512f amx_tile amx_int8", True),  # Intel Sapphire Rapids and later
    ("fpu sse avx2 fma avx512f avx512bw", False),  # AVX-512 without VNNI (Skylake-SP)
    ("fpu sse avx2 fma", False),  # AMD Zen 3
])
def test_cpu_computes_int8_reads_the_cpu_flags(tmp_path, flags, computes) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: some cpu\nflags\t\t: {flags}\nbugs\t\t: avx512_vnni\n")
    assert cpu_computes_int8(str(cpuinfo)) is computes
    assert cpu_computes_int8(str(tmp_path / "missing")) is False  # not Linux: no VNNI assumed


def test_int8_pays_where_the_cpu_has_vnni_and_onnxruntime_imports(monkeypatch) -> None:
    import alphazero.nets.inference as inference

    for vnni, onnx, pays in ((True, True, True), (True, False, False), (False, True, False)):
        monkeypatch.setattr(inference, "cpu_computes_int8", lambda vnni=vnni: vnni)
        monkeypatch.setattr(inference, "onnx_available", lambda onnx=onnx: onnx)
        assert int8_pays() is pays


def test_self_plays_auto_precision_is_int8_where_it_pays_and_players_keep_their_float(monkeypatch, net,
                                                                                     tmp_path) -> None:
    import alphazero.nets.inference as inference

    cpu = torch.device("cpu")
    floats = resolve_inference(cpu)  # what auto is without int8: OpenVINO bf16 or ONNX Runtime fp32 here
    monkeypatch.setattr(inference, "int8_pays", lambda: True)
    assert resolve_inference(cpu, auto_int8=True) == ("onnx", InferenceSettings("int8"))
    assert resolve_inference(cpu, "onnx", auto_int8=True) == ("onnx", InferenceSettings("int8"))
    assert resolve_inference(cpu) == floats  # without auto_int8 (players, the UCI engine) nothing changes
    # What the user named stays: a precision, a backend int8 does not run in, a setting only torch runs.
    assert resolve_inference(cpu, precision="fp32", auto_int8=True) == (floats[0], InferenceSettings())
    assert resolve_inference(cpu, "openvino", auto_int8=True) == resolve_inference(cpu, "openvino")
    assert resolve_inference(cpu, "torch", auto_int8=True) == ("torch", InferenceSettings())
    assert resolve_inference(cpu, channels_last=True, auto_int8=True) == ("torch", InferenceSettings("fp32", True))
    assert resolve_inference(torch.device("cuda"), auto_int8=True)[1].precision == "fp16"  # no GPU touched
    # The evaluators: self-play's runs int8, a player's (mcts: spec) keeps the float its figures were made at.
    search = SearchConfig()
    assert NetworkEvaluator.for_search(net, search, selfplay=True).settings.precision == "int8"
    assert NetworkEvaluator.for_search(net, search).settings == floats[1]
    save_network(net, tmp_path / "net.pt")
    player = make_player(f"mcts:{tmp_path / 'net.pt'}?sims=8")
    try:
        assert (player.evaluator.backend, player.evaluator.settings) == floats
    finally:
        player.close()
    monkeypatch.setattr(inference, "int8_pays", lambda: False)
    assert resolve_inference(cpu, auto_int8=True) == floats
    assert NetworkEvaluator.for_search(net, search, selfplay=True).settings == floats[1]


def test_openvino_precision_auto_is_the_cpus_native_one_and_settings_are_checked(net) -> None:
    cpu = torch.device("cpu")
    native = native_cpu_precision()
    assert native == ("bf16" if cpu_computes_bf16() else "fp32")
    backend, settings = resolve_inference(cpu, "openvino")
    assert backend == "openvino" and settings.precision == native and not settings.channels_last
    assert resolve_inference(cpu, "openvino", "fp32")[1].precision == "fp32"
    assert resolve_inference(cpu) == ((backend, settings) if native == "bf16" else ("onnx", settings))  # auto
    assert resolve_inference(cpu, "onnx") == ("onnx", InferenceSettings())
    evaluator = NetworkEvaluator(net, backend="openvino")
    assert (evaluator.backend, evaluator.settings.precision) == ("openvino", native)
    with pytest.raises(ValueError, match="cpu only"):
        resolve_inference(torch.device("cuda"), "openvino")
    for precision, channels_last in (("fp16", False), ("fp32", True)):
        with pytest.raises(ValueError, match="openvino backend runs fp32 or bf16"):
            resolve_inference(cpu, "openvino", precision, channels_last)
    for bad in (["search.backend=openvino", "search.precision=fp16"],
                ["search.backend=openvino", "search.channels_last=true"]):
        with pytest.raises(ConfigError, match="openvino runs fp32 or bf16"):
            load_config(None, bad)
    assert load_config(None, ["search.backend=openvino", "search.precision=bf16"]).search.backend == "openvino"


def test_openvino_bf16_is_close_to_fp32_and_ranks_moves_alike(net) -> None:
    """bf16 (the native precision on a CPU with avx512_bf16 or AMX; fp32 elsewhere, which passes too)."""
    evaluator = NetworkEvaluator(net, backend="openvino", precision="bf16")
    assert evaluator.settings.precision == "bf16"
    boards = random_positions(64, seed=11)
    planes = encoding.encode_boards(boards)
    logits, values = evaluator.forward(planes)
    want_logits, want_values = reference(net, planes)
    scale = float(np.abs(want_logits).max())
    assert scale > 1.0 and logits.dtype == np.float32 and values.shape == (64,)
    np.testing.assert_allclose(logits, want_logits, atol=0.05 * scale, rtol=0)
    np.testing.assert_allclose(values, want_values, atol=0.05, rtol=0)
    requests = [evaluator.prepare(b, list(b.legal_moves)) for b in boards]
    priors, _ = evaluator.evaluate(requests)
    want_priors, _ = NetworkEvaluator(net, backend="torch").evaluate(requests)
    agree = np.mean([np.argmax(p) == np.argmax(w) for p, w in zip(priors, want_priors)])
    assert agree >= 0.8
    assert max(float(np.abs(p - w).max()) for p, w in zip(priors, want_priors)) < 0.05


def _real_planes(count: int, seed: int) -> np.ndarray:
    return encoding.encode_boards(random_positions(count, seed=seed))


@pytest.fixture(scope="module")
def calibration() -> np.ndarray:
    return _real_planes(CALIBRATION_POSITIONS, seed=21)


def test_int8_answers_in_fp32_until_it_has_seen_enough_positions_then_quantises_close_to_fp32(net, calibration) -> None:
    evaluator = NetworkEvaluator(net, precision="int8")  # auto: only ONNX Runtime runs int8
    assert (evaluator.backend, evaluator.settings.precision) == ("onnx", "int8")
    fp32 = NetworkEvaluator(net, backend="onnx", precision="fp32")
    planes = _real_planes(64, seed=12)
    half = CALIBRATION_POSITIONS // 2
    for chunk in (calibration[:half], calibration[half:-1]):  # one position short: still fp32
        np.testing.assert_array_equal(evaluator.forward(chunk)[0], fp32.forward(chunk)[0])
    assert not evaluator._run.quantized
    evaluator.forward(calibration[-1:])
    assert evaluator._run.quantized
    logits, values = evaluator.forward(planes)
    want_logits, want_values = reference(net, planes)
    scale = float(np.abs(want_logits).max())
    assert scale > 1.0 and logits.dtype == np.float32 and values.shape == (64,)
    assert not np.array_equal(logits, fp32.forward(planes)[0])  # int8 runs now, not the fp32 session
    np.testing.assert_allclose(logits, want_logits, atol=0.05 * scale, rtol=0)
    np.testing.assert_allclose(values, want_values, atol=0.05, rtol=0)
    agree = np.mean(np.argmax(logits, axis=1) == np.argmax(want_logits, axis=1))
    assert agree >= 0.8


def test_int8_recent_planes_are_the_latest_positions_oldest_first(net) -> None:
    backend = OnnxBackend(net, "int8")
    planes = _real_planes(CALIBRATION_POSITIONS // 2 + 40, seed=13)
    backend(planes[:100])
    np.testing.assert_array_equal(backend.recent_planes(), planes[:100])
    for _ in range(3):  # around the ring more than once
        backend(planes)
    later = _real_planes(30, seed=14)
    backend(later)
    recent = backend.recent_planes()
    assert len(recent) == CALIBRATION_POSITIONS
    np.testing.assert_array_equal(recent[-30:], later)
    np.testing.assert_array_equal(recent[-30 - len(planes):-30], planes)


def test_int8_set_network_calibrates_the_new_weights_on_the_positions_the_old_ones_saw(calibration) -> None:
    first, second = make_net(1), make_net(2)
    evaluator = NetworkEvaluator(first, backend="onnx", precision="int8")
    evaluator.forward(calibration)
    evaluator.set_network(second)
    assert evaluator._run.quantized  # at once: no fp32 calls for the new weights
    planes = _real_planes(32, seed=15)
    logits, _ = evaluator.forward(planes)
    want, _ = reference(second, planes)
    np.testing.assert_allclose(logits, want, atol=0.05 * float(np.abs(want).max()), rtol=0)
    fresh = NetworkEvaluator(second, backend="onnx", precision="int8")
    fresh.set_network(first)  # nothing seen yet: the new backend starts in fp32 too
    assert not fresh._run.quantized


def test_int8_quantises_every_convolution_but_the_policy_output_even_in_a_fresh_network(calibration) -> None:
    """A fresh network's folded biases are all zero, and torch's exporter merges equal constants: a bias that
    several convolutions share stayed fp32 in ONNX Runtime's quantiser and kept them out of the int8 kernels."""
    import onnx

    fresh = PolicyValueNet(load_config(None).network)
    model = onnx.load_model_from_string(quantize_int8(export_onnx(fresh), calibration))
    producers = {output: node.op_type for node in model.graph.node for output in node.output}
    convs = [node for node in model.graph.node if node.op_type == "Conv"]
    assert len(convs) == 2 * fresh.config.blocks + 4  # stem, tower, the two policy convs, the value conv
    fp32 = [node.name for node in convs if producers.get(node.input[1]) != "DequantizeLinear"]
    assert fp32 == ["/policy_head.2/Conv"]  # its int8 logits moved the policy most
    for node in convs:
        if node.name not in fp32:
            assert producers.get(node.input[2]) == "DequantizeLinear", node.name  # an int32 bias
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    logits, _ = session.run(None, {"planes": calibration[:8]})
    np.testing.assert_allclose(logits, reference(fresh, calibration[:8])[0], atol=0.05, rtol=0)
    with pytest.raises(ValueError, match="at least one position"):
        quantize_int8(export_onnx(fresh), calibration[:0])


def test_int8_is_onnx_only_and_checked_in_config_and_player_specs(net) -> None:
    cpu = torch.device("cpu")
    assert resolve_inference(cpu, "auto", "int8") == ("onnx", InferenceSettings(precision="int8"))
    for backend in ("openvino", "torch"):
        with pytest.raises(ValueError, match="int8 runs in the onnx backend"):
            resolve_inference(cpu, backend, "int8")
    with pytest.raises(ValueError, match="int8 runs in the onnx backend"):
        resolve_inference(torch.device("cuda"), "auto", "int8")
    with pytest.raises(ValueError, match="onnx backend runs fp32 or int8"):
        OnnxBackend(net, "bf16")
    assert load_config(None, ["search.precision=int8"]).search.precision == "int8"
    for bad in (["search.precision=int8", "search.backend=openvino"], ["search.precision=int4"]):
        with pytest.raises(ConfigError, match="int8"):
            load_config(None, bad)


def _check_exported(path, net: PolicyValueNet) -> None:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["planes"]
    assert session.get_inputs()[0].type == "tensor(uint8)"
    assert [o.name for o in session.get_outputs()] == ["logits", "value"]
    meta = session.get_modelmeta().custom_metadata_map
    assert meta["format"] == "alphazero-chess-onnx" and meta["encoding_version"] == str(encoding.ENCODING_VERSION)
    boards = random_positions(12, seed=7)
    planes = encoding.encode_boards(boards)
    for batch in (planes[:1], planes):  # the batch axis is dynamic
        logits, value = session.run(None, {"planes": batch})
        want_logits, want_value = reference(net, batch)
        assert logits.shape == (len(batch), encoding.NUM_ACTIONS) and value.shape == (len(batch),)
        np.testing.assert_allclose(logits, want_logits, atol=1e-4, rtol=0)
        np.testing.assert_allclose(value, want_value, atol=1e-4, rtol=0)


def test_export_onnx_writes_a_model_onnxruntime_runs_to_the_same_outputs(tmp_path, capsys) -> None:
    net = make_net(4)
    save_network(net, tmp_path / "net.pt")
    out = tmp_path / "out" / "net.onnx"
    assert main(["export", "--onnx", str(tmp_path / "net.pt"), "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    assert not [p for p in out.parent.iterdir() if p.name != "net.onnx"]  # no temporary file left
    _check_exported(out, net)


def test_export_onnx_of_a_run_directory_takes_its_best_network(tmp_path) -> None:
    run = RunDirectory(tmp_path / "run")
    nets = [make_net(10), make_net(11)]
    for generation, net in enumerate(nets):
        save_network(net, run.network_path(generation))
    run.write_state(RunState(generation=1, best_generation=1))
    assert main(["export", "--onnx", str(run.path), "--out", str(tmp_path / "best.onnx")]) == 0
    _check_exported(tmp_path / "best.onnx", nets[1])


@pytest.mark.parametrize("make_bad, word", [
    (lambda tmp: tmp / "missing.pt", "missing.pt"),
    (lambda tmp: (tmp / "bad.pt").write_bytes(b"not a network") and tmp / "bad.pt", "bad.pt"),
    (lambda tmp: tmp, "state.json"),  # a directory that is not a run
])
def test_export_of_a_bad_network_exits_2_with_one_line(tmp_path, capsys, make_bad, word) -> None:
    out = tmp_path / "x.onnx"
    assert main(["export", "--onnx", str(make_bad(tmp_path)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("alphazero export: error:") and word in err
    assert not out.exists()


def test_export_needs_a_format_and_an_output(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--out", "x.onnx"])
    assert exit_.value.code == 2
    assert "--onnx" in capsys.readouterr().err



@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_onnx_value_of_a_material_head_net_is_the_mixed_value(backend) -> None:
    # The searches read one value; with material_utility it is (1 - u) v + u m in every backend.
    import dataclasses

    base = make_net(4)
    net = PolicyValueNet(dataclasses.replace(base.config, material_head=True, material_utility=0.4))
    net.load_state_dict(base.state_dict(), strict=False)
    with torch.no_grad():
        net.material_out[0].weight.normal_(0, 1.0)  # type: ignore[index]
    net.eval()
    planes = encoding.encode_boards(random_positions(16, seed=9))
    logits, values = NetworkEvaluator(net, backend=backend, precision="fp32").forward(planes)
    with torch.no_grad():
        want_logits, v, m = net.forward_heads(torch.from_numpy(planes))
    assert m is not None and float((v - m).abs().max()) > 0.05
    np.testing.assert_allclose(values, (0.6 * v + 0.4 * m).numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(logits, want_logits.numpy(), atol=1e-4, rtol=0)


def test_onnx_value_of_a_wdl_head_net_is_its_expected_result() -> None:
    # The WDL head's W - L is computed inside the exported graph: the searches read one value in [-1, 1].
    import dataclasses

    torch.manual_seed(3)
    net = PolicyValueNet(dataclasses.replace(make_net(4).config, wdl_head=True, material_head=False, material_utility=0.0))
    with torch.no_grad():
        net.value_head[-2].weight.normal_(0, 20.0)
    net.eval()
    planes = encoding.encode_boards(random_positions(16, seed=9))
    logits, values = NetworkEvaluator(net, backend="onnx").forward(planes)
    with torch.no_grad():
        heads = net.forward_training(torch.from_numpy(planes))
    assert heads.wdl is not None
    wdl = torch.softmax(heads.wdl, dim=1).numpy()
    assert float(np.ptp(values)) > 0.1
    np.testing.assert_allclose(values, wdl[:, 0] - wdl[:, 2], atol=1e-4, rtol=0)
    np.testing.assert_allclose(logits, heads.policy.numpy(), atol=1e-4, rtol=0)


def test_onnx_value_of_a_moves_left_net_carries_the_moves_left_utility() -> None:
    # The utility is computed inside the exported graph too: every backend reads the same adjusted value.
    import dataclasses

    torch.manual_seed(4)
    net = PolicyValueNet(dataclasses.replace(make_net(4).config, moves_left_head=True, moves_left_utility=0.3))
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.normal_(0, 0.5)
    net.eval()
    planes = encoding.encode_boards(random_positions(16, seed=9))
    logits, values = NetworkEvaluator(net, backend="onnx").forward(planes)
    with torch.no_grad():
        want_logits, want = net(torch.from_numpy(planes))
        plain = net.forward_heads(torch.from_numpy(planes))[1]
    assert float((want - plain).abs().max()) > 0.01  # the utility moved some values
    np.testing.assert_allclose(values, want.numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(logits, want_logits.numpy(), atol=1e-4, rtol=0)


# -- the device-aware torch path (search.precision, channels_last, pin_memory), each run on the CPU ------------


def test_auto_settings_are_fp16_channels_last_pinned_on_cuda_and_plain_on_the_cpu() -> None:
    from alphazero.nets.inference import resolve_settings

    cuda, cpu = torch.device("cuda"), torch.device("cpu")  # device objects only: no GPU is touched
    assert resolve_settings(cuda) == InferenceSettings("fp16", True, True)
    assert resolve_settings(cpu) == InferenceSettings() and resolve_settings(cpu).plain
    assert resolve_settings(cuda, "fp32", False, False).plain
    assert resolve_settings(cpu, "bf16", True, True) == InferenceSettings("bf16", True, True)
    # auto takes torch when a setting asks for what only torch does; onnx asked for with one is refused.
    assert resolve_backend("auto", cpu, InferenceSettings("bf16")) == "openvino"
    assert resolve_backend("auto", cpu, InferenceSettings()) == ("openvino" if cpu_computes_bf16() else "onnx")
    assert resolve_backend("auto", cpu, InferenceSettings("fp16")) == "torch"
    assert resolve_backend("auto", cpu, InferenceSettings("bf16", channels_last=True)) == "torch"
    with pytest.raises(ValueError, match="onnx backend runs fp32 or int8, contiguous and unstaged"):
        resolve_backend("onnx", cpu, InferenceSettings(channels_last=True))
    assert NetworkEvaluator(make_net(3), precision="bf16").backend == "openvino"
    assert NetworkEvaluator(make_net(3), precision="bf16", channels_last=True).backend == "torch"


@pytest.mark.parametrize("precision, channels_last, pin_memory, tolerance", [
    ("fp32", True, False, 1e-4), ("fp32", False, True, 1e-4), ("fp32", True, True, 1e-4),
    ("bf16", False, False, 0.1), ("fp16", False, False, 0.02), ("bf16", True, True, 0.1), ("fp16", True, True, 0.02),
])
def test_every_setting_runs_on_the_cpu_close_to_fp32(net, precision, channels_last, pin_memory, tolerance) -> None:
    evaluator = NetworkEvaluator(net, backend="torch", precision=precision, channels_last=channels_last,
                                 pin_memory=pin_memory)
    assert (evaluator.settings.precision, evaluator.settings.channels_last, evaluator.settings.pin_memory) == (
        precision, channels_last, pin_memory)
    for batch in (5, 64, 3):  # growing, then shrinking: the staging buffers are reused
        planes = random_planes(batch, seed=batch)
        logits, values = evaluator.forward(planes)
        want_logits, want_values = reference(net, planes)
        assert logits.dtype == np.float32 and logits.shape == (batch, encoding.NUM_ACTIONS)
        assert values.dtype == np.float32 and values.shape == (batch,)
        scale = float(np.abs(want_logits).max())
        assert scale > 1.0
        np.testing.assert_allclose(logits, want_logits, atol=tolerance * scale, rtol=0)
        np.testing.assert_allclose(values, want_values, atol=tolerance, rtol=0)
        # The search's ranking of moves survives the lower precision.
        assert (np.argmax(logits, axis=1) == np.argmax(want_logits, axis=1)).mean() >= 0.6


def test_host_staging_reuses_its_buffers_and_works_on_the_cpu() -> None:
    from alphazero.nets.inference import HostStaging

    staging = HostStaging(torch.device("cpu"), pin=True)
    assert not staging.pinned  # page-locked memory needs an accelerator; the code path is the same
    planes = random_planes(10, seed=1)
    sent = staging.to_device(planes)
    assert sent.device.type == "cpu" and sent.dtype == torch.uint8 and np.array_equal(sent.numpy(), planes)
    assert not np.shares_memory(sent.numpy(), planes)  # staged through the buffer, not the caller's array
    pointer = staging._planes.data_ptr()
    staging.to_device(random_planes(4, seed=2))
    assert staging._planes.data_ptr() == pointer  # smaller batches reuse the buffer
    staging.to_device(random_planes(30, seed=3))
    assert len(staging._planes) >= 30
    logits = torch.randn(6, encoding.NUM_ACTIONS).to(torch.bfloat16)
    values = torch.tensor([0.5, -0.25, 0.0, 1.0, -1.0, 0.125], dtype=torch.float16)
    host_logits, host_values = staging.to_host(logits, values)
    assert host_logits.dtype == np.float32 and np.array_equal(host_logits, logits.float().numpy())
    assert host_values.tolist() == [0.5, -0.25, 0.0, 1.0, -1.0, 0.125]
    first_values = host_values
    staging.to_host(logits[:2] * 0, values[:2] * 0)
    assert first_values.tolist() == [0.5, -0.25, 0.0, 1.0, -1.0, 0.125]  # values are a copy, kept


class _ReusingPlaneEvaluator:
    """Deterministic outputs from the planes, returned in buffers it reuses (as the staged torch backend does),
    or as fresh arrays; ``max_batch`` makes the compiled search split its rounds."""

    def __init__(self, reuse: bool, max_batch: int) -> None:
        self.reuse, self.max_batch = reuse, max_batch
        self.logits = np.zeros((1024, encoding.NUM_ACTIONS), np.float32)
        self.values = np.zeros(1024, np.float32)
        self.weights = np.random.default_rng(7).normal(size=(encoding.NUM_PLANES * 64, encoding.NUM_ACTIONS)).astype(np.float32)

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = planes.reshape(len(planes), -1).astype(np.float32)
        logits = flat @ self.weights * 0.05
        values = np.tanh(flat.sum(axis=1) / 100.0 - 1.0).astype(np.float32)
        if not self.reuse:
            return logits, values
        self.logits[: len(planes)] = logits
        self.values[: len(planes)] = values
        return self.logits[: len(planes)], self.values[: len(planes)]


def test_the_compiled_search_keeps_each_chunk_when_the_evaluator_reuses_its_buffers() -> None:
    """A round split into chunks (``max_batch``) must copy each chunk's outputs before the next call."""
    config = SearchConfig(num_simulations=16, implementation="compiled", leaves_per_game=2)
    boards = random_positions(12, seed=4)
    visits = {}
    for reuse, max_batch in ((False, 1024), (True, 5)):
        mcts, new_tree = build_search(_ReusingPlaneEvaluator(reuse, max_batch), config)
        trees = [new_tree(board, seed) for seed, board in enumerate(boards)]
        visits[reuse] = [r.visit_counts.tolist() for r in mcts.search(trees, add_noise=False)]
    assert visits[True] == visits[False]


def test_self_play_runs_with_every_gpu_setting_on_the_cpu(net) -> None:
    from alphazero.config import SelfPlayConfig
    from alphazero.search.selfplay import SelfPlayer

    search = SearchConfig(num_simulations=8, precision="bf16", channels_last=True, pin_memory=True)
    evaluator = NetworkEvaluator.for_search(net, search, max_batch=8)
    assert evaluator.backend == "torch" and not evaluator.settings.plain
    player = SelfPlayer(evaluator, search, SelfPlayConfig(games_per_worker=16, max_plies=6), seed=1)
    games = player.play(16, max_seconds=60)
    assert len(games) >= 16 and all(game.num_positions > 0 for game in games)
    assert evaluator.num_calls > 0 and evaluator.num_positions > 16 * 8
