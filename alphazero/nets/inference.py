"""Inference backends behind ``NetworkEvaluator``: how a ``PolicyValueNet`` runs on a batch of planes.

Each backend maps planes ``uint8 [B, 24, 8, 8]`` to (logits ``float32 [B, 4672]``, values ``float32 [B]``)
for the network it was built from (BatchNorms folded by ``fuse_for_inference``):

- ``torch``: torch eager, on the evaluator's device (cpu or cuda), run as its ``InferenceSettings`` say:
  ``precision`` (fp32, or fp16/bf16 under ``torch.autocast``), ``channels_last`` (the folded network and
  its input in channels-last memory format) and ``pin_memory`` (``HostStaging``: planes copied into a
  reused page-locked host buffer and sent with ``non_blocking``, outputs copied back into reused
  page-locked buffers, one stream synchronisation per call). Every one of them also runs on the CPU,
  where the staging buffers cannot be pinned and the copies are plain (so tests cover each path).
- ``onnx``: ONNX Runtime (CPUExecutionProvider) on an in-memory ONNX export of the folded network,
  with as many intra-op threads as torch has (``torch.get_num_threads()``); contiguous, in fp32 or int8
  (``precision``: static QDQ quantisation, ``quantize_int8``, calibrated on the latest positions the backend
  was asked about; ``OnnxBackend``). int8 is asked for by name, or chosen by ``auto`` for self-play where the
  CPU has VNNI (``resolve_inference``'s ``auto_int8``).
- ``openvino``: OpenVINO Runtime (CPU plugin) on the same in-memory export, on as many inference threads
  as torch has, in fp32 or bf16 (``precision``; ``auto``: bf16 where the CPU computes in bf16 natively,
  ``avx512_bf16`` or AMX, fp32 elsewhere: ``native_cpu_precision``); contiguous and unstaged.
- ``auto``: on the CPU ``openvino`` where the CPU computes bf16 natively or bf16 is asked for (and it
  imports), ``onnx`` elsewhere (on an AVX2 AMD Zen 3 ONNX Runtime fp32 ran 1.16x OpenVINO fp32 at the
  self-play batch, docs/RESULTS.md "The issue's own kind of machine"), ``torch`` when a setting asks for
  what only torch does (fp16, channels-last, staging); always ``torch`` on CUDA.

``resolve_settings`` turns the config's ``auto`` into settings for a device: on CUDA fp16, channels-last
and pinned staging (the usual choices for a conv net on tensor cores; measured on an H200, docs/RESULTS.md
"GPU self-play, measured"), on the CPU fp32, contiguous and unstaged, and for ``openvino`` the CPU's native
precision. ``resolve_inference`` resolves both; with ``auto_int8`` (self-play's evaluators, whose networks are
calibrated on their own games' positions) ``auto`` is ONNX Runtime's int8 on a CPU with VNNI
(``int8_pays``).

Measured on one thread with the default 3x32 network (docs/RESULTS.md, "Inference backends"): ONNX
Runtime ran 1.4-6x torch eager's positions per second (most at batch 1, 1.4-2x at the self-play
batch of 48), logits equal to 2.4e-7, and self-play 1.6-3.2x as many positions per second;
torch.compile lost at batch 48 and took 40-100 s to compile each batch size, and channels_last lost
at batch 48, so neither is used (``alphazero.bench.inference``). On an AMD Zen 5 (``avx512_bf16``, no AMX;
docs/RESULTS.md "OpenVINO in bf16") OpenVINO fp32 ran 1.08x ONNX Runtime, OpenVINO bf16 1.6x (policy KL
from fp32 0.0005, values within 0.014), self-play 1.34x, and the same network played level with its fp32
self (+1 Elo [-25, +26], 400 games). ONNX Runtime's int8 (static QDQ, the policy's output convolution in
fp32) ran 1.4x OpenVINO bf16 on a trained 3x32 at the self-play batch, self-play with a trained network 1.42x
(1.91x ONNX Runtime fp32), policy KL from fp32 0.008 (bf16: 0.0004), and the same network at 200 simulations
-19 Elo [-48, +9] against its bf16 self (400 games), and 50 minutes of training with int8 self-play beat the
bf16 default's 50 minutes by +81 [+22, +146] (docs/RESULTS.md "int8 self-play"); on a Zen 4 (VNNI) self-play
1.31x OpenVINO bf16 with a trained 3x32 (docs/RESULTS.md "int8 self-play on a Zen 4"). Without VNNI int8 runs
below fp32 (0.40x on a Xeon), so ``auto`` picks it only for self-play on a CPU with VNNI; players keep the
float precision their measured figures were made at.

``export_onnx`` is also what ``alphazero export --onnx`` writes: input ``planes`` (uint8
``[B, 24, 8, 8]``, the encoder's planes as stored, scaled inside the graph), outputs ``logits``
(``float32 [B, 4672]``, action = plane * 64 + square) and ``value`` (``float32 [B]``, in [-1, 1] for
the side to move).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch

from alphazero.board import encoding
from alphazero.fileio import atomic_write
from alphazero.nets.network import PolicyValueNet, fuse_for_inference

BACKENDS = ("auto", "torch", "onnx", "openvino")
OPENVINO_PRECISIONS = {"fp32": "f32", "bf16": "bf16"}  # ours -> OpenVINO's INFERENCE_PRECISION_HINT
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
ONNX_PRECISIONS = ("fp32", "int8")  # int8: OnnxBackend quantises the network (static QDQ) on positions it was asked
CALIBRATION_POSITIONS = 512  # the positions int8 is calibrated on: the most recent ones the backend was asked


@dataclass(frozen=True)
class InferenceSettings:
    """How ``TorchBackend`` runs on its device (resolved: no ``auto`` here); the defaults are plain torch eager."""

    precision: str = "fp32"  # fp32, or fp16 / bf16 through torch.autocast
    channels_last: bool = False
    pin_memory: bool = False  # HostStaging: reused (page-locked on CUDA) host buffers, non_blocking copies

    @property
    def plain(self) -> bool:
        """fp32, contiguous, unstaged: what the onnx backend can do too."""
        return self == InferenceSettings()

    @property
    def onnx_runs(self) -> bool:
        """fp32 or int8, contiguous, unstaged: what the onnx backend runs."""
        return self.precision in ONNX_PRECISIONS and not (self.channels_last or self.pin_memory)


def resolve_settings(device: torch.device, precision: str = "auto", channels_last: bool | str = "auto",
                     pin_memory: bool | str = "auto", backend: str = "torch") -> InferenceSettings:
    """``search.precision``/``channels_last``/``pin_memory`` (``auto`` or a value) as settings for ``device``
    (``backend``: the resolved backend; ``openvino``'s ``auto`` precision is the CPU's native one)."""
    if precision != "auto" and precision not in (*PRECISIONS, "int8"):
        raise ValueError(f"precision must be auto, {', '.join(PRECISIONS)} or int8, got {precision!r}")
    cuda = device.type == "cuda"
    if precision == "auto":
        precision = "fp16" if cuda else native_cpu_precision() if backend == "openvino" else "fp32"
    return InferenceSettings(
        precision=precision,
        channels_last=cuda if channels_last == "auto" else bool(channels_last),
        pin_memory=cuda if pin_memory == "auto" else bool(pin_memory),
    )
INPUT_NAME = "planes"
OUTPUT_NAMES = ("logits", "value")
ONNX_OPSET = 17


def onnx_available() -> bool:
    """Whether the ``onnx`` backend can run here (onnxruntime to run, onnx for torch's exporter)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def openvino_available() -> bool:
    """Whether the ``openvino`` backend can run here (OpenVINO Runtime to run, onnx for torch's exporter)."""
    try:
        import onnx  # noqa: F401
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


_OPENVINO_CORE = None


def openvino_core():
    """The process's one ``openvino.Core`` (made on first use: it loads the CPU plugin)."""
    global _OPENVINO_CORE
    if _OPENVINO_CORE is None:
        import openvino

        _OPENVINO_CORE = openvino.Core()
    return _OPENVINO_CORE


BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of a CPU that computes in bf16 natively
INT8_CPU_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")  # ... of one with int8 dot products (VNNI or AMX)


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> list[str]:
    """The first processor's flags in ``cpuinfo``; none where it cannot be read (not Linux)."""
    try:
        with open(cpuinfo) as handle:
            return next((line.split(":", 1)[1].split() for line in handle if line.startswith("flags")), [])
    except OSError:
        return []


def cpu_computes_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU has bf16 arithmetic (``avx512_bf16`` dot products or AMX tiles): where bf16 pays
    (docs/RESULTS.md "OpenVINO in bf16"); elsewhere it is emulated and slower. False where ``cpuinfo`` cannot
    be read (not Linux)."""
    return any(flag in cpu_flags(cpuinfo) for flag in BF16_CPU_FLAGS)


def cpu_computes_int8(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU has int8 dot products (AVX-512 VNNI, AVX-VNNI or AMX), which ONNX Runtime's int8
    kernels need to beat fp32 (without them int8 ran 0.40x fp32 on a Xeon). False where ``cpuinfo`` cannot be
    read."""
    return any(flag in cpu_flags(cpuinfo) for flag in INT8_CPU_FLAGS)


def int8_pays() -> bool:
    """Whether ``auto`` picks int8 for self-play here: a CPU with int8 dot products and onnxruntime installed
    (self-play 1.42x OpenVINO bf16 on a Zen 5, 1.31x on a Zen 4, with a trained 3x32)."""
    return cpu_computes_int8() and onnx_available()


def native_cpu_precision() -> str:
    """``bf16`` on a CPU that computes it natively (``cpu_computes_bf16``), else ``fp32``: what ``auto`` means
    for the openvino backend and for the learner on the CPU."""
    return "bf16" if cpu_computes_bf16() else "fp32"


def resolve_backend(backend: str, device: torch.device, settings: InferenceSettings = InferenceSettings()) -> str:
    """``torch``, ``onnx`` or ``openvino`` for ``backend`` (one of ``BACKENDS``) on ``device`` with
    ``settings``. ``auto``: on the CPU openvino where the CPU computes bf16 natively (``cpu_computes_bf16``) or
    bf16 is asked for, onnx elsewhere (openvino when onnxruntime does not import), torch when a setting asks
    for what only torch does (fp16, channels-last, staging); torch on CUDA."""
    if backend not in BACKENDS:
        raise ValueError(f"inference backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        if settings.precision == "int8":
            if device.type != "cpu" or not onnx_available():
                raise ValueError("precision int8 runs in the onnx backend, on the cpu, with onnxruntime installed")
            return "onnx"
        if device.type != "cpu":
            return "torch"
        # OpenVINO where its bf16 pays (a CPU that computes bf16, or bf16 asked for); in fp32 on a CPU without
        # bf16 ONNX Runtime is the faster (AMD Zen 3, AVX2: 1.16x OpenVINO fp32 at the self-play batch).
        if settings.precision in OPENVINO_PRECISIONS and not (settings.channels_last or settings.pin_memory) \
                and openvino_available() and (settings.precision == "bf16" or cpu_computes_bf16() or not onnx_available()):
            return "openvino"
        return "onnx" if settings.plain and onnx_available() else "torch"
    if backend in ("onnx", "openvino") and device.type != "cpu":
        raise ValueError(f"the {backend} backend runs on the cpu only, not on {device.type}")
    if backend == "onnx" and not settings.onnx_runs:
        raise ValueError(f"the onnx backend runs fp32 or int8, contiguous and unstaged, not {settings}")
    if backend != "onnx" and settings.precision == "int8":
        raise ValueError(f"precision int8 runs in the onnx backend, not {backend}")
    if backend == "openvino":
        if settings.precision not in OPENVINO_PRECISIONS or settings.channels_last or settings.pin_memory:
            raise ValueError(f"the openvino backend runs fp32 or bf16, contiguous and unstaged, not {settings}")
        if not openvino_available():
            raise ValueError("the openvino backend needs the openvino package (pip install openvino)")
    return backend


def resolve_inference(device: torch.device, backend: str = "auto", precision: str = "auto",
                      channels_last: bool | str = "auto", pin_memory: bool | str = "auto",
                      auto_int8: bool = False) -> tuple[str, InferenceSettings]:
    """The backend and settings that ``search``'s keys of these names ask for on ``device``, both resolved.

    ``auto_int8``: ``auto`` precision may be int8 (ONNX Runtime) where it runs and pays (``int8_pays``: a CPU
    with VNNI), unless the backend or a setting asks for what int8 does not run. Self-play asks for this: its
    networks are calibrated on their own games' latest positions, and its measure is strength per hour, where
    int8 won (+81 [+22, +146] at 50 minutes on a Zen 5). Players do not: their measure is strength at a fixed
    number of simulations, where the same network in int8 stood -19 [-48, +9] against its bf16 self."""
    if (auto_int8 and precision == "auto" and device.type == "cpu" and backend in ("auto", "onnx")
            and resolve_settings(device, "int8", channels_last, pin_memory).onnx_runs and int8_pays()):
        precision = "int8"
    name = resolve_backend(backend, device, resolve_settings(device, precision, channels_last, pin_memory))
    settings = resolve_settings(device, precision, channels_last, pin_memory, name)
    return resolve_backend(name, device, settings), settings


def available_backends(device: torch.device) -> list[str]:
    """The backends (``torch``, ``onnx``, ``openvino``) that can run on ``device`` here."""
    if device.type != "cpu":
        return ["torch"]
    return ["torch"] + ["onnx"] * onnx_available() + ["openvino"] * openvino_available()


def export_onnx(net: PolicyValueNet, metadata: Mapping[str, str] | None = None) -> bytes:
    """The folded ``net`` as a serialised ONNX model with a dynamic batch axis (names in the module docstring).

    ``metadata`` goes into the model's ``metadata_props`` (string keys and values).
    """
    fused = fuse_for_inference(net)
    example = torch.zeros((2, encoding.NUM_PLANES, 8, 8), dtype=torch.uint8)
    batch = {0: "batch"}
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript exporter warns that it is deprecated; the dynamo one would need onnxscript too.
        warnings.simplefilter("ignore")
        torch.onnx.export(fused, (example,),
                          buffer,  # type: ignore[arg-type]  # a file object works; the signature names paths only
                          input_names=[INPUT_NAME], output_names=list(OUTPUT_NAMES),
                          dynamic_axes={name: batch for name in (INPUT_NAME, *OUTPUT_NAMES)},
                          opset_version=ONNX_OPSET, dynamo=False)
    model = buffer.getvalue()
    if metadata:
        import onnx

        proto = onnx.load_model_from_string(model)
        onnx.helper.set_model_props(proto, dict(metadata))
        model = proto.SerializeToString()
    return model


def save_onnx(net: PolicyValueNet, path: str | os.PathLike, source: str = "") -> dict[str, str]:
    """Write ``net`` as an ONNX model to ``path`` atomically, after checking that onnxruntime runs it to
    torch's outputs (1e-4); returns the metadata stored in the model (``source``: where ``net`` came from)."""
    metadata = {
        "format": "alphazero-chess-onnx",
        "encoding_version": str(encoding.ENCODING_VERSION),
        "network": f"{net.config.blocks}x{net.config.channels}",
        "input": f"{INPUT_NAME}: uint8 [B, {encoding.NUM_PLANES}, 8, 8], alphazero.board.encoding planes, unscaled",
        "outputs": f"{OUTPUT_NAMES[0]}: float32 [B, {encoding.NUM_ACTIONS}] (action = plane * 64 + from_square); "
                   f"{OUTPUT_NAMES[1]}: float32 [B] in [-1, 1] for the side to move",
    }
    if source:
        metadata["source"] = source
    model = export_onnx(net, metadata)
    planes = np.random.default_rng(0).integers(0, 2, (8, encoding.NUM_PLANES, 8, 8), dtype=np.uint8)
    expected = TorchBackend(net, torch.device("cpu"))(planes)
    got = onnx_session(model, 1).run(None, {INPUT_NAME: planes})
    for want, have in zip(expected, got):
        if have.shape != want.shape or not np.allclose(have, want, atol=1e-4, rtol=0):
            raise RuntimeError("the ONNX export does not reproduce the network's outputs")
    atomic_write(path, lambda handle: handle.write(model))
    return metadata


def _grown(buffer: torch.Tensor, rows: int, pinned: bool) -> torch.Tensor:
    """``buffer`` if it has ``rows`` rows, else a new one of at least twice its rows (same shape otherwise)."""
    if len(buffer) >= rows:
        return buffer
    return torch.empty((max(rows, 2 * len(buffer)), *buffer.shape[1:]), dtype=buffer.dtype, pin_memory=pinned)


class HostStaging:
    """Reused host buffers between numpy and ``device``: planes in (``to_device``), outputs out (``to_host``).

    On CUDA with ``pin``: the buffers are page-locked, so both copies run with ``non_blocking`` (the
    transfer engine reads them directly instead of through the driver's bounce buffer) and the call
    waits once, on the stream, after the outputs' copy. On the CPU (or without ``pin``) the same code
    runs through plain buffers: ``to_device`` copies the planes into the buffer, ``to_host`` the outputs
    out of the network's tensors. The logits returned are a view of the buffer, valid until the next
    ``to_host``; the values are a copy.
    """

    def __init__(self, device: torch.device, pin: bool = True) -> None:
        self.device = device
        self.pinned = pin and device.type == "cuda"  # page-locked memory needs an accelerator
        self._planes = torch.empty((0, encoding.NUM_PLANES, 8, 8), dtype=torch.uint8, pin_memory=self.pinned)
        self._logits = torch.empty((0, encoding.NUM_ACTIONS), dtype=torch.float32, pin_memory=self.pinned)
        self._values = torch.empty((0,), dtype=torch.float32, pin_memory=self.pinned)

    def to_device(self, planes: np.ndarray) -> torch.Tensor:
        """planes ``uint8 [B, 24, 8, 8]`` -> the same on ``device``, through the reused host buffer."""
        self._planes = _grown(self._planes, len(planes), self.pinned)
        host = self._planes[: len(planes)]
        host.numpy()[...] = planes
        return host.to(self.device, non_blocking=self.pinned)

    def to_host(self, logits: torch.Tensor, values: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(logits ``[B, 4672]``, values ``[B]``) of any float dtype on ``device`` -> float32 numpy arrays."""
        count = len(logits)
        self._logits = _grown(self._logits, count, self.pinned)
        self._values = _grown(self._values, count, self.pinned)
        host_logits, host_values = self._logits[:count], self._values[:count]
        host_logits.copy_(logits.float(), non_blocking=self.pinned)
        host_values.copy_(values.float(), non_blocking=self.pinned)
        if self.pinned:
            torch.cuda.current_stream(self.device).synchronize()
        return host_logits.numpy(), host_values.numpy().copy()


class TorchBackend:
    """Torch eager on ``device``, as ``settings`` say (precision, memory format, staging; module docstring).

    With staging the logits returned are valid until the next call (``HostStaging``).
    """

    name = "torch"

    def __init__(self, net: PolicyValueNet, device: torch.device, settings: InferenceSettings = InferenceSettings()) -> None:
        if settings.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {settings.precision!r}")
        self.device = device
        self.settings = settings
        self.net = fuse_for_inference(net).to(device)
        if settings.channels_last:
            self.net = self.net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stubs omit this form
        self.staging = HostStaging(device, pin=True) if settings.pin_memory else None
        self.dtype = PRECISIONS[settings.precision]

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        autocast = (torch.autocast(self.device.type, dtype=self.dtype) if self.dtype is not None
                    else contextlib.nullcontext())
        with torch.inference_mode(), autocast:
            if self.staging is not None:
                x = self.staging.to_device(planes)
            else:
                x = torch.from_numpy(planes).to(self.device)
            if self.settings.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            logits, value = self.net(x)
            if self.staging is not None:
                return self.staging.to_host(logits, value)
        return logits.float().cpu().numpy(), value.float().cpu().numpy()


def onnx_session(model: bytes, threads: int | None = None):
    """An onnxruntime CPU session for serialised ``model`` on ``threads`` intra-op threads (default: torch's)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads if threads is not None else torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _policy_output_conv(model) -> str | None:
    """The name of the Conv node whose output becomes the ``logits`` output (through a Flatten or Reshape)."""
    producers = {output: node for node in model.graph.node for output in node.output}
    node = producers.get(OUTPUT_NAMES[0])
    while node is not None and node.op_type != "Conv" and node.input:
        node = producers.get(node.input[0])
    return node.name if node is not None and node.op_type == "Conv" else None


def _unshared(model):
    """``model`` with every initializer that several nodes read copied, one copy a node: torch's exporter merges
    equal constants (a fresh network's folded biases are all zero; the other readers get an ``Identity`` of the
    first), and ONNX Runtime's quantiser leaves such a bias in fp32, which keeps its convolution out of the int8
    kernels (5x slower in a random network)."""
    import onnx

    initializers = {init.name: init for init in model.graph.initializer}

    def copy_of(name: str, as_name: str) -> str:
        copy = onnx.TensorProto()
        copy.CopyFrom(initializers[name])
        copy.name = as_name
        model.graph.initializer.append(copy)
        initializers[as_name] = copy
        return as_name

    for node in [node for node in model.graph.node if node.op_type == "Identity" and node.input[0] in initializers]:
        copy_of(node.input[0], node.output[0])  # the Identity's output becomes a constant of its own
        model.graph.node.remove(node)
    readers: dict[str, int] = {}
    for node in model.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    for node in model.graph.node:
        for slot, name in enumerate(node.input):
            if name in initializers and readers[name] > 1:
                readers[name] -= 1
                node.input[slot] = copy_of(name, f"{name}_{node.name}")
    return model


def quantize_int8(model: bytes, planes: np.ndarray) -> bytes:
    """ONNX Runtime's static int8 form (QDQ) of the exported ``model``, its activations calibrated (min-max) on
    ``planes`` ``uint8 [N, 24, 8, 8]``: the convolutions with per-channel int8 weights and uint8 activations (the
    x86 VNNI kernels' pairing), the policy's output convolution kept in fp32 (its int8 logits moved the policy
    most: KL from fp32 0.0095 with it quantised, 0.0076 without, on a two-hour network), the value head's dense
    layers in fp32. About 0.1 s for 512 positions on one core."""
    import logging
    import tempfile
    from pathlib import Path

    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Batches(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{INPUT_NAME: planes[start:start + 64]} for start in range(0, len(planes), 64)])

        def get_next(self) -> dict | None:
            return next(self.batches, None)

    if len(planes) == 0:
        raise ValueError("int8 calibration needs at least one position")
    proto = _unshared(onnx.load_model_from_string(model))
    excluded = [name for name in [_policy_output_conv(proto)] if name]
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_static logs a "consider pre-processing" warning on every call
    try:
        with tempfile.TemporaryDirectory() as folder:
            source, target = Path(folder) / "net.onnx", Path(folder) / "int8.onnx"
            source.write_bytes(proto.SerializeToString())
            quantize_static(source, target, Batches(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            op_types_to_quantize=["Conv"], nodes_to_exclude=excluded)
            return target.read_bytes()
    finally:
        root.setLevel(level)


class OnnxBackend:
    """ONNX Runtime on the CPU, on an in-memory export of the network, in fp32 or int8 (``precision``).

    The session runs on as many intra-op threads as ``torch.get_num_threads()``: it is built again
    when torch's count has changed since (``torch.set_num_threads`` stays the one thread setting).

    int8 (``quantize_int8``) is calibrated on the ``CALIBRATION_POSITIONS`` most recent positions the backend
    was asked about: ``calibration`` (those the previous network's backend saw, ``recent_planes``: what
    ``NetworkEvaluator.set_network`` hands on) when there are enough, else the fp32 session answers until the
    backend has seen that many and then quantises. Self-play calibrates each new network on the latest
    positions of its own games; a player on the positions of its first searches.
    """

    name = "onnx"

    def __init__(self, net: PolicyValueNet, precision: str = "fp32", calibration: np.ndarray | None = None) -> None:
        if precision not in ONNX_PRECISIONS:
            raise ValueError(f"the onnx backend runs {' or '.join(ONNX_PRECISIONS)}, not {precision!r}")
        self.precision = precision
        self.model = export_onnx(net)
        self.quantized = False
        self._recent = np.zeros((CALIBRATION_POSITIONS, encoding.NUM_PLANES, 8, 8), np.uint8)
        self._seen = 0  # positions written to the ring _recent
        if precision == "int8" and calibration is not None:
            self._remember(np.asarray(calibration, dtype=np.uint8))
            self._quantize_when_ready()
        self.threads = torch.get_num_threads()
        self.session = onnx_session(self.model, self.threads)

    def _remember(self, planes: np.ndarray) -> None:
        rows = planes[-CALIBRATION_POSITIONS:]
        slots = (self._seen + np.arange(len(rows))) % CALIBRATION_POSITIONS
        self._recent[slots] = rows
        self._seen += len(rows)

    def recent_planes(self) -> np.ndarray:
        """The most recent positions asked about (at most ``CALIBRATION_POSITIONS``, int8 only; oldest first)."""
        if self._seen <= CALIBRATION_POSITIONS:
            return self._recent[: self._seen].copy()
        return np.roll(self._recent, -(self._seen % CALIBRATION_POSITIONS), axis=0)

    def _quantize_when_ready(self) -> None:
        if not self.quantized and self._seen >= CALIBRATION_POSITIONS:
            self.model = quantize_int8(self.model, self.recent_planes())
            self.quantized = True
            self.threads = 0  # the session is built again, on the quantised model

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(planes) == 0:
            return np.zeros((0, encoding.NUM_ACTIONS), np.float32), np.zeros(0, np.float32)
        planes = np.ascontiguousarray(planes, dtype=np.uint8)
        if self.precision == "int8":
            self._remember(planes)
            self._quantize_when_ready()
        threads = torch.get_num_threads()
        if threads != self.threads:
            self.session, self.threads = onnx_session(self.model, threads), threads
        logits, value = self.session.run(None, {INPUT_NAME: planes})
        return logits, value


class OpenVinoBackend:
    """OpenVINO Runtime's CPU plugin on an in-memory ONNX export of the network, in ``precision`` (fp32 or
    bf16: its ``INFERENCE_PRECISION_HINT``), one stream, as many threads as ``torch.get_num_threads()``
    (compiled again when torch's count changes), no thread pinning (the process's cores are Ray's to give).

    The logits returned are a view of the plugin's output buffer, valid until the next call (as the torch
    backend's staging); the values are a copy.
    """

    name = "openvino"

    def __init__(self, net: PolicyValueNet, precision: str = "fp32") -> None:
        if precision not in OPENVINO_PRECISIONS:
            raise ValueError(f"the openvino backend runs {' or '.join(OPENVINO_PRECISIONS)}, not {precision!r}")
        self.precision = precision
        self.model = openvino_core().read_model(export_onnx(net), b"")
        self.threads = torch.get_num_threads()
        self.request = self._compiled(self.threads)

    def _compiled(self, threads: int):
        """An inference request of the model compiled for ``threads`` threads."""
        compiled = openvino_core().compile_model(self.model, "CPU", {
            "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
            "ENABLE_CPU_PINNING": False, "INFERENCE_PRECISION_HINT": OPENVINO_PRECISIONS[self.precision]})
        return compiled.create_infer_request()

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(planes) == 0:
            return np.zeros((0, encoding.NUM_ACTIONS), np.float32), np.zeros(0, np.float32)
        if torch.get_num_threads() != self.threads:
            self.threads = torch.get_num_threads()
            self.request = self._compiled(self.threads)
        self.request.infer({0: np.ascontiguousarray(planes, dtype=np.uint8)})
        logits = self.request.get_output_tensor(0).data
        values = self.request.get_output_tensor(1).data
        return logits, np.array(values, dtype=np.float32).reshape(len(planes))


def make_backend(backend: str, net: PolicyValueNet, device: torch.device,
                 settings: InferenceSettings = InferenceSettings(),
                 calibration: np.ndarray | None = None) -> TorchBackend | OnnxBackend | OpenVinoBackend:
    """The backend named by ``resolve_backend`` output (``torch``, ``onnx`` or ``openvino``) running ``net``
    (``calibration``: positions for int8, ``OnnxBackend``)."""
    if backend == "onnx":
        return OnnxBackend(net, settings.precision, calibration)
    if backend == "openvino":
        return OpenVinoBackend(net, settings.precision)
    if backend == "torch":
        return TorchBackend(net, device, settings)
    raise ValueError(f"no inference backend {backend!r} (torch, onnx or openvino)")
