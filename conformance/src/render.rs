//! The report as text (for people), JSON (`spec/schemas/conformance_report.schema.json`) and JUnit XML (for CI).

use std::fmt::Write as _;

use crate::check::Check;
use crate::report::{CheckReport, Compliance, Report, Status};

/// The output formats of `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A line per check, the failures explained, a summary.
    Text,
    /// The report as JSON.
    Json,
    /// JUnit XML: a test suite per area, a test case per check.
    Junit,
}

/// Renders a report.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Text => text(report),
        Format::Json => serde_json::to_string_pretty(report).unwrap_or_default() + "\n",
        Format::Junit => junit(report),
    }
}

fn label(s: Status) -> &'static str {
    match s {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Skip => "SKIP",
        Status::Blocked => "BLOCK",
    }
}

/// The compliance level in words.
pub fn compliance_text(c: Compliance) -> &'static str {
    match c {
        Compliance::None => "none: at least one MUST check failed; the agent does not conform to A2A 0.3",
        Compliance::Must => "MUST: every MUST check that applied passed (some SHOULD checks failed, or were not run)",
        Compliance::Should => "SHOULD: every MUST and SHOULD check that applied passed",
        Compliance::Full => "full: every check that applied passed, MAY included",
    }
}

fn text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "a2a-conformance {} (A2A protocol {})", r.run.suite_version, r.run.protocol_version);
    let _ = writeln!(s, "target    {}  ({})", r.run.endpoint, r.run.agent_did.as_deref().unwrap_or("no A2A-Sender-ID"));
    let _ = writeln!(
        s,
        "caller    {}",
        r.run.caller_did.as_deref().unwrap_or("unsigned only (no --identity or --serve-did)")
    );
    let _ = writeln!(s, "advertised {} capabilities: {}", r.run.capabilities.len(), r.run.capabilities.join(", "));
    let _ = writeln!(
        s,
        "features  {}",
        if r.run.features.is_empty() { "none".to_owned() } else { r.run.features.join(", ") }
    );
    if let Some(only) = &r.run.only {
        let _ = writeln!(s, "only      {only} ({} checks selected)", r.checks.len());
    }
    // Which capability each check drove, and why (grouped: most checks drive the same one).
    let mut driven: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for c in &r.checks {
        for u in &c.capabilities {
            match driven.iter_mut().find(|(n, w, _)| *n == u.name && *w == u.why) {
                Some((_, _, ids)) => ids.push(&c.id),
                None => driven.push((&u.name, &u.why, vec![&c.id])),
            }
        }
    }
    for (name, why, ids) in &driven {
        let _ = writeln!(s, "driven    {name} ({why}): {} checks", ids.len());
    }
    s.push('\n');
    for c in &r.checks {
        let _ =
            writeln!(s, "{:<5} {:<6} {:<42} {}", label(c.status), c.level.as_str(), c.id, c.requirements.join(", "));
        match c.status {
            Status::Fail => {
                let _ = writeln!(s, "      {}", c.title);
                for u in &c.capabilities {
                    let _ = writeln!(s, "      capability {} ({})", u.name, u.why);
                }
                for (step, a) in failed_assertions(c).into_iter().take(5) {
                    let _ = writeln!(s, "      - {step}");
                    let _ = writeln!(s, "        expected {}", a.expected);
                    let _ = writeln!(s, "        observed {}", a.observed);
                }
            }
            Status::Skip | Status::Blocked => {
                if let Some(m) = &c.message {
                    let _ = writeln!(s, "      {m}");
                }
            }
            Status::Pass => {}
        }
    }
    let a = &r.summary.all;
    let _ = writeln!(
        s,
        "\n{} checks: {} pass, {} fail ({} MUST, {} SHOULD, {} MAY), {} skip, {} blocked, in {:.1} s",
        a.total(),
        a.pass,
        a.fail,
        r.summary.must.fail,
        r.summary.should.fail,
        r.summary.may.fail,
        a.skip,
        a.blocked,
        r.run.duration_ms as f64 / 1000.0
    );
    let _ = writeln!(s, "compliance: {}", compliance_text(r.compliance));
    s
}

fn failed_assertions(c: &CheckReport) -> Vec<(String, &crate::report::Assertion)> {
    let mut out = Vec::new();
    for step in &c.steps {
        let what = match &step.request {
            Some(req) => format!("{} ({} {})", step.title, req.method, req.url),
            None => step.title.clone(),
        };
        for a in step.assertions.iter().filter(|a| !a.ok) {
            out.push((what.clone(), a));
        }
    }
    out
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push_str(&format!("&#x{:x};", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn junit(r: &Report) -> String {
    let mut areas: Vec<&str> = Vec::new();
    for c in &r.checks {
        let area = c.id.split('/').next().unwrap_or("");
        if !areas.contains(&area) {
            areas.push(area);
        }
    }
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let a = &r.summary.all;
    let _ = writeln!(
        s,
        "<testsuites name=\"a2a-conformance\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
        a.total(),
        a.fail,
        a.skip + a.blocked,
        r.run.duration_ms as f64 / 1000.0
    );
    for area in areas {
        let cs: Vec<&CheckReport> = r.checks.iter().filter(|c| c.id.split('/').next() == Some(area)).collect();
        let fails = cs.iter().filter(|c| c.status == Status::Fail).count();
        let skips = cs.iter().filter(|c| matches!(c.status, Status::Skip | Status::Blocked)).count();
        let _ = writeln!(
            s,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{fails}\" skipped=\"{skips}\">",
            xml(area),
            cs.len()
        );
        for c in cs {
            let _ = write!(
                s,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">",
                xml(&format!("{} [{}] {}", c.id, c.level.as_str(), c.requirements.join(","))),
                xml(area),
                c.duration_ms as f64 / 1000.0
            );
            if !c.capabilities.is_empty() {
                s.push_str("\n      <properties>");
                for u in &c.capabilities {
                    let _ = write!(
                        s,
                        "\n        <property name=\"capability\" value=\"{}\"/>",
                        xml(&format!("{}: {}", u.name, u.why))
                    );
                }
                s.push_str("\n      </properties>\n    ");
            }
            match c.status {
                Status::Pass => {}
                Status::Fail => {
                    let detail: String = failed_assertions(c)
                        .into_iter()
                        .map(|(step, a)| format!("{step}\n  expected {}\n  observed {}\n", a.expected, a.observed))
                        .collect();
                    let _ = write!(
                        s,
                        "\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    ",
                        xml(c.message.as_deref().unwrap_or("")),
                        c.level.as_str(),
                        xml(&detail)
                    );
                }
                Status::Skip | Status::Blocked => {
                    let _ = write!(
                        s,
                        "\n      <skipped message=\"{}\"/>\n    ",
                        xml(&format!("{}: {}", c.status.as_str(), c.message.as_deref().unwrap_or("")))
                    );
                }
            }
            s.push_str("</testcase>\n");
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

/// The `--list` output: every check with its level, requirements and when it applies.
pub fn list(checks: &[Check]) -> String {
    let mut s = String::new();
    for c in checks {
        let _ = writeln!(s, "{:<6} {:<42} {}", c.level.as_str(), c.id, c.requirements.join(", "));
        let _ = writeln!(s, "       {}", c.title);
        if c.applies != crate::checks::applies_always() {
            let _ = writeln!(s, "       applies when {}", c.applies);
        }
    }
    let _ = writeln!(s, "\n{} checks", checks.len());
    s
}

#[cfg(test)]
mod tests {
    use super::xml;

    #[test]
    fn xml_escapes_markup_and_controls() {
        assert_eq!(xml("a<b>&\"'\u{1}"), "a&lt;b&gt;&amp;&quot;&apos;&#x1;");
    }
}
