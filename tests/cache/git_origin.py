#!/usr/bin/env python3
"""A module registry whose sources are git repositories, for the pull-through
cache's tests (issue 22): what registry.terraform.io does for modules, on a
test name.

    git_origin.py ADDR PORT CERT KEY GIT_ROOT MODULES_JSON

HTTPS on ADDR:PORT with CERT (chain) and KEY. Answers
- /.well-known/terraform.json: modules.v1 at /v1/modules/;
- /v1/modules/NS/NAME/SYSTEM/versions and .../VERSION/download (204 with
  X-Terraform-Get) from MODULES_JSON: {"ns/name/system": {"1.0.0": source}};
- /git/REPO/...: git's own `git http-backend` (CGI) on GIT_ROOT, with the
  client's Git-Protocol header passed on (protocol v2).
Prints "ready" once listening, and one line per request on stderr
("GET /path 200").
"""

import json
import os
import ssl
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    addr, port, cert, key, git_root, modules_json = sys.argv[1:7]
    with open(modules_json) as f:
        modules = json.load(f)
    exec_path = subprocess.check_output(["git", "--exec-path"], text=True).strip()
    backend = os.path.join(exec_path, "git-http-backend")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.route()

        def do_POST(self):
            self.route()

        def log_message(self, fmt, *args):
            pass

        def answer(self, status, headers, body):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            print(f"{self.command} {self.path} {status}", file=sys.stderr, flush=True)

        def json(self, value):
            body = json.dumps(value).encode()
            self.answer(200, [("Content-Type", "application/json")], body)

        def route(self):
            path, _, query = self.path.partition("?")
            if path == "/.well-known/terraform.json":
                return self.json({"modules.v1": "/v1/modules/"})
            if path.startswith("/v1/modules/"):
                parts = path[len("/v1/modules/"):].split("/")
                versions = modules.get("/".join(parts[:3]))
                if versions is not None and parts[3:] == ["versions"]:
                    listed = [{"version": v} for v in versions]
                    return self.json({"modules": [{"versions": listed}]})
                if versions is not None and len(parts) == 5 and parts[4] == "download":
                    source = versions.get(parts[3])
                    if source is not None:
                        return self.answer(204, [("X-Terraform-Get", source)], b"")
            if path.startswith("/git/"):
                return self.cgi(path[len("/git"):], query)
            self.answer(404, [("Content-Type", "application/json")],
                        b'{"errors":["not found"]}')

        def cgi(self, path_info, query):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": git_root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path_info,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_ADDR": self.client_address[0],
            }
            if self.headers.get("Git-Protocol"):
                env["HTTP_GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            out = subprocess.run([backend], input=body, env=env,
                                 capture_output=True).stdout
            sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
            head, _, rest = out.partition(sep)
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.answer(status, headers, rest)

    server = ThreadingHTTPServer((addr, int(port)), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
