"""Load everything the report shows from results/, params and data/tokens/*/meta.json: no checkpoint is read.

The report renders whatever exists. A Snakemake --keep-going run can leave holes, so every expected input of
the grid is looked up and recorded as present or missing, never assumed:
- results/train/<cell>/<run>/summary.json + metrics.jsonl (train stage; status "completed" | "diverged"; the
  validation curve, and the angular update rate and condition numbers over training)
- results/conditioning/<run>.json + <run>.spectra.parquet (condition stage)
- results/timing/<cell>/<run>.json                     (written by a run's training, and by a WSD trunk
                                                        segment's: measured tokens/s and MFU; absent for runs
                                                        trained before timing files existed: blank). No
                                                        stage's output or input in either tool: measured speed
                                                        is no result, so the report says which timing files it
                                                        read (Results.timing_digest)
- results/speedup/<cell>.json                          (speedup stage; only written when every run of its cell
                                                        has finished, so a hole in a cell means no speed-up;
                                                        read by ngptlab.speedup.document)
- data/tokens/<source>/meta.json                       (prepare stage; token counts and shard sha256s)
A file that exists but is malformed is an error naming the file (ResultsError), not a silent hole.

Every file read is hashed (sha256) so the provenance can name exactly what each number came from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ngptlab import layout
from ngptlab import schedule as schedules
from ngptlab.errors import ResultsError
from ngptlab.files import read_json, sha256_file
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.results import read_metrics, read_summary, train_dir
from ngptlab.settings import Params
from ngptlab.speedup.document import SpeedupDocument, read_document

OBSERVED = ("angular_rate", "kappa", "step_angle")  # the metrics rows' observations of the weights


@dataclass
class RunRecord:
    """One run of the grid and whatever of its results exist."""

    spec: RunSpec
    summary: dict | None = None
    curve: list[tuple[float, float]] = field(default_factory=list)  # (tokens, val_loss)
    # (tokens, {name: value}) per field an evaluation point observes of the weights: angular_rate, kappa
    observed: dict[str, list[tuple[float, dict[str, float]]]] = field(default_factory=dict)
    conditioning: dict | None = None
    spectra_path: Path | None = None
    stale_conditioning: bool = False  # analysed a checkpoint other than the one the summary names
    timing: dict | None = None  # results/timing/: measured speed, the one input that varies per training
    summary_sha256: str | None = None  # of the files read, for provenance
    conditioning_sha256: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def status(self) -> str:
        """completed | diverged | missing (no summary: failed, killed or not run yet)."""
        return self.summary["status"] if self.summary else "missing"

    @property
    def final_val_loss(self) -> float | None:
        if not self.summary or self.summary.get("final_val_loss") is None:
            return None
        return float(self.summary["final_val_loss"])

    def headline(self, variant: str = "effective") -> dict:
        """The condition stage's headline numbers of one variant ({} when not analysed)."""
        if not self.conditioning:
            return {}
        return self.conditioning.get("headline", {}).get(variant) or {}


@dataclass
class Results:
    root: Path
    params: Params
    params_path: Path | None
    runs: dict[str, RunRecord]  # grid order
    speedups: dict[str, SpeedupDocument | None]  # cell -> its speed-up document, or None when missing
    meta: dict | None  # data/tokens/<source>/meta.json, or None when missing
    inputs: dict[str, str] = field(default_factory=dict)  # relative path -> sha256 of every file read
    segment_timing: dict[str, dict] = field(default_factory=dict)  # a WSD trunk segment's timing, by name
    timing_files: list[str] = field(default_factory=list)  # of inputs, the timing files (runs', segments')

    @property
    def source(self) -> str:
        return self.params.train.source

    @property
    def cells(self) -> list[str]:
        return list(self.speedups)

    @property
    def schedule(self) -> str:
        """train.schedule: cosine or wsd."""
        return schedules.of(self.params.train)

    def cell_runs(self, cell: str) -> list[RunRecord]:
        """Every run of the cell, a WSD grid's cosine calibration runs included."""
        return [r for r in self.runs.values() if r.spec.cell == cell]

    def compared_runs(self, cell: str) -> list[RunRecord]:
        """The cell's runs of train.schedule: the ones that compare arms (the speed-up's). A WSD grid's cosine
        calibration runs are not among them: they only calibrate WSD against cosine (the calibration
        section)."""
        return [r for r in self.cell_runs(cell) if r.spec.schedule == self.schedule]

    def timing_digest(self) -> tuple[int, str | None]:
        """(how many, sha256) of the timing files read: the sha256 of their "<path> <sha256>" lines in path
        order (None: none read). Measured speed is no stage's input in either tool, so a run trained again
        changes it without rerunning the report: this names the speeds the report shows."""
        timing = [f"{path} {self.inputs[path]}\n" for path in sorted(self.timing_files)]
        return len(timing), hashlib.sha256("".join(timing).encode()).hexdigest() if timing else None

    def missing(self, what: str) -> list[str]:
        """Names whose `what` (train | conditioning | speedup) output is absent."""
        if what == "train":
            return [n for n, r in self.runs.items() if r.summary is None]
        if what == "conditioning":
            return [n for n, r in self.runs.items() if r.summary is not None and r.conditioning is None]
        if what == "speedup":
            return [c for c, s in self.speedups.items() if s is None]
        raise ValueError(what)


def _check_conditioning(path: Path, doc: dict, spec: RunSpec) -> None:
    if doc.get("run") != spec.name:
        raise ResultsError(f"{path}: conditioning is for run {doc.get('run')!r}, expected {spec.name!r}")
    if not isinstance(doc.get("headline"), dict) or not isinstance(doc.get("matrices"), dict):
        raise ResultsError(f"{path}: missing key 'headline' or 'matrices' (written by an old condition "
                           "stage?)")


def _check_timing(path: Path, doc: dict, spec: RunSpec) -> None:
    if doc.get("run") != spec.name:
        raise ResultsError(f"{path}: timing is for run {doc.get('run')!r}, expected {spec.name!r}")


def _check_speedup(path: Path, doc: SpeedupDocument, cell: str, further: list[str]) -> None:
    if doc.cell != cell:
        raise ResultsError(f"{path}: speed-up is for cell {doc.cell!r}, expected {cell!r}")
    for baseline in further:  # the further baselines of speedup.baseline
        if baseline not in doc.by_baseline:
            raise ResultsError(f"{path}: no speed-ups against {baseline!r}, which speedup.baseline names "
                               "(written before it did? rerun the speedup stage)")


def load_results(params: Params, root: str | Path = ".", params_path: str | Path | None = None) -> Results:
    """Everything under root that the grid of `params` expects, present or missing."""
    root = Path(root)
    inputs: dict[str, str] = {}

    timing_files: list[str] = []

    def note(path: Path) -> str:
        inputs[path.relative_to(root).as_posix()] = digest = sha256_file(path)
        return digest

    def note_timing(path: Path) -> dict:
        timing_files.append(path.relative_to(root).as_posix())
        note(path)
        return read_json(path, ResultsError)

    runs: dict[str, RunRecord] = {}
    for spec in enumerate_runs(params):
        record = RunRecord(spec)
        run_results = train_dir(root, spec)
        if (run_results / "summary.json").is_file():
            record.summary = read_summary(root, spec)
            record.summary_sha256 = note(run_results / "summary.json")
            if (run_results / "metrics.jsonl").is_file():
                record.curve, record.observed = read_metrics(root, spec, OBSERVED)
                note(run_results / "metrics.jsonl")
        cond_files = layout.conditioning_files(spec.name)
        cond = root / cond_files["json"]
        if cond.is_file():
            record.conditioning = read_json(cond, ResultsError)
            _check_conditioning(cond, record.conditioning, spec)
            record.conditioning_sha256 = note(cond)
            ckpt = (record.conditioning.get("checkpoint") or {}).get("sha256")
            if record.summary and ckpt and ckpt != record.summary.get("checkpoint_sha256"):
                record.stale_conditioning = True
        timing = root / layout.timing_file(spec.cell, spec.name)
        if timing.is_file():
            record.timing = note_timing(timing)
            _check_timing(timing, record.timing, spec)
        spectra = root / cond_files["spectra"]
        if spectra.is_file():
            record.spectra_path = spectra
            note(spectra)
        runs[spec.name] = record

    speedups: dict[str, SpeedupDocument | None] = {}
    for cell in enumerate_cells(params):
        path = root / layout.speedup_file(cell)
        speedups[cell] = None
        if path.is_file():
            speedups[cell] = read_document(path, required=("arms", "baseline", "targets", "runs"))
            _check_speedup(path, speedups[cell], cell, params.speedup.baselines[1:])
            note(path)

    segment_timing: dict[str, dict] = {}
    for segment in enumerate_segments(params):  # WSD: what each trunk segment trained, once for its branches
        path = root / layout.timing_file(segment.trunk.cell, segment.name)
        if path.is_file():
            segment_timing[segment.name] = note_timing(path)

    meta = None
    meta_path = root / layout.tokens_dir(params.train.source) / "meta.json"
    if meta_path.is_file():
        meta = read_json(meta_path, ResultsError)
        note(meta_path)

    params_path = Path(params_path) if params_path else None
    return Results(root=root, params=params, params_path=params_path, runs=runs, speedups=speedups,
                   meta=meta, inputs=dict(sorted(inputs.items())), segment_timing=segment_timing,
                   timing_files=timing_files)
