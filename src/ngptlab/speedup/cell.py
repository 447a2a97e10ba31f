"""The speed-up job of one cell: the token speed-up of every arm in one (scale, context) cell, i.e. the
tokens each arm needs to reach the baseline's loss at the reference budget of N tokens
(speedup.reference_budget), as S = N / those tokens.

Reads results/train/<cell>/<run>/summary.json and metrics.jsonl of every run of the cell in the grid (a
missing one is an error: the speed-up of a partial grid would silently change), writes
results/speedup/<cell>.json.
Method: ngptlab.speedup.estimator, inference and interpolate (module docstrings).

results/speedup/<cell>.json (strict JSON; "inf" / null encoding as in ngptlab/results.py):
  cell, scale, context, baseline, method (text), bootstrap{resamples, seed, level, min_seeds},
  equivalence_margin (M > 1), resolve_ratio (> 1), verdict_rule (text: the rule every verdict follows)
  seeds [int], budgets [int], arms_order [arm; baseline first],
  targets [{seed, arm, reference, reference_budget, interpolated, loss, runs [{budget, lr, loss, run}],
            at_largest_budget, measurable [lo, hi], note}]
                                   per seed, the baseline's loss at the reference budget: reference = the
                                   setting as written (largest | middle | tokens), reference_budget = N in
                                   tokens, interpolated = N lies between the two budgets in runs (the loss
                                   there along the fitted law) rather than on the one budget in runs;
                                   note (else null): the baseline's runs could not give it and the target
                                   fell back to its largest completed budget (reference_budget then that
                                   budget); at_largest_budget = N is the grid's largest budget;
                                   measurable = N / largest .. N / smallest budget, the speed-ups this grid
                                   can give as numbers
  estimand (text)                  the speed-up's estimand in one sentence: the tokens each arm needs, at
                                   the learning rate speedup.lr_policy names, to reach the baseline's loss
                                   at N tokens, as S = N / those tokens
  lr_policy{name, rule (text), selection_seeds [int], chosen [{arm, budget, lr}], notes [text],
            angle_arms {<angle arm>: {matched, source (measured | prior), rule (text),
                                      multiplier_1 [{budget, lr}], tuned [{budget, lr, multiplier}]}}
            (only with angle arms), estimate_seeds [int], note}
                                   the learning rate every seed is estimated at and the budgets it is read
                                   at, chosen on selection_seeds (train.seeds) by ngptlab.speedup.lr_policy
                                   under speedup.lr_policy (name); estimate_seeds the seeds every
                                   speed-up, contrast and factorial effect is summarized over: the held-out
                                   seeds when there are two or more, else all (speedup/selection.py)
  arms{<arm>: {
     speedup{value, bound, display, interval [lo, hi] | null, level, n_seeds, n_censored, note, method,
             statistic (text), log {mean, sd, se, df} | null, bootstrap_interval [lo, hi] | null,
             verdict, seeds_needed (int) | null, seeds_needed_note, seeds_needed_upper,
             seeds_needed_upper_note, seeds_needed_equivalence, seeds_needed_equivalence_note}
                                      value = exp(mean of ln S over seeds), a geometric mean; interval = the
                                      t-interval of mean ln S, exponentiated (S scale; null below 2 point
                                      estimates or for a bound); log = mean ln S, its sd, se and df (null
                                      likewise); with n_censored seeds that are bounds (> 0), method
                                      "censored-normal profile likelihood, ..." (speedup/censored.py):
                                      value = exp(mu_hat), interval its calibrated profile interval (an end
                                      0 or "inf" where the data leave that side open: no verdict), log.se
                                      null; else method "t on ln S"; bootstrap_interval = percentile
                                      bootstrap of mean ln S, S
                                      scale, only with >= 10 point estimates; bound null (point estimate), ">"
                                      (true speed-up is larger) or "<" (smaller); display e.g. "4.2", ">8",
                                      "<0.5"; verdict against the baseline: "faster by more than
                                      x<M>" | "slower by more than x<M>" | "equivalent within
                                      x<M>" | "not resolved" | "not resolved (no interval)" | "not
                                      resolved (a bound)"; seeds_needed to resolve
                                      x<resolve_ratio> at 80% power (noncentral t), _upper the same at
                                      the sd's 80% upper bound, _equivalence the TOST size within x<M>;
                                      each _note its method and df, or why null
                                      (ngptlab.speedup.inference); the baseline: all null
     per_seed [{seed, tokens_to_target{value, bound, display}, speedup{value, bound, display},
                interpolation (the law between budgets: speedup.loss_law), best [{budget, lr, loss, run}]}]
                                   every seed's run at the chosen lr at every budget that entered
     selection_bias{estimate, interval [lo, hi], method, level, df, n_selection, n_held_out, note} | null
                                   mean ln S of the selection seeds minus the held-out seeds' (the winner's
                                   curse of choosing the lr on them); estimate and interval null with the
                                   note saying why; null for the baseline (speedup/selection.py)
     replaced [{seed, reason, best [{budget, lr, loss, run}]}]
                                   held-out seeds left out of the arm's estimate (per_seed, interval,
                                   contrasts, factorial): one of its runs at the chosen lr diverged, or the
                                   baseline's did (no target); `ngptlab plan --add-seeds` plans a replacement
                                   seed per lost one at the same lr; until it trains, speedup.note says the
                                   estimate reads fewer seeds (speedup/divergence.py)
     divergence{diverged, seeds, rate, interval [lo, hi], level, method, diverged_seeds}
                                   the arm's own diverged held-out seeds / its held-out seeds, with the exact
                                   Clopper-Pearson interval (rate and interval null without held-out seeds)
     cheap{method (text), speedup{...as above}, per_seed [{seed, run, tokens_to_target, speedup}]}
     tuned_multiplier{lr, multiplier, budgets [{budget, lr, multiplier}], seeds [int],
                      speedup{estimate, bound, display, interval [lo, hi] | null, method, level, n_seeds},
                      note}
                                   an angle arm only: its speed-up is at multiplier 1 (its angle per step
                                   its matched arm's: lr_policy.angle_arms), this the secondary estimate at
                                   the multiplier the policy tunes over its sweep (tuned lr / multiplier
                                   1's: 0.5, 1, 2), from the swept seeds alone, so optimistic
                                   (speedup/tuned_multiplier.py)
     interpolated{speedup{...as above},
                  per_seed [{seed, target_loss, tokens_to_target, speedup, interpolation}],
                  per_budget [{budget, seeds, lr_grid, loss_grid (null: left out), lr_best, lr_vertex,
                               loss_vertex, correction, status}],
                  log_difference, seed_noise_log, differs (bool) | null, seeds, note}
                                      the speed-up from the parabola's minimum between learning rates, on
                                      the swept seeds only (`seeds`; S at the optimal lr, another estimand)
                                      (speedup/interpolate.py); log_difference = mean ln S interpolated minus
                                      on the grid, seed_noise_log = the grid's sd of ln S over seeds}}
  contrasts [{a, b, label, n_seeds, n_censored, seeds, difference_log{mean, sd, interval}, ratio, interval,
              level, method, verdict, seeds_needed (and _upper, _equivalence, with _note each), note}]
                                   paired by seed, ln S_a - ln S_b; ratio = exp(mean) = S_a / S_b, interval on
                                   the ratio scale; for each pair of speedup.inference.CONTRASTS in the cell;
                                   method the paired t, or the censored likelihood with n_censored bounds;
                                   verdict "exceeds by more than x<M>" | "falls short by more than x<M>" |
                                   "equivalent within x<M>" | "not resolved" | "not resolved (no interval)"
  factorial{coding (text), arms {<arm>: [a, b]}, seeds [int], left_out [{seed, effect (absent: every
            effect), reason}], note,
            effects{conditioning | norm | interaction: {estimate {ln, ratio}, log {mean, sd, se, df},
                    log_interval [lo, hi] | null, interval [lo, hi] | null, method, level, n_seeds,
                    n_censored, verdict, p_values {exceeds, falls_short, equivalent} | null}}} | null
                                   the 2x2 read as a factorial, paired by seed (speedup/factorial.py); null
                                   when the cell lacks one of gpt, gpt-rownorm, gpt-orth, ngpt; verdict by
                                   the symmetric rule (speedup/equivalence.py); p_values the one-sided
                                   t-test p of each claim (censored: of its t-equivalent), for adjustment
                                   across cells
  angle_factorial{...as factorial, effects angle | architecture | interaction} | null
                                   the angle square (gpt, gpt-angle, ngpt-angle, ngpt) read likewise; null
                                   when the cell lacks one of its arms
  reading{primary (speedup.primary_contrast), predicted (the claim the account predicts of it), margin,
          estimate {ln, ratio} | null, log_interval, interval, method, level, n_seeds, verdict, p_values,
          pattern [{a, b, predicted, required, log_interval, held, status}], pattern_reading,
          accounts {<conditioning | norm | effective learning rate>: {claim, source, reading, words,
                    pattern, by_labels}}, reading, confounded_by_effective_lr (bool) | null,
          effective_lr_clause | null, separation_clause | null, note}
                                   the primary effect is the headline; each account's reading
                                   (speedup/reading.py): source "measured" where dose_response below fits
                                   its line (conditioning, effective learning rate): "consistent with the
                                   account that ..." (conditioning: " (kappa = 1 costs capacity)" where
                                   gpt-orth lies below the line) | "inconsistent with ..." | "cannot tell
                                   the accounts apart for ..." | "not resolved", words the fit's;
                                   "construction" for the norm account (fixed norms are set by
                                   construction: read by its label pattern); "labels" where no line is
                                   fitted (its label pattern, the words saying so); pattern: each
                                   prediction of the account's label pattern with the claim its level
                                   interval holds and its status (holds | shown not to hold | open),
                                   by_labels what the pattern reads; pattern and pattern_reading the
                                   conditioning account's; reading: the accounts' readings in words, the
                                   report's, followed, only where no angle line is fitted over the
                                   conditioning square's measured angles nor the angle square runs, by
                                   "; " and effective_lr_clause, rivals.primary's verdict with its
                                   interval (e.g. "confounded by the effective learning rate: ..."), null
                                   there or where no angular rate was logged; confounded_by_effective_lr
                                   is rivals.primary.confounded
  rivals{arms {<arm>: {angular_rate, kappa {embed_in_cov_condition, layer34_qk_head_condition_median},
               n_seeds}},
         primary {effect, log_difference {mean, interval [lo, hi] | null, method, level}, ratio,
                  interval [lo, hi] | null, n_seeds, verdict, confounded (bool) | null, note},
         contrasts [{a, b, log_difference, ratio, interval, n_seeds, verdict, confounded, note}],
         rule (text), note}
                                   the effective learning rate beside the speed-ups (speedup/rivals.py):
                                   per (arm, seed) from the run entering the seed's estimate at the arm's
                                   largest budget, angular_rate = mean over its evaluation points of the
                                   mean over the attention and MLP kinds (rad / step), kappa at the
                                   cell's common token count (kappa_common: the input embedding's
                                   covariance; median of the layer 3-4 Q and K head medians); per arm
                                   geometric means over the estimate seeds having them (n_seeds);
                                   log_difference = the primary effect's factorial weights (or a
                                   contrast's a minus b) on ln angular rate, paired t over seeds, ratio
                                   and interval their exp; verdict from that interval against the
                                   equivalence margin: "confounded" (wholly outside: confounded true) |
                                   "not confounded" (wholly inside: false) | "not resolved" | "not resolved
                                   (one seed)" (null); verdict null (with note) for runs trained before the
                                   rates were logged
  kappa_common{tokens | null, rule, arms {<arm>: [{seed, run,
                                               embed_in_cov_condition {kappa, tokens} | null,
                                               layer34_qk_head_condition_median {kappa, tokens} | null}]}}
                                   every arm's kappa read at one token count, T_common (tokens): the fewest
                                   tokens among the last kappa of the heads in the runs entering the
                                   estimate, ln kappa interpolated in ln tokens; per run and key the kappa
                                   and the tokens actually read (speedup/common_kappa.py); rivals,
                                   separation and dose_response read kappa from it
  separation{arms {<angle arm>: {own, other, margin, gap, to_own, to_other {mean, interval, claim,
                                 method, level, n_seeds}, kappa_ratio {to_own, to_other}, verdict}},
             verdict, kappa_tokens, margin, rule} | null
                                   whether the angle square can separate the accounts: each angle arm's ln
                                   kappa (layer 3-4 Q, K heads, at T_common) less gpt's and ngpt's, paired
                                   t over seeds, equivalent within speedup.kappa_margin or not
                                   (speedup/separation.py); null without angle arms
  dose_response{method, level, resamples, seed, margin, rule, points [{arm, seed, y, x_kappa, x_angle}],
                accounts {<conditioning | effective learning rate>: {account, claim, predictor,
                          predicted_sign, n_arms, slope {estimate, interval}, fitted_arms,
                          excluded [{arm, reason}],
                          arms {<arm>: {n_seeds, x {mean, interval}, y {mean, interval}, prediction,
                                        residual {mean, interval}, status}}, note, reading, words}},
                distinguishable {verdict, r, threshold, max_gap {arm, ln}, reason}, note}
                                   each account's line ln S = b (x - x_baseline) over the arms' measured ln
                                   kappa or ln angular rate (arm means over the estimate seeds), percentile
                                   bootstrap over seeds within arms; reading consistent | inconsistent |
                                   cannot tell the accounts apart | not resolved | no fit; an arm's status
                                   on the line | departs | not resolved | kappa = 1 costs capacity | baseline
                                   (speedup/dose_response.py); the reading above reads both accounts from it
  by_baseline{<baseline>: {targets, arms {<arm>: {speedup, per_seed}}, contrasts}}
                                   only when speedup.baseline names several arms: for each but the first
                                   (the primary, whose speed-ups are the fields above), the same fields as
                                   above measured against that baseline; the factorial and reading stay
                                   the primary's
  runs [{run, scale, context, arm, budget, lr, seed, status, final_val_loss, best_lr_for_budget,
         within_run: {tokens_to_target, speedup} | null}]      every run of the cell; best_lr_for_budget: the
                                                               run is at its (arm, budget)'s chosen lr and
                                                               completed; within_run = the per-run cheaper
                                                               estimate from its own validation curve
  ignored [{run, reason}]                                       diverged runs, left out of every estimate
  tuning{edges [{arm, budget, seed, sweep, pruned, best_lr, edge}], tuned {<arm>: bool}}
                                   edge "top" / "bottom": the best lr is at that edge of the learning rates
                                   run at that budget (`sweep`; pruned: the window train.pruned_sweeps kept)
                                   (untuned; `ngptlab plan --extend-sweeps` extends a full sweep), null:
                                   interior; an arm is tuned when none of its (budget, seed) is at an edge
                                   (speedup/tuning.py); only seeds of train.seeds (seeds beyond them run
                                   only the chosen lr)
"""

from __future__ import annotations

from pathlib import Path

from ngptlab import layout
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import compared_runs, enumerate_cells
from ngptlab.grid.sweeps import lr_sweep, pruning_of
from ngptlab.results import RunResult, read_run_result, write_json
from ngptlab.settings import Params
from ngptlab.speedup.crossing import reference_tokens
from ngptlab.speedup.dose_response import dose_response
from ngptlab.speedup.estimator import estimate_cell, seed_speedups
from ngptlab.speedup.factorial import ANGLE, factorial
from ngptlab.speedup.inference import BOOTSTRAP_MIN_SEEDS
from ngptlab.speedup.interpolate import interpolate_cell
from ngptlab.speedup.lr_policy import cell_policy, estimand
from ngptlab.speedup.reading import primary_reading
from ngptlab.speedup.rivals import cell_kappa, rivals
from ngptlab.speedup.separation import separation
from ngptlab.speedup.tuned_multiplier import tuned_multipliers
from ngptlab.speedup.tuning import sweep_edges, tuned_arms
from ngptlab.stats import LEVEL


def method(rule: str) -> str:
    """How the cell is estimated, under speedup.lr_policy `rule` (its words: lr_policy in the document)."""
    return ("final validation loss at the learning rate chosen on the swept seeds' sweep (speedup.lr_policy "
            f"{rule}), the same for every seed (diverged runs ignored); target = baseline's loss at the "
            "reference budget N (speedup.reference_budget; between budgets interpolated along the "
            "fitted law); tokens to target interpolated between bracketing budgets, bounds instead of "
            "extrapolation; speed-up S = N / arm tokens, per seed; over the held-out seeds (every seed with "
            "fewer than two) the geometric mean exp(mean ln S) with a 95% t-interval on ln S, exponentiated "
            "(with seeds that are bounds, the censored-normal profile likelihood instead); a percentile "
            f"bootstrap of mean ln S only with at least {BOOTSTRAP_MIN_SEEDS} seeds; arms compared by paired "
            "differences of ln S; interpolated: the same on the swept seeds with each (arm, budget)'s loss "
            "moved to the minimum of a parabola in ln(lr) through the best learning rate and its two "
            "neighbours")


def output_path(root: str | Path, cell: str) -> Path:
    return Path(root) / layout.speedup_file(cell)


def speedup_cell(params: Params, cell: str, root: str | Path) -> dict:
    """Estimate one cell from the train results under root and write its JSON; return the document."""
    cells = enumerate_cells(params)
    if cell not in cells:
        raise ParamsError(f"cell {cell!r} is not in the grid of this params file; cells: {', '.join(cells)}")
    specs = [s for s in compared_runs(params) if s.cell == cell]
    document = analyse_cell(params, cell, [read_run_result(root, s) for s in specs])
    write_json(output_path(root, cell), document)
    return document


def analyse_cell(params: Params, cell: str, results: list[RunResult]) -> dict:
    """The cell's document from its runs' results (every run of the cell in the grid): no file is read or
    written, so a planted world's runs (ngptlab.design) go through the very same estimate."""
    cfg = params.speedup
    resamples, seed = int(cfg.bootstrap), int(cfg.seed)
    margin = float(cfg.equivalence_margin)
    ratio = float(cfg.resolve_ratio)
    train, scale, context = params.train, results[0].spec.scale, results[0].spec.context
    policy = cell_policy(params, {r.spec: r for r in results}.get, scale, context,
                         results[0].spec.weight_dtype)
    first, *others = cfg.baselines
    reference = cfg.reference_budget

    def against(baseline: str) -> dict:
        return estimate_cell(results, baseline, resamples, seed, margin, ratio, policy, reference=reference)

    estimate = against(first)
    for arm, entry in interpolate_cell(results, estimate, resamples, seed, margin, ratio).items():
        estimate["arms"][arm]["interpolated"] = entry
    # an angle arm's secondary estimate: at the multiplier the policy tunes, beside its primary at x1
    for arm, entry in tuned_multipliers(results, estimate, policy, resamples, seed).items():
        estimate["arms"][arm]["tuned_multiplier"] = entry
    # Seeds beyond train.seeds run only the chosen learning rate: they have no sweep whose edges matter.
    swept = [r.spec for r in results if r.spec.seed in set(train.seeds)]
    edges = sweep_edges(results, lambda arm, budget: lr_sweep(train, scale, context, arm, budget), swept,
                        lambda arm, budget: pruning_of(train, scale, context, arm, budget) is not None)
    per_seed = seed_speedups(estimate["arms"], estimate["lr_policy"]["estimate_seeds"])
    effects = factorial(per_seed, margin)
    primary = cfg.primary_contrast
    common = cell_kappa(results, estimate)  # every arm's kappa at one token count: read by the three below
    rival = rivals(results, estimate, common, primary, margin)
    separated = separation(estimate, common, float(cfg.kappa_margin))
    # each account's predictions from the arms' measured mechanisms: the reading of both accounts it fits
    dose = dose_response(results, estimate, common, margin, seed=seed)
    # A further baseline moves only the target: its own speed-ups, never the factorial or the reading.
    further = {"by_baseline": {b: further_baseline(against(b)) for b in others}} if others else {}
    n_tokens = reference_tokens(reference, train.budgets)
    return {"cell": cell, "scale": scale, "context": context,
            "estimand": estimand(cfg.lr_policy, first, n_tokens, bool(policy.angle_arms)),
            "method": method(cfg.lr_policy),
            "bootstrap": {"resamples": resamples, "seed": seed, "level": LEVEL,
                          "min_seeds": BOOTSTRAP_MIN_SEEDS},
            **estimate, **further, "factorial": effects,
            "angle_factorial": factorial(per_seed, margin, square=ANGLE),
            "reading": primary_reading(effects, primary, margin, confound=rival["primary"],
                                       arms=estimate["arms"], contrasts=estimate["contrasts"],
                                       baseline=first, separation=separated, dose=dose),
            "rivals": rival, "kappa_common": common, "separation": separated,
            "dose_response": dose,
            "tuning": {"edges": edges, "tuned": tuned_arms(edges)}}


def further_baseline(estimate: dict) -> dict:
    """The by_baseline entry of one further baseline from its estimate_cell document."""
    return {"targets": estimate["targets"],
            "arms": {arm: {"speedup": entry["speedup"], "per_seed": entry["per_seed"]}
                     for arm, entry in estimate["arms"].items()},
            "contrasts": estimate["contrasts"]}
