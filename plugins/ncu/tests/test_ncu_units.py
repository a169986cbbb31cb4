"""Numbers as ncu prints them, and units brought to one base per dimension."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pragma_ncu.units import normalize, number


@pytest.mark.parametrize(
    "text, value",
    [
        ("9,284,529", Decimal("9284529")),
        ("1,759,000.00", Decimal("1759000.00")),
        ("15606", Decimal(15606)),
        ("0.00", Decimal(0)),
        (" 7.10 ", Decimal("7.10")),
    ],
)
def test_numbers_lose_their_thousands_separators(text, value):
    assert number(text) == value


@pytest.mark.parametrize(
    "text", ["(!) nan", "(!) n/a", "n/a", "nan", "inf", "CachePreferNone", "all", "32.00; 32.00; 4.00", "", "-"]
)
def test_what_is_not_one_finite_number(text):
    assert number(text) is None


@pytest.mark.parametrize(
    "value, unit, expected",
    [
        ("11.97", "msecond", (11_970_000.0, "ns")),
        ("5.92", "usecond", (5920.0, "ns")),
        ("406240", "ns", (406240.0, "ns")),
        ("14.46", "us", (14460.0, "ns")),
        ("7.85", "second", (7_850_000_000.0, "ns")),
        ("5.96", "cycle/nsecond", (5_960_000_000.0, "hz")),
        ("775.67", "cycle/usecond", (775_670_000.0, "hz")),
        ("7.10", "Ghz", (7_100_000_000.0, "hz")),
        ("3995313115.40", "hz", (3_995_313_115.40, "hz")),
        ("8.19", "Kbyte", (8190.0, "byte")),
        ("1.02", "Kbyte/block", (1020.0, "byte/block")),
        ("90.56", "Mbyte/second", (90_560_000.0, "byte/second")),
        ("1.5", "Gbyte/second", (1_500_000_000.0, "byte/second")),
        ("72.28", "%", (72.28, "%")),
        ("8", "sector/request", (8.0, "sector/request")),
        ("20", "register/thread", (20.0, "register/thread")),
        ("256", "", (256.0, "")),
    ],
)
def test_units_are_normalized(value, unit, expected):
    assert normalize(Decimal(value), unit) == expected
