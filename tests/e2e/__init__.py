"""End-to-end scenarios on a local control plane of upstream binaries (tests/e2e/conftest.py)."""
