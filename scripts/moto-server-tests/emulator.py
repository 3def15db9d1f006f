"""One emulator (scripts/moto-server.py) for a test file: started on a free loopback port as
scripts/moto starts it, or the one scripts/moto started (SIDESTREAM_MOTO_ENDPOINT set)."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import boto3
from botocore.config import Config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REGION = "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """One moto-server.py, started as scripts/moto starts it, or the one scripts/moto started."""

    def __init__(self, env=None):
        """`env`, if given, is added to the environment of an emulator this starts (and one
        scripts/moto started is not used)."""
        self.process = None
        self.log = None
        self.endpoint = None if env else os.environ.get("SIDESTREAM_MOTO_ENDPOINT")
        if self.endpoint:
            return
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.log = tempfile.NamedTemporaryFile(prefix="moto-test-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "scripts", "moto-server.py"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, SIDESTREAM_MOTO_PROFILE="", **(env or {})),
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1)
                return
            except Exception:  # noqa: BLE001 - not listening yet
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop(keep_log=True)
                    raise RuntimeError(f"moto-server.py did not start; see {self.log.name}")
                time.sleep(0.05)

    def control(self, target, body):
        """A `SidestreamControl.*` request's answer."""
        request = urllib.request.Request(
            self.endpoint + "/",
            data=json.dumps(body).encode(),
            headers={"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.0"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def stop(self, keep_log=False):
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self.log is not None:
            self.log.close()
            if not keep_log:
                os.unlink(self.log.name)
            self.log = None




def client(endpoint, service="dynamodb"):
    """A client of `endpoint` that sends each call once (the assertions count requests)."""
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
