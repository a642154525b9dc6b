//! A plain WebSocket echo server on the core's ws layer (no token, no MCP), for the Autobahn
//! suite: `cargo run --release -p claude-ide-bridge-smol --example echo-smol -- 9001`.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Duration;

use async_io::{Async, Timer};
use futures_lite::{future, AsyncReadExt, AsyncWriteExt};

use claude_ide_bridge::ws::echo::EchoConnection;
use claude_ide_bridge::Limits;

async fn serve(mut stream: Async<TcpStream>) -> std::io::Result<()> {
    let mut conn = EchoConnection::new(&Limits::conformance());
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        conn.handle_input(&buf[..n]);
        while !conn.transmit().is_empty() {
            let written = stream.write(conn.transmit()).await?;
            conn.advance_transmit(written);
        }
        if conn.should_close() {
            // Half-close, then let the peer's remaining bytes and FIN arrive (no RST).
            stream.get_ref().shutdown(Shutdown::Write)?;
            let drain = async { while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {} };
            future::or(drain, async {
                Timer::after(Duration::from_secs(2)).await;
            })
            .await;
            return Ok(());
        }
    }
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(9001);
    smol::block_on(async {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], port))?;
        println!(
            "echo-smol listening on ws://{}",
            listener.get_ref().local_addr()?
        );
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.get_ref().set_nodelay(true);
            smol::spawn(serve(stream)).detach();
        }
    })
}
