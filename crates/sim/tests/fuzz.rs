//! Every input the simulator reads from outside (SWF traces, device files)
//! is fuzzed: whatever the bytes, a clear error or a run, never a panic.
//! Case counts are bounded so that CI stays fast.

use memgang_core::{PolicyKind, Switching};
use memgang_sim::{BadLines, Config, DeviceFile, PagingModel, Simulator, Swf};
use proptest::prelude::*;
use std::time::Duration;

/// Field values that have broken parsers before, and ordinary ones.
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("1e99".to_string()),
        Just("4294967296".to_string()),
        Just("18446744073709551616".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("-0.5".to_string()),
        Just("1e-300".to_string()),
        (0u32..100_000).prop_map(|v| v.to_string()),
        (0.0f64..1e6).prop_map(|v| v.to_string()),
        "[ -~]{0,6}",
    ]
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(field(), 18).prop_map(|f| f.join(" ")),
        1 => prop::collection::vec(field(), 0..22).prop_map(|f| f.join(" ")),
        1 => "[ -~]{0,80}".prop_map(|s| format!("; {s}")),
        1 => any::<String>(),
    ]
}

fn config(policy: PolicyKind, switching: &str, paging: PagingModel) -> Config {
    Config {
        nodes: 2,
        cpus_per_node: 2,
        node_memory: 1 << 30,
        policy,
        quantum: Duration::from_secs(60).into(),
        switching: switching.parse::<Switching>().unwrap(),
        overlap: Default::default(),
        paging,
    }
}

fn policy() -> impl Strategy<Value = (PolicyKind, &'static str)> {
    prop_oneof![
        Just((PolicyKind::Batch, "lru")),
        Just((PolicyKind::Gang, "lru")),
        Just((PolicyKind::Gang, "ao/ai")),
        Just((PolicyKind::Cosched, "lru")),
        Just((PolicyKind::Hybrid, "lru")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn any_trace_is_simulated_or_refused(lines in prop::collection::vec(line(), 0..8), (p, sw) in policy(), skip: bool) {
        let text = lines.join("\n");
        let bad = if skip { BadLines::Skip } else { BadLines::Refuse };
        let mut swf = Swf::new("fuzz.swf", text.as_bytes(), bad, 1 << 20);
        let _ = Simulator::new(config(p, sw, PagingModel::default()), &mut swf).run();
    }

    #[test]
    fn any_device_file_is_used_or_refused(
        write in prop_oneof![any::<f64>(), 0.0f64..1e12],
        read in prop_oneof![any::<f64>(), 0.0f64..1e12],
        iops in prop_oneof![any::<f64>(), 0.0f64..1e7],
        eff in prop_oneof![any::<f64>(), 0.0f64..2.0],
        (p, sw) in policy(),
    ) {
        let text = format!(
            r#"{{"write_bps": {write:?}, "read_bps": {read:?}, "random_read_iops": {iops:?}, "switch_efficiency": {eff:?}}}"#
        );
        let Ok(file) = serde_json::from_str::<DeviceFile>(&text) else { return Ok(()) };
        let Ok(device) = file.device() else { return Ok(()) };
        // Two jobs that do not fit together: every switch and fault is paid
        // at the device's rates.
        let trace = "1 0 0 100 2 -1 700000 2 -1 -1 1 1 1 -1 1 -1 -1 -1\n\
                     2 5 0 100 2 -1 700000 2 -1 -1 1 1 1 -1 1 -1 -1 -1\n";
        let mut swf = Swf::new("two.swf", trace.as_bytes(), BadLines::Refuse, 1 << 20);
        let paging = PagingModel { device, ..PagingModel::default() };
        let _ = Simulator::new(config(p, sw, paging), &mut swf).run();
    }

    #[test]
    fn any_text_as_a_device_file_is_refused_or_read(text in any::<String>()) {
        if let Ok(f) = serde_json::from_str::<DeviceFile>(&text) {
            let _ = f.device();
        }
    }
}
