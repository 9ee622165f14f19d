//! Raw Zenoh ping-pong between two processes, in Rust: a baseline of bench/scale.py.
//!
//!     zenoh-echo-rs echo LISTEN                 peer listening on LISTEN; puts every sample
//!                                               of bench/ping back unchanged on bench/pong
//!     zenoh-echo-rs ping CONNECT COUNT SIZE...  peer connecting to CONNECT; per SIZE: probes
//!                                               until the path is up, WARMUP pings, then COUNT
//!                                               pings one after the other; one JSON line per
//!                                               size: {"size": SIZE, "rtt_us": [...]}
//!     zenoh-echo-rs ping --rate HZ CONNECT COUNT SIZE...
//!                                               the same, each ping (warm-up too) sent at
//!                                               start + i / HZ, or at once when its reply
//!                                               came later than that; the line also gives
//!                                               "rate_hz", the rate achieved
//!
//! The same shape as baselines/zenoh_echo.py, so that the two differ only in the language
//! that holds the samples: peer to peer on an explicit endpoint, scouting off, shared memory
//! on (as zenoh-python's default), FIFO channel handlers read by the main thread, express
//! publishers with congestion control BLOCK.
//!
//! Two more roles carry bench/throughput.py's one-way flood (the protocol of
//! baselines/flood.py, which documents it):
//!
//!     zenoh-echo-rs sub LISTEN    counts bench/flood samples; a "report" line on stdin
//!                                 prints the current step's counts as one JSON line
//!     zenoh-echo-rs pub CONNECT   per stdin line "STEP RATE COUNT SIZE MAX_S": COUNT
//!                                 samples of SIZE bytes paced at RATE per second (batched
//!                                 publisher, congestion control BLOCK), then one JSON line

use std::io::BufRead;
use std::process::exit;
use std::sync::{Arc, Mutex};
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

/// Sleep until `due`: the pacing of `ping --rate` (absolute deadlines, as flood_pub's).
fn wait_until(due: Instant) {
    let now = Instant::now();
    if due > now {
        std::thread::sleep(due - now);
    }
}

fn ping(connect: &str, count: usize, sizes: &[usize], rate: Option<f64>) {
    let s = session(&[], &[connect]);
    let out = publisher(&s, "bench/ping");
    let sub = subscriber(&s, "bench/pong");
    for &size in sizes {
        let payload = vec![0u8; size];
        wait_for_path(&out, &sub, &payload);
        let mut samples = Vec::with_capacity(count);
        let (start, mut last_sent) = (Instant::now(), Instant::now());
        for i in 0..WARMUP + count {
            if let Some(hz) = rate {
                wait_until(start + Duration::from_secs_f64(i as f64 / hz));
            }
            // A fresh buffer per put, as zenoh-python copies its bytes into one.
            let t0 = Instant::now();
            last_sent = t0;
            out.put(payload.clone())
                .wait()
                .unwrap_or_else(|e| fail("put", e));
            sub.recv().unwrap_or_else(|e| fail("recv", e));
            if i >= WARMUP {
                samples.push(format!("{:.3}", t0.elapsed().as_secs_f64() * 1e6));
            }
        }
        // Sends per second from the first to the last (warm-up included).
        let spans = (WARMUP + count - 1) as f64;
        let achieved = spans / (last_sent - start).as_secs_f64().max(1e-9);
        let paced = rate.map_or(String::new(), |_| format!(", \"rate_hz\": {achieved:.3}"));
        println!("{{\"size\": {size}, \"rtt_us\": [{}]{paced}}}", samples.join(", "));
    }
    s.close().wait().unwrap_or_else(|e| fail("close", e));
}

/// One flood step as the subscriber saw it (baselines/flood.py's `Tally`).
#[derive(Default)]
struct Tally {
    step: u64,
    received: u64,
    in_order: bool,
    stale: u64,
    first_ns: u128,
    last_ns: u128,
}

const AHEAD: Duration = Duration::from_millis(1);
const HEAD: usize = 18; // ASCII: 8 digits of step, 10 of sequence

fn header(payload: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(payload.get(..HEAD)?).ok()?;
    Some((text[..8].parse().ok()?, text[8..].parse().ok()?))
}

fn flood_sub(listen: &str) {
    let s = session(&[listen], &[]);
    let start = Instant::now();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let seen = tally.clone();
    let _sub = s
        .declare_subscriber("bench/flood")
        .callback(move |sample| {
            let now = start.elapsed().as_nanos();
            let Some((step, seq)) = header(&sample.payload().to_bytes()) else {
                return;
            };
            let mut t = seen.lock().unwrap();
            if step != t.step {
                if step < t.step {
                    t.stale += 1;
                    return;
                }
                *t = Tally { step, in_order: true, first_ns: now, ..Tally::default() };
            }
            if seq != t.received {
                t.in_order = false;
            }
            t.received += 1;
            t.last_ns = now;
        })
        .wait()
        .unwrap_or_else(|e| fail("declare_subscriber", e));
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        match line.as_deref() {
            Ok("report") => {
                let t = tally.lock().unwrap();
                println!(
                    "{{\"step\": {}, \"received\": {}, \"in_order\": {}, \"stale\": {}, \"first_ns\": {}, \"last_ns\": {}}}",
                    t.step, t.received, t.in_order, t.stale, t.first_ns, t.last_ns
                );
            }
            _ => break,
        }
    }
}

fn flood_pub(connect: &str) {
    let s = session(&[], &[connect]);
    let out = s
        .declare_publisher("bench/flood")
        .congestion_control(CongestionControl::Block)
        .wait()
        .unwrap_or_else(|e| fail("declare_publisher", e));
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let f: Vec<f64> = line
            .split_whitespace()
            .map(|v| v.parse().unwrap_or_else(|e| fail(v, e)))
            .collect();
        if f.len() != 5 {
            break;
        }
        let (step, rate, count, size) = (f[0] as u64, f[1], f[2] as u64, f[3] as usize);
        let max = Duration::from_secs_f64(f[4]);
        let mut payload = vec![b'x'; size.max(HEAD)];
        let t0 = Instant::now();
        let mut sent = 0u64;
        while sent < count && t0.elapsed() < max {
            // Absolute deadlines: message i leaves at t0 + i / rate, or up to AHEAD
            // earlier (a sleep shorter than that would oversleep: timer slack).
            let due = t0 + Duration::from_secs_f64(sent as f64 / rate);
            let now = Instant::now();
            if due > now + AHEAD {
                std::thread::sleep(due - now - AHEAD);
            }
            payload[..HEAD].copy_from_slice(format!("{step:08}{sent:010}").as_bytes());
            // A fresh buffer per put, as the Python publishers hand over a new bytes object.
            out.put(payload.clone()).wait().unwrap_or_else(|e| fail("put", e));
            sent += 1;
        }
        println!(
            "{{\"step\": {step}, \"sent\": {sent}, \"elapsed_s\": {:.6}}}",
            t0.elapsed().as_secs_f64()
        );
    }
    s.close().wait().unwrap_or_else(|e| fail("close", e));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |s: &str| s.parse::<usize>().unwrap_or_else(|e| fail(s, e));
    match args.get(1).map(String::as_str) {
        Some("echo") if args.len() == 3 => echo(&args[2]),
        Some("sub") if args.len() == 3 => flood_sub(&args[2]),
        Some("pub") if args.len() == 3 => flood_pub(&args[2]),
        Some("ping") if args.len() >= 7 && args[2] == "--rate" => {
            let hz: f64 = args[3].parse().unwrap_or_else(|e| fail(&args[3], e));
            if !(hz > 0.0 && hz.is_finite()) {
                fail("--rate", "a rate in Hz above 0");
            }
            let sizes: Vec<usize> = args[6..].iter().map(|s| number(s)).collect();
            ping(&args[4], number(&args[5]), &sizes, Some(hz))
        }
        Some("ping") if args.len() >= 5 => {
            let sizes: Vec<usize> = args[4..].iter().map(|s| number(s)).collect();
            ping(&args[2], number(&args[3]), &sizes, None)
        }
        _ => fail(
            "usage",
            "echo LISTEN | ping [--rate HZ] CONNECT COUNT SIZE... | sub LISTEN | pub CONNECT",
        ),
    }
}
