"""A GPU's peaks as one torch device sees it: the record the datasheet table, an override file and a
measurement all give (:mod:`pragma_core.backends.gpu.hardware` says where each comes from)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import attrs
from attrs import validators as v

__all__ = ["GpuPeaks", "PeaksSource", "Vendor"]

Vendor = Literal["nvidia", "amd"]
PeaksSource = Literal["table", "file", "measured"]


def _positive_finite(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{attribute.name} must be a positive finite number, got {value!r}")


def _optional_positive_finite(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None:
        _positive_finite(instance, attribute, value)


def _int_at_least(minimum: int) -> Callable[[Any, attrs.Attribute, Any], None]:
    def check(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{attribute.name} must be an integer >= {minimum}, got {value!r}")

    return check


@attrs.frozen(kw_only=True)
class GpuPeaks:
    """One GPU's peaks as one torch device sees it, and where they come from.

    ``bandwidth_gbs`` is device-memory bandwidth in GB/s (10^9 bytes), read plus written, the way
    :attr:`pragma_core.records.TaskAnalysis.min_bytes` counts bytes. ``fp32_gflops`` is the fp32
    rate without tensor (NVIDIA) or matrix (AMD) cores: CUDA-core FMA on NVIDIA, packed-FP32 FMA on
    CDNA 2 and vector FP32 on CDNA 3. ``tensor_gflops`` is the dense (no sparsity) FP16/BF16 rate of
    the tensor or matrix cores, None when unknown. ``l2_bytes`` is the whole device's L2 and
    ``infinity_cache_bytes`` AMD's memory-side last-level cache (0 where there is none): together
    what a cache flush must exceed. ``multiprocessors`` is the SMs (NVIDIA) or CUs (AMD) the figures
    assume, None when the source does not say. ``source`` is ``table`` (``source_url`` is the
    datasheet), ``file`` (``source_url`` is the file's, unless it gives one) or ``measured``.
    """

    name: str = attrs.field(validator=v.and_(v.instance_of(str), v.min_len(1)))
    vendor: Vendor = attrs.field(validator=v.in_(("nvidia", "amd")))
    bandwidth_gbs: float = attrs.field(validator=_positive_finite)
    fp32_gflops: float = attrs.field(validator=_positive_finite)
    tensor_gflops: float | None = attrs.field(default=None, validator=_optional_positive_finite)
    l2_bytes: int | None = attrs.field(default=None, validator=v.optional(_int_at_least(1)))
    infinity_cache_bytes: int = attrs.field(default=0, validator=_int_at_least(0))
    multiprocessors: int | None = attrs.field(default=None, validator=v.optional(_int_at_least(1)))
    source: PeaksSource = attrs.field(validator=v.in_(("table", "file", "measured")))
    source_url: str | None = attrs.field(default=None, validator=v.optional(v.instance_of(str)))

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the fp32 roof meets the memory roof."""
        return self.fp32_gflops / self.bandwidth_gbs

    @property
    def flush_bytes(self) -> int | None:
        """Bytes a write must cover to evict every cache in front of memory (twice their size);
        None when the L2 size is not known (the clock then reads it from the device)."""
        if self.l2_bytes is None:
            return None
        return 2 * (self.l2_bytes + self.infinity_cache_bytes)
