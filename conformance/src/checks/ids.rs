//! Execution ids seen from outside: their random suffix is random (EID-5), and `Location` encodes them as one path
//! segment (EID-11, EXE-4) when there is something to encode (a sender DID with a port).

use a2a_core::execution_id::ExecutionId;
use serde_json::Value;

use super::applies::MAIN;
use super::{main_plan, negotiate_body, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::{CallerAuth, CapPlan};

/// How many ids the randomness check draws.
const SAMPLES: usize = 32;

/// A sender DID with a port (`%3A` in the DID, `%253A` in a path segment), for unsigned requests.
pub(crate) const SENDER_WITH_PORT: &str = "did:web:localhost%3A8443:conformance";

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "execute/id-randomness",
            ["EID-5"],
            Must,
            MAIN,
            "the suffixes of 32 execution ids look random: about half their 128 bits set, consecutive ids about 64 bits apart, no bit position the same in all (a counter, a clock or a fixed pattern fails)",
            id_randomness
        ),
        check!(
            "execute/location-encoded",
            ["EID-11", "EXE-4"],
            Must,
            MAIN,
            "EXECUTE as a sender whose DID has a port: Location is /a2a/result/ followed by the id with every byte outside A-Z a-z 0-9 - . _ ~ : percent-encoded (% as %25), and GET of that Location answers the execution",
            location_encoded
        ),
    ]
}

/// The 128 random bits of a base32 suffix (26 characters of `a-z 2-7`; the last 2 bits are padding).
pub(crate) fn suffix_bits(suffix: &str) -> Option<[u8; 16]> {
    if suffix.len() != 26 {
        return None;
    }
    let mut acc: u128 = 0;
    let mut bits = 0u32;
    let mut out = [0u8; 16];
    let mut n = 0;
    for c in suffix.bytes() {
        let v = match c {
            b'a'..=b'z' => c - b'a',
            b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        acc = (acc << 5) | u128::from(v);
        bits += 5;
        while bits >= 8 && n < 16 {
            bits -= 8;
            out[n] = (acc >> bits) as u8;
            n += 1;
        }
        acc &= (1u128 << bits) - 1;
    }
    Some(out)
}

/// What is wrong with a sample of suffixes as random 128-bit values, if anything.
pub(crate) fn randomness_faults(samples: &[[u8; 16]]) -> Vec<String> {
    let mut faults = Vec::new();
    let n = samples.len();
    if n < 8 {
        return vec![format!("only {n} ids")];
    }
    let ones: u32 = samples.iter().flat_map(|s| s.iter()).map(|b| b.count_ones()).sum();
    let total = (n * 128) as f64;
    let share = f64::from(ones) / total;
    // Binomial(n*128, 1/2): for 32 ids the standard deviation is 0.8 %; 40-60 % is more than 12 of them.
    if !(0.40..=0.60).contains(&share) {
        faults.push(format!("{:.1} % of the bits are set (random: 50 %)", share * 100.0));
    }
    let distances: Vec<u32> =
        samples.windows(2).map(|w| w[0].iter().zip(w[1].iter()).map(|(a, b)| (a ^ b).count_ones()).sum()).collect();
    let mean = f64::from(distances.iter().sum::<u32>()) / distances.len() as f64;
    // Random: 64 bits apart on average, a standard deviation of about 1 for the mean of 31 pairs.
    if mean < 48.0 {
        faults
            .push(format!("consecutive ids are {mean:.1} bits apart on average (random: 64); distances {distances:?}"));
    }
    let constant: Vec<usize> = (0..128)
        .filter(|&bit| {
            let of = |s: &[u8; 16]| (s[bit / 8] >> (7 - bit % 8)) & 1;
            samples.iter().all(|s| of(s) == of(&samples[0]))
        })
        .collect();
    // Random: a given bit is the same in 32 ids with probability 2^-31.
    if !constant.is_empty() {
        faults.push(format!("{} bit positions are the same in every id: {constant:?}", constant.len()));
    }
    let distinct: std::collections::HashSet<&[u8; 16]> = samples.iter().collect();
    if distinct.len() != n {
        faults.push(format!("{} distinct suffixes among {n}", distinct.len()));
    }
    faults
}

async fn id_randomness(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    let mut ids = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let r = t
            .setup(format!("EXECUTE #{} (preparation)", i + 1), super::execute_req(t, &plan, &neg.id, &plan.payload))
            .await?;
        let id = r.json().and_then(|b| b["execution_id"].as_str().map(str::to_owned));
        t.require(r.status == 201 && id.is_some(), "201 with an execution_id", r.summary())?;
        ids.push(id.unwrap_or_default());
    }
    t.step(format!("the suffixes of {SAMPLES} execution ids"));
    let mut samples = Vec::with_capacity(ids.len());
    for id in &ids {
        let parsed = ExecutionId::parse(id).ok().and_then(|e| suffix_bits(e.suffix()));
        if !t.check(parsed.is_some(), "an id whose suffix is 26 characters of base32 (EID-1)", id.clone()) {
            return Err(Stop::Failed);
        }
        samples.extend(parsed);
    }
    // The sampled executions are never confirmed; an agent that offers CANCEL gets them canceled at once, so that they
    // do not count against a limit on executions waiting for CONFIRM while the rest of the run goes on.
    if t.ctx.disc.has_feature("cancel") {
        for id in &ids {
            let req = t.ctx.for_cap(&plan, "POST", "/cancel").json(&super::execution_ref(id));
            t.setup("CANCEL a sampled execution (clean-up)", req).await?;
        }
        t.step(format!("the suffixes of {SAMPLES} execution ids"));
    }
    let faults = randomness_faults(&samples);
    let suffixes: Vec<&str> = ids.iter().map(|i| i.rsplit('_').next().unwrap_or("")).collect();
    t.check(
        faults.is_empty(),
        "suffixes of 128 random bits each (EID-5: from the operating system's CSPRNG)",
        if faults.is_empty() {
            "random-looking".to_owned()
        } else {
            format!("{}; suffixes {suffixes:?}", faults.join("; "))
        },
    );
    Ok(())
}

/// An id as one RFC 3986 path segment: every byte outside `A-Z a-z 0-9 - . _ ~ :` percent-encoded with upper-case
/// hex (EID-11). Written out here rather than taken from `a2a-core`, so that the suite checks the rule itself.
pub(crate) fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 8);
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The plan with a sender DID that has a port, or why there is none.
fn with_port_sender(plan: &CapPlan) -> Result<String, Stop> {
    match &plan.auth {
        CallerAuth::Signed(id) if id.did.contains("%3A") => Ok(id.did.clone()),
        CallerAuth::Signed(id) => Err(Stop::Skip(format!(
            "the capability the suite drives needs signed requests, and the caller {} has no port in its DID: nothing to encode (use --serve-did)",
            id.did
        ))),
        _ => Ok(SENDER_WITH_PORT.to_owned()),
    }
}

async fn location_encoded(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let sender = with_port_sender(&plan)?;
    let req = t
        .ctx
        .for_cap(&plan, "POST", "/negotiate")
        .set("A2A-Sender-ID", sender.clone())
        .json(&negotiate_body(&plan.decl.name, &plan.decl.input_schema));
    let r = t.setup(format!("NEGOTIATE {} as {sender} (preparation)", plan.decl.name), req).await?;
    let neg = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned));
    t.require(r.status == 200 && neg.is_some(), "200 with a negotiation_id", r.summary())?;
    let req =
        super::execute_req(t, &plan, &neg.unwrap_or_default(), &plan.payload).set("A2A-Sender-ID", sender.clone());
    let r = t.send(format!("EXECUTE as {sender}"), req).await?;
    let body = r.json().unwrap_or(Value::Null);
    let Some(id) = body["execution_id"].as_str().map(str::to_owned) else {
        t.check(false, "201 with an execution_id", r.summary());
        return Err(Stop::Failed);
    };
    t.expect_status(&r, 201);
    let base_path =
        url::Url::parse(&t.ctx.endpoint).map(|u| u.path().trim_end_matches('/').to_owned()).unwrap_or_default();
    let want = format!("{base_path}/result/{}", path_segment(&id));
    let loc = r.header("location").unwrap_or("").to_owned();
    let loc_path = url::Url::parse(&t.ctx.endpoint)
        .and_then(|u| u.join(&loc))
        .map(|u| u.path().to_owned())
        .unwrap_or_else(|_| loc.clone());
    t.check(
        loc_path == want,
        format!("Location: {want} (the id {id} as one path segment, % encoded as %25)"),
        format!("{loc:?}"),
    );
    let url = url::Url::parse(&t.ctx.endpoint).and_then(|u| u.join(&loc)).map(|u| u.to_string()).unwrap_or_default();
    if url.is_empty() || loc.is_empty() {
        return Ok(());
    }
    let mut req = t.ctx.for_cap(&plan, "GET", "").set("A2A-Sender-ID", sender);
    req.url = url;
    let r = t.send("GET the Location", req).await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && b["execution_id"] == id.as_str(),
        format!("200 with execution_id {id}"),
        format!("{} {}", r.summary(), show(&b["execution_id"])),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_suffixes_pass_and_counters_fail() {
        let random: Vec<[u8; 16]> = (0..32)
            .map(|_| {
                let mut b = [0u8; 16];
                getrandom::fill(&mut b).expect("random");
                b
            })
            .collect();
        assert_eq!(randomness_faults(&random), Vec::<String>::new());
        let counter: Vec<[u8; 16]> = (0u128..32).map(|i| (i + 1_000_000).to_be_bytes()).collect();
        assert!(!randomness_faults(&counter).is_empty());
        let masked: Vec<[u8; 16]> =
            (0u128..32).map(|i| (i ^ 0x5a5a_5a5a_5a5a_5a5a_5a5a_5a5a_5a5a_5a5a).to_be_bytes()).collect();
        assert!(!randomness_faults(&masked).is_empty());
    }

    #[test]
    fn suffix_bits_reads_base32() {
        let id = ExecutionId::from_parts(&a2a_core::did::Did::parse("did:web:a.example").expect("did"), 1, [0xab; 16]);
        assert_eq!(suffix_bits(id.suffix()), Some([0xab; 16]));
    }

    #[test]
    fn path_segments_encode_percent_only_for_valid_ids() {
        assert_eq!(path_segment("did:web:localhost%3A8443_1_abc"), "did:web:localhost%253A8443_1_abc");
        assert_eq!(path_segment("a b/c"), "a%20b%2Fc");
    }
}
