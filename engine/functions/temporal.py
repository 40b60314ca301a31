"""DATE, TIME and TIMESTAMP functions of the function table (PARSE_TIMESTAMP, DATEADD, ...).
Pure, except that UNIX_DATE() and UNIX_TIMESTAMP() read the clock.

Registered into `registry.FUNCTIONS`. Patterns are Java ``DateTimeFormatter`` patterns (the common
letters, through `_strftime_pattern`); units (``DAYS``) arrive as INTERVAL UNIT
arguments holding their length in milliseconds.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import time
import zoneinfo
from collections.abc import Sequence

from headwater.engine.functions.signatures import Impl, Resolver, fixed, overloads
from headwater.engine.functions.types import (
    _DAY_MS,
    _EPOCH,
    BIGINT,
    DATE,
    INTEGER,
    INTERVAL_UNIT,
    STRING,
    TIME,
    TIMESTAMP,
    EvalFailure,
)
from headwater.sqlparse_ext.sqltypes import SqlType

_JAVA_PATTERN = re.compile(r"'(?:[^']|'')*'|([a-zA-Z])\1*")
_STRF = {
    "yyyy": "%Y",
    "yy": "%y",
    "MM": "%m",
    "MMM": "%b",
    "MMMM": "%B",
    "dd": "%d",
    "d": "%d",
    "HH": "%H",
    "H": "%H",
    "hh": "%I",
    "h": "%I",
    "mm": "%M",
    "m": "%M",
    "ss": "%S",
    "s": "%S",
    "SSS": "%f",
    "a": "%p",
    "EEE": "%a",
    "EEEE": "%A",
    "Z": "%z",
    "X": "%z",
    "XX": "%z",
    "XXX": "%z",
    "D": "%j",
    "M": "%m",
    "z": "%Z",
    "zz": "%Z",
    "zzz": "%Z",
}


@functools.lru_cache(maxsize=256)
def _strftime_pattern(java: str) -> str:
    """A Java ``DateTimeFormatter`` pattern (the common letters) as a ``strftime`` pattern.

    Raises:
        EvalFailure: For a letter sequence with no equivalent.
    """

    def convert(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("'"):
            return token[1:-1].replace("''", "'").replace("%", "%%") or "'"
        if token not in _STRF:
            raise EvalFailure(f"Unsupported date-time pattern letters: {token}")
        return _STRF[token]

    return _JAVA_PATTERN.sub(convert, java.replace("%", "%%"))


def _zone(name: str | None) -> dt.tzinfo:
    if name is None or name.upper() in ("UTC", "Z", "GMT"):
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
        raise EvalFailure(f"Unknown time zone: {name}") from error


def _format_ts(ms: int, pattern: str, zone: str | None = None) -> str:
    stamp = (_EPOCH + dt.timedelta(milliseconds=ms)).astimezone(_zone(zone))
    return stamp.strftime(_strftime_pattern(pattern).replace("%f", f"{ms % 1000:03d}"))


_ISO_SHAPES = {
    f"%Y-%m-%d{t}%H:%M:%S{f}": re.compile(rf"\d{{4}}-\d\d-\d\d{t}\d\d:\d\d:\d\d{g}", re.ASCII)
    for t in (" ", "T")
    for f, g in ((".%f", r"\.\d{3}"), ("", ""))
}
"""strptime patterns whose every match of the regex ``fromisoformat`` reads as strptime does
(fixed-width digits), ~30 times faster: event times are parsed once per record."""


def iso_shape(pattern: str) -> tuple[str, bool] | None:
    """(date-time separator, has milliseconds) when ``pattern`` is one of the fixed-width ISO
    shapes (``yyyy-MM-dd HH:mm:ss[.SSS]``, ``' '`` or ``'T'``), else None."""
    try:
        converted = _strftime_pattern(pattern)
    except EvalFailure:
        return None
    if converted not in _ISO_SHAPES:
        return None
    return converted[8], converted.endswith("%f")


_LOWER_ZULU = re.compile(r"(?<=\d)z(?![A-Za-z])")


#: The zone names Java's ``z`` pattern letters read (its TimeZoneNames' short names of the common
#: regions, and Java's ZoneId.SHORT_IDS): a name stands for its region, daylight time included.
_ZONE_NAMES = {
    **dict.fromkeys(("PST", "PDT", "PT"), "America/Los_Angeles"),
    **dict.fromkeys(("MST", "MDT", "MT"), "America/Denver"),
    **dict.fromkeys(("CST", "CDT", "CT"), "America/Chicago"),
    **dict.fromkeys(("EST", "EDT", "ET"), "America/New_York"),
    **dict.fromkeys(("AKST", "AKDT"), "America/Anchorage"),
    "HST": "Pacific/Honolulu",
    **dict.fromkeys(("GMT", "UTC", "UT", "Z"), "UTC"),
    **dict.fromkeys(("CET", "CEST"), "Europe/Paris"),
    "JST": "Asia/Tokyo",
    "IST": "Asia/Kolkata",
    "CTT": "Asia/Shanghai",
    "AET": "Australia/Sydney",
}
_TRAILING_ZONE = re.compile(r"([A-Za-z][A-Za-z0-9_/+-]*)$")


def _named_zone(text: str, converted: str) -> tuple[str, str, dt.tzinfo] | None:
    """For a pattern ending in a zone name (``zzz``): the text and pattern without it, and the
    zone the name stands for; None when the text ends in no known zone name."""
    found = _TRAILING_ZONE.search(text)
    if found is None:
        return None
    name = found.group(1)
    region = _ZONE_NAMES.get(name.upper(), name)
    try:
        zone = zoneinfo.ZoneInfo(region)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
    return text[: found.start()], converted[:-2], zone


def _parse_ts(text: str, pattern: str, zone: str | None = None) -> int:
    converted = _strftime_pattern(pattern)
    if "%z" in converted:  # ksqlDB parses case-insensitively: 'z' is UTC as 'Z' is
        text = _LOWER_ZULU.sub("Z", text)
    if converted.endswith("%Z"):  # Java reads zone names strptime does not know (PST)
        named = _named_zone(text, converted)
        if named is not None:
            rest, rest_pattern, named_zone = named
            try:
                local = dt.datetime.strptime(rest, rest_pattern)
            except ValueError as error:
                raise EvalFailure(
                    f"Failed to parse timestamp '{text}' with formatter '{pattern}'"
                ) from error
            stamp = local.replace(tzinfo=named_zone, fold=0)
            return (stamp - _EPOCH) // dt.timedelta(milliseconds=1)
    try:
        shape = _ISO_SHAPES.get(converted)
        if shape is not None and shape.fullmatch(text):
            stamp = dt.datetime.fromisoformat(text)
        else:
            stamp = dt.datetime.strptime(text, converted)
    except ValueError as error:
        raise EvalFailure(
            f"Failed to parse timestamp '{text}' with formatter '{pattern}'"
        ) from error
    if stamp.tzinfo is None:
        tz = _zone(zone)
        stamp = (
            stamp.replace(tzinfo=tz)
            if isinstance(tz, dt.timezone)
            else stamp.replace(tzinfo=tz, fold=0)
        )
    return (stamp - _EPOCH) // dt.timedelta(milliseconds=1)


_EPOCH_DATE = dt.date(1970, 1, 1)
_DATE_LETTERS = re.compile(r"'(?:[^']|'')*'|([yuMLdDEeQqwWYGg])")


def _has_date_field(pattern: str) -> bool:
    return any(m.group(1) for m in _DATE_LETTERS.finditer(pattern))


_UNCONVERTED = "unconverted data remains: "


def _strptime(text: str, pattern: str, what: str, prefix: bool = False) -> dt.datetime:
    """``text`` parsed with a Java pattern; with ``prefix``, text after the match is ignored
    (as ``java.text.DateFormat.parse`` does)."""
    try:
        return dt.datetime.strptime(text, _strftime_pattern(pattern))
    except ValueError as error:
        message = str(error)
        if prefix and message.startswith(_UNCONVERTED):
            rest = len(message) - len(_UNCONVERTED)
            return _strptime(text[:-rest], pattern, what)
        raise EvalFailure(f"Failed to parse {what} '{text}' with formatter '{pattern}'") from error


def _strftime(moment: dt.datetime | dt.date, millis: int, pattern: str) -> str:
    return moment.strftime(_strftime_pattern(pattern).replace("%f", f"{millis:03d}"))


def _days(date: dt.date) -> int:
    return (date - _EPOCH_DATE).days


def _date(days: int) -> dt.date:
    return _EPOCH_DATE + dt.timedelta(days=days)


def _parse_date(text: str, pattern: str) -> int:
    """PARSE_DATE: a date-only pattern (a time of day other than midnight fails)."""
    moment = _strptime(text, pattern, "date", prefix=True)
    if moment.time() != dt.time():
        raise EvalFailure("Date format contains time field.")
    return _days(moment.date())


def _string_to_date(text: str, pattern: str) -> int:
    return _days(_strptime(text, pattern, "date").date())


def _format_date(days: int, pattern: str) -> str:
    return _strftime(_date(days), 0, pattern)


def _parse_time(text: str, pattern: str) -> int:
    """PARSE_TIME: a time-only pattern, as ms of the day."""
    if _has_date_field(pattern):
        raise EvalFailure("Time format contains date field.")
    moment = _strptime(text, pattern, "time")
    return ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1000 + (
        moment.microsecond // 1000
    )


def _format_time(ms: int, pattern: str) -> str:
    moment = dt.datetime.combine(_EPOCH_DATE, dt.time()) + dt.timedelta(milliseconds=ms)
    return _strftime(moment, ms % 1000, pattern)


def _toward_zero(ms: int) -> int:
    """Whole days in ``ms``, truncated toward zero (``TimeUnit.MILLISECONDS.toDays``)."""
    days = abs(ms) // _DAY_MS
    return days if ms >= 0 else -days


def _shift(target: SqlType, sign: int) -> Resolver:
    """DATEADD/DATESUB, TIMEADD/TIMESUB, TIMESTAMPADD/TIMESTAMPSUB: (unit, count, value)."""

    def shift(unit_ms: int, count: int, value: int) -> int:
        delta = sign * unit_ms * count
        if target == DATE:
            return _toward_zero(value * _DAY_MS + delta)
        if target == TIME:
            return (value + delta) % _DAY_MS
        return value + delta

    return fixed((INTERVAL_UNIT, INTEGER, target), target, shift)


_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")


def _offset_ms(zone: str, at_ms: int) -> int:
    """The UTC offset of a zone (``+0200``, ``UTC+2``, ``America/New_York``) at an instant."""
    fixed = _OFFSET.fullmatch(zone)
    if fixed is not None:
        sign, hours, minutes, seconds = fixed.groups()
        total = (int(hours) * 60 + int(minutes or 0)) * 60 + int(seconds or 0)
        return (-1 if sign == "-" else 1) * total * 1000
    instant = _EPOCH + dt.timedelta(milliseconds=at_ms)
    offset = instant.astimezone(_zone(zone)).utcoffset() or dt.timedelta()
    return offset // dt.timedelta(milliseconds=1)


def _convert_tz(ms: int, source: str, target: str) -> int:
    return ms + _offset_ms(target, ms) - _offset_ms(source, ms)


def _unix_date(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if not args:
        return INTEGER, lambda: _days(dt.date.today())
    return fixed((DATE,), INTEGER, lambda days: days)(args)


def _unix_timestamp(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if not args:
        return BIGINT, lambda: time.time_ns() // 1_000_000
    return fixed((TIMESTAMP,), BIGINT, lambda ms: ms)(args)


FUNCTIONS: dict[str, Resolver] = {
    "TIMESTAMPTOSTRING": overloads(
        fixed((BIGINT, STRING), STRING, _format_ts),
        fixed((BIGINT, STRING, STRING), STRING, _format_ts),
    ),
    "STRINGTOTIMESTAMP": overloads(
        fixed((STRING, STRING), BIGINT, _parse_ts),
        fixed((STRING, STRING, STRING), BIGINT, _parse_ts),
    ),
    "FORMAT_TIMESTAMP": overloads(
        fixed((TIMESTAMP, STRING), STRING, _format_ts),
        fixed((TIMESTAMP, STRING, STRING), STRING, _format_ts),
    ),
    "PARSE_TIMESTAMP": overloads(
        fixed((STRING, STRING), TIMESTAMP, _parse_ts),
        fixed((STRING, STRING, STRING), TIMESTAMP, _parse_ts),
    ),
    "STRINGTODATE": fixed((STRING, STRING), INTEGER, _string_to_date),
    "PARSE_DATE": fixed((STRING, STRING), DATE, _parse_date),
    "PARSE_TIME": fixed((STRING, STRING), TIME, _parse_time),
    "DATETOSTRING": fixed((INTEGER, STRING), STRING, _format_date),
    "FORMAT_DATE": fixed((DATE, STRING), STRING, _format_date),
    "FORMAT_TIME": fixed((TIME, STRING), STRING, _format_time),
    "DATEADD": _shift(DATE, 1),
    "DATESUB": _shift(DATE, -1),
    "TIMEADD": _shift(TIME, 1),
    "TIMESUB": _shift(TIME, -1),
    "TIMESTAMPADD": _shift(TIMESTAMP, 1),
    "TIMESTAMPSUB": _shift(TIMESTAMP, -1),
    "CONVERT_TZ": fixed((TIMESTAMP, STRING, STRING), TIMESTAMP, _convert_tz),
    "FROM_DAYS": fixed((INTEGER,), DATE, lambda days: days),
    "FROM_UNIXTIME": fixed((BIGINT,), TIMESTAMP, lambda ms: ms),
    "UNIX_DATE": _unix_date,
    "UNIX_TIMESTAMP": _unix_timestamp,
}

NULL_TOLERANT: frozenset[str] = frozenset()


_PARTIAL_TIME = "HH:mm:ss.SSS"
_FULL = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})")
_ZONE = re.compile(r"([+-])(\d{2}):?(\d{2})?")


def parse_partial_timestamp(text: str) -> int:
    """Epoch milliseconds of a timestamp string as ksqlDB's PartialStringToTimestampParser reads
    one (window bounds in pull queries): ``yyyy-MM-dd'T'HH:mm:ss.SSS`` with the time's missing
    right part filled with zeros (``2020-02-22T23:45``), a date alone completed to its first day
    (``2020``, ``2020-02``), an optional ``Z`` or numeric zone (``-0100``); hour 24 is the next
    day's midnight.

    Raises:
        ValueError: with ksqlDB's message, if the text is none of these.
    """
    help_text = (
        "\nRequired format is: \"yyyy-MM-dd'T'HH:mm:ss.SSS\", with an optional numeric "
        "4-digit timezone, for example: '2020-05-26T23:59:58.000' or with tz: "
        "'2020-05-26T23:59:58.000+0200'. A trailing 'Z' instead of tz indicates the zero "
        'UTC offset. Partials are also supported, for example "2020-05-26"'
    )
    zone = ""
    if "T" in text:
        date, _, rest = text.partition("T")
        for sign in "+-":
            if sign in rest:
                zone = rest[rest.index(sign) :]
                break
        time_text = rest[: len(rest) - len(zone)].removesuffix("Z")
    else:
        parts = text.split("-")
        date = text + ("-01-01" if len(parts) == 1 else "-01" if len(parts) == 2 else "")
        time_text = ""
    if len(time_text) < len(_PARTIAL_TIME):
        filler = re.sub("[a-zA-Z]", "0", _PARTIAL_TIME[len(time_text) :])
        time_text += filler
    found = _FULL.fullmatch(f"{date}T{time_text}")
    offset_ms = 0
    if zone:
        zoned = _ZONE.fullmatch(zone)
        if zoned is None:
            raise ValueError(f"Failed to parse timezone '{zone}'")
        offset_ms = (
            (int(zoned[2]) * 60 + int(zoned[3] or 0)) * 60_000 * (-1 if zoned[1] == "-" else 1)
        )
    if found is None:
        raise ValueError(
            f"Failed to parse timestamp '{text}': Text '{date}T{time_text}' could not "
            f"be parsed{help_text}"
        )
    year, month, day, hour, minute, second, milli = (int(g) for g in found.groups())
    extra_day = 0
    if hour == 24 and minute == second == milli == 0:
        hour, extra_day = 0, 1
    try:
        moment = dt.datetime(year, month, day, hour, minute, second, milli * 1000, tzinfo=dt.UTC)
    except ValueError as exc:
        raise ValueError(f"Failed to parse timestamp '{text}': {exc}{help_text}") from None
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    millis = (moment - epoch) // dt.timedelta(milliseconds=1)
    return millis + extra_day * 86_400_000 - offset_ms


_LOCAL_TIME = re.compile(r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?")


def time_of_text(text: str) -> int:
    """A TIME (ms of the day) from text, as Java's ``LocalTime.parse`` (``HH:mm[:ss[.fraction]]``).

    Raises:
        ValueError: with ksqlDB's message.
    """
    found = _LOCAL_TIME.fullmatch(text)
    if found is None or int(found[1]) > 23 or int(found[2]) > 59 or int(found[3] or 0) > 59:
        raise ValueError(f"Failed to parse time '{text}': Text '{text}' could not be parsed")
    fraction = (found[4] or "0").ljust(3, "0")[:3]
    return ((int(found[1]) * 60 + int(found[2])) * 60 + int(found[3] or 0)) * 1000 + int(fraction)


def date_of_text(text: str) -> int:
    """A DATE (days since the epoch) from text, as ksqlDB's ``SqlTimeTypes.parseDate``: a partial
    date completed to its first day (``2020``, ``2020-02``), then ``yyyy-MM-dd``.

    Raises:
        ValueError: with ksqlDB's message.
    """
    parts = text.split("-")
    full = text + ("-01-01" if len(parts) == 1 else "-01" if len(parts) == 2 else "")
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", full):
            raise ValueError(full)
        return _days(dt.date.fromisoformat(full))
    except ValueError:
        raise ValueError(
            f"Failed to parse date '{text}': Text '{full}' could not be parsed"
        ) from None
