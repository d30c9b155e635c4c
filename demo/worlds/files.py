"""The ws-files world: folders, files and sharing."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from core.records import Strict
from demo.worlds.common import Date, Outgoing, matches
from replay.sandbox.world import Args, Context, Prose, ToolFailureError, World, tool


class Grant(Strict):
    email: str
    role: str


class File(Strict):
    name: str
    folder_id: str
    type: Literal["document", "spreadsheet", "pdf", "image"]
    modified: str
    content: Prose = ""
    shared: list[Grant] = Field(default_factory=list)


class Folder(Strict):
    name: str
    parent_id: str | None = None


class FilesState(Strict):
    folders: dict[str, Folder]
    files: dict[str, File]
    outbox: list[Outgoing] = Field(default_factory=list)


def _file(state: FilesState, file_id: str) -> File:
    if file_id in state.folders:
        raise ToolFailureError("invalid_argument", f"{file_id} is a folder; this tool needs a file id")
    if file_id not in state.files:
        raise ToolFailureError("not_found", f"file {file_id} not found")
    return state.files[file_id]


def _folder(state: FilesState, folder_id: str, what: str = "folder") -> Folder:
    if folder_id in state.files:
        raise ToolFailureError("invalid_argument", f"{folder_id} is a file, not a folder")
    if folder_id not in state.folders:
        raise ToolFailureError("not_found", f"{what} {folder_id} does not exist")
    return state.folders[folder_id]


class FileFilter(Args):
    type: Literal["document", "spreadsheet", "pdf", "image"] | None = None
    modified_after: Date | None = None


class ListFilesArgs(Args):
    folder_id: str
    filter: FileFilter | None = None


def _file_summary(file_id: str, f: File) -> dict[str, Any]:
    return {"file_id": file_id, "name": f.name, "type": f.type, "modified": f.modified, "folder_id": f.folder_id}


@tool("List the files in a folder.")
def list_files(state: FilesState, args: ListFilesArgs, ctx: Context) -> dict[str, Any]:
    _folder(state, args.folder_id)
    f = args.filter or FileFilter()
    hits = [_file_summary(i, x) for i, x in sorted(state.files.items())
            if x.folder_id == args.folder_id and (f.type is None or x.type == f.type)
            and (f.modified_after is None or x.modified > f.modified_after)]
    folders = [{"folder_id": i, "name": x.name} for i, x in sorted(state.folders.items())
               if x.parent_id == args.folder_id]
    return {"results": hits, "folders": folders}


class SearchFilesArgs(Args):
    query: str
    limit: int | None = None


@tool("Search files by name and content.")
def search_files(state: FilesState, args: SearchFilesArgs, ctx: Context) -> dict[str, Any]:
    hits = [_file_summary(i, x) for i, x in sorted(state.files.items()) if matches(args.query, x.name, x.content)]
    return {"results": hits[: args.limit or 10]}


class FileIdArgs(Args):
    file_id: str


@tool("Read the text of a file.")
def read_file(state: FilesState, args: FileIdArgs, ctx: Context) -> dict[str, Any]:
    f = _file(state, args.file_id)
    return {"file_id": args.file_id, "name": f.name, "content": f.content}


class Destination(Args):
    folder_id: str


class MoveFileArgs(Args):
    file_id: str
    destination: Destination


@tool("Move a file to another folder.")
def move_file(state: FilesState, args: MoveFileArgs, ctx: Context) -> dict[str, Any]:
    f = _file(state, args.file_id)
    _folder(state, args.destination.folder_id, "destination folder")
    if f.folder_id == args.destination.folder_id:
        return {"file_id": args.file_id, "status": "unchanged"}
    f.folder_id = args.destination.folder_id
    return {"file_id": args.file_id, "folder_id": f.folder_id}


class GrantArgs(Args):
    email: str
    role: Literal["viewer", "editor"]


class ShareFileArgs(Args):
    file_id: str
    grants: list[GrantArgs]
    notify: bool | None = None
    message: str | None = None


@tool("Share a file with people.", outbound=True)
def share_file(state: FilesState, args: ShareFileArgs, ctx: Context) -> dict[str, Any]:
    f = _file(state, args.file_id)
    if not args.grants:
        raise ToolFailureError("invalid_argument", "no grants")
    for grant in args.grants:
        f.shared = [g for g in f.shared if g.email != grant.email] + [Grant(email=grant.email, role=grant.role)]
    if args.notify:
        state.outbox.append(Outgoing(tool="share_file", to=sorted(g.email for g in args.grants), subject=f.name,
                                     body=args.message or ""))
    return {"file_id": args.file_id, "shared_with": len(f.shared)}


class CreateFolderArgs(Args):
    name: str
    parent_id: str


@tool("Create a folder.")
def create_folder(state: FilesState, args: CreateFolderArgs, ctx: Context) -> dict[str, Any]:
    _folder(state, args.parent_id, "parent folder")
    if any(x.name == args.name and x.parent_id == args.parent_id for x in state.folders.values()):
        raise ToolFailureError("already_exists", f"a folder {args.name!r} already exists there")
    folder_id = ctx.new_id("fld")
    state.folders[folder_id] = Folder(name=args.name, parent_id=args.parent_id)
    return {"folder_id": folder_id}


FILES = World("files", FilesState, {t.name: t for t in (
    list_files, search_files, read_file, move_file, share_file, create_folder)})
