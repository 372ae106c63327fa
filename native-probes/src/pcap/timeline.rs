//! The capture's clock as the analysis reads it: it never goes back.
//!
//! A capture's timestamps can go back. The host's clock is stepped (NTP, a virtual machine
//! resumed), files read as one capture overlap or repeat (the same file given twice), and
//! packets taken on several CPUs come a little out of time order. Read as they are, a flow
//! ends before it begins (a duration of −49.8 s, no rate) and an RTT sample is negative.
//!
//! Two cases, told apart by how far back a timestamp is:
//! - up to [`REORDER_NS`]: packets out of time order. The packet is read at the time of the
//!   latest before it, and the times after it as they are.
//! - further: a step of the clock. The packet is read at the latest time, and every time
//!   after it is moved on by the same step, so the capture reads on from where it was. The
//!   time that passed across the step is unknown and counts as none. Each step is kept
//!   ([`Timeline::take_steps`]) for the output to name.

/// Back by up to this much, a packet is out of time order; further, the clock was stepped.
/// Packets captured on several CPUs are out of order by microseconds; a stepped clock moves
/// by tens of milliseconds or more.
pub const REORDER_NS: i64 = 10_000_000;

/// Steps kept between two [`Timeline::take_steps`]; past that many they are only counted.
const STEPS_KEPT: usize = 10;

/// A step of the capture's clock back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The packet whose time went back (its number in the capture).
    pub packet: u64,
    /// How far back, ns.
    pub back_ns: i64,
}

#[derive(Debug, Default)]
pub struct Timeline {
    latest: Option<i64>,
    /// Added to every time read: the sum of the steps so far.
    offset: i64,
    steps: Vec<Step>,
    /// Steps past [`STEPS_KEPT`] since the last take.
    more_steps: u64,
    /// Packets read out of time order, and the furthest back, ns.
    pub reordered: u64,
    pub reordered_max_ns: i64,
}

impl Timeline {
    /// The time of packet `packet`, captured at `ts_ns`, as the analysis reads it.
    pub fn read(&mut self, packet: u64, ts_ns: i64) -> i64 {
        let t = ts_ns.saturating_add(self.offset);
        let Some(latest) = self.latest else {
            self.latest = Some(t);
            return t;
        };
        if t >= latest {
            self.latest = Some(t);
            return t;
        }
        let back = latest - t;
        if back <= REORDER_NS {
            self.reordered += 1;
            self.reordered_max_ns = self.reordered_max_ns.max(back);
        } else {
            self.offset = self.offset.saturating_add(back);
            if self.steps.len() < STEPS_KEPT {
                self.steps.push(Step {
                    packet,
                    back_ns: back,
                });
            } else {
                self.more_steps += 1;
            }
        }
        latest
    }

    /// The steps since the last call, and how many more there were past those kept.
    pub fn take_steps(&mut self) -> (Vec<Step>, u64) {
        (
            std::mem::take(&mut self.steps),
            std::mem::take(&mut self.more_steps),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn times_in_order_are_read_as_they_are() {
        let mut t = Timeline::default();
        let read: Vec<i64> = [5, 5, 7, 100].iter().map(|&x| t.read(1, x * MS)).collect();
        assert_eq!(read, [5 * MS, 5 * MS, 7 * MS, 100 * MS]);
        assert_eq!((t.reordered, t.take_steps()), (0, (vec![], 0)));
    }

    #[test]
    fn a_packet_out_of_order_is_read_at_the_latest_time_and_the_rest_as_they_are() {
        let mut t = Timeline::default();
        let read: Vec<i64> = [100, 98, 101, 102]
            .iter()
            .enumerate()
            .map(|(i, &x)| t.read(i as u64 + 1, x * MS))
            .collect();
        assert_eq!(read, [100 * MS, 100 * MS, 101 * MS, 102 * MS]);
        assert_eq!((t.reordered, t.reordered_max_ns), (1, 2 * MS));
        assert_eq!(t.take_steps(), (vec![], 0));
    }

    #[test]
    fn a_step_back_moves_every_later_time_on_by_the_step() {
        let mut t = Timeline::default();
        // 50 s back at the third packet, then on at the same pace as before.
        let read: Vec<i64> = [1000, 1001, 951, 952, 953]
            .iter()
            .enumerate()
            .map(|(i, &x)| t.read(i as u64 + 1, x * 1000 * MS))
            .collect();
        let s = 1000 * MS;
        assert_eq!(read, [1000 * s, 1001 * s, 1001 * s, 1002 * s, 1003 * s]);
        assert_eq!(
            t.take_steps(),
            (
                vec![Step {
                    packet: 3,
                    back_ns: 50 * s
                }],
                0
            )
        );
        assert_eq!(t.reordered, 0);
        // Taken: the next take has none.
        assert_eq!(t.take_steps(), (vec![], 0));
    }

    #[test]
    fn past_the_steps_kept_they_are_counted() {
        let mut t = Timeline::default();
        // The same second again and again (a file given 25 times): a step of 1 s at each
        // but the first.
        for i in 0..25u64 {
            t.read(2 * i + 1, 0);
            t.read(2 * i + 2, 1000 * MS);
        }
        let (steps, more) = t.take_steps();
        assert_eq!((steps.len() as u64 + more), 24);
        assert_eq!(steps.len(), STEPS_KEPT);
        assert!(steps.iter().all(|s| s.back_ns == 1000 * MS));
    }
}
