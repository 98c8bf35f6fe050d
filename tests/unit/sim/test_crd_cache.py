"""The CRDs of a pinned module are parsed once (harness/sim/crds.py): later sims read the JSON cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sim import crds


def test_crds_are_parsed_once_then_read_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "module"
    (module / "crd").mkdir(parents=True)
    (module / "crd" / "a.yaml").write_text("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
                                           "metadata: {name: queues.example.io}\n---\n")
    asked: list[str] = []

    def module_dir(name: str, version: str, cwd: Path) -> Path:
        asked.append(f"{name}@{version}")
        return module

    monkeypatch.setattr(crds, "module_dir", module_dir)
    first = crds.cached_documents("example.io/op", "v1.2.3", "crd", tmp_path / "build")
    again = crds.cached_documents("example.io/op", "v1.2.3", "crd", tmp_path / "build")
    assert first == again == [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                               "metadata": {"name": "queues.example.io"}}]
    assert asked == ["example.io/op@v1.2.3"]  # the second read asked `go` nothing
    assert [p.name for p in (tmp_path / "build" / "crds").iterdir()] == ["example.io_op@v1.2.3_crd.json"]
    assert crds.cached_documents("example.io/op", "v1.2.4", "crd", tmp_path / "build") == first  # another pin
    assert asked == ["example.io/op@v1.2.3", "example.io/op@v1.2.4"]
