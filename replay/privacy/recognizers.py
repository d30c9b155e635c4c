"""The recognizers redaction runs (replay/privacy/redact.py): each a candidate finder, a validator from a
well-kept library, and context rules, as Presidio's recognizers are built. Pure.

* PHONE: `phonenumbers` (libphonenumber) `PhoneNumberMatcher` at leniency VALID, once per region
  in `PHONE_REGIONS`: a number written with `+`/`00` is found whatever the region; a national one
  (`030/5550142`, `(212) 555-0142`) must be valid in one of the regions. POSSIBLE takes dates,
  amounts and ids for numbers; STRICT_GROUPING drops numbers grouped as people group them
  (`0171 234 56 78`). Context: a match inside an id (`INV-2024-000017`, `batch 2024-11-30-07`),
  after a digit group or an IBAN's head, or holding a date is no number. The regions are a
  parameter, not a setting in a file: the privacy check, which reads no config, must find what
  redaction finds.
* IBAN: candidates of two letters, two digits and 11–32 letters or digits, in any case, grouped by
  up to three separators of those `stdnum`'s `iban.compact` removes (spaces, dashes and dots, and the
  Unicode spaces, dashes and dots it reads as them: no-break and narrow no-break spaces, en dashes,
  middle dots…); `stdnum.iban` (country format and ISO 7064 mod 97-10) decides.
* CARD: runs of digit groups (spaces, dashes or dots); the longest span of whole groups with one
  separator, 13–19 digits, an issuer's first digit (2–6) and a valid `stdnum.luhn` check digit.
* SECRET: `detect-secrets`' plugins used as a library — the token plugins (AWS, GitHub, GitLab,
  Slack, Stripe, SendGrid, Twilio, Telegram, Discord, Mailchimp, npm, PyPI, OpenAI, Azure, Square,
  basic-auth URLs) on each whitespace-separated token, the keyword plugin (`password: …`,
  `secret=…`, `api_key: …`) on the text after each keyword, PEM private key headers of any label
  (RFC 7468's `PRIVATE KEY`, `ENCRYPTED PRIVATE KEY`, `RSA …`, `EC …`, `OPENSSH …`, PGP's
  `… BLOCK`: the block to its END line goes), `JwtTokenDetector.is_formally_valid` for JWTs' header and
  payload, and the high-entropy plugin's Shannon entropy for long random tokens; plus the
  prefixes it has no plugin for (`sk-proj-`, `sk-ant-`, `github_pat_`, `AIza`). UUIDs and hex
  digests are ids, not secrets: they name records, and a replayed request keeps them.
* IP: IPv4/IPv6 candidates validated by `ipaddress`; one right after `version`, `release`,
  `firmware`, `build`… is a version.
* EMAIL: a pattern (local part, `@`, dotted domain with a TLD).
* PERSON: only a name that a cue announces — a salutation or title (`Dear`, `Mr.`, `Ms.`, `Dr.`,
  `Herr`, `Frau`, `Madame`…) or a label (`Name:`, `Attn:`, `Contact person:`, `Ansprechpartner:`) —
  followed by one to three capitalised words (`Dear Customer`, `Dear Sir` stay); or a key that names a
  person (`person_key`: `customer`, `assignee`, `to`, `created_by`, `first_name`…; `name` only in an
  object that describes a person, `person_record`), in a JSON object (redact.py reads the key) or as a
  `key: value` line or a quoted key in text (`keyed_persons`): each part of its value shaped as a name
  (`names_in_value`: capitalised words of any cased script or words of a caseless one, particles
  between; no digit, no organisation's, team's or state's word). A name anywhere else (`ask Maria
  about it`) is not found: that needs an NER model (Presidio's default is a downloaded spaCy model),
  which this project does not ship. Street addresses are not detected.

Every pattern here is linear in the text: candidates start only where the lookbehind allows,
repetitions are bounded or cannot overlap, and the plugins' own expressions (Python `re`, some
super-linear on adversarial input) only ever see bounded windows: a token of at most `_WINDOW`
characters (longer ones in overlapping windows) or the `_WINDOW` characters after a keyword.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Iterator

import phonenumbers
from detect_secrets.filters.heuristic import is_potential_uuid, is_templated_secret
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, DENYLIST, KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from stdnum import iban, luhn

Span = tuple[int, int]

PHONE_REGIONS = ("DE", "AT", "CH", "FR", "GB", "US", "NL", "ES", "IT")
"""Regions whose national numbers are found (ISO 3166 alpha-2), in order; international numbers
are found whatever the list. Each region is one more pass over a text that holds 7+ digits."""

_WINDOW = 256  # the most characters one plugin expression sees at once

# --- e-mail ---------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.%+'-])[\w.%+'-]+@[^\W_](?:[\w-]*[^\W_])?(?:\.[^\W_](?:[\w-]*[^\W_])?)*"
                    r"\.[^\W\d_]{2,}(?![\w-])")


def _token_before(text: str, start: int) -> str:
    """The part of the whitespace-separated token that ends at `start` (at most 256 characters back)."""
    head = text[max(0, start - 256):start]
    return head.split()[-1] if head and not head[-1].isspace() else ""


def emails(text: str) -> Iterator[Span]:
    """Not the `user:password@host` of a URL (the basic-auth plugin takes the password)."""
    for m in _EMAIL.finditer(text):
        if "://" not in _token_before(text, m.start()):
            yield m.span()


# --- secrets --------------------------------------------------------------------------------

_TOKEN_PLUGINS: tuple[RegexBasedDetector, ...] = (
    AWSKeyDetector(), GitHubTokenDetector(), GitLabTokenDetector(), SlackDetector(), StripeDetector(),
    SendGridDetector(), TwilioKeyDetector(), TelegramBotTokenDetector(), DiscordBotTokenDetector(),
    MailchimpDetector(), NpmDetector(), PypiTokenDetector(), OpenAIDetector(), AzureStorageKeyDetector(),
    SquareOAuthDetector(), BasicAuthDetector())
_TOKEN_PATTERNS = tuple(pattern for plugin in _TOKEN_PLUGINS for pattern in plugin.denylist)
_KEYWORD = KeywordDetector()
_ENTROPY = Base64HighEntropyString()
# prefixes of keys detect-secrets 1.5 has no plugin for (OpenAI project, Anthropic, GitHub fine-grained, Google)
_PREFIXED = re.compile(r"(?<![\w-])(?:sk-(?:proj|ant|svcacct|admin)-[\w-]{16,}|github_pat_\w{22,}"
                       r"|AIza[\w-]{35})(?![\w-])")
_JWT = re.compile(r"(?<![\w-])eyJ[\w-]+\.eyJ[\w-]+\.[\w-]*")
_RANDOM = re.compile(r"(?<![\w+/=-])[\w+/=-]{24,}(?![\w+/=-])")
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_LINE = re.compile(r"\n[A-Za-z0-9+/=]+(?=\n|$)")
_PEM_SPAN = 32_768  # a PEM or PGP private key block is a few KiB; an END farther away is another's
_KEYWORDS = re.compile(r"(?i)(?:" + "|".join(DENYLIST) + r")[\w]{0,40}[\]'\"]{0,2}[ \t]*(?::=|:|=)")
_TOKEN = re.compile(r"\S+")
_WORD_CHARACTER = re.compile(r"\w")


def _token_windows(text: str) -> Iterator[tuple[int, str]]:
    """Each whitespace-separated token with its offset; one longer than `_WINDOW` in windows of
    `_WINDOW` that overlap by half, so a secret of up to `_WINDOW // 2` characters is whole in one."""
    for m in _TOKEN.finditer(text):
        start, token = m.start(), m.group()
        if len(token) <= _WINDOW:
            yield start, token
            continue
        for at in range(0, len(token) - _WINDOW // 2, _WINDOW // 2):
            yield start + at, token[at:at + _WINDOW]


def _widen(text: str, start: int, end: int, lo: int, hi: int) -> Span:
    """A token secret is the whole run of token characters around the part a plugin matched (the
    Slack plugin stops at the first upper-case letter of `xoxb-…-AbCd…`), within `lo:hi` (so a
    token of thousands of characters costs no more than its windows)."""
    while start > lo and (text[start - 1].isalnum() or text[start - 1] in "_-"):
        start -= 1
    while end < hi and (text[end].isalnum() or text[end] in "_-"):
        end += 1
    return start, end


def _plugin_secrets(text: str) -> Iterator[Span]:
    for offset, window in _token_windows(text):
        for pattern in _TOKEN_PATTERNS:
            for m in pattern.finditer(window):
                groups = [g for g in range(1, (pattern.groups or 0) + 1) if m.group(g)]
                if groups and m.start(groups[-1]) > m.start():  # the secret is a part (basic auth: the password)
                    start, end = m.span(groups[-1])
                else:
                    value = m.group().strip(" \t\"'=:")
                    start = m.start() + m.group().index(value)
                    end = start + len(value)
                # up to half a window past this one's end: a secret the end cuts is whole, and found
                # here first (the next window, which holds it whole too, would lose to the cut one)
                yield _widen(text, offset + start, offset + end, offset,
                             min(len(text), offset + len(window) + _WINDOW // 2))


def _prose(value: str) -> bool:
    """`password: see the vault` names no secret: a keyword's value of six lower-case letters or
    fewer is taken as a word of the sentence."""
    return value.isalpha() and value.islower() and len(value) <= 6


def keyword_value(value: str) -> str | None:
    """The secret in a keyword plugin's value, or None: its first word, without the sentence's
    closing punctuation; a template (`{x}`, `<x>`, `${x}`, a pseudonym) or a word is none."""
    words = value.split()
    if not words:
        return None
    word = words[0].rstrip(".,;)").strip("\"'`")
    if not word or is_templated_secret(word) or word.startswith("$") or _prose(word):
        return None
    return word


def _keyword_secrets(text: str) -> Iterator[Span]:
    at = 0
    while (m := _KEYWORDS.search(text, at)) is not None:
        line_end = text.find("\n", m.end())
        window_end = min(len(text) if line_end < 0 else line_end, m.end() + _WINDOW)
        window = text[m.start():window_end]
        at = m.end()
        # the plugin's expressions each yield their first value in the window, which may belong to a
        # later keyword: this keyword's value is the one that starts right after it (within ten
        # characters, or farther with no word between: a config file's aligned columns)
        values = [v for found in _KEYWORD.analyze_string(window, denylist_regex_to_group=CONFIG_DENYLIST_REGEX_TO_GROUP)
                  if (v := keyword_value(found)) is not None]
        starts = [(text.find(v, m.end(), window_end), v) for v in values]
        spans = [(start, start + len(v)) for start, v in starts
                 if start >= 0 and (start <= m.end() + 10 or _WORD_CHARACTER.search(text, m.end(), start) is None)]
        if spans:
            start, end = min(spans)
            if end == window_end and (rest := _TOKEN.match(text, end)) is not None:
                end = rest.end()  # cut short by the window: a value longer than it runs on to its word's end
            yield start, end
            at = end


def _private_keys(text: str) -> Iterator[Span]:
    """A PEM private key, from its BEGIN line to its END line within `_PEM_SPAN` characters (or, cut
    short, to the last line of key material after BEGIN within them). Any label that names a private
    key is one: detect-secrets' `PrivateKeyDetector` knows no `ENCRYPTED PRIVATE KEY`."""
    at = 0
    while (m := _PEM.search(text, at)) is not None:
        end_marker = _PEM_END.search(text, m.end(), m.end() + _PEM_SPAN)
        end = m.end()
        if end_marker is not None:
            end = end_marker.end()
        else:
            for line in _PEM_LINE.finditer(text, m.end(), m.end() + _PEM_SPAN):
                if line.start() != end:
                    break
                end = line.end()
        yield m.start(), end
        at = end


def high_entropy(token: str) -> bool:
    """A long random token (24+ characters): upper and lower case, digits, and a Shannon entropy
    (the high-entropy plugin's) of 3.5 bits or more. UUIDs, hex digests and identifiers
    (`getHTTPResponseCode2XX`, `SomeVeryLongClassName…`) fail it."""
    if is_potential_uuid(token) or sum(c.isdigit() for c in token) < 2:
        return False
    if sum(c.isupper() for c in token) < 2 or sum(c.islower() for c in token) < 2:
        return False
    return bool(_ENTROPY.calculate_shannon_entropy(token) >= 3.5)


def secrets(text: str) -> Iterator[Span]:
    yield from _private_keys(text)
    yield from _keyword_secrets(text)
    yield from _plugin_secrets(text)
    for m in _PREFIXED.finditer(text):
        yield m.span()
    for m in _JWT.finditer(text):  # header and payload decode to JSON (the signature may be cut short)
        if JwtTokenDetector.is_formally_valid(".".join(m.group().split(".")[:2])):
            yield m.span()
    for m in _RANDOM.finditer(text):
        if high_entropy(m.group()):
            yield m.span()


# --- IBAN -----------------------------------------------------------------------------------

# What `iban.compact` removes between characters: ' ', '-', '.' and what stdnum's character map reads
# as one of them (tests/replay/privacy/test_recognizers_boundaries.py checks the list against stdnum itself).
IBAN_SEPARATORS = (" -.\xa0\xaf\xb7\u02d7\u02d9\u0387\u058a\u05be\u06d4\u0701\u0702\u0830\u0f0b\u0f0c"
                   "\u1680\u16eb\u180a\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                   "\u2010\u2011\u2012\u2013\u2014\u2015\u2022\u2024\u2027\u202f\u203e\u2043\u205f\u207b"
                   "\u208b\u2212\u2219\u22c5\u23af\u23ba\u23bb\u23bc\u23bd\u23e4\u2e31\u2e33\u3000\u3002"
                   "\u30fb\ufbb2\ufbb3\ufe52\ufe63\uff0d\uff0e\uff65\uffe3\U00010101\U0001091f\U00010a50")
_IBAN = re.compile(rf"(?<![A-Za-z0-9])[A-Za-z]{{2}}[0-9]{{2}}"
                   rf"(?:[{re.escape(IBAN_SEPARATORS)}]{{0,3}}[A-Za-z0-9]){{11,32}}")


def ibans(text: str) -> Iterator[Span]:
    """The longest valid IBAN from each candidate's start that ends at a word boundary (a candidate
    runs on into the next words: `… 0130 00 BIC` → `… 0130 00 B`); the search goes on after the
    IBAN found, or after the candidate's start, never past a later IBAN the candidate ran into."""
    at = 0
    while (m := _IBAN.search(text, at)) is not None:
        start, end = m.span()
        at = start + 1
        while end - start >= 15:
            if not text[end:end + 1].isalnum() and text[end - 1].isalnum() and iban.is_valid(text[start:end]):
                yield start, end
                at = end
                break
            end -= 1


# --- cards ----------------------------------------------------------------------------------

_DIGIT_RUN = re.compile(r"(?<![\w.-])\d+(?:[ .-]\d+)*")
_GROUP = re.compile(r"\d+")


def card_number(digits: str) -> bool:
    """13–19 digits, an issuer's first digit (2 Mastercard, 3 Amex/Diners/JCB, 4 Visa, 5 Mastercard,
    6 Discover/UnionPay/Maestro) and a valid Luhn check digit (`stdnum.luhn`)."""
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn.is_valid(digits)


def cards(text: str) -> Iterator[Span]:
    """Runs of digit groups; within a run, the longest span of whole groups with one separator that
    is a card number, from each group on (a run may start with a number that is not part of the
    card: `no. 7 4111 1111 …`). A card has at most 19 digits, so at most 19 groups from each one
    are tried: a run of thousands of groups (`1 1 1 …`) costs linear time."""
    for m in _DIGIT_RUN.finditer(text):
        if m.end() < len(text) and text[m.end()].isalnum() or _continues_a_number(text, m.start()):
            continue  # a run that runs into a word (`1Z999AA…`) is an id, one after `DE89 ` a number's tail
        groups = [(m.start() + g.start(), m.start() + g.end()) for g in _GROUP.finditer(m.group())]
        i = 0
        while i < len(groups):
            longest, digits = None, ""
            for j in range(i, min(len(groups), i + 19)):
                if j > i and text[groups[j - 1][1]] != text[groups[i][1]]:
                    break  # one separator throughout
                digits += text[groups[j][0]:groups[j][1]]
                if len(digits) > 19:
                    break
                if card_number(digits):
                    longest = j
            if longest is not None:
                yield groups[i][0], groups[longest][1]
                i = longest
            i += 1


# --- IP addresses ---------------------------------------------------------------------------

_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_VERSION_CUE = re.compile(r"(?i)(?<![a-z])(?:version|ver|release|firmware|build|revision|rev|patch|tag)[\s:=]{1,3}\Z")


def ips(text: str) -> Iterator[Span]:
    for m in _IPV4.finditer(text):
        if all(int(part) <= 255 for part in m.group().split(".")) \
                and not _VERSION_CUE.search(text[max(0, m.start() - 12):m.start()]):
            yield m.span()
    for m in _IPV6.finditer(text):
        candidate = m.group()
        if sum(bool(group) for group in candidate.split(":")) >= 2:
            try:
                ipaddress.IPv6Address(candidate)
            except ValueError:
                continue
            yield m.span()


# --- person names after a cue -------------------------------------------------------------

_UPPER, _LOWER = "A-ZÀ-ÖØ-ÞŁŚŻŹĆŃŠŽČ", "a-zß-öø-ÿłśżźćńšžč'’"
_NAME_WORD = f"[{_UPPER}][{_LOWER}]+(?:-?[{_UPPER}][{_LOWER}]+)*"
_PARTICLE = r"(?:van|von|de|da|del|der|den|di|du|le|la|zu|ter)"
_PERSON = re.compile(
    r"(?:(?<![\w])(?:(?:Dear|Mr|Mrs|Ms|Mx|Miss|Dr|Prof|Herr|Frau|Madame|Monsieur|Señor|Señora)\.?[ \t]+){1,2}"
    r"|(?<![\w])(?i:name|full[ _]name|attn|contact[ _]person|ansprechpartner(?:in)?)[ \t]*[:=][ \t]*"
    r"(?:(?:Mr|Mrs|Ms|Dr|Prof|Herr|Frau)\.?[ \t]+)?)"
    f"({_NAME_WORD}(?:[ \\t]+(?:{_PARTICLE}[ \\t]+){{0,2}}{_NAME_WORD}){{0,2}})(?![\\w-])")
_NOT_NAMES = frozenset({
    "Customer", "Customers", "Sir", "Sirs", "Madam", "Team", "All", "Colleague", "Colleagues", "Friend", "Friends",
    "Everyone", "Support", "Sales", "Valued", "Hiring", "Manager", "Member", "Members", "User", "Users", "Client",
    "Partner", "Kunde", "Kundin", "Kollegen", "Damen", "Herren", "Applicant", "Reader", "Subscriber", "Owner", "Admin",
    "Administrator",
    # a cue is no name (`Attn: Dr. <PERSON_…>` redacted again must stay as it is)
    "Dear", "Mr", "Mrs", "Ms", "Mx", "Miss", "Dr", "Prof", "Herr", "Frau", "Madame", "Monsieur", "Señor", "Señora"})


def persons(text: str) -> Iterator[Span]:
    for m in _PERSON.finditer(text):
        if m.group(1).split()[0] not in _NOT_NAMES:
            yield m.span(1)
    yield from keyed_persons(text)


# --- person names under a key that names a person -------------------------------------------

_PERSON_WORDS = frozenset({
    "customer", "contact", "assignee", "owner", "reporter", "author", "recipient", "sender", "requester", "approver",
    "reviewer", "employee", "patient", "user", "holder", "cardholder", "signatory", "attendee", "participant",
    "guest", "person", "surname", "addressee", "beneficiary", "payee", "payer", "driver", "passenger"})
"""A key whose last word is one of these names a person (`customer`, `billing_contact`, `ticket_assignees`)."""
_WHOLE_KEYS = frozenset({"from", "to", "cc", "bcc", "attn", "contact_person", "ansprechpartner"})
"""Keys that name a person only alone (`date_from`, `valid_to` do not)."""
_NAME_HEADS = frozenset({"billing", "full", "first", "last", "given", "family", "middle", "maiden", "legal",
                         "account", *_PERSON_WORDS})
"""`<head>_name` names a person (`first_name`, `customer_name`); `file_name`, `product_name` do not."""
_WEAK_KEYS = frozenset({"name", "names", "display_name", "fullname"})
"""Keys that name a person only in an object that describes one (`customer.name`; a product's `name` does not)."""
_RECORD_KEYS = frozenset({"email", "e_mail", "email_address", "mail", "phone", "phone_number", "mobile",
                          "telephone", "tel", "first_name", "last_name", "surname", "given_name", "family_name",
                          "date_of_birth", "dob", "birthday", "birth_date", "salutation", "gender", "pronouns"})
"""Sibling keys that say an object describes a person."""
_RECORD_TYPES = frozenset({"person", "user", "customer", "contact", "employee", "patient", "individual", "lead",
                           "member", "people", "users", "customers", "contacts"})
_TYPE_KEYS = ("type", "kind", "object", "entity", "role")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_WORD = re.compile(r"[a-z0-9]+")


def _key_words(key: str) -> list[str]:
    """A key's words, lower case: `billingName`, `billing-name` and `BILLING_NAME` are `billing`, `name`."""
    return _KEY_WORD.findall(_CAMEL.sub("_", key[:64]).lower())


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and word[:-1] in _PERSON_WORDS else word


def person_key(key: str) -> bool:
    """Whether a JSON key (or a `key: value` line's key) names a person: its value's names are found."""
    words = _key_words(key)
    if not words:
        return False
    joined = "_".join(words)
    if joined in _WHOLE_KEYS or _singular(words[-1]) in _PERSON_WORDS:
        return True
    if len(words) >= 2 and words[-1] == "by":  # created_by, approved_by
        return True
    return len(words) >= 2 and words[-1] in ("name", "names") and _singular(words[-2]) in _NAME_HEADS


def weak_person_key(key: str) -> bool:
    """`name` and the like: a person's name only in an object that describes a person."""
    return "_".join(_key_words(key)) in _WEAK_KEYS


def person_record(value: dict[str, object]) -> bool:
    """Whether an object describes a person: a sibling key such as `email` or `first_name`, or a `type`
    (`kind`, `object`, `role`) of `person`, `customer`, `contact`…"""
    for key, item in value.items():
        if "_".join(_key_words(key)) in _RECORD_KEYS:
            return True
        if key.lower() in _TYPE_KEYS and isinstance(item, str) and item.strip().lower() in _RECORD_TYPES:
            return True
    return False


_PARTICLES = frozenset({"van", "von", "de", "da", "del", "della", "der", "den", "di", "du", "le", "la", "zu", "ter",
                        "ten", "bin", "binti", "ibn", "bint", "al", "el", "dos", "das", "do", "y", "e", "mac", "st"})
_NOT_A_PERSON = frozenset(w.lower() for w in (
    *_NOT_NAMES,
    # organisations
    "GmbH", "AG", "KG", "Inc", "Ltd", "LLC", "LLP", "Corp", "Corporation", "Company", "Co", "SA", "SAS", "SARL",
    "BV", "NV", "plc", "SE", "Group", "Holding", "Holdings", "Bank", "University", "Foundation", "Institute",
    "Association", "Services", "Solutions", "Systems", "Technologies", "Labs", "Studio", "Agency", "Store", "Shop",
    # teams and roles
    "Department", "Dept", "Desk", "Office", "Billing", "Finance", "Accounting", "Engineering", "Operations", "Ops",
    "Marketing", "Legal", "Security", "Platform", "Helpdesk", "Service", "Bot", "Robot", "System", "Automation",
    "Scheduler", "Unassigned", "Nobody", "Anonymous", "Everyone", "Unknown", "None", "Null", "Me", "Self",
    # states and answers
    "Open", "Opened", "Closed", "Done", "Pending", "Paid", "Unpaid", "Overdue", "Draft", "New", "Active", "Inactive",
    "Approved", "Rejected", "Cancelled", "Canceled", "Resolved", "Blocked", "Review", "Yes", "No", "True", "False",
    "Todo", "Backlog", "Progress", "Shipped", "Delivered", "Refunded",
    # labels inside a value (`"full_name": "Name: Wei Zhang"`, `contact=… and Tel. …`)
    "Name", "Contact", "Attn", "Tel", "Phone", "Telefon", "Email", "E-Mail", "Mail", "Fax", "Mobile", "Mobil", "Ref",
    "Re", "Fwd", "Nr", "Id", "Subject", "Betreff", "Address", "Adresse"))
_OPAQUE = re.compile(r"<[A-Z]+_[0-9a-f]{8}>")
"""A pseudonym (replay/privacy/redact.py)."""
_TITLES = frozenset({"mr", "mrs", "ms", "mx", "miss", "dr", "prof", "herr", "frau", "madame", "monsieur", "señor",
                     "señora", "sir", "dame"})
_VALUE_PART = re.compile(r"[^,;/|&()<>\[\]{}\n\t\"+=:@#]+")
_CONJUNCTION = re.compile(r"\s+(?:and|und|et|y|e|og|och|en|i)\s+")
_JOINERS = "'’.-·・"
_WORD = re.compile(r"[^\s.'\"`*_][^\s\"`*]*[^\s'\"`*_]|[^\s.'\"`*_]")


def _name_word(word: str) -> bool:
    """A capitalised word of a cased script (`Jane`, `O'Brien`, `Łukasz`, `Γιώργος`, `J.`) or a word of a
    caseless one (`王伟`, `김민준`, `محمد`, `प्रिया`); no digits. An upper-case word of two letters or more
    is an acronym or an enum (`OPEN`, `EUR`), not a name."""
    letters = [c for c in word if c not in _JOINERS]
    if not letters or not all(c.isalpha() or unicodedata.category(c).startswith("M") for c in letters):
        return False
    first = letters[0]
    if first.isupper():
        return not (len(letters) > 1 and all(c.isupper() for c in letters if c.isalpha()))
    return not first.islower() and not any(c.isupper() or c.islower() for c in letters)


def _hyphenated(word: str) -> bool:
    """`García-López`, `al-Hassan`, `Ji-woo`: a name word with particles or lower-case parts around it (a
    romanised Korean given name's second syllable is lower case)."""
    parts = word.split("-")
    named = [i for i, p in enumerate(parts) if _name_word(p)]
    return bool(named) and all(i in named or p.lower() in _PARTICLES or (i > named[0] and p.isalpha() and p.islower())
                               for i, p in enumerate(parts))


def _is_name(words: list[str]) -> bool:
    """One to five words, each a name word or a particle (`van der Berg`), the last a name word."""
    if not 1 <= len(words) <= 5 or any(w.strip(".").lower() in _NOT_A_PERSON for w in words):
        return False
    return _hyphenated(words[-1]) and all(_hyphenated(w) or w.lower() in _PARTICLES for w in words[:-1])


def names_in_value(text: str) -> Iterator[Span]:
    """The person names in a value a person key announces (`"customer": "Jane Roe, jane.roe@example.com"`,
    `"to": ["Li Wei", "Ana Souza"]`): each part between separators (`,` `;` `/` `&` `<…>` `(…)`, `and`)
    that is one to five name words, particles between (`Jan van der Berg`), after any title (`Dr.`). Not a
    part holding a digit, an organisation's or a team's word (`Acme GmbH`, `Billing Team`) or a state
    (`Open`, `Done`). Only the first `_WINDOW` characters are read. A pseudonym is read as the value it
    replaced would be, a word that is no name (`Kreditkarte <CARD_…>` as `Kreditkarte 4111 …`), so a second pass
    finds what the first did."""
    window = _OPAQUE.sub(lambda m: "0" * len(m.group()), text[:_WINDOW])
    for part in _VALUE_PART.finditer(window):
        pieces, at = [], part.start()
        for conjunction in _CONJUNCTION.finditer(window, part.start(), part.end()):
            pieces.append((at, conjunction.start()))
            at = conjunction.end()
        pieces.append((at, part.end()))
        for low, high in pieces:
            words = [(w.start(), w.end()) for w in _WORD.finditer(window, low, high)]
            while words and window[words[0][0]:words[0][1]].rstrip(".").lower() in _TITLES:
                words = words[1:]
            if words and _is_name([window[a:b] for a, b in words]):
                yield words[0][0], words[-1][1]


_KEY_LINE = re.compile(
    r"(?im)(?:^[ \t]*(?:[-*][ \t]+)?|[\"'])"
    r"(customer|contact(?:[ _]?person)?|assignee|owner|from|to|cc|bcc|reporter|author|recipient|sender|requester|"
    r"approver|reviewer|employee|patient|user|holder|cardholder|signatory|attendee|participant|guest|surname|"
    r"(?:billing|full|first|last|given|family|middle|maiden|legal|contact|customer|holder|recipient|sender|owner|"
    r"author|assignee|user)[ _-]?name|(?:created|updated|assigned|approved|requested|reported|signed|submitted|"
    r"modified|reviewed)[ _-]?by)s?[\"']?[ \t]*[:=][ \t]*")


_NEXT_KEY = re.compile(r"\b[A-Za-z_][\w-]*[ \t]*[:=](?=[ \t]|$)", re.M)
"""Another `key:` on the line ends an unquoted value: its words are that key's, not the person's."""


def keyed_persons(text: str) -> Iterator[Span]:
    """Names after a person key in text: a `key: value` line (`Customer: Jane Roe`, `assigned_to: Li Wei`) or a
    quoted key as JSON and Python write one (`"owner": "Ana Souza"`, in a tool result that is not whole JSON).
    The value runs to its closing quote, or to the end of its line, at most `_WINDOW` characters."""
    for m in _KEY_LINE.finditer(text):
        at = m.end()
        quote = text[at:at + 1]
        if quote in ("\"", "'"):
            close = text.find(quote, at + 1, at + 1 + _WINDOW)
            end = close if close >= 0 else min(len(text), at + 1 + _WINDOW)
            at += 1
        else:
            line_end = text.find("\n", at, at + _WINDOW)
            end = line_end if line_end >= 0 else min(len(text), at + _WINDOW)
            if (after := _NEXT_KEY.search(text, at, end)) is not None:  # `user: ops-bot and filename: a.pdf`
                end = after.start()
        for start, stop in names_in_value(text[at:end]):
            yield at + start, at + stop


# --- phone numbers --------------------------------------------------------------------------

_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[./]\d{1,2}[./]\d{2,4}")


_NUMBER_HEAD = re.compile(r"\d+|[A-Za-z]{2}\d{2}")


def _continues_a_number(text: str, start: int) -> bool:
    """A span after a space that follows a digit group or an IBAN's head (`DE89 3704 0044 …`, an IBAN
    whose check digits fail) is the tail of a longer number, not a number of its own."""
    return text[start - 1:start] == " " and _NUMBER_HEAD.fullmatch(_token_before(text, start - 1)) is not None


def _glued(near: str, far: str) -> bool:
    """Whether the character next to a match (`near`), or the one beyond it (`far`) through `-`, `/`,
    `.` or `_`, is part of a word."""
    return near.isalnum() or near == "_" or (near in "-/._" and far.isalnum())


def _inside_a_word(text: str, start: int, end: int) -> bool:
    """A match glued to letters or digits, directly or through `-`, `/`, `.` or `_` (`INV-2024-000017`),
    or the tail of a longer number."""
    before, after = text[max(0, start - 2):start].rjust(2), text[end:end + 2].ljust(2)
    return _continues_a_number(text, start) or _glued(before[1], before[0]) or _glued(after[0], after[1])


def phones(text: str, regions: tuple[str, ...] = PHONE_REGIONS) -> Iterator[Span]:
    if sum(c.isdigit() for c in text) < 7:
        return
    seen: set[Span] = set()
    for region in regions:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            span = (match.start, match.end)
            if span in seen or _inside_a_word(text, *span) or _DATE.search(match.raw_string):
                continue
            seen.add(span)
            yield span
