"""Ways to run the network, compared: torch eager in each precision and memory format (the torch backend's
``InferenceSettings``, pinned staging on CUDA), torch.compile, ONNX Runtime and OpenVINO in fp32 and bf16 (CPU).

    python -m alphazero.bench.inference --config configs/default.yaml --batches 1,8,48,256 [--compile]
    python -m alphazero.bench.inference --config configs/gpu.yaml --device cuda --batches 256,1024,4096

``--threads`` torch threads (and as many ONNX Runtime threads; default one), the folded network of
``--config`` with random weights; at each batch size every variant runs 1 s, three times interleaved,
and the best positions/s of each is printed with its largest logit difference from fp32 eager and its
first call's seconds (torch.compile compiles then, once per batch size). Variants are named
``PRECISION[+cl][+pin]`` (``+cl``: channels-last, ``+pin``: ``HostStaging``'s pinned buffers; CUDA only).
On CUDA the positions/s include the copies to and from the device (what the search pays).
docs/RESULTS.md "Inference backends" and "GPU self-play" have the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

import numpy as np
import torch

from alphazero.config import load_config
from alphazero.nets.inference import (
    CALIBRATION_POSITIONS,
    INPUT_NAME,
    InferenceSettings,
    OpenVinoBackend,
    TorchBackend,
    export_onnx,
    onnx_session,
    openvino_available,
    quantize_int8,
)
from alphazero.nets.network import PolicyValueNet, fuse_for_inference

CPU_VARIANTS = ("fp32", "fp32+cl", "bf16", "bf16+cl")
CUDA_VARIANTS = ("fp32", "fp32+pin", "fp16", "fp16+pin", "fp16+cl+pin", "bf16+cl+pin")


def settings_named(name: str) -> InferenceSettings:
    """``fp16+cl+pin`` -> ``InferenceSettings("fp16", channels_last=True, pin_memory=True)``."""
    precision, *flags = name.split("+")
    unknown = set(flags) - {"cl", "pin"}
    if unknown:
        raise ValueError(f"variant {name!r}: unknown flag(s) {sorted(unknown)} (cl, pin)")
    return InferenceSettings(precision, "cl" in flags, "pin" in flags)


def _session_runner(session: Any) -> Callable[[np.ndarray], Any]:
    return lambda x: session.run(None, {INPUT_NAME: x})


def real_planes(count: int, seed: int = 0) -> np.ndarray:
    """The planes of ``count`` positions of random games (``alphazero.bench.positions.sample_positions``)."""
    from alphazero.bench.positions import sample_positions
    from alphazero.board import encoding

    return encoding.encode_boards(sample_positions(count, seed))


def int8_models(net: PolicyValueNet) -> dict[str, bytes]:
    """ONNX Runtime's int8 forms of the exported net: ``onnx-int8-dynamic`` (weights int8, activations
    quantised per call) and ``onnx-int8-static`` (``search.precision: int8``'s ``quantize_int8``, calibrated on
    512 real positions)."""
    import tempfile
    from pathlib import Path

    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = export_onnx(net)
    with tempfile.TemporaryDirectory() as folder:
        source, dynamic = Path(folder) / "net.onnx", Path(folder) / "dynamic.onnx"
        source.write_bytes(model)
        quantize_dynamic(source, dynamic, weight_type=QuantType.QInt8)
        return {"onnx-int8-dynamic": dynamic.read_bytes(),
                "onnx-int8-static": quantize_int8(model, real_planes(CALIBRATION_POSITIONS))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--batches", default="1,8,48,256")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variants", default="", help="comma-separated PRECISION[+cl][+pin] (default: the device's set)")
    parser.add_argument("--compile", action="store_true", help="also torch.compile (tens of seconds per batch size)")
    parser.add_argument("--int8", action="store_true",
                        help="also ONNX Runtime int8: dynamic quantisation, and static (QDQ) calibrated on real positions")
    parser.add_argument("--real", action="store_true",
                        help="time and compare on positions from middlegames (default: random bit planes)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    net = PolicyValueNet(load_config(args.config).network)
    eager = fuse_for_inference(net)
    names = args.variants.split(",") if args.variants else (CPU_VARIANTS if device.type == "cpu" else CUDA_VARIANTS)

    def first(out: Any) -> np.ndarray:
        return out[0] if isinstance(out[0], np.ndarray) else out[0].float().cpu().numpy()

    variants: dict[str, Callable[[np.ndarray], Any]] = {
        name: TorchBackend(net, device, settings_named(name)) for name in names}
    if device.type == "cpu":
        session = onnx_session(export_onnx(net), threads=args.threads)
        variants["onnxruntime"] = lambda x: session.run(None, {INPUT_NAME: x})
        if openvino_available():
            for precision in ("fp32", "bf16"):
                variants[f"openvino-{precision}"] = OpenVinoBackend(net, precision)
        if args.int8:
            for name, model in int8_models(net).items():
                variants[name] = _session_runner(onnx_session(model, threads=args.threads))
    if args.compile:
        compiled = torch.compile(fuse_for_inference(net).to(device), dynamic=False)
        variants["compile"] = lambda x: (compiled(torch.from_numpy(x).to(device))[0].float().cpu().numpy(),)
    rng = np.random.default_rng(0)
    for batch in (int(b) for b in args.batches.split(",")):
        planes = (real_planes(batch) if args.real else rng.integers(0, 2, (batch, 24, 8, 8), dtype=np.uint8))
        row: dict[str, Any] = {"batch": batch, "device": device.type}
        with torch.inference_mode():
            reference = first(eager(torch.from_numpy(planes)))
            for name, run in variants.items():
                start = time.perf_counter()
                difference = float(np.abs(first(run(planes)) - reference).max())
                row[name] = {"first_call_s": round(time.perf_counter() - start, 2), "max_logit_diff": difference}
            for _ in range(3):
                for name, run in variants.items():
                    calls, start = 0, time.perf_counter()
                    while time.perf_counter() - start < 1.0:
                        run(planes)
                        calls += 1
                    rate = calls * batch / (time.perf_counter() - start)
                    row[name]["positions_per_s"] = round(max(rate, row[name].get("positions_per_s", 0)))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
