//! The JSON report has a schema in `spec/schemas/`, generated from the report types (refresh with `UPDATE_SCHEMAS=1`),
//! and real reports validate against it.

use crate::common;

fn schema() -> serde_json::Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12();
    let schema = settings.into_generator().into_root_schema_for::<a2a_conformance::Report>();
    serde_json::to_value(schema).expect("serialises")
}

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/schemas/conformance_report.schema.json");

#[test]
fn committed_report_schema_matches_the_report_types() {
    let text = serde_json::to_string_pretty(&schema()).expect("serialises") + "\n";
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(PATH, &text).expect("write schema");
        return;
    }
    let committed = std::fs::read_to_string(PATH).unwrap_or_default();
    assert!(
        committed == text,
        "{PATH} differs from the report types (run UPDATE_SCHEMAS=1 cargo test -p a2a-conformance --test conformance)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_report_validates_against_the_schema() {
    let demo = common::demo().await;
    let mut opts = common::options(&demo.base, None);
    opts.only = Some("discover/*,negotiate/happy-path,signature/replay,capabilities/*,auth/oauth2".into());
    let report = common::run(opts).await;
    let value = serde_json::to_value(&report).expect("serialises");
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&value).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let mut broken = value.clone();
    broken["checks"][0]["status"] = serde_json::json!("exploded");
    assert!(!validator.is_valid(&broken), "the schema refuses an unknown status");
    let back: a2a_conformance::Report = serde_json::from_value(value).expect("round-trips");
    assert_eq!(back, report);
}
