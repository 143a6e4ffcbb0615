"""CloudFront's archive behaviours, standing in front of the S3 emulator (issue 37).

Written from the CloudFront Developer Guide ("Create a signed URL using a
canned policy", "Restrict access with trusted key groups", "Origin access
control"), not from tfreg's signer, so that the end-to-end runs check the
signer against CloudFront's rules rather than against itself:

- Behaviours: `/archives/*` and `/cache/*` only, each allowing GET and HEAD
  (any other method: 403, as CloudFront answers a method a behaviour does not
  allow); every other path: 404 (the real distribution sends those to the API,
  which this stand-in does not serve).
- Restricted viewer access (trusted key group): the request carries
  `Expires`, `Signature` and `Key-Pair-Id`; the key is looked up by
  `Key-Pair-Id` among the key group's public keys (several while a key is
  rotated); the canned policy
  `{"Statement":[{"Resource":"<URL>","Condition":{"DateLessThan":{"AWS:EpochTime":<Expires>}}}]}`
  (no whitespace) is rebuilt from the request: the URL is the one requested,
  `https://<Host><path>`, with any query parameters other than the signed
  URL's own, in their order; the signature, base64 with `-` for `+`, `_` for
  `=` and `~` for `/`, must verify as RSA PKCS#1 v1.5 with SHA-1 over those
  bytes; the request must come before `Expires`. Otherwise 403, with
  CloudFront's error body and an `X-Edge-Refused` header naming the rule (the
  tests assert it, so a refusal for another reason cannot pass for this one).
- Origin: the bucket through origin access control (signing behaviour
  "always"): the viewer's Authorization header and query string are not
  forwarded (the cache policy keys on the path alone); the request goes to
  the S3 emulator path style (`/<bucket>/<path>`), signed with SigV4 with the
  configured credentials; Range and conditional headers pass; the origin's
  status, headers and body come back (a HEAD's Content-Length is the
  object's), with the response headers policy's `X-Content-Type-Options:
  nosniff` and `Content-Disposition: attachment`.

  python cloudfront-edge.py serve CONFIG_JSON
  python cloudfront-edge.py keygen PRIVATE_PEM PUBLIC_PEM
  python cloudfront-edge.py sign KEY_ID PRIVATE_PEM EXPIRES URL...

`keygen`: an RSA 2048 key pair, as `openssl genrsa` and `openssl rsa -pubout`
make for CloudFront (private PKCS#8, public SubjectPublicKeyInfo). `sign`:
the reference signer, botocore's CloudFrontSigner (canned policy), printing
a signed URL a line: the tests make their URLs with it, not with tfreg's signer.

CONFIG_JSON (re-read on every request, so a test can change the key group):
  {"port": 0, "cert": PEM, "key": PEM, "bucket": NAME,
   "s3": {"endpoint": "http://127.0.0.1:PORT", "region": R, "access_key": K, "secret_key": S},
   "keys": {"<key id>": "<public key PEM>", ...},
   "requests": PATH}
`port` 0 takes a free one. Prints "listening PORT" once it accepts
connections. When its standard input is a pipe it exits once that closes (the
test that started it ended, however it ended); otherwise it runs until killed. Every request it answers appends a JSON line to `requests`:
{"method", "path", "status", "refused"} (refused: the rule, or null).
"""

import base64
import http.client
import json
import os
import ssl
import stat
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

BEHAVIOURS = ("/archives/", "/cache/")
SIGNED_PARAMS = ("Expires", "Signature", "Key-Pair-Id")
# Viewer headers the behaviour forwards to the origin (CloudFront passes
# Range and conditional requests to S3).
FORWARDED = ("range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since")
# What comes back from the origin, less the hop-by-hop and per-connection ones.
DROPPED = ("content-length", "transfer-encoding", "connection", "keep-alive", "server", "date")
LOG_LOCK = threading.Lock()
CONFIG_PATH = None


def config():
    with open(CONFIG_PATH) as f:
        return json.load(f)


def cloudfront_b64decode(text):
    """The Signature parameter's alphabet back to standard base64."""
    standard = text.replace("-", "+").replace("_", "=").replace("~", "/")
    return base64.b64decode(standard, validate=True)


def canned_policy(resource, expires):
    return (
        '{"Statement":[{"Resource":"%s","Condition":{"DateLessThan":{"AWS:EpochTime":%d}}}]}'
        % (resource, expires)
    ).encode()


class Refused(Exception):
    """A 403 (or 404) of CloudFront's, with its error code and message."""

    def __init__(self, rule, code, message, status=403):
        super().__init__(rule)
        self.rule, self.code, self.message, self.status = rule, code, message, status


def check_signed_url(host, path, raw_query, keys, now):
    """Raise Refused unless the request's signed URL passes CloudFront's rules."""
    pairs = [p.partition("=") for p in raw_query.split("&")] if raw_query else []
    params = {k: v for k, _, v in pairs if k in SIGNED_PARAMS}
    other = "&".join(f"{k}{sep}{v}" for k, sep, v in pairs if k not in SIGNED_PARAMS)
    if "Policy" in (k for k, _, _ in pairs):
        # tfreg signs canned policies only; a custom one is not what it made.
        raise Refused("custom-policy", "AccessDenied", "Access denied")
    if not params.get("Key-Pair-Id"):
        raise Refused(
            "missing-key-pair-id", "MissingKey",
            "Missing Key-Pair-Id query parameter or cookie value",
        )
    if not params.get("Signature") or not params.get("Expires"):
        raise Refused("missing-params", "AccessDenied", "Access denied")
    pem = keys.get(params["Key-Pair-Id"])
    if pem is None:
        raise Refused("unknown-key", "InvalidKey", "Unknown Key")
    if not params["Expires"].isdigit():
        raise Refused("malformed-expires", "AccessDenied", "Access denied")
    expires = int(params["Expires"])
    resource = f"https://{host}{path}" + (f"?{other}" if other else "")
    try:
        signature = cloudfront_b64decode(params["Signature"])
        key = serialization.load_pem_public_key(pem.encode())
        key.verify(signature, canned_policy(resource, expires), padding.PKCS1v15(), hashes.SHA1())
    except (InvalidSignature, ValueError):
        raise Refused("signature", "AccessDenied", "Access denied")
    if now >= expires:
        raise Refused("expired", "AccessDenied", "Access denied")


class Edge(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("cloudfront-edge: " + (fmt % args) + "\n")

    def record(self, status, refused, cfg):
        line = json.dumps({
            "method": self.command, "path": self.path.partition("?")[0],
            "status": status, "refused": refused,
        })
        with LOG_LOCK, open(cfg["requests"], "a") as f:
            f.write(line + "\n")

    def error(self, refused, cfg):
        body = (
            '<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>'
            % (refused.code, refused.message)
        ).encode()
        # Logged before the answer goes out: once a client has it, its line is there.
        self.record(refused.status, refused.rule, cfg)
        self.send_response(refused.status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Edge-Refused", refused.rule)
        self.send_header("X-Cache", "Error from cloudfront")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def forward(self, path, cfg):
        """GET or HEAD `path` from the bucket, signed as origin access control signs."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        s3 = cfg["s3"]
        origin = urllib.parse.urlparse(s3["endpoint"])
        target = f"{s3['endpoint']}/{cfg['bucket']}{path}"
        headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED}
        request = AWSRequest(method=self.command, url=target, headers=headers)
        S3SigV4Auth(
            Credentials(s3["access_key"], s3["secret_key"]), "s3", s3["region"]
        ).add_auth(request)
        conn = http.client.HTTPConnection(origin.netloc, timeout=120)
        try:
            conn.request(self.command, f"/{cfg['bucket']}{path}",
                         headers=dict(request.prepare().headers.items()))
            resp = conn.getresponse()
            self.record(resp.status, None, cfg)
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in DROPPED:
                    self.send_header(k, v)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Disposition", "attachment")
            self.send_header("X-Cache", "Miss from cloudfront")
            length = resp.getheader("Content-Length")
            if self.command == "HEAD" or length is not None:
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                while self.command != "HEAD":
                    chunk = resp.read(64 * 1024)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
            else:
                data = resp.read()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
        finally:
            conn.close()

    def handle_any(self):
        cfg = config()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path, _, raw_query = self.path.partition("?")
        try:
            if not path.startswith(BEHAVIOURS):
                raise Refused("no-behaviour", "NoSuchBehaviour",
                              "The stand-in serves the archive behaviours only", 404)
            if self.command not in ("GET", "HEAD"):
                raise Refused(
                    "method", "MethodNotAllowed",
                    "This distribution is not configured to allow the HTTP request method "
                    "that was used for this request.",
                )
            check_signed_url(self.headers.get("Host", ""), path, raw_query, cfg["keys"],
                             int(time.time()))
        except Refused as refused:
            return self.error(refused, cfg)
        self.forward(path, cfg)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = handle_any


class TlsServer(ThreadingHTTPServer):
    """TLS per connection, in the connection's own thread (a slow handshake
    holds up no other client)."""

    daemon_threads = True

    def __init__(self, addr, context):
        super().__init__(addr, Edge)
        self.context = context

    def finish_request(self, request, client_address):
        try:
            request = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            sys.stderr.write(f"cloudfront-edge: TLS handshake failed: {e}\n")
            return
        super().finish_request(request, client_address)


def keygen(private_path, public_path):
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with open(private_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    with open(public_path, "wb") as f:
        f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo))


def sign(key_id, private_path, expires, *urls):
    import datetime
    from botocore.signers import CloudFrontSigner
    with open(private_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    signer = CloudFrontSigner(key_id, lambda m: key.sign(m, padding.PKCS1v15(), hashes.SHA1()))
    when = datetime.datetime.fromtimestamp(int(expires), datetime.timezone.utc)
    for url in urls:
        print(signer.generate_presigned_url(url, date_less_than=when))


def serve(config_path):
    global CONFIG_PATH
    CONFIG_PATH = config_path
    cfg = config()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cfg["cert"], cfg["key"])
    server = TlsServer(("127.0.0.1", int(cfg.get("port", 0))), context)
    print(f"listening {server.server_address[1]}", flush=True)
    if not stat.S_ISFIFO(os.fstat(0).st_mode):
        server.serve_forever()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    {"serve": serve, "keygen": keygen, "sign": sign}[sys.argv[1]](*sys.argv[2:])
