//! The message stream the examples exchange with the C++ tools and the Go
//! examples (tests/bindings/exchange_test.py checks the same): message i is
//! "<i> " followed by i*7 % 120 copies of the letter 'a' + i % 26, so lengths
//! run from 2 to 125 bytes, above and below the 52 that fit one slot.

/// Writes message `i` into `out` (cleared first).
pub fn message(i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(format!("{} ", i).as_bytes());
    out.resize(out.len() + (i * 7 % 120) as usize, b'a' + (i % 26) as u8);
}

/// `--ring PATH --count N` from the command line.
pub fn flags(program: &str) -> (String, u64) {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|at| args.get(at + 1)).cloned();
    match (value("--ring"), value("--count").map(|c| c.parse::<u64>())) {
        (Some(ring), Some(Ok(count))) => (ring, count),
        _ => {
            eprintln!("usage: {} --ring PATH --count N", program);
            std::process::exit(2);
        }
    }
}
