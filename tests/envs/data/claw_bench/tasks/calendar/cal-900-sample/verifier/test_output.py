from pathlib import Path


def test_count(workspace):
    assert (Path(workspace) / "count.txt").read_text().strip() == "3"
