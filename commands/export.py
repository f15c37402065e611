"""``alphazero export``: write a network in another format (``--onnx``: ``alphazero.nets.inference.save_onnx``)."""

from __future__ import annotations

import argparse

ONNX_HELP = ("ONNX model of network NET (a network file, or a run directory: its best network). Input 'planes': "
             "uint8 [B, 24, 8, 8], the encoder's planes as stored (scaled inside the graph); outputs 'logits': "
             "float32 [B, 4672] (action = plane * 64 + from_square) and 'value': float32 [B] in [-1, 1] for the side "
             "to move; opset 17, dynamic batch; checked against torch before it is written")


def add_parser(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser("export", help="write a network in another format (ONNX)", description=ONNX_HELP)
    formats = export.add_mutually_exclusive_group(required=True)
    formats.add_argument("--onnx", metavar="NET", help="network file, or run directory (its best network), written as ONNX")
    export.add_argument("--out", required=True, metavar="FILE.onnx", help="where to write it (atomically)")
    export.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alphazero.fileio import output_file
    from alphazero.judge.players import resolve_network_path
    from alphazero.nets.inference import save_onnx
    from alphazero.nets.network import load_network

    output_file(args.out, "--out")
    path = resolve_network_path(args.onnx)
    metadata = save_onnx(load_network(path), args.out, source=str(path))
    print(f"wrote {args.out}: ONNX of network {metadata['network']} ({path}); planes uint8 [B, 24, 8, 8] -> "
          "logits float32 [B, 4672], value float32 [B]")
    return 0
