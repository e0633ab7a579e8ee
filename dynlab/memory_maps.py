"""Keep a long-running process below the kernel's limit on memory maps.

Every executable XLA compiles for the CPU keeps memory maps until it is freed, and a process that
compiles many programs — a test worker, the documentation gallery, a scenario over many units,
widths and lengths — can reach ``vm.max_map_count`` (65,530 by default). The next compilation then
fails: "LLVM ERROR: Unable to allocate section memory" and an abort (measured: ``dynlab run
cross-pc-law`` died so after 14 minutes, in its third unit), or a segmentation fault inside
``backend_compile_and_load`` (the test suite, session 11). Freeing JAX's compiled executables
returns the maps (300 small programs: 1,392 maps, 507 after ``jax.clear_caches()``).

[`relieve`][] frees them once the process holds more than a fraction of the limit; call it between
independent parts of a long job. Clearing costs the recompilation of what later parts share, so
it is not done earlier than needed.
"""

from __future__ import annotations

import gc
from pathlib import Path


def maps_in_use() -> int | None:
    """Lines of ``/proc/self/maps`` (``None`` where there is no such file: not Linux)."""
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def map_limit() -> int | None:
    """``vm.max_map_count`` (``None`` where it cannot be read)."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return None


def relieve(fraction: float = 0.5) -> bool:
    """Free JAX's compiled programs if this process holds more than ``fraction`` of the map limit;
    whether it did."""
    import jax

    used, limit = maps_in_use(), map_limit()
    if used is None or limit is None or used <= fraction * limit:
        return False
    jax.clear_caches()
    gc.collect()
    return True
