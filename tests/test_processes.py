"""dynlab.processes: a job's independent tasks in worker processes give what they give in this one."""

import operator

import pytest

from dynlab import processes
from dynlab.errors import ConfigError


def test_worker_processes_return_each_tasks_own_result():
    tasks = [(b, e) for b in (2, 3, 7) for e in (5, 11)]
    expected = [b**e for b, e in tasks]  # the truth, by Python's integers
    alone = dict(processes.completed(operator.pow, tasks, workers=1))
    assert [alone[i] for i in range(len(tasks))] == expected
    pooled = dict(processes.completed(operator.pow, tasks, workers=2))
    assert [pooled[i] for i in range(len(tasks))] == expected


def test_a_failing_task_raises_in_the_caller():
    with pytest.raises(ZeroDivisionError):
        list(processes.completed(operator.truediv, [(1, 1), (1, 0), (2, 1)], workers=2))


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_worker_counts_are_config_errors(workers):
    with pytest.raises(ConfigError, match="workers"):
        list(processes.completed(operator.pow, [(2, 3)], workers))
