use super::*;

/// One text of each rule, with the secret it holds.
const CASES: &[(&str, &str, &str)] = &[
    (
        "private-key",
        "k: -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7x9\nQ2w=\n-----END RSA PRIVATE KEY----- ok",
        "MIIEpAIBAAKCAQEA7x9",
    ),
    (
        "private-key-unterminated",
        "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAA\\nAAAABG5vbmU",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    (
        "anthropic",
        "x-api-key: sk-ant-api03-fKtHF4vUCsMehGAkWvj7FAc9QeWJKY40uvSwMFLZ",
        "sk-ant-api03-fKtHF4vUCsMehGAkWvj7FAc9QeWJKY40uvSwMFLZ",
    ),
    (
        "openai",
        "OPENAI_KEY_sk-proj-u8jzPde0IgxLd6GncfBAT3BlbkFJepfJBd0Kh8oOOL8dKLzd",
        "sk-proj-u8jzPde0IgxLd6GncfBAT3BlbkFJepfJBd0Kh8oOOL8dKLzd",
    ),
    (
        "aws-access-key-id",
        "call_AKIAIOSFODNN7EXAMPLE",
        "AKIAIOSFODNN7EXAMPLE",
    ),
    (
        "aws-secret-access-key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "github",
        "ghp_EOzdmenCkhvMdgaKjIg8xNbe3nNyjOq9wMxE",
        "ghp_EOzdmenCkhvMdgaKjIg8xNbe3nNyjOq9wMxE",
    ),
    (
        "github-pat",
        "pat:github_pat_hh2FDEEtfjgVvVqE1SkHbn_88HxjSI6bWHtP3fS2q",
        "github_pat_hh2FDEEtfjgVvVqE1SkHbn_88HxjSI6bWHtP3fS2q",
    ),
    (
        "gitlab",
        "glpat-9wCZ7Uw9xfogoEmvnEN5",
        "glpat-9wCZ7Uw9xfogoEmvnEN5",
    ),
    (
        "slack-token",
        "slack_xoxb-907511637265-1676122202972-N0MEQ7wjJJibaZUPgHV7iB3m",
        "xoxb-907511637265-1676122202972-N0MEQ7wjJJibaZUPgHV7iB3m",
    ),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/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",
        "T03NBQNSG/BPWLUQIA1ID/6Vw5DQL05HA064GiIjHGb3CX",
    ),
    (
        "stripe",
        "sk_live_lMaXZjljENUhJduRHHJEYXg4Jdpm",
        "sk_live_lMaXZjljENUhJduRHHJEYXg4Jdpm",
    ),
    (
        "twilio",
        "twilio SKe73cf575dcad6ba2b0aee0ca92373288",
        "SKe73cf575dcad6ba2b0aee0ca92373288",
    ),
    (
        "sendgrid",
        "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",
        "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",
    ),
    (
        "npm",
        "npm_qdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7CgQ0",
        "npm_qdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7CgQ0",
    ),
    (
        "pypi",
        "pypi-AgEIcHlwaS5vcmcPBQFI14zGtSnovm14TUOizwd1iaeOV4qBkdfQ1y3G",
        "pypi-AgEIcHlwaS5vcmcPBQFI14zGtSnovm14TUOizwd1iaeOV4qBkdfQ1y3G",
    ),
    (
        "huggingface",
        "hf: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",
        "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",
    ),
    (
        "google",
        "?key=AIza9H2WjQ5TY4MyWuUFjsUNPjc01T5GOBUSZGi",
        "AIza9H2WjQ5TY4MyWuUFjsUNPjc01T5GOBUSZGi",
    ),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlc2ln",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlc2ln",
    ),
    (
        "digitalocean",
        "dop_v1_483b7ffc050fec94dbca3a0aac36098b2cc2bd818319478da6bd0c621de49f14",
        "dop_v1_483b7ffc050fec94dbca3a0aac36098b2cc2bd818319478da6bd0c621de49f14",
    ),
    (
        "mailgun",
        "api:key-7b860dcd6c8a1f8b46287cced9041dff",
        "key-7b860dcd6c8a1f8b46287cced9041dff",
    ),
    (
        "shopify",
        "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",
        "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",
    ),
    (
        "azure",
        "AccountName=a;AccountKey=aez7770H2DCpYgojjHRg80USP2W5DfJXcaYioK6c==;Endpoint",
        "aez7770H2DCpYgojjHRg80USP2W5DfJXcaYioK6c==",
    ),
    (
        "other-prefixed",
        "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",
        "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",
    ),
    (
        "bearer",
        "Authorization: Bearer ZeV7G5IfQHeVVEqZe2qpUWnoVPDF2yeE",
        "ZeV7G5IfQHeVVEqZe2qpUWnoVPDF2yeE",
    ),
    (
        "basic",
        "Authorization: Basic ZGVwbG95OjZSc1hjTk9QbWVNanZxUFY=",
        "ZGVwbG95OjZSc1hjTk9QbWVNanZxUFY=",
    ),
    (
        "url-password",
        "postgres://app:HsDDDXh5Jmtf7EbsDe@db.internal:5432/prod",
        "HsDDDXh5Jmtf7EbsDe",
    ),
    (
        "assignment",
        "DB_PASSWORD=0G9Cryn687neLfjVHq8x",
        "0G9Cryn687neLfjVHq8x",
    ),
];

#[test]
fn every_rule_finds_its_secret_and_only_it() {
    let mut r = Redactor::new(&[]).unwrap();
    let names = r.scanner.rule_names();
    for name in names {
        assert!(
            CASES.iter().any(|(n, _, _)| *n == name),
            "no case for rule {name}"
        );
    }
    for (name, text, secret) in CASES {
        let before = r.replaced;
        let out = r.text(text);
        assert!(!out.contains(secret), "{name}: {out}");
        assert_eq!(
            r.replaced - before,
            1,
            "{name}: one secret in {text:?}: {out}"
        );
        assert_eq!(out.matches(MARK).count(), 1, "{name}: {out}");
        // What surrounds the secret is kept.
        let kept = text.replacen(secret, MARK, 1);
        if *name != "private-key" && *name != "private-key-unterminated" {
            assert_eq!(out, kept, "{name}");
        }
        // Redacting again changes nothing and counts nothing.
        let before = r.replaced;
        assert_eq!(r.text(&out), out, "{name}");
        assert_eq!(r.replaced, before, "{name}");
    }
}

#[test]
fn ordinary_text_is_kept() {
    let mut r = Redactor::new(&[]).unwrap();
    let texts = [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed the aws upload",
        "aws deploy at 3f786850e387550fdab836ed7e6dc881de23001b, AWS_REGION=us-east-1",
        "id 0192f3a4-5b6c-7d8e-9f01-23456789abcd, session 01929e3c4f5a7b8c9d0e1f2a3b4c5d6e",
        "the token limit is \"max_tokens\": 4096 and \"input_tokens\": 123456789",
        "a task-management-pipeline-v2 and risk-assessment-Report2024final",
        "Basic authentication and bearer authentication are both supported",
        "bearer Authorization, Bearer ExpiredTokens",
        "fn connect(password: String, token: &str) -> secret_name: production-db",
        "https://example.com/a@b, mailto:me@example.com, http://host:8080/path@x",
        "sk-short, the word token, a secret, ASIAN MARKETS, EURASIAPACIFICREGIONSTUFF1",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ];
    for t in texts {
        assert_eq!(r.text(t), t);
    }
    assert_eq!(r.replaced, 0);
}

#[test]
fn glued_and_repeated_secrets_are_each_counted() {
    let mut r = Redactor::new(&[]).unwrap();
    let out = r.text(
        "AKIAIOSFODNN7EXAMPLE,call_AKIAIOSFODNN7EXAMPLE;https://AKIAIOSFODNN7EXAMPLE:pw9xyzab@h",
    );
    assert_eq!(
        out,
        "[REDACTED],call_[REDACTED];https://[REDACTED]:[REDACTED]@h"
    );
    assert_eq!(r.replaced, 4);
}

#[test]
fn extra_patterns_and_their_secret_group() {
    let mut r = Redactor::new(&[
        "internal-[0-9]{4}".into(),
        "pin (?P<secret>[0-9]{4})".into(),
    ])
    .unwrap();
    assert_eq!(
        r.text("ticket internal-1234, pin 9876"),
        "ticket [REDACTED], pin [REDACTED]"
    );
    assert_eq!(r.replaced, 2);
    assert!(Redactor::new(&["(".into()]).is_err());
    // Empty matches are not secrets.
    let mut r = Redactor::new(&["x*".into()]).unwrap();
    assert_eq!(r.text("abc"), "abc");
    assert_eq!(r.replaced, 0);
}

#[test]
fn documents_stay_valid_json_whatever_the_pattern_matches() {
    let mut r = Redactor::new(&["\"".into()]).unwrap();
    let doc = r#"{"a": "say \"ghp_EOzdmenCkhvMdgaKjIg8xNbe3nNyjOq9wMxE\"", "n": 1}"#;
    let out = r.document(doc, false).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["a"], "say [REDACTED][REDACTED][REDACTED]");
    assert_eq!(v["n"], 1);
    assert_eq!(r.replaced, 3);
}

#[test]
fn keys_are_redacted_and_kept_distinct() {
    let mut r = Redactor::new(&[]).unwrap();
    let doc = r#"{"AKIAIOSFODNN7EXAMPLE": 1, "AKIAIOSFODNN7EXAMPLF": 2, "[REDACTED:1]": 3,
        "x": {"ghp_EOzdmenCkhvMdgaKjIg8xNbe3nNyjOq9wMxE": "ghp_EOzdmenCkhvMdgaKjIg8xNbe3nNyjOq9wMxE"}}"#;
    let out = r.document(doc, false).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["[REDACTED:1]", "[REDACTED:2]", "[REDACTED:3]", "x"]);
    assert_eq!(
        v["[REDACTED:1]"], 3,
        "the key that was there keeps its value"
    );
    assert_eq!(v["x"]["[REDACTED]"], "[REDACTED]");
    assert_eq!(r.replaced, 4);
    assert_eq!(r.replaced, out.matches("[REDACTED").count() - 1);
}

#[test]
fn json_inside_a_string_keeps_its_keys_apart() {
    let mut r = Redactor::new(&[]).unwrap();
    // Redacting the text would give one key twice: it is redacted as JSON.
    let args = r#"{"AKIAIOSFODNN7EXAMPLE": "a", "AKIAIOSFODNN7EXAMPLF": "b"}"#;
    let out = r.string(args).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 2, "{out}");
    assert_eq!(r.replaced, 2);
    // Otherwise the text keeps its layout.
    let args = "{ \"k\" :  \"AKIAIOSFODNN7EXAMPLE\" }";
    assert_eq!(r.string(args).unwrap(), "{ \"k\" :  \"[REDACTED]\" }");
    assert_eq!(r.replaced, 3);
    // A private key block whose text runs across members.
    let doc = r#"["-----BEGIN PRIVATE KEY-----", "MIIEv", "-----END PRIVATE KEY-----"]"#;
    let out = r.string(doc).unwrap();
    assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out}");
}

#[test]
fn binary_custom_payloads_are_redacted_byte_for_byte() {
    let mut r = Redactor::new(&[]).unwrap();
    let mut payload = vec![0xff, 0x00, 0xc3];
    payload.extend_from_slice(b"AKIAIOSFODNN7EXAMPLE");
    payload.push(0x80);
    let mut e = Event::Custom {
        kind: "bin".into(),
        payload,
    };
    r.event(&mut e).unwrap();
    let Event::Custom { payload, .. } = e else {
        unreachable!()
    };
    let mut want = vec![0xff, 0x00, 0xc3];
    want.extend_from_slice(MARK.as_bytes());
    want.push(0x80);
    assert_eq!(payload, want);
    assert_eq!(r.replaced, 1);
}
