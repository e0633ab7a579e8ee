"""Suite-wide guard: keep each test process below the kernel's memory-map limit.

Every executable XLA compiles on the CPU is mapped into the process by its JIT, and the maps stay
until the executable is freed. One xdist worker compiles thousands of programs over the suite:
measured on the CI kind of machine, a worker reached 63,875 lines of ``/proc/self/maps`` against
``vm.max_map_count`` = 65,530, and the runs that crossed it died with a segmentation fault inside
``backend_compile_and_load`` (then xdist hung). Freeing JAX's compiled executables between test
modules once the count passes half the limit returns the maps (300 small programs: 1,392 maps,
507 after ``jax.clear_caches()``). The largest growth within one module measured ~10,000 maps, so
half the limit leaves three modules' margin; clearing at a third cost ~1 minute of recompilation
over the suite (14:03 against 13:06 on 2 cores), so it is not done earlier than needed.
"""

import gc

import jax
import pytest

MAPS_LIMIT_FILE = "/proc/sys/vm/max_map_count"


def _count(path: str) -> int | None:
    try:
        with open(path) as f:
            return sum(1 for _ in f) if path.endswith("maps") else int(f.read())
    except (OSError, ValueError):
        return None  # not Linux: nothing to guard


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs_when_maps_run_high():
    yield
    used, limit = _count("/proc/self/maps"), _count(MAPS_LIMIT_FILE)
    if used is not None and limit is not None and used > limit // 2:
        jax.clear_caches()
        gc.collect()
