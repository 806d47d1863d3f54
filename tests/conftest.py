from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def write_yaml(tmp_path):
    """Write a params file into the test's temporary folder and return its path."""

    def write(text: str, name: str = "p.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
