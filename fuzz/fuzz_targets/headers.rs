//! Arbitrary UTF-8 into every parser of `a2a_core::headers`: none panics, and what parses formats back to something that
//! parses to the same value.
#![no_main]

use a2a_core::headers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(v) = headers::parse_version(s) {
        assert_eq!(headers::parse_version(&v.to_string()), Ok(v));
    }
    if let Ok(names) = headers::parse_capabilities(s) {
        let formatted = headers::format_capabilities(&names);
        assert_eq!(headers::parse_capabilities(&formatted).as_ref(), Ok(&names));
    }
    if let Ok(map) = headers::parse_region_map(s) {
        let formatted = headers::format_region_map(&map);
        assert_eq!(headers::parse_region_map(&formatted).as_ref(), Ok(&map));
    }
    if let Ok(region) = headers::parse_region(s) {
        assert_eq!(headers::parse_region(region), Ok(region));
    }
    for header in ["A2A-Negotiation-ID", "Idempotency-Key"] {
        if let Ok(token) = headers::parse_token(header, s) {
            assert_eq!(headers::parse_token(header, token), Ok(token));
        }
    }
});
