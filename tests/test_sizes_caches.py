"""The caches cachegrind is told to simulate: this machine's L1 and L2, made simulable."""

from __future__ import annotations

import pytest

from pragma_core.machine.hardware import describe_cpu
from pragma_core.sizes.caches import CacheGeometry, read_cache_geometries, simulable, simulated_caches
from pragma_core.sizes.profiling import LLC_MULTIPLE, simulated_working_set_bytes

KiB = 2**10


def test_a_cache_a_simulator_cannot_take_is_made_simulable():
    # power-of-two sets: as they are
    assert simulable(32 * KiB, 8, 64) == (CacheGeometry(size_bytes=32 * KiB, ways=8, line_bytes=64), "")
    assert simulable(1280 * KiB, 10, 64)[1] == ""  # 2048 sets of 10 ways
    # 24576 sets: rounded down to 16384, the ways raised to keep the size
    geometry, change = simulable(30 * 2**20, 20, 64)
    assert geometry == CacheGeometry(size_bytes=30 * 2**20, ways=30, line_bytes=64) and geometry.sets == 16384
    assert change == "30 MiB, 20-way, 64 B lines simulated as 30 MiB, 30-way, 64 B lines (16384 sets, a power of two)"
    # no whole number of ways keeps the size: rounded down
    geometry, _change = simulable(105 * 2**20, 15, 64)
    assert (geometry.sets, geometry.ways, geometry.size_bytes) == (65536, 26, 104 * 2**20)
    # a line that is not a power of two: 64 bytes
    assert simulable(2**20, 16, 48)[0] == CacheGeometry(size_bytes=2**20, ways=16, line_bytes=64)


@pytest.mark.skipif("L2" not in read_cache_geometries(), reason="this machine's sysfs does not describe its L2")
def test_the_simulated_last_level_is_this_machines_l2():
    caches = read_cache_geometries()
    assert caches["L2"][0] == describe_cpu().l2_bytes
    simulated = simulated_caches()
    assert simulated.ll == simulable(*caches["L2"])[0]
    if "L1d" in caches:
        assert simulated.d1 == simulable(*caches["L1d"])[0] and caches["L1d"][0] == describe_cpu().l1d_bytes
    assert f"as the last level, this machine's L2 ({simulated.ll.describe()}: one core's own)" in simulated.describe()
    if describe_cpu().l3_bytes:
        assert "L3" in simulated.describe() and "is not simulated" in simulated.describe()
    assert simulated_working_set_bytes() == LLC_MULTIPLE * simulated.ll.size_bytes
