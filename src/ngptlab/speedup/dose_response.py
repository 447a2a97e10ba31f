"""Each account read as a prediction from measured mechanisms: the speed-up against each arm's measured kappa
and angle per step (a dose-response across arms).

An account of nGPT's speed-up is a claim about a mechanism, so what it predicts for an arm follows from that
arm's measured mechanism, not from its label: the conditioning account from how well conditioned the arm's
matrices ended up, the effective-learning-rate account from how far they turned per step. (Read by labels,
gpt-angle would be predicted as slow as gpt under the conditioning account; where it ends up conditioned like
ngpt, the true account would then read inconsistent.) The cell's reading of both accounts is this one
wherever a line is fitted (speedup/reading.py: source "measured"), the label pattern only where not.

Points, per (arm, seed) over the estimate seeds (speedup/selection.py), from the run entering that seed's
estimate at the arm's largest budget (rivals.estimate_runs, as the rival account reads them):
  y        = ln S, the seed's speed-up over the baseline (0 for the baseline itself, by definition); a seed
             whose S is a bound has no y and is left out (a bound is no number)
  x_kappa  = ln kappa, the median of the layer 3-4 Q and K head medians, read at the cell's common token
             count T_common, the same for every arm (speedup/common_kappa.py: an arm's estimate run ends at
             its own budget, and kappa moves with tokens)
  x_angle  = ln angular rate, its mean over training and the attention and MLP kinds (rivals.angular_rate)
The whole-matrix kappa of every kind is not in a run's metrics (observe/tracked.py records only the paper's
head and embedding kappas), so there is no second kappa predictor.
Per arm the means over its seeds, ybar_a and xbar_a: each arm one point, so an arm with more seeds does not
weigh more. Each account's line passes through the baseline, where y = 0:
  Y_a = ybar_a,  X_a = xbar_a - xbar_baseline,  Y_a = b X_a,  b = sum_a X_a Y_a / sum_a X_a^2
(least squares through the origin over the fitted arms' means, unweighted). The conditioning account
predicts b_kappa < 0 (S rises as kappa falls), the effective-learning-rate account b_angle > 0, each with
ngpt on its line. An arm's residual r_a = Y_a - b X_a: its ln S against the line's prediction.

Intervals: x is measured with noise as y is, so both come from one bootstrap that resamples seeds within each
arm, x and y of a seed together, the baseline's seeds included (its x moves every X). A plain bootstrap of a
mean over 2-4 seeds is too narrow (its variance s^2 (n - 1) / n^2, and a normal where the sd is estimated),
so each resampled arm mean is m + w (m* - m), w = sqrt(n / (n - 1)) t_{(1+level)/2, df} / z_{(1+level)/2},
df = the seeds' degrees of freedom pooled over the fit's arms (sum of n_a - 1). RESAMPLES draws from
speedup.seed; the slope's and each residual's level percentile interval over the same draws, the residual's
carrying the arm's own seeds, the baseline's and the slope's. Measured coverage at 95% on a planted line
(5 arms x 4 seeds, ln kappa sd 0.15 and ln S sd 0.1 per seed; 200 draws, tests/test_dose_response.py): the
slope 0.96, ngpt's residual 0.905 (w = sqrt(n / (n - 1)) alone: 0.94 and 0.88; with the per-arm t_{n-1},
0.995 and 0.995).

Rules, per account, with M the equivalence margin (speedup.equivalence_margin) and ln M the band:
  an arm on the line       its residual's interval lies inside (-ln M, ln M)
  an arm departs           its residual's interval lies wholly outside it (above or below)
  else                     the arm is not resolved (an interval across an edge)
  two kinds of arm carry a handicap of their own that can only slow them, which the conditioning account does
  not speak to, so the kappa line is first fitted without them, then each is read against it (said in
  `excluded` where it is left out; otherwise it is fitted with the rest):
    gpt-orth (kappa = 1 by construction)   left out where its interval lies wholly below the band: "kappa = 1
                                           costs capacity", not "conditioning does not help" (a claim, so
                                           the interval must show it)
    an angle arm whose tuned multiplier    left out wherever it is not shown on or above the line: "off its
    is not 1 (tuned_multiplier.py)         optimum". Its primary estimate runs at multiplier 1 (the angle
                                           line's manipulation), away from the learning rate its own sweep
                                           prefers (a fact of the run, not a claim), while the conditioning
                                           account predicts an arm's speed at its best learning rate; where
                                           multiplier 1 is the tuned choice the arm is read as any other. The
                                           optimum falls with the budget (Bjorck et al. 2024), so gpt-angle,
                                           matched at ngpt's early crossing, crosses later at twice its own
                                           optimum where nGPT is much faster
  An arm above the line stays a departure: a handicap cannot make an arm faster.
The account's reading, in this order:
  no fit                   fewer than MIN_ARMS arms (the baseline included) with the predictor measured
  inconsistent             an arm departs (named), or the slope's interval lies wholly on the wrong side of 0
  cannot tell apart        the arms' kappa and angle move together, so neither line says more than the other:
                           |Pearson r| of X_kappa and X_angle over the arms' means above COLLINEAR, or both
                           lines' predictions within ln M of each other for every arm; the reason names the
                           arms and how far one would have to move its kappa without its angle
  consistent               the slope's interval excludes 0 on the predicted side, every arm, ngpt among
                           them, is on the line, and the line predicts at least MIN_MOVED fitted arms beyond
                           the margin from the baseline (|b X_a| > ln M): elsewhere "on the line" and "as fast
                           as the baseline" are one claim, and a line through the baseline and one arm fits
                           that arm whatever the account, so it tests nothing (on the 2x2 alone ngpt is the
                           only arm whose angle moves)
  not resolved             otherwise (and where an arm has one seed: no interval)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ngptlab.models import arms as arm_table
from ngptlab.results import RunResult
from ngptlab.speedup.common_kappa import HEADS, by_seed
from ngptlab.speedup.equivalence import NOT_RESOLVED, interval_claim
from ngptlab.speedup.reading import CANNOT_TELL, CAPACITY, CONDITIONING, EFFECTIVE_LR, NO_FIT
from ngptlab.speedup.rivals import angular_rate, estimate_runs
from ngptlab.stats import LEVEL, t_quantile

RESAMPLES = 2000
MIN_ARMS = 3  # the baseline and two arms: a line through the baseline and something to test it on
MIN_MOVED = 2  # fitted arms the line predicts beyond the margin from the baseline, for a line that can fail
COLLINEAR = 0.95  # |Pearson r| of the arms' X_kappa and X_angle above which the accounts cannot be told apart
ORTH, NGPT = arm_table.square("conditioning")["01"], arm_table.square("conditioning")["11"]
CONSISTENT, INCONSISTENT = "consistent", "inconsistent"
ON_LINE, DEPARTS = "on the line", "departs"
OFF_OPTIMUM = "off its optimum"  # an angle arm below the kappa line at multiplier 1, tuned elsewhere
METHOD = ("least squares through the baseline over arm means (each arm one point, unweighted); percentile "
          "bootstrap resampling seeds within each arm, x and y together, the baseline's included, each "
          "resampled mean's deviation scaled by sqrt(n / (n - 1))")


@dataclass(frozen=True)
class Predictor:
    """What an account says the speed-up follows: the point's key, its words and the slope's sign."""

    account: str
    claim: str
    key: str  # the point's field
    label: str
    sign: int  # the slope the account predicts: -1 (S rises as x falls) or +1


PREDICTORS = (Predictor(CONDITIONING.name, CONDITIONING.claim, "x_kappa",
                        "ln kappa (layer 3-4 Q and K heads)", -1),
              Predictor(EFFECTIVE_LR.name, EFFECTIVE_LR.claim, "x_angle", "ln angular rate (rad / step)", +1))


@dataclass(frozen=True)
class Handicap:
    """Why an arm can only run slower than the kappa line predicts, and whether its status claims that:
    shown, the arm is left out only where its interval lies wholly below the band (the status is a claim
    the interval must carry); not shown, wherever it is not shown on or above the line (the status is a fact
    of the arm's construction, and a handicap explains any shortfall)."""

    status: str
    why: str
    shown: bool


def rule(margin: float, level: float = LEVEL) -> str:
    band = f"(-ln {margin:g}, ln {margin:g})"
    return (f"each account's line ln S = b (x - x_baseline) through the baseline, fitted to the arms' means "
            "over seeds (every arm's ln kappa read at the cell's common token count, kappa_common); "
            f"{level:.0%} percentile bootstrap intervals ({RESAMPLES} draws resampling seeds "
            f"within each arm, x and y together); an arm is on the line when its residual's interval lies "
            f"inside {band}, departs when it lies wholly outside; the conditioning account (b < 0) or the "
            "effective-learning-rate account (b > 0) is consistent when its slope's interval excludes 0 on "
            "that side and every arm, ngpt among them, is on its line, inconsistent when an arm departs or "
            "the slope is shown of the other sign; the accounts cannot be told apart when the arms' ln "
            f"kappa and ln angle have |r| > {COLLINEAR:g} or both lines predict every arm within "
            f"x{margin:g} of each other; gpt-orth below the kappa line (fitted without it) beyond "
            f"x{margin:g} reads \"{CAPACITY}\", an angle arm whose tuned multiplier is not 1 not shown on "
            f"or above it \"{OFF_OPTIMUM}\", each then left out of the line; fewer than {MIN_ARMS} arms with "
            "the predictor: no fit")


def _log(value: float | None) -> float | None:
    return math.log(value) if value is not None and 0 < value < math.inf else None


def points(results: Iterable[RunResult], estimate: Mapping, common: Mapping) -> list[dict]:
    """[{arm, seed, y, x_kappa, x_angle}] over the estimate seeds (module docstring), kappa from the cell's
    common_kappa document; a predictor not measured in the seed's run is None, a seed whose speed-up is a
    bound (or missing) is left out."""
    runs_of = estimate_runs(results, estimate)
    baseline, seeds = estimate["baseline"], set(estimate["lr_policy"]["estimate_seeds"])
    out = []
    for arm, entry in estimate["arms"].items():
        runs, kappas = runs_of(arm), by_seed(common, arm, HEADS)
        for p in entry["per_seed"]:
            s, speedup = p["seed"], p["speedup"]
            if s not in seeds or s not in runs:
                continue
            if arm == baseline:
                y = 0.0  # by definition: the baseline's own speed-up is 1
            elif speedup["bound"] is None and speedup["value"] is not None and speedup["value"] > 0:
                y = math.log(speedup["value"])
            else:
                continue
            run = runs[s]
            out.append({"arm": arm, "seed": s, "y": y, "x_kappa": _log(kappas.get(s)),
                        "x_angle": _log(angular_rate(run))})
    return out


def _interval(draws: np.ndarray, level: float) -> list[float] | None:
    """The level percentile interval of bootstrap draws; None where a draw is undefined (nan)."""
    if draws.size == 0 or not np.all(np.isfinite(draws)):
        return None
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def widening(n: int, df: int, level: float = LEVEL) -> float:
    """The factor on a resampled mean's deviation (module docstring): sqrt(n / (n - 1)) for the variance,
    t_{(1+level)/2, df} / z_{(1+level)/2} for the seed sd the draws estimate (df pooled over the arms)."""
    return math.sqrt(n / (n - 1)) * t_quantile(level, df) / float(stats.norm.ppf((1 + level) / 2))


def _resampled_means(values: np.ndarray, resamples: int, rng: np.random.Generator, df: int, level: float
                     ) -> np.ndarray:
    """(resamples, columns) arm means of the seeds' rows (x and y of a seed together), each deviation from
    the mean widened (widening); n = 1 gives the mean itself every draw."""
    n = len(values)
    mean = values.mean(axis=0)
    if n < 2:
        return np.broadcast_to(mean, (resamples, values.shape[1])).copy()
    picks = rng.integers(0, n, size=(resamples, n))
    return mean + widening(n, df, level) * (values[picks].mean(axis=1) - mean)


def _status(interval: list[float] | None, margin: float) -> str:
    if interval is None:
        return NOT_RESOLVED
    claim = interval_claim(interval, margin)
    if claim is None:
        return NOT_RESOLVED
    return ON_LINE if claim == "equivalent" else DEPARTS


def _slope(X: np.ndarray, Y: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """b = sum X Y / sum X^2 over the fitted arms (last axis); nan where every fitted X is 0."""
    sxx = (X[..., fitted] ** 2).sum(axis=-1)
    sxy = (X[..., fitted] * Y[..., fitted]).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), np.nan)


def fit_account(pts: Sequence[Mapping], predictor: Predictor, baseline: str, margin: float,
                level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0,
                handicaps: Mapping[str, Handicap] | None = None) -> dict:
    """One account's line (module docstring): {account, claim, predictor, predicted_sign, n_arms, slope
    {estimate, interval}, fitted_arms, excluded [{arm, reason}], arms {arm: {n_seeds, x {mean, interval},
    y {mean, interval}, prediction, residual {mean, interval}, status}}, note}; read_account reads it."""
    out = {"account": predictor.account, "claim": predictor.claim, "predictor": predictor.label,
           "predicted_sign": "negative" if predictor.sign < 0 else "positive", "n_arms": 0,
           "slope": {"estimate": None, "interval": None}, "fitted_arms": [], "excluded": [], "arms": {},
           "note": None}
    rows: dict[str, list[tuple[float, float]]] = {}
    for p in pts:
        if p[predictor.key] is not None:
            rows.setdefault(p["arm"], []).append((p[predictor.key], p["y"]))
    arms = [baseline, *sorted(a for a in rows if a != baseline)] if baseline in rows else sorted(rows)
    out["n_arms"] = len(arms)
    if baseline not in rows or len(arms) < MIN_ARMS:
        out["note"] = (f"{len(arms)} arm(s) with {predictor.label} measured"
                       f"{'' if baseline in rows else f', {baseline} (the baseline) not among them'}: a line "
                       f"needs the baseline and at least {MIN_ARMS - 1} more")
        return out
    rng = np.random.default_rng(seed)
    values = {a: np.array(rows[a], dtype=float) for a in arms}
    means = np.array([values[a].mean(axis=0) for a in arms])  # (arms, 2): x, y
    df = max(sum(len(v) - 1 for v in values.values()), 1)  # the seed sd's degrees of freedom, pooled
    draws = np.stack([_resampled_means(values[a], resamples, rng, df, level) for a in arms], axis=1)
    X, Y = means[:, 0] - means[0, 0], means[:, 1]
    Xb, Yb = draws[..., 0] - draws[:, :1, 0], draws[..., 1]
    one_seed = [a for a in arms if len(values[a]) < 2]

    def fit(fitted: np.ndarray) -> tuple[float, np.ndarray]:
        return float(_slope(X, Y, fitted)), _slope(Xb, Yb, fitted)

    def spread(column: np.ndarray) -> list[float] | None:
        return None if one_seed else _interval(column, level)

    def residual(index: int, b: float, bb: np.ndarray) -> tuple[float, list[float] | None]:
        r = Y[index] - b * X[index]
        return r, spread(Yb[:, index] - bb * Xb[:, index])

    fitted = np.array([a != baseline for a in arms])
    left_out: dict[str, str] = {}  # the arms left out of the line for a handicap of their own: {arm: status}
    held = {a: h for a, h in (handicaps or {}).items() if a in arms and a != baseline}
    if held and fitted.sum() > len(held):
        # each handicapped arm is read against the line of the others first
        b, bb = fit(fitted & np.array([a not in held for a in arms]))
        band = math.log(margin)
        for a, handicap in held.items():
            r, interval = residual(arms.index(a), b, bb)
            if not math.isfinite(b) or interval is None:
                continue
            shown_below = interval[1] < -band
            if shown_below or (not handicap.shown and interval[0] <= -band and interval[1] < band):
                left_out[a] = handicap.status
                where = (f"lies below the line fitted without it beyond x{margin:g}" if shown_below else
                         f"is not shown on or above the line fitted without it (within x{margin:g})")
                out["excluded"].append({"arm": a, "reason": (
                    f"{handicap.status}: {a} {where} "
                    f"(x{math.exp(r):.3g} [{math.exp(interval[0]):.3g}, {math.exp(interval[1]):.3g}] of its "
                    f"prediction; {handicap.why}), so the line is fitted without it")})
        fitted = fitted & np.array([a not in left_out for a in arms])
    b, bb = fit(fitted)
    if not math.isfinite(b):
        out["note"] = f"every fitted arm has the baseline's {predictor.label}: no slope"
        return out
    out["slope"] = {"estimate": b, "interval": None if one_seed else _interval(bb, level)}
    out["fitted_arms"] = [a for a, f in zip(arms, fitted, strict=True) if f]
    for i, a in enumerate(arms):
        r, interval = residual(i, b, bb)
        status = left_out.get(a) or _status(interval, margin)
        out["arms"][a] = {"n_seeds": len(values[a]),
                          "x": {"mean": float(X[i]), "interval": spread(Xb[:, i])},
                          "y": {"mean": float(Y[i]), "interval": spread(Yb[:, i])},
                          "prediction": b * float(X[i]), "residual": {"mean": r, "interval": interval},
                          "status": "baseline" if a == baseline else status}
    if one_seed:
        out["note"] = f"one seed ({', '.join(one_seed)}): no interval"
    return out


def distinguishable(fits: Mapping[str, Mapping], margin: float) -> dict:
    """{verdict (bool), r, max_gap {arm, ln}, reason}: whether the arms' measured kappa and angle can tell the
    two accounts apart (module docstring); verdict None where a line is missing."""
    kap, ang = (fits[p.account] for p in PREDICTORS)
    out = {"verdict": None, "r": None, "threshold": COLLINEAR, "max_gap": None, "reason": None}
    both = [a for a in kap["arms"] if a in ang["arms"]]
    if kap["slope"]["estimate"] is None or ang["slope"]["estimate"] is None or len(both) < MIN_ARMS:
        out["reason"] = "not both lines fitted over the same arms"
        return out
    xk = np.array([kap["arms"][a]["x"]["mean"] for a in both])
    xa = np.array([ang["arms"][a]["x"]["mean"] for a in both])
    r = float(np.corrcoef(xk, xa)[0, 1]) if xk.std() > 0 and xa.std() > 0 else 1.0
    gaps = {a: kap["arms"][a]["prediction"] - ang["arms"][a]["prediction"] for a in both}
    widest = max(gaps, key=lambda a: abs(gaps[a]))
    out.update(r=r, max_gap={"arm": widest, "ln": gaps[widest]})
    band, b_k = math.log(margin), kap["slope"]["estimate"]
    # a slope near 0 asks a move past any float (exp overflows beyond ~709): that is any amount too
    move = f"x{math.exp(band / abs(b_k)):.3g}" if b_k and band / abs(b_k) < 700 else "any amount"
    positions = ", ".join(f"{a} ({kap['arms'][a]['x']['mean']:+.2f}, {ang['arms'][a]['x']['mean']:+.2f})"
                          for a in both)
    tell = (f"an arm's kappa would have to move by more than {move} without its angle (or its angle without "
            f"its kappa) to set the lines' predictions more than x{margin:g} apart; arms (ln kappa, ln angle "
            f"against the baseline's): {positions}")
    if abs(r) > COLLINEAR:
        out.update(verdict=False, reason=f"the arms' ln kappa and ln angle move together (r = {r:+.3f} over "
                                          f"{len(both)} arms' means, |r| > {COLLINEAR:g}): {tell}")
    elif abs(gaps[widest]) < band:
        widest_ratio = math.exp(abs(gaps[widest]))
        out.update(verdict=False, reason=f"both lines predict every arm within x{margin:g} of each other "
                                          f"(widest: {widest}, x{widest_ratio:.3g}): {tell}")
    else:
        out["verdict"] = True
    return out


def read_account(fit: Mapping, predictor: Predictor, margin: float, apart: Mapping) -> tuple[str, str]:
    """(reading, words) of one account's fit by the module docstring's rules."""
    lead = f"the account that {fit['claim']}"
    if fit["slope"]["estimate"] is None:
        return NO_FIT, f"{NO_FIT} for {lead}: {fit['note']}"
    slope, interval = fit["slope"]["estimate"], fit["slope"]["interval"]
    bracket = "" if interval is None else f" [{interval[0]:+.3g}, {interval[1]:+.3g}]"
    said = f"slope {slope:+.3g}{bracket} on {predictor.label}"
    departs = [a for a, e in fit["arms"].items() if e["status"] == DEPARTS]
    if departs:
        parts = []
        for a in departs:
            r = fit["arms"][a]["residual"]
            lo, hi = r["interval"]
            parts.append(f"{a} x{math.exp(r['mean']):.3g} [{math.exp(lo):.3g}, {math.exp(hi):.3g}] of its "
                         "prediction")
        return INCONSISTENT, (f"{INCONSISTENT} with {lead}: beyond x{margin:g} of its line ({said}): "
                              + "; ".join(parts))
    side = 0 if interval is None else 1 if interval[0] > 0 else -1 if interval[1] < 0 else 0
    if side == -predictor.sign:
        return INCONSISTENT, (f"{INCONSISTENT} with {lead}: its slope has the other sign ({said}, predicted "
                              f"{fit['predicted_sign']})")
    if apart.get("verdict") is False:
        return CANNOT_TELL, f"{CANNOT_TELL} ({lead}: {said}): {apart['reason']}"
    statuses = {a: e["status"] for a, e in fit["arms"].items() if e["status"] != "baseline"}
    on_line = (all(s in (ON_LINE, CAPACITY, OFF_OPTIMUM) for s in statuses.values())
               and statuses.get(NGPT) == ON_LINE)
    band = math.log(margin)
    moved = [a for a in fit["fitted_arms"] if abs(fit["arms"][a]["prediction"]) > band]
    if side == predictor.sign and on_line and len(moved) >= MIN_MOVED:
        return CONSISTENT, f"{CONSISTENT} with {lead}: every arm within x{margin:g} of its line ({said})"
    open_arms = ", ".join(a for a, s in statuses.items() if s == NOT_RESOLVED)
    why = ("one seed: no interval" if interval is None else
           f"{NGPT} not measured" if NGPT not in statuses else
           f"the slope's interval reaches 0 ({said})" if side == 0 else
           f"not every arm shown on the line: {open_arms}" if not on_line else
           f"the line predicts only {', '.join(moved) or 'no arm'} beyond x{margin:g} of the baseline: a "
           "line through the baseline and one arm fits it whatever the account")
    return NOT_RESOLVED, f"{NOT_RESOLVED} for {lead}: {why}"


def kappa_handicaps(off_optimum: Mapping[str, float]) -> dict[str, Handicap]:
    """{arm: Handicap} of the arms the kappa line reads first against the others' line (module docstring):
    gpt-orth, and each angle arm of off_optimum {arm: its tuned multiplier, not 1}."""
    return {ORTH: Handicap(CAPACITY, "kappa = 1 by construction", shown=True)} | {
        arm: Handicap(OFF_OPTIMUM, f"its primary estimate runs at multiplier 1, x{1 / m:.3g} the learning "
                                   f"rate the policy tunes over its sweep (x{m:g})", shown=False)
        for arm, m in off_optimum.items()}


def off_optimum(estimate: Mapping) -> dict[str, float]:
    """{angle arm: its tuned multiplier} of the estimate's angle arms whose tuned choice (at the largest
    budget it reads, speedup/tuned_multiplier.py) is not multiplier 1."""
    out = {}
    for arm, entry in estimate["arms"].items():
        m = (entry.get("tuned_multiplier") or {}).get("multiplier")
        if m is not None and not math.isclose(m, 1.0):
            out[arm] = m
    return out


def read_points(pts: Sequence[Mapping], baseline: str, margin: float, level: float = LEVEL,
                resamples: int = RESAMPLES, seed: int = 0, off_optimum: Mapping[str, float] | None = None
                ) -> tuple[dict[str, dict], dict]:
    """({account: fit_account + {reading, words}}, distinguishable) of a cell's points: both lines fitted
    (the kappa line with its handicapped arms read first, kappa_handicaps), whether they can be told apart,
    and each account read."""
    handicaps = kappa_handicaps(off_optimum or {})
    fits = {p.account: fit_account(pts, p, baseline, margin, level, resamples, seed,
                                   handicaps if p.sign < 0 else None) for p in PREDICTORS}
    apart = distinguishable(fits, margin)
    for p in PREDICTORS:
        fits[p.account]["reading"], fits[p.account]["words"] = read_account(fits[p.account], p, margin, apart)
    return fits, apart


def dose_response(results: Iterable[RunResult], estimate: Mapping, common: Mapping, margin: float,
                  level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """{method, level, resamples, seed, rule, points, accounts {name: fit_account + {reading, words}},
    distinguishable, note} of one cell from its runs, its estimate_cell document and its kappa at T_common
    (rivals.cell_kappa's document)."""
    pts = points(results, estimate, common)
    fits, apart = read_points(pts, estimate["baseline"], margin, level, resamples, seed,
                              off_optimum(estimate))
    measured = any(pt["x_kappa"] is not None or pt["x_angle"] is not None for pt in pts)
    return {"method": METHOD, "level": level, "resamples": resamples, "seed": seed, "margin": margin,
            "rule": rule(margin, level), "points": pts, "accounts": fits, "distinguishable": apart,
            "note": None if measured else ("no kappa or angular rate in the runs entering the estimate "
                                           "(trained before they were logged): no fit")}
