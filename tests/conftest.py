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
JAX's ``jax_disable_most_optimizations`` (``$JAX_DISABLE_MOST_OPTIMIZATIONS``): LLVM's code
generation at -O0 (``xla_backend_optimization_level = 0``), XLA's own graph optimisations
unchanged. No fast-math at either level (no reassociation), but -O0 fuses fewer multiply-adds than
-O2, so results can differ in the last bits: of the scenario snapshots, recorded at -O2, the
elements that failed their old element-wise tolerance had moved by 6.1e-6 and 7.5e-6, on
correlations of scale 1 (their tolerance now says how that is compared). Measured on 2 cores, user
time: the elm-budget toy run with its sweeps 84 -> 53 s; test_coverage + test_lyapunov_model 78 ->
54 s; the whole suite 15:38 -> 11:06 wall (26:14 -> 19:18 user). A test that runs one program for
long is the exception: an ARU trained 600 steps costs 14.0 s of CPU at -O0 and 6.3 s at -O2. Tests
and modules marked ``@pytest.mark.optimised`` compile at JAX's default level (the setting is read
at each compilation, so it can change between tests). They were chosen by CPU time per test
(``DYNLAB_TEST_CPU_LOG``) in two whole-suite runs, at -O0 and at -O2, and kept only where marking
them alone saved CPU in a third: a marked test no longer shares the compilation cache with the
unmarked ones (the level is part of the key), so the README tour, cheaper at -O2 when everything
was, cost 115.7 -> 142.2 s marked alone, and the ELM SHD module 12.2 -> 25.9 s. Kept: ARU training
28.4 -> 16.7 s, the SITH TRW module 31.7 -> 19.1 s, the STA null 4.4 -> 2.3 s, ARU adaptation
15.2 -> 13.9 s. A test that compares its numbers
bit for bit with a fixture's must compile at the fixture's level: the resume test of test_scenarios
is not marked, since its reference sweep runs at -O0. An optimisation level that ``XLA_FLAGS``
sets is kept for every test.

**Fusion emitters.** XLA's CPU backend compiles each fusion through its newer MLIR "fusion
emitters" by default; ``--xla_cpu_use_fusion_emitters=false`` takes its older LLVM-IR emitters,
which compile these small programs much faster. The same HLO is computed, with no fast-math at
either, but the two emitters may lower a transcendental function differently, so results can differ
in the last bits, as with -O0. Measured on 2 cores at -O0, test_pc_time + test_units +
test_lyapunov_core alone: 104 and 100 s wall (126 and 123 s user) with the fusion emitters, 68 s
(71 s user) without; the whole suite, with the order below, 1,604 -> 1,088 s of work summed over
both workers and 12:55-15:27 -> 9:09-9:34 wall from a fresh clone. XLA aborts the process on a
flag it does not know, so the flag is given only where a probe process of this jaxlib accepts it ([`_accepted`][]; about 0.7 s per flag, once per run).

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

**Longest modules first.** xdist (``--dist loadscope``) hands each worker one module at a time, in
collection order, so the run ends when the last module handed out ends. By default it orders modules
by their number of tests, which put the two-test README tour (~100 s) among the last. The modules
of [`LONGEST_FIRST`][] are collected first, in that order, and xdist's reordering is turned off
(its ``loadscopereorder`` option, where the installed xdist has it): the longest-processing-time-first rule, so what is left
at the end is short. The list is measured (per-module wall time on one worker, 2 cores); a module
missing from it only runs later, and one that grew only balances less well.
"""

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import jax
import pytest

from dynlab import memory_maps

CACHE = "JAX_COMPILATION_CACHE_DIR"
LONGEST_FIRST = (  # wall seconds per module at the session's first idle run (DYNLAB_TEST_CPU_LOG, 2026-12-08,
    # 1,211 s in all; the continuation module with the tests added since, measured alone), the order being what matters
    "test_readme.py",  # 63
    "test_sweep_units.py",  # 60
    "test_scenarios.py",  # 58
    "test_continuation_analysis.py",  # 50
    "test_paper_presets.py",  # 49
    "test_smoothing.py",  # 48
    "test_lyapunov_core.py",  # 33
    "test_durability.py",  # 30
    "test_units.py",  # 28
    "test_coverage.py",  # 28
    "test_train.py",  # 27
    "test_lyapunov_coverage.py",  # 26
    "test_pc_findings.py",  # 25
    "test_aru_analyses.py",  # 22
    "test_context_integration_truth.py",  # 21
    "test_pc_inference.py",  # 21
    "test_scenario_elm_budget.py",  # 21
    "test_pc_time.py",  # 21
    "test_sweep_cluster.py",  # 20
    "test_lyapunov_model.py",  # 19
    "test_teachers.py",  # 18
    "test_docs.py",  # 18
    "test_scenario_sith_trw.py",  # 15
    "test_cognitive_tasks.py",  # 15
    "test_hostile_scenarios.py",  # 14
    "test_plugins.py",  # 14
    "test_spectra_core.py",  # 14
    "test_elm_scaling.py",  # 13
    "test_nothing_lost.py",  # 13
    "test_lyapunov_factorisations.py",  # 13
    "test_claims.py",  # 12
    "test_python_api.py",  # 12
    "test_trw.py",  # 12
    "test_imports.py",  # 12
    "test_authors_imports.py",  # 12
    "test_continuation_core.py",  # 11
    "test_pc_inputs.py",  # 11
    "test_fixed_points.py",  # 11
    "test_docs_commands.py",  # 11
    "test_pc_theory.py",  # 11
)
FAST_COMPILE = ("--xla_cpu_use_fusion_emitters=false",)
LEVEL = "--xla_backend_optimization_level"
OPTIMISATIONS = "JAX_DISABLE_MOST_OPTIMIZATIONS"


def _accepted(flags: str) -> bool:
    """Whether XLA starts with ``XLA_FLAGS=flags`` (it aborts on an unknown flag): a probe process."""
    probe = [sys.executable, "-c", "import jax; jax.devices()"]
    return subprocess.run(probe, env={**os.environ, "XLA_FLAGS": flags}, capture_output=True).returncode == 0


def _fast_compile_flags() -> None:
    """Add each flag of [`FAST_COMPILE`][] that the environment does not set and this jaxlib knows,
    before any backend starts; the workers and the processes they start inherit them, so only the
    controller probes."""
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in FAST_COMPILE:
        if flag.split("=")[0] not in flags and _accepted(f"{flags} {flag}"):
            flags = f"{flags} {flag}".strip()
    os.environ["XLA_FLAGS"] = flags
    if LEVEL not in flags:  # a level the environment gives is kept (the JAX setting would override it)
        os.environ.setdefault(OPTIMISATIONS, "1")
    _disable_optimisations(os.environ.get(OPTIMISATIONS, "").lower() in ("1", "true"))


def _disable_optimisations(on: bool) -> None:
    """This process's ``jax_disable_most_optimizations``: read by JAX at every compilation (a worker
    imported JAX after the controller set ``$JAX_DISABLE_MOST_OPTIMIZATIONS``; the controller before)."""
    jax.config.update("jax_disable_most_optimizations", on)


_fast_compile_flags()


def pytest_configure(config):
    config.addinivalue_line("markers", "optimised: compile at JAX's default optimisation level, not -O0 "
                            "(a test that runs its programs long; see tests/conftest.py)")
    if hasattr(config.option, "loadscopereorder"):  # keep LONGEST_FIRST's order (xdist's default sorts modules by test count)
        config.option.loadscopereorder = False
    if hasattr(config, "workerinput") or CACHE in os.environ:  # a worker inherits the controller's
        return
    config._dynlab_cache = tempfile.mkdtemp(prefix="dynlab-test-jax-cache-")
    os.environ[CACHE] = config._dynlab_cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    jax.config.update("jax_compilation_cache_dir", config._dynlab_cache)  # this process imported jax already
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def pytest_collection_modifyitems(config, items):
    """The modules of [`LONGEST_FIRST`][] first, in its order; the rest as collected (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_unconfigure(config):
    if getattr(config, "_dynlab_cache", None):
        shutil.rmtree(config._dynlab_cache, ignore_errors=True)


def _optimised(node) -> bool:
    return node.get_closest_marker("optimised") is not None and jax.config.read("jax_disable_most_optimizations")


@contextlib.contextmanager
def _at_default_level():
    """JAX's default optimisation level here and in the processes started meanwhile."""
    before = os.environ.get(OPTIMISATIONS)
    os.environ[OPTIMISATIONS] = "0"
    _disable_optimisations(False)
    try:
        yield
    finally:
        os.environ[OPTIMISATIONS] = before
        _disable_optimisations(True)


@pytest.fixture(autouse=True, scope="module")
def _optimised_module(request):
    """A module marked ``optimised`` (``pytestmark``), its module-scoped fixtures included, at JAX's default level."""
    with _at_default_level() if _optimised(request.node) else contextlib.nullcontext():
        yield


@pytest.fixture(autouse=True)
def _optimised_test(request):
    """A test marked ``optimised`` at JAX's default level."""
    with _at_default_level() if _optimised(request.node) else contextlib.nullcontext():
        yield


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs_when_maps_run_high():
    yield
    memory_maps.relieve(0.5)



CPU_LOG = "DYNLAB_TEST_CPU_LOG"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``$DYNLAB_TEST_CPU_LOG=DIR``, one JSON line per test in ``DIR/PID.jsonl``: its node id,
    the CPU seconds of this process (``self``) and of the processes it started and waited for
    (``kids``), and wall seconds. CPU time barely moves with the machine's load, so it compares
    changes made while other work runs (``python tests/cpu_profile.py DIR`` sums it per module)."""
    log = os.environ.get(CPU_LOG)
    if not log:
        yield
        return
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    start = time.time()
    yield
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    self_s, kids_s = (a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, usage))
    os.makedirs(log, exist_ok=True)
    with open(os.path.join(log, f"{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps({"id": item.nodeid, "self": self_s, "kids": kids_s, "wall": time.time() - start}) + "\n")
