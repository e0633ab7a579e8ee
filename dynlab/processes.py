"""Independent tasks of one job in worker processes, so that a program scenario uses every core.

A program scenario's cells (one unit at one width and length, say) are independent, and most of
their time goes to compiling and running many small XLA programs on one thread: in one process a
2-core machine sits half idle (``cross-pc-alignment`` in one process: 143% CPU). [`completed`][]
runs them in ``workers`` processes started by ``spawn`` (no fork of a process that runs XLA's
threads) and yields each result as it arrives; ``workers = 1`` runs them in this process, in order,
which is also what tests and nested pools use.

Each task computes the same numbers in any process — the cells are deterministic functions of
their arguments — so the results do not depend on ``workers``. The task function must be
importable by name (a module-level function), its arguments and result picklable, and what it
needs registered must be registered on import (built-in and entry-point plug-ins are; a unit
registered by hand in this session is not, so run such a job with ``workers = 1``).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from typing import Callable, Iterator, Sequence

from dynlab.errors import require_positive


def completed(fn: Callable, tasks: Sequence[tuple], workers: int = 1) -> Iterator[tuple[int, object]]:
    """``(i, fn(*tasks[i]))`` for every task, as each finishes (in order when ``workers == 1``).

    Tasks are handed out in the order given, so put the longest first. An exception in a task is
    raised here once the tasks already running have finished; the tasks not started are dropped.
    """
    require_positive("workers", workers)
    if workers == 1 or len(tasks) <= 1:
        for i, task in enumerate(tasks):
            yield i, fn(*task)
        return
    context = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(min(workers, len(tasks)), mp_context=context)
    try:
        futures = {pool.submit(fn, *task): i for i, task in enumerate(tasks)}
        for future in concurrent.futures.as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
