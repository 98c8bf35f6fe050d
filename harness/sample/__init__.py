"""gpupoc's workload sample: a real training loop in a container of its own (`gpupoc sample train`,
`python3 -m harness.sample.train`). Standard library plus PyTorch or NumPy: the package imports nothing else of the
harness, so an image with Python and one framework runs it."""
