//! The sessions demo (`a2a-server --sessions-demo`): the three-agent story played by three real agents
//! over loopback HTTP, checked end to end.

use a2a_agent::sessions_demo::{Log, MAX_TURNS, run_story, start_cast};

#[tokio::test]
async fn sessions_demo_plays_seed_001_and_answers_with_bonus_spending_and_price() {
    let log = Log::quiet();
    let cast = start_cast(&log).await.expect("the cast starts");
    let out = run_story(&cast, &log).await.expect("the story runs");

    // The answer: the bonus from the send, the spending from the history, the price from the worker.
    assert_eq!((out.bonus, out.spent, out.price), (5000, 2000, 8000), "{out:?}");
    for part in ["5000 yuan", "2000 yuan", "8000 yuan", "5000 yuan short"] {
        assert!(out.answer.contains(part), "{part:?} missing from {:?}", out.answer);
    }
    // The send's ping-pong: main asks one follow-up, work answers it, main stops with REPLY_SKIP (PP-4).
    assert_eq!((out.turns, out.ended_by.as_str(), out.announce.as_str()), (3, "skip_token", "published"), "{out:?}");
    let lines = log.lines();
    for n in 1..=3 {
        let told = format!("ping-pong turn {n} of {MAX_TURNS}");
        assert!(lines.iter().any(|l| l.contains(&told)), "{told:?} not said: {lines:#?}");
    }
    // Every hop a handler saw is marked as another agent's text, never its user's (POL-3).
    let hops: Vec<&String> = lines.iter().filter(|l| l.contains("provenance:")).collect();
    assert!(hops.len() >= 5, "{lines:#?}");
    assert!(hops.iter().all(|l| l.contains("is_user=false") && l.contains("inter_session")), "{hops:#?}");
    assert!(lines.iter().any(|l| l.contains("via ping_pong")), "{lines:#?}");

    // The events arrived on the real streams: the work assistant's announce, the worker's announce-back.
    let announce = out.events.iter().find(|e| e.kind == "announce").expect("an announce event");
    assert_eq!(announce.agent, "work assistant");
    assert!(announce.data["text"].as_str().unwrap_or("").contains("5000 yuan"), "{announce:?}");
    assert_eq!(announce.data["provenance"]["is_user"], false);
    let spawn = out.events.iter().find(|e| e.kind == "spawn").expect("a spawn event");
    assert_eq!((spawn.agent, spawn.data["child"].as_str()), ("main assistant", Some(out.worker.as_str())));
    assert!(lines.iter().any(|l| l.contains("event from the work assistant's /a2a/events: announce")), "{lines:#?}");

    // The worker is gone, its transcript deleted (cleanup: delete).
    assert!(out.worker_cleaned_up, "{out:?}");
    cast.stop().await;
}
