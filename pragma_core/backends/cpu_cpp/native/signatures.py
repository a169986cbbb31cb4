"""Which functions a kernel's source exports, and the C types of their parameters.

ctypes cannot see a shared library's signatures, so they are read from the source instead. For
C++, the exported functions are those declared or defined ``extern "C"``, singly or in an
``extern "C" { ... }`` block; for C, every top-level function definition that is not ``static``.
:func:`parse_signatures` gives one :class:`FunctionSignature` per function with a
:class:`Parameter` for each argument: a pointer parameter carries the torch dtype its tensor must
have (``None`` for ``void*``, which takes any), a scalar its C type.

This is a reader for the declarations kernels use, not a C parser: comments, string contents and
preprocessor lines are blanked out first (in place, so line numbers stay right), macros are not
expanded, and a type it does not know is a :class:`SignatureError` naming the function and type.
"""

from __future__ import annotations

import re

import attrs
from attrs import validators as v

from ....errors import PragmaError
from ....records import frozen_tuple

__all__ = [
    "FunctionSignature",
    "Parameter",
    "SignatureError",
    "parse_signatures",
    "POINTER_DTYPES",
    "SCALAR_TYPES",
    "RETURN_TYPES",
]

# Pointer base type -> the torch dtype of the tensor passed for it (None: any dtype).
POINTER_DTYPES: dict[str, str | None] = {
    "float": "float32",
    "double": "float64",
    "int64_t": "int64",
    "long": "int64",
    "long long": "int64",
    "int32_t": "int32",
    "int": "int32",
    "int16_t": "int16",
    "short": "int16",
    "int8_t": "int8",
    "signed char": "int8",
    "uint8_t": "uint8",
    "unsigned char": "uint8",
    "bool": "bool",
    "void": None,
}
SCALAR_TYPES = frozenset(
    {
        "float",
        "double",
        "bool",
        "int",
        "int32_t",
        "int64_t",
        "long",
        "long long",
        "short",
        "int16_t",
        "int8_t",
        "signed char",
        "unsigned",
        "uint32_t",
        "uint64_t",
        "unsigned long",
        "unsigned long long",
        "unsigned short",
        "uint16_t",
        "uint8_t",
        "unsigned char",
        "size_t",
        "ptrdiff_t",
    }
)
RETURN_TYPES = SCALAR_TYPES | {"void"}

_NAMED_TYPES = {
    "float",
    "double",
    "void",
    "bool",
    "_Bool",
    "size_t",
    "ptrdiff_t",
    "ssize_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
}
_INTEGER_WORDS = {"signed", "unsigned", "short", "long", "int", "char"}
_IGNORED_WORDS = {"const", "volatile", "restrict", "__restrict__", "__restrict", "struct", "register"}
_SUPPORTED = (
    "a pointer to float, double, int, int64_t, int16_t, int8_t, uint8_t, bool or void, "
    "or a scalar such as int64_t, int, size_t, float, double or bool"
)
_SPECIFIERS = {"extern", "inline", "__inline", "__inline__", "constexpr", "__extension__"}


@attrs.frozen(kw_only=True)
class Parameter:
    """One parameter: ``ctype`` is its base type (``float`` for ``const float*``).

    ``name`` is empty for an unnamed parameter. ``const`` is the constness of what a pointer points
    to; ``dtype`` is the torch dtype a pointer's tensor must have, None for ``void*`` and scalars.
    """

    name: str = attrs.field(validator=v.instance_of(str))
    ctype: str = attrs.field(validator=v.instance_of(str))
    pointer: bool = attrs.field(validator=v.instance_of(bool))
    const: bool = attrs.field(default=False, validator=v.instance_of(bool))
    dtype: str | None = None

    @property
    def spelling(self) -> str:
        """The type as a person writes it: ``const float*``, ``int64_t``."""
        if not self.pointer:
            return self.ctype
        return f"{'const ' if self.const else ''}{self.ctype}*"


@attrs.frozen(kw_only=True)
class FunctionSignature:
    """An exported function: its name, return type (``void`` or a scalar type) and parameters."""

    name: str = attrs.field(validator=v.and_(v.instance_of(str), v.min_len(1)))
    returns: str = attrs.field(validator=v.in_(RETURN_TYPES))
    params: tuple[Parameter, ...] = attrs.field(default=(), converter=frozen_tuple)
    line: int | None = None

    def __str__(self) -> str:
        params = ", ".join(f"{p.spelling} {p.name}".rstrip() for p in self.params)
        return f"{self.returns} {self.name}({params})"


class SignatureError(PragmaError):
    """An exported function has a type that cannot be passed from Python, or could not be read."""


def parse_signatures(
    source: str, *, language: str = "c++", display_name: str | None = None
) -> tuple[FunctionSignature, ...]:
    """The functions ``source`` exports, in source order, one per name."""
    if language not in ("c++", "c"):
        raise ValueError(f"language must be 'c++' or 'c', got {language!r}")
    shown = display_name or ("kernel.cpp" if language == "c++" else "kernel.c")
    text = _blank_out(source)
    if language == "c++":
        items = _extern_c_items(text)
    else:
        items = [item for item in _items(text, 0, len(text)) if item[2]]  # definitions only
    found: dict[str, FunctionSignature] = {}
    for header, position, has_body in items:
        start = position + len(header) - len(header.lstrip())
        signature = _parse_function(header, text.count("\n", 0, start) + 1, shown)
        if signature is None:
            continue
        if signature.name not in found or has_body:  # a definition's parameter names win
            found[signature.name] = signature
    return tuple(sorted(found.values(), key=lambda s: s.line or 0))


# -- blanking out what is not declarations --------------------------------------------------------


def _blank_out(source: str) -> str:
    """``source`` with comments, string contents and preprocessor lines turned to spaces.

    Newlines stay, so positions and line numbers are those of the source. A string literal keeps
    its contents only when it is ``"C"``, which is what ``extern "C"`` needs.
    """
    out = list(source)
    i, n = 0, len(source)
    line_start = True
    while i < n:
        c = source[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line, with its backslash continuations
            j = i
            while j < n and not (source[j] == "\n" and source[j - 1] != "\\"):
                j += 1
            _spaces(out, i, j)
            i = j
            continue
        if not c.isspace():
            line_start = False
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            _spaces(out, i, j)
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            _spaces(out, i, j)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            if source[i + 1 : j] != "C":
                _spaces(out, i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _spaces(out: list[str], start: int, end: int) -> None:
    for k in range(start, min(end, len(out))):
        if out[k] != "\n":
            out[k] = " "


# -- finding declarations ------------------------------------------------------------------------

_EXTERN_C = re.compile(r'\bextern\s*"C"')


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    """Index of the bracket closing the one at ``start`` (the end of text if it never closes)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


def _items(text: str, start: int, end: int, *, first_only: bool = False) -> list[tuple[str, int, bool]]:
    """The top-level declarations between ``start`` and ``end``: (header, position, has body).

    A declaration ends at a ``;`` or with a braced body; the header is the text before either.
    """
    items: list[tuple[str, int, bool]] = []
    chunk = start
    parens = 0
    i = start
    while i < end:
        c = text[i]
        if c == "(":
            parens += 1
        elif c == ")":
            parens = max(parens - 1, 0)
        elif c == ";" and parens == 0:
            items.append((text[chunk:i], chunk, False))
            chunk = i + 1
        elif c == "{" and parens == 0:
            items.append((text[chunk:i], chunk, True))
            i = _matching(text, i, "{", "}")
            chunk = i + 1
        if first_only and items:
            return items
        i += 1
    return items


def _extern_c_items(text: str) -> list[tuple[str, int, bool]]:
    items: list[tuple[str, int, bool]] = []
    done_until = 0
    for match in _EXTERN_C.finditer(text):
        if match.start() < done_until:
            continue  # inside an extern "C" block already read
        after = match.end()
        while after < len(text) and text[after].isspace():
            after += 1
        if after < len(text) and text[after] == "{":
            close = _matching(text, after, "{", "}")
            items += _items(text, after + 1, close)
            done_until = close
        else:
            items += _items(text, after, len(text), first_only=True)
    return items


# -- reading one declaration ---------------------------------------------------------------------

_NAME = re.compile(r"([A-Za-z_]\w*)\s*$")


def _strip_attributes(text: str) -> str:
    """Drop ``__attribute__((...))``, ``__declspec(...)``, ``alignas(...)`` and ``[[...]]``."""
    text = re.sub(r"\[\[.*?\]\]", " ", text, flags=re.S)
    while True:
        match = re.search(r"\b(?:__attribute__|__declspec|alignas)\s*\(", text)
        if not match:
            return text
        close = _matching(text, match.end() - 1, "(", ")")
        text = text[: match.start()] + " " + text[close + 1 :]


def _parse_function(header: str, line: int, shown: str) -> FunctionSignature | None:
    """The signature declared by ``header``, or None when it declares no exported function."""
    header = _EXTERN_C.sub(" ", _strip_attributes(header)).strip()
    header = re.sub(r"(\b(noexcept|throw\s*\(\s*\))\s*)+$", "", header).strip()
    if not header.endswith(")") or "=" in header.split("(")[0]:
        return None
    opening = _matching_backwards(header)
    if opening is None:
        return None
    name_match = _NAME.search(header[:opening])
    if name_match is None:
        return None
    name = name_match.group(1)
    prefix_words = header[: name_match.start()].split()
    if not prefix_words or prefix_words[0] in ("typedef", "using", "return") or "::" in name:
        return None
    if "static" in prefix_words:
        return None  # internal linkage: not in the library's symbol table
    where = f"{shown}:{line}: {name}()"
    returns_text = " ".join(w for w in prefix_words if w not in _SPECIFIERS)
    if "(" in returns_text or ")" in returns_text or "operator" in prefix_words:
        return None
    returns, pointer, _const, _name = _parse_type(returns_text, where, "return type")
    if pointer:
        raise SignatureError(
            f"{where}: returns a pointer ({returns_text}), which cannot become a tensor; "
            "write the result into an output tensor passed as a pointer parameter instead"
        )
    if returns not in RETURN_TYPES:
        raise SignatureError(
            f"{where}: unknown return type {returns_text!r}; return void or a scalar such as "
            "int64_t, int, float or double (macros are not expanded: spell the type out)"
        )
    params = _parse_params(header[opening + 1 : -1], where)
    return FunctionSignature(name=name, returns=returns, params=params, line=line)


def _matching_backwards(header: str) -> int | None:
    depth = 0
    for i in range(len(header) - 1, -1, -1):
        if header[i] == ")":
            depth += 1
        elif header[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return None


def _split_params(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for c in text:
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth = max(depth - 1, 0)
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return [part.strip() for part in parts]


def _parse_params(text: str, where: str) -> tuple[Parameter, ...]:
    parts = _split_params(text)
    if parts == [""] or parts == ["void"]:
        return ()
    params = []
    for index, part in enumerate(parts, 1):
        declaration = part.split("=")[0].strip()  # a C++ default argument
        what = f"parameter {index}"
        if declaration == "...":
            raise SignatureError(
                f"{where}: {what} is '...'; variadic functions cannot be called with checked arguments"
            )
        ctype, pointer, const, name = _parse_type(declaration, where, what)
        if name:
            what = f"parameter {index} {name!r}"
        if pointer and ctype not in POINTER_DTYPES:
            raise SignatureError(
                f"{where}: {what} has type {declaration!r}, a pointer to a type with no torch "
                "dtype; point to float, double, int, int64_t, int16_t, int8_t, uint8_t, bool or void"
            )
        if not pointer and ctype not in SCALAR_TYPES:
            raise SignatureError(
                f"{where}: {what} has unknown type {declaration!r}; use {_SUPPORTED} "
                "(macros are not expanded: spell the type out)"
            )
        params.append(
            Parameter(
                name=name, ctype=ctype, pointer=pointer, const=const, dtype=POINTER_DTYPES[ctype] if pointer else None
            )
        )
    return tuple(params)


_TOKEN = re.compile(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|\[[^\]]*\]|\S")


def _parse_type(text: str, where: str, what: str) -> tuple[str, bool, bool, str]:
    """(base type, is pointer, pointee is const, name) of a declaration like ``const float* x``."""
    tokens = [re.sub(r"\s+", "", t) for t in _TOKEN.findall(text)]
    tokens = [t.removeprefix("std::") for t in tokens]
    stars = tokens.count("*")
    arrays = [t for t in tokens if t.startswith("[")]
    odd = [t for t in tokens if not (t == "*" or t.startswith("[") or re.fullmatch(r"[A-Za-z_]\w*", t))]
    if odd or stars + len(arrays) > 1:
        reason = "references" if "&" in odd else "pointers to pointers" if stars + len(arrays) > 1 else None
        reason = reason or "this kind of type"
        raise SignatureError(
            f"{where}: {what} has type {text!r}; {reason} cannot be passed from Python; "
            "use a plain pointer (float* x) or a scalar (int64_t n)"
        )
    pointer = stars + len(arrays) == 1
    if stars:
        before = tokens[: tokens.index("*")]
        after = [t for t in tokens[tokens.index("*") + 1 :] if t not in _IGNORED_WORDS]
    else:
        before = [t for t in tokens if not t.startswith("[")]
        after = []
    const = pointer and "const" in before
    words = [t for t in before if t not in _IGNORED_WORDS]
    name = ""
    if after:
        name = after[-1]
    elif len(words) > 1 and words[-1] not in _NAMED_TYPES | _INTEGER_WORDS:
        name = words.pop()
    if not words:
        raise SignatureError(f"{where}: {what} {text!r} has no type")
    return _canonical(words), pointer, const, name


def _canonical(words: list[str]) -> str:
    """One spelling per type: ``long int`` -> ``long``, ``unsigned int`` -> ``unsigned``."""
    if len(words) == 1 and words[0] in _NAMED_TYPES:
        return {"_Bool": "bool", "ssize_t": "ptrdiff_t"}.get(words[0], words[0])
    if not set(words) <= _INTEGER_WORDS:
        return " ".join(words)
    unsigned = "unsigned" in words
    sign = "unsigned " if unsigned else ""
    if "char" in words:
        return f"{sign}char" if unsigned else ("signed char" if "signed" in words else "char")
    if "short" in words:
        return f"{sign}short"
    longs = words.count("long")
    if longs >= 2:
        return f"{sign}long long"
    if longs == 1:
        return f"{sign}long"
    return "unsigned" if unsigned else "int"
