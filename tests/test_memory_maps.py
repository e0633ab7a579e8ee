"""The memory-map guard of long jobs (``dynlab.memory_maps``)."""

import jax
import jax.numpy as jnp
import pytest


def test_relieve_frees_compiled_programs_only_above_its_threshold():
    """dynlab.memory_maps: compiled programs hold memory maps; relieve frees them above the fraction."""
    from dynlab import memory_maps

    if memory_maps.maps_in_use() is None or memory_maps.map_limit() is None:
        pytest.skip("no /proc/self/maps: not Linux")
    for k in range(60):  # 60 distinct small programs
        jax.jit(lambda v, k=k: jnp.sin(v) * k + v**2).lower(jnp.ones(k + 1)).compile()(jnp.ones(k + 1))
    assert not memory_maps.relieve(1.0)  # below the whole limit: kept
    before = memory_maps.maps_in_use()
    assert memory_maps.relieve(0.0)
    assert memory_maps.maps_in_use() < before
