"""One pipeline stage's seeds side by side: a DVC `train` (`evaluate`) stage covers one method x environment and runs
every seed of `report.seeds` in its own process, at most `report.parallel_runs` at once.

Why: on a CPU box the tiny policy's runs are single-threaded (`train.torch_threads: 1`), and DVC runs stages one after
another, so one run per stage leaves cores idle. Three single-threaded runs on two cores finish in about 1.5 run times
where one after another they take 3. Each run is exactly the run `scpo train --seed k` makes (its own folder, lock,
provenance and RNG streams: nothing is shared between the processes), so the results do not depend on how many run at
once (tests/train/test_seed_pool.py compares them file by file).

On a GPU machine every seed gets a GPU of its own: each worker process takes one visible GPU
(`scpo.pipeline.devices.visible_gpus`) as its CUDA_VISIBLE_DEVICES before torch touches CUDA, and runs its seeds one
after another on it; `report.parallel_runs: per_gpu` (the gpu profile) runs one seed per visible GPU at once, and a
number above the visible GPUs is refused in one line (two trainers with their engines would share a GPU).

Processes are started with `spawn` (never `fork`: the parent may hold torch's thread pools, e.g. inside a Jupyter
kernel). A child's progress bars and notes go to a buffer, not to the notebook; the parent shows one bar over the seeds
and, per finished seed, the one-line summary. A failing seed fails the stage with its error after the others finished.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from tqdm.auto import tqdm

from scpo.config import Config
from scpo.pipeline.devices import parallel_runs, visible_gpus
from scpo.pipeline.layout import run_dir
from scpo.pipeline.manifest import write_seeds_manifest

__all__ = ["parse_seeds", "train_seeds", "evaluate_seeds", "SeedRunError"]


class SeedRunError(RuntimeError):
    """One or more seeds of a stage failed; the message names each seed and its error."""


def parse_seeds(text: str, report_seeds: Sequence[int]) -> list[int]:
    """`"0,1,2"` -> [0, 1, 2]; `"report"` -> report.seeds; one-line error naming a bad item."""
    text = text.strip()
    if text == "report":
        return list(report_seeds)
    seeds = []
    for item in (x.strip() for x in text.split(",")):
        try:
            seeds.append(int(item))
        except ValueError:
            raise ValueError(f"seeds={text!r}: {item!r} is not an integer (give e.g. '0,1,2' or 'report')") from None
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={text!r} names a seed twice")
    return seeds


def _train_one(cfg: Config, seed: int, stage: str) -> tuple[dict, str]:
    from scpo.train.run import run_training

    cfg = cfg.model_copy(deep=True)
    cfg.train.seed = seed
    with _captured() as log:
        summary = run_training(cfg, stage=stage)
    summary["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return summary, log.getvalue()


def _evaluate_one(cfg: Config, seed: int, method: str, env: str, reports: Path) -> tuple[dict, str]:
    from scpo.pipeline.layout import ReportLayout
    from scpo.train.evaluate import run_evaluation

    with _captured() as log:
        result = run_evaluation(
            cfg,
            checkpoint=run_dir(cfg.train.out_dir, env, method, seed),
            out_dir=ReportLayout(reports).eval_dir(env, method, seed),
            overwrite=False,
            note=print,
        )
    return result, log.getvalue()


@contextlib.contextmanager
def _captured():
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
        yield buf


def _take_gpu(devices) -> None:
    """A worker process's initializer: one GPU id from the shared queue becomes its CUDA_VISIBLE_DEVICES. The get
    waits: the parent's puts reach the queue through a feeder thread, and a worker may start before they do."""
    os.environ["CUDA_VISIBLE_DEVICES"] = devices.get(timeout=60)


def _side_by_side(
    job: Callable,
    seeds: Sequence[int],
    workers: int,
    desc: str,
    line: Callable[[int, dict], str],
    *args,
    gpus: Sequence[str] = (),
) -> dict[int, dict]:
    """{seed: job(seed)} with `workers` processes (1: in this process, one after another); with `gpus`, worker k runs
    on GPU gpus[k] alone."""
    results, errors = {}, []
    bar = tqdm(total=len(seeds), desc=desc, unit="seed")
    if workers <= 1 or len(seeds) <= 1:
        for s in seeds:
            try:
                results[s], _ = job(*args[:1], s, *args[1:])
                bar.write(line(s, results[s]), file=sys.stderr)
            except Exception as e:
                errors.append(f"seed {s}: {type(e).__name__}: {e}")
            bar.update()
    else:
        context = multiprocessing.get_context("spawn")
        n = min(workers, len(seeds))
        placement = {}
        if gpus:
            devices = context.Queue()
            for g in list(gpus)[:n]:
                devices.put(g)
            placement = {"initializer": _take_gpu, "initargs": (devices,)}
        with ProcessPoolExecutor(max_workers=n, mp_context=context, **placement) as pool:
            futures = {pool.submit(job, *args[:1], s, *args[1:]): s for s in seeds}
            for f in as_completed(futures):
                s = futures[f]
                try:
                    results[s], _ = f.result()
                    bar.write(line(s, results[s]), file=sys.stderr)
                except Exception as e:
                    errors.append(f"seed {s}: {type(e).__name__}: {e}")
                bar.update()
    bar.close()
    if errors:
        raise SeedRunError(f"{desc}: {len(errors)} of {len(seeds)} seeds failed; " + "; ".join(sorted(errors)))
    return {s: results[s] for s in seeds}


def train_seeds(cfg: Config, seeds: Sequence[int], stage: str = "rl", workers: int | None = None) -> dict[int, dict]:
    """Train `cfg` once per seed (`train.seed` replaced), each into its default run folder, then write the method
    folder's manifest (`write_seeds_manifest`); -> {seed: summary}."""
    gpus = _gpus(cfg)
    workers = parallel_runs(cfg.report.parallel_runs if workers is None else workers, gpus)
    name = "sft" if stage == "sft" else cfg.credit.method
    summaries = _side_by_side(
        _train_one, seeds, workers, f"{cfg.env.name} {name}: train", _train_line, cfg, stage, gpus=gpus
    )
    write_seeds_manifest(run_dir(cfg.train.out_dir, cfg.env.name, name, 0).parent, seeds)
    return summaries


def evaluate_seeds(
    cfg: Config, seeds: Sequence[int], method: str, env: str, reports: Path, workers: int | None = None
) -> dict[int, dict]:
    """Evaluate the runs `<train.out_dir>/<env>/<method>/seed<k>` into `<reports>/eval/...`; -> {seed: eval dict}."""
    gpus = _gpus(cfg)
    workers = parallel_runs(cfg.report.parallel_runs if workers is None else workers, gpus)
    return _side_by_side(
        _evaluate_one,
        seeds,
        workers,
        f"{env} {method}: evaluate",
        _eval_line,
        cfg,
        method,
        env,
        Path(reports),
        gpus=gpus,
    )


def _gpus(cfg: Config) -> list[str]:
    """The GPUs the seeds are spread over: the visible ones, unless the runs are to stay on the CPU."""
    return [] if cfg.train.device == "cpu" else visible_gpus()


def _train_line(seed: int, summary: dict) -> str:
    final = summary.get("final", {}).get("charts/success_rate")
    success = f", success {final:.2f} on the last iteration" if final is not None else ""
    return f"seed {seed}: {summary.get('iterations', '?')} iterations{success}; wrote {summary.get('run_dir', '')}"


def _eval_line(seed: int, result: dict) -> str:
    splits = result.get("splits") or {}
    rates = ", ".join(f"{k} {v.get('success', float('nan')):.2f}" for k, v in splits.items() if isinstance(v, dict))
    return f"seed {seed}: evaluated{': ' + rates if rates else ''}"
