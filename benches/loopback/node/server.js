// Reference server for the loopback benchmark: the same MCP answers on Node's `ws` (the stack of the
// VS Code and Obsidian integrations). Prints its port on stdout, then serves until stdin closes.
//   node server.js TOKEN
'use strict';
const { WebSocketServer } = require('ws');

const token = process.argv[2] || '';
const wss = new WebSocketServer({
  host: '127.0.0.1',
  port: 0,
  handleProtocols: (protocols) => (protocols.has('mcp') ? 'mcp' : false),
  verifyClient: (info) => info.req.headers['x-claude-code-ide-authorization'] === token,
});

function selectionChanged() {
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'selection_changed',
    params: {
      text: 'fn main() {}',
      filePath: '/home/me/project/src/main.rs',
      fileUrl: 'file:///home/me/project/src/main.rs',
      selection: { start: { line: 1, character: 0 }, end: { line: 1, character: 12 }, isEmpty: false },
    },
  });
}

// Push `count` notifications, keeping at most about 1 MiB queued (the Rust hosts keep a window too).
function push(ws, count) {
  let sent = 0;
  const step = () => {
    while (sent < count && ws.bufferedAmount < 1 << 20) {
      ws.send(selectionChanged());
      sent++;
    }
    if (sent < count) setImmediate(step);
  };
  step();
}

wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    let msg;
    try {
      msg = JSON.parse(data.toString('utf8'));
    } catch (e) {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } }));
      return;
    }
    const reply = (result) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
    switch (msg.method) {
      case 'initialize':
        reply({
          protocolVersion: msg.params.protocolVersion,
          capabilities: { tools: { listChanged: true } },
          serverInfo: { name: 'node-ws-reference', version: '0.0.0' },
        });
        break;
      case 'notifications/initialized':
        break;
      case 'tools/call':
        if (msg.params && msg.params.name === 'getDiagnostics') {
          reply({ content: [{ type: 'text', text: '[]' }] });
        } else {
          ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32602, message: 'unknown tool' } }));
        }
        break;
      case 'bench/push':
        push(ws, msg.params.count);
        break;
      default:
        if (msg.id !== undefined) {
          ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'method not found' } }));
        }
    }
  });
});

wss.on('listening', () => {
  process.stdout.write(`${wss.address().port}\n`);
});

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
