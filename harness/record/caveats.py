"""Which release a verdict holds for. A scheduler's behaviour is a fact of its release: a later one may change a
verdict this run measured (suites/releases.yaml lists the changes known, in their release notes' words). Pure: the
record's components and versions (Record.schedulers, Record.slurm, the target's Kubernetes) in, caveats out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.record.model import Record

# A component as sim/versions.toml names it -> how its entries in Record.schedulers are recognised (a name or a
# version string mentioning it: the sim's "kueue v0.19.2", a cluster's "kueue-system/kueue-controller-manager" with
# its image "registry.k8s.io/kueue/kueue:v0.19.2").
COMPONENT_WORDS = {"kueue": ("kueue",), "volcano": ("volcano", "vc-scheduler"), "kai-scheduler": ("kai-scheduler",),
                   "kuberay": ("kuberay",)}
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
_IMAGE_TAG = re.compile(r":(v?\d+\.\d+\.\d+)[^/:]*$")  # an image reference's tag (a digest taken off first)


@dataclass(frozen=True)
class Change:
    """A later upstream release known to change the verdict of some cells (criterion [backend])."""

    component: str     # as sim/versions.toml names it: kueue, volcano, kai-scheduler, kuberay, kubernetes, slurm
    release: str       # the first release with the change
    cells: tuple[str, ...]
    words: str         # the release note's words
    source: str        # where they are: repository, file, pull request


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """Pure: (major, minor, patch) of the first version in `text`, else None."""
    found = _VERSION.search(text)
    return (int(found.group(1)), int(found.group(2)), int(found.group(3))) if found else None


def running(record: Record, component: str) -> str | None:
    """Pure: the release of `component` the record's cluster ran, as its version says it ("v0.12.0", Slurm's
    "22.05.8"), None where the record does not say."""
    if component not in ("kubernetes", "slurm"):
        return _component_release(record.schedulers, COMPONENT_WORDS.get(component, (component,)))
    text = str(record.target.get("kubernetes_version", "") if component == "kubernetes"
               else record.slurm.get("version", ""))
    found = _VERSION.search(text)
    return found.group(0) if found else None


def _component_release(schedulers: list[dict[str, str]], words: tuple[str, ...]) -> str | None:
    """The sim's "kueue v0.19.2", or the tag of a cluster's image of the component among its Deployment's
    containers (a sidecar's image, a digest and a registry's port aside: "10.0.0.5:5000/kueue/kueue:v0.19.2")."""
    for entry in schedulers:
        version = entry.get("version", "")
        for word in words:
            if version.lower().startswith(word + " "):  # the sim's own
                found = _VERSION.search(version)
                if found:
                    return found.group(0)
            for image in (part.strip().split("@", 1)[0] for part in version.split(",")):
                tag = _IMAGE_TAG.search(image)
                if tag and word in image[:tag.start()].lower():
                    return tag.group(1)
    return None


def caveats(record: Record, changes: list[Change]) -> dict[str, str]:
    """Pure: "criterion [backend]" -> what a reader must know of the release it ran, for each cell of the record
    that a later release is known to change: "valid for kai-scheduler v0.12.0; v0.13.0 changes this: ...". A cell
    whose cluster already runs the changed release (or later) needs no caveat; an unknown release gets one."""
    present = {f"{r.criterion} [{r.backend}]" for r in record.results if r.outcome != "SKIP"}
    found: dict[str, list[str]] = {}
    for change in changes:
        ran = running(record, change.component)
        ran_tuple, changed = version_tuple(ran or ""), version_tuple(change.release)
        if ran_tuple is not None and changed is not None and ran_tuple >= changed:
            continue
        held = f"valid for {change.component} {ran}" if ran else f"{change.component}'s release not known"
        for cell in change.cells:
            if cell in present:
                found.setdefault(cell, []).append(
                    f"{held}; {change.release} changes this: \u201c{change.words}\u201d ({change.source})")
    return {cell: " | ".join(lines) for cell, lines in found.items()}
