//! Dynamic coscheduling (paper 003 §4.1) on real processes: a 2-rank job
//! that meets at a barrier every iteration beside two sequential jobs on
//! this node's CPUs. The communicating job is raised while it talks; the
//! sequential ones never are.

mod common;

use common::*;

#[test]
#[ignore = "needs root: cgroups, negative nice values (scripts/test runs it as root)"]
fn a_communicating_job_is_boosted_and_sequential_ones_are_not() {
    require_root("a_communicating_job_is_boosted_and_sequential_ones_are_not");
    let bed = Bed::new();
    let job = |name: &str, args: &str, ranks: u32| {
        let args: Vec<String> = args.split(' ').map(|a| format!("{a:?}")).collect();
        format!(
            "[[job]]\nname = \"{name}\"\nranks = {ranks}\nmemory = \"40M\"\ncommand = [\"memgang-workload\", {}]\n",
            args.join(", ")
        )
    };
    let exp = bed.write(
        "dyn.toml",
        &format!(
            "policy = \"cosched\"\npool_memory = \"512M\"\ndynamic_coscheduling = true\n{}{}{}",
            job(
                "pair",
                "--mib 32 --pattern stencil --ranks 2 --iterations 300 --compute 1",
                2
            ),
            job(
                "seq1",
                "--mib 32 --pattern seq --iterations 200 --compute 4",
                1
            ),
            job(
                "seq2",
                "--mib 32 --pattern seq --iterations 200 --compute 4",
                1
            ),
        ),
    );
    let (out, v) = bed.run(&exp, &["--baseline", "none"]);
    assert!(out.status.success(), "{}", text(&out));
    let v = v.unwrap();
    assert_eq!(v["dynamic_coscheduling"], true);
    let jobs = v["jobs"].as_array().unwrap();
    for j in jobs {
        assert_eq!(j["exit_code"], 0, "{j}");
    }
    let pair = &jobs[0];
    assert!(pair["max_boost"].as_u64().unwrap() >= 1, "{pair}");
    assert!(pair["boosted_s"].as_f64().unwrap() > 0.5, "{pair}");
    for seq in &jobs[1..] {
        assert_eq!(seq["max_boost"], 0, "{seq}");
    }
}
