//! NEGOTIATE and EXECUTE costs of the schema machinery: `tighten` + `AgreedSchema::compile` of a realistic proposal
//! (15 properties), `check` of it, and `validate` of a ~1 KiB valid payload.
//!
//! Run with: `cargo bench -p a2a-core --bench negotiation`

use std::hint::black_box;

use a2a_core::negotiation::{AgreedSchema, tighten};
use a2a_core::schema_rules::check;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

/// What a caller proposes: an incident report with 15 properties.
fn proposal() -> Value {
    json!({
        "type": "object",
        "required": ["title", "severity", "reporter_email"],
        "properties": {
            "title": {"type": "string", "maxLength": 200},
            "description": {"type": "string", "maxLength": 4000},
            "severity": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
            "reporter_email": {"type": "string"},
            "reporter_name": {"type": ["string", "null"]},
            "building": {"type": "string"},
            "floor": {"type": "number", "multipleOf": 1},
            "elevator_id": {"type": "string", "pattern": "^EL-[0-9]{3}$"},
            "occurred_at": {"type": "string", "format": "date-time"},
            "passengers_trapped": {"type": "boolean"},
            "estimated_downtime_min": {"type": "number", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 20},
            "location": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat", "lon"]},
            "contact_phone": {"type": ["string", "null"], "pattern": "^\\+[0-9]{6,15}$"},
            "ticket_ref": {"type": ["string", "null"], "maxLength": 64}
        }
    })
}

/// What the capability requires: tighter in several places, plus a timestamp (the seed's example).
fn capability() -> Value {
    json!({
        "type": "object",
        "required": ["title", "severity", "reporter_email", "timestamp", "building"],
        "additionalProperties": false,
        "properties": {
            "title": {"type": "string", "minLength": 3, "maxLength": 120},
            "description": {"type": "string"},
            "severity": {"type": "string", "enum": ["critical", "high", "medium", "low"]},
            "reporter_email": {"type": "string", "format": "email"},
            "reporter_name": {"type": "string"},
            "building": {"type": "string", "minLength": 1},
            "floor": {"type": "number", "multipleOf": 1, "minimum": -5, "maximum": 200},
            "elevator_id": {"type": "string", "pattern": "^EL-[0-9]{3}$"},
            "occurred_at": {"type": "string", "format": "date-time"},
            "passengers_trapped": {"type": "boolean"},
            "estimated_downtime_min": {"type": "number", "minimum": 0, "maximum": 10080},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "location": {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90}, "lon": {"type": "number", "minimum": -180, "maximum": 180}}},
            "contact_phone": {"type": ["string", "null"]},
            "ticket_ref": {"type": ["string", "null"]},
            "timestamp": {"type": "string", "format": "date-time"}
        }
    })
}

/// A valid payload of about 1 KiB.
fn payload() -> Value {
    json!({
        "title": "Elevator 3 stopped between floors 7 and 8",
        "description": "At 21:00 the car stopped with the doors closed. The intercom works; the occupants are calm. Maintenance was called and the building manager was informed. The alarm panel shows fault code E-217 (door zone sensor). Previous incident on the same car two weeks ago; the contractor replaced the sensor cable then. Please dispatch a technician with a spare door zone sensor and the service key for the machine room on the roof.",
        "severity": "high",
        "reporter_email": "facility.desk@example.com",
        "reporter_name": "Ana Lima",
        "building": "HQ Tower B",
        "floor": 7,
        "elevator_id": "EL-003",
        "occurred_at": "2026-11-29T21:00:00Z",
        "passengers_trapped": true,
        "estimated_downtime_min": 90,
        "tags": ["elevator", "entrapment", "door-sensor", "tower-b", "after-hours", "repeat-fault"],
        "location": {"lat": 52.520008, "lon": 13.404954},
        "contact_phone": "+4930123456789",
        "ticket_ref": "INC-2026-11-29-0042",
        "timestamp": "2026-11-29T21:03:12.123Z"
    })
}

fn benches(c: &mut Criterion) {
    let (p, cap, body) = (proposal(), capability(), payload());
    let agreed = tighten(&p, &cap).unwrap_or_else(|e| panic!("the bench schemas must agree: {e:?}"));
    let validator = AgreedSchema::compile(&agreed.agreed_schema).unwrap_or_else(|e| panic!("{e}"));
    assert!(validator.validate(&body).is_ok(), "the bench payload must be valid");
    let size = body.to_string().len();
    assert!((900..=1300).contains(&size), "the bench payload is {size} bytes, not about 1 KiB");

    c.bench_function("check/15_properties", |b| b.iter(|| check(black_box(&p))));
    c.bench_function("tighten/15_properties", |b| b.iter(|| tighten(black_box(&p), black_box(&cap))));
    c.bench_function("tighten_and_compile/15_properties", |b| {
        b.iter(|| {
            let a = tighten(black_box(&p), black_box(&cap)).ok();
            a.and_then(|a| AgreedSchema::compile(&a.agreed_schema).ok())
        })
    });
    c.bench_function("validate/1KiB_valid_payload", |b| b.iter(|| validator.validate(black_box(&body))));
    let mut bad = body.clone();
    if let Some(o) = bad.as_object_mut() {
        o.insert("reporter_email".into(), json!("not-an-email"));
        o.insert("floor".into(), json!(7.5));
    }
    c.bench_function("validate/1KiB_invalid_payload_2_errors", |b| b.iter(|| validator.validate(black_box(&bad))));
}

criterion_group!(negotiation, benches);
criterion_main!(negotiation);
