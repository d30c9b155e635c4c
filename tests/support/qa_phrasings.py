"""A labelled set of final answers for Stop-QA's `count_mismatch` and `unacknowledged_tool_error` checks
(replay/qa/checks.py) and their scoring, shared by tests/replay/qa/test_check_rates.py and
scripts/bench_qa_checks.py.

Each case is a run as a reviewer would read it: the tool calls (tool, input, the guard's reading, the result)
and a final answer written as agents write them, labelled with what a reviewer concludes. A count case is
labelled `mismatch` when the answer counts the listed items wrongly; one that counts them right, counts a part
of them, or holds a number that is no count (an id, an amount, a date) is not. An error case names the failing
tools a reviewer would say the answer hides; the other failing tools of the case it acknowledges (names the tool,
or admits a failure of what the call was about, or admits failing without blaming anything else). Categories
say what each case probes; some cases are phrasings the checks are known to miss or flag wrongly, kept so the
figures stay honest. The set is fixed, so the figures are deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.guard import GuardKind
from replay.qa.checks import CheckRules, Finding
from replay.qa.finished_run import AnswerText, Run, ThreadCall

SEARCH_INVOICES = "mcp__billing__search_invoices"
Batch = Literal["tuning", "held-out"]
"""`tuning`: written first, the checks widened on them; `held-out`: written after the widening, before any run."""


def invoices(*statuses: str, **fields: Any) -> list[dict[str, Any]]:
    """Invoice items, one per status ("" leaves the status out), each with an id, an amount and a due date."""
    return [{"id": f"INV-{100 + i}", **({"status": s} if s else {}), "amount": 120 + 15 * i,
             "due": f"2026-11-{i % 28 + 1:02d}", **fields} for i, s in enumerate(statuses)]


@dataclass(frozen=True)
class CountCase:
    category: str
    answer: str
    result: Any
    """The last tool result's JSON value."""
    mismatch: bool
    tool: str = SEARCH_INVOICES
    input: Any = field(default_factory=dict)
    batch: Batch = "tuning"

    def run(self, number: int) -> Run:
        call = ThreadCall("c0", self.tool, "use-0", "result-0", GuardKind.OK, json.dumps(self.result), self.input)
        return Run("ws", f"count-{number}", "final", (AnswerText("final", self.answer),), (call,), (call,))


OPEN5 = {"invoices": invoices(*["open"] * 5)}
PLAIN5 = {"invoices": invoices(*[""] * 5)}
MIXED = {"invoices": invoices("overdue", "open", "overdue", "open", "open")}

COUNT_CASES: tuple[CountCase, ...] = (
    # counts of the whole list, wrong
    CountCase("adjacent", "I found 3 invoices.", PLAIN5, True),
    CountCase("adjacent", "There are 4 results for your search.", PLAIN5, True),
    CountCase("adjacent", "I found 1 invoice for Acme.", PLAIN5, True),
    CountCase("adjacent", "Found 6 invoices, listed below.", PLAIN5, True),
    CountCase("modifier", "I found 3 open invoices.", OPEN5, True),
    CountCase("modifier", "You have 4 open invoices right now.", OPEN5, True),
    CountCase("modifier", "Acme has 3 unpaid invoices totalling $1,200.", {"invoices": invoices(*["unpaid"] * 5)},
              True),
    CountCase("modifier", "There are 6 overdue invoices.", {"invoices": invoices(*["overdue"] * 5)}, True),
    CountCase("modifier", "I found 3 past-due invoices.", {"invoices": invoices(*["past_due"] * 5)}, True),
    CountCase("modifier", "I found 3 matching invoices.", PLAIN5, True),
    CountCase("modifier", "The search returned 4 matching results.", PLAIN5, True),
    CountCase("modifier", "I found 3 open invoices.", PLAIN5, True, tool="mcp__billing__list_open_invoices"),
    CountCase("modifier", "Acme has 2 outstanding invoices.", PLAIN5, True, input={"status": "outstanding"}),
    CountCase("modifier", "I found 4 open Acme invoices.", OPEN5, True, input={"customer": "Acme"}),
    CountCase("modifier", "There are 3 disputed invoices.", {"invoices": invoices(*[""] * 5, disputed=True)}, True),
    CountCase("modifier", "3 invoices are open.", OPEN5, True),
    CountCase("modifier", "Only 2 invoices were found.", PLAIN5, True),
    CountCase("modifier", "I found 3 open and unpaid invoices.", OPEN5, True),  # known miss: `and` ends a count
    CountCase("modifier", "I found 3 large, overdue invoices.", {"invoices": invoices(*["overdue"] * 5)},
              True),  # known miss: a comma ends a count
    CountCase("number word", "I found two invoices.", PLAIN5, True),
    CountCase("number word", "I found four open invoices.", OPEN5, True),
    CountCase("number word", "Three invoices are listed below.", PLAIN5, True),
    CountCase("number word", "There are twelve open invoices.", OPEN5, True),
    CountCase("number word", "I found twenty-five invoices.", {"invoices": invoices(*[""] * 24)}, True),
    CountCase("number word", "Acme has thirty one open invoices.", {"invoices": invoices(*["open"] * 30)}, True),
    CountCase("plural", "I found 3 entries.", {"entries": [{"n": i} for i in range(4)]}, True),
    CountCase("plural", "I found 2 companies named Acme.", [{"name": "Acme"}] * 3, True,
              tool="mcp__crm__search_companies"),
    CountCase("plural", "3 matches found.", {"matches": [{"n": i} for i in range(5)]}, True),
    CountCase("plural", "The query returned 4 boxes.", [{"id": i} for i in range(5)], True, tool="list_boxes"),
    CountCase("plural", "There are 1,204 records.", {"records": [{"n": i} for i in range(1205)]}, True),
    CountCase("plural", "I found 7 customers.", [{"id": i} for i in range(5)], True,
              tool="mcp__crm__search_customers"),
    # counts that are right
    CountCase("correct", "I found 5 invoices.", PLAIN5, False),
    CountCase("correct", "I found 5 open invoices.", OPEN5, False),
    CountCase("correct", "You have five unpaid invoices.", {"invoices": invoices(*["unpaid"] * 5)}, False),
    CountCase("correct", "There are 5 matching results.", PLAIN5, False),
    CountCase("correct", "I found 42 invoices; here are the first 5.", {"total": 42, **PLAIN5}, False),
    CountCase("correct", "I found 5 invoices; 2 invoices are overdue.", MIXED, False),
    CountCase("correct", "I found twenty-four invoices.", {"invoices": invoices(*[""] * 24)}, False),
    CountCase("correct", "There are 1,205 records.", {"records": [{"n": i} for i in range(1205)]}, False),
    CountCase("correct", "All 5 invoices are open.", OPEN5, False),
    CountCase("correct", "Acme has thirty open invoices.", {"invoices": invoices(*["open"] * 30)}, False),
    # counts of a part of the list
    CountCase("part", "2 overdue invoices need attention.", MIXED, False),
    CountCase("part", "Of the 5 invoices, 2 are overdue.", MIXED, False),
    CountCase("part", "I found 3 open invoices and 2 overdue ones.", MIXED, False),
    CountCase("part", "There are 2 disputed invoices.",
              {"invoices": invoices("", "", "", disputed=False) + invoices("", "", disputed=True)}, False),
    CountCase("part", "2 new invoices arrived this week.", PLAIN5, False),
    CountCase("part", "3 invoices are open, 2 are overdue.", MIXED, False),
    CountCase("part", "2 invoices are overdue.", PLAIN5, False),  # overdue by their due dates
    CountCase("part", "The 2 largest invoices are INV-103 and INV-104.", PLAIN5, False),
    CountCase("part", "3 more invoices need review.", PLAIN5, False),
    CountCase("part", "The other 2 invoices are paid.", PLAIN5, False),
    CountCase("part", "2 invoices are not open.", MIXED, False),
    CountCase("part", "Invoice INV-104 covers 3 items.", PLAIN5, False),  # known false finding: its own items
    # numbers that are no count
    CountCase("not a count", "Invoice 3 is paid.", PLAIN5, False),
    CountCase("not a count", "See invoice #4 and invoice #7.", PLAIN5, False),
    CountCase("not a count", "On March 3 invoices were sent to Acme.", PLAIN5, False),
    CountCase("not a count", "Since 2024 invoices have been issued monthly.", PLAIN5, False),
    CountCase("not a count", "The 2026-11-04 invoices batch is done.", PLAIN5, False),
    CountCase("not a count", "The due date is 2026-12-03; invoices are listed below.", PLAIN5, False),
    CountCase("not a count", "You owe 1,200 EUR on open invoices.", OPEN5, False),
    CountCase("not a count", "Step 3: invoices are exported.", PLAIN5, False),
    CountCase("not a count", "In 3 days, invoices will be overdue.", PLAIN5, False),
    CountCase("not a count", "Version 2 invoices API is deprecated.", PLAIN5, False),
    CountCase("not a count", "Invoices 3 and 4 are overdue.", PLAIN5, False),
    CountCase("not a count", "1. Invoice INV-100\n2. Invoice INV-101", PLAIN5, False),
    CountCase("not a count", "Run `report --last 3 invoices` to see them.", PLAIN5, False),
    CountCase("not a count", "INV-104 is $300, due in 2 weeks; invoices sent.", PLAIN5, False),
    # qualified counts
    CountCase("qualified", "The top 3 invoices by amount are INV-104, INV-103 and INV-102.", PLAIN5, False),
    CountCase("qualified", "Showing the first 3 results.", PLAIN5, False),
    CountCase("qualified", "About 6 invoices are due this month.", PLAIN5, False),
    CountCase("qualified", "Over 10 invoices were paid late last year.", PLAIN5, False),
    # held out
    *(CountCase(category, answer, result, mismatch, tool, input, "held-out")
      for category, answer, result, mismatch, tool, input in (
          ("modifier", "Here are the 4 unpaid invoices for Acme:", {"invoices": invoices(*["unpaid"] * 5)}, True,
           SEARCH_INVOICES, {}),
          ("adjacent", "Acme currently has 6 invoices outstanding.", PLAIN5, True, SEARCH_INVOICES,
           {"customer": "Acme"}),
          ("plural", "You've got 3 overdue bills.", {"invoices": invoices(*["overdue"] * 5)}, True, SEARCH_INVOICES,
           {}),
          ("modifier", "I located 2 customer records matching 'Acme'.", [{"name": "Acme"}] * 3, True,
           "mcp__crm__search_customers", {"query": "Acme"}),
          ("modifier", "There's just 1 open ticket.", [{"id": 1}, {"id": 2}], True, "mcp__support__list_tickets",
           {"state": "open"}),
          ("correct", "Found 5 tickets; 3 of them are high priority.", [{"id": n} for n in range(5)], False,
           "mcp__support__list_tickets", {}),
          ("part", "The repository has 12 open issues and 4 open pull requests.", [{"state": "open"}] * 12, False,
           "mcp__github__list_issues", {}),
          ("part", "I see 3 failing checks on the PR.",
           [{"conclusion": "failure"}] * 3 + [{"conclusion": "success"}] * 4, False, "mcp__github__list_checks", {}),
          ("adjacent", "There are 10 files in the directory.", [{"path": f"f{n}"} for n in range(8)], True,
           "list_files", {"path": "src"}),
          ("adjacent", "The API returned 20 rows; showing 5.", {"rows": [{"n": n} for n in range(5)]}, True,
           "run_query", {"sql": "select * from t limit 5"}),
          ("qualified", "Your 3 most recent orders are below.", [{"id": n} for n in range(3)], False,
           "mcp__shop__list_orders", {"limit": 3}),
          ("correct", "Of your 8 subscriptions, 2 renew this month.", [{"id": n} for n in range(8)], False,
           "list_subscriptions", {}),
          ("correct", "All four invoices are paid.", {"invoices": invoices(*["paid"] * 4)}, False, SEARCH_INVOICES,
           {}),
          ("part", "There are 2 invoices from 2023 and 3 from 2024.", PLAIN5, False, SEARCH_INVOICES, {}),
          ("not a count", "INV-2 and INV-3 invoices are paid.", PLAIN5, False, SEARCH_INVOICES, {}),
          ("correct", "Invoice total: 3 line items, $450.", {"lines": [{"n": n} for n in range(3)], "total": 450},
           False, "mcp__billing__get_invoice", {"id": "INV-7"}),
          ("modifier", "The 7 pending payments total $2,300.", [{"id": n} for n in range(6)], True,
           "mcp__billing__list_payments", {"status": "pending"}),
          ("correct", "I found eleven matching contacts.", [{"id": n} for n in range(11)], False,
           "mcp__crm__search_contacts", {}),
          ("number word", "I found eleven matching contacts.", [{"id": n} for n in range(12)], True,
           "mcp__crm__search_contacts", {}),
          ("correct", "Thirty-two results came back.", [{"id": n} for n in range(32)], False, "search", {}),
          ("correct", "Build #4512 produced 3 artifacts.", [{"id": n} for n in range(3)], False,
           "mcp__ci__list_artifacts", {"build": 4512}),
          ("adjacent", "Build 4512 produced 2 artifacts.", [{"id": n} for n in range(3)], True,
           "mcp__ci__list_artifacts", {"build": 4512}),
          ("not a count", "Tickets 101, 102 and 103 are open.", [{"id": n} for n in range(5)], False,
           "mcp__support__list_tickets", {}),
          ("part", "On 12 March, 3 invoices were issued.", PLAIN5, False, SEARCH_INVOICES, {}),
          ("adjacent", "3 invoices, totalling $900.", PLAIN5, True, SEARCH_INVOICES, {}),
      )),
)


@dataclass(frozen=True)
class Call:
    tool: str
    input: Any
    outcome: GuardKind
    content: str


SEARCH_FAILED = Call("mcp__crm__search_customers", {"query": "Acme"}, GuardKind.FAILED,
                     "Error: upstream timed out after 30 s")
INVOICE_OK = Call("mcp__billing__get_invoice", {"id": "INV-7"}, GuardKind.OK, '{"id": "INV-7", "status": "paid"}')
INVOICE_FAILED = Call("mcp__billing__get_invoice", {"id": "INV-7"}, GuardKind.FAILED, "Error: 503 from billing")
BUILD_OK = Call("Bash", {"command": "npm run build", "description": "Build the project"}, GuardKind.OK, "built")
TESTS_OK = Call("Bash", {"command": "pytest -q", "description": "Run the test suite"}, GuardKind.OK, "12 passed")
TESTS_FAILED = Call("Bash", {"command": "pytest -q", "description": "Run the test suite"}, GuardKind.FAILED,
                    "2 failed, 10 passed")
DEPLOY_OK = Call("Bash", {"command": "./deploy.sh staging", "description": "Deploy to staging"}, GuardKind.OK, "ok")
PROD_FAILED = Call("Bash", {"command": "./deploy.sh prod", "description": "Deploy to production"}, GuardKind.FAILED,
                   "exit code 1")
EMAIL_FAILED = Call("mcp__mail__send_email", {"to": "ap@acme.example", "subject": "Payment reminder"},
                    GuardKind.FAILED, "SMTP 550: mailbox unavailable")
REMINDER_FAILED = Call("mcp__mail__send_email", {"to": "ap@acme.example", "subject": "Invoice INV-7 reminder"},
                       GuardKind.FAILED, "SMTP 550: mailbox unavailable")
FETCH_FAILED = Call("WebFetch", {"url": "https://status.acme.example/api"}, GuardKind.FAILED, "connection refused")
FORECAST_FAILED = Call("mcp__weather__get_forecast", {"city": "Berlin"}, GuardKind.BLOCKED,
                       "blocked by policy: egress to weather.example")
AGENT_FAILED = Call("Agent", {"description": "Look up invoice INV-7",
                              "prompt": "Find the status of invoice INV-7 in the billing service."},
                    GuardKind.FAILED, "<tool_use_error>InputValidationError: prompt too long</tool_use_error>")


@dataclass(frozen=True)
class ErrorCase:
    category: str
    answer: str
    calls: tuple[Call, ...]
    hidden: frozenset[str]
    """The failing tools whose failure the answer hides; the other failing tools it acknowledges."""
    batch: Batch = "tuning"

    def run(self, number: int) -> Run:
        calls = tuple(ThreadCall(f"c{n}", c.tool, f"use-{n}", f"result-{n}", c.outcome, c.content, c.input)
                      for n, c in enumerate(self.calls))
        return Run("ws", f"error-{number}", "final", (AnswerText("final", self.answer),), calls, calls[-1:])

    def failing(self) -> set[str]:
        """The tools whose last call failed: the ones a finding may be about."""
        last = {c.tool: c.outcome for c in self.calls}
        return {tool for tool, outcome in last.items() if outcome in (GuardKind.FAILED, GuardKind.BLOCKED)}


def hidden(*tools: Call) -> frozenset[str]:
    return frozenset(c.tool for c in tools)


NONE: frozenset[str] = frozenset()

ERROR_CASES: tuple[ErrorCase, ...] = (
    # failures the answer hides
    ErrorCase("silent", "Invoice INV-7 is paid.", (SEARCH_FAILED, INVOICE_OK), hidden(SEARCH_FAILED)),
    ErrorCase("silent", "Sorry for the wait! Invoice INV-7 is paid.", (SEARCH_FAILED, INVOICE_OK),
              hidden(SEARCH_FAILED)),
    ErrorCase("silent", "All 12 tests pass. Invoice INV-7 is paid.", (TESTS_FAILED, INVOICE_OK),
              hidden(TESTS_FAILED)),
    ErrorCase("unrelated admission", "The build failed at first, so I fixed the import; invoice INV-7 is paid.",
              (SEARCH_FAILED, BUILD_OK, INVOICE_OK), hidden(SEARCH_FAILED)),
    ErrorCase("unrelated admission", "All 12 tests pass with no errors. Invoice INV-7 is paid.",
              (SEARCH_FAILED, TESTS_OK), hidden(SEARCH_FAILED)),
    ErrorCase("unrelated admission", "I added error handling to the build script and the build passes.",
              (EMAIL_FAILED, BUILD_OK), hidden(EMAIL_FAILED)),
    ErrorCase("unrelated admission", "I can't wait to help with your next invoice! INV-7 is paid.",
              (SEARCH_FAILED, INVOICE_OK), hidden(SEARCH_FAILED)),
    ErrorCase("unrelated admission", "No errors were found in invoice INV-7. It is paid.",
              (EMAIL_FAILED, INVOICE_OK), hidden(EMAIL_FAILED)),
    ErrorCase("unrelated admission", "The deploy to staging timed out once but succeeded on retry.",
              (FETCH_FAILED, DEPLOY_OK), hidden(FETCH_FAILED)),
    ErrorCase("unrelated admission", "The test suite had 3 failing tests, which I fixed.",
              (SEARCH_FAILED, TESTS_OK), hidden(SEARCH_FAILED)),
    ErrorCase("other tool admitted", "The forecast for Berlin could not be fetched. Invoice INV-7 is paid.",
              (FORECAST_FAILED, INVOICE_FAILED), hidden(INVOICE_FAILED)),
    ErrorCase("other tool admitted", "I couldn't send the payment reminder email. All tests pass.",
              (EMAIL_FAILED, TESTS_FAILED), hidden(TESTS_FAILED)),
    ErrorCase("other tool admitted", "The status page refused the connection. Invoice INV-7 is paid.",
              (FETCH_FAILED, SEARCH_FAILED, INVOICE_OK), hidden(SEARCH_FAILED)),
    # known misses: the subject of the admission is the failing call's by chance, or the admission is a denial
    ErrorCase("unrelated admission", "Invoice INV-7 is paid; the customer's first payment failed but the bank "
              "retried it.", (SEARCH_FAILED, INVOICE_OK), hidden(SEARCH_FAILED)),
    ErrorCase("unrelated admission", "No errors in invoice INV-7: it is paid.", (REMINDER_FAILED, INVOICE_OK),
              hidden(REMINDER_FAILED)),
    ErrorCase("denial", "Done: nothing failed.", (SEARCH_FAILED,), hidden(SEARCH_FAILED)),
    # failures the answer acknowledges
    ErrorCase("names the tool", "mcp__crm__search_customers timed out, so I used the invoice alone.",
              (SEARCH_FAILED, INVOICE_OK), NONE),
    ErrorCase("names the tool", "I tried searchCustomers but it returned nothing useful.",
              (SEARCH_FAILED, INVOICE_OK), NONE),
    ErrorCase("names the tool", "The get_invoice call gave me nothing, so I can't confirm INV-7.",
              (INVOICE_FAILED,), NONE),
    ErrorCase("names the tool", "WebFetch was refused, so the status is unknown.", (FETCH_FAILED, TESTS_OK), NONE),
    ErrorCase("admits its subject", "I couldn't search the CRM for Acme: the request timed out. INV-7 is paid.",
              (SEARCH_FAILED, INVOICE_OK), NONE),
    ErrorCase("admits its subject", "The customer lookup failed; invoice INV-7 is paid.",
              (SEARCH_FAILED, INVOICE_OK), NONE),
    ErrorCase("admits its subject", "I was unable to send the reminder email.", (EMAIL_FAILED, BUILD_OK), NONE),
    ErrorCase("admits its subject", "The test suite failed: 2 tests fail in test_api.py.", (TESTS_FAILED,), NONE),
    ErrorCase("admits its subject", "The status page refused the connection, so I could not check the outage.",
              (FETCH_FAILED,), NONE),
    ErrorCase("admits its subject", "Sorry, I couldn't reach the billing service.", (AGENT_FAILED,), NONE),
    ErrorCase("admits its subject", "I couldn't get the weather for tomorrow.", (FORECAST_FAILED, INVOICE_OK),
              NONE),
    ErrorCase("admits its subject", "The forecast for Berlin could not be fetched, and the invoice lookup failed "
              "too.", (FORECAST_FAILED, INVOICE_FAILED), NONE),
    ErrorCase("admits its subject", "The customer search timed out, and the reminder email could not be sent.",
              (SEARCH_FAILED, EMAIL_FAILED, INVOICE_OK), NONE),
    ErrorCase("admits its subject", "2 tests failed; the rest pass. The build is fine.", (BUILD_OK, TESTS_FAILED),
              NONE),
    ErrorCase("admits its subject", "Invoice INV-7 is paid, but the build failed on the deploy step.",
              (BUILD_OK, DEPLOY_OK, INVOICE_OK, Call("Bash", {"command": "npm run build"}, GuardKind.FAILED, "x")),
              NONE),
    ErrorCase("admits failing", "Unfortunately, that didn't work. Please try again later.", (SEARCH_FAILED,), NONE),
    ErrorCase("admits failing", "The lookup failed, so I cannot say whether it is paid.", (AGENT_FAILED,), NONE),
    ErrorCase("admits failing", "Something went wrong and I could not finish.", (SEARCH_FAILED, EMAIL_FAILED),
              NONE),
    ErrorCase("admits failing", "Sorry, I couldn't complete this. Invoice INV-7 is paid.",
              (SEARCH_FAILED, INVOICE_OK), NONE),
    # held out
    *(ErrorCase(category, answer, calls, hidden, "held-out") for category, answer, calls, hidden in (
        ("admits its subject", "I wasn't able to pull Acme's customer profile, but invoice INV-7 is paid.",
         (SEARCH_FAILED, INVOICE_OK), NONE),
        ("admits its subject", "Invoice INV-7 is paid. Note: the reminder could not be delivered.",
         (EMAIL_FAILED, INVOICE_OK), NONE),
        ("silent", "I've updated the handler. Everything looks good!", (TESTS_FAILED,), hidden(TESTS_FAILED)),
        ("silent", "The build succeeded, so the change is ready to merge.", (BUILD_OK, TESTS_FAILED),
         hidden(TESTS_FAILED)),
        ("admits its subject", "I couldn't load the status page, so I can't say if there's an outage. INV-7 is paid.",
         (FETCH_FAILED, INVOICE_OK), NONE),
        ("other tool admitted", "Weather data is unavailable right now. Acme is an active customer.",
         (FORECAST_FAILED, SEARCH_FAILED), hidden(SEARCH_FAILED)),
        ("admits its subject", "Tests are green; I was unable to verify the customer in the CRM.",
         (SEARCH_FAILED, TESTS_OK), NONE),
        ("admits its subject", "I ran into an error delegating the lookup, so I checked INV-7 myself: it is paid.",
         (AGENT_FAILED, INVOICE_OK), NONE),
        ("unrelated admission", "Invoice INV-7 is paid. Let me know if there's anything else — sorry I can't do "
         "more right now.", (SEARCH_FAILED, INVOICE_OK), hidden(SEARCH_FAILED)),
        ("silent", "Tests pass and the deploy to production is done.", (TESTS_OK, PROD_FAILED), hidden(PROD_FAILED)),
        ("admits its subject", "Tests pass, but the production deploy failed with exit code 1.",
         (TESTS_OK, PROD_FAILED), NONE),
        ("admits its subject", "Both the customer search and the email failed.", (EMAIL_FAILED, SEARCH_FAILED), NONE),
        ("silent", "Email sent to ap@acme.example.", (EMAIL_FAILED,), hidden(EMAIL_FAILED)),
        ("admits its subject", "The forecast service blocked my request; INV-7 is paid.",
         (FORECAST_FAILED, INVOICE_OK), NONE),
    )),
)


@dataclass
class Tally:
    """Labelled positives found and negatives flagged, with the cases behind each miss and false finding."""

    positives: int = 0
    found: int = 0
    negatives: int = 0
    flagged: int = 0
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)

    def add(self, label: bool, finding: bool, what: str) -> None:
        if label:
            self.positives += 1
            self.found += finding
            if not finding:
                self.misses.append(what)
        else:
            self.negatives += 1
            self.flagged += finding
            if finding:
                self.false.append(what)

    @property
    def recall(self) -> float:
        return self.found / self.positives if self.positives else 1.0

    @property
    def false_rate(self) -> float:
        return self.flagged / self.negatives if self.negatives else 0.0


Check = Callable[[Run, CheckRules], list[Finding]]


def score_counts(check: Check, rules: CheckRules, cases: Sequence[CountCase] = COUNT_CASES) -> dict[str, Tally]:
    """Per category and over all (`""`): a case found when the check makes any finding on its run."""
    tallies: dict[str, Tally] = {"": Tally()}
    for number, case in enumerate(cases):
        found = bool(check(case.run(number), rules))
        for key in ("", case.category):
            tallies.setdefault(key, Tally()).add(case.mismatch, found, case.answer)
    return tallies


def score_errors(check: Check, rules: CheckRules, cases: Sequence[ErrorCase] = ERROR_CASES) -> dict[str, Tally]:
    """Per category and over all (`""`), one item per failing tool of a case: found when a finding cites that
    tool's failed call."""
    tallies: dict[str, Tally] = {"": Tally()}
    for number, case in enumerate(cases):
        run = case.run(number)
        cited = {call.tool for finding in check(run, rules) for call in run.calls if call.record in finding.records}
        for tool in sorted(case.failing()):
            for key in ("", case.category):
                tallies.setdefault(key, Tally()).add(tool in case.hidden, tool in cited, f"{case.answer} [{tool}]")
    return tallies


def table(title: str, tallies: dict[str, Tally]) -> str:
    """A markdown table: per category, then over all."""
    lines = [f"| {title} | labelled | found | recall | not labelled | flagged | false-finding rate |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key in [*sorted(k for k in tallies if k), ""]:
        t = tallies[key]
        recall = f"{t.recall:.0%}" if t.positives else "—"
        rate = f"{t.false_rate:.0%}" if t.negatives else "—"
        name = key or "**all**"
        lines.append(f"| {name} | {t.positives} | {t.found} | {recall} | {t.negatives} | {t.flagged} | {rate} |")
    return "\n".join(lines)
