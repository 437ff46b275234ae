//! Arbitrary bytes as an approval envelope, a trusted key set, and a signed
//! payload: nothing may panic. Run: `cargo +nightly fuzz run envelope`.

#![no_main]

#[path = "../body/envelope.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    body::run(data);
});
