"""Tests of the key codec against the frozen formats: the vectors of docs/formats.md, the Rust
crate's golden vectors and edge cases (shared/key-codec/src/tests), and order and round-trip
properties over random tuples."""

from __future__ import annotations

import datetime as dt
import random
import re
import unittest
from collections.abc import Sequence
from decimal import Decimal
from functools import cmp_to_key
from pathlib import Path
from typing import Any, Callable

from sidestream_client.keys import (
    Component,
    Desc,
    InvalidNumber,
    KeyCodecError,
    MalformedHierKey,
    MalformedKey,
    UnrepresentableValue,
    Value,
    decode_binary,
    decode_text,
    encode_binary,
    encode_text,
    format_number,
    hier_key,
    hier_split,
    parse_number,
)

FORMATS = Path(__file__).resolve().parents[3] / "docs" / "formats.md"
UTC = dt.timezone.utc


def typed(components: Sequence[Component]) -> list[tuple[bool, str, Any]]:
    """Components with their kinds, so that equality tells ``True`` from ``1``."""
    out = []
    for component in components:
        desc = isinstance(component, Desc)
        value = component.value if isinstance(component, Desc) else component
        out.append((desc, kind(value), Decimal(repr(value)) if isinstance(value, float) else value))
    return out


def kind(value: Value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "binary"
    return "datetime" if isinstance(value, dt.datetime) else "date"


RANK = {"null": 0, "binary": 1, "date": 2, "datetime": 2, "false": 3, "number": 4, "string": 5, "true": 6}


def cmp(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def value_cmp(a: Value, b: Value) -> int:
    """The order the formats preserve (the Rust ``Value``'s ``Ord``): a date sorts just before
    midnight of its day."""
    ka, kb = kind(a), kind(b)
    if ka == "date" and kb == "datetime":
        return cmp(a, b.date()) or -1  # type: ignore[union-attr]
    if ka == "datetime" and kb == "date":
        return cmp(a.date(), b) or 1  # type: ignore[union-attr]
    if ka != kb:
        return cmp(RANK[ka], RANK[kb])
    return 0 if ka in ("null", "true", "false") else cmp(a, b)


def tuple_cmp(a: Sequence[Component], b: Sequence[Component]) -> int:
    for x, y in zip(a, b):
        c = value_cmp(x.value if isinstance(x, Desc) else x, y.value if isinstance(y, Desc) else y)
        if c:
            return -c if isinstance(x, Desc) else c
    return cmp(len(a), len(b))


def key_vectors() -> list[tuple[list[Component], str, bytes | None]]:
    """The rows of the "### Key vectors" table: the tuple, its K1 key, its B1 key (if given)."""
    section = FORMATS.read_text(encoding="utf-8").split("### Key vectors", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("("):
            continue
        binary = bytes.fromhex(cells[2].strip("`")) if cells[2] else None
        rows.append((parse_tuple(cells[0]), cells[1].strip("`"), binary))
    return rows


COMPONENT = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]+))(\s+desc)?\s*(?:,|$)')
ESCAPES = {"0": "\0", '"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def parse_tuple(text: str) -> list[Component]:
    """A tuple as the table writes it: ``("a b", -1.5 desc, 2024-05-01, true, null)``."""
    inner = text[1:-1]
    components: list[Component] = []
    at = 0
    while at < len(inner):
        match = COMPONENT.match(inner, at)
        assert match and match.end() > at, f"cannot read the tuple {text}"
        quoted, bare, desc = match.groups()
        value: Value
        if quoted is not None:
            value = re.sub(r"\\(.)", lambda m: ESCAPES[m[1]], quoted)
        elif bare in ("true", "false"):
            value = bare == "true"
        elif bare == "null":
            value = None
        elif re.fullmatch(r"\d{4}-\d{2}-\d{2}", bare):
            value = dt.date.fromisoformat(bare)
        else:
            value = parse_number(bare)
        components.append(Desc(value) if desc else value)
        at = match.end()
    return components


def n(text: str) -> Decimal:
    return parse_number(text)


def t(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


MAX = "9.9999999999999999999999999999999999999E+125"
# The Rust crate's golden vectors (shared/key-codec/src/tests/golden.rs) that the docs' table lacks.
GOLDEN: list[tuple[list[Component], str, str]] = [
    ([42], "nB42#", "42 83 54"),
    ([420], "nC420#", "42 84 54"),
    ([2024], "nD2024#", "42 85 29 30"),
    ([n("0.5")], "n@.5#", "42 81 64"),
    ([-1], "n-Z8~#", "40 7d eb"),
    ([n("-42.5")], "n-Y57.4~#", "40 7c aa 9b"),
    ([n("9.99E24")], "nY9990000000000000000000000#", "42 9a c7 b4"),
    (
        [n("12345678901234567890123456789012345678")],
        "nZ03812345678901234567890123456789012345678#",
        "42 a7 19 45 71 9d b5 19 45 71 9d b5 19 45 71 9d b5 19 45 71 9c",
    ),
    ([n("1E-130")], f"n@.{'0' * 129}1#", "42 00 14"),
    ([n("-1E-130")], f"n-[.{'9' * 129}8~#", "40 ff eb"),
    ([n(MAX)], f"nZ126{'9' * 38}{'0' * 88}#", "42 ff" + " c7" * 18 + " c6"),
    ([n("-" + MAX)], f"n-A873{'0' * 38}{'9' * 88}~#", "40 00" + " 38" * 18 + " 39"),
    ([Desc(42)], "M-Y57~#", "bd 7c ab"),
    ([Desc(0)], "M0#", "be"),
    (["a$"], "sa$c#", "50 61 24 00 01"),
    (["a%"], "sa%#", "50 61 25 00 01"),
    (["\uffff"], "s\uffff#", "50 ef bf bf 00 01"),
    (["😀"], "s😀#", "50 f0 9f 98 80 00 01"),
    (["Über"], "sÜber#", "50 c3 9c 62 65 72 00 01"),
    ([Desc("ab")], "H9e9d~#", "af 9e 9d ff fe"),
    ([Desc("")], "H~#", "af ff fe"),
    ([dt.date(999, 1, 2)], "d0999-01-02#", "20 7f fa 96 a7 00"),
    ([t("2024-05-01T12:34:56Z")], "d2024-05-01T12:34:56#", "20 80 00 4d 84 01 29 32 4b fd 60 00"),
    ([t("2024-05-01T12:34:56.500Z")], "d2024-05-01T12:34:56.5#", "20 80 00 4d 84 01 29 32 69 ca c5 00"),
    ([Desc(t("2024-05-01T12:34:56Z"))], "W7975-94-98T87:65:43~#", "df 7f ff b2 7b fe d6 cd b4 02 9f ff"),
    ([Desc(True), Desc(False), Desc(None)], "G#U#~#", "9f cf fe"),
    ([b"\x00\xff"], "b00ff#", "10 00 ff ff 00 01"),
    ([Desc(b"\x00\xff")], "Yff00~#", "ef ff 00 00 ff fe"),
    (["Open", 42, "SRC-1"], "sOpen#nB42#sSRC-1#", "50 4f 70 65 6e 00 01 42 83 54 50 53 52 43 2d 31 00 01"),
    (["Open", None, "x"], "sOpen#%#sx#", "50 4f 70 65 6e 00 01 01 50 78 00 01"),
    (["Open#1", Desc(7)], "sOpen$b1#M-Z2~#", "50 4f 70 65 6e 23 31 00 01 bd 7d 73"),
]


class Vectors(unittest.TestCase):
    def check(self, components: list[Component], text: str, binary: bytes | None) -> None:
        self.assertEqual(encode_text(components), text)
        self.assertEqual(typed(decode_text(text)), typed(components))
        if binary is not None:
            self.assertEqual(encode_binary(components).hex(" "), binary.hex(" "))
            self.assertEqual(typed(decode_binary(binary)), typed(components))

    def test_the_documented_key_vectors(self) -> None:
        vectors = key_vectors()
        self.assertGreaterEqual(len(vectors), 16, f"the vectors of {FORMATS} were not found")
        for components, text, binary in vectors:
            with self.subTest(text=text):
                self.check(components, text, binary)

    def test_the_crates_golden_vectors(self) -> None:
        for components, text, binary in GOLDEN:
            with self.subTest(text=text[:40]):
                self.check(components, text, bytes.fromhex(binary))

    def test_equal_numbers_encode_identically(self) -> None:
        for spelling in ["1.5", "1.50", "15E-1", "0.15e1", "+1.5", "001.500", "150e-2"]:
            self.assertEqual(encode_text([n(spelling)]), "nA1.5#", spelling)
        spellings: list[Value] = [Decimal("1.50"), 1.5, Decimal("15E-1")]
        for value in spellings:
            self.assertEqual(encode_binary([value]), encode_binary([n("1.5")]))
        for zero in ["0", "-0", "0.000", "-0E5", "+0e-999", ".0", "0."]:
            self.assertEqual(encode_text([n(zero)]), "n0#", zero)
            self.assertEqual(encode_binary([Desc(n(zero))]), b"\xbe", zero)
        self.assertEqual(encode_text([-0.0]), "n0#")

    def test_numbers_read_back_as_written(self) -> None:
        for text in [
            "0",
            "7",
            "-42.5",
            "0.0000001",
            "1E-130",
            "1.5E+40",
            "123456789012345678901234567890123456.78",
        ]:
            self.assertEqual(n(format_number(n(text))), n(text), text)
        self.assertEqual(format_number(n("15E-1")), "1.5")
        self.assertEqual(format_number(n("1E+125")), "1E+125")
        self.assertEqual(format_number(0.1), "0.1")


class Errors(unittest.TestCase):
    def test_numbers_outside_dynamodb_are_refused(self) -> None:
        cases: list[tuple[Any, str]] = [
            (float("nan"), "NaN and Infinity"),
            (Decimal("NaN"), "NaN and Infinity"),
            (float("-inf"), "NaN and Infinity"),
            (123456789012345678901234567890123456789, "39 significant digits; DynamoDB allows at most 38"),
            (Decimal("1E-131"), "below 1E-130"),
            (Decimal("0.99E-130"), "below 1E-130"),
            (Decimal("1E126"), "above 9.9999999999999999999999999999999999999E+125"),
            (Decimal("-1E126"), "above"),
        ]
        for value, message in cases:
            for encode in (encode_text, encode_binary):
                with (
                    self.subTest(value=value, encode=encode.__name__),
                    self.assertRaisesRegex(InvalidNumber, re.escape(message)),
                ):
                    encode([value])
            with self.subTest(text=str(value)), self.assertRaisesRegex(InvalidNumber, re.escape(message)):
                parse_number(str(value))
        for text in ["", "1.2.3", "1e", " 1", "0x10", "1_000"]:
            with self.subTest(text=text), self.assertRaisesRegex(InvalidNumber, "not a decimal number"):
                parse_number(text)
        self.assertRaisesRegex(InvalidNumber, "above", parse_number, "1E99999999999999999999")
        # The largest and smallest accepted values sit right at the limits.
        for text in [
            MAX,
            "1E-130",
            "1.0000000000000000000000000000000000001E-130",
            "12345678901234567890123456789012345678" + "0" * 6,
        ]:
            encode_binary([parse_number(text)])

    def test_malformed_text_keys_name_the_offset(self) -> None:
        cases = [
            ("sOpen", 5),  # no terminator
            ("x#", 0),  # unknown tag
            ("sa b#", 2),  # unescaped space
            ("s$z#", 2),  # escape out of range
            ("nB4#", 3),  # fewer digits than the class says
            ("nB042#", 2),  # integer part starts with zero
            ("nA1.50#", 5),  # fraction ends in zero
            ("nZ010#", 1),  # wide class below 26
            ("n-Z8#", 4),  # negative without '~'
            ("d2024-02-30#", 1),  # no such day
            ("d2024-05-01T12:34:56.50#", 1),
            ("H9e#", 3),  # descending string without '~'
            ("H00~#", 1),  # complemented bytes (FF) are not UTF-8
            ("b0#", 1),  # odd hex
        ]
        for key, offset in cases:
            with self.subTest(key=key):
                with self.assertRaises(MalformedKey) as caught:
                    decode_text(key)
                self.assertEqual((caught.exception.form, caught.exception.offset), ("K1 text", offset))

    def test_malformed_binary_keys_are_refused(self) -> None:
        for key in [
            "50 61",
            "50 00 02",
            "42 83",
            "42 83 55",
            "42 83 00",
            "42 83 ff",
            "20 80 00 4d",
            "20 80 00 4d 84 07",
            "77",
            "00",
        ]:
            with self.subTest(key=key), self.assertRaises(MalformedKey):
                decode_binary(bytes.fromhex(key))

    def test_values_python_cannot_hold_are_named(self) -> None:
        for key in ["d0000-01-01#", "d2024-05-01T12:34:56.000000001#"]:
            with self.subTest(key=key), self.assertRaises(UnrepresentableValue):
                decode_text(key)
        with self.assertRaises(UnrepresentableValue):
            decode_binary(bytes.fromhex("20 7f f5 05 58 00"))  # 0000-01-01
        with self.assertRaisesRegex(KeyCodecError, "no timezone"):
            encode_text([dt.datetime(2024, 5, 1)])
        with self.assertRaises(TypeError):
            encode_text([object()])  # type: ignore[list-item]


class HierarchicalKeys(unittest.TestCase):
    def test_the_crates_examples(self) -> None:
        self.assertEqual(hier_key("ACCOUNT", "12345", "ON"), "ACCOUNT#12345#ON")
        self.assertEqual(hier_key("TAG", "C#"), "TAG#C%23")
        self.assertEqual(hier_split("TAG#C%23"), ["TAG", "C#"])
        self.assertEqual(hier_key("PROJECT", "35e9"), "PROJECT#35e9")
        self.assertEqual(hier_key("TAG", "C#", "100%", ""), "TAG#C%23#100%25#")
        self.assertEqual(hier_split("TAG#C%23#100%25#"), ["TAG", "C#", "100%", ""])
        self.assertEqual(hier_split("ACCOUNT#12345#ON"), ["ACCOUNT", "12345", "ON"])
        self.assertEqual(hier_key("35e9", "3fe6"), "35e9#3fe6")  # an index's partition key
        self.assertEqual(hier_key("COUNTER", "votes/alice", "SHARD", "3"), "COUNTER#votes/alice#SHARD#3")
        with self.assertRaisesRegex(MalformedHierKey, "'%' must start %23"):
            hier_split("A#50%off")

    def test_every_key_splits_back_into_its_segments(self) -> None:
        rng = random.Random(7)
        for _ in range(500):
            segments = [
                "".join(rng.choice("a#%23") for _ in range(rng.randint(0, 5)))
                for _ in range(rng.randint(1, 4))
            ]
            self.assertEqual(hier_split(hier_key(*segments)), segments)


# ---------------------------------------------------------------------------------------------
# Properties over random tuples, as shared/key-codec/src/tests/properties.rs draws them.

SPECIAL = [chr(c) for c in range(0x27)] + ["a", "b", "\uffff", "\U0001f600"]


def random_number(rng: random.Random) -> int | Decimal | float:
    choice = rng.randrange(4)
    if choice == 0:
        return rng.randint(-(2**63), 2**63 - 1)
    if choice == 1:
        return rng.randint(-1000, 1000)
    if choice == 2:
        return rng.choice(
            [0.0, -0.0, rng.uniform(-1000, 1000), rng.uniform(1, 10) * 10.0 ** rng.randint(-129, 124)]
        )
    digits = str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 37)))
    return Decimal(f"{rng.choice('-+')}{digits[0]}.{digits[1:]}E{rng.randint(-130, 125)}")


def random_string(rng: random.Random) -> str:
    choice = rng.randrange(3)
    if choice == 0:
        return "".join(rng.choice(SPECIAL) for _ in range(rng.randint(0, 6)))
    if choice == 1:
        code_points = (
            rng.choice([rng.randint(0, 0xD7FF), rng.randint(0xE000, 0x10FFFF), rng.randint(0, 0x7F)])
            for _ in range(rng.randint(0, 8))
        )
        return "".join(map(chr, code_points))
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(0, 12)))


def random_value(rng: random.Random) -> Value:
    choice = rng.randrange(7)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return random_number(rng)
    if choice == 3:
        return random_string(rng)
    if choice == 4:
        return bytes(rng.choice([0, 0xFF, rng.randrange(256)]) for _ in range(rng.randint(0, 5)))
    date = dt.date.fromordinal(rng.randint(1, dt.date.max.toordinal()))
    if choice == 5:
        return date
    micros = rng.randrange(86_400 * 10**6)
    micros -= micros % rng.choice([1, 10**6])
    return dt.datetime.combine(date, dt.time(), UTC) + dt.timedelta(microseconds=micros)


def directed(value: Value, desc: bool) -> Component:
    return Desc(value) if desc else value


def random_pair(rng: random.Random) -> tuple[list[Component], list[Component]]:
    """Two tuples of one schema of directions; the second often shares a prefix with the first
    and may be shorter, so that ties and prefixes are exercised."""
    dirs = [rng.random() < 0.5 for _ in range(rng.randint(1, 3))]
    a = [directed(random_value(rng), d) for d in dirs]
    b = [directed(random_value(rng), d) for d in dirs]
    shared = rng.randint(0, len(dirs))
    b[:shared] = a[:shared]
    return a, b[: max(1, rng.randint(0, len(dirs)))]


def k1(components: list[Component]) -> bytes:
    """A K1 key as the bytes DynamoDB compares: its UTF-8."""
    return encode_text(components).encode()


def k1_decode(key: bytes) -> list[Component]:
    return decode_text(key.decode())


FORMS: list[tuple[Callable[[list[Component]], bytes], Callable[[bytes], list[Component]]]] = [
    (k1, k1_decode),
    (encode_binary, decode_binary),
]


class Properties(unittest.TestCase):
    def test_encodings_sort_like_tuples_and_round_trip(self) -> None:
        rng = random.Random(20240501)
        for _ in range(3000):
            a, b = random_pair(rng)
            expected = tuple_cmp(a, b)
            for encode, decode in FORMS:
                ka, kb = encode(a), encode(b)
                self.assertEqual(cmp(ka, kb), expected, (a, b, ka, kb))
                self.assertEqual(typed(decode(ka)), typed(a), ka)
                for k in range(len(a) + 1):
                    self.assertTrue(ka.startswith(encode(a[:k])), "a tuple's prefix is a key prefix")

    def test_sorting_by_key_sorts_the_tuples(self) -> None:
        rng = random.Random(42)
        for _ in range(20):
            dirs = [rng.random() < 0.5 for _ in range(3)]
            pools = [[random_value(rng) for _ in range(4)] for _ in dirs]  # few values: many ties
            tuples = [[directed(rng.choice(p), d) for p, d in zip(pools, dirs)] for _ in range(300)]
            tuples = [t[: rng.randint(1, 3)] for t in tuples]
            for encode, _ in FORMS:
                by_key = sorted(tuples, key=encode)
                by_tuple = sorted(by_key, key=cmp_to_key(tuple_cmp))
                self.assertEqual([typed(c) for c in by_key], [typed(c) for c in by_tuple])
                for before, after in zip(by_key, by_key[1:]):
                    self.assertEqual(cmp(encode(before), encode(after)), tuple_cmp(before, after))

    def test_every_escaped_character_round_trips_and_sorts_by_code_point(self) -> None:
        for desc in (False, True):
            keys = []
            for c in range(0x26):
                components: list[Component] = [Desc(f"a{chr(c)}b") if desc else f"a{chr(c)}b", "tail"]
                text, binary = encode_text(components), encode_binary(components)
                self.assertNotIn("\0", text)
                self.assertEqual(typed(decode_text(text)), typed(components))
                self.assertEqual(typed(decode_binary(binary)), typed(components))
                keys.append((text.encode(), binary))
            ordered = sorted(keys, reverse=desc)
            self.assertEqual(keys, ordered)

    def test_only_canonical_keys_decode(self) -> None:
        rng = random.Random(99)
        alphabet = "%bdfnstMHWYUG~#$0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ@[.:T- abcdef?_"
        for _ in range(20000):
            key = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
            try:
                components = decode_text(key)
            except KeyCodecError:
                continue
            self.assertEqual(encode_text(components), key)
        for _ in range(20000):
            data = bytes(
                rng.choice([0, 1, 0xFF, 0x42, 0x50, 0x20, rng.randrange(256)])
                for _ in range(rng.randint(0, 24))
            )
            try:
                components = decode_binary(data)
            except KeyCodecError:
                continue
            self.assertEqual(encode_binary(components), data)


if __name__ == "__main__":
    unittest.main()
