"""Helpers for tests of mail and Confluence sources: real mail files written by the standard
library (mbox, Maildir, .eml) and Confluence exports of both shapes (REST content JSON, and
the HTML space export as a folder or a zip)."""

import json
import mailbox
import zipfile
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

BERLIN = timezone(timedelta(hours=2))
MAYA = "Maya Chen <maya.chen@lumen.example>"
SAM = "Sam Novak <sam.novak@lumen.example>"
DANIEL = "Daniel Okafor <daniel.okafor@lumen.example>"
# Atlassian account ids of the sample Jira export (one account across Jira and Confluence)
MAYA_ACCOUNT, SAM_ACCOUNT = "5f1a0c2b7d3e4a0011aa0001", "5f1a0c2b7d3e4a0011aa0004"
WIKI = "https://lumen.atlassian.net/wiki"


def message(mid: str | None, subject: str, body: str = "Hello.\n", *, sender: str = MAYA,
            to: str = SAM, cc: str | None = None, day: int = 9, hour: int = 10,
            reply_to: str | None = None, refs: tuple[str, ...] = ()) -> EmailMessage:
    """A plain-text message; ``reply_to`` sets In-Reply-To, ``refs`` References."""
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = sender, to, subject
    if cc:
        msg["Cc"] = cc
    msg["Date"] = format_datetime(datetime(2026, 10, day, hour, 0, tzinfo=BERLIN))
    if mid:
        msg["Message-ID"] = f"<{mid}>"
    if reply_to:
        msg["In-Reply-To"] = f"<{reply_to}>"
    if refs:
        msg["References"] = " ".join(f"<{ref}>" for ref in refs)
    msg.set_content(body)
    return msg


def write_mbox(path: Path, *messages: EmailMessage) -> Path:
    """Append ``messages`` to the mbox at ``path`` (created when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    box = mailbox.mbox(path)
    for msg in messages:
        box.add(msg)
    box.flush()
    box.close()
    return path


def write_maildir(path: Path, *messages: EmailMessage) -> list[str]:
    """Deliver ``messages`` to the Maildir at ``path``; their keys."""
    box = mailbox.Maildir(path)
    return [box.add(mailbox.MaildirMessage(msg)) for msg in messages]


# --- Confluence REST content JSON -----------------------------------------------------------

def user(account_id: str, name: str) -> dict:
    return {"type": "known", "accountId": account_id, "accountType": "atlassian", "email": "",
            "publicName": name, "displayName": name}


def rest_page(page_id: str, title: str, body: str, *, ancestors=(), version: int = 1,
              creator=(SAM_ACCOUNT, "Sam Novak"), editor=(MAYA_ACCOUNT, "Maya Chen"),
              labels=(), space: str = "LUM") -> dict:
    """A page as ``/rest/api/content?expand=body.storage,ancestors,version,history,...``
    returns it; ``ancestors`` are (id, title) pairs, root first."""
    return {
        "id": page_id, "type": "page", "status": "current", "title": title,
        "space": {"key": space, "name": space},
        "history": {"latest": True, "createdBy": user(*creator),
                    "createdDate": "2026-10-09T13:05:00.000+02:00"},
        "version": {"by": user(*editor), "when": "2026-10-12T15:10:00.000Z", "number": version},
        "ancestors": [{"id": pid, "type": "page", "title": t} for pid, t in ancestors],
        "body": {"storage": {"value": body, "representation": "storage"}},
        "metadata": {"labels": {"results": [{"prefix": "global", "name": name}
                                            for name in labels]}},
        "_links": {"webui": f"/spaces/{space}/pages/{page_id}"}}


def write_rest_export(path: Path, pages: list[dict]) -> Path:
    """A REST result list, as a paged ``/rest/api/content`` download saves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"results": pages, "start": 0, "limit": 25, "size": len(pages),
                                "_links": {"base": WIKI}}), encoding="utf-8")
    return path


def jira_macro(key: str) -> str:
    return (f'<ac:structured-macro ac:name="jira" ac:schema-version="1"><ac:parameter '
            f'ac:name="key">{key}</ac:parameter></ac:structured-macro>')


def page_link(title: str, text: str) -> str:
    return (f'<ac:link><ri:page ri:content-title="{title}" /><ac:plain-text-link-body>'
            f'<![CDATA[{text}]]></ac:plain-text-link-body></ac:link>')


def mention(account_id: str) -> str:
    return f'<ac:link><ri:user ri:account-id="{account_id}" /></ac:link>'


# --- the Confluence HTML space export --------------------------------------------------------

def export_page(space: str, title: str, crumbs: list[tuple[str, str]], content: str,
                metadata: str = "") -> str:
    """One page file of an HTML space export; ``crumbs`` are (file, title), root first."""
    links = "".join(f'<li><span><a href="{href}">{text}</a></span></li>'
                    for href, text in crumbs)
    return f"""<!DOCTYPE html><html><head><title>{space} : {title}</title></head>
<body><div id="page"><div id="main" class="aui-page-panel"><div id="main-header">
<div id="breadcrumb-section"><ol id="breadcrumbs"><li class="first"><span>
<a href="index.html">{space}</a></span></li>{links}</ol></div>
<h1 id="title-heading" class="pagetitle"><span id="title-text">{space} : {title}</span></h1>
</div><div id="content" class="view"><div class="page-metadata">{metadata}</div>
<div id="main-content" class="wiki-content group">{content}</div></div></div>
<div id="footer" role="contentinfo"><section class="footer-body"><p>Document generated by
Confluence on Nov 16, 2026 10:00</p></section></div></div></body></html>
"""


def export_index(space: str, tree: str) -> str:
    """The export's index.html; ``tree`` is the nested <ul> of the available pages."""
    return f"""<!DOCTYPE html><html><head><title>{space}</title></head><body><div id="page">
<div id="main-header"><h1 id="title-heading" class="pagetitle"><span id="title-text">{space}
</span></h1></div><div id="content" class="view"><div id="main-content" class="pageSection">
<table class="confluenceTable"><tr><th class="confluenceTh">Key:</th>
<td class="confluenceTd">{space}</td></tr></table></div><div class="pageSection">
<h2 class="pageSectionTitle">Available Pages:</h2>{tree}</div></div></div></body></html>"""


def zip_folder(folder: Path, archive: Path, prefix: str) -> Path:
    """The folder as Confluence's download zips it (everything under ``prefix/``)."""
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                out.write(path, f"{prefix}/{path.relative_to(folder).as_posix()}")
    return archive
