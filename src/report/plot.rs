//! The comparison as a picture: bus bandwidth over message size, one line per pattern and run
//! (the first run dashed), as SVG.

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
/// atomically, only over a regular file or a new path (see [`super::output`]).
pub fn busbw_svg(c: &Comparison, title: &str, path: &Path) -> Result<(), String> {
    let mut svg = String::new();
    draw(c, title, &mut svg)?;
    super::output::write_atomic(path, svg.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn draw(c: &Comparison, title: &str, svg: &mut String) -> Result<(), String> {
    let points: Vec<&compare::Row> = c.rows.iter().filter(|r| r.size_bytes > 0).collect();
    if points.is_empty() {
        return Err("nothing to plot: the runs share no measured size above 0 bytes".into());
    }
    let x_min = points.iter().map(|r| r.size_bytes).min().unwrap_or(1) as f64;
    let x_max = points.iter().map(|r| r.size_bytes).max().unwrap_or(2) as f64;
    let y_max = points
        .iter()
        .map(|r| r.before_busbw.max(r.after_busbw))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.1;
    let root = SVGBackend::with_string(svg, (960, 600)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("cannot draw the chart: {e}");
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_min..x_max.max(x_min * 2.0)).log_scale(), 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc("bus bandwidth (GB/s)")
        .x_label_formatter(&|x| human_bytes(*x))
        .draw()
        .map_err(err)?;
    for (i, pattern) in compare::patterns(&c.rows).iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let of = |after: bool| -> Vec<(f64, f64)> {
            points
                .iter()
                .filter(|r| &r.pattern == pattern)
                .map(|r| {
                    let y = if after { r.after_busbw } else { r.before_busbw };
                    (r.size_bytes as f64, y)
                })
                .collect()
        };
        let before = of(false);
        chart
            .draw_series(DashedLineSeries::new(
                before.iter().copied(),
                6,
                4,
                colour.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("{pattern} (first run)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        chart
            .draw_series(LineSeries::new(of(true), colour.stroke_width(3)))
            .map_err(err)?
            .label(format!("{pattern} (second run)"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
            });
        let regressed = points
            .iter()
            .filter(|r| &r.pattern == pattern && r.regressed)
            .map(|r| Circle::new((r.size_bytes as f64, r.after_busbw), 5, RED.filled()));
        chart.draw_series(regressed).map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// 1024 → "1K", 1048576 → "1M", as nccl-tests' size flags read.
fn human_bytes(x: f64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (u, n) in units {
        if x >= n as f64 {
            return format!("{}{u}", (x / n as f64).round());
        }
    }
    format!("{}", x.round())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_the_size_flags() {
        assert_eq!(human_bytes(8.0), "8");
        assert_eq!(human_bytes(4096.0), "4K");
        assert_eq!(human_bytes((1u64 << 24) as f64), "16M");
        assert_eq!(human_bytes((1u64 << 31) as f64), "2G");
    }
}
