import pytest


@pytest.fixture(autouse=True)
def _fresh_probe():
    """The probe caches its answer; each test starts without it."""
    from pragma_ncu.probe import probe

    probe.cache_clear()
    yield
    probe.cache_clear()
