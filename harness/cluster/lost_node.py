"""A lost node, made on purpose (topology placement): the NoExecute taint a node controller puts on an unreachable
node, under gpupoc's own key, so that no default toleration (300 s for node.kubernetes.io/unreachable) delays the
eviction of its pods. Taken off by the test, by its job system's teardown, and by a sweep."""

from __future__ import annotations

from kubernetes import client

LOST_NODE_TAINT = "gpupoc.io/lost-node"


def set_lost(api: client.ApiClient, node: str, lost: bool) -> None:
    """Put the taint on `node` (lost) or take it off."""
    core = client.CoreV1Api(api)
    current = api.sanitize_for_serialization(core.read_node(node).spec.taints or [])
    kept = [t for t in current if t.get("key") != LOST_NODE_TAINT]
    added = [{"key": LOST_NODE_TAINT, "value": "true", "effect": "NoExecute"}] if lost else []
    core.patch_node(node, {"spec": {"taints": kept + added}})  # a node's taints have no merge key: the whole list


def lost_nodes(api: client.ApiClient) -> list[str]:
    """The nodes that carry the taint now."""
    return sorted(n.metadata.name for n in client.CoreV1Api(api).list_node().items
                  if any(t.key == LOST_NODE_TAINT for t in n.spec.taints or []))


def taken_off(api: client.ApiClient, node: str) -> str | None:
    """Take the taint off `node`; None when done, else a line saying it stays and how to take it off."""
    try:
        set_lost(api, node, lost=False)
    except client.ApiException as exc:
        return (f"node {node} keeps the taint {LOST_NODE_TAINT} ({exc.status} {exc.reason}): "
                f"kubectl taint nodes {node} {LOST_NODE_TAINT}-")
    return None
