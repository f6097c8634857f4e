fn main() {
    use ranking_server::bus::decode::{Format, decode};
    let payload = br#"{"eventId":"bench-123456-7","productId":"734512","type":"EVENT_TYPE_ORDER","amount":12900,"occurredAt":"2026-12-04T09:30:00.123Z"}"#;
    let n = 300_000;
    let t = std::time::Instant::now();
    let mut ok = 0;
    for _ in 0..n {
        if decode(Format::Json, payload).is_ok() {
            ok += 1;
        }
    }
    let el = t.elapsed();
    println!("json: {:.2} us/record ({ok} ok)", el.as_secs_f64() * 1e6 / n as f64);
}
