"""The weekly digest as an email, sent through the SMTP relay of ``[digest.email]``.

One message, ``multipart/alternative``: a plain-text part for clients that read no HTML, and
the HTML digest (laid out with tables) in a ``multipart/related`` with its charts as PNG
images, each referenced from the HTML by ``cid:`` — email clients drop inline SVG and block
remote images, but show what the message carries. Sent with :mod:`smtplib`: STARTTLS first
(verifying the server's certificate) when configured, then the login, whose password comes
from the environment and appears in no message or error.
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr

from ..config import EmailConfig
from ._content import Digest, DigestError
from ._render import render_email

#: The Message-ID's domain: the digest's own, not the relay's or the machine's.
_DOMAIN = "feedback-insights.digest"


class RecipientsRefused(DigestError):
    """The relay refused some recipients (``refused``: each address with the server's reply)
    and took the message for the others, if any: a retry mails the refused ones alone."""

    def __init__(self, where: str, refused: dict[str, str]) -> None:
        said = ", ".join(f"{address} ({reply})" for address, reply in refused.items())
        super().__init__(f"{where} refused the recipients {said}")
        self.refused = refused


def recipients(settings: EmailConfig) -> list[str]:
    """The envelope address of each of ``settings.to``, once ("PMs <pm@example.com>" is
    pm@example.com): what the relay is asked to deliver to, and what is recorded as sent."""
    return list(dict.fromkeys(parseaddr(value)[1] for value in settings.to))


def message(digest: Digest, settings: EmailConfig) -> EmailMessage:
    """The digest as a multipart message from ``settings.sender`` to ``settings.to``."""
    html, text, charts = render_email(digest)
    mail = EmailMessage()
    mail["Subject"] = f"What agents told us · {digest.week}"
    mail["From"] = settings.sender
    mail["To"] = ", ".join(settings.to)
    mail["Date"] = formatdate(usegmt=True)
    mail["Message-ID"] = make_msgid(f"digest-{digest.week}", domain=_DOMAIN)
    mail.set_content(text, cte="quoted-printable")
    mail.add_alternative(html, subtype="html", cte="quoted-printable")
    part = mail.get_body(("html",))
    assert part is not None  # just added
    for image in charts.images:
        part.add_related(image.png, "image", "png", cid=f"<{image.cid}>",
                         filename=image.cid.split("@")[0] + ".png", disposition="inline")
    return mail


def send(mail: EmailMessage, settings: EmailConfig, to: Sequence[str] | None = None) -> None:
    """Hand ``mail`` to the relay for ``to`` (default: every recipient); a :class:`DigestError`
    that names the server and what went wrong when it cannot be (never the password), and
    :class:`RecipientsRefused` when the relay refused some recipients, partly (smtplib returns
    those) or wholly (it raises): a relay that refuses one address still delivers to the others,
    so what was sent is known per recipient. What the server offers is asked first (``EHLO``),
    so that a relay without STARTTLS and one without a login are told apart: :mod:`smtplib`
    raises the same error for both."""
    where = f"the mail server {settings.host}:{settings.port}"
    password = settings.password()  # a missing variable is a ConfigError before connecting
    try:
        with smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout) as smtp:
            if settings.starttls:
                smtp.ehlo()
                if not smtp.has_extn("starttls"):
                    raise DigestError(f"{where} offers no STARTTLS: set starttls = false only for a relay on this machine")
                smtp.starttls(context=ssl.create_default_context(cafile=settings.ca_file))
            if settings.username and password is not None:
                smtp.ehlo_or_helo_if_needed()
                if not smtp.has_extn("auth"):
                    raise DigestError(f"{where} offers no login (AUTH) on this connection: remove digest.email.username "
                                      "and password_env if it needs none")
                smtp.login(settings.username, password)
            refused = smtp.send_message(mail, to_addrs=list(to or recipients(settings)))
    except smtplib.SMTPAuthenticationError as failed:
        raise DigestError(f"{where} refused the login of {settings.username} ({failed.smtp_code}): "
                          f"check ${settings.password_env}") from None
    except smtplib.SMTPRecipientsRefused as failed:
        refused = failed.recipients
    except smtplib.SMTPResponseException as failed:
        raise DigestError(f"{where} answered {failed.smtp_code}: {_reply(failed.smtp_error)}") from None
    except ssl.SSLCertVerificationError as failed:
        raise DigestError(f"{where}: its certificate is not trusted ({failed.verify_message}); "
                          "set digest.email.ca_file to the CA that signed it") from None
    except (OSError, smtplib.SMTPException) as failed:
        raise DigestError(f"{where} could not be reached ({type(failed).__name__}: {failed})") from None
    if refused:
        raise RecipientsRefused(where, {address: f"{code}: {_reply(reply)}" for address, (code, reply) in refused.items()})


def _reply(text: bytes | str) -> str:
    return (text.decode(errors="replace") if isinstance(text, bytes) else text)[:200]


def email_digest(digest: Digest, settings: EmailConfig) -> None:
    """Mail the digest to ``settings.to``."""
    send(message(digest, settings), settings)
