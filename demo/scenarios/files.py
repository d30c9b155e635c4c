"""ws-files: Ledgerline's folders, documents and sharing."""

from __future__ import annotations

from random import Random
from typing import Any

from demo.scenarios.parts import (
    Convo,
    Kit,
    Rejection,
    ScenarioStep,
    error,
    pick,
    random_day,
    system_prompt,
)
from demo.tools import FILES

_FOLDERS = (("fld_210", "Q3 reports"), ("fld_211", "Contracts"), ("fld_212", "Board packs"),
            ("fld_213", "Onboarding"), ("fld_214", "Tax 2026"))
_DOCS = (("fil_501", "pricing sheet"), ("fil_502", "NDA template"), ("fil_503", "onboarding checklist"),
         ("fil_504", "Q3 revenue summary"), ("fil_505", "security policy"), ("fil_506", "travel policy"))
_PARTNERS = ("alex@partnerco.com", "jo@auditors.eu", "sam@lawfirm.com", "kai@agency.io")


def _files_folder_read(rng: Random) -> Rejection:
    fld, name = pick(rng, _FOLDERS)
    rejected = ("read_file", {"file_id": fld})
    ask = pick(rng, ("What's in {n} ({f})?", "Open {f} ({n}) for me.", "Can you check the {n} folder, {f}?"))
    convo = Convo(rng, ask.format(n=name, f=fld)).called(
        *rejected, error("invalid_argument", f"{fld} is a folder; read_file needs a file id")
    )
    return Rejection("files/folder-read", convo.done(), rejected, ("list_files", {"folder_id": fld}))


def _files_missing_destination(rng: Random) -> Rejection:
    fil, doc = pick(rng, _DOCS)
    parent, parent_name = pick(rng, _FOLDERS)
    sub = pick(rng, ("Archive", "Signed", "Drafts", "2026"))
    guess = f"fld_{sub.lower()}"
    rejected = ("move_file", {"file_id": fil, "destination": {"folder_id": guess}})
    convo = Convo(rng, f"Move the {doc} ({fil}) into the {sub} folder inside {parent_name} ({parent}).").called(
        *rejected, error("not_found", f"destination folder {guess} does not exist")
    )
    return Rejection("files/missing-destination", convo.done(), rejected,
                     ("create_folder", {"name": sub, "parent_id": parent}))


def _files_search_share(rng: Random) -> ScenarioStep:
    fil, doc = pick(rng, _DOCS)
    email, role = pick(rng, _PARTNERS), pick(rng, ("viewer", "editor"))
    convo = Convo(rng, f"Share the {doc} with {email} as {role} and notify them.")
    convo.called("search_files", {"query": doc}, {"files": [{"file_id": fil, "name": doc}]})
    args = {"file_id": fil, "grants": [{"email": email, "role": role}], "notify": True}
    return ScenarioStep("files/search-share", convo.done(), ("share_file", args))


def _files_list_read(rng: Random) -> ScenarioStep:
    fld, name = pick(rng, _FOLDERS)
    newest, older = f"fil_{rng.randint(600, 699)}", f"fil_{rng.randint(700, 799)}"
    convo = Convo(rng, f"Open the newest document in {name} ({fld}).")
    convo.called("list_files", {"folder_id": fld, "filter": {"type": "document"}},
                 {"files": [{"file_id": newest, "modified": "2026-06-22"},
                            {"file_id": older, "modified": "2026-05-11"}]})
    return ScenarioStep("files/list-read", convo.done(), ("read_file", {"file_id": newest}))


def _files_search_move(rng: Random) -> ScenarioStep:
    fil, doc = pick(rng, _DOCS)
    fld, name = pick(rng, _FOLDERS)
    convo = Convo(rng, f"Move the {doc} into {name} ({fld}).")
    convo.called("search_files", {"query": doc}, {"files": [{"file_id": fil, "name": doc}]})
    return ScenarioStep("files/search-move", convo.done(),
                        ("move_file", {"file_id": fil, "destination": {"folder_id": fld}}))


def _files_share(rng: Random) -> ScenarioStep:
    fil, doc = pick(rng, _DOCS)
    emails = rng.sample(_PARTNERS, rng.randint(1, 2))
    text = f"Give {' and '.join(emails)} view access to the {doc} ({fil})."
    args: dict[str, Any] = {"file_id": fil, "grants": [{"email": e, "role": "viewer"} for e in emails]}
    if rng.random() < 0.5:
        args["message"] = "For your review."
        text += " Add the message 'For your review.'"
    return ScenarioStep("files/share", Convo(rng, text).done(), ("share_file", args))


def _files_list_filtered(rng: Random) -> ScenarioStep:
    fld, name = pick(rng, _FOLDERS)
    kind, day = pick(rng, ("spreadsheet", "pdf", "document")), random_day(rng)
    text = f"Which {kind}s in {name} ({fld}) changed after {day}?"
    return ScenarioStep("files/list-filtered", Convo(rng, text).done(),
                        ("list_files", {"folder_id": fld, "filter": {"type": kind, "modified_after": day}}))


def _files_new_folder(rng: Random) -> ScenarioStep:
    parent, parent_name = pick(rng, _FOLDERS)
    name = pick(rng, ("Invoices", "Drafts", "Q4", "Signed", "Templates"))
    convo = Convo(rng, f"Create a folder called {name} inside {parent_name} ({parent}).")
    return ScenarioStep("files/new-folder", convo.done(), ("create_folder", {"name": name, "parent_id": parent}))


def _files_summarise_folder(rng: Random) -> ScenarioStep:
    fld, name = pick(rng, _FOLDERS)
    return ScenarioStep("files/summarise-folder", Convo(rng, f"Summarise what is in {name} ({fld}).").done(),
                        ("read_file", {"file_id": fld}))


KIT = Kit("ws-files", system_prompt("Ledgerline", "document"), FILES,
          (_files_folder_read, _files_missing_destination), (_files_search_share, _files_list_read, _files_search_move),
          (_files_share, _files_list_filtered, _files_new_folder), (_files_summarise_folder,))
