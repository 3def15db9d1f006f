"""Sidestream's keys: order-preserving K1 (text, S) and B1 (binary, B) tuples, and hierarchical keys.

A key is a tuple of typed components, each ascending or descending. Its encoding compares, byte
by byte as DynamoDB compares S and B values, the way the tuple compares: numbers by exact value,
strings by code point, bytes as unsigned bytes, dates and datetimes chronologically, and across
types ``None < bytes < date/datetime < False < number < str < True``. A shorter tuple sorts
before its extensions, and a tuple's prefix encodes to a prefix of its key. The formats are
specified in ``docs/formats.md`` ("K1: text keys (S)", "B1: binary keys (B)") and implemented,
byte for byte, by the Rust crate ``shared/key-codec``.

Components are Python values: ``None``, ``bool``, numbers (``int``, ``Decimal``, or ``float`` by
its shortest repr), ``str``, ``bytes``, ``datetime.date`` and timezone-aware
``datetime.datetime`` (stored in UTC). Wrap a value in :class:`Desc` to sort it descending.
Decoding returns numbers as ``Decimal`` and datetimes in UTC, and accepts only canonical keys,
so whatever decodes encodes back to the same key.

Python's ``datetime`` holds years 1 to 9999 and microseconds; the formats hold year 0 and
nanoseconds too. A key holding such a value raises :class:`UnrepresentableValue` on decoding.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple, NoReturn, Union

Value = Union[None, bool, int, Decimal, float, str, bytes, dt.date]
"""A component's value (``datetime.datetime`` is a ``datetime.date``)."""


@dataclass(frozen=True)
class Desc:
    """A component that sorts descending: largest first."""

    value: Value


Component = Union[Value, Desc]
"""A component: a value, ascending, or a :class:`Desc` one."""

SORT_KEY_MAX_BYTES = 1024
"""The longest sort key DynamoDB accepts."""
PARTITION_KEY_MAX_BYTES = 2048
"""The longest partition key DynamoDB accepts."""
MAX_DIGITS = 38
"""The most significant digits of a DynamoDB number."""
MIN_EXPONENT = -130
"""The smallest scientific exponent of a non-zero number (1E-130)."""
MAX_EXPONENT = 125
"""The largest scientific exponent (9.99…9E+125)."""


class KeyCodecError(ValueError):
    """A value that cannot be encoded, or a key that cannot be decoded."""


class InvalidNumber(KeyCodecError):
    """A number outside DynamoDB's Number type."""

    def __init__(self, value: object, reason: str) -> None:
        super().__init__(f"invalid number {value!r}: {reason}")
        self.reason = reason


class InvalidTime(KeyCodecError):
    """A date or datetime that cannot be a key component."""


class MalformedKey(KeyCodecError):
    """Input that is not a canonical key of the form: ``offset`` is the byte where it fails."""

    def __init__(self, form: str, offset: int, reason: str) -> None:
        super().__init__(f"malformed {form} key at byte {offset}: {reason}")
        self.form = form
        self.offset = offset
        self.reason = reason


class UnrepresentableValue(KeyCodecError):
    """A well-formed key holding a date or time Python's ``datetime`` cannot hold."""


class MalformedHierKey(KeyCodecError):
    """A hierarchical key whose segments cannot be unescaped."""


# ---------------------------------------------------------------------------------------------
# Numbers


class _Number(NamedTuple):
    """A number in canonical form: ``d.ddd… × 10**exponent``, digits without leading or trailing
    zeros (empty for zero)."""

    negative: bool
    digits: str
    exponent: int


_ZERO = _Number(False, "", 0)
_NUMBER_SYNTAX = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")
_NOT_FINITE = "NaN and Infinity are not DynamoDB numbers (they must be finite decimals)"


def _checked(negative: bool, digits: str, exponent: int, value: object) -> _Number:
    """``0.digits`` placed so that its first digit has ``exponent``: trailing zeros dropped, the
    digit count and range checked."""
    digits = digits.rstrip("0")
    if not digits:
        return _ZERO
    if len(digits) > MAX_DIGITS:
        raise InvalidNumber(value, f"{len(digits)} significant digits; DynamoDB allows at most {MAX_DIGITS}")
    if exponent < MIN_EXPONENT:
        raise InvalidNumber(value, "magnitude below 1E-130, the smallest non-zero DynamoDB number")
    if exponent > MAX_EXPONENT:
        raise InvalidNumber(
            value,
            "magnitude above 9.9999999999999999999999999999999999999E+125, the largest DynamoDB number",
        )
    return _Number(negative, digits, exponent)


def _number(value: int | Decimal | float) -> _Number:
    """The canonical form of a Python number."""
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not exact.is_finite():
        raise InvalidNumber(value, _NOT_FINITE)
    sign, coefficient, exponent = exact.as_tuple()
    digits = "".join(map(str, coefficient)).lstrip("0")
    return _checked(sign == 1, digits, int(exponent) + len(digits) - 1, value)


def _decimal(number: _Number) -> Decimal:
    if not number.digits:
        return Decimal(0)
    coefficient = tuple(int(d) for d in number.digits)
    return Decimal((int(number.negative), coefficient, number.exponent - len(number.digits) + 1))


def parse_number(text: str) -> Decimal:
    """Parses DynamoDB's number syntax (``1.5``, ``-0.05``, ``15E-1``) exactly, as the indexer
    reads an N attribute; raises :class:`InvalidNumber` for anything DynamoDB would not store."""
    unsigned = text.lstrip("+-") if text[:1] in "+-" else text
    if unsigned.lower() in ("nan", "inf", "infinity"):
        raise InvalidNumber(text, _NOT_FINITE)
    match = _NUMBER_SYNTAX.fullmatch(text)
    if match is None or not (match[2] or match[3]):
        raise InvalidNumber(
            text, "not a decimal number (expected digits, an optional '.', and an optional exponent like E-5)"
        )
    whole, fraction = match[2], match[3] or ""
    mantissa = whole + fraction
    first = len(mantissa) - len(mantissa.lstrip("0"))
    exponent = int(match[4] or 0) + len(whole) - first - 1
    return _decimal(_checked(match[1] == "-", mantissa[first:], exponent, text))


def format_number(value: int | Decimal | float) -> str:
    """A number as Sidestream writes it (the Rust ``Number``'s ``Display``): plain for moderate
    exponents (``1234.5``, ``0.0005``), scientific beyond (``1.5E+40``, ``1E-130``)."""
    negative, digits, e = _number(value)
    if not digits:
        return "0"
    sign = "-" if negative else ""
    if 0 <= e < 40:
        whole = e + 1
        if len(digits) <= whole:
            return sign + digits.ljust(whole, "0")
        return f"{sign}{digits[:whole]}.{digits[whole:]}"
    if -7 <= e < 0:
        return f"{sign}0.{'0' * (-e - 1)}{digits}"
    mantissa = digits if len(digits) == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{mantissa}E{e:+d}"


# ---------------------------------------------------------------------------------------------
# Dates and times

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_YEAR_ZERO_ORDINALS = range(-365, 1)  # 0000-01-01 (a leap year) to 0000-12-31
_NANOS_PER_DAY = 86_400 * 10**9
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
)


def _utc(value: dt.datetime) -> dt.datetime:
    if value.utcoffset() is None:
        raise InvalidTime(f"datetime {value.isoformat()} has no timezone; keys hold UTC instants")
    try:
        return value.astimezone(dt.timezone.utc)
    except OverflowError as error:
        raise InvalidTime(f"datetime {value.isoformat()} is outside years 0001-9999 in UTC") from error


def format_time(value: dt.date) -> str:
    """A date as ``YYYY-MM-DD``, a datetime as ``YYYY-MM-DDTHH:MM:SS[.fraction]`` in UTC without
    a zone letter (trailing fraction zeros dropped): a K1 time component's body."""
    if not isinstance(value, dt.datetime):
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    t = _utc(value)
    text = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    return f"{text}.{t.microsecond:06d}".rstrip("0") if t.microsecond else text


def _nanos_of_day(t: dt.datetime) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 10**9 + t.microsecond * 1000


def _invalid_date(year: int, month: int, day: int) -> str | None:
    """Why a date (year 0000 to 9999, proleptic Gregorian) does not exist, or ``None``."""
    if not 1 <= month <= 12:
        return "month must be 01 to 12"
    days = 29 if month == 2 and calendar.isleap(year) else _DAYS_IN_MONTH[month - 1]
    return None if 1 <= day <= days else "day does not exist in that month"


def _invalid_clock(hour: int, minute: int, second: int) -> str | None:
    if hour > 23 or minute > 59:
        return "hour must be 00-23 and minute 00-59"
    return "second must be 00-59 (leap seconds are not supported)" if second > 59 else None


def _date(year: int, month: int, day: int) -> dt.date:
    """A valid date; year 0 is valid in keys but not in Python."""
    if year == 0:
        raise UnrepresentableValue("the key holds a date in year 0000, which Python's datetime cannot hold")
    return dt.date(year, month, day)


def _datetime(date: dt.date, nanos_of_day: int) -> dt.datetime:
    if nanos_of_day % 1000:
        raise UnrepresentableValue("the key holds a time with nanoseconds, finer than Python's microseconds")
    seconds, micros = divmod(nanos_of_day // 1000, 10**6)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.datetime(date.year, date.month, date.day, hour, minute, second, micros, tzinfo=dt.timezone.utc)


# ---------------------------------------------------------------------------------------------
# K1: text keys

_TERMINATOR = "#"
_ESCAPE = "$"
_HIGH_END = "~"
_NINES = str.maketrans("0123456789", "9876543210")


def _desc_tag(asc: str) -> str:
    """The descending tag mirroring an ascending one (``a``↔``Z``, ``%``↔``~``)."""
    return "~" if asc == "%" else chr(ord("a") + ord("Z") - ord(asc))


def _split(component: Component) -> tuple[Value, bool]:
    if isinstance(component, Desc):
        return component.value, True
    return component, False


def _unsupported(value: object) -> NoReturn:
    raise TypeError(f"{type(value).__name__} cannot be a key component")


def _hex(data: bytes, complement: bool) -> str:
    return (bytes(b ^ 0xFF for b in data).hex() + _HIGH_END) if complement else data.hex()


def _text_number(number: _Number) -> str:
    negative, digits, e = number
    if not digits:
        return "0"
    k = e + 1 if e >= 0 else 0  # integer digits, 0 to 126
    if negative:
        kind = "[" if k == 0 else chr(ord("Z") + 1 - k) if k <= 25 else f"A{999 - k:03d}"
    else:
        kind = "@" if k == 0 else chr(ord("A") - 1 + k) if k <= 25 else f"Z{k:03d}"
    if e >= 0:
        plain = digits[:k].ljust(k, "0") + (f".{digits[k:]}" if len(digits) > k else "")
    else:
        plain = "." + "0" * (-e - 1) + digits
    return f"-{kind}{plain.translate(_NINES)}~" if negative else kind + plain


def _escape(text: str) -> str:
    """An ascending string body: U+0000 to U+0024 as ``$`` and the character plus 0x3F."""
    return re.sub(r"[\x00-\x24]", lambda m: _ESCAPE + chr(ord(m[0]) + 0x3F), text)


def _text_component(component: Component) -> str:
    value, desc = _split(component)
    if value is None:
        tag, body = "%", ""
    elif isinstance(value, bool):
        tag, body = ("t" if value else "f"), ""
    elif isinstance(value, (int, Decimal, float)):
        number = _number(value)
        if desc:  # the descending body is the ascending body of the negated number
            number = number._replace(negative=not number.negative and bool(number.digits))
        tag, body = "n", _text_number(number)
    elif isinstance(value, str):
        tag, body = "s", _hex(value.encode(), True) if desc else _escape(value)
    elif isinstance(value, (bytes, bytearray)):
        tag, body = "b", _hex(bytes(value), desc)
    elif isinstance(value, dt.date):
        tag, body = "d", format_time(value)
        if desc:
            body = body.translate(_NINES) + _HIGH_END
    else:
        _unsupported(value)
    return (_desc_tag(tag) if desc else tag) + body + _TERMINATOR


def encode_text(components: Iterable[Component]) -> str:
    """The K1 key of a tuple, for an S attribute. It is not checked against DynamoDB's key-size
    limits (:data:`SORT_KEY_MAX_BYTES`), so that prefixes and bounds can be built too."""
    return "".join(_text_component(c) for c in components)


class _TextReader:
    """A cursor over a K1 key, reading one component at a time."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.at = 0

    def fail(self, reason: str) -> NoReturn:
        offset = len(self.key[: self.at].encode("utf-8", "surrogatepass"))
        raise MalformedKey("K1 text", offset, reason)

    def peek(self) -> str:
        return self.key[self.at : self.at + 1]

    def expect(self, want: str, reason: str) -> None:
        if self.peek() != want:
            self.fail(reason)
        self.at += 1

    def component(self) -> Component:
        tag = self.peek()
        if not tag:
            self.fail("expected a component tag")
        self.at += 1
        desc = tag == "~" or "A" <= tag <= "Z"
        asc = "%" if tag == "~" else _desc_tag(tag) if desc else tag
        value: Value
        if asc == "%":
            value = None
        elif asc in ("f", "t"):
            value = asc == "t"
        elif asc == "s":
            value = self.descending_string() if desc else self.ascending_string()
        elif asc == "b":
            value = self.hex_until(_HIGH_END, True) if desc else self.hex_until(_TERMINATOR, False)
        elif asc == "n":
            number = self.number()
            value = number.copy_negate() if desc and number else number
        elif asc == "d":
            value = self.time(desc)
        else:
            self.at -= 1
            self.fail("unknown component tag")
        self.expect(_TERMINATOR, "expected '#' ending the component")
        return Desc(value) if desc else value

    def ascending_string(self) -> str:
        out: list[str] = []
        while True:
            c = self.peek()
            if c in ("", _TERMINATOR):
                return "".join(out)
            if c == _ESCAPE:
                self.at += 1
                escaped = self.peek()
                if not escaped or not "?" <= escaped <= "c":
                    self.fail("'$' must be followed by a character from '?' to 'c'")
                out.append(chr(ord(escaped) - 0x3F))
            elif c <= _ESCAPE:
                self.fail("unescaped character below '$' in a string")
            else:
                out.append(c)
            self.at += 1

    def descending_string(self) -> str:
        body = self.at
        data = self.hex_until(_HIGH_END, True)
        try:
            return data.decode()
        except UnicodeDecodeError:
            self.at = body
            self.fail("descending string is not valid UTF-8")

    def hex_until(self, end: str, complement: bool) -> bytes:
        mask = 0xFF if complement else 0
        out = bytearray()
        while True:
            c = self.peek()
            if c == end:
                if end != _TERMINATOR:
                    self.at += 1
                return bytes(out)
            if not c:
                self.fail("hex body is not terminated")
            pair = self.key[self.at : self.at + 2]
            if len(pair) != 2 or any(d not in "0123456789abcdef" for d in pair):
                self.fail("expected a pair of lowercase hex digits")
            out.append(int(pair, 16) ^ mask)
            self.at += 2

    def number(self) -> Decimal:
        if self.peek() == "0":
            self.at += 1
            return Decimal(0)
        negative = self.peek() == "-"
        if negative:
            self.at += 1
        return _decimal(self.positive_number(negative))

    def positive_number(self, negative: bool) -> _Number:
        """The number after its sign: the integer-digit class, the plain decimal (complemented for
        a negative number, then ``~``)."""
        class_at = self.at
        kind = self.peek()
        self.at += 1
        wide = False
        if kind == ("[" if negative else "@"):
            k = 0
        elif not negative and "A" <= kind <= "Y":
            k = ord(kind) - ord("A") + 1
        elif negative and "B" <= kind <= "Z":
            k = ord("Z") - ord(kind) + 1
        elif kind == ("A" if negative else "Z"):
            wide = True
            k = self.three_digits()
            k = 999 - k if negative else k
        else:
            self.at = class_at
            self.fail("expected a number class character")
        if wide and not 26 <= k <= 126:
            self.at = class_at
            self.fail("wide number class must stand for 26 to 126 integer digits")
        digits: list[str] = []
        leading_fraction_zeros = 0

        def push(c: str) -> None:
            nonlocal leading_fraction_zeros
            d = c.translate(_NINES) if negative else c
            if not digits and d == "0":
                leading_fraction_zeros += 1
            elif len(digits) < MAX_DIGITS or d == "0":
                digits.append(d)  # zeros past the 38th digit may only be integer zeros
            else:
                self.fail("number has more than 38 digits")

        for i in range(k):
            c = self.peek()
            if not c or c not in "0123456789":
                self.fail("fewer integer digits than the number class says")
            if i == 0 and (c.translate(_NINES) if negative else c) == "0":
                self.fail("integer part starts with a zero")
            push(c)
            self.at += 1
        if self.peek() == ".":
            self.at += 1
            start = self.at
            while self.peek() and self.peek() in "0123456789":
                push(self.peek())
                self.at += 1
            if self.at == start:
                self.fail("expected digits after '.'")
            if self.key[self.at - 1] == ("9" if negative else "0"):
                self.at -= 1
                self.fail("fraction ends in a zero (not canonical)")
        elif k == 0:
            self.fail("expected '.' after a zero-integer-digit class")
        if negative:
            self.expect(_HIGH_END, "expected '~' ending a negative number")
        exponent = k - 1 if k > 0 else -leading_fraction_zeros - 1
        return _checked(negative, "".join(digits), exponent, self.key)

    def three_digits(self) -> int:
        digits = self.key[self.at : self.at + 3]
        for i, d in enumerate(digits.ljust(3)):
            if d not in "0123456789":
                self.at += i
                self.fail("expected three digits in a wide number class")
        self.at += 3
        return int(digits)

    def time(self, desc: bool) -> dt.date:
        start = self.at
        end = _HIGH_END if desc else _TERMINATOR
        body = ""
        while self.peek() not in ("", end):
            if len(body) == 29:
                self.fail("date/time body is too long")
            body += self.peek()
            self.at += 1
        if desc:
            body = body.translate(_NINES)
            self.expect(_HIGH_END, "expected '~' ending a descending date/time")
        if body[10:11] == "t" or (len(body) > 19 and body.endswith("0")):
            self.at = start
            self.fail("date/time is not in canonical form")
        match = (_DATE if len(body) == 10 else _DATETIME).fullmatch(body)
        if match is None:
            self.at = start
            self.fail("expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.fraction]")
        year, month, day, *clock = (int(f) for f in match.groups()[:6] if f is not None)
        reason = _invalid_date(year, month, day) or (_invalid_clock(*clock) if clock else None)
        if reason:
            self.at = start
            self.fail(reason)
        date = _date(year, month, day)
        if not clock:
            return date
        hour, minute, second = clock
        return _datetime(
            date, ((hour * 60 + minute) * 60 + second) * 10**9 + int((match[7] or "").ljust(9, "0"))
        )


def decode_text(key: str) -> list[Component]:
    """The components of a K1 key, descending ones as :class:`Desc`. Only canonical keys decode:
    anything else raises :class:`MalformedKey` naming the byte where it fails."""
    reader = _TextReader(key)
    components = []
    while reader.at < len(key):
        components.append(reader.component())
    return components


# ---------------------------------------------------------------------------------------------
# B1: binary keys

_NULL, _BYTES, _TIME, _FALSE, _NEGATIVE, _ZERO_TAG, _POSITIVE, _STRING, _TRUE = (
    0x01,
    0x10,
    0x20,
    0x30,
    0x40,
    0x41,
    0x42,
    0x50,
    0x60,
)
_DATE_END, _DATETIME_MARK = 0x00, 0x01
_EXPONENT_BIAS = 130
_LAST_ORDINAL = dt.date.max.toordinal()


def _escaped(tag: int, data: bytes) -> bytes:
    """A string or bytes component: the tag, ``00`` escaped as ``00 FF``, then ``00 01``."""
    return bytes([tag]) + data.replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def _days(date: dt.date) -> bytes:
    """Days since 1970-01-01 as a big-endian ``i32`` with its sign bit flipped."""
    return (((date.toordinal() - _EPOCH_ORDINAL) & 0xFFFF_FFFF) ^ 0x8000_0000).to_bytes(4, "big")


def _binary_number(number: _Number) -> bytes:
    negative, digits, e = number
    if not digits:
        return bytes([_ZERO_TAG])
    pairs = [int(digits[i : i + 2].ljust(2, "0")) for i in range(0, len(digits), 2)]
    body = [e + _EXPONENT_BIAS, *(2 * x + 1 for x in pairs[:-1]), 2 * pairs[-1]]
    if negative:
        return bytes([_NEGATIVE, *(b ^ 0xFF for b in body)])
    return bytes([_POSITIVE, *body])


def _binary_component(component: Component) -> bytes:
    value, desc = _split(component)
    if value is None:
        encoded = bytes([_NULL])
    elif isinstance(value, bool):
        encoded = bytes([_TRUE if value else _FALSE])
    elif isinstance(value, (int, Decimal, float)):
        encoded = _binary_number(_number(value))
    elif isinstance(value, str):
        encoded = _escaped(_STRING, value.encode())
    elif isinstance(value, (bytes, bytearray)):
        encoded = _escaped(_BYTES, bytes(value))
    elif isinstance(value, dt.datetime):
        t = _utc(value)
        encoded = (
            bytes([_TIME]) + _days(t.date()) + bytes([_DATETIME_MARK]) + _nanos_of_day(t).to_bytes(6, "big")
        )
    elif isinstance(value, dt.date):
        encoded = bytes([_TIME]) + _days(value) + bytes([_DATE_END])
    else:
        _unsupported(value)
    # Every component is prefix-free, so its bitwise NOT sorts in the opposite order.
    return bytes(b ^ 0xFF for b in encoded) if desc else encoded


def encode_binary(components: Iterable[Component]) -> bytes:
    """The B1 key of a tuple, for a B attribute. Like :func:`encode_text`, unchecked against
    DynamoDB's key-size limits."""
    return b"".join(_binary_component(c) for c in components)


class _BinaryReader:
    """A cursor over a B1 key; inside a descending component every byte is read through NOT."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.at = 0
        self.mask = 0

    def fail(self, reason: str) -> NoReturn:
        raise MalformedKey("B1 binary", self.at, reason)

    def next(self, reason: str) -> int:
        """The next byte, through the mask; ``reason`` when the key ends here."""
        if self.at >= len(self.key):
            self.fail(reason)
        self.at += 1
        return self.key[self.at - 1] ^ self.mask

    def component(self) -> Component:
        desc = self.key[self.at] >= 0x80
        self.mask = 0xFF if desc else 0
        tag = self.next("expected a component tag")
        value: Value
        if tag == _NULL:
            value = None
        elif tag in (_FALSE, _TRUE):
            value = tag == _TRUE
        elif tag == _ZERO_TAG:
            value = Decimal(0)
        elif tag in (_POSITIVE, _NEGATIVE):
            value = _decimal(self.number(tag == _NEGATIVE))
        elif tag == _STRING:
            data = self.escaped()
            try:
                value = data.decode()
            except UnicodeDecodeError:
                self.fail("string is not valid UTF-8")
        elif tag == _BYTES:
            value = self.escaped()
        elif tag == _TIME:
            value = self.time()
        else:
            self.at -= 1
            self.fail("unknown component tag")
        return Desc(value) if desc else value

    def escaped(self) -> bytes:
        out = bytearray()
        while True:
            end = self.key.find(self.mask, self.at)  # a masked 00: an escape or the terminator
            if end < 0:
                self.at = len(self.key)
                self.fail("string or bytes are not terminated by 00 01")
            out += bytes(b ^ self.mask for b in self.key[self.at : end])
            self.at = end + 1
            marker = self.next("string or bytes are not terminated by 00 01")
            if marker == 0x01:
                return bytes(out)
            if marker != 0xFF:
                self.at -= 1
                self.fail("00 inside a string must be followed by FF (escape) or 01 (end)")
            out.append(0)

    def number(self, negative: bool) -> _Number:
        inner = 0xFF if negative else 0
        exponent = (self.next("number is missing its exponent") ^ inner) - _EXPONENT_BIAS
        digits = ""
        while True:
            pair = self.next("number is missing its last digit pair") ^ inner
            last = pair % 2 == 0
            x = pair // 2  # 2x+1 and 2x both halve to x
            # The first digit is not zero; a last pair "d0" is one digit and its padding.
            if x > 99 or (not digits and x < 10) or (last and x == 0):
                self.at -= 1
                self.fail("invalid digit pair in a number")
            digits += f"{x:02d}"
            if last:
                break
        if len(digits.rstrip("0")) > MAX_DIGITS:
            self.at -= 1
            self.fail("invalid digit pair in a number")
        return _Number(negative, digits.rstrip("0"), exponent)

    def time(self) -> dt.date:
        raw = bytes(self.next("date is cut short") for _ in range(4))
        days = int.from_bytes(raw, "big") ^ 0x8000_0000
        ordinal = (days - 0x1_0000_0000 if days >= 0x8000_0000 else days) + _EPOCH_ORDINAL
        if ordinal in _YEAR_ZERO_ORDINALS:
            raise UnrepresentableValue(
                "the key holds a date in year 0000, which Python's datetime cannot hold"
            )
        if not 1 <= ordinal <= _LAST_ORDINAL:
            self.fail("date is outside years 0000-9999")
        date = dt.date.fromordinal(ordinal)
        marker = self.next("date is missing its end marker")
        if marker == _DATE_END:
            return date
        if marker != _DATETIME_MARK:
            self.at -= 1
            self.fail("expected 00 (date) or 01 (datetime) after the day count")
        nanos = int.from_bytes(bytes(self.next("datetime is cut short") for _ in range(6)), "big")
        if nanos >= _NANOS_PER_DAY:
            self.fail("time of day is 24:00 or later")
        return _datetime(date, nanos)


def decode_binary(key: bytes) -> list[Component]:
    """The components of a B1 key, descending ones as :class:`Desc`. Only canonical keys decode:
    anything else raises :class:`MalformedKey` naming the byte where it fails."""
    reader = _BinaryReader(key)
    components = []
    while reader.at < len(key):
        components.append(reader.component())
    return components


# ---------------------------------------------------------------------------------------------
# Hierarchical keys


def hier_key(first: str, *rest: str) -> str:
    """Segments joined by ``#``, each with ``%`` escaped as ``%25`` and ``#`` as ``%23``, so that
    :func:`hier_split` gives them back: ``hier_key("TAG", "C#") == "TAG#C%23"``. An index's
    partition key is ``hier_key(*scope_values, field)``; a counter shard's is
    ``hier_key("COUNTER", name, "SHARD", str(k))``. Not order-preserving."""
    return "#".join(s.replace("%", "%25").replace("#", "%23") for s in (first, *rest))


def hier_split(key: str) -> list[str]:
    """The unescaped segments of a hierarchical key."""
    segments = []
    for segment in key.split("#"):
        head, *escapes = segment.split("%")
        for escape in escapes:
            if escape[:2] not in ("23", "25"):
                raise MalformedHierKey(
                    f"malformed hierarchical key {key!r}: '%' must start %23 (for '#') or %25 (for '%')"
                )
            head += ("#" if escape[:2] == "23" else "%") + escape[2:]
        segments.append(head)
    return segments
