"""tools/click_explorer.py's own checks (the clicking itself needs a browser and is not part of make test)."""

import sys

from conftest import ROOT


def test_a_fresh_clones_outputs_holds_nothing_a_click_clears(tmp_path):
    """A fresh clone's outputs/ holds only .gitkeep: the tool refused it ("holds .gitkeep ... use a scratch
    clone"), which is what its docstring tells the user to pass."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import click_explorer
    finally:
        sys.path.remove(str(ROOT / "tools"))
    outputs, shots = tmp_path / "outputs", tmp_path / "outputs" / "click_explorer"
    shots.mkdir(parents=True)
    (outputs / ".gitkeep").write_text("")
    assert click_explorer.held_outputs(outputs, shots) == []
    (outputs / "cpu-vm").mkdir()
    assert click_explorer.held_outputs(outputs, shots) == [outputs / "cpu-vm"]
