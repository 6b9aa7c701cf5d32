"""Links that point at this machine, and so maybe into the Jupyter server: never live in a view or an export.

A link to ``http://127.0.0.1:8888/logout`` in a reply is one click from logging the user out (or
worse: any GET the server answers), and the browser sends Jupyter's cookie to any port of the same
host.  A view inside a notebook cannot know the name the browser uses for the server, so the rule is
by host: an ``http(s)`` link is refused when its host, read as a browser reads it (the WHATWG URL
rules: backslashes as slashes, userinfo and port dropped, %-escapes and full-width forms decoded,
IPv4 in decimal, octal, hex or short form), is a loopback or unspecified address, ``localhost`` or a
name under it, or this machine's host name; so is an ``http:`` link without ``//``, which a browser
resolves against the page itself.  The server's page also refuses links to its own host (in its
script, where the browser's own URL parser reads them).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from functools import cache
from urllib.parse import unquote

_STRIP = re.compile(r"^[\x00-\x20]+|[\x00-\x20]+$")
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_SPECIAL = re.compile(r"(?i)(https?):([/\\]*)")
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})  # the dots UTS 46 maps to "."
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def url_host(url: str) -> str | None:
    """The host an ``http(s)`` link reaches, as a browser reads it ('' if it has none it can use); None if not an http(s) link."""
    url = _TAB_NEWLINE.sub("", _STRIP.sub("", url))
    special = _SPECIAL.match(url)
    if special is None:
        return None
    if len(special.group(2)) < 2:
        return ""  # "http:/x" or "http:x": relative to the page on a page of the same scheme
    authority = re.split(r"[/\\?#]", url[special.end() :], maxsplit=1)[0]
    host = authority.rpartition("@")[2]
    host = host[: host.find("]") + 1] if host.startswith("[") else host.partition(":")[0]
    host = unicodedata.normalize("NFKC", unquote(host, errors="replace")).translate(_DOTS).lower()
    return ".".join(_label(label) for label in host.split("."))


def local_host(host: str) -> bool:
    """Whether ``host`` (as :func:`url_host` gives it) is this machine: loopback, unspecified, localhost, its host name."""
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host.strip("[]"))
        except ValueError:
            return True  # not an address a browser would go to: not a live link either
        mapped = address.ipv4_mapped
        return address.is_loopback or address.is_unspecified or (mapped is not None and _local_ipv4(int(mapped)))
    name = host.rstrip(".")
    if not name:
        return True
    number = _ipv4(name)
    if number is not None:
        return number < 0 or _local_ipv4(number)
    return name in LOCAL_NAMES or name.endswith(".localhost") or name in _own_names()


def local_link(url: str) -> bool:
    """Whether a link to ``url`` must not be live: an http(s) URL reaching this machine (see the module's rule)."""
    host = url_host(url)
    return host is not None and local_host(host)


def _local_ipv4(number: int) -> bool:
    return number >> 24 in (0, 127)  # 127.0.0.0/8 and 0.0.0.0/8 (which reaches this machine on Linux)


def _ipv4(name: str) -> int | None:
    """The address of a host that ends in a number, read as WHATWG does (-1 if it is not a valid one); None for a domain name."""
    parts = name.split(".")
    if not re.fullmatch(r"[0-9]+|0[x][0-9a-f]*", parts[-1]):
        return None
    numbers = []
    for part in parts:
        match = re.fullmatch(r"0x([0-9a-f]*)|(0[0-7]+)|([0-9]+)", part)
        if match is None:
            return -1
        hexa, octal, decimal = match.groups()
        numbers.append(int(hexa or "0", 16) if hexa is not None else int(octal, 8) if octal else int(decimal))
    if len(numbers) > 4 or any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return -1
    return sum(n << (8 * (3 - i)) for i, n in enumerate(numbers[:-1])) + numbers[-1]


def _label(label: str) -> str:
    """A label as it reads once decoded: an ``xn--`` label's Unicode, normalized (a browser refuses what does not map back)."""
    if label.startswith("xn--"):
        try:
            return unicodedata.normalize("NFKC", label[4:].encode("ascii").decode("punycode")).translate(_DOTS).lower()
        except (UnicodeError, ValueError):
            return label
    return label


@cache
def _own_names() -> frozenset[str]:
    """This machine's host name (the short one and the name as given; no DNS lookup)."""
    name = socket.gethostname().lower().rstrip(".")
    return frozenset({name, name.partition(".")[0]} - {""})
