"""The weak learners a GBMAP fit has kept so far: one row of parameters per boosting step.

Learner ``j`` is ``f_j(z) = a_j + b_j g(w_j . z + c_j)`` on the standardised features
(:mod:`dcfa.gbmap._losses`); a fit appends one learner per step, a checkpoint stores them
(:mod:`dcfa.gbmap._checkpoint`), the holders of the rows add their outputs to the ensemble
score (:mod:`dcfa.gbmap._rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcfa.gbmap._losses import learner_outputs

__all__ = ["Learners", "boost_labels"]


def boost_labels(m: int) -> np.ndarray:
    """The labels of ``m`` learners in an output's ``boost`` dim: 1 to m, as ``f_1 ... f_m``."""
    return np.arange(1, m + 1)


@dataclass
class Learners:
    """The weak learners fitted so far (row ``j`` = step ``j + 1``)."""

    intercept: np.ndarray  # (k,)  a_j
    coef: np.ndarray  # (k, p) w_j on the standardised features
    bias: np.ndarray  # (k,)  c_j, weight of the intercept column
    sign: np.ndarray  # (k,)  b_j
    train_loss: np.ndarray  # (k,)  unpenalised mean training loss after step j
    n_iter: np.ndarray  # (k,)  L-BFGS iterations of step j (all signs and restarts)
    n_evals: np.ndarray  # (k,)  objective evaluations of step j, summed over its runs

    @classmethod
    def empty(cls, p: int) -> Learners:
        return cls(
            intercept=np.zeros(0),
            coef=np.zeros((0, p)),
            bias=np.zeros(0),
            sign=np.zeros(0),
            train_loss=np.zeros(0),
            n_iter=np.zeros(0, dtype=np.int64),
            n_evals=np.zeros(0, dtype=np.int64),
        )

    def __len__(self) -> int:
        return int(self.intercept.shape[0])

    def append(self, theta: np.ndarray, sign: float, loss: float, n_iter: int, n_evals: int):
        return Learners(
            intercept=np.append(self.intercept, theta[0]),
            coef=np.vstack([self.coef, theta[1:-1][None, :]]),
            bias=np.append(self.bias, theta[-1]),
            sign=np.append(self.sign, sign),
            train_loss=np.append(self.train_loss, loss),
            n_iter=np.append(self.n_iter, n_iter),
            n_evals=np.append(self.n_evals, n_evals),
        )

    def head(self, k: int) -> Learners:
        return Learners(**{name: value[:k] for name, value in self.as_dict().items()})

    def as_dict(self) -> dict[str, np.ndarray]:
        return {
            "intercept": self.intercept,
            "coef": self.coef,
            "bias": self.bias,
            "sign": self.sign,
            "train_loss": self.train_loss,
            "n_iter": self.n_iter,
            "n_evals": self.n_evals,
        }

    def outputs(self, Z: np.ndarray, beta: float, activation: str) -> np.ndarray:
        """``(n_c, k)`` outputs of all learners on standardised rows."""
        return learner_outputs(Z, self.intercept, self.coef, self.bias, self.sign, beta, activation)

    def last(self, j: int) -> tuple:
        """Parameters of learner ``j`` as length-1 arrays (for ``learner_output``)."""
        s = slice(j, j + 1)
        return self.intercept[s], self.coef[s], self.bias[s], self.sign[s]
