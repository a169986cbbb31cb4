"""Records to plain dicts and JSON files, and back.

:func:`to_dict` and :func:`from_dict` give the plain form (JSON types only: enums become their
values, paths strings, tuples lists). What goes to disk is wrapped with the record's kind and the
schema version, so a reader can refuse a file it does not understand::

    write_record(run_dir / "verdict.json", verdict)
    verdict = read_record(run_dir / "verdict.json", Verdict)

``SCHEMA_VERSION`` grows whenever a record changes in a way older readers cannot follow.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.preconf.json import make_converter
from cattrs.strategies import configure_union_passthrough

from .errors import RecordError
from .files import atomic_write_text

__all__ = ["SCHEMA_VERSION", "to_dict", "from_dict", "dump", "load", "write_record", "read_record", "read_json_object"]

SCHEMA_VERSION = 1

R = TypeVar("R")

_converter = make_converter()
configure_union_passthrough(int | float | str | bool | None, _converter)
_converter.register_unstructure_hook(Path, str)
_converter.register_structure_hook(Path, lambda value, _type: Path(value))
_converter.register_unstructure_hook_func(
    lambda cls: isinstance(cls, type) and issubclass(cls, enum.Enum), lambda member: member.value
)


def to_dict(record: Any) -> dict[str, Any]:
    """The record as a dict of JSON types."""
    if not attrs.has(type(record)):
        raise TypeError(f"{type(record).__name__} is not a pragma record")
    return _converter.unstructure(record)


def from_dict(cls: type[R], data: dict[str, Any]) -> R:
    """Rebuild a record of type ``cls`` from :func:`to_dict`'s output; validators run again."""
    try:
        return _converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as error:
        raise RecordError(f"not a valid {cls.__name__}: {_describe(error)}") from error


def dump(record: Any) -> dict[str, Any]:
    """The on-disk form: ``{"schema_version": 1, "record": "Verdict", ...fields}``."""
    return {"schema_version": SCHEMA_VERSION, "record": type(record).__name__, **to_dict(record)}


def load(cls: type[R], data: dict[str, Any]) -> R:
    """Read :func:`dump`'s output, refusing another kind or a newer schema."""
    data = dict(data)
    version = data.pop("schema_version", None)
    kind = data.pop("record", None)
    if not isinstance(version, int):
        raise RecordError(f"no schema_version: this is not a {cls.__name__} written by pragma")
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"schema version {version} is newer than this pragma reads ({SCHEMA_VERSION}); upgrade pragma-core"
        )
    if kind != cls.__name__:
        raise RecordError(f"holds a {kind}, not a {cls.__name__}")
    return from_dict(cls, data)


def write_record(path: Path, record: Any) -> None:
    """Write the record as JSON atomically: readers see the old file or the new, never half."""
    atomic_write_text(Path(path), json.dumps(dump(record), indent=2, sort_keys=True) + "\n")


def read_json_object(path: Path, *, what: str = "file") -> dict[str, Any]:
    """The JSON object in ``path``; a missing file, bad JSON or another JSON value raises
    :class:`RecordError` naming the file (``what`` says what was expected there)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: no such {what}") from None
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: expected a JSON object")
    return data


def read_record(path: Path, cls: type[R]) -> R:
    """Read a record written by :func:`write_record`; errors name the file."""
    path = Path(path)
    data = read_json_object(path)
    try:
        return load(cls, data)
    except RecordError as error:
        raise RecordError(f"{path}: {error}") from None


def _describe(error: BaseException) -> str:
    """One line from cattrs' nested exception groups: the innermost causes, joined."""
    if isinstance(error, cattrs.BaseValidationError):
        parts = [_describe(inner) for inner in error.exceptions]
        return "; ".join(parts)
    return f"{type(error).__name__}: {error}"
