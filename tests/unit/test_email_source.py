"""Mail as a source: mbox, Maildir and .eml files written by the standard library, threads,
quote collapsing, people, incremental runs and bad input reported per message."""

import mailbox
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import pytest

from jarvis_core.sources.mail.message import parse_message
from jarvis_core.sources.mail.read import (
    EML,
    ERROR,
    MAILDIR,
    MBOX,
    WARNING,
    MailError,
    mail_identities,
    read_mail_source,
)
from jarvis_core.sources.mail.threads import QUOTE_MARK, collapse_quotes, normal_subject
from jarvis_core.sources.people import Identity, PersonDirectory
from jarvis_core.sources.references import COMMIT, JIRA, find_references

SAMPLE_MBOX = Path(__file__).resolve().parents[2] / "sample_data" / "mail" / "lumen.mbox"
BERLIN = timezone(timedelta(hours=2))
MAYA = "Maya Chen <maya.chen@lumen.example>"
SAM = "Sam Novak <sam.novak@lumen.example>"
DANIEL = "Daniel Okafor <daniel.okafor@lumen.example>"


def message(mid: str | None, subject: str, body: str | None = "Hello.\n", *, sender=MAYA,
            to=SAM, cc=None, day: int = 9, hour: int = 10, reply_to: str | None = None,
            refs: tuple[str, ...] = (), html: str | None = None) -> EmailMessage:
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
    if body is None:
        msg.set_content(html, subtype="html")
    else:
        msg.set_content(body)
        if html:
            msg.add_alternative(html, subtype="html")
    return msg


def write_mbox(path: Path, *messages: EmailMessage) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    box = mailbox.mbox(path)
    for msg in messages:
        box.add(msg)
    box.flush()
    box.close()
    return path


def thread_of(result, message_id: str):
    return next(t for t in result.threads if message_id in t.message_ids)


def problems(result, severity=None):
    return [p for p in result.problems if severity in (None, p.severity)]


# --- reading the three kinds of mail files --------------------------------------------

def test_mbox_maildir_and_eml_files_are_read_and_other_files_skipped(tmp_path):
    write_mbox(tmp_path / "lists" / "lumen-dev.mbox",
               message("a1@lumen.example", "Dedupe key", cc=DANIEL),
               message("a2@lumen.example", "Re: Dedupe key", sender=SAM, to=MAYA, hour=11,
                       reply_to="a1@lumen.example", refs=("a1@lumen.example",)))
    inbox = mailbox.Maildir(tmp_path / "Inbox")
    inbox.add(mailbox.MaildirMessage(message("m1@lumen.example", "Maildir new")))
    seen = mailbox.MaildirMessage(message("m2@lumen.example", "Maildir seen", day=10))
    seen.set_subdir("cur")
    seen.set_flags("S")
    inbox.add(seen)
    inbox.add_folder("Sent").add(message("m3@lumen.example", "Maildir++ sent folder"))
    encoded = message("e1@lumen.example", "Grüße aus Berlin", sender="Lena Fischer "
                      "<lena.fischer@lumen.example>")
    (tmp_path / "loose.eml").write_bytes(bytes(encoded))
    (tmp_path / "notes.txt").write_text("not mail")
    (tmp_path / ".hidden.eml").write_bytes(bytes(message("h@lumen.example", "hidden")))

    result = read_mail_source(tmp_path)

    assert set(result.messages) == {"a1@lumen.example", "a2@lumen.example", "m1@lumen.example",
                                    "m2@lumen.example", "m3@lumen.example", "e1@lumen.example"}
    kinds = {state.path: state.kind for state in result.files.values()}
    assert kinds["lists/lumen-dev.mbox"] == MBOX and kinds["loose.eml"] == EML
    assert sorted(k for p, k in kinds.items() if p.startswith("Inbox/")) == [MAILDIR] * 3
    first = result.messages["a1@lumen.example"]
    assert first.file == "lists/lumen-dev.mbox" and first.item == "message 1 (byte 0)"
    assert first.date == datetime(2026, 10, 9, 8, 0)  # 10:00 +02:00 in UTC
    assert first.sender == Identity("Maya Chen", "maya.chen@lumen.example")
    assert first.to == (Identity("Sam Novak", "sam.novak@lumen.example"),)
    assert first.cc == (Identity("Daniel Okafor", "daniel.okafor@lumen.example"),)
    assert result.messages["e1@lumen.example"].subject == "Grüße aus Berlin"
    assert result.messages["a2@lumen.example"].in_reply_to == "a1@lumen.example"
    assert result.parsed == 6 and problems(result) == []


def test_missing_source_raises_and_names_the_path(tmp_path):
    with pytest.raises(MailError, match="does not exist: .*nowhere"):
        read_mail_source(tmp_path / "nowhere")


# --- threads -----------------------------------------------------------------------------

def test_threads_from_references_in_reply_to_and_subject_only_without_headers(tmp_path):
    write_mbox(
        tmp_path / "box.mbox",
        message("root@x", "Alert rules", hour=9),
        # References only (In-Reply-To dropped by some clients)
        message("r1@x", "Re: Alert rules", hour=10, refs=("root@x",)),
        # In-Reply-To naming a message this mailbox never received: still the same thread
        message("r2@x", "Re: Alert rules", hour=11, reply_to="missing@x",
                refs=("root@x", "missing@x")),
        # no threading headers: a reply subject joins the thread of that subject...
        message("r3@x", "AW: [lumen-dev] Re: Alert rules", hour=12),
        # ...but a subject without a reply prefix starts a new thread, as does a reply to
        # a subject nobody started
        message("new@x", "Alert rules", day=11),
        message("orphan@x", "Re: Quiet hours", day=12),
        # headers win over the subject: this one belongs to the quiet-hours thread
        message("r4@x", "Re: Alert rules", day=13, reply_to="orphan@x"))

    threads = {t.thread_id: t.message_ids for t in read_mail_source(tmp_path).threads}

    assert threads == {"root@x": ("root@x", "r1@x", "r2@x", "r3@x"), "new@x": ("new@x",),
                       "orphan@x": ("orphan@x", "r4@x")}
    assert normal_subject("AW: [lumen-dev] Re: Alert rules") == "alert rules"
    assert normal_subject("SV: Fwd: Alert rules") == "alert rules"


def test_thread_document_lists_messages_in_date_order_under_headers(tmp_path):
    write_mbox(tmp_path / "box.mbox",  # written out of order on purpose
               message("b@x", "Re: Gaps", "Yes, gapfill is on.\n", sender=DANIEL, to=SAM,
                       hour=12, reply_to="a@x", refs=("a@x",)),
               message("a@x", "Gaps", "Is gapfill on?\n", sender=SAM, to=DANIEL, cc=MAYA))
    thread = read_mail_source(tmp_path).threads[0]

    assert thread.message_ids == ("a@x", "b@x") and thread.subject == "Gaps"
    assert thread.started_at == datetime(2026, 10, 9, 8) and thread.last_at == datetime(
        2026, 10, 9, 10)
    assert thread.text.startswith("Thread: 2 messages · 2026-10-09 · Sam Novak, Daniel Okafor")
    assert "## Sam Novak <sam.novak@lumen.example> · 2026-10-09 08:00 UTC · Gaps\n" \
           "To: Daniel Okafor · Cc: Maya Chen\n\nIs gapfill on?" in thread.text
    assert thread.text.index("## Sam Novak") < thread.text.index("## Daniel Okafor")
    assert [(mid, thread.text[start:end].split(" <")[0]) for mid, start, end in
            thread.sections] == [("a@x", "## Sam Novak"), ("b@x", "## Daniel Okafor")]
    assert thread.participants[:2] == (Identity("Sam Novak", "sam.novak@lumen.example"),
                                       Identity("Daniel Okafor", "daniel.okafor@lumen.example"))


# --- quotes ------------------------------------------------------------------------------

ORIGINAL = "observed_at is not stable across retries.\nA clamped reading changes its time.\n"


@pytest.mark.parametrize("reply", [
    "Agreed.\n\nOn Fri, 9 Oct 2026 at 14:40, Sam Novak <sam.novak@lumen.example> wrote:\n"
    "> observed_at is not stable across retries.\n> A clamped reading changes its time.\n",
    "Agreed.\n\nOn Fri, 9 Oct 2026 at 14:40, Sam Novak <\nsam.novak@lumen.example> wrote:\n\n"
    "> observed_at is not stable across retries.\n>\n> A clamped reading changes its time.\n",
    "Agreed.\n\nAm Fr., 9. Okt. 2026 um 14:40 Uhr schrieb Sam Novak <sam@x>:\n"
    "> observed_at is not stable across retries.\n> A clamped reading changes its time.\n",
    "Agreed.\n\nLe ven. 9 oct. 2026 à 14:40, Sam Novak <sam@x> a écrit :\n"
    "> observed_at is not stable across retries.\n> A clamped reading changes its time.\n",
    "Agreed.\n\n-----Original Message-----\nFrom: Sam Novak\nSent: Friday, October 9, 2026\n"
    "Subject: Dedupe\n\nobserved_at is not stable across retries.\n",
    "Agreed.\n\n________________________________\nVon: Sam Novak <sam@x>\n"
    "Gesendet: Freitag, 9. Oktober 2026 14:40\nAn: Maya\n\nobserved_at is not stable.\n",
])
def test_quoted_tails_are_dropped_with_their_attribution(reply):
    assert collapse_quotes(reply) == "Agreed."


def test_inline_quotes_collapse_to_one_mark_and_the_reply_stays():
    reply = ("> observed_at is not stable across retries.\n\nThen boot_id it is.\n\n"
             "> A clamped reading changes its time.\n> Really.\n\nSee 1d2941d.\n")
    assert collapse_quotes(reply) == (f"{QUOTE_MARK}\n\nThen boot_id it is.\n\n{QUOTE_MARK}\n\n"
                                      "See 1d2941d.")


def test_quoted_text_is_indexed_once_but_kept_when_it_is_the_only_copy(tmp_path):
    reply = f"Agreed.\n\nOn Fri, 9 Oct 2026, Sam Novak wrote:\n> {ORIGINAL.splitlines()[0]}\n"
    write_mbox(tmp_path / "box.mbox",
               message("a@x", "Dedupe", ORIGINAL, sender=SAM),
               message("b@x", "Re: Dedupe", reply, hour=11, reply_to="a@x", refs=("a@x",)),
               # the first message of its thread quotes a message this mailbox does not hold
               message("c@x", "Re: Other", "Yes.\n\nOn Thu, Dan wrote:\n> Only copy of this.\n",
                       day=12, reply_to="gone@x"))
    result = read_mail_source(tmp_path)

    assert thread_of(result, "a@x").text.count("observed_at is not stable") == 1
    assert "Agreed." in thread_of(result, "a@x").text
    assert "> Only copy of this." in thread_of(result, "c@x").text


def test_html_only_message_becomes_text_with_its_structure(tmp_path):
    html = ("<html><head><style>p {color: red}</style><title>x</title></head><body>"
            "<h2>Beta survey</h2><p>Frost <b>first</b>, then offline.</p>"
            "<ul><li>142 answers</li><li>quiet hours</li></ul>"
            "<div class='gmail_quote'>On Thu, Maya wrote:<blockquote>Old text</blockquote></div>"
            "</body></html>")
    write_mbox(tmp_path / "box.mbox", message("root@x", "Survey", "Start.\n"),
               message("h@x", "Re: Survey", None, html=html, hour=11, reply_to="root@x"))
    result = read_mail_source(tmp_path)
    parsed = result.messages["h@x"]

    assert parsed.body_type == "html"
    assert "## Beta survey" in parsed.body and "- 142 answers" in parsed.body
    assert "<" not in parsed.body.replace("<b>", "") and "color" not in parsed.body
    assert "Old text" not in thread_of(result, "h@x").text


def test_plain_alternative_is_preferred_over_html():
    parsed = parse_message(bytes(message("p@x", "Both", "Plain words.\n",
                                         html="<p>HTML words</p>")), "a.eml")
    assert parsed.body == "Plain words." and parsed.body_type == "plain"


# --- attachments and people ------------------------------------------------------------

def test_attachments_are_listed_by_name_type_and_size_never_read(tmp_path):
    msg = message("att@x", "Replay", "The replay is attached.\n")
    msg.add_attachment(b"SECRET-PAYLOAD " * 100, maintype="text", subtype="csv",
                       filename="replay.csv")
    msg.add_attachment(b"\x89PNG\r\n" + bytes(200), maintype="image", subtype="png")
    forwarded = message("fw@x", "Original report", "Forwarded text.\n")
    msg.add_attachment(forwarded)
    (tmp_path / "one.eml").write_bytes(bytes(msg))

    result = read_mail_source(tmp_path)
    parsed = result.messages["att@x"]

    assert [(a.filename, a.content_type, a.size, a.part) for a in parsed.attachments][:2] == [
        ("replay.csv", "text/csv", 1500, "2"), (None, "image/png", 206, "3")]
    assert parsed.attachments[2].filename == "Original report.eml"
    assert parsed.attachments[2].content_type == "message/rfc822"
    assert "SECRET-PAYLOAD" not in parsed.body and "Forwarded text" not in parsed.body
    text = result.threads[0].text
    assert "SECRET-PAYLOAD" not in text
    assert "Attachments: replay.csv (text/csv, 1.5 kB), unnamed (image/png, 206 B)" in text


def test_mail_identities_fold_with_other_sources_spellings(tmp_path):
    write_mbox(tmp_path / "box.mbox",
               message("a@x", "One", sender="Maya Chen <Maya.Chen@lumen.example>",
                       to="Sam Novak <sam.novak@lumen.example>"),
               message("b@x", "Two", sender="maya.chen@lumen.example", to="\"Novak, Sam\" <sn@x>"))
    identities = mail_identities(read_mail_source(tmp_path).messages.values())
    directory = PersonDirectory([*identities, Identity("maya.chen", "maya.chen@lumen.example")])

    persons = {p.key: p for p in directory.persons()}
    assert set(persons) == {"person:maya.chen@lumen.example", "person:sam.novak@lumen.example"}
    assert persons["person:maya.chen@lumen.example"].name == "Maya Chen"
    assert set(persons["person:sam.novak@lumen.example"].emails) == {"sam.novak@lumen.example",
                                                                      "sn@x"}


# --- incremental runs --------------------------------------------------------------------

def test_a_grown_mbox_reads_only_its_new_messages(tmp_path):
    path = write_mbox(tmp_path / "box.mbox", message("a@x", "Dedupe"),
                      message("b@x", "Re: Dedupe", hour=11, reply_to="a@x"))
    first = read_mail_source(tmp_path)
    unchanged = read_mail_source(tmp_path, files=first.files, messages=first.messages)
    write_mbox(path, message("c@x", "Re: Dedupe", hour=12, reply_to="b@x"))
    grown = read_mail_source(tmp_path, files=first.files, messages=first.messages)

    assert (unchanged.parsed, unchanged.reused) == (0, 2)
    assert [t.content_hash for t in unchanged.threads] == [t.content_hash
                                                           for t in first.threads]
    assert (grown.parsed, grown.reused) == (1, 2)
    assert grown.messages["c@x"].item.startswith("message 3 (byte ")
    assert grown.files["box.mbox"].offset == path.stat().st_size
    assert grown.threads[0].message_ids == ("a@x", "b@x", "c@x")
    assert grown.threads[0].content_hash != first.threads[0].content_hash


def test_a_rewritten_mbox_is_read_again_whole(tmp_path):
    path = write_mbox(tmp_path / "box.mbox", message("a@x", "One"), message("b@x", "Two"),
                      message("c@x", "Three"))
    first = read_mail_source(tmp_path)
    box = mailbox.mbox(path)
    box.remove(next(key for key, msg in box.iteritems() if msg["Subject"] == "One"))
    box.flush()
    box.close()
    again = read_mail_source(tmp_path, files=first.files, messages=first.messages)

    assert (again.parsed, again.reused) == (2, 0)
    assert set(again.messages) == {"b@x", "c@x"}


def test_unchanged_maildir_and_eml_files_are_not_parsed_again(tmp_path):
    inbox = mailbox.Maildir(tmp_path / "Inbox")
    key = inbox.add(mailbox.MaildirMessage(message("m1@x", "First")))
    inbox.add(mailbox.MaildirMessage(message("m2@x", "Second")))
    (tmp_path / "a.eml").write_bytes(bytes(message("e1@x", "Loose")))
    (tmp_path / "b.eml").write_bytes(bytes(message("e2@x", "Deleted later")))
    first = read_mail_source(tmp_path)

    # reading marks a message seen: Maildir moves and renames its file, bytes unchanged
    seen = inbox[key]
    seen.set_subdir("cur")
    seen.add_flag("S")
    inbox[key] = seen
    (tmp_path / "a.eml").write_bytes(bytes(message("e1@x", "Loose, edited")))
    (tmp_path / "b.eml").unlink()
    again = read_mail_source(tmp_path, files=first.files, messages=first.messages)

    assert (again.parsed, again.reused) == (1, 2)
    assert set(again.messages) == {"m1@x", "m2@x", "e1@x"}
    assert again.messages["e1@x"].subject == "Loose, edited"
    assert again.messages["m1@x"].file.startswith("Inbox/cur/")


# --- bad input ---------------------------------------------------------------------------

BROKEN_MIME = b"""From: Sam Novak <sam.novak@lumen.example>
To: maya.chen@lumen.example
Subject: Replay data
Date: Fri, 09 Oct 2026 14:40:00 +0200
Message-ID: <broken-mime@lumen.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="XYZ"

--XYZ
Content-Type: text/plain; charset=utf-8

The replay is attached.
--XYZ
Content-Type: application/octet-stream; name="replay.bin"
Content-Transfer-Encoding: base64

QUJD!!!RE=V
--XYZ
Content-Type: text/plain; charset=utf-8

this part is never closed
"""

UNKNOWN_CHARSET = (
    b"From: Lena Fischer <lena.fischer@lumen.example>\nSubject: =?x-no-such?q?Gr=FC=DFe?=\n"
    b"Date: Fri, 16 Oct 2026 09:05:00 +0200\nMessage-ID: <charset@lumen.example>\n"
    b"Content-Type: text/plain; charset=\"x-no-such-charset\"\n"
    b"Content-Transfer-Encoding: 8bit\n\n"
    b"Gr\xfc\xdfe aus Berlin: die Frostwarnung kommt zuerst, sch\xf6ne Gr\xfc\xdfe.\n")


def test_broken_mime_and_unknown_charsets_are_warnings_on_a_message_still_read(tmp_path):
    (tmp_path / "broken.eml").write_bytes(BROKEN_MIME)
    (tmp_path / "charset.eml").write_bytes(UNKNOWN_CHARSET)
    (tmp_path / "fine.eml").write_bytes(bytes(message("fine@x", "Fine")))
    result = read_mail_source(tmp_path)

    broken = result.messages["broken-mime@lumen.example"]
    assert broken.body == "The replay is attached."
    assert broken.attachments[0].filename == "replay.bin"
    reasons = {(p.file, p.reason) for p in problems(result, WARNING)}
    assert ("broken.eml", "message: broken MIME: the multipart has no closing boundary "
            "(cut off?)") in reasons
    assert ("broken.eml", "part 2 (application/octet-stream): broken MIME: invalid "
            "characters in base64 data") in reasons
    charset = result.messages["charset@lumen.example"]
    assert "Frostwarnung kommt zuerst" in charset.body and "\ufffd" not in charset.body
    assert any(r.startswith("plain body: unknown charset 'x-no-such-charset'; decoded as")
               for f, r in reasons if f == "charset.eml")
    assert ("charset.eml", "Subject header: undecodable characters replaced (unknown or "
            "wrong charset)") in reasons
    assert "fine@x" in result.messages and problems(result, ERROR) == []


def test_a_message_without_message_id_gets_a_stable_derived_id(tmp_path):
    no_id = message(None, "No id here", "Body text.\n")
    path = write_mbox(tmp_path / "box.mbox", no_id)
    first = read_mail_source(tmp_path)
    write_mbox(path, message("later@x", "Later"))  # grown: the id is not re-derived...
    grown = read_mail_source(tmp_path, files=first.files, messages=first.messages)
    fresh = read_mail_source(tmp_path)  # ...and a full read derives the same id

    (derived,) = [m for m in first.messages.values() if m.derived_id]
    assert derived.message_id.endswith("@derived.jarvis")
    assert derived.message_id in grown.messages and derived.message_id in fresh.messages
    assert [(p.file, p.item, p.severity) for p in first.problems] == [
        ("box.mbox", "message 1 (byte 0)", WARNING)]
    assert "no Message-ID header; derived id" in first.problems[0].reason
    other = parse_message(bytes(message(None, "No id here", "Other body.\n")), "x.eml")
    assert other.message_id != derived.message_id


def test_a_truncated_mbox_reports_the_cut_message_and_reads_it_again_when_complete(tmp_path):
    path = write_mbox(tmp_path / "box.mbox", message("a@x", "One"), message("b@x", "Two"),
                      message("c@x", "Three", "A long body that a crash cut in half.\n"))
    whole = path.read_bytes()
    path.write_bytes(whole[:-20])
    cut = read_mail_source(tmp_path)

    assert set(cut.messages) == {"a@x", "b@x", "c@x"}
    (error,) = problems(cut, ERROR)
    assert error.file == "box.mbox" and error.item.startswith("message 3 (byte ")
    assert error.reason.startswith("truncated: the file ends inside this message")
    assert cut.files["box.mbox"].offset == whole.index(b"From ", whole.index(b"Subject: Two"))
    assert cut.files["box.mbox"].messages == (("a@x", "message 1 (byte 0)"),
                                             ("b@x", cut.messages["b@x"].item))

    path.write_bytes(whole)
    done = read_mail_source(tmp_path, files=cut.files, messages=cut.messages)
    assert (done.parsed, done.reused) == (1, 2) and problems(done) == []
    assert done.messages["c@x"].body == "A long body that a crash cut in half."


def test_bytes_that_are_no_mail_are_a_failure_and_the_rest_goes_on(tmp_path):
    (tmp_path / "garbage.eml").write_bytes(b"just some text\nwith lines\n")
    (tmp_path / "box.mbox").write_bytes(
        b"stray preamble\n" + bytes(mailbox.mboxMessage(message("ok@x", "Fine")).as_bytes(
            unixfrom=True)) + b"\n")
    (tmp_path / "other.mbox").write_bytes(b"Subject: no From_ line\n\nbody\n")
    result = read_mail_source(tmp_path)

    assert set(result.messages) == {"ok@x"}
    assert {(p.file, p.item, p.reason) for p in problems(result, ERROR)} == {
        ("garbage.eml", "", "not a mail message: no From, Date, Subject or Message-ID header"),
        ("box.mbox", "bytes 0-15", "text before the first 'From ' line is no message; skipped"),
        ("other.mbox", "", "not an mbox: no line starts with 'From ' (an mbox entry's first "
                           "line)")}
    again = read_mail_source(tmp_path, files=result.files, messages=result.messages)
    assert ("garbage.eml", "") in {(p.file, p.item) for p in problems(again, ERROR)}


def test_a_message_id_seen_twice_keeps_the_first_copy(tmp_path):
    write_mbox(tmp_path / "a.mbox", message("dup@x", "Copy in the list archive"))
    (tmp_path / "b.eml").write_bytes(bytes(message("dup@x", "Copy in the inbox")))
    result = read_mail_source(tmp_path)

    assert result.messages["dup@x"].file == "a.mbox"
    (warning,) = problems(result, WARNING)
    assert (warning.file, warning.reason) == (
        "b.eml", "duplicate Message-ID <dup@x>, already read from a.mbox message 1 (byte 0); "
                 "skipped")


# --- the sample mailbox ------------------------------------------------------------------

def test_sample_mbox_threads_cite_the_tickets_and_commits_of_lumen():
    result = read_mail_source(SAMPLE_MBOX)

    assert problems(result) == []
    assert [len(t.message_ids) for t in result.threads] == [4, 4, 2]
    decision = result.threads[0]
    assert decision.subject == "Dedupe key for readings: observed_at or boot_id?"
    cited = {(r.kind, r.target) for r in find_references(decision.text)}
    assert {(JIRA, "LUM-4"), (COMMIT, "5d24297"), (COMMIT, "1d2941d")} <= cited
    assert decision.text.count("Proposal: the firmware sends a boot_id") == 1
    alerts = result.threads[1]  # one reply came without threading headers
    assert {(COMMIT, "2db7331"), (JIRA, "LUM-6")} <= {
        (r.kind, r.target) for r in find_references(alerts.text)}
    assert "schrieb" not in alerts.text
    people = PersonDirectory(mail_identities(result.messages.values())).persons()
    assert len(people) == 6  # the five of the team and the lumen-dev list
