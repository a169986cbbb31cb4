"""Reading ncu's numbers and bringing its units to one base per dimension.

ncu scales units to the most fitting order of magnitude unless told ``--print-units base``
(``--csv`` implies it): the same duration is ``11.97 msecond`` in one file and ``406240 ns`` in
another. Here every time becomes ``ns``, every clock ``hz``, every byte count ``byte`` (ncu's
prefixes are decimal: 1 Kbyte = 1000 byte) and every rate ``<quantity>/second``; other units
(``%``, ``cycle``, ``sector/request``, ...) stay as printed. Thousands separators are dropped.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

__all__ = ["number", "normalize"]

_BYTES = {"byte": 1, "kbyte": 10**3, "mbyte": 10**6, "gbyte": 10**9, "tbyte": 10**12}
_SECONDS = {
    "nsecond": Decimal("1e-9"),
    "ns": Decimal("1e-9"),
    "usecond": Decimal("1e-6"),
    "us": Decimal("1e-6"),
    "msecond": Decimal("1e-3"),
    "ms": Decimal("1e-3"),
    "second": Decimal(1),
}
_HERTZ = {"hz": 1, "khz": 10**3, "mhz": 10**6, "ghz": 10**9}
_NS_PER_SECOND = Decimal(10**9)


def number(text: str) -> Decimal | None:
    """``"9,284,529"`` -> 9284529; None for what is not one finite number (``(!) n/a``, ``8; 8``)."""
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned[0] not in "+-.0123456789":
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def normalize(value: Decimal, unit: str) -> tuple[float, str]:
    """The value in the base unit of its dimension: ``(11.97, "msecond")`` -> ``(11970000.0, "ns")``."""
    unit = unit.strip()
    numerator, _, denominator = unit.partition("/")
    top = numerator.lower()
    if not denominator:
        if top in _SECONDS:
            return float(value * _SECONDS[top] * _NS_PER_SECOND), "ns"
        if top in _HERTZ:
            return float(value * _HERTZ[top]), "hz"
        if top in _BYTES:
            return float(value * _BYTES[top]), "byte"
        return float(value), unit
    bottom = denominator.lower()
    if bottom in _SECONDS:  # a rate: per second, and cycles per second are a frequency
        per_second = value / _SECONDS[bottom]
        if top in _BYTES:
            return float(per_second * _BYTES[top]), "byte/second"
        if top == "cycle":
            return float(per_second), "hz"
        return float(per_second), f"{numerator}/second"
    if top in _BYTES:
        return float(value * _BYTES[top]), f"byte/{denominator}"
    return float(value), unit
