"""Where every pipeline output lives, in one place (the notebooks, dvc.yaml and the tests agree through these names).

reports/notebooks/<stage>/<name>.ipynb      executed notebooks (Papermill)
reports/eval/<env>/<method>/seed<seed>/      eval.json + eval.csv of one run
reports/tables/<name>.{csv,md}               tables (CSV for machines, Markdown for readers)
reports/figures/<name>.png                   figures
<train.out_dir>/<env>/<method>/seed<seed>/   training runs (dvclive/, history.csv, rollouts/, model/, summary.json)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["find_repo_root", "ReportLayout", "run_dir"]


def find_repo_root(start: str | Path | None = None, marker: str = "params.yaml") -> Path:
    """The nearest folder at or above `start` (default: the cwd) holding `marker`.

    Notebooks run by Papermill/DVC start in the repository root, JupyterLab starts them in notebooks/; both find the
    same root this way, without os.chdir.
    """
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / marker).exists():
            return folder
    raise FileNotFoundError(f"no {marker} in {here} or any folder above it; run from inside the repository")


def run_dir(out_dir: str | Path, env: str, method: str, seed: int) -> Path:
    """The trainer's default run folder: <train.out_dir>/<env>/<method>/seed<seed> (method 'sft' for the warm start)."""
    return Path(out_dir) / env / method / f"seed{seed}"


@dataclass(frozen=True)
class ReportLayout:
    """Paths under one reports/ folder."""

    root: Path

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def eval(self) -> Path:
        return self.root / "eval"

    def eval_dir(self, env: str, method: str, seed: int) -> Path:
        return self.eval / env / method / f"seed{seed}"

    def table(self, name: str) -> tuple[Path, Path]:
        """(csv, md) paths of table `name`, parent folder created."""
        self.tables.mkdir(parents=True, exist_ok=True)
        return self.tables / f"{name}.csv", self.tables / f"{name}.md"

    def figure(self, name: str, suffix: str = ".png") -> Path:
        self.figures.mkdir(parents=True, exist_ok=True)
        return self.figures / f"{name}{suffix}"
