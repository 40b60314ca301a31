"""STRING and BYTES functions of the function table (SUBSTRING, TO_BYTES, REGEXP_*, URL_*, ...).
Pure (no I/O).

Registered into `registry.FUNCTIONS`. Regular expressions are Java's; the common syntax is the
same in Python's ``re``, and REGEXP_REPLACE's ``$1`` group references are translated.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import re
import struct
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from headwater.engine.functions.signatures import Impl, Resolver, fixed, overloads
from headwater.engine.functions.types import (
    BIGINT,
    BYTES,
    DOUBLE,
    INTEGER,
    NULL,
    STRING,
    EvalFailure,
)
from headwater.sqlparse_ext.sqltypes import ArrayType, MapType, SqlType

# -- bytes and encodings -----------------------------------------------------------------------


def _ascii_text(data: bytes) -> str:
    """``new String(bytes, US_ASCII)``: bytes above 127 become U+FFFD."""
    return "".join(chr(b) if b < 128 else "\ufffd" for b in data)


def _ascii_bytes(text: str) -> bytes:
    """``text.getBytes(US_ASCII)``: characters above 127 become ``?``."""
    return text.encode("ascii", errors="replace")


def _hex_bytes(text: str) -> bytes:
    if len(text) % 2 or not re.fullmatch(r"[0-9a-fA-F]*", text):
        raise EvalFailure(f"Invalid hex string: {text}")
    return bytes.fromhex(text)


def _base64_bytes(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as error:
        raise EvalFailure(f"Illegal base64 character in: {text}") from error


_DECODERS: dict[str, Callable[[str], bytes]] = {
    "hex": _hex_bytes,
    "utf8": lambda text: text.encode("utf-8", errors="surrogatepass"),
    "ascii": _ascii_bytes,
    "base64": _base64_bytes,
}
_ENCODERS: dict[str, Callable[[bytes], str]] = {
    "hex": lambda data: data.hex().upper(),
    "utf8": lambda data: data.decode("utf-8", errors="replace"),
    "ascii": _ascii_text,
    "base64": lambda data: base64.b64encode(data).decode("ascii"),
}


def _encoding(name: str) -> str:
    key = name.lower()
    if key not in _DECODERS:
        raise EvalFailure(
            f"Unknown encoding type '{name}'. Supported formats are 'hex', 'utf8', "
            "'ascii', and 'base64'."
        )
    return key


def _to_bytes(text: str, encoding: str) -> bytes:
    return _DECODERS[_encoding(encoding)](text)


def _from_bytes(data: bytes, encoding: str) -> str:
    return _ENCODERS[_encoding(encoding)](data)


def _hex_strip(text: str) -> str:
    """ENCODE's hex input without a ``0x`` prefix (padded to whole bytes) or ``X'...'``."""
    if text.startswith("0x"):
        digits = text[2:]
        return "0" + digits if len(text) % 2 else digits
    if re.fullmatch(r"[xX]'.*'", text, re.DOTALL):
        return text[2:-1]
    return text


def _encode(text: str, source: str, target: str) -> str:
    """ENCODE: text in one of hex, utf8, ascii, base64, re-encoded in another."""
    kinds = ("hex", "utf8", "ascii", "base64")
    source, target = source.lower(), target.lower()
    if source not in kinds or target not in kinds or source == target:
        raise EvalFailure("Supported input and output encodings are: hex, utf8, ascii and base64")
    if source == "hex":
        data = _hex_bytes(_hex_strip(text))
    elif source == "base64":
        data = base64.b64decode(text + "=" * (-len(text) % 4), validate=False)
    else:
        data = _DECODERS[source](text)
    return _ENCODERS[target](data).lower() if target == "hex" else _ENCODERS[target](data)


def _number_from_bytes(fmt: str) -> Impl:
    size = struct.calcsize(fmt)

    def read(data: bytes, order: str = "BIG_ENDIAN") -> Any:
        if order.upper() not in ("BIG_ENDIAN", "LITTLE_ENDIAN"):
            raise EvalFailure(
                f"Byte order must be BIG_ENDIAN or LITTLE_ENDIAN. Unknown byte order '{order}'."
            )
        if len(data) != size:
            raise EvalFailure(f"Number of bytes must be equal to {size}, but found {len(data)}")
        prefix = ">" if order.upper() == "BIG_ENDIAN" else "<"
        return struct.unpack(prefix + fmt, data)[0]

    return read


def _from_bytes_function(fmt: str, result: SqlType) -> Resolver:
    read = _number_from_bytes(fmt)
    return overloads(fixed((BYTES,), result, read), fixed((BYTES, STRING), result, read))


# -- characters and lists of strings -----------------------------------------------------------


def _chr_code(code: int) -> str | None:
    return chr(code) if 0 <= code <= 0x10FFFF else None


def _chr_escape(text: str) -> str | None:
    """CHR of a ``\\uXXXX`` escape (several escapes make a surrogate pair)."""
    if len(text) < 6 or not text.startswith("\\u"):
        return None
    try:
        decoded = codecs.decode(text, "unicode_escape")
    except UnicodeDecodeError as error:
        raise EvalFailure(f"Invalid unicode escape: {text}") from error
    return decoded.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _concat_ws(separator: Any, *parts: Any) -> Any:
    if separator is None:
        return None
    return separator.join(p for p in parts if p is not None)


def _concat_ws_resolver(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    for t in (STRING, BYTES):
        if len(args) >= 2 and all(a in (t, NULL) for a in args):
            return t, _concat_ws
    return None


def _elt(n: int | None, *items: str | None) -> str | None:
    if n is None or not 1 <= n <= len(items):
        return None
    return items[n - 1]


def _field(value: str | None, *items: str | None) -> int:
    if value is None:
        return 0
    return next((i for i, item in enumerate(items, 1) if item == value), 0)


def _strings_after(first: SqlType, result: SqlType, impl: Impl) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if (
            not args
            or args[0] not in (first, NULL)
            or any(a not in (STRING, NULL) for a in args[1:])
        ):
            return None
        return result, impl

    return resolve


def _initcap(text: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in re.findall(r"\S+\s*", text.lower()))


def _split_to_map(text: str, entry_delimiter: str, kv_delimiter: str) -> dict[str, str] | None:
    if not entry_delimiter or not kv_delimiter or entry_delimiter == kv_delimiter:
        return None
    result: dict[str, str] = {}
    for entry in text.split(entry_delimiter):
        if kv_delimiter in entry:
            parts = entry.split(kv_delimiter)
            result[parts[0]] = parts[1]
    return result


# -- regular expressions -----------------------------------------------------------------------


def _pattern(regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as error:
        raise EvalFailure(f"Invalid regular expression pattern: {regex}") from error


def _regexp_extract(regex: str, text: str, group: int = 0) -> str | None:
    pattern = _pattern(regex)
    if group > pattern.groups:
        return None
    match = pattern.search(text)
    return None if match is None else match.group(group)


def _regexp_extract_all(regex: str, text: str, group: int = 0) -> list[str | None] | None:
    pattern = _pattern(regex)
    if group > pattern.groups:
        return None
    return [match.group(group) for match in pattern.finditer(text)]


def _java_replacement(replacement: str) -> Callable[[re.Match[str]], str]:
    """Java's ``replaceAll`` replacement text (``$1``, ``${name}``, ``\\$``) as a function."""
    parts: list[tuple[bool, str]] = []  # (is a group reference, text or group)
    i = 0
    while i < len(replacement):
        c = replacement[i]
        reference = re.match(r"\$(?:\{(\w+)\}|(\d+))", replacement[i:]) if c == "$" else None
        if c == "\\" and i + 1 < len(replacement):
            parts.append((False, replacement[i + 1]))
            i += 2
        elif c == "$" and reference is None:
            raise EvalFailure("Illegal group reference in replacement")
        elif reference is not None:
            parts.append((True, reference.group(1) or reference.group(2)))
            i += reference.end()
        else:
            parts.append((False, c))
            i += 1

    def expand(match: re.Match[str]) -> str:
        return "".join(
            (match.group(int(p) if p.isdigit() else p) or "") if is_group else p
            for is_group, p in parts
        )

    return expand


def _regexp_replace(text: str, regex: str, replacement: str) -> str:
    try:
        return _pattern(regex).sub(_java_replacement(replacement), text)
    except IndexError as error:
        raise EvalFailure(f"No group in pattern: {regex}") from error


def _regexp_split(text: str, regex: str) -> list[str]:
    """Pieces between the matches: as Java's ``Pattern.split`` when the pattern can match the
    empty string (no empty first piece, no empty trailing pieces), else as Guava's ``Splitter``
    (every piece kept)."""
    pattern = _pattern(regex)
    java_split = regex == "" or pattern.fullmatch("") is not None
    pieces, start = [], 0
    for match in pattern.finditer(text):
        if java_split and match.end() == 0:
            continue
        pieces.append(text[start : match.start()])
        start = match.end()
    pieces.append(text[start:])
    while java_split and len(pieces) > 1 and pieces[-1] == "":
        pieces.pop()
    return pieces


# -- URLs ---------------------------------------------------------------------------------------


def _url(text: str) -> urllib.parse.SplitResult:
    try:
        return urllib.parse.urlsplit(text)
    except ValueError as error:
        raise EvalFailure(f"URL input has invalid syntax: {text}") from error


def _host_and_port(text: str) -> tuple[str | None, int | None]:
    """Java ``URI``'s host (case kept, unlike ``urlsplit``) and port."""
    authority = _url(text).netloc.rsplit("@", 1)[-1]
    match = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::(\d*))?", authority)
    if match is None:
        return None, None
    port = match.group(2)
    return match.group(1) or None, int(port) if port else None


def _url_part(name: str) -> Impl:
    def extract(text: str) -> str | int | None:
        if name in ("host", "port"):
            return _host_and_port(text)[name == "port"]
        url = _url(text)
        if name == "protocol":
            return url.scheme or None
        if name == "path":
            return urllib.parse.unquote(url.path) if url.scheme or url.path else None
        if name == "query":
            return urllib.parse.unquote(url.query) if "?" in text.split("#", 1)[0] else None
        return urllib.parse.unquote(url.fragment) if "#" in text else None

    return extract


def _url_parameter(text: str, name: str) -> str | None:
    query = _url_part("query")(text)
    if query is None:
        return None
    for param in str(query).split("&"):
        key, sep, value = param.partition("=")
        if key == name:
            return value if sep else ""
    return None


def _url_encode(text: str) -> str:
    """Guava's form-parameter escaper: alphanumerics and ``.-*_`` kept, space as ``+``."""
    return urllib.parse.quote_plus(text, safe="*").replace("~", "%7E")


def _substring(s: Any, pos: int, length: int | None = None) -> Any:
    """STRING or BYTES: 1-based ``pos`` (negative: from the end), as ksqlDB's Substring."""
    size = len(s)
    start = max(size + pos, 0) if pos < 0 else max(min(pos - 1, size), 0)
    if length is None:
        return s[start:]
    return s[start : max(min(start + length, size), start)]


def _concat(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    for t in (STRING, BYTES):
        if args and all(a in (t, NULL) for a in args):
            empty: Any = "" if t == STRING else b""
            return t, lambda *xs, joiner=empty: joiner.join(x for x in xs if x is not None)
    return None


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _java_trim(s: str) -> str:
    return s.strip("".join(chr(c) for c in range(33)))


def _instr(s: str, sub: str, position: int = 1, occurrence: int = 1) -> int:
    """1-based index of the ``occurrence``-th ``sub`` from ``position`` (backwards when negative),
    0 when there is none (ksqlDB's INSTR, Oracle's rules)."""
    if position == 0 or occurrence <= 0:
        return 0
    if position > 0:
        index = position - 2
        for _ in range(occurrence):
            index = s.find(sub, index + 1)
            if index < 0:
                return 0
        return index + 1
    end = len(s) + position + len(sub)
    index = len(s)
    for _ in range(occurrence):
        index = s.rfind(sub, 0, min(end, index - 1 + len(sub)))
        if index < 0:
            return 0
    return index + 1


MAX_PADDED = 10_000_000
"""The longest text (or BYTES) LPAD/RPAD build: a record may not make a query hold gigabytes."""


def _pad(left: bool) -> Impl:
    def pad(s: Any, length: int, padding: Any) -> Any:
        if length < 0 or not padding:
            return None
        if length > MAX_PADDED:
            raise EvalFailure(f"cannot pad to {length} (at most {MAX_PADDED})")
        if length <= len(s):
            return s[:length]
        fill = (padding * (length // len(padding) + 1))[: length - len(s)]
        return fill + s if left else s + fill

    return pad


def _split(s: str, delimiter: str) -> list[str]:
    """An empty delimiter splits into characters; an empty text gives one empty value (Java's
    ``Pattern.compile("").split("")``)."""
    if delimiter == "":
        return list(s) if s else [""]
    return s.split(delimiter)


def _split_bytes(b: bytes, delimiter: bytes) -> list[bytes]:
    """ksqlDB's BytesUtils.split: an empty delimiter splits into single bytes (empty input: one
    empty value)."""
    if b and not delimiter:
        return [bytes((x,)) for x in b]
    return b.split(delimiter) if delimiter else [b""]


FUNCTIONS: dict[str, Resolver] = {
    "UCASE": fixed((STRING,), STRING, str.upper),
    "LCASE": fixed((STRING,), STRING, str.lower),
    "LEN": overloads(fixed((STRING,), INTEGER, _utf16_len), fixed((BYTES,), INTEGER, len)),
    "CONCAT": _concat,
    "SUBSTRING": overloads(
        fixed((STRING, INTEGER), STRING, _substring),
        fixed((STRING, INTEGER, INTEGER), STRING, _substring),
        fixed((BYTES, INTEGER), BYTES, _substring),
        fixed((BYTES, INTEGER, INTEGER), BYTES, _substring),
    ),
    "TRIM": fixed((STRING,), STRING, _java_trim),
    "LTRIM": fixed((STRING,), STRING, lambda s: s.lstrip("".join(chr(c) for c in range(33)))),
    "RTRIM": fixed((STRING,), STRING, lambda s: s.rstrip("".join(chr(c) for c in range(33)))),
    "REPLACE": fixed((STRING, STRING, STRING), STRING, lambda s, a, b: s.replace(a, b)),
    "INSTR": overloads(
        fixed((STRING, STRING), INTEGER, _instr),
        fixed((STRING, STRING, INTEGER), INTEGER, _instr),
        fixed((STRING, STRING, INTEGER, INTEGER), INTEGER, _instr),
    ),
    "LPAD": overloads(
        fixed((STRING, INTEGER, STRING), STRING, _pad(left=True)),
        fixed((BYTES, INTEGER, BYTES), BYTES, _pad(left=True)),
    ),
    "RPAD": overloads(
        fixed((STRING, INTEGER, STRING), STRING, _pad(left=False)),
        fixed((BYTES, INTEGER, BYTES), BYTES, _pad(left=False)),
    ),
    "SPLIT": overloads(
        fixed((STRING, STRING), ArrayType(STRING), _split),
        fixed((BYTES, BYTES), ArrayType(BYTES), _split_bytes),
    ),
    "TO_BYTES": fixed((STRING, STRING), BYTES, _to_bytes),
    "FROM_BYTES": fixed((BYTES, STRING), STRING, _from_bytes),
    "ENCODE": fixed((STRING, STRING, STRING), STRING, _encode),
    "INT_FROM_BYTES": _from_bytes_function("i", INTEGER),
    "BIGINT_FROM_BYTES": _from_bytes_function("q", BIGINT),
    "DOUBLE_FROM_BYTES": _from_bytes_function("d", DOUBLE),
    "CHR": overloads(fixed((INTEGER,), STRING, _chr_code), fixed((STRING,), STRING, _chr_escape)),
    "CONCAT_WS": _concat_ws_resolver,
    "ELT": _strings_after(INTEGER, STRING, _elt),
    "FIELD": _strings_after(STRING, INTEGER, _field),
    "INITCAP": fixed((STRING,), STRING, _initcap),
    "MD5": fixed((STRING,), STRING, lambda s: hashlib.md5(s.encode()).hexdigest()),
    "SPLIT_TO_MAP": fixed((STRING, STRING, STRING), MapType(STRING, STRING), _split_to_map),
    "REGEXP_EXTRACT": overloads(
        fixed((STRING, STRING), STRING, _regexp_extract),
        fixed((STRING, STRING, INTEGER), STRING, _regexp_extract),
    ),
    "REGEXP_EXTRACT_ALL": overloads(
        fixed((STRING, STRING), ArrayType(STRING), _regexp_extract_all),
        fixed((STRING, STRING, INTEGER), ArrayType(STRING), _regexp_extract_all),
    ),
    "REGEXP_REPLACE": fixed((STRING, STRING, STRING), STRING, _regexp_replace),
    "REGEXP_SPLIT_TO_ARRAY": fixed((STRING, STRING), ArrayType(STRING), _regexp_split),
    "URL_ENCODE_PARAM": fixed((STRING,), STRING, _url_encode),
    "URL_DECODE_PARAM": fixed((STRING,), STRING, urllib.parse.unquote_plus),
    "URL_EXTRACT_FRAGMENT": fixed((STRING,), STRING, _url_part("fragment")),
    "URL_EXTRACT_HOST": fixed((STRING,), STRING, _url_part("host")),
    "URL_EXTRACT_PATH": fixed((STRING,), STRING, _url_part("path")),
    "URL_EXTRACT_PORT": fixed((STRING,), INTEGER, _url_part("port")),
    "URL_EXTRACT_PROTOCOL": fixed((STRING,), STRING, _url_part("protocol")),
    "URL_EXTRACT_QUERY": fixed((STRING,), STRING, _url_part("query")),
    "URL_EXTRACT_PARAMETER": fixed((STRING, STRING), STRING, _url_parameter),
}

NULL_TOLERANT = frozenset({"CONCAT", "CONCAT_WS", "ELT", "FIELD"})
