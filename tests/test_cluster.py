"""Starting Ray for a run (``workers.cluster``) without starting it: whether a config fits the machine.

Ray itself is started by the tests of the driver (``tests/test_driver.py``, ``tests/test_training.py``).
"""

from __future__ import annotations

import pytest

from alphazero.config import load_config
from workers.cluster import RunError, available_cpus, check_fits


@pytest.mark.parametrize("cpus", [1, 2, 3, 8])
def test_a_config_that_fits_gets_the_machine_and_one_that_does_not_is_refused_with_the_fixes(cpus: int) -> None:
    fits = load_config(None, [f"workers.num_selfplay_workers={cpus}", "workers.learner_cpus=0"])
    assert check_fits(fits, cpus=cpus) == cpus
    big = load_config(None, [f"workers.num_selfplay_workers={cpus + 3}", "workers.learner_cpus=1",
                             "workers.arena_cpus=0.5"])
    with pytest.raises(RunError) as caught:
        check_fits(big, cpus=cpus)
    message = str(caught.value)
    assert f"asks for {cpus + 4.5:g} CPUs" in message and f"this machine has {cpus}" in message
    # The suggested fix leaves room for the learner and the arena; none when not even one actor fits.
    fix = f"--set workers.num_selfplay_workers={cpus - 2}" if cpus >= 3 else None
    assert (fix in message) if fix else "workers.num_selfplay_workers=" not in message
    assert "--address" in message and "--oversubscribe" in message
    assert check_fits(big, oversubscribe=True, cpus=cpus) == cpus + 5  # a Ray as large as the config asks


def test_the_machine_is_what_this_process_may_use() -> None:
    cpus = available_cpus()
    assert cpus >= 1
    assert check_fits(load_config(None, [f"workers.num_selfplay_workers={cpus}", "workers.learner_cpus=0"])) == cpus


def test_cuda_without_a_gpu_is_refused() -> None:
    import torch

    config = load_config(None, ["train.device=cuda"])
    if torch.cuda.is_available():
        assert check_fits(config) >= 1
    else:
        with pytest.raises(RunError, match="train.device is cuda but this machine has no CUDA GPU"):
            check_fits(config)
