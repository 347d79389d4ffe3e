"""The process a benchmark serves the app in: the settings from the environment, the port
a socket the parent bound and passed down (`app.bench.load.served`). Its own module, so
that it imports no more before serving than `supportbot serve` does."""

import logging
import socket
import sys
from functools import partial

from app.api.starting import serve_while_loading, service_app
from app.observability.logs import FORMAT
from app.settings import Settings


def serve(listener_fd: int) -> None:
    # Warnings and errors only: a library's INFO line per model request would bury the
    # benchmark's own output.
    logging.basicConfig(format=FORMAT, level=logging.WARNING, force=True)
    listener = socket.socket(fileno=listener_fd)
    settings = Settings(_env_file=None)
    served = serve_while_loading(
        partial(service_app, settings),
        sockets=[listener],
        log_level="warning",
        timeout_graceful_shutdown=settings.api.shutdown_grace_seconds,  # as `serve` does
    )
    sys.exit(0 if served else 1)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
