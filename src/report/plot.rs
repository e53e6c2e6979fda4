//! The comparison as a picture: bus bandwidth over message size, one line per pattern and run
//! (the first run dashed, hollow points; the second solid, filled points), each point the
//! median of the repeats with a bar over their range, regressed sizes ringed in red, as SVG.
//! The x axis is log2 of the size, ticked on powers of two in binary units.

use super::compare::{self, Comparison};
use plotters::prelude::*;
use std::path::Path;

/// Colours by pattern, in order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Writes `c` to `path` as an SVG chart titled `title`: drawn in memory, then written
/// atomically, only over a regular file or a new path (see [`super::atomic_file`]).
pub fn busbw_svg(c: &Comparison, title: &str, path: &Path) -> Result<(), String> {
    let mut svg = String::new();
    draw(c, title, &mut svg)?;
    super::atomic_file::write_atomic(path, svg.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn draw(c: &Comparison, title: &str, svg: &mut String) -> Result<(), String> {
    let points: Vec<&compare::Row> = c.rows.iter().filter(|r| r.size_bytes > 0).collect();
    if points.is_empty() {
        return Err("nothing to plot: the runs share no measured size above 0 bytes".into());
    }
    // x is log2 of the size, so ticks sit on powers of two and read in binary units.
    let log2 = |r: &compare::Row| (r.size_bytes as f64).log2();
    let x_min = points.iter().map(|r| log2(r)).fold(f64::INFINITY, f64::min);
    let x_max = points
        .iter()
        .map(|r| log2(r))
        .fold(f64::NEG_INFINITY, f64::max);
    let (x_lo, x_hi) = (x_min - 0.5, x_max.max(x_min + 1.0) + 0.5);
    let y_max = points
        .iter()
        .map(|r| r.before_busbw_range.1.max(r.after_busbw_range.1))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.15;
    let root = SVGBackend::with_string(svg, (960, 600)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("cannot draw the chart: {e}");
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_lo..x_hi, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("message size")
        .y_desc("bus bandwidth (GB/s): median, bar = range of the repeats")
        .x_labels(label_count(x_lo, x_hi))
        .x_label_formatter(&|x| {
            // Only whole powers of two are labelled.
            if x.fract().abs() < 1e-9 {
                human_bytes(x.exp2())
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(err)?;
    // The two runs' points sit a little apart so neither hides the other's.
    const NUDGE: f64 = 0.06;
    for (i, pattern) in compare::patterns(&c.rows).iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mine: Vec<&&compare::Row> = points.iter().filter(|r| &r.pattern == pattern).collect();
        for after in [false, true] {
            let dx = if after { NUDGE } else { -NUDGE };
            let line: Vec<(f64, f64)> = mine
                .iter()
                .map(|r| {
                    (
                        log2(r) + dx,
                        if after { r.after_busbw } else { r.before_busbw },
                    )
                })
                .collect();
            let bars = mine.iter().map(|r| {
                let (lo, hi) = if after {
                    r.after_busbw_range
                } else {
                    r.before_busbw_range
                };
                PathElement::new(vec![(log2(r) + dx, lo), (log2(r) + dx, hi)], colour)
            });
            chart.draw_series(bars).map_err(err)?;
            let series = if after {
                chart.draw_series(LineSeries::new(line.clone(), colour.stroke_width(3)))
            } else {
                chart.draw_series(DashedLineSeries::new(
                    line.clone(),
                    6,
                    4,
                    colour.stroke_width(2),
                ))
            }
            .map_err(err)?;
            series
                .label(format!(
                    "{pattern} ({} run)",
                    if after { "second" } else { "first" }
                ))
                .legend(move |(x, y)| {
                    // A sample in the series' own style: dashed first run, solid second.
                    let (width, gap) = if after { (3, 0) } else { (2, 3) };
                    let seg = |a: i32| {
                        PathElement::new(vec![(a, 0), (a + 8 - gap, 0)], colour.stroke_width(width))
                    };
                    EmptyElement::at((x, y)) + seg(0) + seg(8) + seg(16)
                });
            let marks = line.iter().map(|&p| {
                if after {
                    Circle::new(p, 3, colour.filled()).into_dyn()
                } else {
                    Circle::new(p, 3, colour.stroke_width(1)).into_dyn()
                }
            });
            chart.draw_series(marks).map_err(err)?;
        }
    }
    // Regressed sizes: a ring around the second run's point, drawn last so nothing covers it.
    let regressed: Vec<(f64, f64)> = points
        .iter()
        .filter(|r| r.regressed())
        .map(|r| (log2(r) + NUDGE, r.after_busbw))
        .collect();
    if !regressed.is_empty() {
        chart
            .draw_series(
                regressed
                    .iter()
                    .map(|&p| Circle::new(p, 8, RED.stroke_width(2))),
            )
            .map_err(err)?
            .label("regressed (beyond threshold and noise)")
            .legend(|(x, y)| Circle::new((x + 10, y), 6, RED.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// How many x labels to ask for over log2 sizes `lo..hi`: no more than one per power of two
/// (so the axis's 1-2-5 steps land on whole powers), at most 12.
fn label_count(lo: f64, hi: f64) -> usize {
    ((hi - lo).floor() as usize).clamp(2, 12)
}

/// Sizes in binary units, as powers of two read: 1024 → "1 KiB", 1048576 → "1 MiB".
fn human_bytes(x: f64) -> String {
    super::table::binary_size(x.max(0.0).round() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_the_size_flags() {
        assert_eq!(human_bytes(8.0), "8 B");
        assert_eq!(human_bytes(4096.0), "4 KiB");
        assert_eq!(human_bytes((1u64 << 24) as f64), "16 MiB");
        assert_eq!(human_bytes((1u64 << 31) as f64), "2 GiB");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
    }

    #[test]
    fn labels_are_at_most_one_per_power_of_two() {
        assert_eq!(label_count(2.5, 7.5), 5);
        assert_eq!(label_count(2.5, 30.5), 12);
        assert_eq!(label_count(2.5, 3.5), 2);
    }
}
