"""A scripted Anthropic Messages endpoint on loopback, for driving the real `claude` CLI in tests.

Each POST /v1/messages gets the next reply of the script (a JSON file the test writes), streamed as
server-sent events the way the real API streams them. Every request body is appended to a log so a
test can assert what the client sent (e.g. the selection context). Requests that carry no user turn
(title generation, quota checks) are answered with a short text and do not consume the script.

Script format: {"replies": [{"text": "..."} | {"tool_use": {"name": "...", "input": {...}}}]}
When the script is exhausted, the reply is the text "done". The script is re-read on every request, so a
test may extend it while the client runs. Each logged request says whether it was a main-conversation
turn ("main") and which script entry answered it ("reply_index", null once the script is exhausted).
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


class State:
    def __init__(self, script_path, log_path):
        self.script_path = script_path
        self.log_path = log_path
        self.index = 0
        self.counter = 0

    def next_reply(self):
        with LOCK:
            try:
                with open(self.script_path) as f:
                    replies = json.load(f).get("replies", [])
            except (OSError, ValueError):
                replies = []
            if self.index < len(replies):
                r = replies[self.index]
                self.index += 1
                return self.index - 1, r
            return None, {"text": "done"}

    def log(self, entry):
        with LOCK:
            with open(self.log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def stream_reply(reply, model, msg_id):
    out = [sse("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    if "tool_use" in reply:
        tu = reply["tool_use"]
        out.append(sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": tu.get("id", "toolu_" + msg_id), "name": tu["name"], "input": {}}}))
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(tu["input"])}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        stop = "tool_use"
    else:
        out.append(sse("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}))
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": reply.get("text", "ok")}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        stop = "end_turn"
    out.append(sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def is_main_turn(body):
    """The conversation request carries tools; side requests (titles, summaries) do not."""
    return bool(body.get("tools"))


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, code, ctype, body):
            self.send_response(code)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"no"}}')

        def do_HEAD(self):
            self._send(200, "text/plain", b"")

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            path = self.path.split("?")[0]
            main = is_main_turn(body) and path.endswith("/v1/messages")
            index, reply = state.next_reply() if main else (None, {"text": "Title"})
            state.log({"path": self.path, "main": main, "reply_index": index, "body": body})
            if path.endswith("/count_tokens"):
                self._send(200, "application/json", b'{"input_tokens": 10}')
                return
            if not path.endswith("/v1/messages"):
                self._send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"no"}}')
                return
            with LOCK:
                state.counter += 1
                msg_id = f"msg_{state.counter:04d}"
            model = body.get("model", "claude-test")
            if body.get("stream"):
                self._send(200, "text/event-stream", stream_reply(reply, model, msg_id))
            else:
                content = [{"type": "text", "text": reply.get("text", "ok")}]
                self._send(200, "application/json", json.dumps({
                    "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": content,
                    "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5}}).encode())

    return Handler


def main():
    port_file, script_path, log_path = sys.argv[1], sys.argv[2], sys.argv[3]
    state = State(script_path, log_path)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.replace(port_file + ".tmp", port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
