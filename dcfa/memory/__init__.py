"""How much memory a dense pass will hold, known before it starts, and the budget it must fit.

The dense execution of every estimator (and :func:`dcfa.moments`) builds ``p x p`` float64 matrices,
``p = D + k`` (features and targets): 26.8 GiB each for ``D = 60 000``. Such a pass grows until
the kernel, the batch system or the nanny kills the process. So before it starts,
:func:`check_dense` adds up what the pass will hold at its peak from the shapes only
(the matrices, their copies and temporaries, per-fold moments, the tiles in flight) and raises
:class:`MemoryBudgetError` when that exceeds the budget. Nothing is computed first.

Where the bytes are (see :mod:`dcfa.stats.graph` and :mod:`dcfa._compute`):

driver
    the result: per row segment, the upper tiles of the matrix as they come (the estimators'
    dense fits on Dask input, :class:`dcfa.stats.symmetric.SymmetricTiles`, about half of it),
    or the assembled matrix (all of them plus their blocks while ``dask.compute``
    concatenates); then what the fit adds (NonLinCFA: all rows merged tile by tile, the fitted
    ``moments_``, counted although the merge is built only when ``moments_`` is first read, as
    the batch job does; its folds' training sets are merged row by row as the partition reads
    them, never as matrices; pairwise statistics: the correlations; the greedy variant's
    copies). NumPy input: also the in-memory copies of the data. Under the local (threaded)
    scheduler the tile tasks run here too, and the input's chunks are held here. These are
    live arrays: the resident size can be higher where the C allocator keeps freed tiles in
    its heap (README, "Dense mode memory").
workers (a ``distributed.Client`` is active)
    the tile tasks: one task holds a tile ``w x w`` of the widest feature chunk ``w``, the tree
    merges hold ``split_every`` of them. Each worker runs ``nthreads`` such tasks at once.

The budget is the Dask config key ``dcfa.memory_budget`` (default 0.5):

- a fraction in (0, 1]: of the memory available to this process (the machine's available
  memory, capped by a cgroup or rlimit such as a batch job's allocation) for the driver, and
  of each worker's ``memory_limit`` for the workers;
- bytes (int) or a size string (``"64GiB"``): the driver's budget; a worker's budget is that
  capped by its ``memory_limit``.

Raise it with ``dask.config.set({"dcfa.memory_budget": "64GiB"})``, the environment variable
``DASK_DCFA__MEMORY_BUDGET=64GiB``, or a Dask YAML config file.

The code is in three modules: :mod:`dcfa.memory.budget` (the budget: the config key, what this
process and each worker may use), :mod:`dcfa.memory.estimate` (what a dense pass holds, from
the shapes) and :mod:`dcfa.memory.check` (the two compared; :class:`MemoryBudgetError`).
"""

from dcfa.memory.budget import CONFIG_KEY, DEFAULT_BUDGET, Budget, memory_budget
from dcfa.memory.check import MemoryBudgetError, check_dense, check_moments
from dcfa.memory.check import gib as gib  # dcfa.cfa.executions formats sizes with it
from dcfa.memory.estimate import DenseEstimate, estimate_dense, estimate_moments
from dcfa.stats.moments import use_budget_check

# dcfa.moments checks its pass with check_moments; the statistics engine lies below this
# package and cannot import it, so the check is handed down here (README, "Layout")
use_budget_check(check_moments)

__all__ = [
    "CONFIG_KEY",
    "DEFAULT_BUDGET",
    "Budget",
    "DenseEstimate",
    "MemoryBudgetError",
    "check_dense",
    "check_moments",
    "estimate_dense",
    "estimate_moments",
    "memory_budget",
]
