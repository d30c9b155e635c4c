"""The recognizers' context rules, each on the text it is for: a URL's password is no e-mail address, a
number glued into an id or after a number's head is no phone or card, a name needs a cue, a keyword's
value is on its line, a secret inside a long token or a long keyword value goes whole, a private key
block ends where it ends."""

from __future__ import annotations

import pytest

from replay.privacy.recognizers import cards, emails, ips, persons, phones, secrets
from replay.privacy.redact import find

CARD = "4111 1111 1111 1111"  # Visa's published test number
AWS = "AKIAIOSFODNN7EXAMPLE"  # AWS' documented example access key id
PHONE = "+49 30 1234 5678"


def found(text: str) -> list[tuple[str, str]]:
    return [(f.kind, f.value) for f in find(text)]


# --- e-mail and the token before a match -------------------------------------------------------

@pytest.mark.parametrize("text", ["postgres://ops:hunter2@db.example.com/app",
                                  "connect with postgres://ops:hunter2@db.example.com/app today"])
def test_a_urls_password_is_a_secret_not_an_email_address(text: str) -> None:
    assert list(emails(text)) == []
    assert found(text) == [("SECRET", "hunter2")]


def test_an_email_address_after_a_url_is_an_email_address() -> None:
    text = "see https://acme.com/contact maria@acme.com"
    assert list(emails(text)) == [(text.index("maria"), len(text))]


@pytest.mark.parametrize("user, is_email", [(252, False), (253, True)])
def test_a_urls_scheme_is_looked_for_at_most_256_characters_back(user: int, is_email: bool) -> None:
    """The token before an address is read 256 characters back: a scheme farther away is not seen, and
    the userinfo goes as an e-mail address (redacted all the same)."""
    text = "https://" + "u" * user + ":pw@db.example.com"
    at = text.index("pw@")
    assert (text.rfind("://", at - 256, at) >= 0) is not is_email  # the reference: is `://` in the window?
    assert list(emails(text)) == ([(at, len(text))] if is_email else [])


# --- cards and phone numbers in context ----------------------------------------------------------

@pytest.mark.parametrize("text", [f"DE00 {CARD}", f"konto DE00 {CARD} ok"])
def test_digits_after_an_ibans_head_are_the_ibans_tail_not_a_card(text: str) -> None:
    """`DE00` fails the IBAN check digits, so no IBAN is found; its digits are no card either."""
    assert list(cards(text)) == []


@pytest.mark.parametrize("text", [f"1Z999AA10123456784 card {CARD}", f"ref 1234 5678-90 and card {CARD}",
                                  f"order 1234 {CARD}"])
def test_a_card_after_an_id_a_mixed_run_or_a_long_run_is_found(text: str) -> None:
    """A run into a word, a run that changes separators and a run whose first group makes 20 digits do
    not end the search."""
    at = text.index(CARD)
    assert list(cards(text)) == [(at, at + len(CARD))]


@pytest.mark.parametrize("text", [f"x{PHONE}", f"file {PHONE.replace(' ', '')}_.wav", f"saved as {PHONE.replace(' ', '')}_",
                                  f"{PHONE}ж", f"ref 7 {PHONE}", f"DE89 {PHONE}", f"INV-{PHONE.replace(' ', '')}"])
def test_a_phone_number_glued_to_a_word_or_after_a_numbers_head_is_none(text: str) -> None:
    assert list(phones(text)) == []


@pytest.mark.parametrize("text", [PHONE, f"call {PHONE}.", f"call {PHONE}/ ext. 2", f"tel: {PHONE}"])
def test_a_phone_number_in_running_text_is_found_once(text: str) -> None:
    """Found once, though every region in the list finds an international number."""
    at = text.index(PHONE)
    assert list(phones(text)) == [(at, at + len(PHONE))]


@pytest.mark.parametrize("text, numbers", [
    (f"ref_+4930123456 or call {PHONE}", [PHONE]),  # the matcher's first number is glued into an id
    (f"{PHONE} or 01 23456", [PHONE, "01 23456"]),  # the second is Vienna's: only the AT pass finds it
])
def test_a_rejected_or_repeated_match_does_not_end_the_search(text: str, numbers: list[str]) -> None:
    assert list(phones(text)) == [(text.index(n), text.index(n) + len(n)) for n in numbers]


def test_a_phone_number_of_seven_digits_is_searched() -> None:
    """A text is searched only from seven digits on: `01 23456` (Vienna) has seven."""
    text = "call 01 23456 now"
    assert sum(c.isdigit() for c in text) == 7
    assert list(phones(text, ("AT",))) == [(5, 13)]


# --- person names after a cue --------------------------------------------------------------------

@pytest.mark.parametrize("text, name", [
    ("Dear Maria Lopez, thanks", "Maria Lopez"), ("Name: Anna Schmidt", "Anna Schmidt"),
    ("Dear Mr. Jan van der Berg,", "Jan van der Berg"), ("Attn: Dr. Eva Braun-Klein", "Eva Braun-Klein"),
    ("Dear Customer Service team", None), ("Dear Sir,", None), ("Dear Customer", None),
])
def test_a_name_after_a_cue_is_a_person_and_a_greeting_is_not(text: str, name: str | None) -> None:
    assert list(persons(text)) == ([(text.index(name), text.index(name) + len(name))] if name else [])


@pytest.mark.parametrize("text, name", [
    ("username: ops-bot and filename: Report.pdf", None),  # the next key's value is not the user's
    ("customer: Jane Roe, phone: none", "Jane Roe"), ("assignee: Li Wei, due: 10:30", "Li Wei"),
])
def test_a_keyed_value_ends_where_the_lines_next_key_begins(text: str, name: str | None) -> None:
    assert [v for k, v in found(text) if k == "PERSON"] == ([name] if name else [])


# --- secrets: keyword values ---------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("password: hunter2", "hunter2"),  # at the text's start and end
    ("password: hunter2, thanks", "hunter2"),
    ("password: hunter2 (hunter2 is the old one)", "hunter2"),
    ("password:" + " " * 10 + "hunter2", "hunter2"),  # ten characters after its keyword: still its value
    # a config file's aligned columns: any blank space before the separator, or after it
    ("password            = hunter2xyz", "hunter2xyz"), ("db_password:" + " " * 14 + "s3cr3tvalue", "s3cr3tvalue"),
    ('"password":' + " " * 12 + '"hunter2xyz"', "hunter2xyz"), ("password ==" + " " * 9 + '"hunter2xyz"', "hunter2xyz"),
    ("password ==" + " " * 8 + '"hunter2xyz"', "hunter2xyz"),  # ten characters after it, one not blank
])
def test_a_keywords_value_is_the_word_after_it(text: str, value: str) -> None:
    assert found(text) == [("SECRET", value)]


def test_each_keyword_takes_its_own_value() -> None:
    text = "db_pass=Tr0ub4dor; backup_db_pass=Tr0ub4dor"
    assert list(secrets(text)) == [(8, 17), (34, 43)]


def test_a_keywords_value_is_on_its_line() -> None:
    """An empty `password:` takes nothing from the next line, whose key is no secret."""
    assert found("password:\nusername: ops-admin\nhost: db1") == []


def test_a_keyword_value_longer_than_the_window_goes_whole() -> None:
    """The plugin sees 256 characters after a keyword; a longer value was cut there and its tail kept."""
    value = "Tr0ub4dor&3" * 30
    assert found(f"password: {value} end") == [("SECRET", value)]


# --- secrets: tokens -----------------------------------------------------------------------------

def test_a_secret_at_the_start_inside_and_at_the_end_of_a_long_token_is_found() -> None:
    """A whitespace-free token longer than 256 characters (a URL's query) is searched in windows."""
    query = "&x=1" * 80
    for text in (f"{AWS}{query}", f"https://example.com/?{query}&key={AWS}{query}",
                 f"https://example.com/?{query}&key={AWS}"):
        at = text.index(AWS)
        assert len(text) > 256 and set(secrets(text)) == {(at, at + 20)}
        assert found(text) == [("SECRET", AWS)]


@pytest.mark.parametrize("pad, length", [*((pad, 28) for pad in range(360, 392, 4)), (300, 128), (340, 128)])
def test_a_secret_that_a_windows_end_cuts_goes_whole(pad: int, length: int) -> None:
    """A Slack token across the end of the window at 128..384: it was found cut there first, and the
    whole one, from the next window, lost to it: the token's tail stayed in the transcript. A secret
    of up to 128 characters (half a window) goes whole."""
    slack = ("xoxb-1234567890-" + "abcdefghij" * 12)[:length]
    text = "https://example.com/?" + "z" * (pad - 21) + "&t=" + slack + "&b=2" * 60
    assert len(slack) == length
    at = text.index(slack)
    assert found(text) == [("SECRET", slack)]
    assert (at, at + len(slack)) in set(secrets(text))


@pytest.mark.parametrize("secret", ["xoxb-1234567890-abcdefghijAbCd", "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
                                    f"acct_{AWS}-dev"])
def test_a_token_secret_is_its_whole_run_of_token_characters(secret: str) -> None:
    """The Slack plugin stops at the first capital (`…-abcdefghij`), the AWS one matches inside a run:
    the secret is the whole run of letters, digits, `_` and `-`, and stops at the characters around it
    that are no token's."""
    for text in (f"token {secret} end", f"token '{secret}'", f"{secret}", f"({secret}),"):
        at = text.index(secret)
        assert set(secrets(text)) == {(at, at + len(secret))}


# --- secrets: private keys -----------------------------------------------------------------------

KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAuZ3kL9aQ2v7Xw1pR8tYbN4m\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("text", [KEY, f"{KEY}\nthanks", f"key:\n{KEY}"])
def test_a_private_key_anywhere_in_the_text_is_found_whole(text: str) -> None:
    assert found(text) == [("SECRET", KEY)]


@pytest.mark.parametrize("label", ["ENCRYPTED PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY",
                                   "PGP PRIVATE KEY BLOCK"])
def test_every_private_key_label_is_a_private_key(label: str) -> None:
    """RFC 7468's labels: PKCS #8's `ENCRYPTED PRIVATE KEY` (openssl's default for a key with a
    passphrase) was missed, detect-secrets' PrivateKeyDetector knows no such header."""
    key = f"-----BEGIN {label}-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI\n-----END {label}-----"
    text = f"here: {key} and {KEY}"
    assert found(text) == [("SECRET", key), ("SECRET", KEY)]


def test_a_private_key_cut_short_ends_at_its_last_line_of_key_material() -> None:
    head = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\nAAAABG5vbmU="
    assert found(f"{head}\nthat was all\nthanks") == [("SECRET", head)]


@pytest.mark.parametrize("gap, whole", [(32_768 - 100, True), (32_768 + 100, False)])
def test_an_end_line_farther_than_32_kib_belongs_to_another_key(gap: int, whole: bool) -> None:
    head = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAuZ3kL9aQ2v7Xw1pR8tYbN4m"
    text = f"{head}\n{'text and more text ' * (gap // 19)}\n-----END RSA PRIVATE KEY-----"
    assert found(text) == [("SECRET", text if whole else head)]


def test_key_material_is_read_for_at_most_32_kib() -> None:
    header = "-----BEGIN RSA PRIVATE KEY-----"
    text = header + ("\n" + "A" * 63) * 1000  # 64 000 characters of key lines, no END
    assert found(text) == [("SECRET", text[:len(header) + 32_768 // 64 * 64])]  # the lines that end within


# --- IP addresses --------------------------------------------------------------------------------

def test_an_address_after_prose_is_found_and_after_a_version_cue_is_not() -> None:
    assert list(ips("release notes: host 10.0.0.1")) == [(20, 28)]
    assert list(ips("build 10.0.0.1 and host 10.0.0.2")) == [(24, 32)]


def test_an_invalid_ipv6_candidate_does_not_end_the_search() -> None:
    assert list(ips("at 12:30:45 from fe80::1")) == [(17, 24)]
