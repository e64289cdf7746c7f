//! Aggregate state: what COUNT, SUM, AVG, MIN, MAX, ARRAY_AGG and the statistical aggregates keep per group.
//!
//! Rules as Couchbase's: MISSING and NULL inputs are ignored by every aggregate except COUNT(*) (and ARRAY_AGG,
//! which keeps NULLs); SUM and AVG ignore non-numbers (COUNTN counts numbers); over no values SUM, AVG, MIN, MAX
//! and ARRAY_AGG give NULL and COUNT gives 0; DISTINCT aggregates see each value once.

use std::collections::HashSet;

use crate::functions::Aggregate;
use crate::value::{collate, Number, Value};

/// The running state of one aggregate in one group.
pub(crate) struct AggState {
    func: Aggregate,
    distinct: Option<HashSet<Value>>,
    count: u64,
    sum: Option<Number>,
    /// For the statistical aggregates: every numeric value (MEDIAN needs them all).
    numbers: Vec<f64>,
    best: Option<Value>,
    items: Vec<Value>,
}

impl AggState {
    pub fn new(func: Aggregate, distinct: bool) -> AggState {
        AggState {
            func,
            distinct: distinct.then(HashSet::new),
            count: 0,
            sum: None,
            numbers: Vec::new(),
            best: None,
            items: Vec::new(),
        }
    }

    /// Adds one input value (`None` for COUNT(*)'s row); returns the bytes it now holds in addition.
    pub fn add(&mut self, v: Option<Value>) -> usize {
        let Some(v) = v else {
            self.count += 1;
            return 0;
        };
        let keeps_null = self.func == Aggregate::ArrayAgg;
        if v.is_missing() || (v.is_null() && !keeps_null) {
            return 0;
        }
        let mut held = 0;
        if let Some(seen) = &mut self.distinct {
            if seen.contains(&v) {
                return 0;
            }
            held += v.size_estimate();
            seen.insert(v.clone());
        }
        match self.func {
            Aggregate::Count => self.count += 1,
            Aggregate::CountN => {
                if v.as_number().is_some() {
                    self.count += 1;
                }
            }
            Aggregate::Sum | Aggregate::Avg => {
                if let Some(n) = v.as_number() {
                    self.sum = Some(self.sum.map_or(n, |s| s.add(n)));
                    self.count += 1;
                }
            }
            Aggregate::Min => {
                if self.best.as_ref().is_none_or(|b| collate(&v, b).is_lt()) {
                    self.best = Some(v);
                }
            }
            Aggregate::Max => {
                if self.best.as_ref().is_none_or(|b| collate(&v, b).is_gt()) {
                    self.best = Some(v);
                }
            }
            Aggregate::ArrayAgg => {
                held += v.size_estimate();
                self.items.push(v);
            }
            _ => {
                if let Some(f) = v.as_f64() {
                    held += 8;
                    self.numbers.push(f);
                }
            }
        }
        held
    }

    /// The aggregate's value.
    pub fn result(self) -> Value {
        match self.func {
            Aggregate::Count | Aggregate::CountN => Value::int(self.count as i64),
            Aggregate::Sum => self.sum.map_or(Value::Null, Value::Number),
            Aggregate::Avg => match self.sum {
                Some(s) if self.count > 0 => Value::float(s.to_f64() / self.count as f64),
                _ => Value::Null,
            },
            Aggregate::Min | Aggregate::Max => self.best.unwrap_or(Value::Null),
            Aggregate::ArrayAgg => {
                if self.items.is_empty() {
                    Value::Null
                } else {
                    Value::array(self.items)
                }
            }
            Aggregate::Median => median(self.numbers),
            Aggregate::Variance | Aggregate::VarianceSamp => variance(&self.numbers, true),
            Aggregate::VariancePop => variance(&self.numbers, false),
            Aggregate::Stddev | Aggregate::StddevSamp => sqrt(variance(&self.numbers, true)),
            Aggregate::StddevPop => sqrt(variance(&self.numbers, false)),
        }
    }
}

fn median(mut xs: Vec<f64>) -> Value {
    if xs.is_empty() {
        return Value::Null;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    Value::float(if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 })
}

/// Sample (n − 1) or population (n) variance; one value's sample variance is 0, as Couchbase reports it.
fn variance(xs: &[f64], sample: bool) -> Value {
    let n = xs.len();
    if n == 0 {
        return Value::Null;
    }
    if n == 1 {
        return Value::int(0);
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    Value::float(ss / if sample { (n - 1) as f64 } else { n as f64 })
}

fn sqrt(v: Value) -> Value {
    match v.as_f64() {
        Some(f) => Value::float(f.sqrt()),
        None => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(func: Aggregate, distinct: bool, vals: &[Value]) -> Value {
        let mut s = AggState::new(func, distinct);
        for v in vals {
            s.add(Some(v.clone()));
        }
        s.result()
    }

    #[test]
    fn aggregates_ignore_missing_and_null_and_give_null_over_nothing() {
        // Proves the MISSING/NULL rules and the empty-input results.
        let vals = [Value::int(3), Value::Null, Value::Missing, Value::int(1), Value::string("x")];
        assert_eq!(run(Aggregate::Count, false, &vals), Value::int(3));
        assert_eq!(run(Aggregate::CountN, false, &vals), Value::int(2));
        assert_eq!(run(Aggregate::Sum, false, &vals), Value::int(4));
        assert_eq!(run(Aggregate::Avg, false, &vals), Value::float(2.0));
        assert_eq!(run(Aggregate::Min, false, &vals), Value::int(1));
        assert_eq!(run(Aggregate::Max, false, &vals), Value::string("x"));
        assert_eq!(run(Aggregate::Sum, false, &[]), Value::Null);
        assert_eq!(run(Aggregate::Count, false, &[]), Value::int(0));
        assert_eq!(run(Aggregate::ArrayAgg, false, &[Value::Null, Value::int(1)]).to_json_string(), "[null,1]");
    }

    #[test]
    fn distinct_aggregates_count_each_value_once() {
        // Proves COUNT(DISTINCT x) and SUM(DISTINCT x) with 1 and 1.0 being the same value.
        let vals = [Value::int(1), Value::float(1.0), Value::int(2)];
        assert_eq!(run(Aggregate::Count, true, &vals), Value::int(2));
        assert_eq!(run(Aggregate::Sum, true, &vals), Value::int(3));
    }

    #[test]
    fn statistics_match_their_definitions() {
        // Proves median, sample and population variance on a small set.
        let vals: Vec<Value> = [2, 4, 4, 4, 5, 5, 7, 9].iter().map(|&i| Value::int(i)).collect();
        assert_eq!(run(Aggregate::Median, false, &vals), Value::float(4.5));
        assert_eq!(run(Aggregate::VariancePop, false, &vals), Value::float(4.0));
        assert_eq!(run(Aggregate::StddevPop, false, &vals), Value::float(2.0));
    }
}
