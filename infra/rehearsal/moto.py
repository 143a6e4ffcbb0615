"""moto's server for the rehearsal: started here (detached, so `down` can
stop it later) or given by URL; IAM enforcement switched on with its first
free calls spent making the deployer."""

import os
import signal
import socket
import subprocess
import time
import urllib.request

import boto3
from botocore.config import Config

# The deployer is made by exactly these free calls: CreateUser,
# PutUserPolicy, CreateAccessKey. Every later request is signed and checked.
FREE_CALLS = 3
ADMIN_POLICY = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}'


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _up(url):
    try:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
            return True
    except OSError:
        return False


def start(server, log_path):
    """moto_server on a free port, in its own session; (url, pid)."""
    port = _free_port()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [server, "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not _up(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"moto_server did not start (see {log_path})")
        time.sleep(0.1)
    return url, proc.pid


def stop(pid):
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def post(url, path, body=b""):
    req = urllib.request.Request(f"{url}{path}", data=body, method="POST",
                                 headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read()


EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _sign_empty_body(request, **kwargs):
    """moto (5.2.5) recomputes a signature over the parsed request (headers
    and query as form data) when the body is empty, so every signed GET or
    DELETE of a REST service (Lambda's GetFunction, CloudFront's
    DescribeFunction, ...) is refused SignatureDoesNotMatch. A signed
    X-Amz-Content-SHA256 header is what both sides then hash instead."""
    if not request.body:
        request.headers["X-Amz-Content-SHA256"] = EMPTY_SHA256


def client(url, service, region, creds):
    c = boto3.client(
        service,
        endpoint_url=url,
        region_name=region,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        config=Config(retries={"max_attempts": 1}),
    )
    if service != "s3":
        c.meta.events.register("before-sign", _sign_empty_body)
    return c


def deployer(url, region, name):
    """IAM enforcement on (moto's reset-auth: FREE_CALLS unchecked requests,
    then every request is checked), spent on a user with an admin policy
    and its access key: the credentials everything else is done with."""
    post(url, "/moto-api/reset-auth", str(FREE_CALLS).encode())
    anyone = {"AccessKeyId": "rehearsal", "SecretAccessKey": "rehearsal"}
    iam = client(url, "iam", region, anyone)
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="admin", PolicyDocument=ADMIN_POLICY)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    creds = {"AccessKeyId": key["AccessKeyId"], "SecretAccessKey": key["SecretAccessKey"]}
    # Enforcement is on: an unsigned or unknown caller is refused now.
    try:
        client(url, "iam", region, anyone).list_users()
    except iam.exceptions.ClientError:
        pass
    else:
        raise SystemExit("moto did not enforce IAM after the free calls")
    return creds
