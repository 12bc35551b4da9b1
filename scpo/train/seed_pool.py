"""One pipeline stage's seeds side by side: a DVC `train` (`evaluate`) stage covers one method x environment and runs
every seed of `report.seeds`, at most `report.parallel_runs` at once.

Why: on a CPU box the tiny policy's runs are single-threaded (`train.torch_threads: 1`), and DVC runs stages one after
another, so one run per stage leaves cores idle (the gain, measured side by side: benchmarks/seed_lanes.py). DVC's own
queue (`dvc exp run --queue`) runs whole pipeline experiments in parallel, each in a copy of the workspace; it has no
way to run the seeds inside one stage side by side. Each run is exactly the run `scpo train --seed k` makes (its own
folder, lock, provenance and RNG streams: nothing is shared between runs), so the results do not depend on how many
run at once nor in which process (tests/train/test_seed_pool.py compares them file by file).

On a GPU machine every seed gets a GPU of its own: each worker process takes one visible GPU
(`scpo.pipeline.devices.visible_gpus`) as its CUDA_VISIBLE_DEVICES before torch touches CUDA, and runs its seeds one
after another on it; `report.parallel_runs: per_gpu` (the gpu profile) runs one seed per visible GPU at once, and a
number above the visible GPUs is refused in one line (two trainers with their engines would share a GPU).

On the CPU this process is one of the lanes: it runs seeds while the `report.parallel_runs - 1` worker processes start,
and every lane takes the next seed from one queue when it is free. The workers are forked from a server that imports
torch, transformers and the trainer once (`scpo.workers`), so a worker does not import them again; this process, the
notebook's kernel, has imported them for its own cells (notebook 02) or imports them while the server does
(notebook 03). On GPUs every seed runs in a spawned worker of its own GPU. A seed's progress bars
and notes go to a buffer, not to the notebook; the parent shows one bar over the seeds and, per finished seed, the
one-line summary. A failing seed fails the stage with its error after the others finished.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from tqdm.auto import tqdm

from scpo.config import Config
from scpo.pipeline.devices import parallel_runs, visible_gpus
from scpo.pipeline.layout import run_dir
from scpo.pipeline.manifest import write_seeds_manifest
from scpo.workers import exit_with_caller, worker_executor

__all__ = ["parse_seeds", "train_seeds", "evaluate_seeds", "SeedRunError"]


# what a seed's job imports: the workers' server imports these once (`scpo.workers`)
WORKER_MODULES = ("scpo.train.run", "scpo.train.evaluate")


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


def _train_one(seed: int, cfg: Config, stage: str) -> tuple[dict, str]:
    from scpo.train.run import run_training

    cfg = cfg.model_copy(deep=True)
    cfg.train.seed = seed
    with _captured() as log:
        summary = run_training(cfg, stage=stage)
    summary["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return summary, log.getvalue()


def _evaluate_one(seed: int, cfg: Config, method: str, env: str, reports: Path) -> tuple[dict, str]:
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
    """A seed's prints and progress bars go to a buffer. In a Jupyter kernel tqdm.auto's bars are widgets, which
    redirecting the streams does not catch, so those are off while the seed runs (a worker's text bars go to its
    buffer, which is dropped, so no bar of a seed reaches the notebook wherever it runs)."""
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf), _no_notebook_bars():
        yield buf


@contextlib.contextmanager
def _no_notebook_bars():
    """tqdm.notebook's bars created meanwhile are disabled (`disable=True`: no widget; `n` and `total` still set)."""
    notebook = sys.modules.get("tqdm.notebook")
    if notebook is None:  # not imported: tqdm.auto gave the text bars
        yield
        return
    cls = notebook.tqdm
    own = cls.__dict__["__init__"]

    def disabled(self, *args, **kwargs):
        kwargs["disable"] = True
        own(self, *args, **kwargs)

    cls.__init__ = disabled
    try:
        yield
    finally:
        cls.__init__ = own


def _take_gpu(devices) -> None:
    """A worker process's initializer: one GPU id from the shared queue becomes its CUDA_VISIBLE_DEVICES. The get
    waits: the parent's puts reach the queue through a feeder thread, and a worker may start before they do. The worker
    ends with this process (`scpo.workers.exit_with_caller`)."""
    exit_with_caller()
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
    """{seed: job(seed, *args)} with `workers` lanes at once (1: in this process, one after another).

    On the CPU this process is one of the lanes and `workers - 1` forked workers (`scpo.workers`) are the
    others: the first seeds go to the workers, and then every seed to whichever lane is free (one shared queue). The
    workers are started from a thread, so this process runs its first seed while their server imports the trainer.
    With `gpus`, every seed runs in a spawned worker and worker k on GPU gpus[k] alone."""
    results: dict[int, dict] = {}
    errors: list[str] = []
    out = sys.stderr  # the bar's stream: a seed run in this process redirects sys.stderr while it runs
    bar = tqdm(total=len(seeds), desc=desc, unit="seed", file=out)
    done = threading.Condition()
    pending = deque(seeds)

    def record(seed: int, outcome: Callable) -> None:  # one seed's result or error (lanes finish in any thread)
        result = error = None
        try:
            result, _ = outcome()
        except Exception as e:
            error = f"seed {seed}: {type(e).__name__}: {e}"
        else:
            bar.write(line(seed, result), file=out)
        with done:
            if error is None:
                results[seed] = result
            else:
                errors.append(error)
            bar.update()
            done.notify_all()

    def take() -> int | None:
        with done:
            return pending.popleft() if pending else None

    n = min(workers, len(seeds))
    if gpus and n > 1:
        context = multiprocessing.get_context("spawn")
        devices = context.Queue()
        for g in list(gpus)[:n]:
            devices.put(g)
        with ProcessPoolExecutor(max_workers=n, mp_context=context, initializer=_take_gpu, initargs=(devices,)) as pool:
            futures = {pool.submit(job, s, *args): s for s in seeds}
            for f in as_completed(futures):
                record(futures[f], f.result)
    else:
        with contextlib.ExitStack() as stack:
            if n > 1:
                pool = stack.enter_context(worker_executor(n - 1, preload=WORKER_MODULES))

                def submit(s: int) -> None:  # to a worker lane; if the pool broke (a worker died), back to the queue
                    try:
                        f = pool.submit(job, s, *args)
                    except Exception:
                        with done:
                            pending.appendleft(s)
                            done.notify_all()
                        return
                    f.add_done_callback(lambda f, s=s: (record(s, f.result), feed()))

                def feed() -> None:  # a worker lane is free: give it the next seed
                    if (s := take()) is not None:
                        submit(s)

                first = [s for s in (take() for _ in range(n - 1)) if s is not None]
                starter = threading.Thread(target=lambda: [submit(s) for s in first], daemon=True)
                starter.start()
                stack.callback(starter.join)
            while True:  # this process's lane
                if (s := take()) is not None:
                    record(s, lambda s=s: job(s, *args))
                    continue
                with done:
                    if len(results) + len(errors) == len(seeds):
                        break
                    if not pending:
                        done.wait()
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
