"""Scale: how the scheduler keeps up with a big fleet and a deep queue (not in the default run)."""
