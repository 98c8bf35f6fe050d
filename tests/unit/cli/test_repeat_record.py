"""`gpupoc run --repeat K`: after the K runs, one record of them all beside their own (harness/cli/runs.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.cli.runs import write_repeated
from harness.record.model import load_record

FIXTURE = Path(__file__).parents[2] / "fixtures" / "records" / "gang-schema3.json"


def test_the_k_runs_are_put_together_in_one_record_and_page(tmp_path: Path, capsys: object) -> None:
    paths = []
    for run in ("r-1", "r-2"):
        (tmp_path / run).mkdir()
        paths.append(Path(shutil.copy(FIXTURE, tmp_path / run / "record.json")))
    write_repeated("r", [*paths, tmp_path / "r-3" / "record.json"], tmp_path / "r")  # a run without a record
    record = load_record(tmp_path / "r" / "record.json")
    assert record.run_id == "r" and len(record.target["repeats"]) == 2
    assert 'id="gpupoc-fit"' in (tmp_path / "r" / "record.html").read_text()
