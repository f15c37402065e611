"""Starting or joining Ray, the one way every entry point does it.

An embedded Ray binds to a loopback address (``127.0.0.2``: Ray rewrites ``127.0.0.1`` to the
machine's network address) with the dashboard off; ``address`` joins a running cluster instead.
"""

from __future__ import annotations

import os

import ray

LOOPBACK_NODE_IP = "127.0.0.2"


def start_ray(address: str | None, num_cpus: int, object_store_memory_mb: int = 256,
              log_to_driver: bool = True) -> bool:
    """Start a private local Ray of ``num_cpus`` CPUs (``address`` None) or join ``address``.

    Returns True when this call started Ray (the caller shuts it down). A Ray already initialised in
    this process is used as it is.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    runtime_env = {"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}}
    if address is None:
        ray.init(
            address="local",  # never attach silently to a cluster that happens to run here
            num_cpus=num_cpus,
            include_dashboard=False,
            object_store_memory=object_store_memory_mb * 1024 * 1024,
            _node_ip_address=LOOPBACK_NODE_IP,
            log_to_driver=log_to_driver,
            runtime_env=runtime_env,
        )
        return True
    ray.init(address=address, runtime_env=runtime_env, log_to_driver=log_to_driver)
    return False
