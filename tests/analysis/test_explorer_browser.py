"""The credit explorer in a real browser: JupyterLab served on localhost, Debian's headless Chromium driven by
Playwright, notebook 04 run on smoke rollouts (two runs of synthetic ALFWorld-like rollouts with mixed groups) in its
interactive mode.

Checks what a user sees: the controls and the heat maps render; another group and another tau redraw the figure (the
plotly state read from the page and the element screenshots differ, GRPO's panel is untouched by tau); a click on a cell
fills the side panel with that trajectory's text. Screenshots land in the test's tmp folder; set
SCPO_EXPLORER_SCREENSHOT=docs/img/explorer.png to refresh the README's. The same notebook on an imported run
(verl-agent's writer on batches of its trainer's code path, tests/helpers/verl_agent_trainer.py) shows the advantages
the run was trained with first; SCPO_IMPORTED_SCREENSHOT=docs/img/explorer_imported.png refreshes docs/import.md's.

Chromium: Debian's package (installed here with apt-get when absent and running as root, as CI does); Playwright's own
browser download is not used.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from helpers import REPO

CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "scpo-explorer-test"
VIEWPORT = {"width": 1700, "height": 1250}


def _chromium() -> str:
    found = shutil.which("chromium")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env, capture_output=True)
        found = shutil.which("chromium")
    if found is None:
        pytest.fail("the browser test needs Debian's chromium: run `apt-get install -y chromium` as root")
    return found


def _smoke_runs(root: Path) -> Path:
    """runs/alfworld/{scpo,gigpo}/seed0/rollouts/iter_000{0,1}.parquet: synthetic groups of 6, every iteration with
    mixed groups (won and lost siblings)."""
    from scpo.analysis.rollout_files import mixed_groups
    from scpo.credit.synthetic import synthetic_batch

    seeds = {("scpo", 0): 9, ("scpo", 1): 12, ("gigpo", 0): 14, ("gigpo", 1): 5}  # mixed groups, references >= 5 steps
    for method in ("scpo", "gigpo"):
        for it in (0, 1):
            batch = synthetic_batch(n_groups=3, group_size=6, max_steps=12, n_states=10, seed=seeds[method, it])
            assert len(mixed_groups(batch)) >= 2
            batch.to_parquet(root / "runs" / "alfworld" / method / "seed0" / "rollouts" / f"iter_{it:04d}.parquet")
    return root / "runs"


def _imported_run(root: Path) -> Path:
    """imported/verl_gigpo/rollouts/iter_000{5,6}.parquet: verl-agent's GiGPO batches (padding copies included) as its
    writer saves them."""
    from scpo.importers.verl_agent import write_rollouts

    from helpers.verl_agent_trainer import trainer_step

    run = root / "imported" / "verl_gigpo"
    for it in (5, 6):
        step = trainer_step(n_groups=4, group_n=8, max_steps=10, seed=it)
        write_rollouts(step.batch, it, run, tokenizer=step.tokenizer, env="alfworld")
    return run


def _tau_that_changes_scpo(run: Path, iteration: int, group: int) -> float:
    """A tau (other than the default) at which SCPO credits `group` differently, computed here with the notebook's
    config (once a reference is fully traversed, lowering tau can change nothing)."""
    import numpy as np

    from scpo.batch import RolloutBatch
    from scpo.config import load_config
    from scpo.credit import compute_advantages

    batch = RolloutBatch.read(run / "rollouts" / f"iter_{iteration:04d}.parquet")
    credit = load_config(REPO / "params.yaml", profile="smoke").credit
    rows = batch.group_id == group
    default = compute_advantages("scpo", batch, credit).advantages[rows]
    for tau in (0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.0):
        if not np.allclose(compute_advantages("scpo", batch, credit, tau=tau).advantages[rows], default):
            return tau
    raise AssertionError(f"no tau changes SCPO's credit of group {group}: the smoke rollouts lost their mixed group")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 serving a folder with notebook 04 parameterised for the smoke runs."""
    import nbformat
    import papermill.iorw as pmio
    import papermill.parameterize as pmp

    root = tmp_path_factory.mktemp("lab")
    runs = _smoke_runs(root)
    nb = pmp.parameterize_notebook(
        pmio.load_notebook_node(str(REPO / "notebooks" / "04_credit_maps.ipynb")),
        {"params": str(REPO / "params.yaml"), "profile": "smoke", "overrides": f"train.out_dir={runs}"},
    )
    nbformat.write(nb, root / "explorer.ipynb")
    imported = pmp.parameterize_notebook(
        pmio.load_notebook_node(str(REPO / "notebooks" / "04_credit_maps.ipynb")),
        {
            "params": str(REPO / "params.yaml"),
            "profile": "smoke",
            "rollouts": str(_imported_run(root)),
            "overrides": "report.methods=[grpo,gigpo,scpo]",  # three estimators beside the trained advantages
        },
    )
    nbformat.write(imported, root / "imported.ipynb")
    settings = root / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / "lab-workspaces"),
        "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
    }
    env.pop("CI", None)  # CI=true would make notebook 04 draw the static figure: here we test the explorer
    log = (root / "lab.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}",
            "--allow-root",
            "--expose-app-in-browser",
            "--LabApp.extension_manager=readonly",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"JupyterLab did not start: {(root / 'lab.log').read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield {"url": url, "root": root}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


_PLOT_STATE = """el => ({title: el.layout.title.text, ticks: el.layout.yaxis.ticktext,
                          z: Object.fromEntries(el.data.filter(t => t.type === 'heatmap').map(t => [t.name, t.z]))})"""


def _control(page, kind: str, label: str):
    """The ipywidgets control of `kind` (dropdown, slider) whose label reads `label`."""
    import re

    return (
        page.locator(f".scpo-credit-explorer .widget-{kind}")
        .filter(has=page.locator("label", has_text=re.compile(f"^{label}$")))
        .first
    )


def _wait_for_change(plot, before: dict, key: str, what: str, timeout_s: float = 60) -> dict:
    """The plot's state once its `key` differs from `before`; prints how long the redraw took as seen in the page."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        state = plot.evaluate(_PLOT_STATE)
        if state[key] != before[key]:
            print(f"browser: figure redrawn {time.perf_counter() - start:.2f} s after {what}")
            return state
        time.sleep(0.05)
    raise AssertionError(f"the figure's {key} did not change within {timeout_s} s after {what}")


def test_explorer_renders_and_redraws_in_chromium(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    shots = tmp_path / "shots"
    shots.mkdir()
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=chromium,
            headless=True,
            args=CHROME_ARGS,
            viewport=VIEWPORT,
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(f"{lab['url']}/lab/tree/explorer.ipynb?token={TOKEN}", timeout=90_000)
            page.wait_for_function(
                """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel
                       && w.sessionContext.session.kernel.status === 'idle'; }""",
                timeout=90_000,
            )
            start = time.perf_counter()
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            plot = page.locator(".scpo-credit-explorer .js-plotly-plot").first
            plot.locator(".hm").first.wait_for(state="attached", timeout=90_000)  # heat maps drawn
            print(f"browser: explorer drawn {time.perf_counter() - start:.2f} s after 'run all' in a fresh kernel")
            page.evaluate("window.jupyterapp.commands.execute('application:toggle-left-area')")
            explorer = page.locator(".scpo-credit-explorer").first
            top = lambda: explorer.evaluate("e => e.scrollIntoView({block: 'start'})")  # noqa: E731
            top()
            page.wait_for_timeout(500)

            first = plot.evaluate(_PLOT_STATE)
            assert {"grpo", "gigpo", "scpo", "anchor"} <= set(first["z"]) and "hcapo" not in first["z"]
            for label in ("run", "iteration", "group", "tau", "kappa", "scorer"):
                assert _control(page, "slider" if label in ("tau", "kappa") else "dropdown", label).is_visible()
            runs = (
                _control(page, "dropdown", "run")
                .locator("select")
                .evaluate("s => [...s.options].map(o => o.text.replace(/\\u00a0/g, ' '))")
            )
            assert runs == ["alfworld/gigpo/seed0", "alfworld/scpo/seed0"]
            page.screenshot(path=str(shots / "1_opened.png"))
            png_first = plot.screenshot()

            group = _control(page, "dropdown", "group").locator("select")
            labels = group.evaluate("s => [...s.options].map(o => o.text.replace(/\\u00a0/g, ' '))")  # nbsp
            current = group.evaluate("s => s.options[s.selectedIndex].text.replace(/\\u00a0/g, ' ')")
            other = next(lab_ for lab_ in labels if lab_ != current and " 0 won" not in lab_ and " 0 lost" not in lab_)
            group.select_option(index=labels.index(other))
            second = _wait_for_change(plot, first, "title", "choosing another group")
            assert f"group {other.split(':')[0].split()[-1]}:" in second["title"]
            top()
            page.wait_for_timeout(500)
            png_second = plot.screenshot()
            assert png_second != png_first
            page.screenshot(path=str(shots / "2_other_group.png"))

            tau = _tau_that_changes_scpo(
                lab["root"] / "runs" / "alfworld" / "scpo" / "seed0", 1, int(other.split(":")[0].split()[-1])
            )
            readout = _control(page, "slider", "tau").locator(".widget-readout")
            readout.click()
            page.keyboard.press("Control+A")
            page.keyboard.type(f"{tau:.2f}")
            page.keyboard.press("Enter")
            third = _wait_for_change(plot, second, "z", f"typing tau = {tau:.2f}")
            assert third["z"]["scpo"] != second["z"]["scpo"]  # tau moves SCPO's credit ...
            assert third["z"]["grpo"] == second["z"]["grpo"]  # ... and nothing else's
            assert third["title"] == second["title"]
            page.wait_for_timeout(500)
            assert plot.screenshot() != png_second

            # fewer estimators: their toggle buttons remove their panels
            for name in ("progpo_c", "progpo_r", "g2po", "hgpo", "graphgpo", "rloo"):
                page.locator(".scpo-credit-explorer .widget-toggle-button", has_text=name).first.click()
            page.wait_for_function(
                """() => { const el = document.querySelector('.scpo-credit-explorer .js-plotly-plot');
                return el && el.data.filter(t => t.type === 'heatmap').length === 4; }""",
                timeout=30_000,
            )
            fourth = plot.evaluate(_PLOT_STATE)
            assert (
                list(fourth["z"]) == ["grpo", "gigpo", "scpo", "anchor"] and fourth["z"]["scpo"] == third["z"]["scpo"]
            )

            # click a matched step of a lost trajectory in the SCPO panel: the side panel shows it, the step highlighted
            top()
            page.wait_for_timeout(500)
            matched = plot.evaluate("""el => el.data.find(t => t.name === 'scpo').customdata
                                               .map(row => row.map(c => c.startsWith('SCPO match: reference')))""")
            k, t = next((k, t) for k, row in enumerate(matched) for t, hit in enumerate(row) if hit)
            cell = plot.locator(".nsewdrag").nth(2)  # panels: grpo, gigpo, scpo, ...
            box = cell.bounding_box()
            k_rows, n_steps = len(fourth["ticks"]), len(fourth["z"]["scpo"][0])
            at = {"x": box["width"] * (t + 0.5) / n_steps, "y": box["height"] * (k + 0.5) / k_rows}
            cell.click(position=at)
            page.wait_for_function(
                """() => document.querySelector('.scpo-credit-explorer')
                                                 .innerHTML.includes('#fff3c4')""",
                timeout=30_000,
            )
            trajectory = _control(page, "dropdown", "trajectory").locator("select")
            chosen = trajectory.evaluate("s => s.options[s.selectedIndex].text.replace(/\\u00a0/g, ' ')")
            assert chosen == fourth["ticks"][k] and " lost " in f"{chosen} "
            side = page.locator(".scpo-credit-explorer .widget-html-content", has_text="Selected trajectory").first
            assert side.is_visible()
            top()
            page.wait_for_timeout(300)
            cell.hover(position=at)
            page.locator(".hoverlayer .hovertext").first.wait_for(timeout=10_000)
            assert "SCPO match: reference" in page.locator(".hoverlayer .hovertext").first.text_content()
            page.wait_for_timeout(300)
            page.screenshot(path=str(shots / "3_tau_click_hover.png"))
        finally:
            context.close()
    target = os.environ.get("SCPO_EXPLORER_SCREENSHOT")
    if target:
        shutil.copy(shots / "3_tau_click_hover.png", REPO / target)


def test_explorer_on_an_imported_run_shows_the_advantages_it_was_trained_with(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=chromium,
            headless=True,
            args=CHROME_ARGS,
            viewport=VIEWPORT,
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(90_000)  # a busy machine
            # a workspace of its own: the default one reopens the first test's notebook beside this one
            page.goto(f"{lab['url']}/lab/workspaces/imported/tree/imported.ipynb?reset&token={TOKEN}", timeout=90_000)
            page.wait_for_function(
                """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel
                       && w.sessionContext.session.kernel.status === 'idle'; }""",
                timeout=90_000,
            )
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            plot = page.locator(".scpo-credit-explorer .js-plotly-plot").first
            try:
                plot.locator(".hm").first.wait_for(state="attached", timeout=180_000)
            except Exception as err:  # what the notebook shows instead (an error, a cell still running)
                page.screenshot(path=str(tmp_path / "imported_not_drawn.png"))
                outputs = page.locator(".jp-OutputArea").all_inner_texts()
                raise AssertionError(f"no heat map after 180 s; notebook outputs: {outputs!r}"[:3000]) from err
            page.evaluate("window.jupyterapp.commands.execute('application:toggle-left-area')")
            state = plot.evaluate(_PLOT_STATE)
            assert list(state["z"]) == ["trained with", "grpo", "gigpo", "scpo", "anchor"]
            assert state["title"].startswith("verl_gigpo · iteration 6 · group ")
            titles = plot.evaluate("el => el.layout.annotations.map(a => a.text)")
            assert titles[0].startswith("trained with: the advantage A(i,t)")
            # the trained panel holds the file's trained_advantage of the drawn group, cell by cell
            from scpo.analysis.credit_maps import group_step_matrix
            from scpo.batch import RolloutBatch

            batch = RolloutBatch.read(lab["root"] / "imported" / "verl_gigpo" / "rollouts" / "iter_0006.parquet")
            group = int(state["title"].split(" group ")[1].split(":")[0])
            expected = group_step_matrix(batch, group, batch.trained_advantage)[0]
            shown = [[float("nan") if v is None else v for v in row] for row in state["z"]["trained with"]]
            assert np.allclose(shown, expected, equal_nan=True)
            # a cell of the trained panel: its hover names the panel and the side panel lists it per step
            cell = plot.locator(".nsewdrag").first
            cell.click(position={"x": 5, "y": 5})
            page.wait_for_function(
                """() => document.querySelector('.scpo-credit-explorer').innerHTML.includes('#fff3c4')""",
                timeout=90_000,
            )
            side = page.locator(".scpo-credit-explorer .widget-html-content", has_text="trained with").first
            assert side.is_visible()
            explorer = page.locator(".scpo-credit-explorer").first
            explorer.evaluate("e => e.scrollIntoView({block: 'start'})")
            cell.hover(position={"x": 5, "y": 5})
            page.locator(".hoverlayer .hovertext").first.wait_for(timeout=30_000)
            assert "trained with: A = " in page.locator(".hoverlayer .hovertext").first.text_content()
            page.wait_for_timeout(300)
            page.screenshot(path=str(tmp_path / "imported.png"))
        finally:
            context.close()
    target = os.environ.get("SCPO_IMPORTED_SCREENSHOT")
    if target:
        shutil.copy(tmp_path / "imported.png", REPO / target)
