"""The weekly digest by email, sent to a real SMTP server on 127.0.0.1 (aiosmtpd) and read back
with the standard library's email parser: multipart/alternative with a plain-text part and
an HTML part laid out with tables, its charts PNG images referenced by cid:; STARTTLS with a
certificate made here, and AUTH; and beside a chat webhook on 127.0.0.1, each channel sent once
per week and content, off the warehouse's turn."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import email
import io
import os
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from email.policy import default
from html.parser import HTMLParser
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from PIL import Image
from playwright.sync_api import Page

from feedback_insights.config import ConfigError, EmailConfig, load
from feedback_insights.digest import Digest, DigestError, Week, build, email_digest, send_digest, write_digest
from feedback_insights.warehouse import Warehouse, exclusive

from .conftest import drafted_copy, run_cli
from .page_layout import measure

WEEK = Week.parse("2026-W47")
PASSWORD = "s3cret-Canary-Pa55"


class Inbox:
    """An aiosmtpd handler keeping what it was given; a login succeeds with ``PASSWORD``."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []
        self.logins: list[tuple[bytes, bool]] = []

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 (aiosmtpd's name)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content))
        return "250 OK"

    def authenticate(self, server, session, envelope, mechanism: str, auth_data: LoginPassword) -> AuthResult:
        ok = auth_data.login == b"digest" and auth_data.password == PASSWORD.encode()
        self.logins.append((auth_data.login, ok))
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535 itself

    def parsed(self, index: int = -1) -> EmailMessage:
        return email.message_from_bytes(self.messages[index][2], policy=default)  # type: ignore[return-value]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    """A plain SMTP server on 127.0.0.1 that takes logins without TLS (a relay on this machine)."""
    box = Inbox()
    port = _free_port()
    server = Controller(box, hostname="127.0.0.1", port=port, authenticator=box.authenticate, auth_require_tls=False)
    server.start()
    try:
        yield box, port
    finally:
        server.stop()


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    import ipaddress

    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "smtp.pem", folder / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def tls_inbox(tmp_path: Path) -> Iterator[tuple[Inbox, int, Path]]:
    """An SMTP server on 127.0.0.1 that requires STARTTLS (and TLS for a login)."""
    cert, key = _certificate(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    box = Inbox()
    port = _free_port()
    server = Controller(box, hostname="127.0.0.1", port=port, authenticator=box.authenticate,
                        tls_context=context, require_starttls=True)
    server.start()
    try:
        yield box, port, cert
    finally:
        server.stop()


@pytest.fixture(scope="module")
def warehouse(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    with Warehouse(drafted_copy(clustered_sample, tmp_path_factory.mktemp("digest-email"))) as wh:
        yield wh


@pytest.fixture
def digest(warehouse: Warehouse) -> Digest:
    return build(warehouse, WEEK, desk_url="https://desk.example")


def _settings(port: int, **changes: object) -> EmailConfig:
    return EmailConfig.model_validate({"host": "127.0.0.1", "port": port, "starttls": False,
                                       "from": "Feedback insights <digest@example.com>",
                                       "to": ["pm@example.com", "lead@example.com"], "timeout": 10} | changes)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def _tags(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _parts(message: EmailMessage) -> tuple[EmailMessage, EmailMessage, list[EmailMessage]]:
    """The text part, the HTML part and the images of a digest email, checking its structure."""
    assert message.get_content_type() == "multipart/alternative"
    text, related = message.get_payload()  # type: ignore[misc]
    assert (text.get_content_type(), related.get_content_type()) == ("text/plain", "multipart/related")
    html, *images = related.get_payload()
    assert html.get_content_type() == "text/html"
    return text, html, images


def test_the_digest_is_mailed_as_text_and_html_with_its_charts_attached(
        inbox: tuple[Inbox, int], digest: Digest) -> None:
    box, port = inbox
    digest.top_problems[0]["quote"] = '<script>alert(1)</script><img src="https://evil.example/p.png"> see https://evil.example @here'
    email_digest(digest, _settings(port))
    [(sender, recipients, _)] = box.messages
    assert (sender, recipients) == ("digest@example.com", ["pm@example.com", "lead@example.com"])
    message = box.parsed()
    assert message["Subject"] == f"What agents told us · {WEEK}"
    assert message["To"] == "pm@example.com, lead@example.com" and message["From"].addresses[0].username == "digest"
    text, html_part, images = _parts(message)
    html = html_part.get_content()
    # Laid out with tables; no flex, no inline SVG, no stylesheet block (all moved into attributes).
    assert "<table" in html and "flex" not in html and "<svg" not in html and "<style" not in html
    # Every chart an image carried by the message, referenced by cid: and drawn at twice its size.
    tags = _tags(html)
    referenced = [(a["src"].removeprefix("cid:"), a["width"], a["height"]) for tag, a in tags if tag == "img"]
    assert len(referenced) == len(images) == len(digest.cards) + 2
    assert all(a["src"].startswith("cid:") for _, a in tags if "src" in a) and not [a for _, a in tags if "href" in a
                                                                                  and "evil" in a["href"]]
    by_cid = {part["Content-ID"].strip("<>"): part for part in images}
    for cid, width, height in referenced:
        part = by_cid[cid]
        assert part.get_content_type() == "image/png"
        picture = Image.open(io.BytesIO(part.get_content()))
        assert picture.format == "PNG" and picture.size == (2 * int(width), 2 * int(height))
    # The figures are text too (many clients hold images back).
    spark = digest.top_problems[0]["spark"]
    assert f'alt="Distinct accounts per week, last 8 weeks: {", ".join(map(str, spark))}"' in html
    assert "accounts per week, oldest first: " + " · ".join(map(str, spark)) in html
    # Report text is text: escaped in the HTML, and in the text part no link or mention a client would act on.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html
    plain = text.get_content()
    assert "https\u200b://evil.example" in plain and "@\u200bhere" in plain and "https://evil.example" not in plain
    assert digest.top_problems[0]["name"] in plain and "Accounts per week, oldest first: " + " · ".join(map(str, spark)) in plain
    assert f"Status: draft waiting for review (https://desk.example/drafts/{digest.top_problems[0]['issue']['id']})" in plain


def test_the_email_html_fits_a_phone_with_its_images_shown(
        inbox: tuple[Inbox, int], digest: Digest, page: Page, tmp_path: Path) -> None:
    """As a mail client shows it: each cid: replaced by its image (a data: URI here)."""
    box, port = inbox
    email_digest(digest, _settings(port))
    _, html_part, images = _parts(box.parsed())
    html = html_part.get_content()
    for part in images:
        data = base64.b64encode(part.get_content()).decode()
        html = html.replace(f'cid:{part["Content-ID"].strip("<>")}"', f'data:image/png;base64,{data}"')
    shown = tmp_path / "email.html"
    shown.write_text(html, encoding="utf-8")
    for width in (390, 1280):
        layout = measure(page, shown, width)
        assert layout.overflowing[:5] == [] and layout.document_width == width
        assert layout.images == layout.images_drawn == len(images) and layout.svg_count == 0
        assert layout.requests == [] and layout.scripts == 0


def test_a_login_is_made_with_the_password_from_the_environment(
        inbox: tuple[Inbox, int], digest: Digest, monkeypatch: pytest.MonkeyPatch) -> None:
    box, port = inbox
    settings = _settings(port, username="digest", password_env="FI_SMTP_PASSWORD")
    monkeypatch.setenv("FI_SMTP_PASSWORD", PASSWORD)
    email_digest(digest, settings)
    assert box.logins == [(b"digest", True)] and len(box.messages) == 1
    monkeypatch.setenv("FI_SMTP_PASSWORD", "wrong")
    with pytest.raises(DigestError) as refused:
        email_digest(digest, settings)
    assert str(refused.value) == f"the mail server 127.0.0.1:{port} refused the login of digest (535): check $FI_SMTP_PASSWORD"
    assert len(box.messages) == 1
    monkeypatch.delenv("FI_SMTP_PASSWORD")
    with pytest.raises(ConfigError, match="digest.email.password_env: set FI_SMTP_PASSWORD to the SMTP password"):
        email_digest(digest, settings)


def test_starttls_verifies_the_server_before_the_login(
        tls_inbox: tuple[Inbox, int, Path], digest: Digest, monkeypatch: pytest.MonkeyPatch) -> None:
    box, port, cert = tls_inbox
    monkeypatch.setenv("FI_SMTP_PASSWORD", PASSWORD)
    trusted = _settings(port, starttls=True, ca_file=str(cert), username="digest", password_env="FI_SMTP_PASSWORD")
    email_digest(digest, trusted)
    assert box.logins == [(b"digest", True)] and len(box.messages) == 1
    # The system's CAs do not know this certificate: nothing is sent, the password least of all.
    with pytest.raises(DigestError, match=r"^the mail server 127\.0\.0\.1:\d+: its certificate is not trusted \(.*\); "
                                          r"set digest\.email\.ca_file to the CA that signed it$"):
        email_digest(digest, trusted.model_copy(update={"ca_file": None}))
    # Without STARTTLS the server refuses the mail itself.
    with pytest.raises(DigestError, match=r"^the mail server 127\.0\.0\.1:\d+ answered 530: Must issue a STARTTLS command first"):
        email_digest(digest, _settings(port))
    assert box.logins == [(b"digest", True)] and len(box.messages) == 1


def test_an_unreachable_server_is_named(digest: Digest) -> None:
    port = _free_port()  # nothing listens there
    with pytest.raises(DigestError, match=rf"^the mail server 127\.0\.0\.1:{port} could not be reached \(ConnectionRefusedError"):
        email_digest(digest, _settings(port))


def test_the_email_section_is_checked_when_loaded(tmp_path: Path) -> None:
    def loaded(email_section: str):
        path = tmp_path / "feedback-insights.toml"
        path.write_text(f'[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest.email]\n{email_section}')
        return load(path).digest.email

    settings = loaded('host = "smtp.example.com"\nfrom = "digest@example.com"\nto = ["pm@example.com"]\n'
                      'username = "digest"\npassword_env = "FI_SMTP_PASSWORD"\n')
    assert (settings.port, settings.starttls, settings.sender) == (587, True, "digest@example.com")
    with pytest.raises(ConfigError, match="refusing to send the SMTP password to smtp.example.com unencrypted"):
        loaded('host = "smtp.example.com"\nstarttls = false\nfrom = "d@example.com"\nto = ["p@example.com"]\n'
               'username = "digest"\npassword_env = "FI_SMTP_PASSWORD"\n')
    with pytest.raises(ConfigError, match="username and password_env go together"):
        loaded('host = "h"\nfrom = "d@example.com"\nto = ["p@example.com"]\nusername = "digest"\n')
    with pytest.raises(ConfigError, match="is not an email address"):
        loaded('host = "h"\nfrom = "d@example.com"\nto = ["p@example.com\\r\\nBcc: all@example.com"]\n')
    with pytest.raises(ConfigError, match="password"):  # the password itself has no key
        loaded('host = "h"\nfrom = "d@example.com"\nto = ["p@example.com"]\npassword = "hunter2"\n')


def test_the_command_mails_the_digest_when_configured(
        inbox: tuple[Inbox, int], warehouse: Warehouse, tmp_path: Path) -> None:
    box, port = inbox
    warehouse.checkpoint()
    shutil.copyfile(warehouse.path, tmp_path / "feedback.duckdb")
    (tmp_path / "feedback-insights.toml").write_text(
        '[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest]\nfolder = "out"\n'
        f'[digest.email]\nhost = "127.0.0.1"\nport = {port}\nstarttls = false\nfrom = "digest@example.com"\n'
        'to = ["pm@example.com"]\nusername = "digest"\npassword_env = "FI_SMTP_PASSWORD"\n')
    done = run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env={**os.environ, "FI_SMTP_PASSWORD": PASSWORD})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "sent: email"
    text, html, images = _parts(box.parsed())
    assert images and "Top problems by distinct accounts this week" in text.get_content()
    assert PASSWORD not in "".join(p.read_text() for p in (tmp_path / "out").iterdir()) + (tmp_path / "feedback-insights.toml").read_text()
    missing = run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "FI_SMTP_PASSWORD"})
    assert missing.returncode != 0 and "set FI_SMTP_PASSWORD to the SMTP password" in missing.stderr
    assert len(box.messages) == 1


class Refusing(Inbox):
    """An inbox whose server answers the first ``refusals`` messages "451 try again later"."""

    def __init__(self, refusals: int = 1) -> None:
        super().__init__()
        self.refusals = refusals

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 (aiosmtpd's name)
        if self.refusals:
            self.refusals -= 1
            return "451 4.3.0 Try again later"
        return await super().handle_DATA(server, session, envelope)


class Held(Inbox):
    """An inbox that takes a message only once the test says so (``go``): while it holds it,
    the sender is mid-send (``arrived`` is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived, self.go = threading.Event(), threading.Event()

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 (aiosmtpd's name)
        self.arrived.set()
        await asyncio.get_running_loop().run_in_executor(None, self.go.wait, 60)
        return await super().handle_DATA(server, session, envelope)


@contextmanager
def _smtp(box: Inbox, **options: object) -> Iterator[int]:
    port = _free_port()
    server = Controller(box, hostname="127.0.0.1", port=port, **options)
    server.start()
    try:
        yield port
    finally:
        server.stop()


def _command_folder(warehouse: Warehouse, folder: Path, port: int, to: tuple[str, ...] = ("pm@example.com",)) -> Path:
    """A copy of the drafted sample and a configuration that posts to $FI_HOOK and mails
    through the relay on ``port`` to ``to``."""
    warehouse.checkpoint()
    shutil.copyfile(warehouse.path, folder / "feedback.duckdb")
    (folder / "feedback-insights.toml").write_text(
        '[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest]\nfolder = "out"\nwebhook_env = "FI_HOOK"\n'
        f'[digest.email]\nhost = "127.0.0.1"\nport = {port}\nstarttls = false\nfrom = "digest@example.com"\n'
        f'to = [{", ".join(f"{address!r}" for address in to)}]\n')
    return folder / "feedback-insights.toml"


def test_a_retry_after_a_refused_email_sends_the_email_and_posts_nothing_twice(
        hook: tuple[list[dict], str], warehouse: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the weekly flow's retry does: the same digest sent again, after the relay refused it."""
    received, url = hook
    box = Refusing(refusals=1)
    monkeypatch.setenv("FI_HOOK", url)
    with _smtp(box) as port:
        config = load(_command_folder(warehouse, tmp_path, port))
        done = write_digest(config, str(WEEK))
        with pytest.raises(DigestError, match=rf"^the mail server 127\.0\.0\.1:{port} answered 451: 4\.3\.0 Try again later; "
                                             r"sent by webhook, which a retry does not send again$"):
            send_digest(config, done.digest)
        assert len(received) == 1 and box.messages == []
        again = send_digest(config, done.digest)  # the retry
        assert (again.sent, again.skipped) == (["email"], ["webhook"])
        assert len(received) == 1 and len(box.messages) == 1
        assert send_digest(config, done.digest).sent == []  # all sent: nothing more
        forced = send_digest(config, done.digest, resend=True)
        assert forced.sent == ["webhook", "email"] and len(received) == 2 and len(box.messages) == 2
    with Warehouse(config.warehouse.path) as wh:
        rows = wh.con.execute("SELECT week, source, channel, length(content_sha256) FROM digest_sends ORDER BY channel").fetchall()
    assert rows == [(str(WEEK), "", "email", 64), (str(WEEK), "", "webhook", 64)]


def test_the_command_run_again_after_a_refused_email_sends_only_the_email(
        hook: tuple[list[dict], str], warehouse: Warehouse, tmp_path: Path) -> None:
    received, url = hook
    box = Refusing(refusals=1)
    env = {**os.environ, "FI_HOOK": url}
    with _smtp(box) as port:
        _command_folder(warehouse, tmp_path, port)
        first = run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env=env)
        assert first.returncode == 2 and first.stderr.strip() == (
            f"error: the mail server 127.0.0.1:{port} answered 451: 4.3.0 Try again later; "
            "sent by webhook, which a retry does not send again")
        assert len(received) == 1 and box.messages == []
        second = run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env=env)
        assert second.returncode == 0, second.stderr
        assert second.stdout.splitlines()[-2:] == [
            "already sent: webhook (this week's same digest; --resend sends it again)", "sent: email"]
        assert len(received) == 1 and len(box.messages) == 1
        forced = run_cli("digest", "--week", str(WEEK), "--resend", cwd=tmp_path, env=env)
        assert forced.returncode == 0, forced.stderr
        assert forced.stdout.splitlines()[-2:] == ["sent: webhook", "sent: email"]
        assert len(received) == 2 and len(box.messages) == 2


def test_the_warehouse_is_free_while_the_digest_is_sent(
        hook: tuple[list[dict], str], warehouse: Warehouse, tmp_path: Path) -> None:
    """The relay holds the message: meanwhile another process takes the warehouse's turn and
    opens it, as the desk or a flow would."""
    _, url = hook
    box = Held()
    with _smtp(box) as port:
        _command_folder(warehouse, tmp_path, port)
        done: list[subprocess.CompletedProcess[str]] = []
        sender = threading.Thread(target=lambda: done.append(
            run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env={**os.environ, "FI_HOOK": url})))
        sender.start()
        try:
            assert box.arrived.wait(60), "the digest never reached the mail server"
            with exclusive(tmp_path / "feedback.duckdb", "the test", timeout=0), Warehouse(tmp_path / "feedback.duckdb") as wh:
                assert wh.con.execute("SELECT count(*) FROM records").fetchone()[0] > 0
        finally:
            box.go.set()
            sender.join(120)
    assert done[0].returncode == 0, done[0].stderr
    assert done[0].stdout.splitlines()[-2:] == ["sent: webhook", "sent: email"] and len(box.messages) == 1


def test_a_relay_without_starttls_and_one_without_a_login_are_told_apart(
        digest: Digest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FI_SMTP_PASSWORD", PASSWORD)
    box = Inbox()
    with _smtp(box) as port:  # no TLS context: no STARTTLS; no authenticator: no AUTH
        with pytest.raises(DigestError) as no_tls:
            email_digest(digest, _settings(port, starttls=True))
        assert str(no_tls.value) == (f"the mail server 127.0.0.1:{port} offers no STARTTLS: "
                                     "set starttls = false only for a relay on this machine")
        with pytest.raises(DigestError) as no_login:
            email_digest(digest, _settings(port, username="digest", password_env="FI_SMTP_PASSWORD"))
        assert str(no_login.value) == (f"the mail server 127.0.0.1:{port} offers no login (AUTH) on this connection: "
                                       "remove digest.email.username and password_env if it needs none")
    assert box.messages == []


class RefusingRecipient(Inbox):
    """An inbox whose server refuses ``address`` at RCPT ("550 5.1.1 … mailbox unavailable") the
    first ``times`` times, and takes the message for the other recipients."""

    def __init__(self, address: str, times: int = 1) -> None:
        super().__init__()
        self.address, self.times = address, times

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options) -> str:  # noqa: N802 (aiosmtpd's name)
        if address == self.address and self.times:
            self.times -= 1
            return f"550 5.1.1 <{address}>: mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"


TWO = ("Product <pm@example.com>", "lead@example.com")


def test_a_recipient_the_relay_refused_is_recorded_unsent_and_retried_alone(
        hook: tuple[list[dict], str], warehouse: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    received, url = hook
    box = RefusingRecipient("lead@example.com")
    monkeypatch.setenv("FI_HOOK", url)
    with _smtp(box) as port:
        config = load(_command_folder(warehouse, tmp_path, port, TWO))
        done = write_digest(config, str(WEEK))
        with pytest.raises(DigestError) as refused:
            send_digest(config, done.digest)
        assert str(refused.value) == (
            f"the mail server 127.0.0.1:{port} refused the recipients lead@example.com "
            "(550: 5.1.1 <lead@example.com>: mailbox unavailable); "
            "sent by webhook, email to pm@example.com, which a retry does not send again")
        assert [rcpt for _, rcpt, _ in box.messages] == [["pm@example.com"]] and len(received) == 1
        again = send_digest(config, done.digest)  # the retry: only the refused recipient
        assert (again.sent, again.skipped) == (["email to lead@example.com"], ["webhook", "email to pm@example.com"])
        assert [rcpt for _, rcpt, _ in box.messages] == [["pm@example.com"], ["lead@example.com"]]
        assert box.parsed()["To"] == "Product <pm@example.com>, lead@example.com"  # the same message, to the one missing
        assert send_digest(config, done.digest).sent == []
        forced = send_digest(config, done.digest, resend=True)
        assert forced.sent == ["webhook", "email"] and box.messages[-1][1] == ["pm@example.com", "lead@example.com"]
    with Warehouse(config.warehouse.path) as wh:
        rows = wh.con.execute("SELECT channel, recipient FROM digest_sends WHERE week = ? ORDER BY channel, recipient",
                              [str(WEEK)]).fetchall()
    assert rows == [("email", "lead@example.com"), ("email", "pm@example.com"), ("webhook", "")]


def test_the_command_names_the_refused_recipients_and_sends_only_them_again(
        hook: tuple[list[dict], str], warehouse: Warehouse, tmp_path: Path) -> None:
    _, url = hook
    box = RefusingRecipient("lead@example.com")
    env = {**os.environ, "FI_HOOK": url}
    with _smtp(box) as port:
        _command_folder(warehouse, tmp_path, port, TWO)
        first = run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env=env)
        assert first.returncode == 2 and first.stderr.strip() == (
            f"error: the mail server 127.0.0.1:{port} refused the recipients lead@example.com "
            "(550: 5.1.1 <lead@example.com>: mailbox unavailable); "
            "sent by webhook, email to pm@example.com, which a retry does not send again")
        second = run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env=env)
        assert second.returncode == 0, second.stderr
        assert second.stdout.splitlines()[-3:] == [
            "already sent: webhook (this week's same digest; --resend sends it again)",
            "already sent: email to pm@example.com (this week's same digest; --resend sends it again)",
            "sent: email to lead@example.com"]
    assert [rcpt for _, rcpt, _ in box.messages] == [["pm@example.com"], ["lead@example.com"]]
