"""Suite-wide guard: keep each test process below the kernel's memory-map limit.

Every executable XLA compiles on the CPU keeps memory maps until it is freed, and one xdist worker
compiles thousands of programs over the suite. Measured here (a 2-core machine of CI's kind), a
worker reached 63,875 lines of ``/proc/self/maps`` against ``vm.max_map_count`` = 65,530; CI and one
local run in three died with a segmentation fault inside ``backend_compile_and_load`` near the end
of the suite (then xdist hung). That crossing the limit is what crashed them is inferred, not seen:
the crashes left no core. Freeing JAX's compiled executables returns the maps (300 small programs:
1,392 maps, 507 after ``jax.clear_caches()``), so they are freed between test modules once a
worker holds more than half the limit. The largest growth within one module was 13,940 maps
(test_units), so half the limit leaves room for two such modules; clearing from a third of the
limit kept workers at or below 26,657 maps but cost ~1 minute of recompilation over the suite
(14:03 against 13:06 on 2 cores), so it is not done earlier than needed.
"""

import gc
from pathlib import Path

import jax
import pytest


def _maps_in_use() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs_when_maps_run_high():
    yield
    try:
        limit = int(Path("/proc/sys/vm/max_map_count").read_text())
        used = _maps_in_use()
    except (OSError, ValueError):
        return  # not Linux: nothing to guard
    if used > limit // 2:
        jax.clear_caches()
        gc.collect()
