"""S3 in front of moto for presigned URLs (the role-scoped runs, issue 36).

moto 5.2.5 with IAM enforcement on answers every presigned URL 500: its
IAM check reads the Authorization header, which a presigned request does
not have (iam/access_control.py, IAMRequestBase). This proxy stands
between the functions' S3 client and moto: a request signed in its
headers passes through untouched (Host included, so its signature holds);
a presigned one is verified here (SigV4 query signature, expiry) with the
credentials it names, then sent on signed in its headers with those same
credentials, so moto still decides whether that role may do that action
on that key.

  python presigned-proxy.py PORT MOTO_URL CREDENTIALS_JSON
CREDENTIALS_JSON: {"<access key id>": {"secret": ..., "token": ...}}.
Prints "listening PORT" once it accepts connections.
"""

import datetime
import hashlib
import hmac
import http.client
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

PORT, MOTO, CREDS = int(sys.argv[1]), sys.argv[2], sys.argv[3]
MOTO_HOST = urllib.parse.urlparse(MOTO).netloc
AUTH_PARAMS = {
    "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
    "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token",
}


def quote(s):
    return urllib.parse.quote(s, safe="-_.~")


def expected_signature(method, path, pairs, headers, secret):
    params = dict(pairs)
    scope_parts = params["X-Amz-Credential"].split("/")
    date, region, service = scope_parts[1], scope_parts[2], scope_parts[3]
    query = "&".join(
        f"{quote(k)}={quote(v)}" for k, v in sorted(pairs) if k != "X-Amz-Signature"
    )
    signed = params["X-Amz-SignedHeaders"].split(";")
    canonical_headers = "".join(f"{h}:{headers.get(h, '').strip()}\n" for h in signed)
    canonical = "\n".join(
        [method, path, query, canonical_headers, params["X-Amz-SignedHeaders"], "UNSIGNED-PAYLOAD"]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", params["X-Amz-Date"], scope,
         hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), region


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("presigned-proxy: " + (fmt % args) + "\n")

    def refuse(self, why):
        body = f"<Error><Code>AccessDenied</Code><Message>{why}</Message></Error>".encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def relay(self, method, path, headers, body):
        conn = http.client.HTTPConnection(MOTO_HOST, timeout=120)
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(k, v)
        # A HEAD's answer has no body: its Content-Length is the object's,
        # as moto sent it (the SDK reads a HeadObject's size there).
        length = resp.getheader("Content-Length") if method == "HEAD" else None
        self.send_header("Content-Length", length if length is not None else str(len(data)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(data)
        conn.close()

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, raw_query = self.path.partition("?")
        pairs = urllib.parse.parse_qsl(raw_query, keep_blank_values=True)
        names = {k for k, _ in pairs}
        if "X-Amz-Signature" not in names:
            headers = {k: v for k, v in self.headers.items()}
            return self.relay(self.command, self.path, headers, body)
        params = dict(pairs)
        creds = json.load(open(CREDS))
        key_id = params.get("X-Amz-Credential", "").split("/")[0]
        if key_id not in creds:
            return self.refuse(f"unknown access key {key_id}")
        lower = {k.lower(): v for k, v in self.headers.items()}
        want, region = expected_signature(self.command, path, pairs, lower, creds[key_id]["secret"])
        if not hmac.compare_digest(want, params["X-Amz-Signature"]):
            return self.refuse("the URL's signature does not match")
        issued = datetime.datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc)
        if datetime.datetime.now(datetime.timezone.utc) > issued + datetime.timedelta(
                seconds=int(params["X-Amz-Expires"])):
            return self.refuse("the URL has expired")
        if params.get("X-Amz-Security-Token", creds[key_id]["token"]) != creds[key_id]["token"]:
            return self.refuse("the URL's session token is not its key's")
        rest = [(k, v) for k, v in pairs if k not in AUTH_PARAMS]
        query = urllib.parse.urlencode(rest, quote_via=urllib.parse.quote)
        target = f"{MOTO}{path}" + (f"?{query}" if query else "")
        signed = params["X-Amz-SignedHeaders"].split(";")
        headers = {k: v for k, v in self.headers.items() if k.lower() in signed and k.lower() != "host"}
        request = AWSRequest(method=self.command, url=target, data=body, headers=headers)
        credentials = Credentials(key_id, creds[key_id]["secret"], creds[key_id]["token"])
        S3SigV4Auth(credentials, "s3", region).add_auth(request)
        prepared = request.prepare()
        forward = dict(prepared.headers.items())
        forward["Host"] = MOTO_HOST
        self.relay(self.command, target[len(MOTO):], forward, body)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = handle_any


server = ThreadingHTTPServer(("127.0.0.1", PORT), Proxy)
print(f"listening {PORT}", flush=True)
server.serve_forever()
