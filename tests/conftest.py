"""Suite-wide: one compilation cache for every process of a run, and a guard on the memory-map limit.

**Compilation cache.** Many tests start ``dynlab`` processes (the README tour, kill-and-resume
runs), and each compiled the same training steps again. The controller makes
one directory per run and hands it to the workers and their children as JAX's persistent
compilation cache (``JAX_COMPILATION_CACHE_DIR``, every program cached): a compiled program is the
same bytes whoever compiled it, so no result changes, only the time (test_durability alone, from an
empty cache: 55.6 s -> 47.2 s). The directory is removed when the run ends.

**Compiler optimisation level.** The suite is bound by compilation, not by running the compiled
programs: most tests run a few steps of many differently shaped programs. Every process of a run
(the workers and the ``dynlab`` processes they start, which inherit the environment) compiles with
``--xla_backend_optimization_level=0``: LLVM's code generation at -O0, XLA's own graph
optimisations unchanged. No fast-math at either level (no reassociation), but -O0 fuses fewer
multiply-adds than -O2, so results can differ in the last bits: of the scenario snapshots, recorded
at -O2, the elements that failed their old element-wise tolerance had moved by 6.1e-6 and 7.5e-6,
on correlations of scale 1 (their tolerance now says how that is compared). Measured on 2 cores, user time: the elm-budget toy run with its sweeps 84 -> 53 s;
test_coverage + test_lyapunov_model 78 -> 54 s; the whole suite 15:38 -> 11:06 wall (26:14 ->
19:18 user). A flag the environment already sets is kept.

**Memory maps.** Keep each test process below the kernel's memory-map limit.

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
(14:03 against 13:06 on 2 cores), so it is not done earlier than needed. The guard is
[`dynlab.memory_maps.relieve`][], which the long programs and the docs gallery call too.
"""

import os
import shutil
import tempfile

import jax
import pytest

from dynlab import memory_maps

CACHE = "JAX_COMPILATION_CACHE_DIR"
FAST_COMPILE = "--xla_backend_optimization_level=0"

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):  # before any backend starts
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()


def pytest_configure(config):
    if hasattr(config, "workerinput") or CACHE in os.environ:  # a worker inherits the controller's
        return
    config._dynlab_cache = tempfile.mkdtemp(prefix="dynlab-test-jax-cache-")
    os.environ[CACHE] = config._dynlab_cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    jax.config.update("jax_compilation_cache_dir", config._dynlab_cache)  # this process imported jax already
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def pytest_unconfigure(config):
    if getattr(config, "_dynlab_cache", None):
        shutil.rmtree(config._dynlab_cache, ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs_when_maps_run_high():
    yield
    memory_maps.relieve(0.5)
