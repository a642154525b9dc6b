//! A plain WebSocket echo server on the core's ws layer (no token, no MCP), for the Autobahn
//! suite: `cargo run --release -p claude-ide-bridge-blocking --example echo-blocking -- 9001`.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Duration;

use claude_ide_bridge::ws::echo::EchoConnection;
use claude_ide_bridge::Limits;

fn serve(mut stream: TcpStream) -> std::io::Result<()> {
    let mut conn = EchoConnection::new(&Limits::conformance());
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        conn.handle_input(&buf[..n]);
        while !conn.transmit().is_empty() {
            let written = stream.write(conn.transmit())?;
            conn.advance_transmit(written);
        }
        if conn.should_close() {
            // Half-close, then let the peer's remaining bytes and FIN arrive (no RST).
            stream.shutdown(Shutdown::Write)?;
            stream.set_read_timeout(Some(Duration::from_secs(2)))?;
            while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            return Ok(());
        }
    }
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(9001);
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    println!("echo-blocking listening on ws://{}", listener.local_addr()?);
    for stream in listener.incoming() {
        let stream = stream?;
        let _ = stream.set_nodelay(true);
        std::thread::spawn(move || serve(stream));
    }
    Ok(())
}
