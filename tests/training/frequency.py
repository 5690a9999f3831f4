"""Draw frequencies against stated probabilities: the chi-square the sampler tests share."""

from __future__ import annotations

import numpy as np
from scipy.stats import chisquare


def chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square p-value of `counts` against `probs`, bins expected below 5 merged."""
    expected = probs * counts.sum()
    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    for i in np.argsort(expected):
        acc_o, acc_e = acc_o + counts[i], acc_e + expected[i]
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    obs[-1] += acc_o
    exp[-1] += acc_e
    return float(chisquare(np.array(obs), np.array(exp) * sum(obs) / sum(exp)).pvalue)
