//! Writes the committed seed corpora under `fuzz/seeds/<target>/`.
//!
//! ```text
//! cd fuzz && cargo run --example make_seeds
//! ```
//!
//! Seeds for the byte-level targets are real frames, bodies, exported
//! journals and JSON snapshots of a small agent session (one of each event
//! variant, a fork); seeds for the structured targets are a few
//! deterministic pseudo-random inputs that `arbitrary` turns into
//! operation sequences. Re-running rewrites the same files, except that ids
//! and timestamps are new; `regression-*` files (minimized crashes) stay.

use std::fs;
use std::path::{Path, PathBuf};

use agent_journal::{Envelope, Event, Journal, Outcome, ProviderCallRecord, ProviderOutcome, TokenUsage, ToolCallRecord};
use agent_journal::state::JsonOptions;
use agent_journal::format::{encode_frame};
use fuzz_common::{LIMIT, ajournal_bytes};

type R<T> = Result<T, Box<dyn std::error::Error>>;

fn dir(target: &str) -> R<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    fs::create_dir_all(&d)?;
    // Minimized crashes (`regression-*`) are kept by hand; the rest is ours.
    for entry in fs::read_dir(&d)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.starts_with("regression-") {
            fs::remove_file(&path)?;
        }
    }
    Ok(d)
}

/// A finished evaluation with every event variant, and a fork of it.
fn sessions() -> R<(Journal, Vec<agent_journal::Session>)> {
    let journal = Journal::memory();
    let s = journal.create_session_with_labels(vec![("agent".into(), "seed".into())])?;
    let eval = s.start_evaluation("support", "triage")?;
    eval.system("You are a helpful agent.")?;
    eval.user("What is in /tmp?")?;
    eval.assistant(
        "Let me look.",
        vec![
            ToolCallRecord::new("call_1", "list_dir", r#"{"path":"/tmp"}"#),
            ToolCallRecord::new("call_2", "stat", r#"{"path":"/tmp/a"}"#),
        ],
    )?;
    eval.provider_call(ProviderCallRecord {
        evaluation_id: eval.id(),
        turn: 1,
        provider: "scripted".into(),
        model: "m-1".into(),
        usage: TokenUsage {
            input_tokens: 120,
            output_tokens: 30,
            cache_read_tokens: 100,
            cache_write_tokens: 5, ..Default::default() },
        started_at: agent_journal::format::now(),
        finished_at: agent_journal::format::now(),
        outcome: ProviderOutcome::Ok,
    })?;
    eval.tool_started("call_1")?;
    eval.tool_result("call_1", "a.txt b.txt")?;
    eval.tool_started("call_2")?;
    eval.tool_failed("call_2", "permission denied")?;
    eval.adapter_state("claude_agent_sdk", r#"{"session_id":"abc"}"#.into(), true)?;
    s.append(Event::Compacted {
        evaluation_id: eval.id(),
        through_sequence: 1,
        summary: Some("listed /tmp".into()),
    })?;
    s.append(Event::Custom {
        kind: "myapp:note".into(),
        payload: vec![0, 1, 2, 255],
    })?;
    eval.assistant("There are two files.", vec![])?;
    eval.finish(Outcome::Failed {
        error: "one tool failed".into(),
    })?;
    let fork = s.fork(5)?;
    let e2 = fork.start_evaluation("support", "triage")?;
    e2.user("again")?;
    e2.assistant("", vec![ToolCallRecord::new("c", "t", "{}")])?;
    e2.tool_started("c")?; // in doubt
    Ok((journal, vec![s, fork]))
}

/// Deterministic pseudo-random bytes (xorshift).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn main() -> R<()> {
    let (_journal, sessions) = sessions()?;
    let envs: Vec<Vec<Envelope>> = sessions
        .iter()
        .map(|s| s.events(..))
        .collect::<Result<_, _>>()?;

    // One frame (and one sealed body) per event variant.
    let (frames, bodies) = (dir("frame_decode")?, dir("event_behind_crc")?);
    let mut seen = Vec::new();
    for env in envs.iter().flatten() {
        let kind = env.event.kind();
        if seen.contains(&kind) {
            continue;
        }
        seen.push(kind);
        let frame = encode_frame(env, LIMIT)?;
        fs::write(frames.join(kind), &frame)?;
        fs::write(bodies.join(kind), &frame[agent_journal::format::FRAME_HEADER_LEN..])?;
    }

    // Exported journals. The first byte of an input selects whether the
    // target prepends the magic (odd) or not (even).
    let d = dir("ajournal_parse")?;
    let (file, starts) = ajournal_bytes(envs.iter().flatten());
    let (one, _) = ajournal_bytes(&envs[1][..3]);
    let mut seeds: Vec<(&str, Vec<u8>)> = vec![
        ("two_sessions", [&[0u8][..], &file].concat()),
        ("no_magic_prepended", [&[1u8][..], &file[8..]].concat()),
        ("three_events", [&[0u8][..], &one].concat()),
    ];
    let cut = usize::try_from(starts[starts.len() - 1])? + 9;
    seeds.push(("torn_tail", [&[0u8][..], &file[..cut]].concat()));
    let mut damaged = file.clone();
    let mid = usize::try_from(starts[3])? + 10;
    damaged[mid] ^= 0x20;
    seeds.push(("damaged_middle", [&[0u8][..], &damaged].concat()));
    for (name, bytes) in seeds {
        fs::write(d.join(name), bytes)?;
    }

    // JSON snapshots, with and without logs, of the whole sessions and of
    // prefixes.
    let d = dir("wink_json")?;
    let opts = |include_logs| JsonOptions {
        include_logs,
        tags: vec![("run".into(), "seed".into())],
        ..JsonOptions::default()
    };
    let s = &sessions[0];
    fs::write(
        d.join("full_with_logs.json"),
        s.state().to_json(&opts(true)),
    )?;
    fs::write(d.join("full_no_logs.json"), s.state().to_json(&opts(false)))?;
    fs::write(d.join("prefix_4.json"), s.state_at(4)?.to_json(&opts(true)))?;
    fs::write(
        d.join("fork.json"),
        sessions[1].state().to_json(&opts(true)),
    )?;
    fs::write(
        d.join("empty.json"),
        agent_journal::state::SessionState::new().to_json(&opts(false)),
    )?;
    // Under WINK's names, and what WINK itself wrote of the spec's items.
    let wink = JsonOptions {
        names: agent_journal::state::SliceNames::Wink { module: None },
        ..opts(true)
    };
    fs::write(d.join("wink_names.json"), s.state().to_json(&wink))?;
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/wink/fixtures/wink_written.json"),
        d.join("wink_written.json"),
    )?;

    // Structured targets: pseudo-random inputs of a few sizes.
    for target in ["model", "tail_recovery"] {
        let d = dir(target)?;
        for (i, len) in [16usize, 64, 256, 1024].into_iter().enumerate() {
            fs::write(d.join(format!("noise_{len}")), noise(i as u64 + 1, len))?;
        }
    }
    println!(
        "seeds written under {}",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .display()
    );
    Ok(())
}
