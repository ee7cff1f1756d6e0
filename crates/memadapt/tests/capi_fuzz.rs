//! The C API under arbitrary arguments within its documented contract
//! (pointers NULL or valid, handles live or NULL): every call returns a
//! status, never panics (MEMADAPT_E_INTERNAL is a caught panic) and never
//! crashes; a failure leaves a message naming the function.

use memadapt::capi::*;
use proptest::prelude::*;
use std::ffi::{CStr, CString};
use std::os::raw::c_void;
use std::ptr;

fn last_error() -> String {
    // SAFETY: memadapt_last_error returns a valid C string.
    unsafe { CStr::from_ptr(memadapt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// A status is success or a documented error; an error has a message.
fn check(function: &str, status: i32) -> Result<(), TestCaseError> {
    prop_assert!(
        status != MEMADAPT_E_INTERNAL,
        "{function} panicked: {}",
        last_error()
    );
    prop_assert!(
        (MEMADAPT_E_INTERNAL..=MEMADAPT_OK).contains(&status),
        "{function}: {status}"
    );
    if status != MEMADAPT_OK {
        prop_assert!(
            last_error().starts_with(function),
            "{function}: {}",
            last_error()
        );
    }
    Ok(())
}

/// A path as a C string: arbitrary bytes (no NUL), in a fresh directory.
fn path_in(dir: &std::path::Path, name: &[u8]) -> CString {
    let mut p = dir.as_os_str().as_encoded_bytes().to_vec();
    p.push(b'/');
    p.extend(name.iter().copied().filter(|b| *b != 0));
    CString::new(p).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn writer_and_store_survive_any_arguments(
        name in prop_oneof![
            8 => Just(b"a.panels".to_vec()),
            1 => proptest::collection::vec(any::<u8>(), 0..300),
        ],
        panel_bytes in prop_oneof![1 => Just(0u64), 12 => (1u64..8_000).prop_map(|n| n * 8), 2 => 1u64..70_000, 1 => Just(u64::MAX), 1 => any::<u64>()],
        panels in prop_oneof![1 => Just(0usize), 12 => 1usize..8, 1 => Just(usize::MAX), 1 => any::<usize>()],
        element in prop_oneof![12 => 0i32..6, 1 => any::<i32>()],
        writes in proptest::collection::vec((0usize..10, 0usize..80_000, any::<bool>()), 0..10),
        finish in prop_oneof![3 => Just(true), 1 => Just(false)],
        flags in prop_oneof![
            4 => (0u32..2, 0u32..3, 0u32..2).prop_map(|(rw, policy, rss)| rw | policy << 1 | rss << 3),
            1 => any::<u32>(),
        ],
        fixed in prop_oneof![6 => Just(0usize), 3 => 0usize..10, 1 => any::<usize>()],
        calls in proptest::collection::vec((0u8..12, any::<usize>(), any::<u64>()), 0..20),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path(), &name);
        let mut writer = ptr::null_mut();
        // SAFETY: valid C string and out-pointer.
        let st = unsafe {
            memadapt_file_create(path.as_ptr(), panel_bytes, panels, element, &mut writer)
        };
        check("memadapt_file_create", st)?;
        prop_assert_eq!(st == MEMADAPT_OK, !writer.is_null());
        if !writer.is_null() {
            for (panel, bytes, whole) in writes {
                // Mostly exactly a panel, as the contract asks; else any size.
                let bytes = if whole { (panel_bytes as usize).min(80_000) } else { bytes };
                let data = vec![7u8; bytes];
                // SAFETY: live writer; data readable for `bytes`.
                let st = unsafe {
                    memadapt_file_write_panel(writer, panel, data.as_ptr().cast::<c_void>(), bytes)
                };
                check("memadapt_file_write_panel", st)?;
            }
            // SAFETY: live writer, not used afterwards.
            let st = unsafe {
                if finish { memadapt_file_finish(writer) } else { memadapt_file_abort(writer) }
            };
            check(if finish { "memadapt_file_finish" } else { "memadapt_file_abort" }, st)?;
        }
        let mut store = ptr::null_mut();
        // SAFETY: valid C string and out-pointer.
        let st = unsafe { memadapt_open(path.as_ptr(), flags, fixed, &mut store) };
        check("memadapt_open", st)?;
        if store.is_null() {
            return Ok(());
        }
        let csv = path_in(dir.path(), b"timeline.csv");
        for (op, panel, value) in calls {
            let (mut data, mut len, mut index) = (ptr::null_mut::<c_void>(), 0usize, panel % 16);
            let mut stats = MemadaptStats::default();
            let mut info = MemadaptInfo::default();
            // SAFETY: live store; out-pointers valid.
            let (function, st) = unsafe { match op {
                0 => ("memadapt_panel", memadapt_panel(store, panel % 16, (&mut data as *mut *mut c_void).cast(), &mut len)),
                1 => ("memadapt_panel_mut", memadapt_panel_mut(store, panel, &mut data, &mut len)),
                2 => ("memadapt_next_panel", memadapt_next_panel(store, &mut index, (&mut data as *mut *mut c_void).cast(), &mut len)),
                3 => ("memadapt_pin", memadapt_pin(store, panel % 16)),
                4 => ("memadapt_unpin", memadapt_unpin(store, panel)),
                5 => ("memadapt_set_priority", memadapt_set_priority(store, panel % 16, value as u32)),
                6 => ("memadapt_set_other_memory", memadapt_set_other_memory(store, value)),
                7 => ("memadapt_set_tolerance", memadapt_set_tolerance(store, value)),
                8 => ("memadapt_flush", memadapt_flush(store)),
                9 => ("memadapt_stats", memadapt_stats(store, &mut stats)),
                10 => ("memadapt_info", memadapt_info(store, &mut info)),
                _ => ("memadapt_write_timeline_csv", memadapt_write_timeline_csv(store, csv.as_ptr())),
            } };
            check(function, st)?;
            if st == MEMADAPT_OK && op <= 2 {
                prop_assert!(!data.is_null() && len > 0);
            }
        }
        // SAFETY: live store, not used afterwards.
        check("memadapt_close", unsafe { memadapt_close(store) })?;
    }

    #[test]
    fn null_handles_and_pointers_are_errors(panel in any::<usize>(), value in any::<u64>()) {
        let mut len = 0usize;
        let mut data = ptr::null();
        // SAFETY: NULL handles are part of the contract.
        unsafe {
            prop_assert_eq!(memadapt_file_create(ptr::null(), 1, 1, 0, ptr::null_mut()), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_file_write_panel(ptr::null_mut(), panel, ptr::null(), 0), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_file_finish(ptr::null_mut()), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_file_abort(ptr::null_mut()), MEMADAPT_OK);
            prop_assert_eq!(memadapt_open(ptr::null(), 0, 0, ptr::null_mut()), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_panel(ptr::null_mut(), panel, &mut data, &mut len), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_pin(ptr::null_mut(), panel), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_set_other_memory(ptr::null_mut(), value), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_flush(ptr::null_mut()), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_stats(ptr::null_mut(), ptr::null_mut()), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_write_timeline_csv(ptr::null_mut(), ptr::null()), MEMADAPT_E_NULL);
            prop_assert_eq!(memadapt_close(ptr::null_mut()), MEMADAPT_OK);
        }
        // Any status has a description.
        // SAFETY: strerror returns a valid C string for any status.
        let s = unsafe { CStr::from_ptr(memadapt_strerror(value as i32)) };
        prop_assert!(!s.to_bytes().is_empty());
    }
}
