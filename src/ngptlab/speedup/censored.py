"""The mean of a log quantity over seeds when some seeds give only a bound on it (censored observations).

Per seed an observation of y (ln S, or a difference of them) is exact, or censored: an Estimate with bound
">" says y >= value (the arm beat the target already at its smallest budget, ln S >= ln(reference /
smallest budget)), "<" that y <= value (it never reached the target). Dropping censored seeds, or calling
a mean over them a bound, throws away exactly the seeds that lie far from the rest; instead:

Model: y_s ~ Normal(mu, sigma^2), independent over seeds. Log-likelihood (the Tobit likelihood):
  l(mu, sigma) = sum_exact ln phi((y - mu) / sigma) - ln sigma + sum_{y >= c} ln Phi((mu - c) / sigma)
                 + sum_{y <= c} ln Phi((c - mu) / sigma),
maximized over (mu, sigma) (scipy.optimize); mu_hat is the estimate, value exp(mu_hat) on the S scale.

Interval for mu by the profile likelihood l_p(mu) = max_sigma l(mu, sigma), LR(mu) = 2 (l(mu_hat) - l_p(mu)).
Without censoring LR(mu) = n ln(1 + t(mu)^2 / (n - 1)), t(mu) the one-sample t statistic, so the cutoff
  LR(mu) <= n ln(1 + t_{(1+level)/2, n-1}^2 / (n - 1))     (n: every seed used, censored included)
gives exactly the t-interval there, and a calibrated profile interval with censoring. Likewise a one-sided
test of mu0 converts LR(mu0) back to a t-equivalent, t = sign(mu_hat - mu0) sqrt((n - 1)(exp(LR / n) - 1)),
with p from Student t at n - 1 df (scipy.stats.t): the paired t-test's p-values without censoring, and the
claim p-values of the symmetric rule (speedup/equivalence.py) with it.

It needs two seeds and an exact value (every seed a bound: no estimate, and the estimator's bound rule
stands); with every exact value equal and no bound beyond it the likelihood has no maximum (sigma -> 0): no
estimate either. Where the profile does not fall to the cutoff within PROFILE_REACH sigmas on a side, that
end of the interval is infinite: such an interval gives no verdict ("not resolved"), never a direction from
bounds alone.
Coverage of the 95% interval on planted N(0, 1) samples (tests/test_speedup_censored.py): 0.951 at 6 seeds
with 30% censored above (2000 samples), 0.955 with 15% on each side, 0.936 at 3 seeds (the 2.8% of samples
without an estimate counted as misses), 0.957 at 10.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from ngptlab.speedup.equivalence import NO_INTERVAL, NOT_RESOLVED
from ngptlab.speedup.estimate import FLIP, Estimate
from ngptlab.stats import LEVEL, t_quantile

METHOD = "censored-normal profile likelihood, calibrated to the t-interval (equal to it without censoring)"
PROFILE_REACH = 1e3  # how many sigmas from mu_hat the interval's ends are sought before calling a side open
# Brent's relative tolerance in the argument of a maximum: the maximum's value is then exact to ~ its square
PROFILE_TOL = 1e-7
NEWTON_STEPS = 50  # in ln sigma per profile point; from a good start it takes 3-6
LOG_PHI_0 = float(stats.norm.logpdf(0.0))  # ln phi(0): ln phi(z) = ln phi(0) - z^2 / 2


@dataclass(frozen=True)
class CensoredMean:
    """The fit of the module docstring: n seeds (n_censored of them bounds), mean mu_hat and sd (the ML
    sigma scaled by sqrt(n / (n - 1)), the sample sd without censoring), interval [lo, hi] on mu at level
    (an end infinite where the data do not bound it), or mean None with note saying why."""

    n: int
    n_censored: int
    mean: float | None
    sd: float | None
    interval: list[float] | None
    level: float
    note: str | None
    t_at: Callable[[float], float] | None  # the t-equivalent statistic of the one-sided test of mu0

    @property
    def df(self) -> int:
        return self.n - 1

    @property
    def bounded(self) -> bool:
        """Both ends of the interval finite: only such an interval gives a verdict."""
        return self.interval is not None and all(math.isfinite(x) for x in self.interval)

    def verdict(self, rule: Callable[[Sequence[float] | None], str]) -> str:
        """rule(interval) on a bounded interval; else not resolved, "(no interval)" without an estimate."""
        if self.bounded:
            return rule(self.interval)
        return NO_INTERVAL if self.mean is None else NOT_RESOLVED

    def describe(self) -> str:
        """How the seeds entered, and why there is no verdict where there is none."""
        used = f"{self.n_censored} of {self.n} seeds are bounds (censored), used as such in the likelihood"
        return f"{used}; {self.note}: no verdict" if self.note else used


class _Tobit:
    """The log-likelihood of the module docstring over exact values and bounds, and its profile in mu."""

    def __init__(self, observations: Sequence[Estimate]) -> None:
        self.exact = np.array([o.value for o in observations if o.bound is None], dtype=np.float64)
        bounds = [o for o in observations if o.bound is not None]
        self.edge = np.array([o.value for o in bounds], dtype=np.float64)
        self.sign = np.array([1.0 if o.bound == ">" else -1.0 for o in bounds])  # +1: y >= c, -1: y <= c
        self.scale = float(np.std(np.concatenate([self.exact, self.edge]))) or 1.0
        self.floor = math.log(self.scale) - 12 * math.log(10)  # ln sigma down to 1e-12 of the spread
        self.last: float | None = None  # ln sigma of the last profile point: the next one starts there

    def degenerate(self) -> bool:
        """Every exact value equal and no bound beyond it: the likelihood grows without end as sigma -> 0."""
        v = self.exact[0]
        return bool(np.ptp(self.exact) == 0 and not np.any(self.sign * (self.edge - v) > 0))

    def loglik(self, mu: float, log_sigma: float) -> tuple[float, float, float]:
        """l(mu, sigma) and its first two derivatives in ln sigma (Newton's method in `profile`)."""
        inv = math.exp(-2.0 * log_sigma)
        squares = float(((self.exact - mu) ** 2).sum())
        w = self.sign * (mu - self.edge) * math.sqrt(inv)
        # scipy.special.log_ndtr is what scipy.stats.norm.logcdf / logsf evaluate, without their per-call
        # checks (40 us against 0.4): the profile evaluates it some thousands of times.
        log_cdf = special.log_ndtr(w)
        mills = np.exp(LOG_PHI_0 - w * w / 2 - log_cdf)  # phi / Phi: d ln Phi(w) / d ln sigma = -w mills
        value = self.exact.size * (LOG_PHI_0 - log_sigma) - squares * inv / 2 + float(log_cdf.sum())
        first = squares * inv - self.exact.size - float((w * mills).sum())
        second = -2.0 * squares * inv + float((w * mills * (1.0 - w * (w + mills))).sum())
        return value, first, second

    def profile(self, mu: float) -> tuple[float, float]:
        """(l_p(mu), its ln sigma): Newton from the last maximum (the exact values' own at first), Brent
        where the curvature is not negative."""
        if self.last is None:
            squares = float(np.mean((self.exact - mu) ** 2))
            self.last = max(0.5 * math.log(squares), self.floor) if squares > 0 else self.floor
        log_sigma = self.last
        for _ in range(NEWTON_STEPS):
            value, first, second = self.loglik(mu, log_sigma)
            if not second < 0:
                break
            step = max(-1.0, min(1.0, first / second))
            if abs(step) < 1e-9:  # the value is then exact to ~ second * step^2
                self.last = log_sigma
                return value, log_sigma
            log_sigma -= step
        best = optimize.minimize_scalar(lambda s: -self.loglik(mu, s)[0],
                                        bracket=(log_sigma - 0.5, log_sigma + 0.5), tol=PROFILE_TOL)
        return -float(best.fun), float(best.x)


def censored_mean(observations: Sequence[Estimate], level: float = LEVEL) -> CensoredMean:
    """mu_hat, the calibrated profile interval and the t-equivalent test of the module docstring."""
    n, n_censored = len(observations), sum(o.bound is not None for o in observations)

    def fail(note: str) -> CensoredMean:
        return CensoredMean(n, n_censored, None, None, None, level, note, None)

    if n < 2:
        return fail("needs 2 seeds to measure the noise")
    if n_censored == n:
        return fail("every seed is a bound: no exact value to place the mean")
    model = _Tobit(observations)
    if model.degenerate():
        return fail("every exact value is equal and no bound lies beyond it: the seed noise is not measured")
    # mu_hat: the profile's maximum (one: the Tobit likelihood is concave in Olsen's parametrisation)
    centre = float(np.mean(model.exact))
    try:
        fit = optimize.minimize_scalar(lambda m: -model.profile(m)[0],
                                       bracket=(centre - model.scale, centre + model.scale), tol=PROFILE_TOL)
    except (ValueError, RuntimeError):
        fit = None
    if fit is None or not math.isfinite(fit.x) or abs(fit.x - centre) > PROFILE_REACH * model.scale:
        return fail("the likelihood has no maximum: the bounds leave the mean free")
    mu_hat = float(fit.x)
    top, log_sigma = model.profile(mu_hat)
    sigma_hat = math.exp(log_sigma)

    def lr(mu: float) -> float:
        return max(0.0, 2.0 * (top - model.profile(mu)[0]))

    cutoff = n * math.log1p(t_quantile(level, n - 1) ** 2 / (n - 1))

    def end(direction: float) -> float:
        """Where LR reaches the cutoff on one side of mu_hat; infinite when not within reach."""
        step, inner = sigma_hat / math.sqrt(n), mu_hat
        while step < PROFILE_REACH * max(sigma_hat, model.scale):
            outer = mu_hat + direction * step
            if lr(outer) >= cutoff:
                return float(optimize.brentq(lambda m: lr(m) - cutoff, inner, outer, xtol=1e-13, rtol=1e-13))
            inner, step = outer, step * 2
        return direction * math.inf

    def t_at(mu0: float) -> float:
        return math.copysign(math.sqrt((n - 1) * math.expm1(lr(mu0) / n)), mu_hat - mu0)

    interval = sorted([end(-1.0), end(1.0)])
    note = None if all(math.isfinite(x) for x in interval) else "the data bound the mean on one side only"
    return CensoredMean(n, n_censored, mu_hat, sigma_hat * math.sqrt(n / (n - 1)), interval, level, note,
                        t_at)


def weighted_sum(terms: Sequence[tuple[float, Estimate]]) -> Estimate | None:
    """sum of weight * y over (weight, observation of y): exact when every term is; a bound with a positive
    weight bounds the sum in its direction, with a negative weight in the opposite one (a ">" on S_b is a
    "<" on ln S_a - ln S_b); None when two terms bound it in opposite directions: the sum is then anything,
    and the seed carries no information."""
    directions = {o.bound if w > 0 else FLIP[o.bound] for w, o in terms if w != 0} - {None}
    if len(directions) > 1:
        return None
    return Estimate(sum(w * o.value for w, o in terms), directions.pop() if directions else None)


def log_of(estimate: Estimate) -> Estimate:
    """ln of a positive estimate, its bound kept (ln is increasing)."""
    return Estimate(math.log(estimate.value), estimate.bound)
