"""A local OpenAI-compatible ``/v1/chat/completions`` endpoint for the extractor's benchmarks and tests (no model runs
offline): ``reply(request body)`` gives ``(delay_s, message content)``, or ``(delay_s, None)`` for an HTTP 500."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Reply = Callable[[dict], tuple[float, "str | None"]]


class ChatEndpoint:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                delay, content = owner.reply(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                time.sleep(delay)
                if content is None:
                    self.send_response(500)
                    self.end_headers()
                    return
                out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:   # the client timed out and hung up
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/chat/completions"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
