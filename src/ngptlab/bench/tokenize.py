"""`ngptlab bench tokenize`: tokens/s and peak memory of `prepare` against a nanoGPT-style baseline.

Both arms tokenize the same text on the same machine in one invocation: the documents of
params["prepare"]["source"] are first written once to a JSONL file (not timed), then each arm runs in its
own fresh Python process, repeated and alternated so that drift on a shared machine hits both alike:

- ours:     the real prepare stage (pipeline.prepare_tokens) on that file as a `local` json source:
            streaming read, background encoding with tiktoken's batch encoder on `workers` threads,
            uint16 written as it goes.
- baseline: what nanoGPT's data/openwebtext/prepare.py does, straightforwardly: datasets.load_dataset
            ("json"), train_test_split, datasets.map(encode_ordinary + EOT, num_proc=workers), then
            concatenate each split's ids into one array and write it.

Speed is tokens written / wall-clock seconds of the whole process (start-up and imports included: what a
user waits for); CPU seconds (user + system, the process and its reaped children, from wait4) are
reported too, as they suffer less than wall time from other load on a shared machine. Memory is the peak,
over the run, of the summed PSS of the process and all its children (sampled every 20 ms from
/proc/<pid>/smaps_rollup; PSS splits pages shared by forked workers instead of counting them once per
process), and, for reference, the main process's own peak RSS (VmHWM, reported by the child itself: the
ru_maxrss of wait4 would include the parent's RSS at fork). Each arm gets its own empty HF datasets
cache, so nothing is reused between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from ngptlab import options
from ngptlab.prepare.cache import default_cache_dir
from ngptlab.prepare.sources import open_source
from ngptlab.settings import Params, Prepare, of_section

ARMS = ("ours", "baseline")
SAMPLE_EVERY_S = 0.02


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=_positive_int, default=3,
                        help="runs of each arm, alternated (default: 3)")
    parser.add_argument("--workers", type=_positive_int, default=None,
                        help="threads (ours) and processes (baseline); default: prepare.workers")
    options.add_cache_dir(parser)
    parser.add_argument("--work-dir", default=None, metavar="DIR",
                        help="scratch space for the corpus and outputs (default: a temporary directory)")
    parser.add_argument("--copies", type=_positive_int, default=1,
                        help="write the source's documents N times into the corpus, to see how both arms "
                             "scale once start-up costs are amortised (default: 1)")
    options.add_json(parser)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def run(args: argparse.Namespace, params: Params) -> int:
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    result = run_tokenize_bench(params.prepare, cache_dir=cache_dir, repeats=args.repeats,
                                workers=args.workers, copies=args.copies,
                                work_dir=Path(args.work_dir) if args.work_dir else None)
    print(json.dumps(result, indent=2) if args.json else format_result(result))
    return 0


def run_tokenize_bench(section: Prepare, *, cache_dir: Path, repeats: int = 3, workers: int | None = None,
                       work_dir: Path | None = None, copies: int = 1) -> dict:
    """Measure both arms (see the module docstring); returns per-arm medians, peaks and the ratios."""
    workers = workers or section.workers
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ngptlab-bench-", dir=work_dir) as tmp:
        work = Path(tmp)
        corpus = work / "corpus.jsonl"
        n_docs, n_bytes = _write_corpus(open_source(section.source, cache_dir).documents(), corpus, copies)
        common = {"corpus": str(corpus), "cache_dir": str(cache_dir), "workers": workers,
                  "val_fraction": section.val_fraction, "seed": section.split_seed,
                  "batch_documents": section.batch_documents}
        runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
        for rep in range(repeats):
            for arm in ARMS if rep % 2 == 0 else ARMS[::-1]:
                runs[arm].append(_measure(arm, common, work / f"{arm}-{rep}"))
    summary = {arm: _summarise(rs) for arm, rs in runs.items()}
    tokens = {arm: s["tokens"] for arm, s in summary.items()}
    if len(set(tokens.values())) != 1:
        raise RuntimeError(f"the arms wrote different numbers of tokens: {tokens}")
    ours, base = summary["ours"], summary["baseline"]
    return {
        "corpus": {"source": section.source.name, "copies": copies, "documents": n_docs,
                   "jsonl_bytes": n_bytes, "tokens": ours["tokens"]},
        "workers": workers,
        "cpus": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()[0]],  # other work on the machine, before and after
        "repeats": repeats,
        "arms": summary,
        "speedup": ours["tokens_per_s"] / base["tokens_per_s"],
        "cpu_speedup": base["cpu_s"] / ours["cpu_s"],
        "peak_memory_ratio": ours["peak_pss_mb"] / base["peak_pss_mb"],
    }


def format_result(result: dict) -> str:
    c, load = result["corpus"], result["load_average"]
    lines = [
        f"tokenize benchmark: {c['documents']:,} documents ({c['copies']} x {c['source']}), "
        f"{c['jsonl_bytes'] / 1e6:.1f} MB of JSONL, {c['tokens']:,} tokens; "
        f"{result['workers']} workers on {result['cpus']} CPUs (load average {load[0]:.1f} before, "
        f"{load[1]:.1f} after); median of {result['repeats']} runs",
        "",
        f"{'arm':<9} {'wall s':>7} {'CPU s':>7} {'tokens/s':>11} {'tokens/CPU s':>13} {'peak PSS MB':>12} "
        f"{'main RSS MB':>12}",
    ]
    for arm, s in result["arms"].items():
        lines.append(f"{arm:<9} {s['wall_s']:>7.2f} {s['cpu_s']:>7.2f} {s['tokens_per_s']:>11,.0f} "
                     f"{s['tokens'] / s['cpu_s']:>13,.0f} {s['peak_pss_mb']:>12.0f} "
                     f"{s['main_peak_rss_mb']:>12.0f}")
    lines += ["", f"speed-up (ours / baseline tokens/s):     {result['speedup']:.2f}x   (target >= 1.5x)",
              f"CPU time (baseline / ours CPU seconds):  {result['cpu_speedup']:.2f}x",
              f"peak memory (ours / baseline PSS):       {result['peak_memory_ratio']:.2f}   (target < 1)"]
    return "\n".join(lines)


def _write_corpus(documents, path: Path, copies: int = 1) -> tuple[int, int]:
    lines = [json.dumps({"text": doc}) + "\n" for doc in documents]
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(copies):
            f.writelines(lines)
    return len(lines) * copies, path.stat().st_size


def _measure(arm: str, common: dict, out_dir: Path) -> dict:
    """Run one arm in a fresh process; wall time, peak tree PSS (sampled) and the kernel's max RSS."""
    out_dir.mkdir(parents=True)
    env = {**os.environ, "HF_DATASETS_CACHE": str(out_dir / "hf-cache"), "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "ngptlab.bench.tokenize", "--child", arm, "--out", str(out_dir),
           "--config", json.dumps(common)]
    # output to files: a full pipe would block the child
    stdout, stderr = out_dir / "stdout.txt", out_dir / "stderr.txt"
    with open(stdout, "w") as out, open(stderr, "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        peak = {"pss": 0}
        sampler = threading.Thread(target=_sample_pss, args=(proc.pid, peak), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # wait4, not Popen.wait: it also returns the child's rusage
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"bench arm {arm} failed (exit {proc.returncode}): "
                           f"{stderr.read_text().strip()[-2000:]}")
    report = json.loads(stdout.read_text().strip().splitlines()[-1])
    return {"tokens": report["tokens"], "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_pss_mb": peak["pss"] / 2**20, "main_peak_rss_mb": report["peak_rss_kib"] / 2**10}


def _sample_pss(pid: int, peak: dict) -> None:
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    while True:
        try:
            procs = [root, *root.children(recursive=True)]
            if root.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        peak["pss"] = max(peak["pss"], sum(_pss_bytes(p.pid) for p in procs))
        time.sleep(SAMPLE_EVERY_S)


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # the process ended between listing and reading
        pass
    return 0


def _summarise(runs: list[dict]) -> dict:
    wall = statistics.median(r["wall_s"] for r in runs)
    tokens = runs[0]["tokens"]
    return {"tokens": tokens, "wall_s": wall, "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "tokens_per_s": tokens / wall, "peak_pss_mb": max(r["peak_pss_mb"] for r in runs),
            "main_peak_rss_mb": max(r["main_peak_rss_mb"] for r in runs), "runs": runs}


# ----------------------------------------------------------------------------------------------------------
# The two arms, each run as `python -m ngptlab.bench.tokenize --child ARM` (imports included in the timing)


def _child_ours(cfg: dict, out: Path) -> int:
    from ngptlab.prepare.pipeline import prepare_tokens

    section = {"source": {"kind": "local", "name": "bench", "files": [cfg["corpus"]], "format": "json"},
               "val_fraction": cfg["val_fraction"], "split_seed": cfg["seed"],
               "batch_documents": cfg["batch_documents"], "workers": cfg["workers"]}
    outcome = prepare_tokens(of_section("prepare", section), out / "data", Path(cfg["cache_dir"]), force=True,
                             progress=False)
    return sum(r["tokens"] for r in outcome.meta["splits"].values())


def _child_baseline(cfg: dict, out: Path) -> int:
    import datasets
    import numpy as np

    from ngptlab.prepare.tokenizer import gpt2_encoding, tiktoken_cache_dir

    datasets.disable_progress_bars()
    # forked map workers re-load the encoding by name; let them find the same cache
    os.environ["TIKTOKEN_CACHE_DIR"] = str(tiktoken_cache_dir(Path(cfg["cache_dir"])))
    enc = gpt2_encoding(Path(cfg["cache_dir"]))

    def process(example):
        ids = enc.encode_ordinary(example["text"])
        ids.append(enc.eot_token)
        return {"ids": ids, "len": len(ids)}

    ds = datasets.load_dataset("json", data_files=cfg["corpus"], split="train")
    splits = ds.train_test_split(test_size=cfg["val_fraction"], seed=cfg["seed"], shuffle=True)
    splits["val"] = splits.pop("test")
    tokenized = splits.map(process, remove_columns=["text"], num_proc=cfg["workers"])
    total = 0
    for name, dset in tokenized.items():
        arr = np.concatenate([np.asarray(ids, dtype=np.uint16) for ids in dset["ids"]])
        arr.tofile(out / f"{name}.bin")
        total += arr.size
    return total


def _child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m ngptlab.bench.tokenize")
    parser.add_argument("--child", choices=ARMS, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    arm = _child_ours if args.child == "ours" else _child_baseline
    tokens = arm(json.loads(args.config), Path(args.out))
    print(json.dumps({"tokens": tokens, "peak_rss_kib": _own_peak_rss_kib()}))
    return 0


def _own_peak_rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
