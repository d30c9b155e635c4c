"""Each recognizer at its length and range bounds (a value missed is a leak, one taken is a changed
request): card lengths 12/13 and 19/20, at most 19 groups, IPv4 octets 255/256, IPv6's two groups,
the 15-character Norwegian IBAN, the high-entropy token's length, character-class and entropy bounds
(two digits, two capitals, two lower-case letters)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import stdnum.util as stdnum_util
from hypothesis import given
from hypothesis import strategies as st
from stdnum import iban

from replay.privacy.recognizers import (
    IBAN_SEPARATORS,
    card_number,
    cards,
    high_entropy,
    ibans,
    ips,
    keyword_value,
    secrets,
)


def luhn_complete(body: str) -> str:
    """`body` + the check digit that makes it pass Luhn, computed here from the algorithm's definition."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return body + str((10 - total % 10) % 10)


def card(length: int, first: str = "4") -> str:
    return luhn_complete(first + "1" * (length - 2))


@pytest.mark.parametrize("length, found", [(12, False), (13, True), (16, True), (17, True), (19, True), (20, False)])
def test_card_lengths(length: int, found: bool) -> None:
    number = card(length)
    assert len(number) == length
    assert card_number(number) is found
    text = f"card {number} ok"
    assert list(cards(text)) == ([(5, 5 + length)] if found else [])


@pytest.mark.parametrize("first, found", [("1", False), ("2", True), ("3", True), ("6", True), ("7", False)])
def test_card_issuer_digits(first: str, found: bool) -> None:
    assert card_number(card(16, first)) is found


def test_a_card_one_check_digit_off_is_no_card() -> None:
    good = card(16)
    bad = good[:-1] + str((int(good[-1]) + 1) % 10)
    assert card_number(good) and not card_number(bad)


def test_a_card_of_nineteen_one_digit_groups_is_found_and_twenty_digits_are_not_one_card() -> None:
    nineteen = card(19)
    spaced = " ".join(nineteen)
    assert list(cards(f"x {spaced} y")) == [(2, 2 + len(spaced))]
    twenty = luhn_complete("4" + "0" * 18)  # 20 digits, Luhn-valid: too long for a card
    assert not card_number(twenty)


def test_a_card_keeps_one_separator_and_a_run_into_a_word_is_an_id() -> None:
    number = card(16)
    grouped = " ".join(number[i:i + 4] for i in range(0, 16, 4))
    dashed = "-".join(number[i:i + 4] for i in range(0, 16, 4))
    assert list(cards(grouped)) == [(0, 19)] and list(cards(dashed)) == [(0, 19)]
    mixed = number[:4] + " " + number[4:8] + "-" + number[8:12] + " " + number[12:]
    assert list(cards(mixed)) == []
    assert list(cards(number + "AB")) == []


def test_a_card_after_an_unrelated_number_in_the_same_run() -> None:
    grouped = " ".join(card(16)[i:i + 4] for i in range(0, 16, 4))
    text = f"no. 7 {grouped}"
    assert list(cards(text)) == [(6, 6 + len(grouped))]


@pytest.mark.parametrize("address, found", [
    ("255.255.255.255", True), ("256.1.1.1", False), ("1.256.1.1", False), ("1.1.1.256", False),
    ("0.0.0.0", True), ("10.0.0.255", True), ("1.2.3", False), ("1.2.3.4.5", False),
])
def test_ipv4_octets(address: str, found: bool) -> None:
    text = f"host {address} here"
    assert list(ips(text)) == ([(5, 5 + len(address))] if found else [])


def test_an_address_after_a_version_cue_is_a_version() -> None:
    assert list(ips("version 1.2.3.4")) == [] and list(ips("firmware: 10.0.0.1")) == []
    assert list(ips("server 10.0.0.1")) == [(7, 15)]


@pytest.mark.parametrize("address, found", [("::1", False), ("fe80::1", True), ("2001:db8::8a2e:370:7334", True),
                                            ("1:2", False), ("gg::1", False)])
def test_ipv6_needs_two_groups_and_a_valid_address(address: str, found: bool) -> None:
    assert (list(ips(f"at {address} now")) == [(3, 3 + len(address))]) is found


@pytest.mark.parametrize("text, span", [
    ("konto NO9386011117947 ok", (6, 21)),  # Norway: 15 characters, the shortest IBAN there is
    ("NO93 8601 1117 947.", (0, 18)),
    ("konto NO9386011117948 ok", None),  # check digits fail
    ("DE89370400440532013000", (0, 22)),
    ("MT84MALT011000012345MTLCAST001S", (0, 31)),  # Malta: 31 characters
    ("CH93 0076 2011 6238 5295 7", (0, 26)),  # Switzerland's example: 21 characters, a last group of one
    ("DE893704004405320130001 ok", None),  # an IBAN runs on into one more digit: a longer number
    ("DE89370400440532013000X", None),
])
def test_iban_lengths(text: str, span: tuple[int, int] | None) -> None:
    assert list(ibans(text)) == ([span] if span else [])


IBAN_GROUPS = ["DE89", "3704", "0044", "0532", "0130", "00"]


@pytest.mark.parametrize("separator", [" ", "-", "  ", " - ", ".", "\xa0", "\u202f", "\u2009", "\u2013", "\u00b7",
                                       "\u3000", "\uff0d"])
def test_an_iban_grouped_by_any_separator_stdnum_removes_is_found_whole(separator: str) -> None:
    """A no-break or narrow no-break space (French grouping, text copied from a web page), an en dash, a
    middle dot: `iban.is_valid` accepts them all, so a candidate that stopped at one was a leak."""
    written = separator.join(IBAN_GROUPS)
    assert iban.is_valid(written)
    assert list(ibans(f"pay {written} now")) == [(4, 4 + len(written))]


def test_the_iban_separators_are_those_stdnum_reads_as_a_space_a_dash_or_a_dot() -> None:
    assert set(IBAN_SEPARATORS) == {c for c, meant in stdnum_util._char_map.items() if meant in " -."}
    assert all(iban.compact(f"DE89{c}3704") == "DE893704" for c in IBAN_SEPARATORS)


@given(st.lists(st.sampled_from([*IBAN_GROUPS, "NO93", "8601", "1117", "947", " ", "    ", ".", "x", "\n", "DE",
                                 "12"]), max_size=40))
def test_every_iban_found_lies_inside_the_text_and_validates(pieces: list[str]) -> None:
    text = "".join(pieces)
    for start, end in itertools.islice(ibans(text), 50):
        assert 0 <= start < end <= len(text) and iban.is_valid(text[start:end])


def test_an_iban_split_by_more_separators_than_a_candidate_holds_ends_the_search() -> None:
    """Four spaces in a row end a candidate (a bound that keeps the search linear); the search must go
    on past it and end, never look at spans outside the candidate."""
    text = "x" * 20 + " DE89 3704 0044 0532    0130 00 end."
    assert list(itertools.islice(ibans(text), 5)) == []


def entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


EXACT = "ABCDefgh" * 2 + "12ab" * 4  # 8 characters at 1/16 and 4 at 1/8: 3.5 bits exactly


def test_high_entropy_at_exactly_its_entropy_bound() -> None:
    assert entropy(EXACT) == 3.5 and high_entropy(EXACT)
    lower = "ABCDefgh" * 2 + "12ab" * 3 + "1111"  # the same classes, less entropy
    assert 3.4 < entropy(lower) < 3.5 and not high_entropy(lower)
    assert list(secrets(f"token {EXACT} end")) == [(6, 38)]


def test_high_entropy_between_the_plugins_bound_and_ours_is_found() -> None:
    """detect-secrets' own default limit for base64 strings is 4.5; tokens from 3.5 up to it are ours."""
    token = "ABCDefgh1234wxyz" * 2  # 16 characters at 1/16: 4 bits
    assert entropy(token) == 4.0 and high_entropy(token)
    assert list(secrets(f"key {token}")) == [(4, 36)]


@pytest.mark.parametrize("token, found", [
    ("ABCDefgh" * 2 + "12ab" * 4, True),
    ("ABCDefgh" * 2 + "1bab" * 4, False),  # one digit
    ("ABcdefgh" * 2 + "12ab" * 4, True),  # two capitals a copy: enough
    ("Abcdefgh" + "abcdefgh" + "12ab" * 4, False),  # one capital
    ("ABCDEFGH" * 2 + "12AB" * 4, False),  # no lower case
    ("ABCDEFGH" * 2 + "12Ab" * 4, False),  # one lower case letter
    ("12345678-1234-1234-1234-123456789abc", False),  # a UUID
    ("1" + "ABCDefgh" * 2 + "xyzw" * 4, False),  # one digit
])
def test_high_entropy_character_classes(token: str, found: bool) -> None:
    assert high_entropy(token) is (found and entropy(token) >= 3.5)


def test_a_random_token_needs_24_characters() -> None:
    token = "Zq8xT2mLp4Rv7KdW1nYb3HsQ"
    assert len(token) == 24 and high_entropy(token) and high_entropy(token[:23])
    assert list(secrets(f"a {token} b")) == [(2, 26)]
    assert list(secrets(f"a {token[:23]} b")) == []


@pytest.mark.parametrize("value, found", [
    ("hunter2", "hunter2"), ("abcdef", None), ("abcdefg", "abcdefg"), ("Abcdef", "Abcdef"),
    ("see the vault", None), ("{password}", None), ("$SECRET", None), ("s3cr3t.", "s3cr3t"), ("", None),
    ('"hunter22"', "hunter22"), ("'s3cr3t'", "s3cr3t"), ("`tok3n`,", "tok3n"), ("XpassX9X", "XpassX9X"),
    ("abcdefX", "abcdefX"),
])
def test_keyword_values_and_prose_bound(value: str, found: str | None) -> None:
    """A lower-case word of six letters or fewer is prose; seven, or any other character, is a value."""
    assert keyword_value(value) == found


LOWER20, UPPER20 = "cdefghijklmnopqrstuv", "CDEFGHIJKLMNOPQRSTUV"  # 24 distinct characters: log2(24) ≈ 4.58 bits


@pytest.mark.parametrize("token, found", [
    ("12AB" + LOWER20, True), ("1xAB" + LOWER20, False),  # digits: two, one
    ("12Ab" + LOWER20, False),  # capitals: one (two is the first case)
    ("12ab" + UPPER20, True), ("12aB" + UPPER20, False),  # lower case: two, one
])
def test_high_entropy_needs_two_of_each_character_class(token: str, found: bool) -> None:
    assert len(token) == 24 and entropy(token) > 4.5
    assert high_entropy(token) is found
    assert list(secrets(f"key {token}")) == ([(4, 28)] if found else [])


@pytest.mark.parametrize("cue", ["revision:= ", "firmware:=\n", "rev\t", "tag="])
def test_a_version_cue_is_at_most_three_separators_right_before_the_address(cue: str) -> None:
    """The longest cue (`revision` and three separators) plus the character before it fits the look-back."""
    assert list(ips(f"{cue}10.0.0.1")) == []
    assert list(ips(f"x{cue}10.0.0.1")) == [(len(cue) + 1, len(cue) + 9)]  # a word that ends in a cue is no cue
    assert list(ips(f"{cue}  \n10.0.0.1")) == [(len(cue) + 3, len(cue) + 11)]  # too far from its cue


def test_a_newline_after_three_separators_is_a_fourth() -> None:
    """`$` would also match before a final newline: the cue must end right at the address (`\\Z`)."""
    assert list(ips("firmware:= \n10.0.0.1")) == [(12, 20)]
    assert list(ips("xfirmware:= \n10.0.0.1")) == [(13, 21)]
