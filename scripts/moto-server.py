"""moto's server, with every DynamoDB and DynamoDB Streams request handled one at a time.

moto's DynamoDB backend is not atomic the way DynamoDB is: `update_item` reads an item and
mutates it in place with no lock, and for a missing item puts an empty item first and then
updates it, so two concurrent `ADD`s to one item can lose one of them, and a stream read can see
half an update. DynamoDB makes every single-item operation atomic. moto's server answers each
connection on its own thread, so this launcher runs the same application as `moto_server` behind
one lock for DynamoDB requests (their `X-Amz-Target` starts with `DynamoDB`); S3 and the other
services stay concurrent. Arguments are `moto_server`'s (-H HOST -p PORT).
"""

import argparse
import os
import threading

from werkzeug.serving import run_simple

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


def serialized(app, lock):
    """A WSGI application that runs DynamoDB requests under `lock`, to their last byte."""

    def application(environ, start_response):
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
            return app(environ, start_response)
        with lock:
            response = app(environ, start_response)
            try:
                return [b"".join(response)]
            finally:
                close = getattr(response, "close", None)
                if close is not None:
                    close()

    return application


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    run_simple(
        args.host,
        args.port,
        serialized(app, threading.Lock()),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
