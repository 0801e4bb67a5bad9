"""tornado's HTTPServer that can drain: it knows which connections have a request between its
first header line and its answer, so a shutdown answers every request already sent (none
dropped) before closing connections.

It also refuses a body larger than --rest_api_max_body_bytes with 413 and closes the
connection: from its Content-Length header alone, before any of the body is read; or, for a
chunked body (no length up front), as soon as the bytes received pass the limit."""
import asyncio
import json
import time

import tornado.httpserver
import tornado.httputil

ACCEPT_SETTLE_S = 0.05   # lets connections already in the listen backlog be accepted
QUIET_S = 0.2            # a just-accepted connection's request headers arrive within this


class _BusyOnHeaders(tornado.httputil.HTTPMessageDelegate):
    def __init__(self, delegate, on_headers, request_conn, max_body_bytes, on_refused):
        self._delegate = delegate
        self._on_headers = on_headers
        self._request_conn = request_conn
        self._max_body_bytes = max_body_bytes
        self._on_refused = on_refused
        self._received = 0

    def headers_received(self, start_line, headers):
        self._on_headers()
        length = headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self._max_body_bytes:
            return self._refuse_from_length(int(length))
        if "Transfer-Encoding" in headers and "Content-Length" not in headers:
            # tornado would answer a bare 400 at a chunk header that passes its limit;
            # data_received counts the body instead and answers 413.
            self._request_conn.set_max_body_size(2 ** 63)
        return self._delegate.headers_received(start_line, headers)

    def _refuse_from_length(self, length: int):
        """Answers 413 on the raw stream and closes it: tornado stops reading this
        connection once it is detached, so the body is never buffered."""
        body = _too_large(f"{length} bytes", self._max_body_bytes)
        stream = self._request_conn.detach()
        self._on_refused()
        head = (b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        stream.write(head + body).add_done_callback(lambda _: stream.close())

    def _refuse_received(self):
        """Answers 413 while the body is still arriving: tornado then passes no more of it on
        and closes the connection once the answer is sent."""
        body = _too_large(f"at least {self._received} bytes", self._max_body_bytes)
        self._on_refused()
        self._request_conn.write_headers(
            tornado.httputil.ResponseStartLine("HTTP/1.1", 413, "Payload Too Large"),
            tornado.httputil.HTTPHeaders({"Content-Type": "application/json", "Connection": "close",
                                          "Content-Length": str(len(body))}), body)
        self._request_conn.finish()

    def data_received(self, chunk):
        self._received += len(chunk)
        if self._received > self._max_body_bytes:
            return self._refuse_received()
        return self._delegate.data_received(chunk)

    def finish(self):
        return self._delegate.finish()

    def on_connection_close(self):
        return self._delegate.on_connection_close()


def _too_large(size: str, limit: int) -> bytes:
    return json.dumps({"error": f"the request body has {size}, more than the limit of {limit} "
                                "(--rest_api_max_body_bytes)"}).encode()


class DrainingHTTPServer(tornado.httpserver.HTTPServer):
    def initialize(self, *args, max_body_size=None, **kwargs):
        super().initialize(*args, max_body_size=max_body_size, **kwargs)
        self._max_body_bytes = max_body_size or 2 ** 63
        self._busy = set()            # server connections with a request being handled
        self._last_activity = 0.0     # monotonic time of the last accept or request start

    def handle_stream(self, stream, address):
        self._last_activity = time.monotonic()
        super().handle_stream(stream, address)

    def start_request(self, server_conn, request_conn):
        # tornado asks for the next request's delegate only after the previous answer was
        # sent: the connection is idle until the new request's headers arrive.
        self._busy.discard(server_conn)

        def busy():
            self._busy.add(server_conn)
            self._last_activity = time.monotonic()
        return _BusyOnHeaders(super().start_request(server_conn, request_conn), busy,
                              request_conn, self._max_body_bytes,
                              lambda: self._busy.discard(server_conn))

    def on_close(self, server_conn):
        self._busy.discard(server_conn)
        super().on_close(server_conn)

    @property
    def requests_in_flight(self) -> int:
        return len(self._busy)

    async def drain(self, grace_s: float) -> None:
        """Stops accepting, waits until no request is in flight and none has started for
        QUIET_S (at most grace_s), then closes every connection."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        await asyncio.sleep(ACCEPT_SETTLE_S)
        self.stop()
        while loop.time() < deadline and (
                self._busy or time.monotonic() - self._last_activity < QUIET_S):
            await asyncio.sleep(0.01)
        await self.close_all_connections()
