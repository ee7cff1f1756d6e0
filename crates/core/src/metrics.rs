//! The figures the papers report, as formulas over measured times.

/// Mean and population standard deviation.
pub fn mean_std(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    Some((mean, var.sqrt()))
}

/// Paper 001's trade-off between throughput and fairness: the makespan of a
/// set of jobs over the standard deviation of their completion times
/// (higher is better). `None` when it is not defined: fewer than two jobs,
/// or all completion times equal (the ratio would be infinite).
pub fn fairness(makespan_s: f64, completion_s: &[f64]) -> Option<f64> {
    if completion_s.len() < 2 {
        return None;
    }
    let (_, std) = mean_std(completion_s)?;
    (std > 0.0).then(|| makespan_s / std)
}

/// Paper 000 §4.1: the fraction of a time-shared run spent on switching,
/// taking the batch run of the same jobs as the time the work itself needs:
/// `(makespan - batch_makespan) / makespan`. 0.5 means as much time went to
/// switching as to computing. Negative when sharing beat batch (co-scheduling
/// overlapping one job's waiting with another's work).
pub fn switching_overhead(makespan_s: f64, batch_makespan_s: f64) -> Option<f64> {
    (makespan_s > 0.0).then(|| (makespan_s - batch_makespan_s) / makespan_s)
}
