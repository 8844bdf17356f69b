"""The distributions the statistics rest on, computed here: Student's t (its two-sided 95% quantile, its
distribution function and any quantile) and the chi-square quantiles a measured floor needs. Enough of them for
a campaign's intervals and bounds, without SciPy for a handful of functions."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

__all__ = ["chi2_quantile", "t975", "t_cdf", "t_quantile"]


_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
"""Student's t, 97.5th percentile, by degrees of freedom (two-sided 95%)."""


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval with `df` degrees of freedom."""
    if df in _T975:
        return _T975[df]
    # Beyond 10 degrees of freedom a two-term expansion around the normal quantile is within 0.2%.
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"t_cdf: df must be >= 1, got {df}")
    if x == 0:
        return 0.5
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + x * x))
    return 1.0 - tail if x > 0 else tail


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: int) -> float:
    """The `p` quantile of Student's t with `df` degrees of freedom (bisection on `t_cdf`, to 1e-10)."""
    if not 0 < p < 1:
        raise ValueError(f"t_quantile: p must lie in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2
    return _bisect(lambda x: t_cdf(x, df), p, low, high)


def _bisect(cdf: Callable[[float], float], p: float, low: float, high: float) -> float:
    """Where the increasing `cdf` reaches `p` between `low` and `high`, to a relative 1e-10."""
    for _ in range(200):
        middle = (low + high) / 2
        if cdf(middle) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-10 * max(1.0, high):
            break
    return (low + high) / 2


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), by its continued fraction (modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)  # the fraction converges fast on this side only
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * value / a


@functools.lru_cache(maxsize=1024)
def chi2_quantile(p: float, df: float) -> float:
    """The `p` quantile of the chi-square distribution with `df` (> 0, not necessarily whole) degrees of freedom, for
    `p` below 0.5 (bisection on its distribution function, to 1e-10)."""
    if not 0 < p < 0.5 or df <= 0:
        raise ValueError(f"chi2_quantile: p must lie in (0, 0.5) and df be > 0, got p={p}, df={df}")
    # The median lies below the mean, df: a quantile under one half does too.
    return _bisect(lambda x: _lower_gamma(df / 2, x / 2), p, 0.0, df)


def _lower_gamma(a: float, x: float) -> float:
    """The regularised lower incomplete gamma function P(a, x) for x <= a + 1, by its series (which converges there)."""
    if x <= 0:
        return 0.0
    term = total = 1.0 / a
    n = 0
    while abs(term) > 1e-16 * abs(total) and n < 10_000:
        n += 1
        term *= x / (a + n)
        total += term
    return min(1.0, total * math.exp(a * math.log(x) - x - math.lgamma(a)))
