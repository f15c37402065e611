"""Benchmarks, all in this room: each prints figures a person can compare across machines and commits.

``suite``      what ``alphazero bench`` prints: encoding, the network with each inference backend, the
               searches (compiled, Python, the other algorithm), alpha-beta and NNUE training, one dict
``search``     the compiled search against the Python one on the same workload (``python -m alphazero.bench.search``)
``alphabeta``  the compiled board and alpha-beta: perft, nodes per second, nodes to depth (``python -m alphazero.bench.alphabeta``)
``learner``    the policy/value learner's samples per second, the config's network and train settings
``nnue``       the NNUE trainer's positions per second on synthetic data
``inference``  ways to run the network on the CPU: eager, channels-last, torch.compile, ONNX Runtime
``positions``  the fixed positions they share; ``shared`` the default config and the timing helpers

The top floor of the core: it may import any room below and nothing imports it but the command line.
Self-play throughput needs Ray actors, so it lives in ``workers/bench.py`` (``alphazero bench --selfplay``).
Speed is measured here, not in timed tests.
"""
