//! Raw Zenoh ping-pong between two processes, in Rust: a baseline of bench/scale.py.
//!
//!     zenoh-echo-rs echo LISTEN                 peer listening on LISTEN; puts every sample
//!                                               of bench/ping back unchanged on bench/pong
//!     zenoh-echo-rs ping CONNECT COUNT SIZE...  peer connecting to CONNECT; per SIZE: probes
//!                                               until the path is up, WARMUP pings, then COUNT
//!                                               pings one after the other; one JSON line per
//!                                               size: {"size": SIZE, "rtt_us": [...]}
//!
//! The same shape as baselines/zenoh_echo.py, so that the two differ only in the language
//! that holds the samples: peer to peer on an explicit endpoint, scouting off, shared memory
//! on (as zenoh-python's default), FIFO channel handlers read by the main thread, express
//! publishers with congestion control BLOCK.

use std::process::exit;
use std::time::{Duration, Instant};

use zenoh::handlers::FifoChannel;
use zenoh::qos::CongestionControl;
use zenoh::Wait;

const WARMUP: usize = 20;
const MATCH_TIMEOUT: Duration = Duration::from_secs(30);
const CHANNEL: usize = 1024;

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("zenoh-echo-rs: {what}: {e}");
    exit(1)
}

fn session(listen: &[&str], connect: &[&str]) -> zenoh::Session {
    let mut c = zenoh::Config::default();
    let quoted = |v: &[&str]| format!("{v:?}"); // Rust's Debug of &str is a JSON string
    let settings = [
        ("mode", "\"peer\"".to_string()),
        ("scouting/multicast/enabled", "false".to_string()),
        ("scouting/gossip/enabled", "false".to_string()),
        ("listen/endpoints", quoted(listen)),
        ("connect/endpoints", quoted(connect)),
        ("transport/shared_memory/enabled", "true".to_string()),
    ];
    for (key, value) in settings {
        c.insert_json5(key, &value).unwrap_or_else(|e| fail(key, e));
    }
    zenoh::open(c).wait().unwrap_or_else(|e| fail("open", e))
}

fn publisher<'a>(s: &'a zenoh::Session, key: &'a str) -> zenoh::pubsub::Publisher<'a> {
    s.declare_publisher(key)
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()
        .unwrap_or_else(|e| fail("declare_publisher", e))
}

type Subscriber =
    zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>;

fn subscriber(s: &zenoh::Session, key: &str) -> Subscriber {
    s.declare_subscriber(key)
        .with(FifoChannel::new(CHANNEL))
        .wait()
        .unwrap_or_else(|e| fail("declare_subscriber", e))
}

fn echo(listen: &str) {
    let s = session(&[listen], &[]);
    let pong = publisher(&s, "bench/pong");
    let sub = subscriber(&s, "bench/ping");
    println!("ready");
    while let Ok(sample) = sub.recv() {
        pong.put(sample.payload().clone())
            .wait()
            .unwrap_or_else(|e| fail("put", e));
    }
}

/// Probe until a reply comes back, then drop the replies to earlier probes.
fn wait_for_path(ping: &zenoh::pubsub::Publisher<'_>, sub: &Subscriber, payload: &[u8]) {
    let deadline = Instant::now() + MATCH_TIMEOUT;
    while Instant::now() < deadline {
        ping.put(payload.to_vec())
            .wait()
            .unwrap_or_else(|e| fail("put", e));
        if let Ok(Some(_)) = sub.recv_timeout(Duration::from_millis(100)) {
            std::thread::sleep(Duration::from_millis(200));
            while let Ok(Some(_)) = sub.try_recv() {}
            return;
        }
    }
    fail(
        "ping",
        format!("no echo within {} s", MATCH_TIMEOUT.as_secs()),
    )
}

fn ping(connect: &str, count: usize, sizes: &[usize]) {
    let s = session(&[], &[connect]);
    let out = publisher(&s, "bench/ping");
    let sub = subscriber(&s, "bench/pong");
    for &size in sizes {
        let payload = vec![0u8; size];
        wait_for_path(&out, &sub, &payload);
        let mut samples = Vec::with_capacity(count);
        for i in 0..WARMUP + count {
            // A fresh buffer per put, as zenoh-python copies its bytes into one.
            let t0 = Instant::now();
            out.put(payload.clone())
                .wait()
                .unwrap_or_else(|e| fail("put", e));
            sub.recv().unwrap_or_else(|e| fail("recv", e));
            if i >= WARMUP {
                samples.push(format!("{:.3}", t0.elapsed().as_secs_f64() * 1e6));
            }
        }
        println!("{{\"size\": {size}, \"rtt_us\": [{}]}}", samples.join(", "));
    }
    s.close().wait().unwrap_or_else(|e| fail("close", e));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |s: &str| s.parse::<usize>().unwrap_or_else(|e| fail(s, e));
    match args.get(1).map(String::as_str) {
        Some("echo") if args.len() == 3 => echo(&args[2]),
        Some("ping") if args.len() >= 5 => {
            let sizes: Vec<usize> = args[4..].iter().map(|s| number(s)).collect();
            ping(&args[2], number(&args[3]), &sizes)
        }
        _ => fail("usage", "echo LISTEN | ping CONNECT COUNT SIZE..."),
    }
}
