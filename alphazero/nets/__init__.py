"""Networks: the policy/value net and its safe file format (``network``), and the network side of
the search seam (``evaluator``). The only package that imports torch for inference."""
