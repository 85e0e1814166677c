//! Row 8: the resume plan of a 50,000-message session, against the figure
//! WINK publishes for its own restore (12-20 s for 50,000 messages).

use std::time::{Duration, Instant};

use agent_journal::{CheckpointStrategy, Durability, Journal, JournalConfig};

use crate::common::events::AgentRun;
use crate::common::report::{Report, Row, Verdict, fmt_dur, fmt_ratio, thousands};
use crate::common::tempdir;

/// WINK's own restore of 50,000 messages from its snapshot: 12-20 s. The
/// lower bound is used for the ratio (the least favourable to us).
const WINK_SECONDS: f64 = 12.0;

pub fn section_resume(messages: u64, rounds: usize, rep: &mut Report) {
    eprintln!(
        "[8] resume plan of a session of at least {} messages",
        thousands(messages)
    );
    let dir = tempdir();
    let path = dir.path().join("db");
    let config = || JournalConfig {
        durability: Durability::Buffered,
        checkpoint: CheckpointStrategy::OnDemand,
        ..JournalConfig::default()
    };
    let (id, events) = {
        let journal = Journal::open_with(&path, config()).expect("open");
        let session = journal.create_session().expect("create");
        // One evaluation that never finishes: the crash left it mid-run.
        let mut run = AgentRun::new(u64::MAX);
        while session.state().messages().len() < messages as usize {
            session.append_batch(run.take_vec(1_000)).expect("append");
        }
        session.snapshot().expect("snapshot");
        // A crash leaves a few events after the last snapshot.
        session.append_batch(run.take_vec(100)).expect("append");
        journal.flush().expect("flush");
        (session.id(), session.head())
    };
    let mut best = Duration::MAX;
    let mut replayed = 0;
    let mut request_len = 0;
    let mut plan_messages = 0;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let journal = Journal::open_with(&path, config()).expect("open");
        let session = journal.session(id).expect("session");
        let plan = session.resume_plan().expect("plan");
        let request = agent_journal::provider::ConversationFormat::OpenAi.to_json(&plan.messages);
        let d = t.elapsed();
        replayed = session.load_stats().events_replayed;
        request_len = request.as_array().map_or(0, Vec::len);
        plan_messages = plan.messages.len();
        best = best.min(d);
        drop(request);
        drop(plan);
    }
    let ratio = WINK_SECONDS / best.as_secs_f64();
    rep.row(Row {
        id: "8",
        what: format!(
            "resume plan of a {}-event session ({} messages in its evaluation): open, load the snapshot, replay {} events after it, rebuild the OpenAI request ({} messages)",
            thousands(events),
            thousands(plan_messages as u64),
            replayed,
            thousands(request_len as u64)
        ),
        ours: fmt_dur(best),
        baseline: format!("WINK's published restore of 50,000 messages: 12-20 s (not run here; {WINK_SECONDS} s used)"),
        ratio: format!("{} faster", fmt_ratio(ratio)),
        target: "report".into(),
        verdict: Verdict::Info,
    });
}
