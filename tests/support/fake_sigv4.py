"""SigV4 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html), checked by the
fake clouds (tests/support/fake_clouds.py) by computing the signature again from the secret key."""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse

from tests.support.fake_anthropic import RecordedRequest


def sigv4_problem(request: RecordedRequest, keys: dict[str, str], region: str, service: str) -> tuple[int, str] | None:
    """Why a SigV4-signed request is refused (403 and Bedrock's words), or None when its signature is right."""
    auth = request.headers.get("authorization", "")
    scheme, _, rest = auth.partition(" ")
    if scheme != "AWS4-HMAC-SHA256":
        return 403, "Missing Authentication Token"
    parts = dict(p.strip().split("=", 1) for p in rest.split(",") if "=" in p)
    access_key, date, scope_region, scope_service, terminal = (parts.get("Credential", "").split("/") + [""] * 5)[:5]
    if access_key not in keys:
        return 403, "The security token included in the request is invalid."
    if (scope_region, scope_service, terminal) != (region, service, "aws4_request"):
        return 403, f"Credential should be scoped to a valid region ({region}) and service ({service})."
    amz_date = request.headers.get("x-amz-date", "")
    if not amz_date.startswith(date):
        return 403, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP."
    signed = parts.get("SignedHeaders", "").split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return 403, "host and x-amz-date must be signed"
    method, path_query = request.method, urllib.parse.urlsplit(request.path)
    # Canonical URI: each path segment URI-encoded again (every service but S3), as the signer does.
    canonical_uri = urllib.parse.quote(path_query.path, safe="/~")
    query = "&".join(
        sorted(
            f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
            for k, v in urllib.parse.parse_qsl(path_query.query, keep_blank_values=True)
        )
    )
    canonical_headers = "".join(f"{name}:{' '.join(request.headers.get(name, '').split())}\n" for name in signed)
    payload_hash = hashlib.sha256(request.raw).hexdigest()
    canonical = "\n".join([method, canonical_uri, query, canonical_headers, ";".join(signed), payload_hash])
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + keys[access_key]).encode()
    for piece in (date, region, service, "aws4_request"):
        key = hmac.new(key, piece.encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), parts.get("Signature", "")):
        return 403, "The request signature we calculated does not match the signature you provided."
    return None
