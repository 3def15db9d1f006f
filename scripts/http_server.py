"""A small HTTP/1.1 server for a WSGI application on loopback: a thread for each connection.

scripts/moto-server.py served moto with waitress, which reads and parses every request in one
thread and hands it to a pool of others to answer, then back for the reply: more of a small
request's time than moto's own answer, once moto answered the data plane directly
(`scripts/bench-e2e --only emulator` measures the launcher whole). Every caller of the emulator
keeps its connections alive (the AWS SDK's pools, the tests' clients), so this server gives each
connection a thread that reads, answers and replies.

What it reads: a request line, headers (a name holding an underscore is dropped, as waitress drops
it, so that no header can pose as another), the environment's keys as waitress sets them (no
`RAW_URI`: moto then reads the path as waitress left it), and a body of `Content-Length` bytes or in chunks
(`Transfer-Encoding: chunked`), after a `100 Continue` when the client expects one. What it
writes: the status and headers the application gives, `Date` and `Via` (as waitress writes them),
and the body whole, with its `Content-Length` when the application gave none; none after `HEAD`.
The connection stays open unless the client or HTTP/1.0 closes it, or it is idle for
`IDLE_SECONDS`. An application that raises is answered `500` with the error, and the connection
is closed.
"""

import email.utils
import io
import socket
import sys
import threading
import time
import traceback
import urllib.parse

# How long a connection may sit idle between requests before it is closed (waitress's
# `channel_timeout`, as scripts/moto-server.py set it).
IDLE_SECONDS = 300
# The longest request line or header line read.
LINE_LIMIT = 65536


class BadRequest(Exception):
    """A request this server cannot read."""


class Server:
    """Serves `app` on `host`:`port` until the process ends."""

    def __init__(self, app, host, port, ident="Server"):
        self.app = app
        self.host = host
        self.port = port
        self.ident = ident
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.socket.listen(1024)
        self._date = (0, "")

    def run(self):
        while True:
            connection, address = self.socket.accept()
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(connection, address), daemon=True).start()

    def date(self):
        """The `Date` header's value, made once a second."""
        now = int(time.time())
        if self._date[0] != now:
            self._date = (now, email.utils.formatdate(now, usegmt=True))
        return self._date[1]

    def _serve(self, connection, address):
        connection.settimeout(IDLE_SECONDS)
        reader = connection.makefile("rb", buffering=65536)
        try:
            while self._one(connection, reader, address):
                pass
        except (OSError, BadRequest):
            pass
        finally:
            try:
                reader.close()
                connection.close()
            except OSError:
                pass

    def _one(self, connection, reader, address):
        """Answers one request; whether the connection stays open."""
        line = reader.readline(LINE_LIMIT + 1)
        if not line:
            return False
        if line in (b"\r\n", b"\n"):  # a blank line between requests is allowed
            line = reader.readline(LINE_LIMIT + 1)
            if not line:
                return False
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3 or len(line) > LINE_LIMIT:
            raise BadRequest(line[:200])
        method, target, protocol = parts
        headers = []
        while True:
            header = reader.readline(LINE_LIMIT + 1)
            if not header or len(header) > LINE_LIMIT:
                raise BadRequest("headers")
            if header in (b"\r\n", b"\n"):
                break
            name, colon, value = header.decode("latin-1").partition(":")
            if not colon:
                raise BadRequest(header[:200])
            headers.append((name.strip(), value.strip()))
        environ = self._environ(method, target, protocol, headers, address)
        if environ.get("HTTP_EXPECT", "").lower() == "100-continue":
            connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            body = self._chunks(reader)
            environ["CONTENT_LENGTH"] = str(len(body))
            del environ["HTTP_TRANSFER_ENCODING"]
        else:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = reader.read(length) if length else b""
            if len(body) != length:
                return False
        environ["wsgi.input"] = io.BytesIO(body)
        connection_header = environ.get("HTTP_CONNECTION", "").lower()
        keep = protocol == "HTTP/1.1" and "close" not in connection_header or "keep-alive" in connection_header
        answered = {}

        def start_response(status, response_headers, exc_info=None):
            if exc_info is not None and answered.get("sent"):
                raise exc_info[1].with_traceback(exc_info[2])
            answered["status"], answered["headers"] = status, response_headers

        try:
            result = self.app(environ, start_response)
            try:
                payload = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception:  # noqa: BLE001 - the application's error is answered, as waitress does
            text = traceback.format_exc()
            sys.stderr.write(text)
            answered = {"status": "500 Internal Server Error", "headers": [("Content-Type", "text/plain")]}
            payload = text.encode("utf-8", "replace")
            keep = False
        out = [f"HTTP/1.1 {answered['status']}\r\n"]
        has_length = False
        for name, value in answered["headers"]:
            lowered = name.lower()
            if lowered == "content-length":
                has_length = True
            elif lowered == "connection":
                keep = keep and value.lower() != "close"
            out.append(f"{name}: {value}\r\n")
        if not has_length:
            out.append(f"Content-Length: {len(payload)}\r\n")
        out.append(f"Date: {self.date()}\r\nVia: {self.ident}\r\n")
        if not keep:
            out.append("Connection: close\r\n")
        out.append("\r\n")
        head = "".join(out).encode("latin-1")
        connection.sendall(head if method == "HEAD" else head + payload)
        answered["sent"] = True
        return keep

    @staticmethod
    def _chunks(reader):
        """A chunked body, whole; trailers read and dropped."""
        body = bytearray()
        while True:
            size_line = reader.readline(LINE_LIMIT + 1)
            if not size_line:
                raise BadRequest("chunked body")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while reader.readline(LINE_LIMIT + 1) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(body)
            body += reader.read(size)
            reader.readline(LINE_LIMIT + 1)

    def _environ(self, method, target, protocol, headers, address):
        path, _, query = target.partition("?")
        if path.startswith(("http://", "https://")):  # an absolute form: its path alone
            path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
        environ = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query,
            "REQUEST_URI": target,
            "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port),
            "SERVER_PROTOCOL": protocol,
            "SERVER_SOFTWARE": "sidestream-http",
            "REMOTE_ADDR": address[0],
            "REMOTE_HOST": address[0],
            "REMOTE_PORT": str(address[1]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
        }
        for name, value in headers:
            if "_" in name:
                continue
            key = name.upper().replace("-", "_")
            if key == "CONTENT_TYPE" or key == "CONTENT_LENGTH":
                environ[key] = value
                continue
            key = "HTTP_" + key
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        return environ
