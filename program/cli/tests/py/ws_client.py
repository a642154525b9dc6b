"""A claude-like MCP client on the `websockets` library (someone else's WebSocket code).

Usage: ws_client.py PORT TOKEN FILE. Connects with the `mcp` subprotocol and the token header,
initializes, calls getWorkspaceFolders and openDiff on FILE, and prints one JSON line per result.
"""
import asyncio
import json
import sys

import websockets


async def main(port, token, path):
    headers = {"X-Claude-Code-Ide-Authorization": token}
    try:
        connect = websockets.connect(f"ws://127.0.0.1:{port}/", subprotocols=["mcp"],
                                     additional_headers=headers, open_timeout=5)
    except TypeError:
        connect = websockets.connect(f"ws://127.0.0.1:{port}/", subprotocols=["mcp"],
                                     extra_headers=headers, open_timeout=5)
    async with connect as ws:
        assert ws.subprotocol == "mcp", ws.subprotocol

        async def request(i, method, params):
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}))
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
                if msg.get("id") == i:
                    return msg

        init = await request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                               "clientInfo": {"name": "py", "version": "1"}})
        print(json.dumps({"initialize": init["result"]["protocolVersion"]}), flush=True)
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        r = await request(2, "tools/call", {"name": "getWorkspaceFolders", "arguments": {}})
        print(json.dumps({"folders": json.loads(r["result"]["content"][0]["text"])}), flush=True)
        r = await request(3, "tools/call", {"name": "openDiff", "arguments": {
            "old_file_path": path, "new_file_path": path, "new_file_contents": "from python\n",
            "tab_name": "py tab", "_meta": {"progressToken": 3}}})
        print(json.dumps({"openDiff": r["result"]}), flush=True)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
