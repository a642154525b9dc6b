"""A client written with Python `websockets` (someone else's WebSocket implementation), for the
runtimes' socket tests. Usage: ws_peer.py PORT TOKEN

Connects offering the `mcp` subprotocol with the token header, runs the MCP lifecycle, calls
getWorkspaceFolders (answered by the Rust host) and openDiff (answered later), sends a ping, and
prints one JSON line with what it saw. A wrong token must be refused with HTTP 401.
"""
import asyncio
import json
import sys

import websockets


async def main(port, token):
    url = f"ws://127.0.0.1:{port}/"
    seen = {}
    try:
        async with websockets.connect(url, subprotocols=["mcp"],
                                      additional_headers={"X-Claude-Code-Ide-Authorization": "wrong"}):
            seen["wrong_token"] = "accepted"
    except websockets.exceptions.InvalidStatus as e:
        seen["wrong_token"] = e.response.status_code

    async with websockets.connect(url, subprotocols=["mcp"], max_size=None,
                                  additional_headers={"X-Claude-Code-Ide-Authorization": token}) as ws:
        seen["subprotocol"] = ws.subprotocol

        async def call(id_, method, params):
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))

        async def recv():
            return json.loads(await asyncio.wait_for(ws.recv(), 10))

        await call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "python-websockets", "version": websockets.__version__}})
        seen["initialize"] = (await recv())["result"]["protocolVersion"]
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await call(2, "tools/list", {})
        seen["tools"] = len((await recv())["result"]["tools"])
        await call(3, "tools/call", {"name": "openDiff", "arguments": {
            "old_file_path": "/w/a.py", "new_file_path": "/w/a.py", "new_file_contents": "print('ü')\n" * 1000,
            "tab_name": "tab"}, "_meta": {"progressToken": 3}})
        await call(4, "tools/call", {"name": "getWorkspaceFolders", "arguments": {}})
        first = await recv()
        second = await recv()
        seen["order"] = [first["id"], second["id"]]
        seen["diff"] = [c["text"][:20] for c in second["result"]["content"]]
        pong = await ws.ping(b"keepalive")
        await asyncio.wait_for(pong, 10)
        seen["pong"] = True
    seen["close_code"] = ws.close_code
    print(json.dumps(seen), flush=True)


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
