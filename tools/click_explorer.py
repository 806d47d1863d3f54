#!/usr/bin/env python3
"""The explorer clicked as a person clicks it: JupyterLab in headless Chromium, 08_analysis opened, Run All,
then the explorer's "measure" button; prints the labels it went through and the errors shown, and exits 1
when the measurement did not end with a table and a figure.

Not part of `make test` (it needs a browser). Debian: `apt-get install chromium chromium-driver`, then
`.venv/bin/pip install selenium`, and from a scratch clone (it writes outputs/<device>-<host>/ there):

    .venv/bin/python tools/click_explorer.py --clone /tmp/cnnbench-clone [--repeat 5]

Each click starts from an empty outputs/ and first runs 00_setup with params/local.yaml, so that 08 has its run to
open (it refuses to open without one). Screenshots go to the clone's outputs/click_explorer/. This is how the explorer's subshell race (issue of
JupyterLab >= 4.4 with ipykernel >= 7: figures drawn on two threads at once) was found and checked.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

PORT, TOKEN = 8899, "cnnbench-click"


def held_outputs(outputs: Path, shots: Path) -> list[Path]:
    """What a click clears from ``outputs``: all but the screenshots and the clone's own dotfiles (.gitkeep)."""
    return sorted(p for p in outputs.glob("*") if p != shots and not p.name.startswith("."))


def wait(cond, timeout: float, what: str):
    start = time.time()
    while time.time() - start < timeout:
        try:
            if found := cond():
                return found
        except Exception:  # noqa: BLE001 - the page is still being built
            pass
        time.sleep(0.5)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def click_once(shots: Path) -> bool:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,2400"):
        opts.add_argument(arg)
    driver = shutil.which("chromedriver")  # the system's: selenium would otherwise try to download one
    page = webdriver.Chrome(options=opts, service=Service(driver) if driver else None)

    def click_text(css: str, text: str) -> bool:
        return any(
            e.click() or True for e in page.find_elements(By.CSS_SELECTOR, css) if e.text.strip() == text
        )

    try:
        page.get(f"http://localhost:{PORT}/lab/tree/notebooks/08_analysis.ipynb?token={TOKEN}")
        wait(lambda: page.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 120, "the notebook")
        wait(lambda: "Idle" in page.find_element(By.TAG_NAME, "body").text, 120, "an idle kernel")
        wait(lambda: click_text(".lm-MenuBar-itemLabel", "Run"), 30, "the Run menu")
        wait(lambda: click_text(".lm-Menu-itemLabel", "Run All Cells"), 30, "Run All Cells")
        button = wait(
            lambda: [b for b in page.find_elements(By.TAG_NAME, "button") if b.text.strip() == "measure"],
            900,
            "the explorer's button",
        )[0]
        page.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
        start, seen = time.time(), []
        button.click()

        def finished() -> bool:
            for label in (e.text for e in page.find_elements(By.CSS_SELECTOR, ".widget-label")):
                if label and label not in seen:
                    seen.append(label)
                    print(f"  {time.time() - start:5.1f} s  {label}", flush=True)
            return any(s.startswith(("done", "noisy")) for s in seen)

        wait(finished, 900, "the measurement")
        time.sleep(3)
        box = button.find_element(By.XPATH, "ancestor::div[contains(@class,'widget-vbox')]")
        page.execute_script("arguments[0].scrollIntoView({block: 'start'});", box)
        page.save_screenshot(str(shots / f"explorer-{time.strftime('%H%M%S')}.png"))
        errors = [line for line in box.text.splitlines() if "Error" in line or "Traceback" in line]
        images = len(box.find_elements(By.TAG_NAME, "img"))
        table = "img/s" in box.text  # the table's rate column: "5,840 ± 560 img/s"
        print(f"  table: {table}, figures: {images}, errors: {errors or 'none'}")
        return table and images >= 1 and not errors
    finally:
        page.quit()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clone", type=Path, required=True, help="a scratch clone of the workbook to run in")
    ap.add_argument(
        "--repeat", type=int, default=1, help="fresh JupyterLab and kernel each time (races are rare)"
    )
    ap.add_argument(
        "--clear-outputs",
        action="store_true",
        help="delete what the clone's outputs/ holds before each click (its runs included)",
    )
    args = ap.parse_args()
    root = args.clone.resolve()
    if not (root / "notebooks" / "08_analysis.ipynb").is_file():
        sys.exit(f"{root} is not a clone of the workbook (no notebooks/08_analysis.ipynb)")
    shots = root / "outputs" / "click_explorer"
    held = [p.name for p in held_outputs(root / "outputs", shots)]
    if held and not args.clear_outputs:
        sys.exit(
            f"{root / 'outputs'} holds {', '.join(held[:5])}{' ...' if len(held) > 5 else ''}: each click starts "
            f"from an empty outputs/, so pass --clear-outputs to delete them, or use a scratch clone"
        )
    shots.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i in range(args.repeat):
        for old in held_outputs(root / "outputs", shots):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        # 08 refuses to open without a run (run.NoRuns): 00_setup makes the run local.yaml names, measuring nothing
        subprocess.run(
            [
                sys.executable,
                "-m",
                "cnnbench",
                "--params",
                "params/local.yaml",
                "--set",
                "notebooks=[00_setup]",
                "--no-report",
            ],
            cwd=root,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        lab = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter",
                "lab",
                "--allow-root",
                "--no-browser",
                f"--port={PORT}",
                f"--IdentityProvider.token={TOKEN}",
                f"--ServerApp.root_dir={root}",
            ],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(8)
            print(f"click {i + 1} of {args.repeat}", flush=True)
            failed += not click_once(shots)
        finally:
            lab.terminate()
            lab.wait(timeout=30)
    print(
        f"{args.repeat - failed} of {args.repeat} clicks ended with a table and a figure; screenshots in {shots}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
