"""An OTLP/HTTP trace receiver and a webhook receiver, for lev's tests.

Listens on 127.0.0.1 (a free port, printed as the first line of stdout).
POST /v1/traces: the body is decoded as opentelemetry-proto's
ExportTraceServiceRequest (the real protobuf); each span is printed as one
JSON line {"span": {...}} with its ids in hex, its parent, name, kind,
attributes and the resource's service.name. POST /hook (a webhook): its
traceparent header is printed as {"webhook": {"traceparent": ...,
"type": ...}}. Every other request gets 404. Runs until stdin closes.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

lock = threading.Lock()


def emit(obj: dict) -> None:
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def value(v) -> object:
    which = v.WhichOneof("value")
    return getattr(v, which) if which else None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        if self.path == "/v1/traces":
            if self.headers.get("content-type") != "application/x-protobuf":
                self.send_response(415)
                self.end_headers()
                return
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            for rs in req.resource_spans:
                resource = {kv.key: value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        emit(
                            {
                                "span": {
                                    "trace_id": s.trace_id.hex(),
                                    "span_id": s.span_id.hex(),
                                    "parent_span_id": s.parent_span_id.hex(),
                                    "name": s.name,
                                    "kind": s.kind,
                                    "start": s.start_time_unix_nano,
                                    "end": s.end_time_unix_nano,
                                    "attributes": {kv.key: value(kv.value) for kv in s.attributes},
                                    "service": resource.get("service.name"),
                                    "scope": ss.scope.name,
                                    "auth": self.headers.get("x-otlp-key"),
                                }
                            }
                        )
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.end_headers()
            return
        if self.path == "/hook":
            kind = json.loads(body).get("type")
            emit({"webhook": {"traceparent": self.headers.get("traceparent"), "type": kind}})
            self.send_response(204)
            self.end_headers()
            return
        self.send_response(404)
        self.end_headers()


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    emit({"port": server.server_address[1]})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
