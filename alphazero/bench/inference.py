"""Ways to run the network on the CPU, compared: torch eager, channels_last, torch.compile, ONNX Runtime.

    python -m alphazero.bench.inference --config configs/default.yaml --batches 1,8,48,256 [--compile]

One torch thread (and one ONNX Runtime thread), the folded network of ``--config`` with random
weights; at each batch size every variant runs 1 s, three times interleaved, and the best positions/s
of each is printed with its largest logit difference from eager and its first call's seconds
(torch.compile compiles then, once per batch size). docs/RESULTS.md "Inference backends" has the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

import numpy as np
import torch

from alphazero.config import load_config
from alphazero.nets.inference import INPUT_NAME, export_onnx, onnx_session
from alphazero.nets.network import PolicyValueNet, fuse_for_inference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--batches", default="1,8,48,256")
    parser.add_argument("--compile", action="store_true", help="also torch.compile (tens of seconds per batch size)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = PolicyValueNet(load_config(args.config).network)
    eager = fuse_for_inference(net)
    channels_last: Any = fuse_for_inference(net)
    channels_last.to(memory_format=torch.channels_last)  # in place; torch's stubs do not list this form
    session = onnx_session(export_onnx(net), threads=1)

    def first(out: Any) -> np.ndarray:
        return out[0] if isinstance(out[0], np.ndarray) else out[0].numpy()

    variants: dict[str, Callable[[np.ndarray], Any]] = {
        "eager": lambda x: eager(torch.from_numpy(x)),
        "channels_last": lambda x: channels_last(torch.from_numpy(x).contiguous(memory_format=torch.channels_last)),
        "onnxruntime": lambda x: session.run(None, {INPUT_NAME: x}),
    }
    if args.compile:
        compiled = torch.compile(eager, dynamic=False)
        variants["compile"] = lambda x: compiled(torch.from_numpy(x))
    rng = np.random.default_rng(0)
    for batch in (int(b) for b in args.batches.split(",")):
        planes = rng.integers(0, 2, (batch, 24, 8, 8), dtype=np.uint8)
        row: dict[str, Any] = {"batch": batch}
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
