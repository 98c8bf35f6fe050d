"""gpupoc: acceptance tests for GPU scheduling on Kubernetes."""

__version__ = "0.1.0"
