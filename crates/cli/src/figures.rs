//! `memgang figures`: the papers' figures that the simulator's model can
//! recompute, printed as tables (and `--json` for scripts).

use crate::out::outln;
use crate::report::{numbers_right, table};
use anyhow::Result;
use clap::Subcommand;
use memgang_sim::paper004::{
    slowdown, touch_to_match, APPS, FRACTIONS, NODES, PAPER_SAYS, T_PF_DISK_S, T_PF_FAST_S,
};
use serde_json::json;

#[derive(Subcommand)]
pub enum Figures {
    /// Paper 004's Fig. 3 (slowdown against memory fraction c, 16 ms
    /// pages), Fig. 4 (one constrained node) and Fig. 8 (400 µs pages) from
    /// the simulator's paging model, beside what the paper states.
    Paper004 {
        /// Print the rows as JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(f: Figures) -> Result<()> {
    match f {
        Figures::Paper004 { json } => paper004(json),
    }
}

fn paper004(as_json: bool) -> Result<()> {
    let curve = |app, t_pf, constrained| -> Vec<f64> {
        FRACTIONS
            .iter()
            .map(|&c| slowdown(app, t_pf, c, constrained))
            .collect()
    };
    if as_json {
        let rows: Vec<_> = APPS
            .iter()
            .map(|a| {
                json!({
                    "app": a.name, "pages": a.pages, "f_pf": a.f_pf,
                    "touch_per_s": a.touch_per_s, "touch_from": a.touch_from,
                    "c": FRACTIONS,
                    "fig3_slowdown": curve(a, T_PF_DISK_S, NODES),
                    "fig4_slowdown_one_node": curve(a, T_PF_DISK_S, 1),
                    "fig8_slowdown": curve(a, T_PF_FAST_S, NODES),
                    "touch_for_2x_at_0_9": touch_to_match(a, 0.9, 2.0),
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"nodes": NODES, "apps": rows, "paper_says": PAPER_SAYS})
            )?
        )?;
        return Ok(());
    }
    let cs: Vec<String> = FRACTIONS.iter().map(|c| format!("c = {c}")).collect();
    let fig = |title: &str, t_pf: f64, constrained: usize| {
        let mut header = vec!["app".to_string()];
        header.extend(cs.iter().cloned());
        let mut t = table(header);
        for a in &APPS {
            let mut row = vec![a.name.to_string()];
            row.extend(
                curve(a, t_pf, constrained)
                    .iter()
                    .map(|s| format!("{s:.2}")),
            );
            t.add_row(row);
        }
        numbers_right(&mut t, 1);
        outln!("{title}\n\n{t}\n")
    };
    let mut t = table(vec![
        "app",
        "pages (N)",
        "F_pf",
        "touch / s",
        "from",
        "touch / s for 2x at c = 0.9",
    ]);
    for a in &APPS {
        t.add_row(vec![
            a.name.to_string(),
            a.pages.to_string(),
            format!("{:.2}", a.f_pf),
            format!("{:.1}", a.touch_per_s),
            a.touch_from.to_string(),
            format!("{:.1}", touch_to_match(a, 0.9, 2.0)),
        ]);
    }
    numbers_right(&mut t, 1);
    outln!(
        "Paper 004 by the simulator's paging model: {NODES} nodes, SPIN, one page per fault\n\n{t}\n"
    )?;
    fig(
        "Fig. 3: slowdown, all nodes at memory fraction c, 16 ms per page",
        T_PF_DISK_S,
        NODES,
    )?;
    for (name, paper) in [("Barnes", 52.0), ("Wave", 32.0)] {
        if let Some(a) = APPS.iter().find(|a| a.name == name) {
            outln!(
                "{name}: the paper's {paper}x at c = 0.75 needs touch / s {:.1} in the model \
                 (its working sets show {:.1})",
                touch_to_match(a, 0.75, paper),
                a.touch_per_s
            )?;
        }
    }
    outln!()?;
    fig(
        "Fig. 4: slowdown, one node at c (the other 31 unconstrained), 16 ms per page",
        T_PF_DISK_S,
        1,
    )?;
    fig(
        "Fig. 8: slowdown, all nodes at c, 400 us per page",
        T_PF_FAST_S,
        NODES,
    )?;
    outln!("What the paper states of its figures:")?;
    for s in PAPER_SAYS {
        outln!("- {s}")?;
    }
    Ok(())
}
