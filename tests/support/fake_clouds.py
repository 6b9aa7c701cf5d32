"""Fake cloud endpoints for Claude on 127.0.0.1: Amazon Bedrock, Google Vertex AI and Microsoft Foundry, each a gateway
in front of a :class:`~tests.support.fake_anthropic.FakeAnthropic` (which checks the Messages body and scripts the reply).

Usage::

    with FakeAnthropic() as api, FakeCloud("vertex", api) as cloud:
        api.script(text("Hello"))
        ...  # point the SDK's AnthropicVertex at cloud.base_url (ANTHROPIC_VERTEX_BASE_URL)
        assert cloud.requests[0].path.endswith(":streamRawPredict")

Each gateway checks what its cloud checks before the model sees a request, records the request as the cloud got it
(path, headers, body), turns it into a Messages request for the fake API, and answers in the cloud's own format.
Sources, per behaviour:

- Bedrock, InvokeModel / InvokeModelWithResponseStream (https://docs.aws.amazon.com/bedrock/latest/APIReference/
  API_runtime_InvokeModelWithResponseStream.html, and "Claude on Amazon Bedrock", platform docs): ``POST
  /model/{modelId}/invoke-with-response-stream``; the body is the Messages body without ``model`` and ``stream``, with
  ``anthropic_version`` (and betas as ``anthropic_beta``) in it. Auth is a SigV4 ``Authorization`` header
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html), checked here by
  computing the signature again from the secret key; or a Bedrock API key as ``Authorization: Bearer``
  (https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html). A failed check is a 403 with
  ``{"message": ...}`` and ``x-amzn-ErrorType`` (Bedrock's common errors). The stream is the AWS event stream
  (https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html, "the prelude, headers, payload and
  CRCs" of each message), each ``chunk`` event carrying one Messages stream event as base64 ``bytes``.
- Vertex AI, ``streamRawPredict`` ("Request predictions with Claude models", https://cloud.google.com/vertex-ai/
  generative-ai/docs/partner-models/claude/use-claude, and "Claude on Vertex AI", platform docs): ``POST /v1/projects/
  {project}/locations/{region}/publishers/anthropic/models/{model}:streamRawPredict``; the model is in the path, not the
  body; ``anthropic_version`` is in the body; the reply is the Messages SSE stream. Auth is ``Authorization: Bearer``
  with an OAuth access token; this gateway is also the token endpoint a service account's key file names (``token_uri``,
  the file Application Default Credentials reads from GOOGLE_APPLICATION_CREDENTIALS), answering the JWT-bearer grant
  as Google's OAuth 2.0 server does (https://developers.google.com/identity/protocols/oauth2/service-account#httprest):
  the assertion's RS256 signature, issuer, audience and scope are checked before a token is issued.
- Microsoft Foundry ("Claude in Microsoft Foundry", platform docs): ``POST /anthropic/v1/messages`` with the Messages
  body (the model is the deployment name), authenticated by ``x-api-key`` (the key) or ``Authorization: Bearer`` (an
  Entra ID token); the reply is the Messages SSE stream.
- Bedrock's Messages-API endpoint ("Claude in Amazon Bedrock", platform docs; the SDK's ``AnthropicBedrockMantle``):
  ``POST /anthropic/v1/messages`` with the Messages body and the ``anthropic-version`` header, SigV4 for the service
  ``bedrock-mantle`` or a Bedrock API key as Bearer; SSE. Which model each Bedrock endpoint serves, and which API versions
  each takes: tests/support/fake_versions.py.
- Claude Platform on AWS ("Making requests", https://docs.aws.amazon.com/claude-platform/latest/userguide/making-requests.html):
  ``POST /v1/messages``, the Messages API with a required ``anthropic-workspace-id`` header, SigV4 for the service
  ``aws-external-anthropic`` or a workspace API key (``x-api-key``, or ``Authorization: Bearer`` as the SDK sends it).
- Claude Models on Google Cloud, Anthropic managed (the SDK's lib/google_cloud/README.md): the Messages API under
  ``/v1/projects/{project}/locations/{location}/workspaces/{workspace}/invoke``, a Google access token as Bearer (this
  gateway's token endpoint mints it, as for Vertex).
"""

from __future__ import annotations

import base64
import binascii
import http.client
import itertools
import json
import struct
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.support import fake_versions
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest
from tests.support.fake_sigv4 import sigv4_problem

Cloud = Literal["bedrock", "vertex", "foundry", "aws", "google"]
GATEWAY_KEY = "fake-cloud-gateway"
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"  # a service account's assertion names Google's token endpoint  # what the gateway itself shows the fake API (never a user's credential)


class FakeCloud:
    """One cloud's endpoint: a context manager serving on 127.0.0.1 in a daemon thread, in front of ``upstream``."""

    def __init__(
        self,
        cloud: Cloud,
        upstream: FakeAnthropic,
        *,
        region: str = "us-west-2",
        project: str = "nbagent-test",
        aws_keys: dict[str, str] | None = None,  # access key id -> secret key: the SigV4 signers this "account" knows
        bearer: frozenset[str] = frozenset(),  # Bedrock API keys / Foundry Entra tokens accepted as Bearer
        api_keys: frozenset[str] = frozenset(),  # Foundry keys accepted in x-api-key
        service_accounts: dict[str, Any] | None = None,  # Vertex: client_email -> RSA public key the token endpoint trusts
        workspace: str = "wrkspc_fake0001",  # Claude Platform on AWS / Google Cloud: the workspace requests must name
    ) -> None:
        self.cloud = cloud
        self.upstream = upstream
        self.region = region
        self.project = project
        self.aws_keys = dict(aws_keys or {})
        self.bearer = set(bearer)
        self.api_keys = set(api_keys)
        self.service_accounts = dict(service_accounts or {})
        self.workspace = workspace
        self.requests: list[RecordedRequest] = []  # every request as the cloud got it
        self.tokens_issued: list[str] = []  # Vertex: access tokens the token endpoint minted
        self.echo_credentials = False  # True: a refused or failed request's error echoes the credential sent (as some proxies do)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The endpoint's root (Vertex: add /v1; Foundry: add /anthropic/)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeCloud:
        """Start serving."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd.server_close()

    # What each cloud checks ------------------------------------------------------------------------------------
    def refusal(self, request: RecordedRequest) -> tuple[int, str] | None:
        """Why the cloud refuses this request before the model sees it (status, message), else None."""
        headers = request.headers
        auth = headers.get("authorization", "")
        if self.cloud == "bedrock":
            if auth.startswith("Bearer "):
                return None if auth[7:] in self.bearer else (403, "Invalid API Key format: " + self._echo(auth[7:]))
            mantle = urllib.parse.urlsplit(request.path).path.startswith("/anthropic/")
            return sigv4_problem(request, self.aws_keys, self.region, "bedrock-mantle" if mantle else "bedrock")
        if self.cloud == "aws":
            if headers.get("anthropic-workspace-id") != self.workspace:
                return 403, f"anthropic-workspace-id: not a workspace of this account ({headers.get('anthropic-workspace-id')!r})"
            key = headers.get("x-api-key", "") or (auth[7:] if auth.startswith("Bearer ") else "")  # a workspace key, either way
            if key:
                return None if key in self.api_keys else (401, "invalid API key " + self._echo(key))
            return sigv4_problem(request, self.aws_keys, self.region, "aws-external-anthropic")
        if self.cloud in ("vertex", "google"):
            token = auth[7:] if auth.startswith("Bearer ") else ""
            return (
                None
                if token and token in self.tokens_issued
                else (401, "Request had invalid authentication credentials. " + self._echo(token))
            )
        key = headers.get("x-api-key", "")
        if key:
            return None if key in self.api_keys else (401, "Access denied due to invalid subscription key. " + self._echo(key))
        token = auth[7:] if auth.startswith("Bearer ") else ""
        return None if token in self.bearer and token else (401, "Unauthorized. " + self._echo(token))

    def _echo(self, credential: str) -> str:
        return f"(sent: {credential})" if self.echo_credentials else ""

    def messages_request(self, request: RecordedRequest) -> tuple[dict[str, Any], dict[str, str]] | str:
        """The Messages body and headers the cloud's request stands for, or why its path or body is not one."""
        body = request.body
        if not isinstance(body, dict):
            return "the body is not a JSON object"
        path = urllib.parse.urlsplit(request.path).path
        body = dict(body)
        version = request.headers.get("anthropic-version", "")  # the header clouds: passed on as it came
        headers = {"x-api-key": GATEWAY_KEY, "anthropic-version": version, "content-type": "application/json"}
        if self.cloud == "bedrock" and path.startswith("/anthropic/"):  # the Messages-API endpoint
            if path.rstrip("/") != "/anthropic/v1/messages":
                return f"no operation at {path}"
            problem = fake_versions.bedrock_problem("messages", str(body.get("model")), version)
            if problem:
                return problem
            if request.headers.get("anthropic-beta"):
                headers["anthropic-beta"] = request.headers["anthropic-beta"]
            return body, headers
        if self.cloud in ("bedrock", "vertex"):
            if "model" in body:
                return "model: the model is named in the path, not the body"
            version = body.pop("anthropic_version", None)
            if not isinstance(version, str) or not version:
                return "anthropic_version: required in the body"
            if version not in fake_versions.BODY_VERSIONS[self.cloud]:
                return f"anthropic_version: {version!r} is not a valid version"
            headers["anthropic-version"] = fake_versions.BODY_VERSIONS[self.cloud][version]
        if self.cloud == "bedrock":
            prefix = "/model/"
            if not path.startswith(prefix) or not path.endswith(("/invoke", "/invoke-with-response-stream")):
                return f"no operation at {path}"
            if "stream" in body:
                return "stream: the operation (invoke-with-response-stream) says it, not the body"
            model, _, operation = path[len(prefix) :].rpartition("/")
            body["model"] = urllib.parse.unquote(model)
            problem = fake_versions.bedrock_problem("invoke_model", body["model"], str(version))
            if problem:
                return problem
            body["stream"] = operation == "invoke-with-response-stream"
            betas = body.pop("anthropic_beta", None)
            if betas:
                headers["anthropic-beta"] = ",".join(betas)
        elif self.cloud == "vertex":
            where = f"/v1/projects/{self.project}/locations/{self.region}/publishers/anthropic/models/"
            if not path.startswith(where) or not path.endswith((":streamRawPredict", ":rawPredict")):
                return f"no model endpoint at {path} (project {self.project}, region {self.region})"
            model, _, specifier = path[len(where) :].rpartition(":")
            body["model"] = urllib.parse.unquote(model)
            if body.get("stream") is not (specifier == "streamRawPredict"):
                return f"stream must be {specifier == 'streamRawPredict'} for :{specifier}"
            if request.headers.get("anthropic-beta"):
                headers["anthropic-beta"] = request.headers["anthropic-beta"]
        else:
            where = {
                "foundry": "/anthropic/v1/messages",
                "aws": "/v1/messages",
                "google": f"/projects/{self.project}/locations/{self.region}/workspaces/{self.workspace}/invoke/v1/messages",
            }[self.cloud]
            # Google's gateway path starts /v1 (SDK 2.x) or /v1alpha (1.x): either, then the workspace's.
            if not (path.rstrip("/") == where or (self.cloud == "google" and path.rstrip("/").endswith(where))):
                return f"no endpoint at {path}"
            if request.headers.get("anthropic-beta"):
                headers["anthropic-beta"] = request.headers["anthropic-beta"]
        return body, headers

    def issue_token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """Google's token endpoint: a JWT-bearer grant signed by a known service account gets a new access token."""
        refused = 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"}
        try:
            head, claims, signature = (base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)) for p in form["assertion"].split("."))
            payload = json.loads(claims)
            public = self.service_accounts[payload["iss"]]
        except (KeyError, ValueError):
            return refused
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        signed = form["assertion"].rsplit(".", 1)[0].encode()
        try:
            public.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return refused
        if json.loads(head).get("alg") != "RS256" or payload.get("aud") != GOOGLE_TOKEN_AUDIENCE:
            return refused
        if "https://www.googleapis.com/auth/cloud-platform" not in str(payload.get("scope", "")).split():
            return 400, {"error": "invalid_scope", "error_description": "cloud-platform scope required"}
        token = f"ya29.fake-access-token-{next(self._ids):04d}"
        with self._lock:
            self.tokens_issued.append(token)
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}


# The AWS event stream ----------------------------------------------------------------------------------------------
def event_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total length, headers length, CRC), string headers, payload, message CRC."""
    encoded = b"".join(
        struct.pack("B", len(name)) + name.encode() + b"\x07" + struct.pack(">H", len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


def chunk_event(data: bytes) -> bytes:
    """A ``chunk`` event whose PayloadPart carries one Messages stream event (base64 ``bytes``)."""
    payload = json.dumps({"bytes": base64.b64encode(data).decode()}).encode()
    return event_message({":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}, payload)


def exception_event(kind: str, message: str) -> bytes:
    """An exception frame ending a stream (e.g. ``internalServerException``)."""
    payload = json.dumps({"message": message}).encode()
    return event_message({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}, payload)


def sse_events(response: http.client.HTTPResponse) -> Iterator[tuple[str, bytes]]:
    """The (event name, data) pairs of an SSE body, as they arrive."""
    name, data = "", b""
    for raw in response:
        line = raw.rstrip(b"\r\n")
        if not line:
            if data:
                yield name, data
            name, data = "", b""
        elif line.startswith(b"event:"):
            name = line[6:].strip().decode()
        elif line.startswith(b"data:"):
            data += line[5:].strip()


# The server --------------------------------------------------------------------------------------------------------
def _handler(cloud: FakeCloud) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        timeout = 30

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            if self.path == "/token":  # Google's OAuth 2.0 token endpoint, for the ADC file's token_uri
                status, answer = cloud.issue_token(dict(urllib.parse.parse_qsl(raw.decode())))
                return self._json(status, answer)
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest("POST", self.path, headers, body, raw)
            with cloud._lock:
                cloud.requests.append(request)
            refused = cloud.refusal(request)
            if refused is not None:
                return self._error(*refused)
            translated = cloud.messages_request(request)
            if isinstance(translated, str):
                return self._error(400, translated)
            messages_body, upstream_headers = translated
            host, port = urllib.parse.urlsplit(cloud.upstream.base_url).netloc.split(":")
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                connection.request("POST", "/v1/messages", json.dumps(messages_body).encode(), upstream_headers)
                response = connection.getresponse()
                if response.status != 200:
                    return self._error(response.status, json.loads(response.read()).get("error", {}).get("message", "error"))
                if not messages_body.get("stream"):
                    return self._json(200, json.loads(response.read()))
                if cloud.cloud == "bedrock" and self.path.startswith("/model/"):  # InvokeModel: the AWS event stream
                    return self._stream_events(response)
                return self._stream_sse(response)
            finally:
                connection.close()

        def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            for key, value in {"content-type": "application/json", "content-length": str(len(data)), **(extra or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            if cloud.cloud == "bedrock" and self.path.startswith("/model/"):  # Bedrock's errors: {"message"}, the type in a header
                kind = {400: "ValidationException", 403: "AccessDeniedException", 429: "ThrottlingException"}.get(
                    status, "InternalServerException"
                )
                return self._json(
                    status, {"message": message}, {"x-amzn-errortype": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
                )
            if cloud.cloud == "vertex":  # Google's error object
                return self._json(
                    status,
                    {"error": {"code": status, "message": message, "status": "UNAUTHENTICATED" if status == 401 else "INVALID_ARGUMENT"}},
                )
            kinds = {400: "invalid_request_error", 401: "authentication_error"}
            return self._json(status, {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}})

        def _start_chunked(self, content_type: str) -> None:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _stream_sse(self, response: http.client.HTTPResponse) -> None:
            self._start_chunked("text/event-stream")
            for name, data in sse_events(response):
                self._chunk(b"event: %s\ndata: %s\n\n" % (name.encode(), data))
            self._chunk(b"")

        def _stream_events(self, response: http.client.HTTPResponse) -> None:
            self._start_chunked("application/vnd.amazon.eventstream")
            for name, data in sse_events(response):
                if name == "error":  # the API's error type as the stream exception Bedrock names for it
                    error = json.loads(data).get("error", {})
                    kind = {"overloaded_error": "serviceUnavailableException", "rate_limit_error": "throttlingException"}
                    self._chunk(exception_event(kind.get(error.get("type"), "internalServerException"), str(error.get("message", ""))))
                    break
                if name != "ping":
                    self._chunk(chunk_event(data))
            self._chunk(b"")

    return Handler
